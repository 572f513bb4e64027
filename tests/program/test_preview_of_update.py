"""A preview of an update of a deployed stack: what the engine would plan.

``evaluate(stack, True, prior=<update-mode recording>)`` plans every registration against that
recording the way the engine does in ``pulumi preview`` of an existing stack (same, update,
replace, create; reads run when their ID is known), see tests/support/harness_runner.PriorState.

The tenant provider's ``cluster_identifier`` carries the control plane's uid. pulumi-kubernetes
replaces the provider, and so every object inside the tenant (pulumi/pulumi v3.259.0
pkg/resource/deploy/step_generator.go:2798-2850), when the identifier changes or is computed
(provider/pkg/provider/provider.go:486-515 at v4.32.0); in a preview its Update returns the inputs
as-is when they hold unknowns (provider.go:2367-2371), so an updated control plane's outputs carry
no uid there.
"""

from __future__ import annotations

import copy
from collections import Counter
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.harness import UNKNOWN, Recording, evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"
PROVIDER = "pulumi:providers:kubernetes"
CONTROL_PLANE_TYPES = {
    "lab": "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane",
    "prod": "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane",
}


def _identifiers(recording: Recording) -> dict[str, Any]:
    return {r.name: r.inputs.get("clusterIdentifier") for r in recording.of_type(PROVIDER)}


def _not_unchanged(recording: Recording) -> list[str]:
    return [f"{r.step} {r.name}" for r in recording.resources if r.step not in ("same", "read")]


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_a_preview_of_the_unchanged_stack_plans_no_change(
    stack: str, recordings: Callable[[str, bool], Recording]
) -> None:
    """What ``pulumi preview --expect-no-changes`` asks of a deployed stack: every registration
    the same, every read run (its ID known), every provider's identifier the deployed one."""
    deployed = recordings(stack, False)
    preview = evaluate(stack, True, prior=deployed)
    assert preview.error is None, preview.error
    assert _not_unchanged(preview) == []
    assert {r.step for r in preview.resources} <= {"same", "read"}
    assert _identifiers(preview) == _identifiers(deployed)
    assert UNKNOWN not in _identifiers(preview).values()


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_an_in_place_control_plane_update_replaces_no_tenant_provider(
    stack: str, recordings: Callable[[str, bool], Recording]
) -> None:
    """A control-plane change the API server applies in place (the API server's requests) is an
    update whose preview outputs carry no uid: the identifier must still be the deployed one, so
    nothing inside the tenant is planned for replacement."""
    deployed = recordings(stack, False)
    config = copy.deepcopy(load_stack_config(stack))
    tenant = config[PLATFORM]["tenants"][0]
    tenant.setdefault("controlPlane", {})["resources"] = {
        "apiServer": {"requests": {"cpu": "500m", "memory": "1Gi"}}
    }
    preview = evaluate(stack, True, config=config, prior=deployed)
    assert preview.error is None, preview.error
    control_plane = preview.named(f"{tenant['name']}-control-plane")
    assert control_plane.type == CONTROL_PLANE_TYPES[stack]
    assert control_plane.step == "update"
    assert [r.name for r in preview.resources if r.step == "replace"] == []
    assert _identifiers(preview) == _identifiers(deployed)


def test_the_harness_plans_a_new_management_cluster_as_a_replacement_of_everything_in_it(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """The mode can fail: a new docker network replaces the kind cluster (replace_on_changes),
    whose new identifier replaces the management provider and everything on it; the tenants'
    kubeconfig reads then wait for control planes with unknown IDs and are skipped."""
    deployed = recordings("lab", False)
    config = copy.deepcopy(load_stack_config("lab"))
    config[PLATFORM]["management"]["kind"]["dockerNetwork"] = "lab-net"
    preview = evaluate("lab", True, config=config, prior=deployed)
    assert preview.error is None, preview.error
    steps = {r.name: r.step for r in preview.resources}
    assert steps["management-kind-cluster"] == "replace"
    assert steps["management-provider"] == "replace"
    assert steps["tenant-a-control-plane"] == "replace"
    assert steps["tenant-a-admin-kubeconfig"] == "read-skipped"
    assert steps["tenant-a-provider"] == "replace"
    assert preview.named("tenant-a-provider").inputs["clusterIdentifier"] == UNKNOWN
    assert Counter(steps.values())["same"] < len(steps) // 4


def test_a_preview_on_another_machine_plans_no_change(tmp_path: Path) -> None:
    """Deployed from one home directory, previewed from another (another operator, the CI
    runner): the Kamaji Release's chart input must not differ (helm_release.go:795-895)."""

    def home(user: str) -> dict[str, str]:
        return {"HOME": str(tmp_path / user), "XDG_CACHE_HOME": str(tmp_path / user / "cache")}

    deployed = evaluate("lab", False, environment=home("alice"))
    preview = evaluate("lab", True, environment=home("runner"), prior=deployed)
    assert preview.error is None, preview.error
    assert _not_unchanged(preview) == []
