"""MetalLB pool carving from ``docker network inspect`` output and tenant address assignment.

Expected addresses are written out by hand from the subnet arithmetic (and, for tenants, from a
sha256 computed here), never computed by the code under test.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
import random

import pytest

from components.lab.network import (
    LabNetworkError,
    address_ranges,
    assign_tenant_addresses,
    carve_pool,
    check_pool_size,
    ipv4_subnet,
    metallb_pool,
    slot_collisions,
    tenant_slot,
)
from tests.support.fakes_management import fake_network_inspect


def _inspect(*configs: dict[str, str], name: str = "kind") -> str:
    return json.dumps([{"Name": name, "IPAM": {"Driver": "default", "Config": list(configs)}}])


IPV6 = {"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"}
IPV4 = {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}


def test_ipv6_listed_first_still_yields_the_ipv4_subnet() -> None:
    """The lab report's pitfall: the first IPAM entry is the IPv6 subnet."""
    subnet, gateway = ipv4_subnet(_inspect(IPV6, IPV4))
    assert subnet == ipaddress.IPv4Network("172.18.0.0/16")
    assert gateway == ipaddress.IPv4Address("172.18.0.1")


def test_the_fake_docker_output_lists_ipv6_first() -> None:
    """The program-level fake reproduces the pitfall, so the stack tests exercise it too."""
    configs = json.loads(fake_network_inspect())[0]["IPAM"]["Config"]
    assert ":" in configs[0]["Subnet"]
    assert metallb_pool(fake_network_inspect(), 2) == ["172.18.255.253", "172.18.255.254"]


def test_ipv4_only_network() -> None:
    pool = metallb_pool(_inspect({"Subnet": "172.19.0.0/16", "Gateway": "172.19.0.1"}), 4)
    assert pool == ["172.19.255.251", "172.19.255.252", "172.19.255.253", "172.19.255.254"]


def test_pool_has_the_configured_size_from_the_top_without_broadcast() -> None:
    pool = metallb_pool(_inspect(IPV6, IPV4), 16)
    assert len(pool) == 16
    assert pool[0] == "172.18.255.239"
    assert pool[-1] == "172.18.255.254"
    assert "172.18.255.255" not in pool  # broadcast
    assert pool == sorted(pool, key=ipaddress.IPv4Address)


def test_a_24_subnet() -> None:
    assert carve_pool(ipaddress.IPv4Network("192.168.50.0/24"), 3) == [
        "192.168.50.252",
        "192.168.50.253",
        "192.168.50.254",
    ]


def test_gateway_at_the_top_is_skipped() -> None:
    pool = carve_pool(ipaddress.IPv4Network("10.0.0.0/24"), 2, ipaddress.IPv4Address("10.0.0.254"))
    assert pool == ["10.0.0.252", "10.0.0.253"]


def test_too_small_subnet_is_a_clear_error() -> None:
    # A /28 has 16 addresses; its upper half .8-.15 minus broadcast .15 leaves 7.
    with pytest.raises(LabNetworkError) as error:
        metallb_pool(_inspect({"Subnet": "172.30.0.0/28", "Gateway": "172.30.0.1"}), 16)
    message = str(error.value)
    assert "172.30.0.0/28" in message
    assert "room for 7" in message
    assert "metallbPoolSize is 16" in message


def test_exactly_the_upper_half_fits() -> None:
    assert carve_pool(ipaddress.IPv4Network("172.30.0.0/28"), 7) == [
        f"172.30.0.{last}" for last in range(8, 15)
    ]


def test_a_gateway_in_the_upper_half_leaves_one_address_less() -> None:
    # .8-.14 are the 7 candidates of a /28; a gateway at .12 takes one of them.
    subnet = ipaddress.IPv4Network("172.30.0.0/28")
    gateway = ipaddress.IPv4Address("172.30.0.12")
    assert carve_pool(subnet, 6, gateway) == [f"172.30.0.{last}" for last in (8, 9, 10, 11, 13, 14)]
    with pytest.raises(LabNetworkError, match="room for 6"):
        carve_pool(subnet, 7, gateway)


def test_a_16_subnet_gives_the_top_addresses() -> None:
    pool = carve_pool(
        ipaddress.IPv4Network("172.18.0.0/16"), 3, ipaddress.IPv4Address("172.18.0.1")
    )
    assert pool == ["172.18.255.252", "172.18.255.253", "172.18.255.254"]


def test_tiny_subnets_have_no_room() -> None:
    with pytest.raises(LabNetworkError, match="room for 0"):
        carve_pool(ipaddress.IPv4Network("172.30.0.0/31"), 1)


def test_no_ipv4_subnet_is_a_clear_error() -> None:
    with pytest.raises(LabNetworkError, match="has no IPv4 subnet"):
        metallb_pool(_inspect(IPV6), 4)


def test_garbage_or_empty_output_is_a_clear_error() -> None:
    with pytest.raises(LabNetworkError, match="did not print JSON"):
        metallb_pool("Error: No such network: kind", 4)
    with pytest.raises(LabNetworkError, match="printed no network"):
        metallb_pool("[]", 4)


def test_a_single_object_is_accepted_too() -> None:
    document = {"Name": "kind", "IPAM": {"Config": [IPV6, IPV4]}}
    assert metallb_pool(json.dumps(document), 1) == ["172.18.255.254"]


def test_address_ranges_collapse_consecutive_addresses() -> None:
    assert address_ranges(["10.0.0.252", "10.0.0.253", "10.0.0.254"]) == ["10.0.0.252-10.0.0.254"]
    assert address_ranges(["10.0.0.250", "10.0.0.251", "10.0.0.253"]) == [
        "10.0.0.250-10.0.0.251",
        "10.0.0.253-10.0.0.253",
    ]
    with pytest.raises(LabNetworkError):
        address_ranges([])


