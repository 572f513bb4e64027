"""TC-16 (negative): with Konnectivity down, the tenant API server cannot reach HAMi's webhook.

TC-03 shows the webhook path works; this shows it is the Konnectivity tunnel that carries it.
In the first tenant with workers:

* a NetworkPolicy in kube-system denies all egress of the konnectivity-agent pods (their pod
  network is Calico's, which enforces it; Kamaji's agent DaemonSet runs off the host network by
  default, ``spec.addons.konnectivity.agent.hostNetwork``), and the agent pods are deleted, so
  their DaemonSet restarts them behind the policy and the tunnel's established connections go
  with the old pods. Kamaji watches the agent's DaemonSet, ServiceAccount and
  ClusterRoleBinding and would undo changes to those (Kamaji 26.8.2-edge
  controllers/soot/controllers/konnectivity.go:89-123), not NetworkPolicies;
* a GPU pod created through the tenant API must then be refused with "failed calling webhook
  \\"vgpu.hami.io\\"" (HAMi's webhook is failurePolicy Fail), while the API server answers plain
  requests;
* the policy is removed and the agents restarted again (also on failure); within
  ``RESTORE_SECONDS`` a GPU pod must come back mutated by HAMi.

kube-system is excluded from HAMi's webhook (components/tenant_values.py
webhook_excluded_namespaces), so the agents themselves can always be recreated. The tenant's
webhooks, logs and exec are unavailable for the minute this takes: it runs on the lab, and on
another stack only with ``GPU_PLATFORM_ACCEPTANCE_DISRUPTIVE=1`` (a maintenance window).
"""

from __future__ import annotations

import os
import time
from typing import Any, cast

import pytest
from kubernetes import client as k8s

