"""TC-03: the tenant API server reaches HAMi's webhook through Konnectivity.

For every tenant with GPU pools: a pod requesting HAMi resources, created through the tenant
API, comes back with ``spec.schedulerName == hami-scheduler`` - only HAMi's webhook, which runs
on the tenant's workers, writes that, and the hosted API server can only call it through the
Konnectivity tunnel. The Konnectivity agent pods run in the tenant's kube-system.

The probe pod carries a node selector no node has: it is admitted (the webhook runs) but never
scheduled, so it takes no card share and no node lock from the later tests.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.hami_evidence import HAMI_SCHEDULER_NAME, Verdict
from tests.acceptance.kube import (
    API_ERRORS,
    REQUEST_TIMEOUT,
    Cluster,
    create_pod,
    describe_error,
    meta,
    pod_spec,
    read_pod,
    retrying,
    scratch_namespace,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import KONNECTIVITY_SELECTOR, SYSTEM_NAMESPACE
from tests.acceptance.report import Evidence
from tests.acceptance.stack import hami_tenants
from tests.acceptance.workloads import UNSCHEDULABLE_SELECTOR, gpu_limits, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


def webhook_probe_pod(run_id: str) -> dict[str, Any]:
    """A GPU pod no node can take: only HAMi's webhook (its scheduler name) is judged."""
    return pod_body(
        "webhook-probe",
        run_id,
        limits=gpu_limits(1, memory_mib=1000, cores=10),
        node_selector=UNSCHEDULABLE_SELECTOR,
    )


def pods_of(cluster: Cluster, namespace: str, selector: str) -> list[Any]:
    def once() -> list[Any]:
        return list(
            cluster.core.list_namespaced_pod(
                namespace, label_selector=selector, _request_timeout=REQUEST_TIMEOUT
            ).items
        )

    return retrying(once)


@pytest.mark.tc("TC-03")
def test_webhook_reached_through_konnectivity(live: LiveStack, evidence: Evidence) -> None:
    verdict = Verdict()
    seen: dict[str, Any] = {}
    gpu_tenants = [t for t in hami_tenants(live.platform) if t.worker_pools]
    if not gpu_tenants:
        why = "no tenant declares worker pools: HAMi's webhook runs on workers"
        if live.platform.mode == "lab":
            pytest.fail(f"{why} (a lab without GPU workers cannot be accepted)", pytrace=False)
        pytest.skip(why)
    for tenant in gpu_tenants:
        cluster = live.tenant(tenant.name)
        row: dict[str, Any] = {}
        seen[tenant.name] = row
        agents = pods_of(cluster, SYSTEM_NAMESPACE, KONNECTIVITY_SELECTOR)
        running = [
            p
            for p in agents
            if p.status
            and p.status.phase == "Running"
            and all(c.ready for c in (p.status.container_statuses or []))
        ]
        row["konnectivityAgents"] = [
            {
                "pod": meta(p).name,
                "node": pod_spec(p).node_name,
                "phase": p.status.phase if p.status else None,
            }
            for p in agents
        ]
        if not running:
            verdict.problems.append(
                f"{tenant.name}: no Running konnectivity-agent pod in kube-system "
                f"({len(agents)} found)"
            )
        with scratch_namespace(cluster, live.run_id) as namespace:
            body = webhook_probe_pod(live.run_id)
            try:
                created = create_pod(cluster, namespace, body)
            except API_ERRORS as exc:
                verdict.problems.append(
                    f"{tenant.name}: creating a GPU pod failed: {describe_error(exc)}"
                )
                row["create"] = describe_error(exc)
            else:
                returned = pod_spec(created).scheduler_name
                stored = pod_spec(read_pod(cluster, namespace, "webhook-probe")).scheduler_name
                row.update(namespace=namespace, returnedSchedulerName=returned, stored=stored)
                if returned != HAMI_SCHEDULER_NAME or stored != HAMI_SCHEDULER_NAME:
                    verdict.problems.append(
                        f"{tenant.name}: GPU pod came back with schedulerName {returned!r} "
                        f"(stored {stored!r}), not {HAMI_SCHEDULER_NAME}: the webhook did not run"
                    )
        evidence.summary(
            f"{tenant.name}: schedulerName={row.get('returnedSchedulerName')}, "
            f"{len(running)} konnectivity-agent Running"
        )
    evidence.record("tenants", seen)
    assert verdict.ok, verdict.explain()
