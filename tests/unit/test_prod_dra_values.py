"""A prod ``gpuSharing: dra`` tenant (issue 43, point 3): its GPU Operator runs the GPUCluster
(NVIDIA's DRA driver) instead of the ClusterPolicy, on the host's driver only, and HAMi's device
plugin is off for it; the substrate names NVIDIA's driver and DeviceClass for its claims."""

from __future__ import annotations

from pathlib import Path

import pytest
import yaml

from components.config import GpuDriver, HamiSettings
from components.prod.substrate import ProdSubstrate
from components.prod.tenant_values import (
    NVIDIA_DRA_DRIVER,
    NVIDIA_GPU_DEVICE_CLASS,
    gpu_cluster_problem,
    gpu_cluster_values,
    gpu_operator_values,
)
from components.tenant_values import hami_values, webhook_excluded_namespaces
from tests.support.contracts import missing_values_keys

PREINSTALLED = GpuDriver(source="preinstalled")


def test_a_dra_tenant_gets_the_gpu_cluster_and_no_cluster_policy() -> None:
    values = gpu_operator_values(PREINSTALLED, dra=True)
    assert values["gpuCluster"] == {"deployCR": True}
    assert values["clusterPolicy"] == {"deployCR": False}
    # The chart refuses a GPUCluster with its driver on and no NVIDIADriver CRD
    # (gpu-operator v26.7.0 deployments/gpu-operator/templates/validations.yaml:5-6).
    assert values["driver"] == {"enabled": False}
    assert values["draDriver"] == {"computeDomains": {"enabled": False}}


def test_a_hami_tenant_keeps_the_cluster_policy() -> None:
    values = gpu_operator_values(PREINSTALLED)
    assert "gpuCluster" not in values
    assert "clusterPolicy" not in values
    assert values["devicePlugin"] == {"enabled": False}
    assert values["toolkit"]["enabled"] is True


@pytest.mark.parametrize(
    "driver",
    [GpuDriver(), GpuDriver(source="precompiled", version="595")],
    ids=["runtime-built", "precompiled"],
)
def test_the_gpu_cluster_refuses_a_driver_it_does_not_install(driver: GpuDriver) -> None:
    problem = gpu_cluster_problem(driver)
    assert problem is not None
    assert "gpuDriver.source: preinstalled" in problem
    with pytest.raises(ValueError, match="installs no driver"):
        gpu_cluster_values(driver)


def test_the_gpu_cluster_takes_the_hosts_driver() -> None:
    assert gpu_cluster_problem(PREINSTALLED) is None


def test_gpu_cluster_values_keys_exist_in_the_pinned_chart(upstream_dir: Path) -> None:
    values = gpu_operator_values(PREINSTALLED, dra=True)
    assert missing_values_keys(upstream_dir, "gpu-operator", values) == []


def test_the_chart_defaults_are_what_the_values_turn_around(upstream_dir: Path) -> None:
    """The values change the chart's defaults (a ClusterPolicy, no GPUCluster, the driver
    and ComputeDomains on), and the chart's DRA driver is a released tag, not a moving one."""
    defaults = yaml.safe_load((upstream_dir / "gpu-operator" / "values.yaml").read_text())
    assert defaults["clusterPolicy"]["deployCR"] is True
    assert defaults["gpuCluster"]["deployCR"] is False
    assert defaults["driver"]["enabled"] is True
    assert defaults["draDriver"]["computeDomains"]["enabled"] is True
    assert defaults["draDriver"]["image"] == "dra-driver-nvidia-gpu"
    assert defaults["draDriver"]["version"] == "v0.5.0"


def test_hami_publishes_no_cards_in_a_dra_tenant() -> None:
    """HAMi's webhook and scheduler stay; its device plugin would offer the cards NVIDIA's DRA
    driver publishes, and overwriteEnv would hide them from every DRA pod."""
    common = {
        "kubernetes_version": "v1.35.0",
        "hami": HamiSettings(webhook_failure_policy="Fail", node_lock_timeout="5m"),
        "modes": {"nvidia"},
        "excluded_namespaces": webhook_excluded_namespaces(
            ProdSubstrate().tenant_system_namespaces
        ),
    }
    hami = hami_values(**common)  # type: ignore[arg-type]
    dra = hami_values(**common, hami_cards=False)  # type: ignore[arg-type]
    assert hami["devicePlugin"]["enabled"] is True
    assert hami["scheduler"]["overwriteEnv"] == "true"
    assert dra["devicePlugin"] == {"enabled": False}
    assert "overwriteEnv" not in dra["scheduler"]
    assert dra["scheduler"]["admissionWebhook"] == hami["scheduler"]["admissionWebhook"]


def test_the_nvidia_driver_and_class_are_the_operators() -> None:
    """The class the claims name is the one the operator's GPUCluster creates
    (gpu-operator v26.7.0 manifests/state-dra-driver/0400_deviceclass-gpu.yaml:4-8)."""
    assert NVIDIA_GPU_DEVICE_CLASS == "gpu.nvidia.com"
    assert NVIDIA_DRA_DRIVER == "gpu.nvidia.com"
