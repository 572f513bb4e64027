"""Scaling structure of the whole program under mocks (fast; no timings asserted).

Synthetic lab stacks of 2 and 3 tenants (two pools each, see ``benchmarks.synthetic``): adding a
tenant adds the same resources and never lengthens the deployment's critical path, no tenant waits
for another and no pool for its sibling. ``python -m benchmarks`` measures the same at 2..100.
"""

from __future__ import annotations

from collections import Counter

import pytest

from benchmarks import graph
from benchmarks.floor import floor_shape, shape_to_json
from benchmarks.runner import Measurement, measure
from benchmarks.synthetic import synthetic_config
from benchmarks.typed_floor import unsupported_types
from tests.support.harness import Recording, evaluate, load_stack_config

SIZES = (2, 3)


@pytest.fixture(scope="module")
def scaled() -> dict[int, Recording]:
    base = load_stack_config("lab")
    recordings = {n: evaluate("lab", False, config=synthetic_config(base, n)) for n in SIZES}
    for n, recording in recordings.items():
        assert recording.error is None, f"{n} tenants: {recording.error}"
        assert recording.duplicate_urns == [], f"{n} tenants: {recording.duplicate_urns[:3]}"
    return recordings


def test_every_tenant_adds_the_same_resources(scaled: dict[int, Recording]) -> None:
    small, large = (scaled[n] for n in SIZES)
    per_tenant = len(large.resources) - len(small.resources)
    tenants = small.of_type("gpu-platform:index:GpuTenant")
    first = tenants[0]
    in_first = [r for r in small.resources if r is first or first in small.ancestors(r)]
    # The management cluster's own per-tenant parts (the lab backup store's archive key of each
    # tenant, components/lab/backup_store.py) are named after the tenant; nothing else may be.
    tenant_roots = small.of_type("gpu-platform:index:GpuTenant")
    outside = [
        r
        for r in small.resources
        if f"-{first.name}-" in r.name
        and r not in tenant_roots
        and not any(t in small.ancestors(r) for t in tenant_roots)
    ]
    assert [r.name for r in outside] == [f"management-{first.name}-backup-archive-key"]
    assert per_tenant == len(in_first) + len(outside), (
        "a tenant adds resources outside its own component"
    )


def test_critical_path_does_not_grow_with_tenants(scaled: dict[int, Recording]) -> None:
    small, large = (graph.nodes_from(scaled[n].resources) for n in SIZES)
    for weight in (graph.duration_weight, graph.count_weight):
        before = graph.critical_path(small, weight)
        after = graph.critical_path(large, weight)
        assert after.total == before.total, (
            f"{weight.__name__}: {before.total} at {SIZES[0]} tenants, {after.total} at "
            f"{SIZES[1]}: {[s.name for s in after.chain]}"
        )


def test_tenants_and_pools_never_wait_for_each_other(scaled: dict[int, Recording]) -> None:
    result = graph.independence(graph.nodes_from(scaled[SIZES[1]].resources))
    assert result.pools == 2 * SIZES[1]
    assert result.cross_tenant == ()
    assert result.cross_pool == ()


def test_benchmark_runner_records_what_the_harness_records(
    scaled: dict[int, Recording],
) -> None:
    config = synthetic_config(load_stack_config("lab"), SIZES[0])
    program = measure("program", "lab", config, SIZES[0], timeout=240)
    assert program.error is None
    assert {r.urn for r in program.resources} == {r.urn for r in scaled[SIZES[0]].resources}
    assert program.eval_seconds > 0
    assert program.peak_rss_kib >= program.baseline_rss_kib > 0
    assert 0 < program.gc_cpu_seconds < program.eval_cpu_seconds  # 100 resources: it collects
    shape = shape_to_json(floor_shape(graph.nodes_from(program.resources)))
    floor = measure("floor", "lab", config, SIZES[0], shape=shape, timeout=240)
    assert floor.error is None
    assert floor.count == program.count
    assert {r.type for r in floor.resources} <= {
        "gpu-platform:bench:Group",
        "gpu-platform:bench:Trivial",
    }


def _kinds(run: Measurement) -> Counter[tuple[str, bool, bool]]:
    """How many resources of each (type, custom, read) a run registered; components count by
    kind only (the floors give every component one group type)."""
    return Counter((r.type if r.custom else "component", r.custom, r.read) for r in run.resources)


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_typed_floor_registers_exactly_the_programs_types(stack: str) -> None:
    """The typed floor is only a fair price of the program's types if it registers the same
    ones, as many of each, reads as reads; and it must cover every type both stacks use."""
    config = load_stack_config(stack)
    program = measure("program", stack, config, 0, timeout=240)
    assert program.error is None
    shape = floor_shape(graph.nodes_from(program.resources))
    assert unsupported_types(shape) == []
    typed = measure("typed-floor", stack, config, 0, shape=shape_to_json(shape), timeout=240)
    assert typed.error is None
    assert _kinds(typed) == _kinds(program)
    # Nothing of the program's wiring: no dependencies, no explicit providers.
    assert not any(r.dependencies or any(r.property_dependencies.values()) for r in typed.resources)
    assert not any(r.provider for r in typed.resources)
