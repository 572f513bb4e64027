"""TC-00, the platform health check: is each part the GPU tests rely on running (pure functions).

Before any scheduling test, each tenant must show: HAMi's mock device plugin ready on every mock
node without restarts (lab), kube-proxy on every node, CoreDNS ready, a Service name resolving
from a pod and its ClusterIP answering, the Konnectivity tunnel carrying the API server's calls
to the kubelets, HAMi's scheduler ready and (lab) each pool's allocation completer running. A
failure names the broken component and its last log lines, so a user sees *why* before TC-02 ...
TC-06 fail for a confusing reason.

Inputs are plain dicts as the API returns them (``kube.py`` reads them with
``_preload_content=False``), so the offline tests run on recorded API objects
(``samples/health.yaml``).
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.acceptance.hami_evidence import Verdict

LOG_TAIL_LINES = 8
LOG_LINE_LIMIT = 240

# The DNS / Service probe: a pod that resolves the `kubernetes` Service by name through the pod's
# resolver (CoreDNS behind the kube-dns ClusterIP, so kube-proxy too) and opens a TCP connection to
# the address it got (kube-proxy's rules for that ClusterIP). It prints one line per step; the
# judge reads them. Search domains make the short name work with any cluster domain.
DNS_PROBE_NAME = "kubernetes.default.svc"
DNS_PROBE_PORT = 443
DNS_PROBE_SCRIPT = """\
import socket, sys, time
name, port = sys.argv[1], int(sys.argv[2])
for attempt in range(5):
    try:
        ip = socket.gethostbyname(name)
        break
    except OSError as exc:
        error = exc
        time.sleep(2)
else:
    print(f"resolve-failed {name} {error}", flush=True)
    sys.exit(2)
print(f"resolved {name} {ip}", flush=True)
try:
    socket.create_connection((ip, port), timeout=5).close()
except OSError as exc:
    print(f"connect-failed {ip}:{port} {exc}", flush=True)
    sys.exit(3)
print(f"connected {ip}:{port}", flush=True)
"""


@dataclass(frozen=True)
class PodHealth:
    """One pod as the health check reads it."""

    namespace: str
    name: str
    node: str
    phase: str
    ready: bool
    restarts: int
    waiting: str = ""  # e.g. "CrashLoopBackOff: back-off 5m0s restarting failed container"
    last_terminated: str = ""  # e.g. "Error (exit 1)"
    images: tuple[str, ...] = ()
    # Whose log to read: the first broken (or restarted) container, else the first one.
    container: str = ""
    logs: str = ""  # last lines, filled in by the live test for pods that look broken

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"

    @property
    def healthy(self) -> bool:
        return self.phase == "Running" and self.ready

    def describe(self) -> str:
        parts = [self.phase or "no phase", "ready" if self.ready else "not ready"]
        if self.node:
            parts.append(f"on {self.node}")
        if self.restarts:
            parts.append(f"{self.restarts} restarts")
        if self.waiting:
            parts.append(f"waiting: {self.waiting}")
        if self.last_terminated:
            parts.append(f"last terminated: {self.last_terminated}")
        return f"{self.key} ({', '.join(parts)})"

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.key,
            "node": self.node,
            "phase": self.phase,
            "ready": self.ready,
            "restarts": self.restarts,
            "waiting": self.waiting,
            "lastTerminated": self.last_terminated,
        }


def pod_health(pod: Mapping[str, Any]) -> PodHealth:
    """A core/v1 Pod (plain dict) -> PodHealth."""
    metadata = pod.get("metadata") or {}
    spec = pod.get("spec") or {}
    status = pod.get("status") or {}
    conditions = status.get("conditions") or []
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions)
    statuses = [
        *(status.get("initContainerStatuses") or []),
        *(status.get("containerStatuses") or []),
    ]
    restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
    waiting = ""
    last_terminated = ""
    containers = [str(c.get("name", "")) for c in spec.get("containers") or []]
    suspect = ""
    for item in statuses:
        state = (item.get("state") or {}).get("waiting")
        if state and not waiting:
            waiting = ": ".join(p for p in (state.get("reason"), state.get("message")) if p)
        last = (item.get("lastState") or {}).get("terminated")
        if last and not last_terminated:
            last_terminated = f"{last.get('reason') or 'terminated'} (exit {last.get('exitCode')})"
        troubled = state or last or not item.get("ready") or int(item.get("restartCount") or 0)
        if troubled and not suspect and item.get("name") in containers:
            suspect = str(item.get("name"))
    return PodHealth(
        namespace=str(metadata.get("namespace") or ""),
        name=str(metadata.get("name") or ""),
        node=str(spec.get("nodeName") or ""),
        phase=str(status.get("phase") or ""),
        ready=ready,
        restarts=restarts,
        waiting=waiting,
        last_terminated=last_terminated,
        images=tuple(str(c.get("image", "")) for c in spec.get("containers") or []),
        container=suspect or (containers[0] if containers else ""),
    )


def needs_logs(pod: PodHealth, *, no_restarts: bool) -> bool:
    """Whether the live test should fetch this pod's last log lines for the report."""
    return not pod.healthy or (no_restarts and pod.restarts > 0)


