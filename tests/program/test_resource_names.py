"""Names: what the components register is exactly what ``components.resource_names`` plans, and a
config whose names would clash is refused before anything is registered.

The engine refuses a second registration of one URN (``Duplicate resource URN``) after the first
has been created; the mocks did not, so these configs used to "pass" here and fail for real.
"""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.name_plan import planned_names
from components.resource_names import POOL_SCOPE, TENANT_SCOPE
from components.stack import parse_stack
from tests.support.harness import Recording, evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab"))


def _dra_lab() -> dict[str, Any]:
    """The lab with tenant-a on gpuSharing: dra (the fake DRA driver, claim templates)."""
    from tests.unit.test_dra_config import dra_lab

    config = copy.deepcopy(load_stack_config("lab"))
    config[PLATFORM] = dra_lab()
    return config


def _rich_lab() -> dict[str, Any]:
    """The lab with everything that multiplies names: two pools of two nodes, quotas and
    workloads in namespaces the tenant has to create."""
    config = _lab()
    tenant = config[PLATFORM]["tenants"][0]
    tenant["workerPools"][0]["replicas"] = 2
    tenant["workerPools"].append(dict(tenant["workerPools"][0], name="a100-b"))
    tenant["gpuQuotas"].append(dict(tenant["gpuQuotas"][0], namespace="research"))
    tenant["workloads"] = [
        {"name": "train", "namespace": "research", "gpu": {"memoryMiB": 1000, "cores": 10}},
        {"name": "serve", "namespace": "default", "gpu": {"memoryMiB": 1000, "cores": 10}},
    ]
    return config


def _rich_prod() -> dict[str, Any]:
    """prod with a workload (in a namespace its quota covers) and a pool without a health
    check."""
    config = copy.deepcopy(load_stack_config("prod"))
    tenant = config[PLATFORM]["tenants"][0]
    tenant["workloads"] = [
        {"name": "serve", "namespace": "inference", "gpu": {"memoryMiB": 1000, "cores": 10}}
    ]
    if tenant.get("gpuQuotas"):
        tenant["gpuQuotas"].append(dict(tenant["gpuQuotas"][0], namespace="inference"))
    tenant["workerPools"].append(copy.deepcopy(tenant["workerPools"][0]))
    tenant["workerPools"][-1]["name"] = "spare"
    tenant["workerPools"][-1]["machine"].pop("healthCheck", None)
    return config


CONFIGS = {
    "lab": ("lab", _lab),
    "rich-lab": ("lab", _rich_lab),
    "dra-lab": ("lab", _dra_lab),
    "prod": ("prod", lambda: copy.deepcopy(load_stack_config("prod"))),
    "rich-prod": ("prod", _rich_prod),
}


def _registered(recording: Recording) -> set[tuple[str, str]]:
    """(component type a resource sits directly under, its name) for tenant and pool children.
    The mock's URN type is ``<parent's type>$<type>``."""
    registered = set()
    for reg in recording.resources:
        scope = reg.urn.split("::")[2].split("$")[0]
        if scope in (TENANT_SCOPE, POOL_SCOPE):
            registered.add((scope, reg.name))
    return registered


@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
@pytest.mark.parametrize("case", sorted(CONFIGS))
def test_planned_names_are_what_the_components_register(case: str, preview: bool) -> None:
    stack, make = CONFIGS[case]
    config = make()
    recording = evaluate(stack, preview, config=config)
    assert recording.error is None, recording.error
    stack = parse_stack(config[PLATFORM])
    planned = {(p.scope, p.name) for p in planned_names(stack.platform, stack.substrate)}
    registered = _registered(recording)
    assert registered - planned == set(), "registered but not planned: add it to resource_names"
    assert planned - registered == set(), "planned but never registered"


def _colliding_pools() -> dict[str, Any]:
    config = _lab()
    tenants = config[PLATFORM]["tenants"]
    tenants[0]["name"], tenants[0]["workerPools"][0]["name"] = "team", "a-l4"
    tenants[1]["name"], tenants[1]["workerPools"][0]["name"] = "team-a", "l4"
    return config


def _colliding_workloads() -> dict[str, Any]:
    config = _lab()
    tenant = config[PLATFORM]["tenants"][1]
    sample = tenant["workloads"][0]
    tenant["workloads"] = [
        dict(sample, namespace="default", name="a-b"),
        dict(sample, namespace="default-a", name="b"),
    ]
    # A tenant with quotas meters every workload's namespace (else the config is refused first).
    tenant["gpuQuotas"].append(dict(tenant["gpuQuotas"][0], namespace="default-a"))
    return config


def _colliding_namespaces() -> dict[str, Any]:
    """tenant ``a``'s quota namespace ``ns-b`` and tenant ``a-ns``'s namespace ``b``."""
    config = _lab()
    tenants = config[PLATFORM]["tenants"]
    tenants[0]["name"] = "a"
    tenants[0]["gpuQuotas"][0]["namespace"] = "ns-b"
    tenants[1]["name"] = "a-ns"
    tenants[1]["gpuQuotas"][0]["namespace"] = "b"
    for tenant in tenants:  # their workloads' namespace no longer has a quota
        tenant["workloads"] = []
    return config


def _colliding_pool_and_tenant_part() -> dict[str, Any]:
    """tenant ``a``'s pool ``b-hami`` and tenant ``a-b``'s HAMi release."""
    config = _lab()
    tenants = config[PLATFORM]["tenants"]
    tenants[0]["name"] = "a"
    tenants[0]["workerPools"][0]["name"] = "b-hami"
    tenants[1]["name"] = "a-b"
    return config


COLLISIONS = {
    "pools": (
        _colliding_pools,
        [
            "tenants[0].workerPools[0] (team: pool a-l4)",
            "tenants[1].workerPools[0] (team-a: pool l4)",
        ],
    ),
    "workloads": (
        _colliding_workloads,
        ["tenants[1].workloads[0] (tenant-b: default/a-b)", "tenants[1].workloads[1]"],
    ),
    "namespaces": (_colliding_namespaces, ["tenants[0]", "tenants[1]", "'a-ns-ns-b'"]),
    "pool-and-part": (_colliding_pool_and_tenant_part, ["tenants[0].workerPools[0]", "a-b-hami"]),
}


@pytest.mark.parametrize("case", sorted(COLLISIONS))
def test_colliding_names_are_refused_before_anything_registers(case: str) -> None:
    make, mentioned = COLLISIONS[case]
    recording = evaluate("lab", False, config=make())
    assert recording.error is not None
    assert recording.run_error, recording.error
    assert recording.resources == []
    assert "Pulumi refuses a duplicate URN" in recording.error
    for fragment in mentioned:
        assert fragment in recording.error


def test_a_bad_config_fails_as_one_line_run_error() -> None:
    config = _lab()
    config[PLATFORM]["tenants"][0]["network"]["podCidr"] = "not-a-cidr"
    recording = evaluate("lab", False, config=config)
    assert recording.run_error, recording.error
    assert recording.resources == []
    message = recording.error.split(": ", 1)[1] if recording.error else ""
    assert "\n" not in message
    assert "tenants[0].network.podCidr" in message
