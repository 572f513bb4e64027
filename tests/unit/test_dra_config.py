"""gpuSharing: hami | dra per tenant (issue 43, point 1): the default keeps HAMi, and a DRA
tenant is refused, one line naming the key and the fix, where its Kubernetes version or the
environment's DRA driver cannot do what it asks."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components import kubernetes_versions
from components.config import ConfigError
from components.stack import parse_platform
from tests.support.harness import load_stack_config

PLATFORM_KEY = "gpu-platform:platform"


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab")[PLATFORM_KEY])


def _errors(raw: dict[str, Any]) -> list[str]:
    with pytest.raises(ConfigError) as caught:
        parse_platform(raw)
    message = str(caught.value).removeprefix("invalid stack configuration:").strip()
    return [line.strip().removeprefix("- ") for line in message.splitlines() if line.strip()]


def dra_lab() -> dict[str, Any]:
    """The lab stack with tenant-a (one A100-80GB) switched to DRA and its HAMi quota gone."""
    raw = _lab()
    tenant = raw["tenants"][0]
    tenant["gpuSharing"] = "dra"
    del tenant["gpuQuotas"]
    tenant["workloads"] = [
        {"name": "whole-card", "gpu": {"cards": 1, "memoryMiB": 20000, "cores": 100}}
    ]
    tenant["deviceQuotas"] = [{"namespace": "default", "devices": 1}]
    return raw


def test_the_default_is_hami() -> None:
    platform = parse_platform(_lab())
    assert {t.gpu_sharing for t in platform.tenants} == {"hami"}


def test_a_lab_tenant_of_a100s_on_v1_35_may_switch_to_dra() -> None:
    platform = parse_platform(dra_lab())
    assert [t.gpu_sharing for t in platform.tenants] == ["dra", "hami"]


def test_an_unknown_sharing_is_refused() -> None:
    raw = _lab()
    raw["tenants"][0]["gpuSharing"] = "mig"
    with pytest.raises(ConfigError) as caught:
        parse_platform(raw)
    assert "gpuSharing" in str(caught.value)


def test_a_version_without_resource_k8s_io_v1_is_refused() -> None:
    raw = dra_lab()
    raw["tenants"][0]["kubernetesVersion"] = "v1.33.7"
    (line,) = [e for e in _errors(raw) if "gpuSharing" in e]
    assert line.startswith("tenants[0].gpuSharing: dra: v1.33.7 serves no resource.k8s.io/v1")
    assert "v1.34 or later" in line


def test_v1_34_is_the_first_version_that_serves_dra() -> None:
    assert kubernetes_versions.dra_problem("v1.34.0") is None
    assert kubernetes_versions.dra_problem("v1.33.12") is not None


def test_a_fraction_names_the_consumable_capacity_gate() -> None:
    raw = dra_lab()
    raw["tenants"][0]["workloads"][0]["gpu"]["cores"] = 30
    (line,) = _errors(raw)
    assert line.startswith("tenants[0].workloads[0].gpu.cores: 30 is a fraction of a card")
    assert "DRAConsumableCapacity" in line
    version = raw["tenants"][0].get("kubernetesVersion") or raw["kubernetesVersion"]
    assert f"alpha and off by default at {version}" in line
    assert "cores: 100" in line


def test_fractions_stay_refused_where_the_gate_is_not_traced() -> None:
    problem = kubernetes_versions.fractions_problem("v1.36.0")
    assert problem is not None
    assert "not traced" in problem


def test_hami_quotas_on_a_dra_tenant_are_refused() -> None:
    raw = dra_lab()
    raw["tenants"][0]["gpuQuotas"] = _lab()["tenants"][0]["gpuQuotas"]
    (line,) = _errors(raw)
    assert line.startswith("tenants[0].gpuQuotas:")
    assert "remove gpuQuotas" in line


def test_the_lab_driver_publishes_only_80gi_cards() -> None:
    raw = dra_lab()
    raw["tenants"][1]["gpuSharing"] = "dra"
    del raw["tenants"][1]["gpuQuotas"]
    del raw["tenants"][1]["workloads"]
    (line,) = _errors(raw)
    assert line.startswith("tenants[1].workerPools[0].cards: the lab's DRA driver")
    assert "dra-example-driver v0.4.0" in line
    assert "81920 MiB" in line


def test_the_lab_driver_publishes_one_card_count_on_every_node() -> None:
    raw = dra_lab()
    pool = copy.deepcopy(raw["tenants"][0]["workerPools"][0])
    pool["name"] = "a100-pair"
    pool["cards"][0]["count"] = 2
    raw["tenants"][0]["workerPools"].append(pool)
    (line,) = [e for e in _errors(raw) if "DRA driver" in e]
    assert line.startswith("tenants[0].workerPools: the lab's DRA driver")
    assert "[1, 2]" in line


def dra_prod() -> dict[str, Any]:
    """The prod stack with team-vision switched to DRA (NVIDIA's driver through the GPU
    Operator's GPUCluster), its HAMi quota gone, one whole-card workload, and the driver the
    machine images ship (the only one a GPUCluster works with)."""
    raw = copy.deepcopy(load_stack_config("prod")[PLATFORM_KEY])
    raw["gpuDriver"] = {"source": "preinstalled"}
    tenant = raw["tenants"][0]
    tenant["gpuSharing"] = "dra"
    tenant.pop("gpuQuotas", None)
    tenant["workloads"] = [
        {"name": "whole-card", "gpu": {"cards": 1, "memoryMiB": 20000, "cores": 100}}
    ]
    return raw


def test_a_prod_tenant_on_a_preinstalled_driver_may_switch_to_dra() -> None:
    platform = parse_platform(dra_prod())
    assert [t.gpu_sharing for t in platform.tenants] == ["dra", "hami", "hami"]


def test_prod_refuses_dra_on_a_driver_the_gpu_cluster_does_not_install() -> None:
    """A GPUCluster installs no driver (gpu-operator v26.7.0 internal/state/manager.go:134-145)."""
    for source, extra in (("runtime-built", {}), ("precompiled", {"version": "595"})):
        raw = dra_prod()
        raw["gpuDriver"] = {"source": source, **extra}
        lines = [e for e in _errors(raw) if "gpuSharing" in e]
        assert len(lines) == 1, lines
        assert lines[0].startswith("tenants[0].gpuSharing: dra: the GPU Operator's DRA stack")
        assert "gpuDriver.source: preinstalled" in lines[0]
        assert source in lines[0]


def test_prod_refuses_a_fraction_once_in_one_line() -> None:
    """The platform's check (DRAConsumableCapacity off) already names the key: prod adds no
    second line for the same workload."""
    raw = dra_prod()
    raw["tenants"][0]["workloads"][0]["gpu"]["cores"] = 30
    lines = [e for e in _errors(raw) if "gpu.cores" in e]
    assert len(lines) == 1, lines
    assert lines[0].startswith("tenants[0].workloads[0].gpu.cores: 30 is a fraction")


def test_prod_refuses_a_fraction_the_driver_cannot_share_even_with_the_gate(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """Where Kubernetes could share a card (a version with DRAConsumableCapacity on), NVIDIA's
    driver still publishes no compute capacity: prod refuses the fraction itself."""
    from components.prod import config_checks

    monkeypatch.setattr(config_checks, "fractions_problem", lambda version: None)
    raw = dra_prod()
    raw["tenants"][0]["workloads"][0]["gpu"]["cores"] = 30
    (line,) = [e for e in _errors(raw) if "NVIDIA" in e]
    assert line.startswith("tenants[0].workloads[0].gpu.cores: 30 is a fraction of a card:")
    assert "NVIDIA's DRA driver publishes no compute capacity" in line


def test_the_hami_acceptance_tests_leave_a_dra_tenant_out() -> None:
    """TC-02's inventory, TC-03's webhook pod, TC-04 ... TC-06's sharing plan, TC-07/08's GPU
    capacity and TC-18's held share are HAMi's: on a dra tenant they would judge what its
    workers no longer advertise (review of issue 43's first version)."""
    from tests.acceptance import stack

    platform = parse_platform(dra_lab())
    dra_tenant = next(t for t in platform.tenants if t.gpu_sharing == "dra")
    assert dra_tenant not in stack.hami_tenants(platform)
    assert stack.expected_capacity(platform, dra_tenant) == {}
    plan = stack.plan_sharing(platform)
    assert plan is None or plan.tenant != dra_tenant.name
    hami = parse_platform(_lab())
    assert stack.plan_sharing(hami) is not None
    assert stack.expected_capacity(hami, hami.tenants[0])
