"""The lab's tenant control-plane addresses: no hand assignment, no refusal of a set of tenants that
fits the MetalLB pool, and nothing the program sets on one tenant's control plane depends on the
other tenants.

MetalLB assigns each unpinned tenant's address and keeps it for the Service's life (the upstream
trace is in ``components/lab/network.py``). What the program controls, and these tests check, is:

* every set of tenants up to the pool's size validates (feaf4bd hashed names into the pool and
  refused two names on one slot: 5 random tenants half the time, 16 always);
* every unpinned tenant's Service names the pool the program registered, with no address pinned
  by the program; a ``controlPlane.address`` pin is kept as it is;
* the control-plane inputs of a tenant are the same whatever the other tenants are: reordering,
  adding or removing tenants changes nothing MetalLB or Kamaji is told about an existing one;
* everything that needs the address (Calico's ``kubernetesServiceEndpoint``, the lab kube-proxy's
  kubeconfig, the ``endpoint`` output) takes the one Kamaji wrote into the kubeconfig. Under the
  mocks those are the fake MetalLB's (``tests/support/fakes_tenant.py``), so distinct addresses
  there show the read-back reaches each tenant's consumers, not MetalLB's own stickiness.
"""

from __future__ import annotations

import copy
import random
import string
from typing import Any

import pytest

from components.config import CONFIG_KEY
from components.lab.management_values import METALLB_POOL_NAME
from components.stack import parse_platform
from tests.support.harness import Recording, evaluate, load_stack_config

PLATFORM = f"gpu-platform:{CONFIG_KEY}"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
POOL = "kubernetes:metallb.io/v1beta1:IPAddressPool"
POOL_ANNOTATION = "metallb.io/address-pool"
IPS_ANNOTATION = "metallb.io/loadBalancerIPs"
POOL_SIZE = 16
SEED = 24014


def _lab() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab"))


def random_names(rng: random.Random, count: int) -> list[str]:
    """``count`` distinct DNS-1123 tenant names."""
    names: set[str] = set()
    while len(names) < count:
        length = rng.randint(3, 12)
        tail = "".join(rng.choice(string.ascii_lowercase + string.digits) for _ in range(length))
        names.add(rng.choice(string.ascii_lowercase) + tail)
    return sorted(names, key=lambda _: rng.random())


def with_tenants(
    names: list[str], pins: dict[str, str] | None = None, universe: list[str] | None = None
) -> dict[str, Any]:
    """The shipped lab with one copy of its first tenant per name (own CIDRs and etcd identity,
    numbered by the name's place in ``universe``, so that a tenant's config does not depend on
    which other tenants the stack has or in which order)."""
    config = _lab()
    platform = config[PLATFORM]
    template = platform["tenants"][0]
    order = sorted(universe or names)
    tenants = []
    for name in names:
        number = order.index(name)
        tenant = copy.deepcopy(template)
        tenant["name"] = name
        identity = name.replace("-", "_")
        tenant["dataStore"] = {**tenant["dataStore"], "schema": identity, "username": identity}
        # 10.1-10.32: clear of kind's 10.96.0.0/12 and 10.244.0.0/16.
        tenant["network"] = {
            "podCidr": f"10.{2 * number + 1}.0.0/16",
            "serviceCidr": f"10.{2 * number + 2}.0.0/16",
        }
        if pins and name in pins:
            tenant["controlPlane"] = {**tenant.get("controlPlane", {}), "address": pins[name]}
        tenants.append(tenant)
    platform["tenants"] = tenants
    platform["management"]["kind"]["metallbPoolSize"] = POOL_SIZE
    return config


def control_planes(recording: Recording) -> dict[str, dict[str, Any]]:
    """tenant -> what its TenantControlPlane tells Kamaji and MetalLB about its address."""
    assert recording.error is None, recording.error
    found = {}
    for reg in (r for r in recording.of_type(TCP) if not r.read):
        spec = reg.inputs["spec"]
        found[reg.inputs["metadata"]["name"]] = {
            "service": spec["controlPlane"]["service"],
            "networkProfile": spec["networkProfile"],
        }
    return found


def read_back(recording: Recording) -> dict[str, dict[str, str]]:
    """tenant -> the address each consumer of it was given."""
    tenants = recording.outputs["tenants"]
    found: dict[str, dict[str, str]] = {}
    for name, summary in tenants.items():
        found[name] = {"endpoint": summary["endpoint"]}
    for reg in recording.resources:
        for name in found:
            if reg.name == f"{name}-calico":
                endpoint = reg.inputs["values"]["kubernetesServiceEndpoint"]
                found[name]["calico"] = f"https://{endpoint['host']}:{endpoint['port']}"
            if reg.name == f"{name}-kube-proxy-config":
                text = reg.inputs["data"]["kubeconfig.conf"]
                found[name]["kube-proxy"] = next(
                    line.split("server:", 1)[1].strip()
                    for line in text.splitlines()
                    if "server:" in line
                )
    return found


