"""hami-scheduler-version: HAMi's kube-scheduler image matches the tenant's Kubernetes version.

Why (platform.md §3, pitfall 5): HAMi runs a stock kube-scheduler next to its extender; one of a
different minor than the tenant API server is a common HAMi failure. The chart key is
``scheduler.kubeScheduler.image.tag`` (2.10.0; the old ``imageTag`` no longer exists). The tenant's
version is the TenantControlPlane's ``spec.kubernetes.version`` or the KamajiControlPlane's
``spec.version``. Advisory in the lab, mandatory in prod: the level comes from the stack's policy
config file (the pack's default is mandatory).
"""

from __future__ import annotations

from typing import Final

from gpu_platform_policies.common import Violation
from gpu_platform_policies.kube import control_plane, is_hami_release, release_values
from gpu_platform_policies.model import Stack
from gpu_platform_policies.props import UNKNOWN, get

TAG_KEY: Final = "scheduler.kubeScheduler.image.tag"


def check_scheduler_version(stack: Stack) -> list[Violation]:
    """A violation for each HAMi release whose kube-scheduler tag is not its tenant's version.

    Releases whose tenant has no control plane in the stack, or whose versions are unknown, are
    not judged.
    """
    versions: dict[str, list[object]] = {}
    for resource in stack:
        cp = control_plane(resource)
        tenant = stack.tenant_of(resource)
        if cp is not None and isinstance(tenant, str):
            versions.setdefault(tenant, []).append(cp.version)
    violations: list[Violation] = []
    for release in stack:
        if not is_hami_release(release):
            continue
        tenant = stack.tenant_of(release)
        if not isinstance(tenant, str) or tenant not in versions:
            continue
        wanted = versions[tenant]
        if any(v is UNKNOWN for v in wanted):
            continue
        known = sorted({v for v in wanted if isinstance(v, str) and v})
        if not known:
            continue
        values = release_values(release)
        scheduler = get(values, "scheduler", "kubeScheduler")
        if scheduler is UNKNOWN or get(scheduler, "enabled") is False:
            continue
        tag = get(scheduler, "image", "tag")
        if tag is UNKNOWN:
            continue
        target = known[0]
        legacy = get(scheduler, "imageTag")
        note = (
            f" (scheduler.kubeScheduler.imageTag {legacy!r} is ignored by chart 2.10.0)"
            if isinstance(legacy, str)
            else ""
        )
        if not isinstance(tag, str) or not tag:
            violations.append(
                Violation(
                    f"{release.describe()} (HAMi of tenant {tenant}) does not pin {TAG_KEY}"
                    f"{note}; set it to the tenant's Kubernetes version {target} so HAMi's "
                    "kube-scheduler matches the API server",
                    release.urn,
                )
            )
        elif tag not in known:
            violations.append(
                Violation(
                    f"{release.describe()} (HAMi of tenant {tenant}): {TAG_KEY} is {tag} but the "
                    f"tenant runs Kubernetes {' / '.join(known)}; set {TAG_KEY} to {target} (one "
                    "version drives the control plane, the workers and HAMi's kube-scheduler)",
                    release.urn,
                )
            )
    return violations
