"""A bad stack file stops the program before any resource is registered, with the config error."""

from __future__ import annotations

import copy

import pytest

from tests.support.harness import Recording, evaluate, load_stack_config


@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
def test_bad_config_fails_before_any_registration(preview: bool) -> None:
    config = copy.deepcopy(load_stack_config("lab"))
    config["gpu-platform:platform"]["tenants"][1]["name"] = "tenant-a"
    recording = evaluate("lab", preview, config=config)
    assert recording.error is not None
    assert "ConfigError" in recording.error
    assert "tenants[].name: 'tenant-a' is declared twice" in recording.error
    assert recording.resources == []


@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
def test_a_secret_written_in_clear_into_the_stack_file_is_refused(preview: bool) -> None:
    """The management kubeconfig as a plain value (no ``secure:``) would be committed with the
    stack file: the program refuses it, naming the key and the command, before registering."""
    config = copy.deepcopy(load_stack_config("prod"))
    config["gpu-platform:managementKubeconfig"] = "apiVersion: v1\nkind: Config\n"
    recording = evaluate("prod", preview, config=config)
    assert recording.error is not None
    assert recording.run_error, recording.error
    assert "managementKubeconfig: remove it from the stack file" in recording.error
    assert "pulumi config set --secret managementKubeconfig" in recording.error
    assert recording.resources == []


def test_the_shipped_prod_stack_file_holds_its_secrets_as_secrets(prod: Recording) -> None:
    """The same check passes where the stack file names secrets it does not hold in clear."""
    recording = prod
    assert recording.error is None, recording.error
