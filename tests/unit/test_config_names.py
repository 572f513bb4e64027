"""Config checks on names that would otherwise fail only at registration or in a cluster, and the
shape of every config error (a ``pulumi.RunError`` the CLI prints as one line per problem)."""

from __future__ import annotations

import copy
from typing import Any

import pulumi
import pytest

from components.config import ConfigError, check_secrets_present
from components.name_plan import name_collisions
from components.resource_names import HELM_RELEASE_NAME_MAX
from components.stack import parse_platform, substrate_for
from tests.support.harness import load_stack_config

PLATFORM = "gpu-platform:platform"


def _platform(stack: str) -> dict[str, Any]:
    return copy.deepcopy(load_stack_config(stack)[PLATFORM])


def _refused(raw: dict[str, Any]) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_platform(raw)
    return str(caught.value)


def test_the_shipped_stacks_have_no_name_problems() -> None:
    for stack in ("lab", "prod"):
        platform = parse_platform(_platform(stack))
        assert name_collisions(platform, substrate_for(platform)) == []


@pytest.mark.parametrize(
    "name",
    ["kube-system", "kube-public", "kube-anything", "default", "kamaji-system", "cert-manager",
     "metallb-system", "capi-system", "capi-operator-system", "local-path-storage"],
)  # fmt: skip
@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_tenants_named_after_owned_namespaces_are_refused(stack: str, name: str) -> None:
    raw = _platform(stack)
    raw["tenants"][0]["name"] = name
    message = _refused(raw)
    assert f"tenants[0].name: {name!r} is a namespace" in message
    assert "pick another name" in message


def test_a_dedicated_etcd_release_name_over_helms_limit_is_refused() -> None:
    raw = _platform("prod")
    platform = parse_platform(raw)
    index = next(
        i
        for i, tenant in enumerate(platform.tenants)
        if tenant.data_store.dedicated and tenant.data_store.dedicated.deploys_kamaji_etcd
    )
    longest = HELM_RELEASE_NAME_MAX - len("-etcd")
    raw["tenants"][index]["name"] = "t" * longest
    parse_platform(raw)
    raw["tenants"][index]["name"] = "t" * (longest + 1)
    message = _refused(raw)
    assert f"tenants[{index}].name" in message
    assert f"Helm allows {HELM_RELEASE_NAME_MAX}" in message
    assert f"shorten the tenant name to {longest} characters" in message


def test_a_lab_worker_name_over_63_characters_is_refused() -> None:
    raw = _platform("lab")
    pool = raw["tenants"][0]["workerPools"][0]
    pool["replicas"] = 10  # the last node is <tenant>-<pool>-9
    pool["name"] = "p" * (63 - len("tenant-a--9"))
    parse_platform(raw)
    pool["name"] += "p"
    message = _refused(raw)
    assert "tenants[0].workerPools[0].name" in message
    assert "shorten the tenant or pool name" in message


def test_a_prod_pool_object_name_over_63_characters_is_refused() -> None:
    raw = _platform("prod")
    tenant = raw["tenants"][0]
    pool = tenant["workerPools"][0]
    assert pool["machine"]["healthCheck"]["enabled"]
    pool["name"] = "p" * (63 - len(f"{tenant['name']}--health"))
    parse_platform(raw)
    pool["name"] += "p"
    assert "tenants[0].workerPools[0].name: the pool's Cluster API object" in _refused(raw)


def test_config_errors_are_run_errors_the_cli_prints_without_a_traceback() -> None:
    assert issubclass(ConfigError, pulumi.RunError)
    raw = _platform("lab")
    raw["tenants"][0]["name"] = "Tenant_A"
    with pytest.raises(pulumi.RunError):
        parse_platform(raw)


def test_one_problem_is_one_line_naming_the_key_and_the_fix() -> None:
    raw = _platform("lab")
    raw["tenants"][0]["name"] = "kube-system"
    message = _refused(raw)
    assert "\n" not in message
    assert message.startswith("invalid stack configuration: tenants[0].name: ")


def test_several_problems_are_one_line_each() -> None:
    raw = _platform("lab")
    raw["tenants"][0]["name"] = "kube-system"
    raw["tenants"][1]["name"] = "default"
    lines = _refused(raw).splitlines()
    assert lines[0] == "invalid stack configuration:"
    assert [line.split(":")[0].strip() for line in lines[1:]] == [
        "tenants[0].name",
        "tenants[1].name",
    ]


def test_a_missing_secret_is_one_line_with_the_command() -> None:
    platform = parse_platform(_platform("prod"))
    with pytest.raises(ConfigError) as caught:
        check_secrets_present(platform, lambda key: None if key == "managementKubeconfig" else "x")
    assert str(caught.value) == (
        "secret config values are missing: managementKubeconfig: set it with "
        "`pulumi config set --secret managementKubeconfig < <file>`"
    )


def test_a_tenant_namespace_named_like_the_usage_namespace_is_refused_naming_the_platforms() -> (
    None
):
    """Each tenant gets the platform's namespace gpu-platform-usage (its published usage,
    components.metrics.self_view): a workload namespace of that name collides, and the line says
    which one to rename (the platform's is reserved)."""
    raw = _platform("lab")
    tenant = next(t for t in raw["tenants"] if t.get("workloads") and t.get("gpuQuotas"))
    old = tenant["workloads"][0]["namespace"]
    for item in (*tenant["workloads"], *tenant["gpuQuotas"]):
        if item["namespace"] == old:
            item["namespace"] = "gpu-platform-usage"
    message = _refused(raw)
    reserved = f"the platform's usage namespace 'gpu-platform-usage' in {tenant['name']} (reserved)"
    assert reserved in message
    assert "rename one of them" in message
