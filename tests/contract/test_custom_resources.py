"""Every custom resource the program declares validates against its pinned CRD."""

from __future__ import annotations

from pathlib import Path

import pytest

from tests.support.contracts import crd_violations, has_crd
from tests.support.harness import Recording

# API groups whose objects must be covered by a pinned CRD (not only validated when one exists).
GROUPS_WITH_PINNED_CRDS = (
    "kamaji.clastix.io",
    "metallb.io",
    "cluster.x-k8s.io",
    "controlplane.cluster.x-k8s.io",
    "bootstrap.cluster.x-k8s.io",
    "infrastructure.cluster.x-k8s.io",
    "operator.cluster.x-k8s.io",
)


def _custom_resources(recording: Recording):
    for reg in recording.resources:
        api_version = reg.inputs.get("apiVersion")
        if (
            not reg.read  # a read (the control planes' identity) declares no spec
            and reg.type.startswith("kubernetes:")
            and isinstance(api_version, str)
            and api_version.split("/")[0] in GROUPS_WITH_PINNED_CRDS
        ):
            yield reg


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_custom_resources_validate_against_pinned_crds(
    stack: str, recordings, upstream_dir: Path
) -> None:
    recording: Recording = recordings(stack, False)
    problems = []
    for reg in _custom_resources(recording):
        if reg.inputs.get("kind") == "DataStore" and not has_crd(
            upstream_dir, reg.inputs["apiVersion"], "DataStore"
        ):
            problems.append(f"{reg.name}: DataStore CRD missing")
        for violation in crd_violations(upstream_dir, reg.inputs):
            problems.append(f"{reg.name} ({reg.inputs.get('kind')}): {violation}")
    assert problems == []


def test_the_checker_flags_a_misspelt_field(upstream_dir: Path) -> None:
    """Unknown fields are errors here, although the API server would silently prune them."""
    tcp = {
        "apiVersion": "kamaji.clastix.io/v1alpha1",
        "kind": "TenantControlPlane",
        "metadata": {"name": "t"},
        "spec": {
            "controlPlane": {"service": {"serviceType": "LoadBalancer"}},
            "kubernetes": {"version": "v1.35.0", "kubelet": {}},
            "dataStoreSchem": "typo",
        },
    }
    violations = crd_violations(upstream_dir, tcp)
    assert any("dataStoreSchem" in v for v in violations), violations
    del tcp["spec"]["dataStoreSchem"]
    assert crd_violations(upstream_dir, tcp) == []
