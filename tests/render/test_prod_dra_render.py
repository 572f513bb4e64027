"""The prod stack with a ``gpuSharing: dra`` tenant (team-vision, ``tests.unit.test_dra_config
.dra_prod``), rendered chart by chart with Helm's engine: every chart renders (the GPU Operator
chart's own validations included: one CR kind, the NVIDIADriver rule, the DRA API served), its
GPUCluster validates against the chart's CRD, and the GPU Operator facts hold for every tenant."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support import rendered_facts
from tests.support.charts import ChartUnavailableError
from tests.support.crd_schemas import CelTally
from tests.support.harness import evaluate, load_stack_config
from tests.support.render_checks import missing_crds, missing_namespaces, schema_violations
from tests.support.rendered_stack import (
    RenderedStack,
    UpstreamUnavailableError,
    render_stack,
)
from tests.support.upstream import upstream_dir_or_none
from tests.unit.test_dra_config import dra_prod

PLATFORM_KEY = "gpu-platform:platform"


@pytest.fixture(scope="module")
def platform() -> dict[str, Any]:
    return dra_prod()


@pytest.fixture(scope="module")
def rendered_dra(platform: dict[str, Any]) -> RenderedStack:
    config = copy.deepcopy(load_stack_config("prod"))
    config[PLATFORM_KEY] = platform
    recording = evaluate("prod", False, config=config)
    assert recording.error is None, recording.error
    try:
        return render_stack(recording, platform, upstream_dir_or_none())
    except (ChartUnavailableError, UpstreamUnavailableError) as missing:
        pytest.skip(str(missing))


def _operator_objects(stack: RenderedStack, tenant: str) -> list[dict[str, Any]]:
    cluster = next(c for c in stack.clusters.values() if c.name == tenant)
    return [
        obj
        for release in rendered_facts.rendered_of_chart(stack, cluster, "gpu-operator")
        for obj in release.all_objects()
    ]


def test_every_chart_renders(rendered_dra: RenderedStack) -> None:
    assert rendered_dra.render_errors == {}


def test_the_dra_tenants_operator_renders_the_gpu_cluster_and_no_cluster_policy(
    rendered_dra: RenderedStack,
) -> None:
    kinds = [o["kind"] for o in _operator_objects(rendered_dra, "team-vision")]
    assert kinds.count("GPUCluster") == 1
    assert "ClusterPolicy" not in kinds
    assert "NVIDIADriver" not in kinds
    (cluster,) = [
        o for o in _operator_objects(rendered_dra, "team-vision") if o["kind"] == "GPUCluster"
    ]
    dra = cluster["spec"]["draDriver"]
    assert (dra["repository"], dra["image"], dra["version"]) == (
        "nvcr.io/nvidia",
        "dra-driver-nvidia-gpu",
        "v0.5.0",
    )
    assert dra["computeDomains"] == {"enabled": False}
    other = [o["kind"] for o in _operator_objects(rendered_dra, "team-llm")]
    assert other.count("ClusterPolicy") == 1
    assert "GPUCluster" not in other


def test_hamis_device_plugin_is_not_rendered_in_the_dra_tenant(
    rendered_dra: RenderedStack,
) -> None:
    def daemonsets(tenant: str) -> list[str]:
        cluster = next(c for c in rendered_dra.clusters.values() if c.name == tenant)
        return [
            obj["metadata"]["name"]
            for release in rendered_facts.rendered_of_chart(rendered_dra, cluster, "hami")
            for obj in release.of_kind("DaemonSet")
        ]

    assert daemonsets("team-vision") == []
    assert daemonsets("team-llm") != []


def test_the_gpu_operator_facts_hold(rendered_dra: RenderedStack, platform: dict[str, Any]) -> None:
    assert rendered_facts.gpu_operator(rendered_dra, platform) == []


def test_every_custom_resource_has_its_crd_and_namespace_first(
    rendered_dra: RenderedStack,
) -> None:
    assert missing_crds(rendered_dra) == []
    assert missing_namespaces(rendered_dra) == []


def test_every_object_validates_against_its_clusters_schema(
    rendered_dra: RenderedStack, cel_tally: CelTally
) -> None:
    """The GPUCluster against the chart's own CRD (crds/nvidia.com_gpuclusters.yaml)."""
    assert schema_violations(rendered_dra, cel_tally) == []