def tail(text: str, lines: int = LOG_TAIL_LINES) -> str:
    """The last ``lines`` non-empty lines, each shortened (for a one-paragraph failure)."""
    kept = [line.rstrip() for line in text.splitlines() if line.strip()][-lines:]
    return " | ".join(
        line if len(line) <= LOG_LINE_LIMIT else line[: LOG_LINE_LIMIT - 1] + "…" for line in kept
    )


@dataclass
class Component:
    """One part of the platform inside a tenant and the pods found for it."""

    name: str  # what the user reads, e.g. "mock device plugin"
    where: str  # how it was looked for, e.g. "DaemonSet hami-system/hami-mock-device-plugin"
    pods: list[PodHealth] = field(default_factory=list)
    found: bool = True  # False: the workload itself (DaemonSet, Deployment) does not exist
    every_node: Collection[str] = ()  # a healthy pod is needed on each of these nodes
    min_healthy: int = 1
    no_restarts: bool = False
    desired: int | None = None  # a DaemonSet's status.desiredNumberScheduled
    ready: int | None = None  # its status.numberReady

    def as_dict(self) -> dict[str, Any]:
        return {
            "where": self.where,
            "found": self.found,
            "pods": [p.as_dict() for p in self.pods],
            "everyNode": sorted(self.every_node),
            "desired": self.desired,
            "ready": self.ready,
        }


def judge_component(component: Component) -> list[str]:
    """Problems of one component, each naming it; then, once per broken pod whose logs were
    read, its last log lines."""
    name = f"{component.name} ({component.where})"
    if not component.found:
        return [f"{name}: not found"]
    problems: list[str] = []
    healthy = [p for p in component.pods if p.healthy]
    blamed: list[PodHealth] = []
    if component.every_node:
        for node in sorted(component.every_node):
            if any(p.node == node for p in healthy):
                continue
            on_node = [p for p in component.pods if p.node == node]
            blamed += on_node
            seen = "; ".join(p.describe() for p in on_node) or "no pod there"
            problems.append(f"{name}: no running and ready pod on node {node} ({seen})")
    elif len(healthy) < component.min_healthy:
        blamed += component.pods
        seen = "; ".join(p.describe() for p in component.pods) or "no pod"
        problems.append(
            f"{name}: {len(healthy)} of at least {component.min_healthy} pods running and "
            f"ready: {seen}"
        )
    others = [p for p in component.pods if not p.healthy and p not in blamed]
    if others:
        blamed += others
        problems.append(
            f"{name}: pods not running and ready: {'; '.join(p.describe() for p in others)}"
        )
    if component.no_restarts:
        restarted = [p for p in component.pods if p.restarts > 0]
        if restarted:
            blamed += [p for p in restarted if p not in blamed]
            problems.append(f"{name}: restarted: {'; '.join(p.describe() for p in restarted)}")
    if (
        component.desired is not None
        and component.ready is not None
        and component.ready < component.desired
    ):
        problems.append(f"{name}: {component.ready} of {component.desired} pods ready")
    problems.extend(f"{name}: {p.key} last log lines: {p.logs}" for p in blamed if p.logs)
    return problems


