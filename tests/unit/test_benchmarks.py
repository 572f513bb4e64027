"""Unit tests of the benchmark's pure parts: critical path, independence, estimates, synthetic
configs, footprint, floor shape and the CI mode's checks. Expected values are worked out by hand
in the comments next to each graph."""

from __future__ import annotations

import ipaddress
import json
from decimal import Decimal
from pathlib import Path
from typing import Any

import pytest

from benchmarks import graph, report
from benchmarks.floor import FloorNode, floor_shape, shape_from_json, shape_to_json
from benchmarks.footprint import (
    DEDICATED,
    cpu_cores,
    memory_bytes,
    parse_quantity,
    stack_footprint,
    tenant_footprint,
)
from benchmarks.graph import Node
from benchmarks.runner import code_group, program_imports
from benchmarks.synthetic import (
    PLATFORM_KEY,
    carve_subnets,
    synthetic_config,
    synthetic_platform,
)
from benchmarks.typed_floor import (
    MINIMAL,
    check_supported,
    custom_resource_kind,
    unsupported_types,
)
from components.config import ConfigError, Tenant
from components.stack import parse_platform
from tests.support.harness import Registration, load_stack_config

TENANT = "gpu-platform:index:GpuTenant"
POOL = "gpu-platform:index:GpuWorkerPool"


def custom(urn: str, *deps: str, parent: str = "", provider: str = "", type_: str = "t") -> Node:
    return Node(urn, type_, urn, True, parent=parent, provider=provider, dependencies=deps)


def component(urn: str, *deps: str, parent: str = "", type_: str = "gpu-platform:x:C") -> Node:
    return Node(urn, type_, urn, False, parent=parent, dependencies=deps)


def weights(table: dict[str, float]) -> Any:
    return lambda node: table[node.urn]


def names(path: graph.CriticalPath) -> list[str]:
    return [step.name for step in path.chain]


# ------------------------------------------------------------------------------ critical path


def test_a_chain_adds_up() -> None:
    # a(10) <- b(20) <- c(5): 10 + 20 + 5 = 35 seconds, three resources, c starts at 30.
    nodes = [custom("a"), custom("b", "a"), custom("c", "b")]
    sched = graph.schedule(nodes, weights({"a": 10, "b": 20, "c": 5}))
    assert sched.path.total == 35
    assert names(sched.path) == ["a", "b", "c"]
    assert sched.start["c"] == 30
    assert [(s.start, s.finish) for s in sched.path.chain] == [(0, 10), (10, 30), (30, 35)]


def test_a_diamond_takes_the_longer_branch() -> None:
    # a(10); b(20) and c(50) after a; d(1) after both: 10 + 50 + 1 = 61 through c.
    nodes = [custom("a"), custom("b", "a"), custom("c", "a"), custom("d", "b", "c")]
    path = graph.critical_path(nodes, weights({"a": 10, "b": 20, "c": 50, "d": 1}))
    assert path.total == 61
    assert names(path) == ["a", "c", "d"]


def test_counting_resources_breaks_ties_by_urn() -> None:
    # By count both branches are 3 long (a, b|c, d); the tie goes to the first URN, b.
    nodes = [custom("a"), custom("b", "a"), custom("c", "a"), custom("d", "b", "c")]
    path = graph.critical_path(nodes, graph.count_weight)
    assert path.total == 3
    assert names(path) == ["a", "b", "d"]


def test_depending_on_a_component_waits_for_its_descendants() -> None:
    # z depends on component k, whose children are x(30) and y(5): z starts at 30, ends at 32.
    # w(100) is a child of the *custom* x: not part of k's aggregate (as in the SDK), but it
    # still waits for its parent x: 30 + 100 = 130 is the overall critical path.
    nodes = [
        component("k"),
        custom("x", parent="k"),
        custom("y", parent="k"),
        custom("w", parent="x"),
        custom("z", "k"),
    ]
    sched = graph.schedule(nodes, weights({"x": 30, "y": 5, "w": 100, "z": 2}))
    assert sched.finish["z"] == 32
    assert sched.done["k"] == 30
    assert sched.path.total == 130
    assert names(sched.path) == ["x", "w"]


