"""Point 2 of issue 42: both stacks, cluster by cluster, on real API servers.

For each cluster of each stack (the management cluster and every tenant) a kube-apiserver
v1.35.0 of its own (on the session's etcd under its own prefix, as Kamaji runs tenants; a tenant's
with Kamaji's admission plugins): the CRDs every source installs there are created and must be
Established, the stack's Namespaces created, then every object the charts render and the program
registers is sent as a server-side dry-run create. The server's own decoding, defaulting,
OpenAPI schema, CRD structural schema and CEL rules (Kamaji's and Cluster API's
``x-kubernetes-validations`` among them) and its admission chain judge each one: what the
rendered-chart suite checks with schemas and cel-python, here by the real implementation.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

import pytest

from tests.local.cluster_objects import ClusterResult, install, probe
from tests.local.conftest import TENANT_CONTROLLERS, require
from tests.local.kube import KAMAJI_ADMISSION_PLUGINS, APIServer
from tests.render.conftest import platform_block
from tests.support.charts import ChartUnavailableError
from tests.support.harness import Recording
from tests.support.rendered_stack import RenderedStack, UpstreamUnavailableError, render_stack
from tests.support.upstream import upstream_dir_or_none

STACKS = ("lab", "prod")
CLUSTERS = [
    (stack, name)
    for stack in STACKS
    for name in ["management", *(t["name"] for t in platform_block(stack)["tenants"])]
]
IDS = [f"{stack}-{name}" for stack, name in CLUSTERS]


@dataclass(frozen=True)
class Probe:
    """A stack's object broken on purpose: the real server must refuse it with ``expect``
    (so the dry-run above can fail, and the CEL rules it ran are the CRDs' own)."""

    name: str
    stack: str
    kind: str
    path: tuple[str, ...]
    value: Any
    expect: str
    status: int = 422  # Invalid: schema and CEL validation; 400 BadRequest: strict decoding


PROBES = [
    # Kamaji's CEL rules call Kubernetes' CEL library (isCIDR), which cel-python lacks: the
    # rendered-chart suite counts them as skipped; here the real server runs them
    # (kamaji.clastix.io_tenantcontrolplanes.yaml: spec.networkProfile.serviceCidrs).
    Probe(
        "kamaji-service-cidrs-isCIDR",
        "lab",
        "TenantControlPlane",
        ("spec", "networkProfile", "serviceCidrs"),
        ["10.21.0.0/33"],
        "all serviceCidrs entries must be valid CIDRs",
    ),
    Probe(
        "kamaji-advertise-address-isIP",
        "lab",
        "TenantControlPlane",
        ("spec", "networkProfile", "advertiseAddress"),
        "10.0.0.300",
        "advertiseAddress must be a valid IP address",
    ),
    # kamaji-capi's KamajiControlPlane (Cluster API) rule on the konnectivity agent.
    Probe(
        "kamaji-capi-konnectivity-agent-replicas",
        "prod",
        "KamajiControlPlane",
        ("spec", "addons", "konnectivity", "agent", "replicas"),
        2,
        "replicas must be 0 (or unset) when mode is DaemonSet",
    ),
    # Cluster API's Cluster: strict decoding names a field the CRD does not have.
    Probe(
        "cluster-api-unknown-field",
        "prod",
        "Cluster",
        ("spec", "clusterNetwork", "serviceDomainName"),
        "cluster.local",
        'unknown field "spec.clusterNetwork.serviceDomainName"',
        status=400,
    ),
]


def _broken(rendered: RenderedStack, item: Probe) -> dict[str, Any]:
    original = next(
        p.obj for p in rendered.objects if p.cluster.name == "management" and p.kind == item.kind
    )
    obj = copy.deepcopy(original)
    node = obj
    for key in item.path[:-1]:
        node = node.setdefault(key, {})
    node[item.path[-1]] = item.value
    return obj


@pytest.fixture(scope="module")
def stacks(recordings: Callable[[str, bool], Recording]) -> Callable[[str], RenderedStack]:
    cache: dict[str, RenderedStack] = {}

    def get(stack: str) -> RenderedStack:
        if stack not in cache:
            try:
                cache[stack] = render_stack(
                    recordings(stack, False), platform_block(stack), upstream_dir_or_none()
                )
            except (ChartUnavailableError, UpstreamUnavailableError) as missing:
                require(False, str(missing).splitlines()[0])
        return cache[stack]

    return get


@pytest.fixture(scope="module")
def on_server(
    stacks: Callable[[str], RenderedStack], start_apiserver: Callable[..., APIServer]
) -> Callable[[str, str], ClusterResult]:
    """``on_server(stack, cluster)``: that cluster installed on a fresh server (once, then the
    server is stopped: seven servers at once would not fit a 2-core machine's budget)."""
    cache: dict[tuple[str, str], ClusterResult] = {}

    def get(stack: str, name: str) -> ClusterResult:
        if (stack, name) not in cache:
            rendered = stacks(stack)
            cluster = next(c for c in rendered.clusters.values() if c.name == name)
            tenant = name != "management"
            server = start_apiserver(
                f"{stack}-{name}",
                controllers=TENANT_CONTROLLERS[:1],
                admission_plugins=KAMAJI_ADMISSION_PLUGINS if tenant else (),
            )
            try:
                result = install(server, rendered, cluster, upstream_dir_or_none())
                for item in PROBES:
                    if item.stack == stack and name == "management":
                        result.probes[item.name] = probe(server, _broken(rendered, item))
                cache[(stack, name)] = result
            finally:
                server.stop()
        return cache[(stack, name)]

    return get


@pytest.mark.parametrize(("stack", "cluster"), CLUSTERS, ids=IDS)
def test_every_crd_the_stack_installs_is_accepted_and_established(
    stack: str, cluster: str, on_server: Callable[[str, str], ClusterResult]
) -> None:
    result = on_server(stack, cluster)
    assert [str(f) for f in result.crd_findings] == []
    assert result.crds, f"{stack}/{cluster}: no CRD installed (every cluster gets some)"


@pytest.mark.parametrize(("stack", "cluster"), CLUSTERS, ids=IDS)
def test_every_object_passes_the_real_servers_dry_run(
    stack: str, cluster: str, on_server: Callable[[str, str], ClusterResult]
) -> None:
    result = on_server(stack, cluster)
    assert [str(f) for f in result.findings] == []
    assert result.dry_run > 0


@pytest.mark.parametrize("item", PROBES, ids=[p.name for p in PROBES])
def test_the_real_server_refuses_a_stack_object_broken_on_purpose(
    item: Probe, on_server: Callable[[str, str], ClusterResult]
) -> None:
    refusal = on_server(item.stack, "management").probes[item.name]
    assert refusal.startswith(f"HTTP {item.status}: "), refusal or "accepted"
    assert item.expect in refusal
