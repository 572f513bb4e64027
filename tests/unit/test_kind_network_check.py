"""The kind docker network against the configured ranges: a tenant's or the management cluster's
pod or service range inside the network (where the kind node, the workers and the MetalLB pool
live), or a pinned control-plane address outside the pool carved from it, is refused before
anything is registered, in preview too; a network kind has not created yet is described, not
checked. Expected subnets are written by hand."""

from __future__ import annotations

import copy
import ipaddress
import json
from typing import Any

import pytest

from components.lab import network as lab_network
from components.lab import preflight
from components.lab.substrate import LabSubstrate
from components.stack import parse_platform
from tests.support.harness import load_stack_config

V4 = {"Subnet": "172.18.0.0/16", "Gateway": "172.18.0.1"}
V6 = {"Subnet": "fc00:f853:ccd:e793::/64", "Gateway": "fc00:f853:ccd:e793::1"}


def _inspect(*configs: dict[str, str]) -> str:
    return json.dumps([{"Name": "kind", "IPAM": {"Driver": "default", "Config": list(configs)}}])


def _raw() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab")["gpu-platform:platform"])


def _platform(raw: dict[str, Any] | None = None) -> Any:
    return parse_platform(raw if raw is not None else _raw())


def _served(state: str, text: str = "") -> Any:
    asked: list[str] = []

    def inspect(name: str) -> tuple[str, str]:
        asked.append(name)
        return state, text

    inspect.asked = asked  # type: ignore[attr-defined]
    return inspect


# ----------------------------------------------------------------------------- pure functions


def test_every_subnet_of_the_network_ipv6_first_or_not() -> None:
    assert lab_network.network_subnets(_inspect(V6, V4)) == [
        ipaddress.ip_network("fc00:f853:ccd:e793::/64"),
        ipaddress.ip_network("172.18.0.0/16"),
    ]


@pytest.mark.parametrize(
    ("cidr", "overlaps"),
    [
        ("172.18.0.0/16", True),  # the network itself
        ("172.18.5.0/24", True),  # inside it
        ("172.16.0.0/12", True),  # around it
        ("172.19.0.0/16", False),  # the next /16
        ("10.10.0.0/16", False),
    ],
)
def test_an_ipv4_range_is_refused_exactly_when_it_overlaps_the_ipv4_subnet(
    cidr: str, overlaps: bool
) -> None:
    subnets = lab_network.network_subnets(_inspect(V6, V4))
    problems = lab_network.kind_network_problems(
        "kind", subnets, [("tenants[1].network.podCidr", cidr)]
    )
    assert bool(problems) is overlaps
    if overlaps:
        (line,) = problems
        assert line.startswith(f"tenants[1].network.podCidr {cidr} overlaps the kind docker")
        assert "(172.18.0.0/16)" in line
        assert "set tenants[1].network.podCidr to a range outside 172.18.0.0/16" in line


def test_an_ipv6_range_is_compared_with_the_ipv6_subnet_only() -> None:
    subnets = lab_network.network_subnets(_inspect(V4, V6))
    inside = [("tenants[0].network.serviceCidr", "fc00:f853:ccd:e793::/108")]
    (line,) = lab_network.kind_network_problems("kind", subnets, inside)
    assert "(fc00:f853:ccd:e793::/64)" in line
    outside = [("tenants[0].network.serviceCidr", "fd00:10:96::/108")]
    assert lab_network.kind_network_problems("kind", subnets, outside) == []


def test_the_suggested_range_overlaps_neither_the_network_nor_another_configured_range() -> None:
    subnets = [ipaddress.ip_network("172.18.0.0/16")]
    ranges = [
        ("tenants[0].network.podCidr", "10.0.0.0/16"),
        ("tenants[0].network.serviceCidr", "10.1.0.0/16"),
        ("tenants[1].network.podCidr", "172.18.0.0/16"),
    ]
    (line,) = lab_network.kind_network_problems("kind", subnets, ranges)
    assert "(e.g. 10.2.0.0/16," in line


def test_an_absent_network_is_described_with_what_kind_and_docker_will_pick() -> None:
    notes = lab_network.absent_network_notes(
        "kind",
        [
            ("tenants[0].network.podCidr", "10.10.0.0/16"),
            ("tenants[1].network.podCidr", "172.20.0.0/16"),
        ],
    )
    assert "does not exist yet" in notes[0]
    assert "172.18.0.0/16" in notes[0]
    assert "IPv6 ULA /64" in notes[0]
    assert len(notes) == 2
    assert notes[1].startswith("tenants[1].network.podCidr 172.20.0.0/16 overlaps Docker's default")


def test_docker_default_pools_are_moby_s() -> None:
    """moby v28.5.2 libnetwork/ipamutils/utils.go:13-21, written out by hand."""
    covered = {str(net) for net in lab_network.DOCKER_DEFAULT_POOLS}
    assert covered == {
        "172.17.0.0/16",
        "172.18.0.0/16",
        "172.19.0.0/16",
        "172.20.0.0/14",
        "172.24.0.0/14",
        "172.28.0.0/14",
        "192.168.0.0/16",
    }


