"""Which Kubernetes versions a tenant may run, and which upgrades between them are allowed.

Pure data and functions: the config models check a version against ``released_versions``, the
lab against ``kind_versions`` too, and a preview checks an upgrade with ``upgrade_problem``.

What bounds a tenant version (traced at the pins of ``components.versions``):

* **Kamaji 26.8.2-edge** refuses a TenantControlPlane whose minor is above its kubeadm's,
  ``KubeadmVersion = "v1.36.0"`` (clastix/kamaji 26.8.2-edge internal/upgrade/kubeadm_version.go:7,
  compared with the patch zeroed in internal/webhook/handlers/tcp_version.go:27-41), and on an
  update refuses a downgrade and a jump of more than one minor (tcp_version.go:86-93; its
  reconciler again in internal/resources/kubeadm_upgrade.go:122-145; a patch change is allowed
  both ways by the webhook, upwards only here). It sets no floor.
* **The Kamaji CAPI provider v0.20.0** (prod) copies ``KamajiControlPlane.spec.version`` into the
  TenantControlPlane (controllers/kamajicontrolplane_controller_tcp.go:82-87), so Kamaji's webhook
  judges it; it has no webhook of its own.
* **kind v0.31.0** (lab) publishes node images for exactly five versions, which the lab's workers
  must run ("Images pre-built for this release" in the v0.31.0 release notes; the default one is
  also pkg/apis/config/defaults/image.go:21). kind guarantees an image built for its release only
  by digest, so the digests are pinned here.
* **HAMi v2.10.0**'s scheduler pod runs ``registry.k8s.io/kube-scheduler:<tag>``, the tag the
  program sets to the tenant version (charts/hami/templates/_helpers.tpl:100-110
  ``resolvedKubeSchedulerTag``; without it the chart takes the API server's version). Its
  scheduler config needs ``kubescheduler.config.k8s.io/v1`` above minor 25
  (templates/scheduler/configmap.yaml:12-18) and HAMi asks for Kubernetes >= 1.23 (README.md:100).
  registry.k8s.io publishes one kube-scheduler (and kube-proxy) tag per Kubernetes release, and
  its tags cannot be listed offline: ``RELEASED_PATCHES`` pins, per minor, the highest patch
  release a pinned upstream names (sources next to each entry). Kubernetes numbers patch releases
  consecutively, so every patch up to that one exists; a later patch is refused until it is added
  here with its source.

The floor, v1.31, is the oldest minor kind v0.31.0 still publishes an image for; older minors are
past their upstream support and nothing pinned here tests them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType

from components.versions import KIND_NODE_DIGESTS, PINNED

KAMAJI_KUBEADM_VERSION = f"v1.{PINNED.kamaji_max_tenant_minor}.0"
MINIMUM_MINOR = 31

# Highest released patch per minor, each with the pinned source that names it.
RELEASED_PATCHES: Mapping[int, int] = MappingProxyType(
    {
        # kind v0.31.0 release notes (also cluster-api v1.13.5 test data).
        31: 14,
        32: 11,
        # cluster-api v1.13.5 docs/book/src/user/troubleshooting.md:279-284 (kubeadm join fix).
        33: 12,
        34: 8,
        # clastix/kamaji 26.8.2-edge api/v1alpha1/tenantcontrolplane_const.go:12
        # (DefaultKubernetesVersion, its e2e version).
        35: 7,
        # clastix/kamaji 26.8.2-edge go.mod:39 (k8s.io/kubernetes v1.36.3, its kubeadm library).
        36: 3,
    }
)

_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")


@dataclass(frozen=True, order=True)
class Version:
    """A Kubernetes release ``v1.<minor>.<patch>``."""

    minor: int
    patch: int

    @classmethod
    def parse(cls, text: str) -> Version:
        match = _VERSION.match(text)
        if match is None:
            raise ValueError(f"{text!r} is not a Kubernetes version: write it like v1.35.0")
        return cls(int(match.group(1)), int(match.group(2)))

    def __str__(self) -> str:
        return f"v1.{self.minor}.{self.patch}"


def kamaji_max_minor() -> int:
    """The highest minor the pinned Kamaji accepts."""
    return Version.parse(KAMAJI_KUBEADM_VERSION).minor


def released_versions() -> list[str]:
    """Every tenant version the platform accepts: a released patch of a minor between the
    floor and Kamaji's maximum, oldest first."""
    return [
        str(Version(minor, patch))
        for minor in range(MINIMUM_MINOR, kamaji_max_minor() + 1)
        for patch in range(RELEASED_PATCHES.get(minor, -1) + 1)
    ]