def test_children_of_a_component_wait_for_what_it_depends_on() -> None:
    # Component c depends on a(10): it registers at 10, so its child x(5) ends at 15.
    # q(3) is a child of the custom p(7): it ends at 10.
    nodes = [
        custom("a"),
        component("c", "a"),
        custom("x", parent="c"),
        custom("p"),
        custom("q", parent="p"),
    ]
    sched = graph.schedule(nodes, weights({"a": 10, "x": 5, "p": 7, "q": 3}))
    assert sched.finish["x"] == 15
    assert sched.finish["q"] == 10
    assert names(sched.path) == ["a", "x"]


def test_a_resource_waits_for_its_provider() -> None:
    # The tenant control plane t(60) feeds the provider's kubeconfig; r(3) uses the provider.
    nodes = [custom("t"), custom("prov", "t"), custom("r", provider="prov")]
    path = graph.critical_path(nodes, weights({"t": 60, "prov": 0, "r": 3}))
    assert path.total == 63
    assert names(path) == ["t", "prov", "r"]


def test_references_outside_the_recording_are_ignored() -> None:
    nodes = [custom("a", "urn:pulumi:lab::gpu-platform::pulumi:pulumi:Stack::x", parent="stack")]
    assert graph.critical_path(nodes, weights({"a": 4})).total == 4


def test_a_cycle_is_reported() -> None:
    nodes = [custom("a", "b"), custom("b", "a")]
    with pytest.raises(ValueError, match="cycle"):
        graph.critical_path(nodes, weights({"a": 1, "b": 1}))


def test_an_empty_graph_has_an_empty_path() -> None:
    path = graph.critical_path([], graph.count_weight)
    assert (path.total, path.chain) == (0.0, ())


def test_nodes_from_registrations_merges_edges_and_strips_the_provider_id() -> None:
    reg = Registration(
        urn="u",
        type="kubernetes:core/v1:Namespace",
        name="ns",
        custom=True,
        inputs={},
        outputs={},
        secret_inputs=[],
        parent="p",
        provider="urn:prov::prov-id",
        dependencies=["d1"],
        property_dependencies={"metadata": ["d1", "d2"], "spec": ["d3"]},
        options={},
    )
    (node,) = graph.nodes_from([reg])
    assert node.provider == "urn:prov"
    assert node.dependencies == ("d1", "d2", "d3")
    assert (node.parent, node.custom) == ("p", True)


# ------------------------------------------------------------------------------ estimates


@pytest.mark.parametrize(
    ("type_", "name", "seconds"),
    [
        ("command:local:Command", "management-kind-cluster", 90),
        ("command:local:Command", "management-kind-network", 5),
        ("command:local:Command", "bench-001-a100-0-join", 60),
        ("command:local:Command", "management-preflight", 2),
        ("command:local:Command", "bench-001-a100-inventory", 5),
        ("kubernetes:helm.sh/v3:Release", "management-kamaji", 38),
        ("kubernetes:helm.sh/v3:Release", "management-kamaji-etcd", 65),
        ("kubernetes:helm.sh/v3:Release", "bench-001-kamaji-etcd", 90),
        ("kubernetes:helm.sh/v3:Release", "bench-001-hami", 60),
        ("kubernetes:helm.sh/v3:Release", "something-else", 60),
        ("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane", "bench-001", 60),
        ("kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment", "team-llm-h100", 900),
        ("kubernetes:core/v1:Namespace", "bench-001", 2),
        ("docker:index/container:Container", "bench-001-a100-0", 10),
        ("pulumi:providers:kubernetes", "bench-001-provider", 0),
        ("acme:unknown:Thing", "x", 5),
    ],
)
def test_duration_estimates(type_: str, name: str, seconds: float) -> None:
    assert graph.estimate(Node("u", type_, name, True)).seconds == seconds


