"""DeviceClasses and ResourceClaimTemplates of a DRA tenant (issue 43, point 2): whole cards and
fractions in the shape resource.k8s.io/v1 of Kubernetes v1.35.0 accepts."""

from __future__ import annotations

import json
from typing import Any

import pytest

from components import dra
from tests.support.kube_schemas import builtin_violations, is_builtin

VERSION = "v1.35.0"
DRIVER = "gpu.example.com"


def _template(request: dra.CardRequest) -> dict[str, Any]:
    return dra.claim_template("gpu-claim", "default", request, DRIVER, DRIVER)


def _exactly(template: dict[str, Any]) -> dict[str, Any]:
    (request,) = template["spec"]["spec"]["devices"]["requests"]
    assert request["name"] == dra.REQUEST_NAME
    exactly: dict[str, Any] = request["exactly"]
    return exactly


@pytest.mark.parametrize(
    "request_",
    [
        dra.CardRequest(cards=1, memory_mib=20000, compute=100),
        dra.CardRequest(cards=2, memory_mib=None, compute=100),
        dra.CardRequest(cards=1, memory_mib=20000, compute=30),
        dra.CardRequest(cards=3, memory_mib=1024, compute=1),
    ],
    ids=["whole", "two-whole", "fraction", "three-fractions"],
)
def test_claim_templates_validate_against_v1_35(request_: dra.CardRequest) -> None:
    assert builtin_violations(VERSION, _template(request_)) == []


def test_the_device_class_validates_against_v1_35() -> None:
    assert is_builtin(VERSION, dra.API_VERSION, "DeviceClass")
    assert builtin_violations(VERSION, dra.device_class(DRIVER, DRIVER)) == []


def test_v1_33_serves_no_resource_k8s_io_v1() -> None:
    assert not is_builtin("v1.33.0", dra.API_VERSION, "ResourceClaimTemplate")
    assert is_builtin("v1.34.0", dra.API_VERSION, "ResourceClaimTemplate")


def test_the_schema_check_can_fail() -> None:
    broken = _template(dra.CardRequest(cards=1, memory_mib=None, compute=30))
    _exactly(broken)["capacity"]["limits"] = {"memory": "1Gi"}
    assert builtin_violations(VERSION, broken)


def test_a_whole_card_asks_for_devices_and_selects_on_memory() -> None:
    exactly = _exactly(_template(dra.CardRequest(cards=2, memory_mib=20000, compute=100)))
    assert exactly["count"] == 2
    assert exactly["allocationMode"] == "ExactCount"
    assert "capacity" not in exactly
    (selector,) = exactly["selectors"]
    assert selector["cel"]["expression"] == (
        "device.capacity['gpu.example.com'].memory.compareTo(quantity('20000Mi')) >= 0"
    )


def test_a_fraction_asks_capacity_in_mib_and_hami_units() -> None:
    template = _template(dra.CardRequest(cards=1, memory_mib=20000, compute=30))
    exactly = _exactly(template)
    assert exactly["capacity"] == {"requests": {"compute": "30", "memory": "20000Mi"}}
    assert "constraints" not in template["spec"]["spec"]["devices"]


def test_fractions_on_several_cards_must_be_distinct_cards() -> None:
    devices = _template(dra.CardRequest(cards=2, memory_mib=4096, compute=10))["spec"]["spec"][
        "devices"
    ]
    assert devices["constraints"] == [
        {"requests": [dra.REQUEST_NAME], "distinctAttribute": "gpu.example.com/uuid"}
    ]


@pytest.mark.parametrize(
    ("cards", "memory", "compute"), [(0, None, 100), (1, 0, 100), (1, None, 0), (1, None, 101)]
)
def test_impossible_requests_are_refused(cards: int, memory: int | None, compute: int) -> None:
    with pytest.raises(ValueError, match="must be"):
        dra.CardRequest(cards=cards, memory_mib=memory, compute=compute)


def test_a_pod_references_the_template_from_its_container() -> None:
    claims, resources = dra.pod_claim_fields("gpu-claim")
    assert claims == [{"name": "gpu", "resourceClaimTemplateName": "gpu-claim"}]
    assert resources == {"claims": [{"name": "gpu"}]}
    pod = {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {"name": "p", "namespace": "default"},
        "spec": {
            "resourceClaims": claims,
            "containers": [{"name": "c", "image": "busybox:1.37.0", "resources": resources}],
        },
    }
    assert builtin_violations(VERSION, pod) == []


def test_a_dra_workload_is_a_template_and_a_deployment_that_uses_it() -> None:
    from components.config import Workload
    from components.tenant_specs import dra_workload

    workload = Workload.model_validate(
        {"name": "infer", "replicas": 2, "gpu": {"cards": 1, "memoryMiB": 20000, "cores": 100}}
    )
    template, deployment = dra_workload(workload, "tenant-a", DRIVER, DRIVER)
    assert template["metadata"]["name"] == "infer-gpu"
    assert template["metadata"]["labels"] == deployment["metadata"]["labels"]
    pod = deployment["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "infer-gpu"}]
    assert pod["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert "nvidia.com/gpu" not in json.dumps(deployment)
    for manifest in (template, {"apiVersion": "apps/v1", "kind": "Deployment", **deployment}):
        assert builtin_violations(VERSION, manifest) == []


def test_the_lab_drivers_objects_validate_against_v1_35() -> None:
    from components.lab import dra_driver

    objects = dra_driver.manifests(2, {"gpu-platform.io/tenant": "tenant-a"})
    assert set(objects) == {
        "serviceAccount",
        "clusterRole",
        "clusterRoleBinding",
        "daemonSet",
        "deviceClass",
    }
    for manifest in objects.values():
        assert builtin_violations(VERSION, manifest) == [], manifest["kind"]
    env = objects["daemonSet"]["spec"]["template"]["spec"]["containers"][0]["env"]
    assert {"name": "NUM_DEVICES", "value": "2"} in env
    with pytest.raises(ValueError, match="at least 1"):
        dra_driver.manifests(0, {})
