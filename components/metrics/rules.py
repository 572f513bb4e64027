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

from dataclasses import dataclass
from typing import Any

from components.metrics import backup_alerts, dra_claims

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

# One sample per container (card, quota) whichever HAMi pod exported it. Two scheduler pods
# export the same grants under different ``instance`` labels during a rollout (the chart's
# RollingUpdate), after a restart (Prometheus marks a vanished target's series stale only about
# two scrape intervals later, prometheus/prometheus v3.5.0 scrape/scrape.go:1516-1556) and with
# more than one replica (every replica serves /metrics, leader or not: Project-HAMi/HAMi v2.10.0
# cmd/scheduler/main.go:142); a device-plugin pod replaced on a node does the same for the used
# series. ``sum by (tenant)`` over the raw series would count each of them twice, so each
# quantity is first reduced to one sample per the labels that name it, without ``instance``.
CONTAINER_GRANT = ("tenant", "namespace", "pod", "container_index", "device_uuid")
CONTAINER_USE = ("tenant", "namespace", "pod", "container", "vdevice_index", "device_uuid")
CARD = ("tenant", "node", "device_uuid")
# A DRA device a claim holds (components.metrics.dra_claims): one sample per claim, device and
# share (two shares of one device in one claim are two grants; ``share`` is empty for a whole
# device), whichever exporter pod wrote it (two during a rollout), without its ``pod`` list,
# which changes as the claim's reservations do.
DRA_GRANT = ("tenant", "namespace", "claim", "driver", "pool", "device", "share")
QUOTA = ("tenant", "namespace", "quota_name")


def once(series: str, labels: tuple[str, ...]) -> str:
    """``series`` reduced to one sample per ``labels`` (see above: duplicate exporters)."""
    return f"max by ({', '.join(labels)}) ({series})"


# A container that asks for ``gpumem`` without ``gpucores`` is granted 0 % by HAMi (its
# ``Coresreq`` is the device config's ``defaultCores``, Project-HAMi/HAMi v2.10.0
# pkg/device/nvidia/device.go:579-595, set to 0 by charts/hami/templates/scheduler/
# device-configmap.yaml:24), so HAMi-core puts no limit on its compute: it can use the whole
# card. It is billed as a whole card (100 %), not as the 0 % HAMi records; a container that wants
# to pay for less asks for ``gpucores``.
_CORES_GRANTED = once("hami_vgpu_core_allocated_ratio", CONTAINER_GRANT)
_CORES_BILLED = f"(({_CORES_GRANTED}) > 0) or (({_CORES_GRANTED}) * 0 + 100)"


# A gpuSharing: dra tenant's claims, billed in the same units beside HAMi's grants: a whole DRA
# device is one card (its ``allocated_cards`` is 1, as percent 100 beside HAMi's) and its
# memory; ``or`` keeps every grant of both sides (their label sets never match), and HAMi's
# grants are summed and divided exactly as before (dividing each first changed 0.9 into
# 0.8999999999999999).
_DRA_CARDS = once(dra_claims.CARDS, DRA_GRANT)
_DRA_MEMORY = once(dra_claims.MEMORY, DRA_GRANT)


def _quota(name: str) -> str:
    return once(f'hami_resource_quota_limit{{quota_name="{name}"}}', QUOTA)


# ``quota_name`` is the ResourceQuota key without ``limits.`` (HAMi v2.10.0
# pkg/device/quota.go:289-298 managedQuotaName; the program's quotas set
# limits.nvidia.com/gpumem in MiB and limits.nvidia.com/gpucores in percent of a card,
# components/tenant_specs.py resource_quota).
GAUGES: tuple[tuple[str, str], ...] = (
    (
        MEMORY_ALLOCATED,
        f"sum by (tenant) ({once('hami_vgpu_memory_allocated_bytes', CONTAINER_GRANT)}"
        f" or {_DRA_MEMORY}) / {GIB}",
    ),
    (CORES_ALLOCATED, f"sum by (tenant) ({_CORES_BILLED} or {_DRA_CARDS} * 100) / 100"),
    (
        MEMORY_USED,
        f"sum by (tenant) ({once('hami_vgpu_memory_used_bytes', CONTAINER_USE)}) / {GIB}",
    ),
    (
        CORES_USED,
        f"sum by (tenant) ({once('hami_container_device_utilization_ratio', CONTAINER_USE)}) / 100",
    ),
    (MEMORY_QUOTA, f"sum by (tenant) ({_quota('nvidia.com/gpumem')}) / 1024"),
    (CORES_QUOTA, f"sum by (tenant) ({_quota('nvidia.com/gpucores')}) / 100"),
    (CARDS, f"count by (tenant) ({once('hami_gpu_memory_limit_bytes', CARD)})"),
    (CARDS_SHARED, f"count by (tenant) ({once('hami_gpu_shared_count', CARD)} > 0)"),
)

# What the central rules record carries ``tenant`` and nothing else; a series of the same name
# written by anyone else (a scraped pod, a remote writer) carries ``job`` or ``instance``, or
# neither. The readers of recorded series select the rules' own, ``job=""`` and
# ``instance=""`` (an absent label matches the empty string).
RECORDED_ONLY = '{job="", instance=""}'


def hours_name(gauge: str) -> str:
    """``tenant:gpu_memory_allocated_gib:sum`` becomes
    ``tenant:gpu_memory_allocated_gib_hours:hours1h``
    (the hour's integral of the gauge)."""
    level, metric, _ = gauge.split(":")
    return f"{level}:{metric}_hours:hours1h"


