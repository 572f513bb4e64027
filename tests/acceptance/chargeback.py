"""TC-18's evidence: what HAMi granted a tenant's pods (their ``hami.io/vgpu-devices-allocated``
annotations) against the platform's per-tenant allocation series in the central Prometheus."""

from __future__ import annotations

import base64
import http.client
import json
import urllib.parse
from collections.abc import Iterable, Mapping
from typing import Any

from kubernetes.stream import portforward

from components.metrics import auth, objects, rules
from components.metrics.scrape import PROMETHEUS_PORT
from tests.acceptance.hami_evidence import EvidenceError, Verdict, pod_shares

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
    granted_by: str = "HAMi granted its pods",
) -> Verdict:
    """The tenant's series against HAMi's grants (a ``dra`` tenant's: what its claims hold,
    ``granted_by`` saying so); a tenant that holds nothing, or has no series, fails: 0 = 0 would
    pass for an agent that never remote-writes."""
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
            f"{tenant}: no {' or '.join(missing)} series although {granted_by} "
            f"{granted_mib} MiB / {granted_cores} % (its metrics agent or the recording rules)"
        )
        return verdict
    if abs(memory_gib * 1024 - granted_mib) > TOLERANCE_MIB:
        verdict.problems.append(
            f"{tenant}: {rules.MEMORY_ALLOCATED} says {memory_gib * 1024:.0f} MiB, "
            f"{granted_by} {granted_mib} MiB"
        )
    if abs(cards * 100 - granted_cores) > TOLERANCE_CORES:
        verdict.problems.append(
            f"{tenant}: {rules.CORES_ALLOCATED} says {cards * 100:.1f} %, "
            f"{granted_by} {granted_cores} %"
        )
    return verdict


def authorization(core_api: Any) -> str:
    """The central Prometheus' basic-auth header (components/metrics/auth.py), from its Secret
    in the metrics namespace: never printed, never in a verdict."""
    secret = core_api.read_namespaced_secret(
        objects.AUTH_SECRET, objects.METRICS_NAMESPACE, _request_timeout=(10, 30)
    )
    encoded = (secret.data or {}).get(auth.PASSWORD_KEY)
    if not encoded:
        raise EvidenceError(
            f"secret {objects.METRICS_NAMESPACE}/{objects.AUTH_SECRET} holds no {auth.PASSWORD_KEY}"
        )
    password = base64.b64decode(encoded).decode().strip()
    return "Basic " + base64.b64encode(f"{auth.USERNAME}:{password}".encode()).decode()


def query(core_api: Any, expr: str) -> Mapping[str, Any]:
    """An instant query to the central Prometheus through a port-forward to its pod (the
    Python client's WebSocket tunnel, what ``kubectl port-forward`` does): the metrics
    namespace admits no address from outside the pod network, so not the API server's
    service proxy (docs/metrics.md); with its basic auth (``authorization``)."""
    header = authorization(core_api)
    pods = core_api.list_namespaced_pod(
        objects.METRICS_NAMESPACE,
        label_selector=",".join(f"{k}={v}" for k, v in objects._labels(objects.PROMETHEUS).items()),
        _request_timeout=(10, 30),
    ).items
    running = [p for p in pods if p.status and p.status.phase == "Running"]
    if not running:
        raise EvidenceError(f"no Running {objects.PROMETHEUS} pod in {objects.METRICS_NAMESPACE}")
    tunnel = portforward(
        core_api.connect_get_namespaced_pod_portforward,
        running[0].metadata.name,
        objects.METRICS_NAMESPACE,
        ports=str(PROMETHEUS_PORT),
    )
    try:
        connection = http.client.HTTPConnection("127.0.0.1", PROMETHEUS_PORT, timeout=30)
        connection.sock = tunnel.socket(PROMETHEUS_PORT)
        connection.request(
            "GET",
            "/api/v1/query?" + urllib.parse.urlencode({"query": expr}),
            headers={"Authorization": header},
        )
        reply = connection.getresponse()
        raw = reply.read()
    finally:
        tunnel.close()
    if reply.status != 200:
        raise EvidenceError(f"Prometheus answered {reply.status} to {expr!r}: {raw[:200]!r}")
    result: Mapping[str, Any] = json.loads(raw)
    return result