def test_every_set_of_tenants_that_fits_the_pool_is_accepted() -> None:
    rng = random.Random(SEED)
    for size in range(1, POOL_SIZE + 1):
        for _ in range(3):
            config = with_tenants(random_names(rng, size))
            parsed = parse_platform(config[PLATFORM])  # raises ConfigError on a refusal
            assert len(parsed.tenants) == size


def test_one_tenant_more_than_the_pool_is_refused_naming_the_key() -> None:
    config = with_tenants(random_names(random.Random(SEED), POOL_SIZE + 1))
    recording = evaluate("lab", False, config=config)
    assert recording.run_error, recording.error
    assert "metallbPoolSize is 16: raise it to at least 17" in (recording.error or "")
    assert not [r for r in recording.of_type(TCP) if not r.read]


@pytest.mark.parametrize("size", [1, 5, POOL_SIZE])
def test_every_tenant_is_bound_to_the_pool_and_reads_its_own_address_back(size: int) -> None:
    names = random_names(random.Random(SEED + size), size)
    recording = evaluate("lab", False, config=with_tenants(names))
    planes = control_planes(recording)
    assert sorted(planes) == sorted(names)
    (pool,) = recording.of_type(POOL)
    assert pool.inputs["metadata"]["name"] == METALLB_POOL_NAME
    assert pool.inputs["spec"]["autoAssign"] is False
    for plane in planes.values():
        assert "address" not in plane["networkProfile"]
        annotations = plane["service"]["additionalMetadata"]["annotations"]
        assert annotations == {POOL_ANNOTATION: METALLB_POOL_NAME}
    addresses = read_back(recording)
    for name, seen in addresses.items():
        tcp = next(
            r for r in recording.of_type(TCP) if not r.read and r.inputs["metadata"]["name"] == name
        )
        assigned = f"https://{tcp.outputs['status']['controlPlaneEndpoint']}"
        assert seen == {"endpoint": assigned, "calico": assigned, "kube-proxy": assigned}, name
    endpoints = [seen["endpoint"] for seen in addresses.values()]
    assert len(set(endpoints)) == size


def test_reordering_adding_or_removing_tenants_changes_no_other_control_plane() -> None:
    everyone = random_names(random.Random(SEED), 7)
    extra, names = everyone[0], everyone[1:]

    def planes(tenants: list[str]) -> dict[str, dict[str, Any]]:
        return control_planes(evaluate("lab", False, config=with_tenants(tenants, None, everyone)))

    shipped = planes(names)
    assert planes(names[::-1]) == shipped
    grown = planes([extra, *names])
    assert {name: grown[name] for name in names} == shipped
    assert planes(names[2:]) == {name: shipped[name] for name in names[2:]}


def test_a_pinned_address_is_kept_wherever_the_tenant_is() -> None:
    pin = "172.18.255.254"  # the top of the fake network's pool
    names = ["tenant-a", "tenant-b", "tenant-c"]
    for order in (names, names[::-1]):
        recording = evaluate("lab", False, config=with_tenants(order, {"tenant-b": pin}))
        planes = control_planes(recording)
        pinned = planes["tenant-b"]
        assert pinned["networkProfile"]["address"] == pin
        assert pinned["service"]["additionalMetadata"]["annotations"] == {IPS_ANNOTATION: pin}
        for other in ("tenant-a", "tenant-c"):
            assert planes[other]["service"]["additionalMetadata"]["annotations"] == {
                POOL_ANNOTATION: METALLB_POOL_NAME
            }
        assert read_back(recording)["tenant-b"]["endpoint"] == f"https://{pin}:6443"


def test_an_address_pinned_twice_is_refused_before_anything_is_registered() -> None:
    pin = "172.18.255.254"
    config = with_tenants(["tenant-a", "tenant-b"], {"tenant-a": pin, "tenant-b": pin})
    recording = evaluate("lab", False, config=config)
    assert recording.run_error, recording.error
    message = recording.error or ""
    assert "both pin controlPlane.address 172.18.255.254" in message
    assert "\n" not in message.strip()
    assert not recording.resources or all(
        r.type == "pulumi:pulumi:Stack" for r in recording.resources
    )


def test_a_pin_outside_the_pool_stops_before_its_control_plane() -> None:
    config = with_tenants(["tenant-a", "tenant-b"], {"tenant-b": "172.18.0.50"})
    recording = evaluate("lab", False, config=config)
    assert recording.error is not None
    assert "tenants[1].controlPlane.address 172.18.0.50 (tenant-b) is not in the lab's" in (
        recording.error
    )
    assert "tenant-b" not in {
        r.inputs["metadata"]["name"] for r in recording.of_type(TCP) if not r.read
    }
