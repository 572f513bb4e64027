"""hami-quota-fit: the GPU workloads a stack declares fit the ResourceQuotas it registers.

Why: a namespace's GPU quota smaller than the workloads the same stack puts there is refused only
at runtime, pod by pod: HAMi's webhook denies a pod "exceeding resource quota" (HAMi v2.10.0
pkg/scheduler/webhook.go:114-115, ``fitResourceQuota``) and Kubernetes' quota admission refuses
the ``requests.nvidia.com/gpu`` overflow, so a Deployment then runs with fewer replicas than it
declares and nothing in ``pulumi up`` says so.

Counted as HAMi counts (``fitResourceQuota``, webhook.go:145-190): per pod, every card of every
app container adds its ``gpumem`` and ``gpucores`` (``Memreq x Nums``, ``Coresreq x Nums``), init
containers count as the largest one (they run one after another), and the pod's total is the
larger of the two; HAMi compares ``used + request`` with the quota's
``limits.nvidia.com/gpumem`` / ``limits.nvidia.com/gpucores`` (pkg/device/quota.go:62-95).
Kubernetes counts ``requests.nvidia.com/gpu`` the same way (a pod's effective request is
max(sum of app containers, largest init container)). Every pod of a workload counts: replicas,
Job parallelism, custom resources' replicas (``kube.pod_specs``); a DaemonSet counts as one pod (a
lower bound: its pods are per node). A ``gpumem-percentage`` request counts no memory, as in HAMi
(its ``Memreq`` is 0 at admission).

The pods are the ones ``hami-capacity-fit`` reads (``capacity.gpu_pods``); unknowns (preview)
leave a namespace unjudged.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpu_platform_policies.capacity import GpuPod, gpu_pods
from gpu_platform_policies.common import Violation
from gpu_platform_policies.model import Resource, Stack, Tenant
from gpu_platform_policies.props import UNKNOWN, contains_unknown, get, whole_number

RESOURCE_QUOTA_TYPE: Final = "kubernetes:core/v1:ResourceQuota"
DEFAULT_NAMESPACE: Final = "default"
QUOTA_KEYS: Final = {
    "limits.nvidia.com/gpumem": "memory",
    "limits.nvidia.com/gpucores": "cores",
    "requests.nvidia.com/gpu": "cards",
}
_UNITS: Final = {"memory": "MiB of gpumem", "cores": "% of gpucores", "cards": "cards"}


@dataclass(frozen=True)
class PodUse:
    """What one pod counts against a quota."""

    memory: int
    cores: int
    cards: int

    def times(self, count: int) -> PodUse:
        return PodUse(self.memory * count, self.cores * count, self.cards * count)


def pod_use(pod: GpuPod) -> PodUse:
    """One pod's gpumem, gpucores and cards as HAMi's ``fitResourceQuota`` counts them."""
    app = [0, 0, 0]
    init = [0, 0, 0]
    for container in pod.containers:
        memory = sum(r.memreq * r.nums for r in container.requests)
        cores = sum(r.coresreq * r.nums for r in container.requests)
        cards = sum(r.nums for r in container.requests)
        if container.init:
            init = [max(init[0], memory), max(init[1], cores), max(init[2], cards)]
        else:
            app = [app[0] + memory, app[1] + cores, app[2] + cards]
    return PodUse(max(app[0], init[0]), max(app[1], init[1]), max(app[2], init[2]))


def namespace_of(resource: Resource) -> Any:
    """``metadata.namespace`` (``default`` when absent, as the tenant providers set none)."""
    namespace = resource.namespace
    return DEFAULT_NAMESPACE if namespace is None else namespace


def _quota_limits(resource: Resource) -> dict[str, int] | None:
    hard = get(resource.props, "spec", "hard")
    if contains_unknown(hard):
        return None
    limits: dict[str, int] = {}
    if isinstance(hard, dict):
        for key, what in QUOTA_KEYS.items():
            value = whole_number(hard.get(key))
            if value is not None:
                limits[what] = value
    return limits


def check_quota(stack: Stack) -> list[Violation]:
    """All hami-quota-fit violations of a stack."""
    quotas: dict[tuple[Tenant, Any], list[tuple[Resource, dict[str, int]]]] = {}
    unknown: set[tuple[Tenant, Any]] = set()
    for resource in stack.of_type(RESOURCE_QUOTA_TYPE):
        key = (stack.tenant_of(resource), namespace_of(resource))
        limits = _quota_limits(resource)
        if limits is None or UNKNOWN in key:
            unknown.add(key)
            continue
        if limits:
            quotas.setdefault(key, []).append((resource, limits))
    if not quotas:
        return []
    uses: dict[tuple[Tenant, Any], list[tuple[GpuPod, PodUse, int]]] = {}
    for resource, pod in gpu_pods(stack):
        key = (stack.tenant_of(resource), namespace_of(resource))
        if pod is UNKNOWN or UNKNOWN in key:
            unknown.add(key)
            continue
        assert isinstance(pod, GpuPod)
        if pod.count is UNKNOWN:
            unknown.add(key)
            continue
        count = 1 if pod.count is None else int(pod.count)
        uses.setdefault(key, []).append((pod, pod_use(pod).times(count), count))
    violations: list[Violation] = []
    for key, found in quotas.items():
        if key in unknown or (key[0], UNKNOWN) in unknown or (UNKNOWN, key[1]) in unknown:
            continue
        pods = uses.get(key, [])
        if not pods:
            continue
        total = {
            "memory": sum(use.memory for _p, use, _c in pods),
            "cores": sum(use.cores for _p, use, _c in pods),
            "cards": sum(use.cards for _p, use, _c in pods),
        }
        tenant, namespace = key
        for quota, limits in found:
            for what, limit in limits.items():
                if total[what] <= limit:
                    continue
                parts = ", ".join(
                    f"{pod.describe()} {count} x {getattr(use, what) // max(count, 1)}"
                    for pod, use, count in pods
                    if getattr(use, what)
                )
                hard = next(k for k, v in QUOTA_KEYS.items() if v == what)
                who = f" of tenant {tenant}" if isinstance(tenant, str) else ""
                violations.append(
                    Violation(
                        f"{quota.describe()}{who}: the GPU workloads declared in namespace "
                        f"{namespace} need {total[what]} {_UNITS[what]} ({parts}; pods x per "
                        f"pod) and spec.hard.{hard} allows {limit}; HAMi's webhook would refuse "
                        'the pods past it ("exceeding resource quota"). Raise the quota '
                        f"(gpuQuotas[].{_CONFIG_KEYS[what]} in the stack config) to at least "
                        f"{total[what]}, or lower the workloads' replicas or requests",
                        quota.urn,
                    )
                )
    return violations


_CONFIG_KEYS: Final = {"memory": "gpuMemoryMiB", "cores": "gpuCores", "cards": "gpus"}
