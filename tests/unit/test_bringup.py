"""make lab's estimated cost with and without the registry caches (benchmarks.bringup): which
pulls each scenario charges, the pulls that leave the host, and the lab stack's own numbers."""

from __future__ import annotations

from collections.abc import Callable

from benchmarks import bringup, graph
from benchmarks.graph import Node
from components.lab.lab_images import LabImage
from tests.support.harness import Recording

P = "urn:p::"
MGMT_PROVIDER = f"{P}pulumi:providers:kubernetes::management-provider"
TENANT = f"{P}gpu-platform:index:GpuTenant::t"
TENANT_PROVIDER = f"{P}pulumi:providers:kubernetes::t-provider"


def _node(name: str, type_: str, deps: tuple[str, ...] = (), **kw: str) -> Node:
    return Node(
        urn=f"{P}{type_}::{name}", type=type_, name=name, custom=True, dependencies=deps, **kw
    )


KIND = _node("management-kind-cluster", graph.COMMAND)
CERT = _node("management-cert-manager", graph.HELM, (KIND.urn,), provider=MGMT_PROVIDER)
KAMAJI = _node("management-kamaji", graph.HELM, (CERT.urn,), provider=MGMT_PROVIDER)
AHEAD = _node("management-kind-node-images", graph.COMMAND, (KIND.urn,))
TENANT_NODE = Node(TENANT, "gpu-platform:index:GpuTenant", "t", custom=False)
CALICO = _node("t-calico", graph.HELM, (KAMAJI.urn,), provider=TENANT_PROVIDER, parent=TENANT)
PREPULL = _node("t-pool-0-node-images", graph.COMMAND, (KIND.urn,), parent=TENANT)
NODES = [KIND, CERT, KAMAJI, AHEAD, TENANT_NODE, CALICO, PREPULL]


def _row(node: Node) -> graph.Estimate:
    return graph.estimate(node)


def _weights(caches: bool, warm: bool) -> dict[str, float]:
    return bringup.weights(NODES, bringup.Scenario("s", caches, warm))


def test_today_charges_every_pull_and_nothing_for_the_cache_commands() -> None:
    cold = _weights(caches=False, warm=False)
    assert cold[CALICO.urn] == _row(CALICO).seconds
    assert cold[KIND.urn] == _row(KIND).seconds
    assert cold[PREPULL.urn] == cold[AHEAD.urn] == 0
    warm = _weights(caches=False, warm=True)
    assert warm[KIND.urn] == _row(KIND).seconds - _row(KIND).pulls  # the host keeps its image
    assert warm[CALICO.urn] == _row(CALICO).seconds  # each node pulls again


def test_with_caches_pulls_move_to_the_pre_pulls() -> None:
    first = _weights(caches=True, warm=False)
    assert first[CALICO.urn] == _row(CALICO).seconds - _row(CALICO).pulls
    assert first[KAMAJI.urn] == _row(KAMAJI).seconds - _row(KAMAJI).pulls
    assert first[CERT.urn] == _row(CERT).seconds  # starts with the pre-pull, not after it
    assert first[PREPULL.urn] == _row(PREPULL).seconds + _row(CALICO).pulls
    assert first[AHEAD.urn] == _row(AHEAD).seconds + _row(KAMAJI).pulls
    second = _weights(caches=True, warm=True)
    cached = bringup.CACHED_PULL_SECONDS
    assert second[CERT.urn] == _row(CERT).seconds - _row(CERT).pulls + _row(CERT).images * cached
    assert second[PREPULL.urn] == _row(PREPULL).seconds + _row(CALICO).images * cached


def test_pulls_leaving_the_host() -> None:
    images = [
        LabImage("management", "quay.io/a:1"),
        LabImage("tenant", "quay.io/ds:1", every_node=True),
        LabImage("tenant", "quay.io/deploy:1"),
        LabImage("tenant", "quay.io/a:1"),
    ]
    found = bringup.pulls(images, {"t1": 3, "t2": 2})
    # management 1 + daemonset on 5 workers + deployment once per tenant (2) + a:1 twice
    assert found.today == 1 + 5 + 2 + 2
    assert found.first == found.distinct == 3
    assert found.second == 0


def test_the_lab_stack_comes_up_faster_with_caches(
    recordings: Callable[[str, bool], Recording],
) -> None:
    nodes = graph.nodes_from(recordings("lab", False).resources)
    result = bringup.bring_up("lab", nodes)
    total = {run.scenario.name: run.path.total for run in result.runs}
    assert total["caches, first run"] < total["today, first run"]
    assert total["caches, second run"] < total["caches, first run"]
    assert total["caches, second run"] < total["today, second run"]
    assert all(not run.late for run in result.runs), [r.late for r in result.runs]
    assert result.pulls.second == 0
    assert result.pulls.first < result.pulls.today
    # A worker is no longer behind Kamaji: its pre-pull ends before its tenant's control plane.
    sched = graph.schedule(nodes, graph.duration_weight)
    for node in nodes:
        if node.name.endswith("-node-images") and not node.name.startswith("management-"):
            control_plane = next(n for n in nodes if n.name.endswith("-control-plane"))
            assert sched.finish[node.urn] <= sched.start[control_plane.urn]


def test_a_tenants_workloads_wait_for_a_worker_to_join() -> None:
    """Issue 41: a tenant's only nodes are its workers, so an awaited release inside it (its
    provider is the tenant's) waits for a join; a CRD-only chart and the management cluster's
    releases do not, and a pool's own workload waits for its own pool's join."""
    from benchmarks import graph

    tenant = "urn:t::gpu-platform:index:GpuTenant::tenant-a"
    pool_a = "urn:t::gpu-platform:index:GpuWorkerPool::tenant-a-a100"
    pool_b = "urn:t::gpu-platform:index:GpuWorkerPool::tenant-a-l4"
    provider = "urn:t::pulumi:providers:kubernetes::tenant-a-provider"
    mgmt = "urn:t::pulumi:providers:kubernetes::management-provider"

    def node(name: str, type_: str, parent: str = tenant, via: str = provider) -> graph.Node:
        return graph.Node(f"urn:t::{type_}::{name}", type_, name, True, parent, via)

    nodes = [
        graph.Node(tenant, tenant.split("::")[1], "tenant-a", False),
        graph.Node(pool_a, pool_a.split("::")[1], "tenant-a-a100", False, tenant),
        graph.Node(pool_b, pool_b.split("::")[1], "tenant-a-l4", False, tenant),
        node("tenant-a-provider", "pulumi:providers:kubernetes", via=""),
        join_a := node("tenant-a-a100-0-node-join", graph.COMMAND, pool_a, ""),
        join_b := node("tenant-a-l4-0-node-join", graph.COMMAND, pool_b, ""),
        hami := node("tenant-a-hami", graph.HELM),
        crds := node("tenant-a-calico-crds", graph.HELM),
        completer := node("tenant-a-l4-completer", "kubernetes:apps/v1:Deployment", pool_b),
        agent := node("tenant-a-metrics-agent", "kubernetes:apps/v1:Deployment", via=mgmt),
    ]
    waits = graph.node_waits(nodes)
    assert waits[hami.urn] == (join_a.urn,)
    assert waits[completer.urn] == (join_b.urn,)
    assert crds.urn not in waits
    assert agent.urn not in waits
