"""TC-18 per-tenant allocation series: for every tenant, the platform's
``tenant:gpu_memory_allocated_gib:sum`` and ``tenant:gpu_cores_allocated_cards:sum`` (recorded
by the central Prometheus from the tenant's agent) equal what HAMi granted the tenant's live pods
by their ``hami.io/vgpu-devices-allocated`` annotations, within ``SCRAPE_DELAY_SECONDS``.

Runs after the sharing tests (file order) and counts whatever holds a share then: the declared
workloads (the lab's ``inference-sample``) and any test pod still running. Skips where the stack
runs no metrics (``metrics.enabled: false``) or is not deployed.
"""

from __future__ import annotations

import time

import pytest

from components.metrics import rules
from tests.acceptance.chargeback import (
    SCRAPE_DELAY_SECONDS,
    granted,
    judge_allocation,
    query,
    series_value,
)
from tests.acceptance.hami_evidence import HAMI_DEVICES_ALLOCATED
from tests.acceptance.kube import REQUEST_TIMEOUT, meta, retrying
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(SCRAPE_DELAY_SECONDS * 2 + 120)]


def tenant_allocations(live: LiveStack, tenant: str) -> list[str]:
    cluster = live.tenant(tenant)
    pods = retrying(
        lambda: cluster.core.list_pod_for_all_namespaces(_request_timeout=REQUEST_TIMEOUT).items
    )
    return [
        (meta(p).annotations or {})[HAMI_DEVICES_ALLOCATED]
        for p in pods
        if (meta(p).annotations or {}).get(HAMI_DEVICES_ALLOCATED)
        and p.status is not None
        and p.status.phase in ("Pending", "Running")
        and meta(p).deletion_timestamp is None
    ]


@pytest.mark.tc("TC-18")
def test_per_tenant_allocation_series_match_hamis_grants(
    live: LiveStack, evidence: Evidence
) -> None:
    if not live.platform.metrics.enabled:
        pytest.skip("metrics.enabled is false in the stack file")
    management = live.management_cluster()
    deadline = time.monotonic() + SCRAPE_DELAY_SECONDS
    while True:
        problems, seen = [], {}
        memory = query(management.core, rules.MEMORY_ALLOCATED)
        cores = query(management.core, rules.CORES_ALLOCATED)
        for tenant in live.platform.tenants:
            mib, percent = granted(tenant_allocations(live, tenant.name))
            verdict = judge_allocation(
                tenant.name,
                mib,
                percent,
                series_value(memory, tenant.name),
                series_value(cores, tenant.name),
            )
            seen[tenant.name] = verdict.facts
            problems += verdict.problems
        if not problems or time.monotonic() > deadline:
            break
        time.sleep(10)
    evidence.record("perTenant", seen)
    evidence.summary(f"{len(seen)} tenants, series vs HAMi grants within {SCRAPE_DELAY_SECONDS} s")
    assert not problems, "; ".join(problems)
