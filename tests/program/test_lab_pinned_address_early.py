"""A lab control-plane pin outside the MetalLB pool fails before any registration, in preview and
``up`` alike, whenever the kind network exists (issue 26: it failed only inside ``up``, after 34
registrations, with the message under a dump of inputs)."""

from __future__ import annotations

import copy
import ipaddress
from pathlib import Path
from typing import Any

import pytest

from components.lab import network as lab_network
from components.lab.pinned_addresses import INSPECT_ENV, check_pinned_addresses
from components.stack import parse_platform
from tests.support.fakes_management import fake_network_inspect
from tests.support.harness import evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"


def _pinned(address: str) -> dict[str, Any]:
    config = copy.deepcopy(load_stack_config("lab"))
    config[PLATFORM]["tenants"][1]["controlPlane"] = {"address": address}
    return config


def _pool() -> list[str]:
    size = load_stack_config("lab")[PLATFORM]["management"]["kind"]["metallbPoolSize"]
    return lab_network.metallb_pool(fake_network_inspect(), size)


def _outside_pool() -> str:
    """An address of the kind subnet's lower half: docker's, never the pool's."""
    subnet, _ = lab_network.ipv4_subnet(fake_network_inspect())
    return str(subnet.network_address + 10)


@pytest.fixture
def inspect_file(tmp_path: Path) -> dict[str, str]:
    path = tmp_path / "inspect.json"
    path.write_text(fake_network_inspect())
    return {INSPECT_ENV: str(path)}


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "update"])
def test_a_pin_outside_the_pool_registers_nothing(
    preview: bool, inspect_file: dict[str, str]
) -> None:
    address = _outside_pool()
    assert address not in _pool()
    recording = evaluate("lab", preview, config=_pinned(address), environment=inspect_file)
    assert recording.resources == []
    assert recording.run_error, recording.error
    assert (
        f"tenants[1].controlPlane.address {address} (tenant-b) is not in the lab's MetalLB pool"
        in (recording.error or "")
    )
    assert "drop the key" in (recording.error or "")


def test_a_pin_inside_the_pool_is_deployed(inspect_file: dict[str, str]) -> None:
    address = _pool()[-1]
    recording = evaluate("lab", False, config=_pinned(address), environment=inspect_file)
    assert recording.error is None, recording.error
    assert recording.resources


def test_without_the_network_the_pin_waits_for_the_pool() -> None:
    """No kind network yet (the first ``up`` creates it): nothing to check against, said once."""
    platform = parse_platform(_pinned(_outside_pool())[PLATFORM])
    said: list[str] = []
    check_pinned_addresses(platform, read=lambda _: None, log=said.append)
    assert len(said) == 1
    assert "does not exist" in said[0]


def test_every_pin_outside_the_pool_is_listed() -> None:
    raw = _pinned(_outside_pool())[PLATFORM]
    other = str(ipaddress.IPv4Address(_outside_pool()) + 1)
    raw["tenants"][0]["controlPlane"] = {"address": other}
    platform = parse_platform(raw)
    with pytest.raises(lab_network.LabNetworkError) as caught:
        check_pinned_addresses(platform, read=lambda _: fake_network_inspect())
    assert "tenants[0].controlPlane.address" in str(caught.value)
    assert "tenants[1].controlPlane.address" in str(caught.value)
