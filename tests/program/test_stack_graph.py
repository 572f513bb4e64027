"""Both stack files, evaluated under mocks in update and preview mode: the graph's invariants.

These hold for every resource any component registers, so they keep holding as components grow.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.support.harness import UNKNOWN, Recording

PROJECT_TYPES = {
    "gpu-platform:index:ManagementCluster",
    "gpu-platform:index:GpuTenant",
    "gpu-platform:index:GpuWorkerPool",
}
CASES = [(stack, preview) for stack in ("lab", "prod") for preview in (False, True)]
IDS = [f"{stack}-{'preview' if preview else 'update'}" for stack, preview in CASES]


@pytest.fixture(params=CASES, ids=IDS)
def recording(request: pytest.FixtureRequest, recordings: Callable[..., Recording]) -> Recording:
    stack, preview = request.param
    return recordings(stack, preview)


def test_stack_evaluates_without_error(recording: Recording) -> None:
    assert recording.error is None, recording.error
    assert recording.resources, "the program registered nothing"


def test_no_two_resources_share_a_urn(recording: Recording) -> None:
    assert recording.duplicate_urns == []


def test_only_the_three_components_sit_at_the_top(recording: Recording) -> None:
    top = {r.type for r in recording.resources if r.parent.endswith(f"-{recording.stack}")}
    assert top <= PROJECT_TYPES, f"resources outside a component: {top - PROJECT_TYPES}"
    assert "gpu-platform:index:ManagementCluster" in top
    assert "gpu-platform:index:GpuTenant" in top


def test_every_kubernetes_resource_has_an_explicit_provider(recording: Recording) -> None:
    offenders = []
    for reg in recording.resources:
        if not reg.type.startswith("kubernetes:"):
            continue
        provider = recording.provider_of(reg)
        if provider is None or provider.type != "pulumi:providers:kubernetes":
            offenders.append(f"{reg.type} {reg.name}: provider {reg.provider or 'default'}")
    assert offenders == []


def test_every_tenant_in_config_has_a_component(recording: Recording) -> None:
    from tests.support.harness import load_stack_config

    platform = load_stack_config(recording.stack)["gpu-platform:platform"]
    expected = {t["name"] for t in platform["tenants"]}
    found = {r.name for r in recording.of_type("gpu-platform:index:GpuTenant")}
    assert found == expected
    pools = {r.name for r in recording.of_type("gpu-platform:index:GpuWorkerPool")}
    assert pools == {
        f"{t['name']}-{p['name']}" for t in platform["tenants"] for p in t.get("workerPools", [])
    }


def test_every_command_that_creates_also_deletes(recording: Recording) -> None:
    commands = recording.of_type("command:local:Command") + recording.of_type(
        "command:remote:Command"
    )
    offenders = [c.name for c in commands if c.inputs.get("create") and not c.inputs.get("delete")]
    assert offenders == []


def test_kubeconfigs_are_secret_outputs(recording: Recording) -> None:
    for key in ("managementKubeconfig", "tenantKubeconfigs"):
        if recording.preview and recording.outputs.get(key) == UNKNOWN:
            continue  # read from a cluster that a preview has not created: unknown, not leaked
        assert key in recording.secret_outputs, f"{key} is exported in clear text"
    if recording.outputs.get("tenantKubeconfigs") != UNKNOWN:
        assert set(recording.outputs["tenantKubeconfigs"]) == {
            r.name for r in recording.of_type("gpu-platform:index:GpuTenant")
        }


def test_kubernetes_providers_take_kubeconfig_as_secret(recording: Recording) -> None:
    providers = recording.of_type("pulumi:providers:kubernetes")
    assert providers
    offenders = [p.name for p in providers if not p.input_is_secret("kubeconfig")]
    assert offenders == []


def test_nothing_secret_reaches_the_log(recording: Recording) -> None:
    leaked = [
        line for line in recording.logs if "mock-secret-value" in line or "kubeadm join" in line
    ]
    assert leaked == []
