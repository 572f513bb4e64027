"""Judges for the DRA cases (TC-22 … TC-25) of a ``gpuSharing: dra`` tenant: pure functions over
the API objects as plain dicts (what ``kube.list_raw`` returns and ``samples/dra.yaml`` holds).

What each judge relies on, traced at the pinned tags:

* **A claim from a template.** kube-controller-manager's resourceclaim controller creates the
  pod's claim named ``<pod>-<claim>-<random>`` with the pod as its controlling owner and the
  annotation ``resource.kubernetes.io/pod-claim-name`` (kubernetes v1.35.0
  pkg/controller/resourceclaim/controller.go:59-63, 644-679), and records the name in the pod's
  ``status.resourceClaimStatuses`` (k8s.io/api v0.35.0 core/v1/types.go:4500, 5398).
* **Allocated from the tenant's slices.** The scheduler writes ``status.allocation.devices
  .results[]`` (``request``, ``driver``, ``pool``, ``device``) and reserves the claim for the pod
  (``status.reservedFor``); each device is one a ResourceSlice of that driver and pool publishes
  (``spec.driver``, ``spec.pool.name``, ``spec.nodeName``, ``spec.devices[].name``; k8s.io/api
  v0.35.0 resource/v1/types.go). dra-example-driver v0.4.0 publishes one pool per node, named
  after the node, of whole cards ``gpu-<i>`` (internal/profiles/gpu/gpu.go:171-181, 198-204).
* **Refused by the DRA plugin.** When no node can allocate the pod's claims, the plugin's Filter
  answers ``cannot allocate all claims`` for each node (kubernetes v1.35.0
  pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:714-716: the allocator
  found no devices and returned none, k8s.io/dynamic-resource-allocation v0.35.0
  structured/internal/incubating/allocator_incubating.go:273-292). kube-scheduler writes it as
  ``0/<n> nodes are available: <k> cannot allocate all claims.`` followed by the PostFilter
  plugins' text (pkg/scheduler/framework/types.go:783-857; the DRA plugin's "still not
  schedulable" and DefaultPreemption's "preemption: …", framework/runtime/framework.go:1092-1122,
  not judged), into a Warning
  ``FailedScheduling`` event and the pod's ``PodScheduled=False`` condition, reason
  ``Unschedulable`` (pkg/scheduler/schedule_one.go:1108-1116; the reason :1045-1047).
* **Seen in the container.** dra-example-driver v0.4.0's kubelet plugin writes a CDI spec per
  claim whose edits set, for each allocated device ``gpu-<i>``, ``GPU_DEVICE_<I>=gpu-<i>``
  (internal/profiles/gpu/gpu.go:312-314, 333-338; the default config adds
  ``GPU_DEVICE_<I>_SHARING_STRATEGY`` and ``_TIMESLICE_INTERVAL``, :340-351) and
  ``GPU_DEVICE_GPU_<I>_RESOURCE_CLAIM=<claim uid>`` (the profile ``gpu`` upper-cased, the device
  name with each run of characters other than letters and digits as ``_``:
  cmd/dra-example-kubeletplugin/cdi.go:34, 96-102), and a
  common spec with ``DRA_RESOURCE_DRIVER_NAME=<driver>`` (cdi.go:58-70).
* **Cleanup.** Once the pod is gone, the resourceclaim controller clears the claim's
  reservation and allocation (controller.go:843-872); it deletes a generated claim itself only
  while its pod still exists and is done (:902-925): for a deleted pod the garbage collector
  removes it, the pod being its controlling owner.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from tests.acceptance.hami_evidence import Verdict

POD_CLAIM_ANNOTATION = "resource.kubernetes.io/pod-claim-name"  # controller.go:59-63
DRA_REASON = "cannot allocate all claims"  # dynamicresources.go:716
FAILED_SCHEDULING = "FailedScheduling"  # schedule_one.go:1109
UNSCHEDULABLE = "Unschedulable"  # core/v1 PodReasonUnschedulable
_COMBINED = "(combined from similar events): "
# pkg/scheduler/framework/types.go:784, 807-857: "0/<n> nodes are available:" then the filter
# histogram ("<count> <reason>" sorted, joined with ", ", ended by "."), then PostFilter's text.
_FIT_ERROR = re.compile(r"^0/(?P<nodes>\d+) nodes are available: (?P<rest>.*)$", re.S)
_HISTOGRAM_ITEM = re.compile(r"^(?P<count>\d+) (?P<reason>.+)$", re.S)
_NON_WORD = re.compile(r"[^a-zA-Z0-9]+")  # cdi.go:34 nonWord
CDI_CLASS = "gpu"  # the kubelet plugin's --profile (state.go:97 passes it as the CDI class)


@dataclass(frozen=True)
class Device:
    """One allocated device: a result of ``status.allocation.devices.results``."""

    driver: str
    pool: str
    device: str
    request: str
    admin: bool = False  # adminAccess: reaches the device without holding it (types.go:1626-1636)

    def key(self) -> tuple[str, str, str]:
        return (self.driver, self.pool, self.device)

    def describe(self) -> str:
        return f"{self.driver}/{self.pool}/{self.device}"


def _get(obj: Mapping[str, Any] | None, *path: str) -> Any:
    current: Any = obj
    for step in path:
        if not isinstance(current, Mapping):
            return None
        current = current.get(step)
    return current


def allocated_devices(claim: Mapping[str, Any]) -> list[Device]:
    """The devices a ResourceClaim holds (empty when it is not allocated)."""
    results = _get(claim, "status", "allocation", "devices", "results") or []
    return [
        Device(
            str(r.get("driver", "")),
            str(r.get("pool", "")),
            str(r.get("device", "")),
            str(r.get("request", "")),
            r.get("adminAccess") is True,
        )
        for r in results
        if isinstance(r, Mapping)
    ]


def published_devices(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], str]:
    """(driver, pool, device) -> the node of the slice that publishes it ("" for none)."""
    found: dict[tuple[str, str, str], str] = {}
    for item in slices:
        spec = item.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = str(_get(spec, "pool", "name") or "")
        node = str(spec.get("nodeName") or "")
        for device in spec.get("devices") or []:
            found[(driver, pool, str(device.get("name", "")))] = node
    return found


def claim_name_of(pod: Mapping[str, Any], pod_claim: str) -> str | None:
    """The ResourceClaim made for the pod's ``pod_claim`` entry
    (``status.resourceClaimStatuses``)."""
    for entry in _get(pod, "status", "resourceClaimStatuses") or []:
        if entry.get("name") == pod_claim:
            return entry.get("resourceClaimName")
    return None


def _owned_by(claim: Mapping[str, Any], pod: Mapping[str, Any]) -> bool:
    uid = _get(pod, "metadata", "uid")
    return any(
        o.get("kind") == "Pod" and o.get("uid") == uid and o.get("controller")
        for o in _get(claim, "metadata", "ownerReferences") or []
    )


def judge_allocation(
    pod: Mapping[str, Any],
    claim: Mapping[str, Any] | None,
    slices: Sequence[Mapping[str, Any]],
    *,
    pod_claim: str,
    driver: str,
    cards: int,
) -> Verdict:
    """TC-22: the pod runs and its generated claim holds ``cards`` distinct devices of
    ``driver`` that the slices of the pod's node publish, reserved for this pod."""
    verdict = Verdict()
    name = _get(pod, "metadata", "name")
    phase = _get(pod, "status", "phase")
    node = _get(pod, "spec", "nodeName") or ""
    verdict.facts.update({"pod": name, "phase": phase, "node": node})
    if phase != "Running":
        verdict.problems.append(f"{name} is {phase or 'without a phase'}, not Running")
    claim_name = claim_name_of(pod, pod_claim)
    verdict.facts["claim"] = claim_name
    if claim_name is None:
        verdict.problems.append(f"{name} has no status.resourceClaimStatuses entry {pod_claim!r}")
        return verdict
    if claim is None or _get(claim, "metadata", "name") != claim_name:
        verdict.problems.append(f"claim {claim_name} of {name} was not found")
        return verdict
    if not _owned_by(claim, pod):
        verdict.problems.append(f"claim {claim_name} is not controlled by pod {name}")
    if _get(claim, "metadata", "annotations", POD_CLAIM_ANNOTATION) != pod_claim:
        verdict.problems.append(f"claim {claim_name} lacks {POD_CLAIM_ANNOTATION}={pod_claim}")
    devices = allocated_devices(claim)
    verdict.facts["devices"] = [d.describe() for d in devices]
    if not devices:
        verdict.problems.append(f"claim {claim_name} is not allocated")
        return verdict
    if len(devices) != cards or len({d.key() for d in devices}) != cards:
        verdict.problems.append(
            f"claim {claim_name} holds {len({d.key() for d in devices})} distinct device(s), "
            f"asked {cards}"
        )
    published = published_devices(slices)
    for device in devices:
        if device.driver != driver:
            verdict.problems.append(f"{device.describe()} is not a {driver} device")
        elif device.key() not in published:
            verdict.problems.append(f"{device.describe()} is in no ResourceSlice of the tenant")
        elif published[device.key()] != node:
            verdict.problems.append(
                f"{device.describe()} is published by {published[device.key()] or 'no node'}, "
                f"the pod runs on {node or 'no node'}"
            )
    reserved = [r.get("uid") for r in _get(claim, "status", "reservedFor") or []]
    if _get(pod, "metadata", "uid") not in reserved:
        verdict.problems.append(f"claim {claim_name} is not reserved for {name}")
    return verdict