def test_components_take_no_time() -> None:
    assert graph.duration_weight(Node("u", "acme:x:Anything", "n", False)) == 0


def test_every_estimate_explains_itself() -> None:
    assert all(row.why and row.seconds >= 0 for row in graph.DURATIONS)
    assert graph.DURATIONS[-1].type_glob == "*"  # a catch-all row exists, and comes last


# ------------------------------------------------------------------------------ independence


def _two_tenants(*extra: Node) -> list[Node]:
    return [
        custom("m"),
        component("t1", type_=TENANT),
        component("t2", type_=TENANT),
        component("p1a", parent="t1", type_=POOL),
        component("p1b", parent="t1", type_=POOL),
        custom("t1x", "m", parent="t1"),
        custom("p1ax", "t1x", parent="p1a"),
        custom("p1bx", "t1x", parent="p1b"),
        *extra,
    ]


def test_independent_tenants_and_pools_are_clean() -> None:
    result = graph.independence(_two_tenants(custom("t2x", "m", parent="t2")))
    assert (result.tenants, result.pools) == (2, 2)
    assert result.cross_tenant == ()
    assert result.cross_pool == ()


def test_a_tenant_waiting_for_another_is_found_even_through_management() -> None:
    # t2x waits for m2, a management resource that waits for tenant t1's t1x.
    nodes = _two_tenants(custom("m2", "t1x"), custom("t2x", "m2", parent="t2"))
    result = graph.independence(nodes)
    assert result.cross_tenant == (graph.Wait("t2", "t1x", "t1"),)


def test_a_pool_waiting_for_its_sibling_is_found() -> None:
    nodes = _two_tenants(custom("p1by", "p1ax", parent="p1b"))
    result = graph.independence(nodes)
    assert result.cross_pool == (graph.Wait("p1b", "p1ax", "p1a"),)
    assert result.cross_tenant == ()


def test_pool_spans_overlap_when_pools_build_in_parallel() -> None:
    nodes = _two_tenants()
    sched = graph.schedule(nodes, weights({"m": 10, "t1x": 5, "p1ax": 30, "p1bx": 20}))
    spans = {s.name: (s.start, s.finish) for s in graph.spans(nodes, sched, graph.POOL_SUFFIX)}
    # Both pools start when t1x is done (10 + 5 = 15).
    assert spans == {"p1a": (15, 45), "p1b": (15, 35)}


# ------------------------------------------------------------------------------ synthetic


def test_carve_subnets_skips_what_it_must_avoid() -> None:
    assert carve_subnets(3, 20, "10.0.0.0/8", avoid=["10.0.0.0/19"]) == [
        "10.0.32.0/20",
        "10.0.48.0/20",
        "10.0.64.0/20",
    ]
    assert carve_subnets(2, 12, "10.0.0.0/8", avoid=["10.0.0.0/12"]) == [
        "10.16.0.0/12",
        "10.32.0.0/12",
    ]


def test_carve_subnets_says_when_the_space_is_too_small() -> None:
    with pytest.raises(ValueError, match="only 2 free /10"):
        carve_subnets(3, 10, "10.0.0.0/9")


def test_a_hundred_lab_tenants_are_valid_and_disjoint() -> None:
    platform = synthetic_platform(load_stack_config("lab")[PLATFORM_KEY], 100)
    tenants = platform["tenants"]
    assert [t["name"] for t in tenants][:2] == ["bench-001", "bench-002"]
    assert len({t["name"] for t in tenants}) == 100
    assert len({t["dataStore"]["schema"] for t in tenants}) == 100
    assert len({t["dataStore"]["username"] for t in tenants}) == 100
    assert all([p["name"] for p in t["workerPools"]] == ["a100", "l4"] for t in tenants)
    networks = [
        ipaddress.ip_network(t["network"][key])
        for t in tenants
        for key in ("podCidr", "serviceCidr")
    ]
    reserved = [ipaddress.ip_network("10.244.0.0/16"), ipaddress.ip_network("10.96.0.0/12")]
    for i, net in enumerate(networks):
        assert not any(net.overlaps(r) for r in reserved), net
        assert not any(net.overlaps(other) for other in networks[i + 1 :]), net
    assert 100 <= platform["management"]["kind"]["metallbPoolSize"] <= 256
    assert len(parse_platform(platform).tenants) == 100


