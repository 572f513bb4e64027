"""MetalLB pool carving from ``docker network inspect`` output and the checks of pinned tenant
addresses (unpinned tenants get theirs from MetalLB, see tests/program/test_lab_addresses.py).

Expected addresses are written out by hand from the subnet arithmetic, never computed by the code
under test.
"""

from __future__ import annotations

import ipaddress
import json

import pytest

from components.lab.network import (
    LabNetworkError,
    address_ranges,
    carve_pool,
    check_pool_size,
    ipv4_subnet,
    metallb_pool,
    pinned_address,
    pinned_address_problems,
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


def test_a_pinned_address_in_the_pool_is_kept() -> None:
    assert pinned_address(POOL, 1, "tenant-b", "172.18.255.253") == "172.18.255.253"


def test_a_pinned_address_outside_the_pool_is_refused_in_one_line() -> None:
    with pytest.raises(LabNetworkError) as error:
        pinned_address(POOL, 0, "tenant-a", "10.9.9.9")
    message = str(error.value)
    assert "tenants[0].controlPlane.address 10.9.9.9 (tenant-a)" in message
    assert "172.18.255.252-172.18.255.254" in message
    assert "\n" not in message


def test_an_address_pinned_twice_is_found_before_the_pool_exists() -> None:
    problems = pinned_address_problems(
        [("a", "172.18.255.250"), ("b", None), ("c", "172.18.255.250"), ("d", "172.18.255.251")]
    )
    assert len(problems) == 1
    assert (
        "tenants[0] (a) and tenants[2] (c) both pin controlPlane.address 172.18.255.250"
        in (problems[0])
    )
    assert pinned_address_problems([("a", None), ("b", None), ("c", "172.18.255.250")]) == []


def test_pool_size_check_before_the_pool_exists() -> None:
    check_pool_size(2, 2)
    with pytest.raises(LabNetworkError, match="raise it to at least 3"):
        check_pool_size(2, 3)
