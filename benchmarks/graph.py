"""The deployment critical path of a recorded resource graph, and who waits for whom.

Pure: works on ``Node``s (built from the harness's ``Registration``s with ``nodes_from``).

What a resource waits for in a ``pulumi up`` is what the SDK awaits before it registers it:

* every URN in its ``dependencies`` and ``property_dependencies`` (explicit ``depends_on`` and the
  resources behind its input Outputs) — until that resource is created;
* its provider — until the provider is created;
* its parent's URN — a custom parent resolves when it is created; a component resolves when it
  registers, i.e. once its own dependencies and its parent resolved (so the children of a
  component built with ``depends_on=[x]`` wait for ``x`` too).

Depending on a ComponentResource means waiting for all its descendants (not for the children of
a descendant *custom* resource). The Python SDK already expands such a dependency into the
descendants' URNs before it registers, so recordings rarely name a component in ``dependencies``;
when one does, it is expanded here the same way.

Components take no time themselves. Custom resources take the estimate from ``DURATIONS``:
*the time until the resource is usable* — what anything after it effectively waits for, whether
Pulumi's own await (Helm ``skip_await=False``, Deployments) or a later polling step does the
waiting (a Command that only polls is thus short). The critical path is a lower bound: it assumes
unlimited ``--parallel`` and a management cluster that reconciles every tenant at once.

One wait a recording cannot show is added (``node_waits``): a tenant cluster's only nodes are its
workers (Kamaji hosts the control plane outside it), so a tenant Helm release or workload whose
pods Pulumi awaits is usable only once the tenant's workers have joined.

Waits a recording cannot show, hence not modelled: a resource created inside an ``apply`` (it is
registered only once that Output resolves, with no edge to where it came from), and the Output a
read's ``id`` comes from (awaited, not sent to the engine).
"""

from __future__ import annotations

import heapq
from collections import defaultdict
from collections.abc import Callable, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from fnmatch import fnmatchcase
from typing import Any, Literal

TENANT_SUFFIX = ":GpuTenant"
POOL_SUFFIX = ":GpuWorkerPool"