@dataclass(frozen=True)
class DnsProbe:
    """The DNS / Service probe pod's outcome."""

    phase: str  # Succeeded | Failed | Pending ... (after the bounded wait)
    logs: str
    service_ip: str  # the `kubernetes` Service's ClusterIP, read through the API
    error: str = ""  # creating or reading the probe failed


def judge_dns_probe(probe: DnsProbe) -> list[str]:
    """Problems the probe shows: the name did not resolve, resolved elsewhere, or did not answer."""
    resolved = ""
    connected = False
    failed = ""
    for line in probe.logs.splitlines():
        words = line.split()
        if len(words) >= 3 and words[0] == "resolved" and words[1] == DNS_PROBE_NAME:
            resolved = words[2]
        elif words and words[0] == "connected":
            connected = True
        elif words and words[0] in ("resolve-failed", "connect-failed"):
            failed = line.strip()
    if probe.error:
        return [f"DNS probe: {probe.error}"]
    logs = tail(probe.logs) or "no output"
    if not resolved:
        return [
            f"DNS: {DNS_PROBE_NAME} did not resolve from a pod (CoreDNS, or kube-proxy's rules for "
            f"the kube-dns Service; probe {probe.phase or 'no phase'}): {failed or logs}"
        ]
    problems: list[str] = []
    if probe.service_ip and resolved != probe.service_ip:
        problems.append(
            f"DNS: {DNS_PROBE_NAME} resolved to {resolved}, the Service's ClusterIP is "
            f"{probe.service_ip}"
        )
    if not connected or probe.phase != "Succeeded":
        problems.append(
            f"kube-proxy: {resolved}:{DNS_PROBE_PORT} (the `kubernetes` Service) did not answer "
            f"from a pod (probe {probe.phase or 'no phase'}): {failed or logs}"
        )
    return problems


@dataclass(frozen=True)
class TunnelCheck:
    """Whether the tenant API server reached a kubelet (a pod log read goes API server ->
    Konnectivity server -> agent -> kubelet; Kamaji's hosted API server has no other route)."""

    pod: str  # the pod whose log was read
    ok: bool
    error: str = ""


def judge_tunnel(check: TunnelCheck | None) -> list[str]:
    if check is None:
        return ["Konnectivity: no agent pod to read a log from, so the tunnel cannot be shown"]
    if check.ok:
        return []
    return [
        f"Konnectivity: the API server could not reach the kubelet to read {check.pod}'s log "
        f"(tunnel down or agent not connected): {check.error}"
    ]


def judge_platform_health(
    tenant: str,
    components: Sequence[Component],
    *,
    tunnel: TunnelCheck | None,
    dns: DnsProbe | None,
) -> Verdict:
    """TC-00 for one tenant: every component healthy, the tunnel carrying calls, DNS working."""
    verdict = Verdict()
    broken: list[str] = []
    for component in components:
        found = judge_component(component)
        if found:
            broken.append(component.name)
        verdict.problems.extend(f"{tenant}: {p}" for p in found)
    tunnel_problems = judge_tunnel(tunnel)
    if tunnel_problems:
        broken.append("Konnectivity tunnel")
    verdict.problems.extend(f"{tenant}: {p}" for p in tunnel_problems)
    dns_problems = ["DNS: the probe did not run"] if dns is None else judge_dns_probe(dns)
    if dns_problems:
        broken.append("DNS / Service probe")
    verdict.problems.extend(f"{tenant}: {p}" for p in dns_problems)
    verdict.facts = {
        "tenant": tenant,
        "broken": broken,
        "components": {c.name: c.as_dict() for c in components},
        "tunnel": None if tunnel is None else dataclasses.asdict(tunnel),
        "dns": None if dns is None else {**dataclasses.asdict(dns), "logs": tail(dns.logs)},
    }
    return verdict
