"""The platform's own Grafana dashboard, built with Grafana's typed builders
(``grafana-foundation-sdk``), and the PromQL of every panel (for the offline checks).

Per tenant (the ``tenant`` variable, every tenant by default): GPU memory and compute allocated
vs quota vs used, the efficiency of each, HAMi's cards by state, and Kamaji's control-plane,
datastore and certificate health. HAMi v2.10.0 exports no series for pods waiting for a GPU or
for its allocation failures (its reasons — ``CardInsufficientMemory``, ``CardInsufficientCore``,
… — are Kubernetes events on the pod, not metrics: cmd/scheduler/metrics.go declares none), so
the dashboard says so in a text panel instead of plotting something else under that name.
"""

from __future__ import annotations

import json
from typing import Any

from grafana_foundation_sdk.builders import dashboard, prometheus, stat, text, timeseries
from grafana_foundation_sdk.cog.encoder import JSONEncoder
from grafana_foundation_sdk.models.dashboard import DataSourceRef

from components.metrics import rules

UID = "gpu-platform-tenants"
TITLE = "GPU platform: tenants"
TENANT = '{tenant=~"$tenant"}'
DATASOURCE = DataSourceRef(type_val="prometheus", uid="${datasource}")

# (panel title, unit, ((legend, expr), ...))
_ALLOCATION: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        "GPU memory: allocated, quota, used (GiB)",
        "decgbytes",
        (
            ("{{tenant}} allocated", f"{rules.MEMORY_ALLOCATED}{TENANT}"),
            ("{{tenant}} quota", f"{rules.MEMORY_QUOTA}{TENANT}"),
            ("{{tenant}} used", f"{rules.MEMORY_USED}{TENANT}"),
        ),
    ),
    (
        "GPU compute: allocated, quota, used (cards)",
        "short",
        (
            ("{{tenant}} allocated", f"{rules.CORES_ALLOCATED}{TENANT}"),
            ("{{tenant}} quota", f"{rules.CORES_QUOTA}{TENANT}"),
            ("{{tenant}} used", f"{rules.CORES_USED}{TENANT}"),
        ),
    ),
    (
        "Efficiency: used / allocated",
        "percentunit",
        (
            (
                "{{tenant}} memory",
                f"{rules.MEMORY_USED}{TENANT} / {rules.MEMORY_ALLOCATED}{TENANT}",
            ),
            (
                "{{tenant}} compute",
                f"{rules.CORES_USED}{TENANT} / {rules.CORES_ALLOCATED}{TENANT}",
            ),
        ),
    ),
    (
        "Cards by state",
        "short",
        (
            ("{{tenant}} shared by pods", f"count by (tenant) (hami_gpu_shared_count{TENANT} > 0)"),
            ("{{tenant}} idle", f"count by (tenant) (hami_gpu_shared_count{TENANT} == 0)"),
        ),
    ),
)
_CONTROL_PLANES: tuple[tuple[str, str, tuple[tuple[str, str], ...]], ...] = (
    (
        "Control planes not ready",
        "short",
        (
            (
                "{{tenant}} {{status}}",
                'kamaji_tenant_control_plane_status{tenant=~"$tenant", ready="false"} == 1',
            ),
        ),
    ),
    (
        "Control-plane status",
        "short",
        (("{{tenant}} {{status}}", f"kamaji_tenant_control_plane_status{TENANT} == 1"),),
    ),
    (
        "DataStores not ready",
        "short",
        (
            (
                "{{datastore_name}} {{status}}",
                'kamaji_datastore_status{ready="false"} == 1',
            ),
        ),
    ),
    (
        "Certificates expiring or invalid",
        "short",
        (
            (
                "{{tenant}} {{status}}",
                'sum by (tenant, status) (kamaji_certificates_current{tenant=~"$tenant", '
                'status=~"expiring|invalid"})',
            ),
        ),
    ),
)
_NO_WAITING_SERIES = (
    "HAMi v2.10.0 exports no metric for pods waiting for a GPU or for its allocation failures: "
    "its reasons (`CardInsufficientMemory`, `CardInsufficientCore`, …) are events on the pod. "
    "See docs/metrics.md."
)
_VARIABLE_METRIC = rules.CARDS


def _panel(title: str, unit: str, targets: tuple[tuple[str, str], ...], as_stat: bool) -> Any:
    panel: Any = stat.Panel() if as_stat else timeseries.Panel()
    panel = panel.title(title).unit(unit).datasource(DATASOURCE).height(8).span(12)
    for index, (legend, expr) in enumerate(targets):
        panel = panel.with_target(
            prometheus.Dataquery().expr(expr).legend_format(legend).ref_id(chr(ord("A") + index))
        )
    return panel


def platform_dashboard() -> dict[str, Any]:
    """The dashboard as Grafana's JSON model."""
    builder = (
        dashboard.Dashboard(TITLE)
        .uid(UID)
        .tags(["gpu-platform", "hami", "kamaji"])
        .refresh("1m")
        .time("now-6h", "now")
        .with_variable(dashboard.DatasourceVariable("datasource").type("prometheus"))
        .with_variable(
            dashboard.QueryVariable("tenant")
            .label("tenant")
            .datasource(DATASOURCE)
            .query(f"label_values({_VARIABLE_METRIC}, tenant)")
            .multi(True)
            .include_all(True)
        )
        .with_row(dashboard.Row("GPUs per tenant: allocated (HAMi), quota, used"))
    )
    for title, unit, targets in _ALLOCATION:
        builder = builder.with_panel(_panel(title, unit, targets, as_stat=False))
    builder = builder.with_panel(
        text.Panel()
        .title("Pods waiting for GPUs, allocation failures")
        .content(_NO_WAITING_SERIES)
        .height(4)
        .span(24)
    )
    builder = builder.with_row(dashboard.Row("Control planes (Kamaji)"))
    for title, unit, targets in _CONTROL_PLANES:
        builder = builder.with_panel(_panel(title, unit, targets, as_stat=True))
    encoded = JSONEncoder(sort_keys=True).encode(builder.build())
    result: dict[str, Any] = json.loads(encoded)
    return result


def expressions() -> tuple[str, ...]:
    """Every PromQL expression of the dashboard's panels."""
    return tuple(expr for _, _, targets in (*_ALLOCATION, *_CONTROL_PLANES) for _, expr in targets)


def variable_metrics() -> tuple[str, ...]:
    """The metrics the dashboard's variables read label values of."""
    return (_VARIABLE_METRIC,)