def test_synthetic_prod_tenants_keep_a_dedicated_datastore() -> None:
    config = synthetic_config(load_stack_config("prod"), 10)
    parsed = parse_platform(config[PLATFORM_KEY])
    assert all(t.data_store.dedicated is not None for t in parsed.tenants)
    assert all(len(t.worker_pools) == 2 for t in parsed.tenants)


def test_fixed_addresses_are_consecutive_and_outside_every_cidr() -> None:
    base = load_stack_config("prod")[PLATFORM_KEY]
    base = {**base, "tenants": [dict(base["tenants"][0])]}
    base["tenants"][0]["controlPlane"] = {"replicas": 3, "address": "10.0.100.10"}
    platform = synthetic_platform(base, 4)
    addresses = [t["controlPlane"]["address"] for t in platform["tenants"]]
    assert addresses == ["10.0.100.10", "10.0.100.11", "10.0.100.12", "10.0.100.13"]
    # The 7th /20 would be 10.0.96.0/20, which holds the addresses: skipped.
    assert platform["tenants"][3]["network"] == {
        "podCidr": "10.0.112.0/20",
        "serviceCidr": "10.0.128.0/20",
    }
    for tenant in platform["tenants"]:
        for key in ("podCidr", "serviceCidr"):
            network = ipaddress.ip_network(tenant["network"][key])
            assert not any(ipaddress.ip_address(a) in network for a in addresses), network


def test_lab_tenants_leave_the_address_to_the_pool() -> None:
    platform = synthetic_platform(load_stack_config("lab")[PLATFORM_KEY], 2)
    assert all("address" not in t.get("controlPlane", {}) for t in platform["tenants"])


def test_synthetic_config_keeps_the_other_keys() -> None:
    base = {**load_stack_config("lab"), "gpu-platform:other": "kept"}
    assert synthetic_config(base, 2)["gpu-platform:other"] == "kept"


def test_synthetic_needs_a_tenant() -> None:
    with pytest.raises(ValueError, match="at least one"):
        synthetic_platform(load_stack_config("lab")[PLATFORM_KEY], 0)


def test_synthetic_fails_loudly_on_an_invalid_base() -> None:
    base = load_stack_config("lab")[PLATFORM_KEY]
    with pytest.raises(ConfigError):
        synthetic_platform({**base, "kubernetesVersion": "v1.99.0"}, 2)


# ------------------------------------------------------------------------------ footprint


@pytest.mark.parametrize(
    ("text", "value"),
    [
        ("250m", Decimal("0.25")),
        ("2", Decimal(2)),
        ("0.5", Decimal("0.5")),
        ("512Mi", Decimal(512 * 1024 * 1024)),
        ("1.5Gi", Decimal(3 * 512 * 1024 * 1024)),
        ("1G", Decimal(10**9)),
        ("1e3", Decimal(1000)),
    ],
)
def test_quantities(text: str, value: Decimal) -> None:
    assert parse_quantity(text) == value


@pytest.mark.parametrize("text", ["", "abc", "12Mx", "1.2.3", "-1"])
def test_bad_quantities(text: str) -> None:
    with pytest.raises(ValueError, match=r"quantity|suffix"):
        parse_quantity(text)


def test_quantity_helpers() -> None:
    assert cpu_cores("125m") == 0.125
    assert memory_bytes("128Mi") == 134_217_728


