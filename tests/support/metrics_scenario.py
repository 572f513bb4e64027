"""Synthetic series in the exact shapes HAMi v2.10.0 exports, as the platform's agents label them.

Label sets are those of ``components.metrics.series.TRACED`` (HAMi's own declarations) plus what
the agent's relabelling adds (``tenant``, ``job``, ``instance``, ``source``). Values follow HAMi's
units: bytes from MiB (``mibToBytes``, cmd/scheduler/metrics.go), core shares in percent of a
card (``hami_vgpu_core_allocated_ratio``), SM utilization in percent
(``hami_container_device_utilization_ratio``).

The scenario: tenant-a runs three pods on one A100 (20000 MiB and 30 % each, each using 10000 MiB
and 15 %); tenant-b one pod on one of its two L4 cards (12000 MiB, 50 %; using 6000 MiB, 40 %).
Both have GPU quotas. The expected results in the tests are computed from these numbers by hand,
never by the rules under test.
"""

from __future__ import annotations

from dataclasses import dataclass

MIB = 1024 * 1024


@dataclass(frozen=True)
class Pod:
    tenant: str
    namespace: str
    name: str
    node: str
    card: str
    memory_mib: int
    cores_percent: int
    used_mib: int
    util_percent: int


PODS = (
    Pod("tenant-a", "ml", "train-0", "tenant-a-a100-0", "GPU-a100-0", 20000, 30, 10000, 15),
    Pod("tenant-a", "ml", "train-1", "tenant-a-a100-0", "GPU-a100-0", 20000, 30, 10000, 15),
    Pod("tenant-a", "ml", "train-2", "tenant-a-a100-0", "GPU-a100-0", 20000, 30, 10000, 15),
    Pod("tenant-b", "speech", "asr-0", "tenant-b-l4-0", "GPU-l4-0", 12000, 50, 6000, 40),
)
# tenant -> (node, card uuid, card memory MiB, pods sharing it)
CARDS = (
    ("tenant-a", "tenant-a-a100-0", "GPU-a100-0", 81920, 3),
    ("tenant-b", "tenant-b-l4-0", "GPU-l4-0", 23034, 1),
    ("tenant-b", "tenant-b-l4-0", "GPU-l4-1", 23034, 0),
)
# tenant -> (quota namespace, gpumem MiB, gpucores %)
QUOTAS = (("tenant-a", "ml", 65536, 100), ("tenant-b", "speech", 16384, 100))


def _labels(labels: dict[str, str]) -> str:
    return "{" + ",".join(f'{key}="{value}"' for key, value in labels.items()) + "}"


def _scraped(tenant: str, job: str, pod: str) -> dict[str, str]:
    return {"tenant": tenant, "job": job, "instance": pod, "source": job}


def scheduler_series() -> list[tuple[str, float]]:
    """(series, value) of the scheduler's per-container, per-card and quota families."""
    out: list[tuple[str, float]] = []
    sched = "hami-scheduler-7d9c5-abcde"
    for pod in PODS:
        labels = {
            "namespace": pod.namespace,
            "node": pod.node,
            "pod": pod.name,
            "container_index": "0",
            "device_uuid": pod.card,
            "zone": "vGPU",
            **_scraped(pod.tenant, "hami-scheduler", sched),
        }
        out.append((f"hami_vgpu_memory_allocated_bytes{_labels(labels)}", pod.memory_mib * MIB))
        out.append((f"hami_vgpu_core_allocated_ratio{_labels(labels)}", pod.cores_percent))
    for index, (tenant, node, card, memory, shared) in enumerate(CARDS):
        labels = {
            "node": node,
            "device_uuid": card,
            "device_index": str(index % 2),
            "device_type": "NVIDIA",
            "zone": "vGPU",
            **_scraped(tenant, "hami-scheduler", sched),
        }
        out.append((f"hami_gpu_memory_limit_bytes{_labels(labels)}", memory * MIB))
        out.append((f"hami_gpu_shared_count{_labels(labels)}", shared))
    for tenant, namespace, memory, cores in QUOTAS:
        for quota_name, limit in (("nvidia.com/gpumem", memory), ("nvidia.com/gpucores", cores)):
            labels = {
                "namespace": namespace,
                "quota_name": quota_name,
                "zone": "vGPU",
                **_scraped(tenant, "hami-scheduler", sched),
            }
            out.append((f"hami_resource_quota_limit{_labels(labels)}", limit))
    return out


def monitor_series() -> list[tuple[str, float]]:
    """(series, value) of the device plugin's vgpu-monitor per-container families."""
    out: list[tuple[str, float]] = []
    for pod in PODS:
        labels = {
            "namespace": pod.namespace,
            "pod": pod.name,
            "container": "main",
            "vdevice_index": "0",
            "device_uuid": pod.card,
            **_scraped(pod.tenant, "hami-device-plugin", f"hami-device-plugin-{pod.node}"),
        }
        out.append((f"hami_vgpu_memory_used_bytes{_labels(labels)}", pod.used_mib * MIB))
        out.append((f"hami_container_device_utilization_ratio{_labels(labels)}", pod.util_percent))
    return out


def all_series() -> list[tuple[str, float]]:
    return [*scheduler_series(), *monitor_series()]


def expected_per_tenant() -> dict[str, dict[str, float]]:
    """The per-tenant gauges the scenario should record, by hand: totals over the tenant's pods
    in HAMi's units, then converted (MiB -> GiB: / 1024; percent of a card -> cards: / 100)."""
    result: dict[str, dict[str, float]] = {}
    for tenant in sorted({pod.tenant for pod in PODS}):
        pods = [pod for pod in PODS if pod.tenant == tenant]
        result[tenant] = {
            "mem_alloc": sum(pod.memory_mib for pod in pods) / 1024,
            "mem_used": sum(pod.used_mib for pod in pods) / 1024,
            "core_alloc": sum(pod.cores_percent for pod in pods) / 100,
            "core_used": sum(pod.util_percent for pod in pods) / 100,
            "mem_quota": sum(q[2] for q in QUOTAS if q[0] == tenant) / 1024,
            "core_quota": sum(q[3] for q in QUOTAS if q[0] == tenant) / 100,
            "cards": sum(1 for card in CARDS if card[0] == tenant),
            "cards_shared": sum(1 for card in CARDS if card[0] == tenant and card[4] > 0),
        }
    return result
