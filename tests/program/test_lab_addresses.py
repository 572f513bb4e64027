"""The lab's tenant control-plane addresses depend on tenant names, not list positions: the whole
program, evaluated as ``pulumi up`` does, gives every tenant the same address however the tenant
list is ordered or grown. Kubelets, Konnectivity agents and the tenant provider keep the address a
control plane was created with, so a moved address would strand them."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.harness import Recording, evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"


def addresses(recording: Recording) -> dict[str, Any]:
    """tenant -> its TenantControlPlane's networkProfile.address and MetalLB annotation."""
    assert recording.error is None, recording.error
    found = {}
    for reg in (r for r in recording.of_type(TCP) if not r.read):
        spec = reg.inputs["spec"]
        annotations = spec["controlPlane"]["service"]["additionalMetadata"]["annotations"]
        found[reg.inputs["metadata"]["name"]] = (
            spec["networkProfile"]["address"],
            annotations["metallb.io/loadBalancerIPs"],
        )
    return found


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab"))


def test_reversing_the_lab_tenant_list_moves_no_address() -> None:
    shipped = addresses(evaluate("lab", False))
    assert len(shipped) == 2
    assert all(address == annotation for address, annotation in shipped.values())
    config = _lab()
    config[PLATFORM]["tenants"].reverse()
    assert addresses(evaluate("lab", False, config=config)) == shipped


def test_adding_a_tenant_first_moves_no_other_address() -> None:
    shipped = addresses(evaluate("lab", False))
    config = _lab()
    tenants = config[PLATFORM]["tenants"]
    extra = copy.deepcopy(tenants[0])
    extra["name"] = "tenant-c"
    extra["dataStore"].update(schema="tenant_c", username="tenant_c")
    extra["network"] = {"podCidr": "10.30.0.0/16", "serviceCidr": "10.31.0.0/16"}
    tenants.insert(0, extra)
    grown = addresses(evaluate("lab", False, config=config))
    assert {name: grown[name] for name in shipped} == shipped
    assert grown["tenant-c"] not in shipped.values()