def fit_error_reasons(message: str) -> tuple[int, dict[str, int]] | None:
    """``(nodes, {reason: count})`` of kube-scheduler's FitError text, the filter histogram
    only (the PostFilter text after it is not a node's answer); None when not that format."""
    text = message.removeprefix(_COMBINED)
    matched = _FIT_ERROR.match(text)
    if matched is None:
        return None
    # The histogram ends at the first ". " or "." at the end; the reasons hold no ". ".
    histogram = matched.group("rest").split(". ", 1)[0].rstrip(".")
    reasons: dict[str, int] = {}
    for item in re.split(r", (?=\d+ )", histogram):
        part = _HISTOGRAM_ITEM.match(item.strip())
        if part is None:
            return int(matched.group("nodes")), {item.strip(): 0}
        reasons[part.group("reason")] = reasons.get(part.group("reason"), 0) + int(
            part.group("count")
        )
    return int(matched.group("nodes")), reasons


def judge_refusal(
    pod: Mapping[str, Any], events: Sequence[Mapping[str, Any]], *, nodes: int
) -> Verdict:
    """TC-23: the pod stays Pending, unbound, and kube-scheduler says for every one of the
    tenant's ``nodes`` the DRA plugin's own reason and nothing else, in the PodScheduled
    condition and in a Warning FailedScheduling event."""
    verdict = Verdict()
    name = _get(pod, "metadata", "name")
    phase = _get(pod, "status", "phase")
    verdict.facts.update({"pod": name, "phase": phase})
    if phase != "Pending" or _get(pod, "spec", "nodeName"):
        verdict.problems.append(
            f"{name} is {phase or 'without a phase'} on {_get(pod, 'spec', 'nodeName') or '-'}, "
            "not Pending unbound"
        )
    scheduled = next(
        (c for c in _get(pod, "status", "conditions") or [] if c.get("type") == "PodScheduled"),
        None,
    )
    texts: list[tuple[str, str]] = []
    if scheduled is None or scheduled.get("status") != "False":
        verdict.problems.append(f"{name} has no PodScheduled=False condition")
    else:
        if scheduled.get("reason") != UNSCHEDULABLE:
            verdict.problems.append(
                f"PodScheduled reason is {scheduled.get('reason')!r}, not {UNSCHEDULABLE}"
            )
        texts.append(("PodScheduled", str(scheduled.get("message", ""))))
    warnings = [
        e for e in events if e.get("type") == "Warning" and e.get("reason") == FAILED_SCHEDULING
    ]
    if not warnings:
        verdict.problems.append(f"no Warning {FAILED_SCHEDULING} event for {name}")
    else:
        texts.append((FAILED_SCHEDULING, str(warnings[-1].get("message", ""))))
    verdict.facts["messages"] = dict(texts)
    for where, text in texts:
        parsed = fit_error_reasons(text)
        if parsed is None:
            verdict.problems.append(f"{where} is not kube-scheduler's fit error: {text!r}")
            continue
        total, reasons = parsed
        if total != nodes:
            verdict.problems.append(f"{where} counts {total} nodes, the tenant has {nodes}")
        if reasons != {DRA_REASON: nodes}:
            verdict.problems.append(
                f"{where} says {reasons}, not '{DRA_REASON}' for all {nodes} node(s)"
            )
    return verdict