def _tenant(control_plane: dict[str, Any]) -> Tenant:
    return Tenant.model_validate(
        {
            "name": "t",
            "dataStore": {"name": "default", "schema": "t", "username": "t"},
            "network": {"podCidr": "10.1.0.0/16", "serviceCidr": "10.2.0.0/16"},
            "controlPlane": control_plane,
            "workerPools": [{"name": "gpu", "cards": [{"model": "L4-24GB"}]}],
        }
    )


def test_footprint_with_the_default_requests() -> None:
    # 3 replicas x (250m + 125m + 125m) = 1.5 cores; 3 x (512 + 256 + 128) MiB = 2688 MiB.
    fp = tenant_footprint(_tenant({"replicas": 3}))
    assert fp.replicas == 3
    assert fp.cpu_cores == pytest.approx(1.5)
    assert fp.memory_gib == pytest.approx(2688 / 1024)
    assert fp.missing == ()
    assert fp.datastore == "shared 'default'"
    # Against 3 x 2 vCPU x 4 GiB = 6 vCPU, 12 GiB: 25 % of the CPU, 2.625 / 12 of the memory.
    assert fp.share_of(DEDICATED) == pytest.approx((0.25, 2.625 / 12))


def test_footprint_counts_a_missing_request_as_zero_and_says_so() -> None:
    fp = tenant_footprint(
        _tenant(
            {
                "replicas": 2,
                "resources": {
                    "apiServer": {"requests": {"cpu": "1", "memory": "2Gi"}},
                    "controllerManager": {"requests": {"cpu": "500m"}},
                    "scheduler": {"requests": {}},
                },
            }
        )
    )
    # 2 x (1 + 0.5 + 0) cores = 3; 2 x 2 GiB = 4 GiB.
    assert (fp.cpu_cores, fp.memory_gib) == (3.0, 4.0)
    assert fp.missing == ("controllerManager", "scheduler")


def test_dedicated_estimate_totals() -> None:
    assert (DEDICATED.cpu_cores, DEDICATED.memory) == (6.0, 12.0)


def test_stack_footprint_sums_its_tenants() -> None:
    platform = synthetic_platform(load_stack_config("prod")[PLATFORM_KEY], 4)
    fp = stack_footprint("prod", parse_platform(platform))
    # Every synthetic prod tenant copies team-vision: 3 replicas of the default requests.
    assert fp.cpu_cores == pytest.approx(4 * 1.5)
    assert fp.memory_gib == pytest.approx(4 * 2688 / 1024)
    assert fp.tenants[0].datastore == "dedicated etcd x3"


# ------------------------------------------------------------------------------ floor


def test_floor_shape_puts_parents_first() -> None:
    nodes = [
        custom("child", parent="comp"),
        component("comp", parent="stack-urn-not-recorded"),
        custom("grandchild", parent="child"),
        custom("top"),
    ]
    shape = floor_shape(nodes)
    assert shape == [
        FloorNode(0, None, False, "gpu-platform:x:C"),  # comp
        FloorNode(1, None, True, "t"),  # top
        FloorNode(2, 0, True, "t"),  # child under comp
        FloorNode(3, 2, True, "t"),  # grandchild under child
    ]
    assert shape_from_json(shape_to_json(shape)) == shape
    read = [FloorNode(0, None, True, "kubernetes:core/v1:Secret", read=True)]
    assert shape_from_json(json.loads(json.dumps(shape_to_json(read)))) == read


def test_floor_shape_rejects_a_parent_cycle() -> None:
    with pytest.raises(ValueError, match="cycle"):
        floor_shape([custom("a", parent="b"), custom("b", parent="a")])


