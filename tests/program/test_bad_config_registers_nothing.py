"""A bad stack file stops the program before any resource is registered, with the config error."""

from __future__ import annotations

import copy

import pytest

from tests.support.harness import evaluate, load_stack_config


@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
def test_bad_config_fails_before_any_registration(preview: bool) -> None:
    config = copy.deepcopy(load_stack_config("lab"))
    config["gpu-platform:platform"]["tenants"][1]["name"] = "tenant-a"
    recording = evaluate("lab", preview, config=config)
    assert recording.error is not None
    assert "ConfigError" in recording.error
    assert "tenants[].name: 'tenant-a' is declared twice" in recording.error
    assert recording.resources == []