from tests.acceptance.hami_evidence import TunnelCut, judge_tunnel_cut
from tests.acceptance.kube import (
    API_ERRORS,
    REQUEST_TIMEOUT,
    Cluster,
    api_message,
    create_pod,
    describe_error,
    pod_spec,
    pods_raw,
    poll_until,
    retrying,
    scratch_namespace,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import KONNECTIVITY_SELECTOR, SYSTEM_NAMESPACE
from tests.acceptance.report import Evidence
from tests.acceptance.stack import hami_tenants
from tests.acceptance.workloads import (
    CUT_POLICY,
    UNSCHEDULABLE_SELECTOR,
    deny_egress_policy,
    gpu_limits,
    pod_body,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

# Outside the lab TC-16 runs only when asked: it takes the tenant's webhooks, logs and exec away.
DISRUPTIVE_ENV = "GPU_PLATFORM_ACCEPTANCE_DISRUPTIVE"
CUT_SECONDS = 120.0  # for the restarted agents to be back (Running) behind the policy
RESTORE_SECONDS = 180.0  # from lifting the policy to a GPU pod mutated by HAMi again


def agent_uids(cluster: Cluster) -> set[str]:
    pods = pods_raw(cluster, SYSTEM_NAMESPACE, KONNECTIVITY_SELECTOR)
    return {str((p.get("metadata") or {}).get("uid", "")) for p in pods}


def restart_agents(cluster: Cluster) -> bool:
    """Delete the agent pods and wait (bounded) until new ones run; True when they do."""
    old = agent_uids(cluster)
    names = sorted(
        str((p.get("metadata") or {}).get("name", ""))
        for p in pods_raw(cluster, SYSTEM_NAMESPACE, KONNECTIVITY_SELECTOR)
    )

    def delete(name: str) -> Any:
        return cluster.core.delete_namespaced_pod(
            name, SYSTEM_NAMESPACE, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
        )

    for name in names:
        retrying(lambda: delete(name))  # noqa: B023 - called at once, within the iteration

    def replaced() -> bool | None:
        pods = pods_raw(cluster, SYSTEM_NAMESPACE, KONNECTIVITY_SELECTOR)
        uids = {str((p.get("metadata") or {}).get("uid", "")) for p in pods}
        running = all((p.get("status") or {}).get("phase") == "Running" for p in pods)
        return True if pods and not uids & old and running else None

    return poll_until(replaced, timeout=CUT_SECONDS, interval=2.0) is not None


def unschedulable_gpu_pod(run_id: str, name: str) -> dict[str, Any]:
    return pod_body(
        name,
        run_id,
        limits=gpu_limits(1, memory_mib=1000, cores=10),
        node_selector=UNSCHEDULABLE_SELECTOR,
    )


def try_gpu_pod(cluster: Cluster, namespace: str, run_id: str, name: str) -> tuple[Any, Any]:
    """(created pod, None) or (None, the ApiException) for one GPU pod that is never scheduled."""
    body = unschedulable_gpu_pod(run_id, name)
    try:
        return create_pod(cluster, namespace, body), None
    except k8s.ApiException as exc:
        return None, exc


@pytest.mark.tc("TC-16")
def test_webhook_unreachable_without_konnectivity(live: LiveStack, evidence: Evidence) -> None:
    if live.platform.mode != "lab" and os.environ.get(DISRUPTIVE_ENV) != "1":
        pytest.skip(
            f"TC-16 cuts a tenant's Konnectivity tunnel for about a minute: on a "
            f"{live.platform.mode} "
            f"stack it runs only with {DISRUPTIVE_ENV}=1"
        )
    # HAMi's webhook judges GPU pods on a hami tenant; on a dra tenant the tenant's policy
    # refuses HAMi's resources (dra-tenant-no-hami-resources), so TC-16's pod has no business there.
    tenants = [t for t in hami_tenants(live.platform) if t.worker_pools]
    if not tenants:
        pytest.skip(
            "no gpuSharing: hami tenant declares worker pools: HAMi's webhook runs on workers"
        )
    tenant = tenants[0].name
    cluster = live.tenant(tenant)
    networking = k8s.NetworkingV1Api(cluster.api)
    created_scheduler = restored_scheduler = None
    status, message = None, ""
    recovered = None
    with scratch_namespace(cluster, live.run_id) as namespace:
        # A run killed between create and finally (SIGKILL) leaves the tunnel cut: remove a
        # leftover policy first, so this run neither fails on 409 nor keeps the cut.
        try:
            networking.delete_namespaced_network_policy(
                CUT_POLICY, SYSTEM_NAMESPACE, _request_timeout=REQUEST_TIMEOUT
            )
            restart_agents(cluster)
        except k8s.ApiException as exc:
            if exc.status != 404:
                raise
        networking.create_namespaced_network_policy(
            SYSTEM_NAMESPACE,
            cast(Any, deny_egress_policy(live.run_id, SYSTEM_NAMESPACE, KONNECTIVITY_SELECTOR)),
            _request_timeout=REQUEST_TIMEOUT,
        )
        try:
            replaced = restart_agents(cluster)
            try:
                cluster.core.list_namespace(limit=1, _request_timeout=REQUEST_TIMEOUT)
                answered = True
            except API_ERRORS:
                answered = False
            pod, error = try_gpu_pod(cluster, namespace, live.run_id, "cut-probe")
            if pod is not None:
                created_scheduler = pod_spec(pod).scheduler_name
            else:
                status, message = error.status, api_message(error) or describe_error(error)
        finally:
            retrying(
                lambda: networking.delete_namespaced_network_policy(
                    CUT_POLICY, SYSTEM_NAMESPACE, _request_timeout=REQUEST_TIMEOUT
                )
            )
            lifted = time.monotonic()
            restart_agents(cluster)

        def mutated() -> str | None:
            found, _ = try_gpu_pod(
                cluster, namespace, live.run_id, f"restored-{int(time.monotonic())}"
            )
            name = pod_spec(found).scheduler_name if found is not None else None
            return name if name else None

        restored_scheduler = poll_until(mutated, timeout=RESTORE_SECONDS, interval=5.0)
        if restored_scheduler is not None:
            recovered = time.monotonic() - lifted
    cut = TunnelCut(
        tenant=tenant,
        agents_replaced=replaced,
        api_answered=answered,
        create_status=status,
        create_message=message,
        created_scheduler=created_scheduler,
        restored_scheduler=restored_scheduler,
        recovered_seconds=recovered,
    )
    verdict = judge_tunnel_cut(cut)
    evidence.record("cut", verdict.facts)
    evidence.summary(
        f"{tenant}: with the agents cut off, GPU pod "
        + (f"refused {status}: {message[:160]}" if status is not None else "admitted")
        + f"; restored: {restored_scheduler or 'not'}"
        + (f" in {recovered:.0f} s" if recovered is not None else "")
    )
    assert verdict.ok, verdict.explain()