def test_a_pinned_address_outside_the_carved_pool_is_a_problem_before_registration() -> None:
    # A /16 and 16 addresses: 172.18.255.239 - 172.18.255.254.
    problems = lab_network.pinned_pool_problems(
        _inspect(V4), 16, [(0, "tenant-a", "172.18.255.250"), (1, "tenant-b", "172.18.0.9")]
    )
    (line,) = problems
    assert line.startswith("tenants[1].controlPlane.address 172.18.0.9 (tenant-b) is not in")
    assert "172.18.255.239-172.18.255.254" in line


# ------------------------------------------------------------------- the check on the host


def test_the_shipped_lab_passes_against_kinds_usual_network() -> None:
    info, warnings = preflight.check_kind_network(
        _platform(), environ={}, inspect=_served("present", _inspect(V6, V4))
    )
    assert warnings == []
    (line,) = info
    assert line.startswith("kind network check passed: ")


def test_a_tenant_pod_cidr_equal_to_the_kind_network_is_refused_naming_the_key() -> None:
    raw = _raw()
    raw["tenants"][0]["network"]["podCidr"] = "172.18.0.0/16"
    inspect = _served("present", _inspect(V6, V4))
    with pytest.raises(lab_network.LabNetworkError) as raised:
        preflight.check_kind_network(_platform(raw), environ={}, inspect=inspect)
    message = str(raised.value)
    assert "\n" not in message
    assert message.startswith("kind network check failed: tenants[0].network.podCidr 172.18.0.0/16")
    assert inspect.asked == ["kind"]


def test_every_range_and_pin_is_reported_at_once() -> None:
    raw = _raw()
    raw["tenants"][0]["network"]["serviceCidr"] = "172.18.128.0/20"
    raw["management"]["kind"]["podSubnet"] = "172.18.0.0/17"
    raw["tenants"][1].setdefault("controlPlane", {})["address"] = "172.18.0.20"
    with pytest.raises(lab_network.LabNetworkError) as raised:
        preflight.check_kind_network(
            _platform(raw), environ={}, inspect=_served("present", _inspect(V4))
        )
    message = str(raised.value)
    assert "(3 problems)" in message
    for key in (
        "management.kind.podSubnet",
        "tenants[0].network.serviceCidr",
        "tenants[1].controlPlane.address",
    ):
        assert key in message


def test_no_network_yet_or_no_docker_checks_nothing_and_says_why() -> None:
    info, warnings = preflight.check_kind_network(
        _platform(), environ={}, inspect=_served("absent")
    )
    assert len(info) == 1
    assert "does not exist yet" in info[0]
    info, warnings = preflight.check_kind_network(
        _platform(), environ={}, inspect=_served("unknown", "docker is not on PATH")
    )
    assert info == []
    assert warnings == [
        "kind network check: the range of docker network 'kind' is unknown (docker is not on PATH)"
    ]


def test_the_check_is_skipped_with_the_preflight_skip_variable() -> None:
    inspect = _served("present", _inspect(V4))
    skipped = preflight.check_kind_network(
        _platform(), environ={preflight.SKIP_ENV: "1"}, inspect=inspect
    )
    assert skipped == ([], [])
    assert inspect.asked == []


def test_the_lab_substrate_runs_it_before_registration_in_preview(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    raw = _raw()
    raw["tenants"][1]["network"]["podCidr"] = "172.18.0.0/16"
    platform = _platform(raw)
    monkeypatch.delenv(preflight.SKIP_ENV, raising=False)
    monkeypatch.setattr(preflight, "inspect_docker_network", _served("present", _inspect(V4)))
    monkeypatch.setattr("pulumi.runtime.is_dry_run", lambda: True)
    with pytest.raises(lab_network.LabNetworkError, match=r"tenants\[1\]\.network\.podCidr"):
        LabSubstrate().check_before_registration(platform)


@pytest.mark.parametrize(
    ("returncode", "stderr", "state"),
    [
        (1, "Error response from daemon: network kind not found\n", "absent"),
        (1, "Error: No such network: kind\n", "absent"),
        (1, "Cannot connect to the Docker daemon at unix:///var/run/docker.sock.\n", "unknown"),
        (0, "", "present"),
    ],
)
def test_docker_network_inspect_answers_are_read(
    monkeypatch: pytest.MonkeyPatch, returncode: int, stderr: str, state: str
) -> None:
    import subprocess

    def run(command: list[str], **kwargs: object) -> subprocess.CompletedProcess[str]:
        assert command == ["docker", "network", "inspect", "kind"]
        return subprocess.CompletedProcess(
            command, returncode, _inspect(V4) if not returncode else "", stderr
        )

    monkeypatch.setattr(preflight.subprocess, "run", run)
    assert preflight.inspect_docker_network("kind")[0] == state
