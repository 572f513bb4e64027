"""A tenant's own GPU usage, published into its own cluster (docs/metrics.md, "Your own usage, as
a tenant"): the windows, and the ConfigMap a tenant's users read.

Standard library only (and ``usage_rows``): the usage publisher's container, a stock Python image,
runs this file as shipped in its ConfigMap (``components.metrics.usage_publisher``).

The numbers are those of ``make usage TENANT=<tenant> WINDOW=<window>`` ending at the same time:
the same queries (``usage.queries``, built by the program for this one tenant, ``query_for``
only puts the window's length in) read by the same code (``usage_rows.report_from``).
"""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from dataclasses import asdict, dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from components.metrics import usage_rows
from components.metrics.usage_rows import TenantUsage

# Inside each tenant cluster: the namespace and ConfigMap its users read.
NAMESPACE = "gpu-platform-usage"
CONFIG_MAP = "gpu-usage"
TABLE_KEY = "usage.txt"
JSON_KEY = "usage.json"
# The window length the program builds the tenant's query templates with (``usage.queries``);
# the publisher puts each window's own length in its place (``query_for``). A prime number of
# seconds (about 31.7 years) that no real query holds.
TEMPLATE_SECONDS = 999999937
TEMPLATE_RANGE = f"[{TEMPLATE_SECONDS}s]"
_STAMP = "%Y-%m-%dT%H:%M:%SZ"


@dataclass(frozen=True)
class Window:
    """One published window, ending at the publisher's run: ``name`` as a reader sees it."""

    name: str
    seconds: int
    end: datetime

    @property
    def start(self) -> datetime:
        return self.end - timedelta(seconds=self.seconds)


def windows(end: datetime) -> tuple[Window, ...]:
    """The last 24 hours, the last 7 days and the calendar month (UTC) to date, all ending at
    ``end`` (whole seconds). Right after midnight on the 1st the month holds 0 seconds."""
    end = end.astimezone(UTC).replace(microsecond=0)
    month_start = end.replace(day=1, hour=0, minute=0, second=0)
    return (
        Window("24h", usage_rows.window_seconds("24h"), end),
        Window("7d", usage_rows.window_seconds("7d"), end),
        Window("month", int((end - month_start).total_seconds()), end),
    )


def query_for(template: str, seconds: int) -> str:
    """A query template of the program's (``usage.queries`` at ``TEMPLATE_SECONDS``) for a
    window of ``seconds``: the one range replaced, nothing else."""
    if template.count(TEMPLATE_RANGE) != 1:
        raise usage_rows.UsageError(f"a query template without exactly one {TEMPLATE_RANGE}")
    if seconds <= 0:
        raise usage_rows.UsageError(f"a window of {seconds} s")
    return template.replace(TEMPLATE_RANGE, f"[{seconds}s]")


@dataclass(frozen=True)
class WindowUsage:
    """One window's row of one tenant (None: nothing allocated or used in it), and the
    report's warning when the store does not reach back to the window's start."""

    window: Window
    row: TenantUsage | None
    warning: str | None = None


def _zero(tenant: str) -> TenantUsage:
    return TenantUsage(
        tenant=tenant,
        memory_allocated_gib_hours=0.0,
        memory_used_gib_hours=0.0,
        memory_efficiency=None,
        cores_allocated_card_hours=0.0,
        cores_used_card_hours=0.0,
        cores_efficiency=None,
    )


def window_usage(
    tenant: str, window: Window, rows: Sequence[TenantUsage], oldest: float | None
) -> WindowUsage:
    """``rows`` (what ``usage_rows.report_from`` gave for this tenant and window) as one
    window's entry; any row of another tenant is refused."""
    for row in rows:
        if row.tenant != tenant:
            raise usage_rows.UsageError(f"{tenant}'s usage received a row of {row.tenant}")
    if len(rows) > 1:
        raise usage_rows.UsageError(f"{tenant}'s usage received {len(rows)} rows for one window")
    warning = (
        usage_rows.coverage_warning(f"{window.seconds}s", window.end, oldest)
        if window.seconds > 0
        else None
    )
    if warning is not None:  # named as the reader knows the window
        warning = warning.replace(f"the {window.seconds}s window", f"the {window.name} window")
    return WindowUsage(window=window, row=rows[0] if rows else None, warning=warning)


def config_map(tenant: str, generated: datetime, entries: Sequence[WindowUsage]) -> dict[str, Any]:
    """The ConfigMap written into ``tenant``'s own cluster: a table (``usage.txt``) and the same
    numbers as JSON (``usage.json``), every window of this one tenant. Takes this tenant's rows
    only and refuses any other's (``window_usage`` checked them; checked again here)."""
    usage_rows.checked_tenant(tenant)
    stamp = generated.astimezone(UTC).strftime(_STAMP)
    tables: list[str] = []
    documents: list[dict[str, Any]] = []
    for entry in entries:
        row = entry.row if entry.row is not None else _zero(tenant)
        if row.tenant != tenant:
            raise usage_rows.UsageError(f"{tenant}'s ConfigMap received a row of {row.tenant}")
        window = entry.window
        span = f"{window.start.strftime(_STAMP)} to {window.end.strftime(_STAMP)}"
        tables.append(
            f"== {window.name}: {span}\n"
            + usage_rows.as_table([row], window.name, window.end)
            + (f"{entry.warning}\n" if entry.warning else "")
        )
        values = asdict(row)
        del values["tenant"]
        documents.append(
            {
                "window": window.name,
                "start": window.start.strftime(_STAMP),
                "end": window.end.strftime(_STAMP),
                **values,
                "warning": entry.warning,
            }
        )
    document = {
        "tenant": tenant,
        "generated": stamp,
        "units": {
            "memory": "GiB-hours",
            "cores": "card-hours (100 % of one card's compute for one hour)",
            "efficiency": "used / allocated (null when nothing was allocated)",
        },
        "windows": documents,
    }
    header = (
        f"GPU usage of tenant {tenant}, published {stamp} (hourly; the same numbers as the "
        "platform team's `make usage TENANT=" + tenant + "` ending then)\n\n"
    )
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": CONFIG_MAP,
            "namespace": NAMESPACE,
            "labels": {
                "app.kubernetes.io/name": CONFIG_MAP,
                "app.kubernetes.io/part-of": "gpu-platform-metrics",
            },
            "annotations": {"gpu-platform.io/generated": stamp},
        },
        "data": {
            TABLE_KEY: header + "\n".join(tables),
            JSON_KEY: json.dumps(document, indent=2) + "\n",
        },
    }


Query = Callable[[str], Mapping[str, Any]]


def publish(
    tenant: str, templates: Mapping[str, str], query: Query, end: datetime
) -> dict[str, Any]:
    """``tenant``'s ConfigMap at ``end``: every window's row from ``templates`` (quantity ->
    the program's query template for this tenant) through ``query`` (instant queries at
    ``end``), with the store's coverage warning where it applies."""
    tenant = usage_rows.checked_tenant(tenant) or ""
    oldest = usage_rows.oldest_sample(query)
    entries = []
    for window in windows(end):
        rows: list[TenantUsage] = []
        if window.seconds > 0:
            prepared = {q: query_for(t, window.seconds) for q, t in templates.items()}
            rows = usage_rows.report_from(prepared, query, tenant)
        entries.append(window_usage(tenant, window, rows, oldest))
    return config_map(tenant, end, entries)
