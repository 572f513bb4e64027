"""The chargeback recording rules the central Prometheus evaluates (docs/metrics.md, units).

Per tenant, every ``RULE_INTERVAL_SECONDS``:

* **allocated** — what HAMi's scheduler granted the tenant's running containers:
  ``hami_vgpu_memory_allocated_bytes`` (bytes per container and card) and
  ``hami_vgpu_core_allocated_ratio`` (percent of one card's compute, HAMi's
  ``nvidia.com/gpucores``), summed over every container of the tenant;
* **used** — what those containers used, from HAMi's vgpu-monitor in the device plugin:
  ``hami_vgpu_memory_used_bytes`` and ``hami_container_device_utilization_ratio`` (SM
  utilization, percent of one card);
* **quota** — the GPU ResourceQuota limits HAMi accounts (``hami_resource_quota_limit``).

Memory is recorded in GiB and compute in *cards* (100 % of one card's compute = 1), so a
rule's value integrated over time is GiB-hours or card-hours. The ``:hours1h`` rules integrate
the last hour: every sample of a gauge rule stands for one evaluation interval, so the sum of
an hour's samples times ``RULE_INTERVAL_SECONDS / 3600`` is the hour's integral (a tenant with no
allocation has no sample and adds nothing). ``scripts/usage.py`` integrates any window the same
way.
"""

from __future__ import annotations

from typing import Any

RULE_INTERVAL_SECONDS = 60
GIB = 1024**3

# recorded name -> expression (the gauges, per tenant)
MEMORY_ALLOCATED = "tenant:gpu_memory_allocated_gib:sum"
MEMORY_USED = "tenant:gpu_memory_used_gib:sum"
CORES_ALLOCATED = "tenant:gpu_cores_allocated_cards:sum"
CORES_USED = "tenant:gpu_cores_used_cards:sum"
MEMORY_QUOTA = "tenant:gpu_memory_quota_gib:sum"
CORES_QUOTA = "tenant:gpu_cores_quota_cards:sum"
CARDS = "tenant:gpu_cards:count"
CARDS_SHARED = "tenant:gpu_cards_shared:count"

# ``quota_name`` is the ResourceQuota key without ``limits.`` (HAMi v2.10.0
# pkg/device/quota.go:289-298 managedQuotaName; the program's quotas set
# limits.nvidia.com/gpumem in MiB and limits.nvidia.com/gpucores in percent of a card,
# components/tenant_specs.py resource_quota).
GAUGES: tuple[tuple[str, str], ...] = (
    (MEMORY_ALLOCATED, f"sum by (tenant) (hami_vgpu_memory_allocated_bytes) / {GIB}"),
    (CORES_ALLOCATED, "sum by (tenant) (hami_vgpu_core_allocated_ratio) / 100"),
    (MEMORY_USED, f"sum by (tenant) (hami_vgpu_memory_used_bytes) / {GIB}"),
    (CORES_USED, "sum by (tenant) (hami_container_device_utilization_ratio) / 100"),
    (
        MEMORY_QUOTA,
        'sum by (tenant) (hami_resource_quota_limit{quota_name="nvidia.com/gpumem"}) / 1024',
    ),
    (
        CORES_QUOTA,
        'sum by (tenant) (hami_resource_quota_limit{quota_name="nvidia.com/gpucores"}) / 100',
    ),
    (CARDS, "count by (tenant) (hami_gpu_memory_limit_bytes)"),
    (CARDS_SHARED, "count by (tenant) (hami_gpu_shared_count > 0)"),
)


def hours_name(gauge: str) -> str:
    """``tenant:gpu_memory_allocated_gib:sum`` becomes
    ``tenant:gpu_memory_allocated_gib_hours:hours1h``
    (the hour's integral of the gauge)."""
    level, metric, _ = gauge.split(":")
    return f"{level}:{metric}_hours:hours1h"


# The four chargeback quantities (allocated and used, memory and compute), integrated per hour.
CHARGED = (MEMORY_ALLOCATED, MEMORY_USED, CORES_ALLOCATED, CORES_USED)


def integral(gauge: str, window: str) -> str:
    """PromQL for ``gauge`` integrated over ``window`` (GiB-hours or card-hours)."""
    return f"sum_over_time({gauge}[{window}]) * {RULE_INTERVAL_SECONDS} / 3600"


HOURLY: tuple[tuple[str, str], ...] = tuple((hours_name(g), integral(g, "1h")) for g in CHARGED)


def rule_groups() -> dict[str, Any]:
    """The rule file (Prometheus' rule file format): the gauges first, then the hourly
    integrals, which read them (groups run in order, rules within a group too)."""
    interval = f"{RULE_INTERVAL_SECONDS}s"
    return {
        "groups": [
            {
                "name": "gpu-platform-tenant-gpu",
                "interval": interval,
                "rules": [{"record": name, "expr": expr} for name, expr in GAUGES],
            },
            {
                "name": "gpu-platform-tenant-gpu-hours",
                "interval": interval,
                "rules": [{"record": name, "expr": expr} for name, expr in HOURLY],
            },
        ]
    }


def recorded_names() -> tuple[str, ...]:
    return tuple(name for name, _ in (*GAUGES, *HOURLY))


def expressions() -> tuple[str, ...]:
    return tuple(expr for _, expr in (*GAUGES, *HOURLY))
