"""What a tenant's admission params say about its GPU sharing (components.admission_policies):
pure functions, the values the claim rules read (docs/dra.md, The same rules)."""

from __future__ import annotations

import pytest

from components.admission_policies import (
    DeviceSharing,
    admission_binding,
    admission_params,
    claim_rule_definitions,
    device_sharing,
    rule_definitions,
)
from components.config import AdmissionSettings
from components.lab import dra_driver
from components.stack import parse_platform
from tests.unit.test_dra_config import _lab, dra_lab


def test_a_dra_tenant_names_its_classes_and_its_largest_node() -> None:
    tenant = parse_platform(dra_lab()).tenants[0]
    pool = tenant.worker_pools[0]
    # The models alone (the lab's driver refuses pools of different counts; another need not).
    big = pool.model_copy(
        update={"cards": [pool.cards[0].model_copy(update={"count": 3})], "name": "big"}
    )
    tenant = tenant.model_copy(update={"worker_pools": [pool, big]})
    sharing = device_sharing(tenant, ("b", "a", "a"))
    assert sharing == DeviceSharing("dra", ("a", "b"), 3)


def test_a_hami_tenant_says_hami_and_names_no_class() -> None:
    tenant = parse_platform(_lab()).tenants[0]
    assert device_sharing(tenant, (dra_driver.DEVICE_CLASS,)) == DeviceSharing()
    data = admission_params(rule_definitions(), AdmissionSettings(), {}, DeviceSharing())["data"]
    assert data == {"wholeCards": "true", "gpuSharing": "hami"}


def test_the_params_carry_the_classes_and_the_count() -> None:
    sharing = DeviceSharing("dra", ("gpu.example.com",), 4)
    data = admission_params(rule_definitions(), AdmissionSettings(), {}, sharing)["data"]
    assert data["gpuSharing"] == "dra"
    assert data["deviceClass.gpu.example.com"] == "true"
    assert data["maxDevicesPerRequest"] == "4"


def test_a_hami_sharing_with_classes_is_refused() -> None:
    with pytest.raises(ValueError, match="no DeviceClasses"):
        DeviceSharing("hami", ("gpu.example.com",))
    with pytest.raises(ValueError, match="gpuSharing"):
        DeviceSharing("mig")


def test_the_claim_binding_selects_every_namespace_the_pod_binding_not() -> None:
    claims = admission_binding(claim_rule_definitions(), "Deny", [], {})
    assert claims["spec"]["matchResources"] == {"namespaceSelector": {}}
    pods = admission_binding(rule_definitions(), "Deny", ["kube-system"], {})
    expressions = pods["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
    assert expressions[0]["values"] == ["kube-system"]