@pytest.mark.parametrize(
    ("token", "expected"),
    [
        (
            "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane",
            ("kamaji.clastix.io/v1alpha1", "TenantControlPlane"),
        ),
        (
            "kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment",
            ("cluster.x-k8s.io/v1beta2", "MachineDeployment"),
        ),
        ("kubernetes:core/v1:Namespace", None),  # typed, in MINIMAL
        ("kubernetes:apps/v1:StatefulSet", None),  # built-in group without a dot
        ("kubernetes:storage.k8s.io/v1:StorageClass", None),  # built-in *.k8s.io group
        ("docker:index/network:Network", None),
        ("kubernetes:nogroup", None),
    ],
)
def test_custom_resource_kind(token: str, expected: tuple[str, str] | None) -> None:
    assert custom_resource_kind(token) == expected


def test_unsupported_types_names_what_the_typed_floor_cannot_build() -> None:
    shape = [
        FloorNode(0, None, False, "gpu-platform:index:GpuTenant"),  # components: always fine
        FloorNode(1, 0, True, "kubernetes:core/v1:Namespace"),
        FloorNode(2, 0, True, "kubernetes:kamaji.clastix.io/v1alpha1:DataStore"),
        FloorNode(3, 0, True, "kubernetes:core/v1:Secret", read=True),
        FloorNode(4, 0, True, "docker:index/network:Network"),
        FloorNode(5, 0, True, "kubernetes:kamaji.clastix.io/v1alpha1:DataStore", read=True),
        FloorNode(6, 0, True, "kubernetes:storage.k8s.io/v1:StorageClass"),
    ]
    assert unsupported_types(shape) == [
        "docker:index/network:Network",
        "kubernetes:storage.k8s.io/v1:StorageClass",
    ]  # a custom resource's read is built as CustomResource.get (control-plane uid reads)
    assert "kubernetes:core/v1:Secret" in MINIMAL
    with pytest.raises(ValueError, match="cannot build docker:index/network:Network, kubernetes"):
        check_supported(shape)
    check_supported(shape[:4])  # the supported ones pass


def test_program_imports_reads_top_level_imports(tmp_path: Path) -> None:
    program = tmp_path / "__main__.py"
    program.write_text(
        "import pulumi\nimport os, json\nfrom components.x import Y\nfrom . import rel\n"
        "def f():\n    import hidden\n"
    )
    assert program_imports(program) == ["pulumi", "os", "json", "components.x"]


@pytest.mark.parametrize(
    ("filename", "group"),
    [
        ("/repo/components/gpu_tenant.py", "program (components)"),
        ("/repo/__main__.py", "program (__main__.py)"),
        ("/repo/tests/support/harness_runner.py", "harness (recording, fakes)"),
        ("/venv/lib/python3.11/site-packages/pulumi/output.py", "pulumi"),
        (
            "/venv/lib/python3.11/site-packages/pulumi/runtime/mocks.py",
            "pulumi mocks (MockMonitor)",
        ),
        ("/venv/lib/python3.11/site-packages/pulumi_docker/container.py", "pulumi_docker"),
        ("/usr/lib/python3.11/asyncio/events.py", "stdlib asyncio"),
        ("/usr/lib/python3.11/typing.py", "stdlib typing"),
        ("/usr/lib/python3.11/functools.py", "stdlib other"),
        ("~", "builtins (C) / generated"),
    ],
)
def test_profile_code_groups(filename: str, group: str) -> None:
    assert code_group(filename, root=Path("/repo")) == group


# ------------------------------------------------------------------------------ report


def test_growth_exponent() -> None:
    assert report.growth_exponent([(100, 1.0), (1000, 10.0)]) == pytest.approx(1.0)
    assert report.growth_exponent([(100, 1.0), (300, 2.0), (1000, 100.0)]) == pytest.approx(2.0)
    assert report.growth_exponent([(100, 1.0)]) is None


def test_resource_line() -> None:
    assert report.resource_line([(2, 10), (10, 42), (100, 402)]) == (2.0, 4.0, True)
    assert report.resource_line([(2, 10), (10, 43), (100, 402)]) == (2.0, 4.0, False)
    assert report.resource_line([(2, 10)]) is None


