"""Both stacks, rendered chart by chart, as Helm and the API server would see them.

For each stack in update mode: every ``helm.v3.Release`` the program registers renders with its
pinned chart, registered values, release name and namespace, in install mode, for its cluster's
Kubernetes version; every custom resource (rendered or created by the program) has its CRD on
its own cluster, installed before it; every object validates against the schema of its cluster
(the Kubernetes OpenAPI schema of that version, or its CRD's schema and CEL rules).
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from tests.render.conftest import platform_block
from tests.support.crd_schemas import CelTally
from tests.support.render_checks import missing_crds, missing_namespaces, schema_violations
from tests.support.rendered_stack import CHART_V4, RELEASE, RenderedStack

STACKS = ("lab", "prod")


@pytest.mark.parametrize("stack", STACKS)
def test_every_configured_tenant_is_a_cluster_of_the_render(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    """The judges look at tenant clusters; none recognised would make every one of them pass."""
    names = sorted(c.name for c in rendered(stack).clusters.values())
    tenants = [t["name"] for t in platform_block(stack)["tenants"]]
    assert names == sorted(["management", *tenants])


@pytest.mark.parametrize("stack", STACKS)
def test_every_chart_renders_as_helm_install_would(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    result = rendered(stack)
    charts = [r for r in result.recording.resources if r.type in (RELEASE, CHART_V4)]
    assert charts, f"{stack}: no chart registered"
    assert result.render_errors == {}
    assert len(result.releases) == len(charts)
    for release in result.releases.values():
        assert release.all_objects(), f"{release.name} renders nothing"


@pytest.mark.parametrize("stack", STACKS)
def test_every_custom_resource_has_its_crd_on_its_cluster_first(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    assert missing_crds(rendered(stack)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_release_and_object_has_its_namespace_on_its_cluster_first(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    assert missing_namespaces(rendered(stack)) == []


@pytest.mark.parametrize("stack", STACKS)
def test_every_object_validates_against_its_clusters_schema(
    stack: str, rendered: Callable[[str], RenderedStack], cel_tally: CelTally
) -> None:
    assert schema_violations(rendered(stack), cel_tally) == []
