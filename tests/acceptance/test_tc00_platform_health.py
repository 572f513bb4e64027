"""TC-00: the platform health check, first, so a user sees *why* before a scheduling test fails.

Per tenant with workers, through its own API server:

* HAMi's mock device plugin (lab, mock pools): its DaemonSet has a running, ready pod on every
  mock node and no pod restarted (found by image or chart label, whatever its name);
* kube-proxy: a running, ready pod on every node; CoreDNS: at least one running, ready pod;
* a Service name resolves from a pod: a probe pod resolves ``kubernetes.default.svc`` to the
  ``kubernetes`` Service's ClusterIP and connects to it (CoreDNS and kube-proxy at work);
* the Konnectivity agent runs and the tunnel carries the API server's calls: a pod log is read
  through the tenant API (Kamaji's hosted API server reaches kubelets only through it);
* HAMi's scheduler runs; (lab) each mock pool's allocation completer runs.

A broken component is named with its pods' state and their last log lines.
"""

from __future__ import annotations

import dataclasses
from typing import Any

import pytest

from components.versions import PINNED
from tests.acceptance.hami_evidence import Verdict
from tests.acceptance.health import (
    DNS_PROBE_NAME,
    DNS_PROBE_PORT,
    DNS_PROBE_SCRIPT,
    Component,
    DnsProbe,
    PodHealth,
    TunnelCheck,
    judge_platform_health,
    needs_logs,
    pod_health,
    tail,
)
from tests.acceptance.kube import (
    API_ERRORS,
    REQUEST_TIMEOUT,
    Cluster,
    create_pod,
    daemonsets_raw,
    describe_error,
    list_nodes,
    log_or_reason,
    pod_log,
    pods_raw,
    poll_until,
    pool_nodes,
    retrying,
    scratch_namespace,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import (
    COREDNS_SELECTOR,
    HAMI_NAMESPACE,
    HAMI_SCHEDULER_SELECTOR,
    HAMI_WEBHOOK_IGNORE,
    KONNECTIVITY_SELECTOR,
    KUBE_PROXY_SELECTOR,
    MOCK_PLUGIN_IMAGE,
    SYSTEM_NAMESPACE,
    completer_name,
    completer_selector,
    is_mock_device_plugin,
    selector_of,
)
from tests.acceptance.report import Evidence
from tests.acceptance.stack import shares_with_hami, uses_mock
from tests.acceptance.workloads import pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

# The probe runs the image the lab's completer already runs on every worker (no extra pull in the
# lab); it has Python, whose resolver uses the pod's resolv.conf search domains.
PROBE_IMAGE = PINNED.completer_image
PROBE_TIMEOUT = 180.0  # image pull included


def dns_probe_pod(name: str, run_id: str) -> dict[str, Any]:
    """The DNS and tunnel probe: no GPU, kept out of HAMi's webhook (its health is judged apart)."""
    return pod_body(
        name,
        run_id,
        image=PROBE_IMAGE,
        command=["python3", "-c", DNS_PROBE_SCRIPT, DNS_PROBE_NAME, str(DNS_PROBE_PORT)],
        labels=HAMI_WEBHOOK_IGNORE,
    )


def _pods(cluster: Cluster, namespace: str | None, selector: str) -> list[PodHealth]:
    return [pod_health(p) for p in pods_raw(cluster, namespace, selector)]


def _mock_plugin(cluster: Cluster, nodes: list[str]) -> Component:
    found = [d for d in daemonsets_raw(cluster) if is_mock_device_plugin(d)]
    component = Component(
        name="mock device plugin",
        where=", ".join(
            f"DaemonSet {(d.get('metadata') or {}).get('namespace')}/"
            f"{(d.get('metadata') or {}).get('name')}"
            for d in found
        )
        or f"a DaemonSet running {MOCK_PLUGIN_IMAGE}",
        found=bool(found),
        every_node=nodes,
        min_healthy=max(1, len(nodes)),
        no_restarts=True,
    )
    if found:
        component.desired = sum(
            int((d.get("status") or {}).get("desiredNumberScheduled") or 0) for d in found
        )
        component.ready = sum(int((d.get("status") or {}).get("numberReady") or 0) for d in found)
    for daemonset in found:
        metadata = daemonset.get("metadata") or {}
        labels = ((daemonset.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        component.pods.extend(_pods(cluster, str(metadata.get("namespace")), selector_of(labels)))
    return component


def _with_logs(cluster: Cluster, component: Component) -> Component:
    """The component with the last log lines of each pod that looks broken."""
    pods = [
        dataclasses.replace(
            pod,
            logs=tail(
                log_or_reason(
                    cluster,
                    pod.namespace,
                    pod.name,
                    container=pod.container,
                    previous=pod.restarts > 0,
                )
            ),
        )
        if needs_logs(pod, no_restarts=component.no_restarts)
        else pod
        for pod in component.pods
    ]
    return dataclasses.replace(component, pods=pods)


def _tunnel(cluster: Cluster, components: list[Component]) -> TunnelCheck | None:
    """Read one healthy pod's log through the API server: a Konnectivity agent's if one runs."""
    by_name = {c.name: c for c in components}
    candidates = [p for p in by_name["Konnectivity agent"].pods if p.healthy]
    candidates += [p for c in components for p in c.pods if p.healthy]
    if not candidates:
        return None
    pod = candidates[0]
    try:
        retrying(
            lambda: pod_log(cluster, pod.namespace, pod.name, container=pod.container, lines=3)
        )
    except API_ERRORS as exc:
        return TunnelCheck(pod=pod.key, ok=False, error=describe_error(exc))
    return TunnelCheck(pod=pod.key, ok=True)


def _dns_probe(live: LiveStack, cluster: Cluster) -> DnsProbe:
    try:
        service = retrying(
            lambda: cluster.core.read_namespaced_service(
                "kubernetes", "default", _request_timeout=REQUEST_TIMEOUT
            )
        )
        service_ip = str(service.spec.cluster_ip if service.spec else "")
    except API_ERRORS as exc:
        return DnsProbe("", "", "", error=f"the `kubernetes` Service: {describe_error(exc)}")
    name = "dns-probe"
    with scratch_namespace(cluster, live.run_id) as namespace:
        body = dns_probe_pod(name, live.run_id)
        try:
            create_pod(cluster, namespace, body)
        except API_ERRORS as exc:
            why = f"creating the probe pod: {describe_error(exc)}"
            return DnsProbe("", "", service_ip, error=why)

        def finished() -> PodHealth | None:
            for raw in pods_raw(cluster, namespace, ""):
                seen = pod_health(raw)
                if seen.phase in ("Succeeded", "Failed"):
                    return seen
            return None

        done = poll_until(finished, timeout=PROBE_TIMEOUT, interval=2.0)
        logs = log_or_reason(cluster, namespace, name)
        if done is None:
            last = [pod_health(p) for p in pods_raw(cluster, namespace, "")]
            state = "; ".join(p.describe() for p in last) or "no pod"
            return DnsProbe(
                "",
                logs,
                service_ip,
                error=f"the probe pod did not finish within {PROBE_TIMEOUT:.0f} s: {state}",
            )
        return DnsProbe(done.phase, logs, service_ip)


def tenant_health(live: LiveStack, tenant_name: str) -> Verdict:
    platform = live.platform
    tenant = next(t for t in platform.tenants if t.name == tenant_name)
    cluster = live.tenants[tenant_name]
    nodes = list_nodes(cluster)
    outputs = live.outputs.tenants[tenant_name]
    mock_nodes: list[str] = []
    mock_pools = [
        p for p in tenant.worker_pools if shares_with_hami(tenant) and uses_mock(platform, p)
    ]
    for pool in mock_pools:
        found, missing = pool_nodes(pool.name, outputs.pools[pool.name].nodes, nodes)
        mock_nodes += [n.name for n in found] + missing
    components = [
        Component(
            name="kube-proxy",
            where=f"pods {KUBE_PROXY_SELECTOR} in {SYSTEM_NAMESPACE}",
            pods=_pods(cluster, SYSTEM_NAMESPACE, KUBE_PROXY_SELECTOR),
            every_node=[n.name for n in nodes],
            min_healthy=max(1, len(nodes)),
        ),
        Component(
            name="CoreDNS",
            where=f"pods {COREDNS_SELECTOR} in {SYSTEM_NAMESPACE}",
            pods=_pods(cluster, SYSTEM_NAMESPACE, COREDNS_SELECTOR),
        ),
        Component(
            name="Konnectivity agent",
            where=f"pods {KONNECTIVITY_SELECTOR} in {SYSTEM_NAMESPACE}",
            pods=_pods(cluster, SYSTEM_NAMESPACE, KONNECTIVITY_SELECTOR),
        ),
        Component(
            name="HAMi scheduler",
            where=f"pods {HAMI_SCHEDULER_SELECTOR} in {HAMI_NAMESPACE}",
            pods=_pods(cluster, HAMI_NAMESPACE, HAMI_SCHEDULER_SELECTOR),
        ),
    ]
    if mock_pools:
        components.insert(0, _mock_plugin(cluster, mock_nodes))
    if platform.mode == "lab":
        for pool in mock_pools:
            components.append(
                Component(
                    name=f"allocation completer of pool {pool.name}",
                    where=f"pods {completer_selector(pool.name)} (Deployment "
                    f"{completer_name(pool.name)})",
                    pods=_pods(cluster, None, completer_selector(pool.name)),
                )
            )
    components = [_with_logs(cluster, c) for c in components]
    tunnel = _tunnel(cluster, components)
    dns = _dns_probe(live, cluster)
    return judge_platform_health(tenant_name, components, tunnel=tunnel, dns=dns)


@pytest.mark.tc("TC-00")
def test_platform_health(live: LiveStack, evidence: Evidence) -> None:
    verdict = Verdict()
    seen: dict[str, Any] = {}
    for tenant in live.platform.tenants:
        if not tenant.worker_pools:
            seen[tenant.name] = "no worker pools: nothing runs on workers"
            continue
        if tenant.name in live.unreachable:
            verdict.problems.append(f"{tenant.name}: {live.unreachable[tenant.name]}")
            continue
        judged = tenant_health(live, tenant.name)
        verdict.problems.extend(judged.problems)
        seen[tenant.name] = judged.facts
        broken = judged.facts["broken"]
        if broken:
            evidence.summary(f"{tenant.name}: BROKEN {', '.join(broken)}")
        else:
            dns = judged.facts["dns"] or {}
            evidence.summary(
                f"{tenant.name}: {', '.join(judged.facts['components'])} running; "
                f"{DNS_PROBE_NAME} -> {dns.get('serviceIP')}; tunnel carries calls"
            )
    evidence.record("tenants", seen)
    assert verdict.ok, verdict.explain()
