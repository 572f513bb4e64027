"""TC-18's evidence: what HAMi granted a tenant's pods (their ``hami.io/vgpu-devices-allocated``
annotations) against the platform's per-tenant allocation series in the central Prometheus."""

from __future__ import annotations

import json
from collections.abc import Iterable, Mapping
from typing import Any

from components.metrics import objects, rules
from components.metrics.scrape import PROMETHEUS_PORT
from tests.acceptance.hami_evidence import Verdict, pod_shares

# A pod granted at time t shows in the series after at most one scrape (30 s), one remote-write
# batch (a few seconds) and one rule evaluation (60 s): 150 s is the stated bound.
SCRAPE_DELAY_SECONDS = 150
# The series is in GiB and cards: compare in MiB and percent, to HAMi's own rounding.
TOLERANCE_MIB = 1.0
TOLERANCE_CORES = 0.5


def granted(allocations: Iterable[str]) -> tuple[int, int]:
    """(MiB, percent of a card) summed over the allocated annotations of a tenant's pods."""
    memory = cores = 0
    for value in allocations:
        for share in pod_shares(value):
            memory += share.memory_mib
            cores += share.cores
    return memory, cores


def series_value(response: Mapping[str, Any], tenant: str) -> float | None:
    """The tenant's sample of an instant-query response; None when it has none. The recording
    rules emit nothing for a tenant that holds nothing (an empty ``sum by (tenant)``), so a
    missing series cannot be told from a tenant whose agent never remote-writes: TC-18 holds a
    known share in every tenant and requires the series."""
    for sample in response.get("data", {}).get("result", []):
        if sample.get("metric", {}).get("tenant") == tenant:
            return float(sample["value"][1])
    return None


def judge_allocation(
    tenant: str,
    granted_mib: int,
    granted_cores: int,
    memory_gib: float | None,
    cards: float | None,
) -> Verdict:
    """The tenant's series against HAMi's grants; a tenant that holds nothing, or has no series,
    fails: 0 = 0 would pass for an agent that never remote-writes."""
    verdict = Verdict(
        facts={
            "grantedMiB": granted_mib,
            "grantedCores": granted_cores,
            "seriesMiB": None if memory_gib is None else memory_gib * 1024,
            "seriesCores": None if cards is None else cards * 100,
        }
    )
    if granted_mib == 0 and granted_cores == 0:
        verdict.problems.append(
            f"{tenant}: holds no GPU share, so its series cannot be judged (0 = no series)"
        )
        return verdict
    if memory_gib is None or cards is None:
        missing = [
            n
            for n, v in ((rules.MEMORY_ALLOCATED, memory_gib), (rules.CORES_ALLOCATED, cards))
            if v is None
        ]
        verdict.problems.append(
            f"{tenant}: no {' or '.join(missing)} series although HAMi granted its pods "
            f"{granted_mib} MiB / {granted_cores} % (its metrics agent or the recording rules)"
        )
        return verdict
    if abs(memory_gib * 1024 - granted_mib) > TOLERANCE_MIB:
        verdict.problems.append(
            f"{tenant}: {rules.MEMORY_ALLOCATED} says {memory_gib * 1024:.0f} MiB, "
            f"HAMi granted its pods {granted_mib} MiB"
        )
    if abs(cards * 100 - granted_cores) > TOLERANCE_CORES:
        verdict.problems.append(
            f"{tenant}: {rules.CORES_ALLOCATED} says {cards * 100:.1f} %, "
            f"HAMi granted its pods {granted_cores} %"
        )
    return verdict


PROXY = (
    f"/api/v1/namespaces/{objects.METRICS_NAMESPACE}/services/"
    f"{objects.PROMETHEUS}:{PROMETHEUS_PORT}/proxy/api/v1/query"
)


def query(core_api: Any, expr: str) -> Mapping[str, Any]:
    """An instant query to the central Prometheus through the management API's service proxy."""
    response = core_api.api_client.call_api(
        PROXY,
        "GET",
        query_params=[("query", expr)],
        auth_settings=["BearerToken"],
        _preload_content=False,
        _request_timeout=(10, 30),
    )
    raw = response[0].data if isinstance(response, tuple) else response.data
    result: Mapping[str, Any] = json.loads(raw)
    return result
