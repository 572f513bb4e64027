"""The chargeback report: per tenant, GPU memory and compute allocated and used over a window.

``scripts/usage.py`` (``make usage``) asks the central Prometheus one instant query per quantity,
evaluated at the window's end, that integrates the recorded per-tenant gauge over the window
(``rules.integral``: each sample of a gauge rule stands for one rule interval):

* memory: GiB-hours (``tenant:gpu_memory_allocated_gib:sum`` / ``..._used_...``);
* compute: card-hours, one card-hour being 100 % of one card's compute for one hour
  (``tenant:gpu_cores_allocated_cards:sum`` / ``..._used_...``);
* efficiency: used / allocated, per resource (empty when nothing was allocated).

This module is pure: it builds the queries; ``components.metrics.usage_rows`` (standard library
only, so the usage publisher's container runs it too) reads Prometheus' query API responses and
formats the table, CSV or JSON, and its names are re-exported here; the script does the HTTP.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from components.metrics import rules
from components.metrics.usage_rows import (
    OLDEST_SAMPLE_QUERY,
    TENANT_NAME,
    TenantUsage,
    UsageError,
    as_csv,
    as_json,
    as_table,
    checked_tenant,
    coverage_warning,
    oldest_sample,
    report_from,
    vector,
    window_seconds,
)

__all__ = [
    "OLDEST_SAMPLE_QUERY",
    "QUANTITIES",
    "TENANT_NAME",
    "TenantUsage",
    "UsageError",
    "as_csv",
    "as_json",
    "as_table",
    "checked_tenant",
    "coverage_warning",
    "oldest_sample",
    "queries",
    "report",
    "report_from",
    "vector",
    "window_seconds",
]

# quantity -> recorded gauge
QUANTITIES: Mapping[str, str] = {
    "memory_allocated_gib_hours": rules.MEMORY_ALLOCATED,
    "memory_used_gib_hours": rules.MEMORY_USED,
    "cores_allocated_card_hours": rules.CORES_ALLOCATED,
    "cores_used_card_hours": rules.CORES_USED,
}


def queries(window: str, tenant: str | None = None) -> dict[str, str]:
    """quantity -> the instant query that integrates it over ``window`` ending at query time;
    with ``tenant``, every query selects that tenant's series only, so its report cannot hold
    another tenant's numbers."""
    seconds = window_seconds(window)
    scope = checked_tenant(tenant)
    return {
        quantity: f"sum by (tenant) ({rules.integral(gauge, f'{seconds}s', scope)})"
        for quantity, gauge in QUANTITIES.items()
    }


def report(
    window: str, query: Callable[[str], Mapping[str, Any]], tenant: str | None = None
) -> list[TenantUsage]:
    """One row per tenant that had anything allocated or used in the window, by name; with
    ``tenant``, that tenant's row only (none when it used nothing)."""
    return report_from(queries(window, tenant), query, tenant)