def parse_env(text: str) -> dict[str, str]:
    """``env`` output (``NAME=value`` lines) as a mapping; other lines are skipped."""
    found: dict[str, str] = {}
    for line in text.splitlines():
        name, sep, value = line.partition("=")
        if sep and re.fullmatch(r"[A-Za-z_][A-Za-z0-9_]*", name):
            found[name] = value
    return found


def _env_id(device: str) -> str:
    """gpu.go:312-314, 333: the device name without ``gpu-``, ``-`` as ``_``, upper case."""
    return device[4:].replace("-", "_").upper()


def visible_devices(printed: Mapping[str, str]) -> set[str]:
    """The devices the driver's CDI edits name: ``GPU_DEVICE_<ID>=gpu-…`` whose ID is the
    value's own (so ``GPU_DEVICE_0_SHARING_STRATEGY`` and the claim variables are not devices)."""
    return {
        value
        for name, value in printed.items()
        if value.startswith("gpu-") and name == f"GPU_DEVICE_{_env_id(value)}"
    }


def claim_variable(device: str) -> str:
    """cdi.go:34, 96-102: ``<CLASS>_DEVICE_<device, [^a-zA-Z0-9]+ as _, upper>_RESOURCE_CLAIM``."""
    return f"{CDI_CLASS.upper()}_DEVICE_{_NON_WORD.sub('_', device).upper()}_RESOURCE_CLAIM"