POOL = ["172.18.255.252", "172.18.255.253", "172.18.255.254"]
# A 16-address pool, ascending, as carve_pool gives it for 172.18.0.0/16: .239 to .254.
POOL16 = [f"172.18.255.{last}" for last in range(239, 255)]


def by_hand(name: str, pool: list[str]) -> str:
    """The address a name gets, computed here: sha256's first 8 bytes, big-endian, modulo the
    pool size, counted down from the pool's highest address."""
    slot = int.from_bytes(hashlib.sha256(name.encode()).digest()[:8], "big") % len(pool)
    return sorted(pool, key=lambda a: int(ipaddress.IPv4Address(a)), reverse=True)[slot]


def names_without_clashes(count: int, pool: list[str]) -> list[str]:
    """``count`` tenant names whose hashed addresses differ (found by trying, here)."""
    names: list[str] = []
    taken: set[str] = set()
    for candidate in (f"team-{i}" for i in range(10_000)):
        if by_hand(candidate, pool) not in taken:
            names.append(candidate)
            taken.add(by_hand(candidate, pool))
        if len(names) == count:
            return names
    raise AssertionError("no names found")


def test_a_tenant_gets_the_address_its_name_hashes_to() -> None:
    for name in ("tenant-a", "tenant-b", "team-vision"):
        assert assign_tenant_addresses(POOL16, [(name, None)]) == {name: by_hand(name, POOL16)}
    # The shipped lab's two tenants, by hand: sha256("tenant-a") -> 1, ("tenant-b") -> 10.
    assert tenant_slot("tenant-a", 16) == 1
    assert tenant_slot("tenant-b", 16) == 10
    assert assign_tenant_addresses(POOL16, [("tenant-a", None), ("tenant-b", None)]) == {
        "tenant-a": "172.18.255.253",
        "tenant-b": "172.18.255.244",
    }


def test_reversing_the_tenant_list_moves_no_address() -> None:
    tenants = [(name, None) for name in names_without_clashes(6, POOL16)]
    assert assign_tenant_addresses(POOL16, tenants) == assign_tenant_addresses(
        POOL16, list(reversed(tenants))
    )
    shuffled = list(tenants)
    random.Random(7).shuffle(shuffled)
    assert assign_tenant_addresses(POOL16, shuffled) == assign_tenant_addresses(POOL16, tenants)


def test_inserting_or_removing_a_tenant_moves_no_other_address() -> None:
    names = names_without_clashes(6, POOL16)
    before = assign_tenant_addresses(POOL16, [(name, None) for name in names[:5]])
    inserted = [(name, None) for name in [names[5], *names[:5]]]
    after_insert = assign_tenant_addresses(POOL16, inserted)
    assert {k: after_insert[k] for k in before} == before
    removed = [(name, None) for name in names[1:5]]
    after_remove = assign_tenant_addresses(POOL16, removed)
    assert after_remove == {k: v for k, v in before.items() if k != names[0]}


def test_a_requested_address_is_honoured_wherever_the_tenant_is() -> None:
    name = "tenant-b"
    free = next(a for a in POOL16 if a not in {by_hand("tenant-a", POOL16), by_hand(name, POOL16)})
    for tenants in ([("tenant-a", None), (name, free)], [(name, free), ("tenant-a", None)]):
        assert assign_tenant_addresses(POOL16, tenants) == {
            "tenant-a": by_hand("tenant-a", POOL16),
            name: free,
        }


def test_requested_address_outside_the_pool_is_refused() -> None:
    with pytest.raises(LabNetworkError, match=r"tenants\[0\].controlPlane.address 10.9.9.9"):
        assign_tenant_addresses(POOL, [("tenant-a", "10.9.9.9")])


def test_two_tenants_never_share_an_address() -> None:
    with pytest.raises(LabNetworkError, match="both request"):
        assign_tenant_addresses(POOL, [("a", "172.18.255.253"), ("b", "172.18.255.253")])
    # tenant-b would get its hashed address, which tenant-a requests explicitly: refused, in
    # either order, naming both.
    taken = by_hand("tenant-b", POOL16)
    for tenants in (
        [("tenant-a", taken), ("tenant-b", None)],
        [("tenant-b", None), ("tenant-a", taken)],
    ):
        with pytest.raises(LabNetworkError) as error:
            assign_tenant_addresses(POOL16, tenants)
        assert "tenant-a" in str(error.value)
        assert "tenant-b" in str(error.value)
        assert "controlPlane.address" in str(error.value)


def test_names_that_hash_to_one_address_are_found_before_the_pool_exists() -> None:
    first = "team-0"
    clash = next(
        f"team-{i}"
        for i in range(1, 10_000)
        if by_hand(f"team-{i}", POOL16) == by_hand(first, POOL16)
    )
    problems = slot_collisions([(first, None), ("x", "172.18.255.250"), (clash, None)], 16)
    assert len(problems) == 1
    assert f"tenants[0] ({first}) and tenants[2] ({clash})" in problems[0]
    assert "set tenants[2].controlPlane.address" in problems[0]
    # A fixed address for one of them settles it.
    assert slot_collisions([(first, None), (clash, "172.18.255.250")], 16) == []


def test_pool_size_check_before_the_pool_exists() -> None:
    check_pool_size(2, 2)
    with pytest.raises(LabNetworkError, match="raise it to at least 3"):
        check_pool_size(2, 3)