def _path(total: float, count: int) -> graph.CriticalPath:
    steps = tuple(graph.Step(f"u{i}", "t", f"n{i}", 0, 0) for i in range(count))
    return graph.CriticalPath(total, steps)


def _size(
    tenants: int,
    program_s: float,
    floor_s: float,
    path_s: float = 300.0,
    path_n: int = 12,
    cross: tuple[graph.Wait, ...] = (),
    typed_s: float | None = None,
) -> report.SizeResult:
    # CPU = wall; the mock engine takes a tenth of each side. The typed floor defaults to the
    # program's own cost (a program that adds nothing to its types).
    cost = report.Cost(program_s, program_s, program_s / 10, 0.3, program_s + 0.5, 100.0, 20.0)
    floor = report.Cost(floor_s, floor_s, floor_s / 10, 0.3, floor_s + 0.5, 80.0, 5.0)
    typed_s = program_s if typed_s is None else typed_s
    typed = report.Cost(typed_s, typed_s, typed_s / 10, 0.3, typed_s + 0.5, 90.0, 10.0)
    return report.SizeResult(
        tenants=tenants,
        resources=10 + 30 * tenants,
        custom=8 + 25 * tenants,
        program=cost,
        floor=floor,
        typed_floor=typed,
        by_duration=_path(path_s, path_n),
        by_count=_path(float(path_n), path_n),
        independence=graph.Independence(tenants, 2 * tenants, cross_tenant=cross),
        pool_spans=(),
    )


def test_ratios_use_cpu_time_and_can_leave_the_mock_engine_out() -> None:
    base = _size(2, 1.0, 1.0)
    result = report.SizeResult(
        **{
            **base.__dict__,
            # wall 30 s vs 4 s (a busy machine), CPU 10 s vs 2 s, of which engine 4 s and 1 s.
            "program": report.Cost(30.0, 10.0, 4.0, 0.3, 31.0, 100.0, 20.0),
            "floor": report.Cost(4.0, 2.0, 1.0, 0.3, 5.0, 80.0, 5.0),
        }
    )
    assert result.ratio == 5.0  # 10 / 2
    assert result.ratio_wall == 7.5  # 30 / 4
    assert result.ratio_without_engine == 6.0  # (10 - 4) / (2 - 1)


def test_ci_passes_on_flat_paths_whatever_the_absolute_seconds() -> None:
    # 900 s against a 400 s floor is slow but only 2.25 x: structure is fine.
    checks = report.ci_checks([_size(2, 10.0, 5.0), _size(10, 900.0, 400.0)])
    assert [c.ok for c in checks] == [True, True, True, True]


def test_ci_fails_when_the_critical_path_grows() -> None:
    checks = report.ci_checks([_size(2, 1, 1), _size(10, 1, 1, path_s=360.0)])
    assert not checks[0].ok
    assert "2 tenants: 300 s" in checks[0].detail
    assert "10 tenants: 360 s" in checks[0].detail


def test_ci_fails_when_the_longest_chain_gets_longer() -> None:
    checks = report.ci_checks([_size(2, 1, 1, path_n=12), _size(10, 1, 1, path_n=13)])
    assert not checks[0].ok


def test_ci_fails_above_five_times_the_floor() -> None:
    checks = report.ci_checks([_size(2, 1.0, 1.0), _size(10, 5.5, 1.0)])
    assert [c.ok for c in checks] == [True, True, False, True]
    assert "5.50 x the floor" in checks[2].detail
    # The limit is an argument: --max-ratio 3 fails 3.5 x.
    assert not report.ci_checks([_size(10, 3.5, 1.0)], ratio_limit=3.0)[2].ok


