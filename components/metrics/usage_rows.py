"""The standard-library half of the chargeback report (``components.metrics.usage``): read
Prometheus' query API answers into one row per tenant, and format the rows.

No import outside the standard library, on purpose: besides ``make usage``, the usage publisher's
container (``components.metrics.usage_publisher``, a stock Python image) runs this very file,
shipped in its ConfigMap, so a tenant's published numbers are computed by the same code as the
operator's report. ``tests/unit/test_usage_view.py`` runs the shipped files with ``python -I -S``.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import re
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Callable, Mapping
from dataclasses import asdict, dataclass
from datetime import UTC, datetime
from typing import Any

_DURATION = re.compile(r"^(\d+)([smhdw])$")
_SECONDS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


class UsageError(ValueError):
    """A bad window, or a response that is not a Prometheus vector."""


def window_seconds(window: str) -> int:
    """``7d`` -> 604800; whole seconds, minutes, hours, days or weeks."""
    match = _DURATION.match(window)
    if not match or int(match.group(1)) == 0:
        raise UsageError(f"window {window!r}: write a positive whole number and s, m, h, d or w")
    return int(match.group(1)) * _SECONDS[match.group(2)]


# A tenant's name as the platform's configuration allows it (a DNS label): nothing that could
# end the PromQL string it is put in.
TENANT_NAME = re.compile(r"^[a-z0-9]([-a-z0-9]{0,61}[a-z0-9])?$")


def checked_tenant(tenant: str | None) -> str | None:
    if tenant is not None and not TENANT_NAME.match(tenant):
        raise UsageError(f"tenant {tenant!r}: write a tenant's name, e.g. tenant-a")
    return tenant


def vector(response: Mapping[str, Any], tenant: str | None = None) -> dict[str, float]:
    """tenant -> value of an instant-query response (``/api/v1/query``); with ``tenant``, a
    sample of any other tenant is an error (the query selected one tenant)."""
    if response.get("status") != "success":
        raise UsageError(f"Prometheus answered {response.get('status')!r}: {response.get('error')}")
    data = response.get("data") or {}
    if data.get("resultType") != "vector":
        raise UsageError(f"expected a vector, got {data.get('resultType')!r}")
    result: dict[str, float] = {}
    for sample in data.get("result", []):
        name = sample.get("metric", {}).get("tenant")
        if not name:
            raise UsageError(f"a sample without a tenant label: {sample.get('metric')}")
        if tenant is not None and name != tenant:
            raise UsageError(f"a report for {tenant} received a sample of {name}")
        result[name] = float(sample["value"][1])
    return result


Query = Callable[[str], Mapping[str, Any]]


def http_query(
    base_url: str,
    end: datetime,
    username: str,
    password: str | None,
    *,
    missing: str = "no password given",
) -> Query:
    """Instant queries of the central Prometheus at ``end`` (``make usage`` and the tenants'
    usage publisher alike); with ``password``, with its basic auth. A 401 is one line, naming
    ``missing`` when no password was sent."""
    headers = {}
    if password is not None:
        pair = base64.b64encode(f"{username}:{password}".encode()).decode()
        headers["Authorization"] = f"Basic {pair}"

    def query(expr: str) -> Mapping[str, Any]:
        params = urllib.parse.urlencode({"query": expr, "time": f"{end.timestamp():.3f}"})
        request = urllib.request.Request(
            f"{base_url.rstrip('/')}/api/v1/query?{params}", headers=headers
        )
        try:
            with urllib.request.urlopen(request, timeout=60) as reply:
                result: Mapping[str, Any] = json.load(reply)
                return result
        except urllib.error.HTTPError as error:
            if error.code == 401:
                raise UsageError(
                    "the central Prometheus refused the credential (401): "
                    + ("a wrong password" if password is not None else missing)
                ) from None
            raise

    return query


# The oldest sample the central Prometheus holds (its own series, kept by its ``prometheus``
# job: components.metrics.scrape.self_job).
OLDEST_SAMPLE_QUERY = 'min(prometheus_tsdb_lowest_timestamp_seconds{job="prometheus"})'


def oldest_sample(query: Callable[[str], Mapping[str, Any]]) -> float | None:
    """Seconds since the epoch of the oldest sample the store holds; None when it cannot say
    (an older deployment without the server's own job, or an error)."""
    try:
        response = query(OLDEST_SAMPLE_QUERY)
    except (OSError, ValueError):
        return None
    data = response.get("data") or {}
    if response.get("status") != "success" or data.get("resultType") != "vector":
        return None
    samples = data.get("result") or []
    return float(samples[0]["value"][1]) if samples else None


def coverage_warning(window: str, end: datetime, oldest: float | None) -> str | None:
    """A line for the report's reader when the window reaches past what the store holds
    (``metrics.retention``, or a store younger than the window): those hours are not billed."""
    start = end.timestamp() - window_seconds(window)
    if oldest is None:
        return (
            "warning: the central Prometheus does not say how far back it holds samples: "
            f"the {window} window may start before them"
        )
    if oldest <= start:
        return None
    missing = (oldest - start) / 3600
    since = datetime.fromtimestamp(oldest, UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    return (
        f"warning: the central Prometheus holds samples from {since} only: the first "
        f"{missing:.1f} h of the {window} window are not in this report (metrics.retention)"
    )


@dataclass(frozen=True)
class TenantUsage:
    tenant: str
    memory_allocated_gib_hours: float
    memory_used_gib_hours: float
    memory_efficiency: float | None
    cores_allocated_card_hours: float
    cores_used_card_hours: float
    cores_efficiency: float | None


def _efficiency(used: float | None, allocated: float) -> float | None:
    """used / allocated; None (blank) when nothing was allocated, or when no series of use
    exists at all (a ``dra`` tenant, HAMi's mock devices): unknown, not 0 %."""
    return used / allocated if used is not None and allocated > 0 else None


def report_from(
    queries: Mapping[str, str],
    query: Callable[[str], Mapping[str, Any]],
    tenant: str | None = None,
) -> list[TenantUsage]:
    """One row per tenant that had anything allocated or used, by name, from ``queries``
    (quantity -> the instant query of ``usage.queries``); with ``tenant``, that tenant's row
    only (none when it used nothing): a sample of any other tenant is an error."""
    values = {quantity: vector(query(expr), tenant) for quantity, expr in queries.items()}
    tenants = sorted({tenant for per_tenant in values.values() for tenant in per_tenant})

    def value(quantity: str, tenant: str) -> float:
        return values[quantity].get(tenant, 0.0)

    def measured(quantity: str, tenant: str) -> float | None:
        return values[quantity].get(tenant)

    rows = []
    for tenant in tenants:
        mem_alloc = value("memory_allocated_gib_hours", tenant)
        mem_used = value("memory_used_gib_hours", tenant)
        core_alloc = value("cores_allocated_card_hours", tenant)
        core_used = value("cores_used_card_hours", tenant)
        rows.append(
            TenantUsage(
                tenant=tenant,
                memory_allocated_gib_hours=mem_alloc,
                memory_used_gib_hours=mem_used,
                memory_efficiency=_efficiency(measured("memory_used_gib_hours", tenant), mem_alloc),
                cores_allocated_card_hours=core_alloc,
                cores_used_card_hours=core_used,
                cores_efficiency=_efficiency(measured("cores_used_card_hours", tenant), core_alloc),
            )
        )
    return rows


_COLUMNS = (
    ("tenant", "tenant"),
    ("memory_allocated_gib_hours", "mem alloc GiB·h"),
    ("memory_used_gib_hours", "mem used GiB·h"),
    ("memory_efficiency", "mem eff"),
    ("cores_allocated_card_hours", "core alloc card·h"),
    ("cores_used_card_hours", "core used card·h"),
    ("cores_efficiency", "core eff"),
)


def _cell(key: str, value: Any) -> str:
    if value is None:
        return "-"
    if key.endswith("efficiency"):
        return f"{100 * value:.1f}%"
    if isinstance(value, float):
        return f"{value:.2f}"
    return str(value)


def as_table(rows: list[TenantUsage], window: str, end: datetime) -> str:
    header = [title for _, title in _COLUMNS]
    body = [[_cell(key, getattr(row, key)) for key, _ in _COLUMNS] for row in rows]
    widths = [max(len(line[i]) for line in [header, *body]) for i in range(len(header))]

    def line(cells: list[str]) -> str:
        return "  ".join(
            cell.ljust(width) if i == 0 else cell.rjust(width)
            for i, (cell, width) in enumerate(zip(cells, widths, strict=True))
        )

    stamp = end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    lines = [f"GPU usage per tenant, {window} ending {stamp}", line(header)]
    lines += [line(cells) for cells in body] or ["(no tenant allocated or used a GPU)"]
    return "\n".join(lines) + "\n"


def as_csv(rows: list[TenantUsage]) -> str:
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=[key for key, _ in _COLUMNS], lineterminator="\n")
    writer.writeheader()
    for row in rows:
        writer.writerow({key: "" if v is None else v for key, v in asdict(row).items()})
    return out.getvalue()


def as_json(rows: list[TenantUsage], window: str, end: datetime) -> str:
    document = {
        "window": window,
        "end": end.astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ"),
        "units": {
            "memory": "GiB-hours",
            "cores": "card-hours (100 % of one card's compute for one hour)",
            "efficiency": "used / allocated (null when nothing was allocated)",
        },
        "tenants": [asdict(row) for row in rows],
    }
    return json.dumps(document, indent=2, sort_keys=False) + "\n"
