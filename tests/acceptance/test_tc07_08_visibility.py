"""TC-07 / TC-08: each tenant sees only itself.

Through each tenant's own API server: only its own nodes (the pool nodes of the stack outputs),
only its own pods and namespaces, GPU capacity equal to its declared inventory (``nvidia.com/gpu``
and, where a pool uses the mock device plugin, ``nvidia.com/gpumem`` and ``gpucores`` - all
required, none "when advertised"); nothing unique to
another tenant - node names/UIDs, namespace/pod UIDs, and the marker namespace and pod the suite
created in every tenant under unique names - appears. TC-07 is the first tenant of the config,
TC-08 the second; further tenants get TC-08.1, TC-08.2, ...
"""

from __future__ import annotations

import pytest

from components.config import ConfigError
from tests.acceptance.hami_evidence import NVIDIA_GPU, ClusterView, judge_visibility
from tests.acceptance.kube import (
    REQUEST_TIMEOUT,
    Cluster,
    list_nodes,
    object_refs_of_namespaces,
    object_refs_of_pods,
)
from tests.acceptance.live import LiveStack, Marker
from tests.acceptance.report import Evidence
from tests.acceptance.stack import (
    StackUnavailableError,
    expected_capacity,
    load_platform,
    stack_name,
    visibility_test_id,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


def pytest_generate_tests(metafunc: pytest.Metafunc) -> None:
    """One test per tenant of the stack file (ids TC-07, TC-08, TC-08.1 ...)."""
    if "tenant_index" not in metafunc.fixturenames:
        return
    try:
        names = [t.name for t in load_platform(stack_name()).tenants]
    except (StackUnavailableError, ConfigError, OSError):
        names = ["first-tenant", "second-tenant"]  # the live fixture reports what is wrong
    metafunc.parametrize(
        "tenant_index",
        [
            pytest.param(
                index,
                id=f"{visibility_test_id(index)}-{name}",
                marks=pytest.mark.tc(visibility_test_id(index)),
            )
            for index, name in enumerate(names)
        ],
    )


def view_of(cluster: Cluster, tenant: str, marker: Marker | None) -> ClusterView:
    core = cluster.core
    return ClusterView(
        tenant=tenant,
        nodes=tuple(n.ref() for n in list_nodes(cluster)),
        namespaces=object_refs_of_namespaces(
            core.list_namespace(_request_timeout=REQUEST_TIMEOUT).items
        ),
        pods=object_refs_of_pods(
            core.list_pod_for_all_namespaces(_request_timeout=REQUEST_TIMEOUT).items
        ),
        marker_namespaces=(marker.namespace,) if marker else (),
        marker_pods=(marker.pod,) if marker else (),
    )


def test_tenant_sees_only_itself(
    live: LiveStack, markers: dict[str, Marker], tenant_index: int, evidence: Evidence
) -> None:
    tenants = live.platform.tenants
    if tenant_index >= len(tenants):
        pytest.fail(f"the stack declares {len(tenants)} tenants, no tenant #{tenant_index + 1}")
    tenant = tenants[tenant_index]
    views = {t.name: view_of(live.tenant(t.name), t.name, markers.get(t.name)) for t in tenants}
    own = views[tenant.name]
    others = [view for name, view in views.items() if name != tenant.name]
    outputs = live.outputs.tenants[tenant.name]
    named_nodes = outputs.nodes
    capacity_wanted = expected_capacity(live.platform, tenant)
    verdict = judge_visibility(
        own,
        expected_nodes=named_nodes or None,
        expected_node_count=None if named_nodes else sum(p.replicas for p in tenant.worker_pools),
        expected_capacity=capacity_wanted,
        # All of them: nvidia.com/gpu everywhere, gpumem/gpucores where a pool runs the mock
        # device plugin (only present while it runs).
        required_capacity=tuple(capacity_wanted),
        others=others,
    )
    evidence.record("seen", verdict.facts)
    evidence.record(
        "others",
        {
            view.tenant: {
                "nodes": sorted(n.name for n in view.nodes),
                "markers": [*view.marker_namespaces, *view.marker_pods],
                "pods": len(view.pods),
                "namespaces": len(view.namespaces),
            }
            for view in others
        },
    )
    capacity = own.capacity()
    evidence.summary(
        f"{tenant.name} sees nodes {', '.join(sorted(n.name for n in own.nodes)) or 'none'}, "
        f"{len(own.pods)} pods, {len(own.namespaces)} namespaces, "
        f"{NVIDIA_GPU}={capacity.get(NVIDIA_GPU, 0)}; none of "
        + (", ".join(v.tenant for v in others) or "no other tenant")
    )
    assert verdict.ok, verdict.explain()