def test_ci_fails_when_the_program_adds_more_than_twice_its_types_cost() -> None:
    # Program 4.2 s, typed floor 2 s, floor 1 s: types 2 x, program over types 2.1 x.
    checks = report.ci_checks([_size(10, 4.2, 1.0, typed_s=2.0)])
    assert [c.ok for c in checks] == [True, True, True, False]
    assert "2.10 x the typed floor" in checks[3].detail
    assert "the types alone: 2.00 x the floor" in checks[3].detail
    assert report.ci_checks([_size(10, 4.2, 1.0, typed_s=2.0)], overhead_limit=2.5)[3].ok


def test_the_ratio_is_the_types_weight_times_the_programs_overhead() -> None:
    result = _size(10, 6.0, 1.5, typed_s=4.0)
    assert result.ratio == 4.0  # 6 / 1.5
    assert result.type_weight == pytest.approx(4.0 / 1.5)
    assert result.overhead == 1.5  # 6 / 4
    assert result.type_weight * result.overhead == pytest.approx(result.ratio)


def test_ci_fails_when_a_tenant_waits_for_another() -> None:
    wait = graph.Wait(
        "urn:pulumi:lab::gpu-platform::gpu-platform:index:GpuTenant::bench-002",
        "urn:pulumi:lab::gpu-platform::gpu-platform:index:GpuTenant$kubernetes:core/v1:Namespace::ns",
        "urn:pulumi:lab::gpu-platform::gpu-platform:index:GpuTenant::bench-001",
    )
    checks = report.ci_checks([_size(2, 1, 1, cross=(wait,))])
    assert not checks[1].ok
    assert "GpuTenant bench-002 waits for kubernetes:core/v1:Namespace ns" in checks[1].detail


def test_goals_report_the_ratio_and_linearity() -> None:
    goals = report.goal_checks([_size(2, 0.1, 0.1), _size(100, 5.0, 2.0)])
    by_name = {g.name: g for g in goals}
    assert not by_name["ratio to the floor <= 1.5"].ok  # 2.5 x
    assert by_name["program over its typed floor <= 1.5"].ok  # typed floor = program here
    # 5 s / 0.1 s over 3010 / 70 resources: k = ln 50 / ln 43 = 1.04, linear.
    assert by_name["linear growth"].ok
    assert "k = 1.04" in by_name["linear growth"].detail


def test_table_aligns_numbers_right() -> None:
    text = report.table(["name", "n"], [["a", 1], ["bbb", 22.5]])
    assert text.splitlines() == ["name      n", "----  -----", "a         1", "bbb   22.50"]


def test_render_and_json_cover_every_section() -> None:
    platform = parse_platform(load_stack_config("lab")[PLATFORM_KEY])
    result = report.Report(
        mode="ci",
        stack="lab",
        preview=False,
        repeat=1,
        machine={"python": "3", "platform": "x", "cpus": 2},
        sizes=[_size(2, 1.0, 0.5), _size(10, 4.0, 2.0)],
        footprints=[stack_footprint("lab", platform)],
        durations=graph.DURATIONS,
    )
    result.checks = report.ci_checks(result.sizes)
    text = report.render(result)
    for heading in ("1. Program evaluated", "2. Deployment critical path", "3. Control-plane"):
        assert heading in text
    assert "[ok] ratio to the floor <= 5" in text
    assert "[ok] program over its typed floor <= 2" in text
    assert "garbage collector's share of the CPU at the largest size: program 0%" in text
    data = json.loads(json.dumps(report.to_json(result)))
    assert [s["tenants"] for s in data["sizes"]] == [2, 10]
    assert data["sizes"][1]["ratio"] == 2.0
    assert data["sizes"][1]["type_weight"] == 2.0  # typed floor = program: 4 s / 2 s
    assert data["sizes"][1]["program_over_typed_floor"] == 1.0
    assert data["sizes"][1]["typed_floor"]["eval_cpu_seconds"] == 4.0
    assert data["growth"]["resources_per_tenant"] == 30
    assert data["footprint"]["stacks"]["lab"]["cpu_cores"] == pytest.approx(1.0)
