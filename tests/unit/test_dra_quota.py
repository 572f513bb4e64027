"""A gpuSharing: dra tenant's deviceQuotas (issue 43 point 3): the ResourceQuota key Kubernetes'
ResourceClaim evaluator charges, and the configuration's checks, as gpuQuotas have them."""

from __future__ import annotations

import pytest

from components.config import ConfigError, DeviceQuota
from components.lab import dra_driver
from components.stack import parse_platform
from components.tenant_specs import device_quota, namespaces_to_create
from tests.unit.test_dra_config import _errors, _lab, dra_lab


def test_the_quota_names_each_device_class_as_kubernetes_counts_it() -> None:
    # kubernetes v1.35.0 pkg/quota/v1/evaluator/core/resource_claims.go:46-50:
    # V1ResourceByDeviceClass("gpuclass") == "gpuclass.deviceclass.resource.k8s.io/devices".
    quota = DeviceQuota(namespace="team", devices=3)
    manifest = device_quota(quota, "tenant-a", ("b.example.com", dra_driver.DEVICE_CLASS))
    assert manifest["metadata"]["namespace"] == "team"
    assert manifest["spec"]["hard"] == {
        "b.example.com.deviceclass.resource.k8s.io/devices": "3",
        "gpu.example.com.deviceclass.resource.k8s.io/devices": "3",
    }


def test_a_dra_tenant_may_have_device_quotas_and_their_namespaces_are_created() -> None:
    raw = dra_lab()
    raw["tenants"][0]["deviceQuotas"].append({"namespace": "research", "devices": 2})
    tenant = parse_platform(raw).tenants[0]
    assert [q.devices for q in tenant.device_quotas] == [1, 2]
    assert namespaces_to_create(tenant) == ["research"]


def test_device_quotas_on_a_hami_tenant_are_refused() -> None:
    raw = _lab()
    raw["tenants"][1]["deviceQuotas"] = [{"namespace": "default", "devices": 1}]
    (line,) = _errors(raw)
    assert line.startswith("tenants[1].deviceQuotas:")
    assert "use gpuQuotas" in line


def test_declared_workloads_must_fit_the_device_quota() -> None:
    raw = dra_lab()
    raw["tenants"][0]["workloads"][0]["replicas"] = 2
    (line,) = _errors(raw)
    assert line.startswith("tenants[0].deviceQuotas[0].devices:")
    assert "claim 2 (replicas x cards)" in line


def test_a_workload_outside_every_device_quota_is_refused() -> None:
    raw = dra_lab()
    raw["tenants"][0]["workloads"][0]["namespace"] = "research"
    (line,) = _errors(raw)
    assert line.startswith("tenants[0].workloads[0].namespace:")
    assert "no deviceQuotas entry" in line


def test_a_namespace_is_quota_d_once() -> None:
    raw = dra_lab()
    raw["tenants"][0]["deviceQuotas"].append({"namespace": "default", "devices": 2})
    with pytest.raises(ConfigError, match="device quota namespace default is declared twice"):
        parse_platform(raw)
