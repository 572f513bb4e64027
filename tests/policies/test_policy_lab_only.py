"""lab-only-components: the lab's GPU simulation is forbidden where the config says prod."""

from __future__ import annotations

from typing import Any

import pytest
from gpu_platform_policies.kube import is_hami_release
from gpu_platform_policies.model import Resource
from gpu_platform_policies.pack import validate_lab_only

from tests.policies.builders import (
    DEPLOYMENT,
    RELEASE,
    U,
    container,
    deployment,
    hami_release,
    hami_values,
    pod_spec,
    resource_args,
    run_resource,
)

PROD = {"environment": "prod"}
NODE_PATCH = "kubernetes:core/v1:NodePatch"
REGISTER = "hami.io/node-nvidia-register"
INVENTORY_JSON = (
    '[{"id":"GPU-0","index":0,"count":10,"devmem":81920,"devcore":100,'
    '"type":"NVIDIA-A100-SXM4-80GB","numa":0,"mode":"hami-core","health":true}]'
)


def check(type_: str, props: dict[str, Any], config: dict[str, Any] | None = None) -> list[str]:
    return run_resource(validate_lab_only, resource_args(type_, props, config=config))


def mock_plugin_daemonset() -> dict[str, Any]:
    spec = pod_spec([{"name": "plugin", "image": "docker.io/projecthami/mock-device-plugin:1.0.1"}])
    return deployment("mock-device-plugin", spec, tenant=None)


def completer() -> dict[str, Any]:
    props = deployment("mock-allocation-completer", pod_spec([container({"cpu": "100m"})]))
    props["metadata"]["labels"]["gpu-platform.io/lab-only"] = "true"
    return props


def node_patch() -> dict[str, Any]:
    return {
        "metadata": {"name": "tenant-a-a100-0", "annotations": {REGISTER: INVENTORY_JSON}},
        "status": {"capacity": {"nvidia.com/gpu": "10"}},
    }


CASES = {
    "hami release with the mock plugin": (RELEASE, hami_release(hami_values(mock=True))),
    "mock plugin image": ("kubernetes:apps/v1:DaemonSet", mock_plugin_daemonset()),
    "mock allocation completer": (DEPLOYMENT, completer()),
    "declared fake inventory": (NODE_PATCH, node_patch()),
    "inventory written by a command": (
        "command:local:Command",
        {"create": f'kubectl annotate node n {REGISTER}="$INVENTORY" --overwrite'},
    ),
}


@pytest.mark.parametrize("case", sorted(CASES))
def test_lab_only_parts_are_forbidden_in_prod(case: str) -> None:
    type_, props = CASES[case]
    assert check(type_, props, PROD), case


@pytest.mark.parametrize("case", sorted(CASES))
@pytest.mark.parametrize("config", [None, {}, {"environment": "lab"}])
def test_lab_only_parts_are_fine_outside_prod(case: str, config: dict[str, Any] | None) -> None:
    type_, props = CASES[case]
    assert check(type_, props, config) == []


def test_release_with_the_mock_plugin_is_reported_once_with_the_fix() -> None:
    messages = check(RELEASE, hami_release(hami_values(mock=True)), PROD)
    assert len(messages) == 1
    assert "mockDevicePlugin.enabled: true" in messages[0]
    assert messages[0].startswith("Release ")


def test_release_with_the_mock_plugin_disabled_passes() -> None:
    # The chart's default values name the mock image under mockDevicePlugin: disabled is fine.
    assert check(RELEASE, hami_release(hami_values(mock=False)), PROD) == []


def test_node_patch_reports_annotation_and_capacity() -> None:
    messages = check(NODE_PATCH, node_patch(), PROD)
    assert len(messages) == 2
    assert any(REGISTER in m for m in messages)
    assert any("nvidia.com/* node capacity" in m for m in messages)


def test_lab_only_label_false_is_not_lab_only() -> None:
    props = completer()
    props["metadata"]["labels"]["gpu-platform.io/lab-only"] = "false"
    assert check(DEPLOYMENT, props, PROD) == []


def test_ordinary_prod_resources_pass() -> None:
    real = deployment("inference", pod_spec([{"name": "m", "image": "nvcr.io/nvidia/cuda:12.4.1"}]))
    assert check(DEPLOYMENT, real, PROD) == []
    assert check(RELEASE, hami_release(hami_values()), PROD) == []


def test_unknown_values_are_not_violations() -> None:
    props = completer()
    props["metadata"]["labels"]["gpu-platform.io/lab-only"] = U
    assert check(DEPLOYMENT, props, PROD) == []
    assert check(RELEASE, hami_release(U), PROD) == []
    assert check(RELEASE, hami_release({"mockDevicePlugin": {"enabled": U}}), PROD) == []


def test_prose_mentioning_the_mock_image_is_not_a_use() -> None:
    script = {"data": {"run.py": "# replaces what projecthami/mock-device-plugin leaves undone\n"}}
    assert check("kubernetes:core/v1:ConfigMap", script, PROD) == []


@pytest.mark.parametrize(
    "image",
    ["projecthami/mock-device-plugin", "docker.io/projecthami/mock-device-plugin:1.0.1"],
)
def test_the_mock_image_is_found_wherever_it_is_used(image: str) -> None:
    pod = {"metadata": {"name": "p"}, "spec": {"containers": [{"name": "c", "image": image}]}}
    assert len(check("kubernetes:core/v1:Pod", pod, PROD)) == 1
    run = {"create": f"docker run -d {image} --node $NODE"}
    assert len(check("command:local:Command", run, PROD)) == 1


@pytest.mark.parametrize(
    ("chart", "is_hami"),
    [
        (".charts/hami-2.10.0.tgz", True),  # what the program registers (chart_cache.py)
        ("/abs/path/hami-v2.10.0.tgz", True),
        ("hami", True),
        ("hami-charts/hami", True),
        ("oci://ghcr.io/project-hami/hami", True),
        (".charts/hami-webui-1.0.5.tgz", False),
        (".charts/tigera-operator-v3.32.1.tgz", False),
        ("hami-2.10.0", False),
    ],
)
def test_hami_releases_are_recognised_in_every_chart_form(chart: str, is_hami: bool) -> None:
    """Every HAMi rule finds the release whichever way it names HAMi's chart, and a chart that
    only starts with "hami" is not HAMi's."""
    release = Resource(urn="urn:r", type=RELEASE, name="r", props={"chart": chart})
    assert is_hami_release(release) is is_hami