@dataclass(frozen=True)
class Node:
    """One registered resource, reduced to what ordering depends on."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str = ""
    provider: str = ""  # the provider's URN (without ``::id``)
    dependencies: tuple[str, ...] = ()
    read: bool = False  # an existing object read (``.get``), not one the program creates


def nodes_from(registrations: Iterable[Any]) -> list[Node]:
    """``Node``s from objects shaped like ``tests.support.harness.Registration``."""
    nodes: list[Node] = []
    for reg in registrations:
        deps: list[str] = list(reg.dependencies)
        for urns in reg.property_dependencies.values():
            deps.extend(urns)
        provider = reg.provider.rsplit("::", 1)[0] if reg.provider else ""
        nodes.append(
            Node(
                urn=reg.urn,
                type=reg.type,
                name=reg.name,
                custom=bool(reg.custom),
                parent=reg.parent or "",
                provider=provider,
                dependencies=tuple(dict.fromkeys(deps)),
                read=bool(getattr(reg, "read", False)),
            )
        )
    return nodes


# ------------------------------------------------------------------------------ estimates


@dataclass(frozen=True)
class Estimate:
    """Seconds until a resource of ``type_glob`` named like ``name_glob`` is usable."""

    type_glob: str
    name_glob: str
    seconds: float
    why: str
    # The part of ``seconds`` spent pulling images from the internet on a cold host, and how many
    # images (benchmarks.bringup charges them per run: from the internet, from the registry
    # caches, or not at all once pulled ahead). ``where``: "host" (Docker's own image store,
    # kept between runs), "cluster" (a node's containerd, emptied by every destroy), "" (none).
    pulls: float = 0
    images: int = 0
    where: str = ""

    def matches(self, node: Node) -> bool:
        return fnmatchcase(node.type, self.type_glob) and fnmatchcase(node.name, self.name_glob)


HELM = "kubernetes:helm.sh/v3:Release"
COMMAND = "command:local:Command"

# THE duration estimates: first matching row wins (specific rows before general ones). Types that
# cover very different work (a Command, a Helm release) are refined by resource name.
DURATIONS: tuple[Estimate, ...] = (
    Estimate("gpu-platform:*", "*", 0, "component: takes no time itself"),
    Estimate("pulumi:providers:*", "*", 0, "provider: configured in-process"),
    Estimate(COMMAND, "*preflight*", 2, "host checks"),
    Estimate(
        COMMAND,
        "*kind-cluster*",
        90,
        "kind create cluster: node image, control plane",
        pulls=50,
        images=1,
        where="host",
    ),
    Estimate(
        COMMAND,
        "*registry-caches*",
        5,
        "registry caches started (registry image pulled once per host)",
        pulls=3,
        images=1,
        where="host",
    ),
    Estimate(COMMAND, "*node-mirrors*", 3, "hosts.toml written into the node"),
    Estimate(COMMAND, "*node-images*", 3, "hosts.toml, then images pulled ahead (bringup.py)"),
    Estimate(COMMAND, "*join*", 60, "kubeadm join of a kindest/node worker, kubelet bootstrap"),
    # The tenant's served-version gate reads /version until six answers in a row are the
    # tenant's version, 5 s apart (scripts/tenant/served-version.sh: SERVED_READS 6,
    # WAIT_POLL_SECONDS 5): at least 25 s even when the tenant serves it at once.
    Estimate(COMMAND, "*-served-version", 25, "six reads of the tenant's /version, 5 s apart"),
    Estimate(COMMAND, "*", 5, "short host script (docker inspect, labels, inventory, polls)"),
    Estimate("command:remote:Command", "*", 10, "remote script over SSH"),
    Estimate(
        "docker:index/remoteImage:RemoteImage",
        "*",
        60,
        "image pull (kindest/node)",
        pulls=60,
        images=1,
        where="host",
    ),
    Estimate("docker:index/container:Container", "*", 10, "container start, systemd boots"),
    Estimate("docker:*", "*", 2, "docker network / volume"),
    Estimate(HELM, "*gpu-operator*", 300, "GPU Operator: driver + toolkit on GPU nodes"),
    Estimate(HELM, "*cert-manager*", 60, "chart install, webhook ready", 20, 4, "cluster"),
    Estimate(HELM, "*metallb*", 45, "chart install, speaker ready", 15, 2, "cluster"),
    # The management cluster's default etcd, its own release beside cert-manager: the cfssl
    # certificate job, the member with its PVC, the root-user job (kamaji-etcd v0.17.0
    # etcd_job_preinstall_1.yaml, etcd_sts.yaml, etcd_job_preinstall_2.yaml); the lab runs one
    # member (components/lab/substrate.py), prod's three take about the dedicated row's time.
    Estimate(
        HELM,
        "management-kamaji-etcd",
        65,
        "default etcd (lab: 1 member): certificate job, member + PVC, root-user job",
        pulls=20,
        images=4,
        where="cluster",
    ),
    Estimate(HELM, "*etcd*", 90, "dedicated kamaji-etcd: 3 members, PVCs, certificates"),
    # Kamaji alone: its webhook Certificate issued by cert-manager, the controller rolled out
    # (readiness probe after 5 s, every 10 s: charts/kamaji/values.yaml:33-39 at 26.8.2-edge).
    Estimate(
        HELM, "*kamaji*", 38, "Kamaji's controller: webhook certificate, rollout", 8, 1, "cluster"
    ),
    Estimate(HELM, "*calico-crds*", 10, "CRD-only chart: its CRDs established"),
    Estimate(
        HELM, "*tigera*", 90, "tigera-operator + calico-node on the workers", 50, 8, "cluster"
    ),
    Estimate(
        HELM, "*calico*", 90, "tigera-operator + calico-node on the workers", 50, 8, "cluster"
    ),
    Estimate(HELM, "*cluster-api*", 90, "cluster-api-operator + providers"),
    Estimate(HELM, "*capi*", 90, "cluster-api-operator + providers"),
    Estimate(HELM, "*hami*", 60, "HAMi scheduler + webhook ready", 30, 3, "cluster"),
    Estimate(HELM, "*", 60, "chart install with skip_await=False"),
    Estimate(
        "kubernetes:kamaji.clastix.io/*:TenantControlPlane",
        "*",
        60,
        "certificates, kubeconfigs, control-plane rollout, LB address",
        pulls=5,
        images=1,
        where="cluster",
    ),
    Estimate("kubernetes:kamaji.clastix.io/*:DataStore", "*", 2, "object accepted"),
    Estimate(
        "kubernetes:controlplane.cluster.x-k8s.io/*:KamajiControlPlane",
        "*",
        90,
        "CAPI reconciles it into a TenantControlPlane, then as a TCP",
    ),
    Estimate(
        "kubernetes:cluster.x-k8s.io/*:MachineDeployment",
        "*",
        900,
        "bare-metal machines: inspection, image write, reboot, join (Metal3)",
    ),
    Estimate("kubernetes:operator.cluster.x-k8s.io/*", "*", 60, "CAPI provider installed"),
    Estimate("kubernetes:cluster.x-k8s.io/*", "*", 5, "CAPI object accepted"),
    Estimate(
        "kubernetes:apps/v1:*",
        "*",
        30,
        "workload rollout (awaited by pulumi-kubernetes)",
        pulls=10,
        images=1,
        where="cluster",
    ),
    Estimate("kubernetes:batch/v1:Job", "*", 30, "job completes (awaited)", 5, 1, "cluster"),
    Estimate("kubernetes:core/v1:Service", "*", 5, "service, LoadBalancer address"),
    Estimate("kubernetes:*", "*", 2, "plain Kubernetes object (namespace, secret, quota, ...)"),
    Estimate("random:*", "*", 0, "computed locally"),
    Estimate("tls:*", "*", 0, "computed locally"),
    Estimate("*", "*", 5, "unlisted type: default guess"),
)
# A read of an existing object (``.get``) is one GET, whatever the object's type.
READ = Estimate("*", "*", 1, "read of an existing object: one GET")


def estimate(node: Node, table: Sequence[Estimate] = DURATIONS) -> Estimate:
    """The first row of ``table`` matching ``node``; components always take 0 seconds."""
    if not node.custom:
        return Estimate(node.type, "*", 0, "component: takes no time itself")
    if node.read:
        return READ
    for row in table:
        if row.matches(node):
            return row
    return Estimate("*", "*", 0, "no row matched")


def duration_weight(node: Node) -> float:
    return estimate(node).seconds


def count_weight(node: Node) -> float:
    """Counts custom resources: the critical path by resource count."""
    return 1.0 if node.custom else 0.0


# ------------------------------------------------------------------------------ event graph

Kind = Literal["fin", "done"]
Event = tuple[Kind, str]  # ("fin", urn): created / registered; ("done", urn): a component's subtree


@dataclass
class _Graph:
    index: dict[str, Node]
    children: dict[str, list[str]]
    preds: dict[Event, list[Event]]


# What runs pods inside a tenant and is awaited until they run (a chart installed with
# skip_await=False, a Deployment, a DaemonSet); a chart of CRDs alone runs none.
IN_TENANT_WORKLOADS = (HELM, "kubernetes:apps/v1:Deployment", "kubernetes:apps/v1:DaemonSet")
CRDS_ONLY = ("*-calico-crds",)
WORKER_JOIN = "*-node-join"


def node_waits(nodes: Sequence[Node]) -> dict[str, tuple[str, ...]]:
    """URN -> the worker joins it waits for: every awaited workload inside a tenant (through
    the tenant's provider, ``<tenant>-provider``) needs a joined worker (a lab pool's
    ``*-node-join`` commands; prod's machines are not commands and get no such edge). One that
    belongs to a pool waits for that pool's joins; one of the tenant's own for its first
    pool's, standing for "any worker" (pools join side by side, each as long as the other),
    so that no pool waits for a sibling."""
    index = {n.urn: n for n in nodes}
    joins: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        if node.custom and node.type == COMMAND and fnmatchcase(node.name, WORKER_JOIN):
            pool = owner(index, node.urn, POOL_SUFFIX)
            if pool is not None:
                joins[pool].append(node.urn)
    first_pool: dict[str, str] = {}
    for pool in sorted(joins):
        tenant = owner(index, pool, TENANT_SUFFIX)
        if tenant is not None:
            first_pool.setdefault(tenant, pool)
    waits: dict[str, tuple[str, ...]] = {}
    for node in nodes:
        if not node.custom or node.type not in IN_TENANT_WORKLOADS:
            continue
        if any(fnmatchcase(node.name, glob) for glob in CRDS_ONLY):
            continue
        tenant = owner(index, node.urn, TENANT_SUFFIX)
        provider = index.get(node.provider)
        if tenant is None or provider is None or provider.name != f"{index[tenant].name}-provider":
            continue
        pool = owner(index, node.urn, POOL_SUFFIX) or first_pool.get(tenant)
        if pool is not None and joins[pool]:
            waits[node.urn] = tuple(joins[pool])
    return waits


def _build(nodes: Sequence[Node], node_waits_too: bool = True) -> _Graph:
    """The event graph; ``node_waits_too``: with the waits for worker joins (``node_waits``),
    which a duration needs and the program's own structure (``independence``) does not show."""
    index = {n.urn: n for n in nodes}
    extra = node_waits(nodes) if node_waits_too else {}
    children: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        if node.parent in index:
            children[node.parent].append(node.urn)

    def ready(urn: str) -> Event:
        return ("fin", urn) if index[urn].custom else ("done", urn)

    preds: dict[Event, list[Event]] = {}
    for node in nodes:
        waits: list[Event] = [
            ready(d) for d in (*node.dependencies, *extra.get(node.urn, ())) if d in index
        ]
        if node.provider in index:
            waits.append(("fin", node.provider))
        if node.parent in index:
            waits.append(("fin", node.parent))  # a component's "fin" is its registration
        preds[("fin", node.urn)] = list(dict.fromkeys(waits))
        if not node.custom:
            aggregate: list[Event] = [("fin", node.urn)]
            aggregate += [ready(child) for child in children[node.urn]]
            preds[("done", node.urn)] = aggregate
    return _Graph(index=index, children=children, preds=preds)


def _topological(graph: _Graph) -> list[Event]:
    """Events in an order where every event follows its predecessors (ties by URN, so the
    result is deterministic). Raises ValueError on a cycle."""
    succs: dict[Event, list[Event]] = defaultdict(list)
    indegree = {event: len(preds) for event, preds in graph.preds.items()}
    for event, preds in graph.preds.items():
        for pred in preds:
            succs[pred].append(event)
    ready = [event for event, degree in indegree.items() if degree == 0]
    heapq.heapify(ready)
    order: list[Event] = []
    while ready:
        event = heapq.heappop(ready)
        order.append(event)
        for succ in succs[event]:
            indegree[succ] -= 1
            if indegree[succ] == 0:
                heapq.heappush(ready, succ)
    if len(order) != len(graph.preds):
        stuck = sorted(e[1] for e, d in indegree.items() if d > 0)
        raise ValueError(f"dependency cycle among {len(stuck)} resources, e.g. {stuck[:3]}")
    return order


# ------------------------------------------------------------------------------ critical path


@dataclass(frozen=True)
class Step:
    """One resource on a critical path, with its start and finish on the path's clock."""

    urn: str
    type: str
    name: str
    start: float
    finish: float


@dataclass(frozen=True)
class CriticalPath:
    total: float  # seconds (duration weights) or resources (count weights)
    chain: tuple[Step, ...]  # custom resources on the path, first to last

    @property
    def resources(self) -> int:
        return len(self.chain)


@dataclass(frozen=True)
class Schedule:
    """Earliest start and finish of every resource (``finish`` keyed by URN)."""

    start: Mapping[str, float]
    finish: Mapping[str, float]
    done: Mapping[str, float]  # components: when their whole subtree is done
    path: CriticalPath


def schedule(nodes: Sequence[Node], weight: Callable[[Node], float]) -> Schedule:
    """Earliest-start schedule of ``nodes`` under ``weight`` and its critical path."""
    graph = _build(nodes)
    times: dict[Event, float] = {}
    via: dict[Event, Event | None] = {}
    starts: dict[str, float] = {}
    for event in _topological(graph):
        kind, urn = event
        preds = graph.preds[event]
        best: Event | None = None
        start = 0.0
        for pred in sorted(preds):
            if best is None or times[pred] > start:
                best, start = pred, times[pred]
        if kind == "fin":
            starts[urn] = start
            node = graph.index[urn]
            times[event] = start + (weight(node) if node.custom else 0.0)
        else:
            times[event] = start
        via[event] = best

    finish = {urn: t for (kind, urn), t in times.items() if kind == "fin"}
    done = {urn: t for (kind, urn), t in times.items() if kind == "done"}
    if not times:
        return Schedule(starts, finish, done, CriticalPath(0.0, ()))
    # The path ends at the latest custom finish (ties: first URN).
    end: Event | None = max(sorted(times), key=lambda e: times[e])
    chain: list[Step] = []
    while end is not None:
        kind, urn = end
        node = graph.index[urn]
        if kind == "fin" and node.custom:
            chain.append(Step(urn, node.type, node.name, starts[urn], times[end]))
        end = via[end]
    chain.reverse()
    total = max(times.values())
    return Schedule(starts, finish, done, CriticalPath(total, tuple(chain)))


def critical_path(nodes: Sequence[Node], weight: Callable[[Node], float]) -> CriticalPath:
    """The longest chain of waits through ``nodes`` under ``weight``."""
    return schedule(nodes, weight).path


# ------------------------------------------------------------------------------ independence


def owner(index: Mapping[str, Node], urn: str, suffix: str) -> str | None:
    """The URN of the nearest ancestor-or-self whose type ends with ``suffix``."""
    current = index.get(urn)
    while current is not None:
        if current.type.endswith(suffix):
            return current.urn
        current = index.get(current.parent)
    return None


def _waited_for(graph: _Graph, members: Iterable[str]) -> set[str]:
    """URNs of every resource (recorded ones only) the ``members`` transitively wait for."""
    seen: set[Event] = set()
    stack: list[Event] = [("fin", urn) for urn in members]
    while stack:
        event = stack.pop()
        for pred in graph.preds.get(event, []):
            if pred not in seen:
                seen.add(pred)
                stack.append(pred)
    return {urn for _, urn in seen}


@dataclass(frozen=True)
class Wait:
    """``waiter`` (a tenant or pool component) waits for ``resource`` owned by ``owner``."""

    waiter: str
    resource: str
    owner: str


@dataclass(frozen=True)
class Independence:
    tenants: int
    pools: int
    cross_tenant: tuple[Wait, ...] = field(default=())
    cross_pool: tuple[Wait, ...] = field(default=())


def independence(nodes: Sequence[Node]) -> Independence:
    """Waits of one tenant on another tenant's resources, and of one pool on another pool's
    (tenants must build in parallel, and so must the pools of one tenant)."""
    graph = _build(nodes, node_waits_too=False)
    index = graph.index
    members: dict[tuple[str, str], list[str]] = defaultdict(list)
    for node in nodes:
        for suffix in (TENANT_SUFFIX, POOL_SUFFIX):
            group = owner(index, node.urn, suffix)
            if group is not None:
                members[(suffix, group)].append(node.urn)
    found: dict[str, list[Wait]] = {TENANT_SUFFIX: [], POOL_SUFFIX: []}
    for (suffix, group), urns in sorted(members.items()):
        for urn in sorted(_waited_for(graph, urns)):
            if not index[urn].custom:
                continue  # a component takes no time; what it aggregates is listed itself
            other = owner(index, urn, suffix)
            if other is not None and other != group:
                found[suffix].append(Wait(group, urn, other))
    return Independence(
        tenants=sum(1 for s, _ in members if s == TENANT_SUFFIX),
        pools=sum(1 for s, _ in members if s == POOL_SUFFIX),
        cross_tenant=tuple(found[TENANT_SUFFIX]),
        cross_pool=tuple(found[POOL_SUFFIX]),
    )


@dataclass(frozen=True)
class Span:
    """When a component's custom descendants start and finish on the estimated clock."""

    urn: str
    name: str
    start: float
    finish: float
    resources: int


def spans(nodes: Sequence[Node], sched: Schedule, suffix: str) -> list[Span]:
    """The span of every component whose type ends with ``suffix`` (e.g. each pool)."""
    index = {n.urn: n for n in nodes}
    grouped: dict[str, list[str]] = defaultdict(list)
    for node in nodes:
        if node.custom:
            group = owner(index, node.urn, suffix)
            if group is not None:
                grouped[group].append(node.urn)
    result = []
    for group, urns in sorted(grouped.items()):
        result.append(
            Span(
                urn=group,
                name=index[group].name,
                start=min(sched.start[u] for u in urns),
                finish=max(sched.finish[u] for u in urns),
                resources=len(urns),
            )
        )
    return result