# The four chargeback quantities (allocated and used, memory and compute), integrated per hour.
CHARGED = (MEMORY_ALLOCATED, MEMORY_USED, CORES_ALLOCATED, CORES_USED)


def integral(gauge: str, window: str, tenant: str | None = None) -> str:
    """PromQL for ``gauge`` integrated over ``window`` (GiB-hours or card-hours); with
    ``tenant``, that tenant's series only (a name the caller has checked: usage.TENANT_NAME)."""
    selector = RECORDED_ONLY if tenant is None else f'{RECORDED_ONLY[:-1]}, tenant="{tenant}"}}'
    return f"sum_over_time({gauge}{selector}[{window}]) * {RULE_INTERVAL_SECONDS} / 3600"


HOURLY: tuple[tuple[str, str], ...] = tuple((hours_name(g), integral(g, "1h")) for g in CHARGED)


@dataclass(frozen=True)
class Alert:
    """An alerting rule of the central Prometheus: what would leave a bill short."""

    name: str
    expr: str
    after: str
    """How long ``expr`` must hold (``for``)."""
    summary: str
    """The annotation, a Go template over the alert's labels."""


# The jobs the platform's scrape configuration names (components.metrics.scrape; written here,
# not imported: the rules are the lower layer).
_SCRAPED = "hami-scheduler|hami-device-plugin|dcgm-exporter|dra-claims"
_AGENT = 'up{job="gpu-metrics-agent"}'

# A gap in the series is a gap in the bill: nothing re-evaluates a recording rule over samples
# that arrive late or never (prometheus v3.5.0 rules/group.go evaluates at the group's own
# time only). These say when one opens, for whom, and why.
ALERTS: tuple[Alert, ...] = (
    Alert(
        "GpuMetricsTargetDown",
        f'up{{job=~"{_SCRAPED}"}} == 0',
        "5m",
        "{{ $labels.tenant }}: {{ $labels.job }} pod {{ $labels.instance }} cannot be scraped "
        "through the tenant's API server: what it reports is not metered while this lasts",
    ),
    Alert(
        "GpuMetricsAgentSilent",
        f"group by (tenant) (max_over_time({_AGENT}[1d])) unless group by (tenant) ({_AGENT})",
        "5m",
        "{{ $labels.tenant }}: its metrics agent sent nothing for 5 minutes (the agent is down "
        "or its remote write fails): nothing of this tenant is metered",
    ),
    Alert(
        "GpuHamiSchedulerNotScraped",
        f'group by (tenant) ({_AGENT}) unless group by (tenant) (up{{job="hami-scheduler"}} == 1)',
        "10m",
        "{{ $labels.tenant }}: its agent runs but scrapes no HAMi scheduler (HAMi down, or "
        "not discoverable): the tenant's GPU grants are not billed",
    ),
    Alert(
        # The dra path's GpuHamiSchedulerNotScraped: ``up`` exists only for a discovered
        # Running pod (scrape.py keeps only those), so an exporter Pending or deleted is no
        # ``up == 0`` and GpuMetricsTargetDown stays silent. Only a dra tenant's agent carries
        # gpu_sharing="dra" (scrape.agent_config).
        "GpuDraClaimsNotScraped",
        'group by (tenant) (up{job="gpu-metrics-agent",gpu_sharing="dra"}) unless '
        'group by (tenant) (up{job="dra-claims"} == 1)',
        "10m",
        "{{ $labels.tenant }}: its agent runs but scrapes no DRA claims exporter (the "
        "exporter is not running, or not discoverable): the tenant's DRA claims are not billed",
    ),
    Alert(
        "GpuMetricsSamplesDropped",
        "increase(prometheus_remote_storage_samples_failed_total"
        '{job="gpu-metrics-agent"}[10m]) > 0',
        "0m",
        "{{ $labels.tenant }}: the central Prometheus refused samples of this tenant's agent "
        "(too old or out of order after an outage): they are lost from the bill",
    ),
    Alert(
        "GpuChargebackRulesFailing",
        'increase(prometheus_rule_evaluation_failures_total{job="prometheus"}[10m]) > 0',
        "0m",
        "the chargeback rules of group {{ $labels.rule_group }} fail to evaluate: the "
        "recorded series have a gap",
    ),
)


def rule_groups() -> dict[str, Any]:
    """The rule file (Prometheus' rule file format): the gauges, then the hourly integrals,
    which read an hour of them. Groups are evaluated independently, each at its own offset
    (prometheus v3.5.0 rules/group.go:421-440), so the integrals may miss the gauges' newest
    sample; that shifts an hour's window by up to one interval, it loses nothing."""
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
            {
                "name": "gpu-platform-metering-alerts",
                "interval": interval,
                "rules": [
                    {
                        "alert": alert.name,
                        "expr": alert.expr,
                        "for": alert.after,
                        "labels": {"severity": "warning"},
                        "annotations": {"summary": alert.summary},
                    }
                    for alert in ALERTS
                ],
            },
            {
                "name": "gpu-platform-backup-alerts",
                "interval": interval,
                "rules": [
                    {
                        "alert": name,
                        "expr": expr,
                        "for": after,
                        "labels": {"severity": "warning"},
                        "annotations": {"summary": summary},
                    }
                    for name, expr, after, summary in backup_alerts.ALERTS
                ],
            },
        ]
    }


def recorded_names() -> tuple[str, ...]:
    return tuple(name for name, _ in (*GAUGES, *HOURLY))


def expressions() -> tuple[str, ...]:
    return (
        *(expr for _, expr in (*GAUGES, *HOURLY)),
        *(alert.expr for alert in ALERTS),
        *(expr for _, expr, _, _ in backup_alerts.ALERTS),
    )