def kind_versions() -> list[str]:
    """The versions the pinned kind release publishes a node image for, oldest first."""
    return sorted(KIND_NODE_DIGESTS, key=Version.parse)


def nearest(wanted: str, allowed: Sequence[str], count: int = 2) -> list[str]:
    """The ``count`` allowed versions next to ``wanted`` in version order (the one just below and
    the one just above it, or the closest ones at either end)."""
    ordered = sorted(allowed, key=Version.parse)
    target = Version.parse(wanted)
    cut = sum(1 for v in ordered if Version.parse(v) < target)
    start = min(max(cut - count // 2, 0), max(len(ordered) - count, 0))
    return ordered[start : start + count]


def version_problem(
    wanted: str, allowed: Sequence[str], what: str, suggest_from: Sequence[str] | None = None
) -> str | None:
    """Why ``wanted`` is not one of ``allowed`` (what they are: ``what``), naming the nearest
    allowed versions (the nearest of ``suggest_from`` where given: what the rest of the stack's
    checks also accept, so the hint is never refused next); None when it is."""
    version = Version.parse(wanted)
    if wanted in allowed:
        return None
    if version.minor > kamaji_max_minor():
        reason = (
            f"is above what Kamaji accepts (v1.{kamaji_max_minor()}, its kubeadm "
            f"{KAMAJI_KUBEADM_VERSION})"
        )
    elif version.minor < MINIMUM_MINOR:
        reason = f"is below the oldest supported minor (v1.{MINIMUM_MINOR})"
    else:
        reason = f"is not {what}"
    candidates = [v for v in (suggest_from or allowed) if v in allowed] or allowed
    return f"{wanted} {reason}: pick {' or '.join(nearest(wanted, candidates))}"


def upgrade_problem(previous: str, wanted: str, allowed: Sequence[str]) -> str | None:
    """Why a control plane running ``previous`` may not move to ``wanted`` (Kubernetes'
    version-skew policy and Kamaji's webhook: no downgrade, one minor at a time; a patch upgrade
    and no change are fine), naming the allowed next versions; None when it may."""
    old, new = Version.parse(previous), Version.parse(wanted)
    if new >= old and new.minor - old.minor <= 1:
        return None
    later = [
        v for v in allowed if old < Version.parse(v) and Version.parse(v).minor <= old.minor + 1
    ]
    advice = (
        f"the allowed next versions are {', '.join(later)}"
        if later
        else f"no later version is allowed yet: keep {previous}"
    )
    if new < old:
        return (
            f"{wanted} would downgrade the control plane from {previous} (Kamaji refuses a "
            f"downgrade); keep {previous} or upgrade: {advice}"
        )
    return (
        f"{wanted} is {new.minor - old.minor} minors above the running {previous}: a control "
        f"plane moves one minor at a time; {advice}"
    )


def kamaji_update_problem(declared: str, wanted: str, running: str | None) -> str | None:
    """Why Kamaji's version webhook will refuse moving a control plane whose spec declares
    ``declared`` (running ``running``, None when unknown) to ``wanted``, with what to do instead;
    None when it accepts.

    The webhook judges the old *spec* against the new one, both with the patch zeroed, not the
    version running (clastix/kamaji 26.8.2-edge internal/webhook/handlers/tcp_version.go:59-96:
    ``:67-79`` parse and zero the patches, ``:89-90`` refuse a lower minor, ``:91-92`` a jump of
    more than one). So after an upgrade that never finished (spec v1.35, still running v1.34),
    going back to the running v1.34 is a downgrade to the webhook; ``upgrade_problem`` alone,
    comparing with the running version, would let that pass the preview."""
    old, new = Version.parse(declared), Version.parse(wanted)
    stuck = running is not None and running != declared
    spec = f"the control plane's spec, {declared}" + (
        f" (it still runs {running}: that upgrade has not finished)" if stuck else ""
    )
    if new.minor < old.minor:
        return (
            f"{wanted} would downgrade {spec}, and Kamaji's webhook refuses a lower minor than "
            f"the spec's (tcp_version.go:89-90): keep {declared} and let its rollout finish "
            "(docs/configuration.md, kubernetesVersion)"
        )
    if new.minor - old.minor > 1:
        return (
            f"{wanted} is {new.minor - old.minor} minors above {spec}; Kamaji's webhook moves "
            f"the spec one minor at a time (tcp_version.go:91-92): pick v1.{old.minor + 1}"
        )
    return None


def worker_skew_problem(control_plane: str, worker: str) -> str | None:
    """Why workers at ``worker`` may not join a control plane at ``control_plane``: a kubelet
    must not be newer than the API server, nor more than three minors older (Kubernetes'
    version-skew policy since v1.28)."""
    cp, node = Version.parse(control_plane), Version.parse(worker)
    if node.minor > cp.minor:
        return (
            f"workers at {worker} would be newer than the control plane ({control_plane}): "
            f"give them {control_plane} or an older minor"
        )
    if cp.minor - node.minor > 3:
        return (
            f"workers at {worker} would be {cp.minor - node.minor} minors older than the "
            f"control plane ({control_plane}); kubelets may be at most 3 minors older"
        )
    return None


# ------------------------------------------------------------------ Dynamic Resource Allocation
#
# What a tenant version's API server and scheduler allow a DRA tenant (``gpuSharing: dra``),
# traced at kubernetes v1.35.0 (pkg/features/kube_features.go):
#
# * ``DynamicResourceAllocation`` is GA and on by default from 1.34 (:1292-1296), and
#   ``resource.k8s.io/v1`` (DeviceClass, ResourceClaim, ResourceClaimTemplate, ResourceSlice) is
#   the version it serves; below 1.34 the feature is beta and off by default (:1294).
# * ``DRAConsumableCapacity`` (several claims sharing one device, each consuming part of its
#   capacity: ``Device.allowMultipleAllocations``, ``ExactDeviceRequest.capacity``,
#   ``DeviceConstraint.distinctAttribute``) is alpha and off by default from 1.34 with no later
#   entry at v1.35.0 (:1232-1234). With the gate off the API server silently drops those fields
#   (pkg/api/resourceclaimspec/util.go:131-150), so a fraction would become a whole card.
# * ``DRAPartitionableDevices`` (shared counters) is alpha and off by default from 1.33
#   (:1252-1254); nothing here uses it.
#
# The platform turns on no alpha gate in a tenant, and v1.36's gates are not traced here at a
# tag, so fractions are refused on every version the pins allow until they are.
DRA_GA_MINOR = 34
CONSUMABLE_CAPACITY_GATE = "DRAConsumableCapacity"
CONSUMABLE_CAPACITY_TRACED_THROUGH_MINOR = 35


def dra_problem(version: str) -> str | None:
    """Why a tenant at ``version`` cannot take ``gpuSharing: dra``; None when it can."""
    if Version.parse(version).minor < DRA_GA_MINOR:
        return (
            f"{version} serves no resource.k8s.io/v1 (DynamicResourceAllocation is GA from "
            f"v1.{DRA_GA_MINOR}); give the tenant v1.{DRA_GA_MINOR} or later, or keep "
            "gpuSharing: hami"
        )
    return None


def fractions_problem(version: str) -> str | None:
    """Why a DRA tenant at ``version`` cannot share one card between claims (a fraction);
    None when it can. No version the pins allow can yet (see above)."""
    minor = Version.parse(version).minor
    if minor <= CONSUMABLE_CAPACITY_TRACED_THROUGH_MINOR:
        return (
            f"sharing a card under DRA needs the {CONSUMABLE_CAPACITY_GATE} feature gate, alpha "
            f"and off by default at {version} (and the platform enables no alpha gate)"
        )
    return (
        f"sharing a card under DRA needs the {CONSUMABLE_CAPACITY_GATE} feature gate, whose "
        f"state at {version} is not traced here yet"
    )