def judge_visibility(env_text: str, claim: Mapping[str, Any], *, driver: str) -> Verdict:
    """TC-24: the container sees exactly the claim's devices, each tagged with this claim."""
    verdict = Verdict()
    printed = parse_env(env_text)  # the container's, not this process's environment
    expected = {d.device for d in allocated_devices(claim) if d.driver == driver}
    seen = visible_devices(printed)
    uid = _get(claim, "metadata", "uid")
    verdict.facts.update({"allocated": sorted(expected), "visible": sorted(seen)})
    if not expected:
        verdict.problems.append("the claim holds no device of the driver: nothing to compare")
    if seen != expected:
        verdict.problems.append(
            f"the container sees {sorted(seen) or 'no device'}, the claim holds "
            f"{sorted(expected) or 'none'}"
        )
    for device in sorted(expected):
        variable = claim_variable(device)
        if printed.get(variable) != uid:
            verdict.problems.append(
                f"{variable} is {printed.get(variable)!r}, not the claim's {uid}"
            )
    if printed.get("DRA_RESOURCE_DRIVER_NAME") != driver:
        verdict.problems.append(
            f"DRA_RESOURCE_DRIVER_NAME is {printed.get('DRA_RESOURCE_DRIVER_NAME')!r}, not {driver}"
        )
    return verdict


def judge_cleanup(
    claim_name: str,
    claim_uid: str,
    devices: Sequence[Device],
    claims: Sequence[Mapping[str, Any]],
    *,
    claims_before: Sequence[Mapping[str, Any]],
) -> Verdict:
    """TC-25: after the pod is gone, its generated claim is gone (by name and uid) and no claim
    that held one of its devices before the deletion (``claims_before``: only the deleted claim
    should have) still holds it. Any other claim holding one was given the freed device
    (another replica's claim may have waited for it since before the deletion, so a claim's
    ``creationTimestamp`` says nothing here): recorded, not a failure."""
    verdict = Verdict()
    verdict.facts.update({"claim": claim_name, "devices": [d.describe() for d in devices]})
    wanted = {d.key() for d in devices}
    holders_before = {
        (claim.get("metadata") or {}).get("uid")
        for claim in claims_before
        if {d.key() for d in allocated_devices(claim)} & wanted
    } - {claim_uid}
    reused: list[str] = []
    if not devices:
        verdict.problems.append("no devices were recorded before deletion: nothing to check")
    for claim in claims:
        meta = claim.get("metadata") or {}
        where = f"{meta.get('namespace')}/{meta.get('name')}"
        if meta.get("uid") == claim_uid or meta.get("name") == claim_name:
            verdict.problems.append(f"claim {where} still exists after its pod was deleted")
            continue
        held = {d.key() for d in allocated_devices(claim)} & wanted
        if not held:
            continue
        what = ", ".join("/".join(k) for k in sorted(held))
        if meta.get("uid") in holders_before:
            verdict.problems.append(
                f"claim {where} held {what} beside the deleted claim before the deletion, and "
                "still does"
            )
        else:
            reused.append(f"{where} ({what})")
    verdict.facts["reallocatedTo"] = reused
    return verdict


