"""TC-18 per-tenant allocation series: for every tenant, the platform's
``tenant:gpu_memory_allocated_gib:sum`` and ``tenant:gpu_cores_allocated_cards:sum`` (recorded
by the central Prometheus from the tenant's agent) equal what HAMi granted the tenant's live pods
by their ``hami.io/vgpu-devices-allocated`` annotations, within ``SCRAPE_DELAY_SECONDS``; for a
``gpuSharing: dra`` tenant, what its ResourceClaims hold (each allocated device of the DRA
driver a whole card with the memory its ResourceSlice publishes, ``dra_evidence.dra_granted``),
billed through the platform's claims exporter (docs/metrics.md).

Runs after the sharing tests (file order) and counts whatever holds a share then: the declared
workloads (the lab's ``inference-sample``) and any test pod still running. A tenant that holds
nothing then gets one known share for the test (``chargeback_share_pod``; a ``dra`` tenant one
whole card, ``dra_whole_card_pod`` through its template, needing a free device; removed afterwards):
a tenant with no grant and no series would otherwise pass on 0 = 0, also when its agent never
remote-writes. Skips where the stack runs no metrics (``metrics.enabled: false``) or is not
deployed.
"""

from __future__ import annotations

import contextlib
import time
from typing import Any

import pytest

from components.metrics import rules
from tests.acceptance.chargeback import (
    SCRAPE_DELAY_SECONDS,
    granted,
    judge_allocation,
    query,
    series_value,
)
from tests.acceptance.dra_evidence import claim_name_of, dra_granted, free_devices
from tests.acceptance.hami_evidence import HAMI_DEVICES_ALLOCATED
from tests.acceptance.kube import (
    API_ERRORS,
    BIND_TIMEOUT,
    REQUEST_TIMEOUT,
    create_pod,
    describe_error,
    meta,
    poll_until,
    read_pod,
    retrying,
    scratch_namespace,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import DRA_DRIVER
from tests.acceptance.report import Evidence
from tests.acceptance.stack import hami_tenants
from tests.acceptance.test_tc22_25_dra import (
    POD_CLAIM,
    claim_template,
    claims_raw,
    create_template,
    dra_whole_card_pod,
    pod_raw,
    slices_raw,
)
from tests.acceptance.workloads import gpu_limits, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(SCRAPE_DELAY_SECONDS * 2 + 300)]


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


# The known share held in a tenant that holds none: small enough to fit any card.
SHARE_MEMORY_MIB = 1024
SHARE_CORES = 5


def chargeback_share_pod(run_id: str) -> dict[str, Any]:
    return pod_body(
        "chargeback-share",
        run_id,
        limits=gpu_limits(1, memory_mib=SHARE_MEMORY_MIB, cores=SHARE_CORES),
    )


def hold_a_share(live: LiveStack, stack: contextlib.ExitStack, tenant: str) -> str | None:
    """A share pod in a scratch namespace of ``tenant`` (removed with the namespace when the
    test ends), waited for until HAMi has allocated it; None once held, else why not."""
    cluster = live.tenant(tenant)
    namespace = stack.enter_context(scratch_namespace(cluster, live.run_id))
    body = chargeback_share_pod(live.run_id)
    try:
        create_pod(cluster, namespace, body)
    except API_ERRORS as exc:
        return f"{tenant}: could not create its share pod: {describe_error(exc)}"

    def allocated() -> Any:
        pod = read_pod(cluster, namespace, body["metadata"]["name"])
        return pod if (meta(pod).annotations or {}).get(HAMI_DEVICES_ALLOCATED) else None

    if poll_until(allocated, timeout=BIND_TIMEOUT) is None:
        return f"{tenant}: its share pod was not allocated within {BIND_TIMEOUT:.0f} s"
    return None


DRA_HOLDER = "chargeback-dra"


def dra_tenants(live: LiveStack) -> list[str]:
    return [t.name for t in live.platform.tenants if t.gpu_sharing == "dra" and t.worker_pools]


def dra_allocations(live: LiveStack, tenant: str) -> tuple[int, int]:
    cluster = live.tenant(tenant)
    return dra_granted(claims_raw(cluster), slices_raw(cluster), DRA_DRIVER)


def hold_a_card(live: LiveStack, stack: contextlib.ExitStack, tenant: str) -> str | None:
    """A whole DRA card in a scratch namespace of a ``dra`` tenant that holds none, waited for
    until its claim is allocated; None once held, else why not."""
    cluster = live.tenant(tenant)
    if not free_devices(slices_raw(cluster), claims_raw(cluster), DRA_DRIVER):
        return f"{tenant}: no free {DRA_DRIVER} device to hold for the test"
    namespace = stack.enter_context(scratch_namespace(cluster, live.run_id))
    try:
        create_template(
            cluster, namespace, claim_template(f"{DRA_HOLDER}-gpu", namespace, live.run_id, 1)
        )
        create_pod(cluster, namespace, dra_whole_card_pod(live.run_id, DRA_HOLDER))
    except API_ERRORS as exc:
        return f"{tenant}: could not create its DRA holder: {describe_error(exc)}"

    def allocated() -> bool | None:
        pod = pod_raw(cluster, namespace, DRA_HOLDER) or {}
        name = claim_name_of(pod, POD_CLAIM)
        claims = {c["metadata"]["name"]: c for c in claims_raw(cluster, namespace)}
        claim = claims.get(name or "", {})
        return True if (claim.get("status") or {}).get("allocation") else None

    if poll_until(allocated, timeout=BIND_TIMEOUT) is None:
        return f"{tenant}: its DRA holder's claim was not allocated within {BIND_TIMEOUT:.0f} s"
    return None


@pytest.mark.tc("TC-18")
def test_per_tenant_allocation_series_match_hamis_grants(
    live: LiveStack, evidence: Evidence
) -> None:
    if not live.platform.metrics.enabled:
        pytest.skip("metrics.enabled is false in the stack file")
    with contextlib.ExitStack() as held:
        _judge(live, evidence, held)


def _judge(live: LiveStack, evidence: Evidence, held: contextlib.ExitStack) -> None:
    management = live.management_cluster()
    holding = []
    for tenant in hami_tenants(live.platform):
        if granted(tenant_allocations(live, tenant.name)) == (0, 0):
            problem = hold_a_share(live, held, tenant.name)
            if problem is not None:
                pytest.fail(problem, pytrace=False)
            holding.append(tenant.name)
    for name in dra_tenants(live):
        if dra_allocations(live, name) == (0, 0):
            problem = hold_a_card(live, held, name)
            if problem is not None:
                pytest.fail(problem, pytrace=False)
            holding.append(name)
    evidence.record("knownShareHeldIn", holding)
    deadline = time.monotonic() + SCRAPE_DELAY_SECONDS
    while True:
        problems, seen = [], {}
        memory = query(management.core, rules.MEMORY_ALLOCATED)
        cores = query(management.core, rules.CORES_ALLOCATED)
        for tenant in hami_tenants(live.platform):
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
        for name in dra_tenants(live):
            mib, percent = dra_allocations(live, name)
            verdict = judge_allocation(
                name,
                mib,
                percent,
                series_value(memory, name),
                series_value(cores, name),
                granted_by="its ResourceClaims hold",
            )
            seen[name] = verdict.facts
            problems += verdict.problems
        if not problems or time.monotonic() > deadline:
            break
        time.sleep(10)
    evidence.record("perTenant", seen)
    evidence.summary(f"{len(seen)} tenants, series vs HAMi grants within {SCRAPE_DELAY_SECONDS} s")
    assert not problems, "; ".join(problems)