@dataclass(frozen=True)
class DraPlan:
    """Where the DRA cases run: the first ``gpuSharing: dra`` tenant with workers, the cards a
    node publishes (the driver publishes the same number on each, docs/dra.md), and its
    nodes."""

    tenant: str
    cards_per_node: int
    nodes: int
    largest_card_mib: int

    @property
    def refused_memory_mib(self) -> int:
        """TC-23's request: one card with 1 MiB more memory than the tenant's largest card, so
        no node can allocate it whatever else holds cards. Not "more cards than a node has":
        the tenant's claim policy refuses that count at admission (``dra-card-count``), and the
        scheduler would never see it."""
        return self.largest_card_mib + 1

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "cardsPerNode": self.cards_per_node,
            "nodes": self.nodes,
            "largestCardMiB": self.largest_card_mib,
            "refusedMemoryMiB": self.refused_memory_mib,
        }


def plan_dra(platform: Any) -> DraPlan | None:
    """The DRA plan from the stack's config (None: no ``dra`` tenant with workers)."""
    for tenant in platform.tenants:
        if tenant.gpu_sharing != "dra" or not tenant.worker_pools:
            continue
        per_node = [
            sum(count for _, count in pool.resolved_cards()) for pool in tenant.worker_pools
        ]
        nodes = sum(pool.replicas for pool in tenant.worker_pools)
        largest = max(
            card.memory_mib for pool in tenant.worker_pools for card, _ in pool.resolved_cards()
        )
        return DraPlan(tenant.name, max(per_node), nodes, largest)
    return None


def free_devices(
    slices: Sequence[Mapping[str, Any]], claims: Sequence[Mapping[str, Any]], driver: str
) -> list[tuple[str, str, str]]:
    """The driver's published devices that no claim holds (TC-22's precondition)."""
    held = {d.key() for c in claims for d in allocated_devices(c)}
    return sorted(k for k in published_devices(slices) if k[0] == driver and k not in held)


_BINARY = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30, "Ti": 2**40}


def memory_mib(value: object) -> int | None:
    """A ResourceSlice's memory capacity (``80Gi``, ``81920Mi``, bytes) in MiB; None if the
    driver wrote another form (dra-example-driver v0.4.0 writes ``80Gi``, gpu.go:72-73)."""
    text = str(value)
    for suffix, factor in _BINARY.items():
        if text.endswith(suffix) and text[: -len(suffix)].isdigit():
            return int(text[: -len(suffix)]) * factor // 2**20
    return int(text) // 2**20 if text.isdigit() else None


def dra_granted(
    claims: Sequence[Mapping[str, Any]], slices: Sequence[Mapping[str, Any]], driver: str
) -> tuple[int, int]:
    """TC-18 for a ``dra`` tenant: (MiB, percent of a card) its claims hold, counted from the
    API objects: each allocated device of ``driver`` is a whole card (100 %, the only DRA
    allocation at v1.35's default gates) with the memory its slice publishes; an adminAccess
    result holds nothing (as the exporter, components/metrics/dra_claims.py, bills)."""
    memory: dict[tuple[str, str, str], int] = {}
    for item in slices:
        spec = item.get("spec") or {}
        for device in spec.get("devices") or []:
            key = (str(spec.get("driver")), str(_get(spec, "pool", "name")), str(device["name"]))
            mib = memory_mib(_get(device, "capacity", "memory", "value"))
            memory[key] = mib or 0
    held = [d for c in claims for d in allocated_devices(c) if d.driver == driver and not d.admin]
    return sum(memory.get(d.key(), 0) for d in held), 100 * len(held)
