"""The device config HAMi's mock device plugin mounts decodes into mock 1.0.1's Go type.

``projecthami/mock-device-plugin`` 1.0.1 decodes its config with yaml.v2 and exits on any error
(``internal/pkg/config/config.go``). The lab's mock mounts a ConfigMap the program declares; the
HAMi chart's own mock would mount the scheduler's ``hami-scheduler-device``, which (rendered from
the pinned chart) does not decode: that is why the lab does not use it.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import yaml

from components.lab import mock_device_plugin as mock
from components.versions import PINNED
from tests.support.charts import render_pinned_or_skip
from tests.support.go_yaml_v2 import unmarshal_errors
from tests.support.harness import Recording, Registration, load_stack_config
from tests.support.mock_device_plugin_shape import CONFIG

DAEMON_SET = "kubernetes:apps/v1:DaemonSet"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RELEASE = "kubernetes:helm.sh/v3:Release"


def _mock_containers(spec: dict[str, Any]) -> list[dict[str, Any]]:
    pod = spec["template"]["spec"]
    return [c for c in pod["containers"] if mock.REPOSITORY in c["image"]]


def _mounted_config(
    recording: Recording, daemon_set: Registration, container: dict[str, Any]
) -> str:
    """The text at the path the mock reads (``--device-config-file``), from the recorded
    ConfigMap its volume names."""
    pod = daemon_set.inputs["spec"]["template"]["spec"]
    path = next(a for a in container["command"] if a.startswith("--device-config-file="))
    path = path.split("=", 1)[1]
    mount = next(m for m in container["volumeMounts"] if m["mountPath"] == path)
    volume = next(v for v in pod["volumes"] if v["name"] == mount["name"])
    name = volume["configMap"]["name"]
    namespace = daemon_set.inputs["metadata"]["namespace"]
    tenant = recording.component_of(daemon_set, ":GpuTenant")
    (config_map,) = [
        r
        for r in recording.of_type(CONFIG_MAP)
        if r.inputs["metadata"]["name"] == name
        and r.inputs["metadata"].get("namespace") == namespace
        and recording.component_of(r, ":GpuTenant") == tenant
    ]
    text: str = config_map.inputs["data"][mount["subPath"]]
    return text


def test_every_lab_tenants_mock_reads_a_config_mock_1_0_1_decodes(lab: Recording) -> None:
    tenants = lab.of_type("gpu-platform:index:GpuTenant")
    for tenant in tenants:
        mocks = [
            (r, c)
            for r in lab.of_type(DAEMON_SET)
            if lab.component_of(r, ":GpuTenant") == tenant
            for c in _mock_containers(r.inputs["spec"])
        ]
        assert mocks, f"{tenant.name}: no mock device plugin DaemonSet"
        for daemon_set, container in mocks:
            assert container["image"].endswith(f":{PINNED.hami_mock_device_plugin_tag}")
            assert unmarshal_errors(_mounted_config(lab, daemon_set, container), CONFIG) == []


def test_no_chart_runs_its_own_mock_in_either_stack(
    recordings: Callable[[str, bool], Recording],
) -> None:
    for stack in ("lab", "prod"):
        for release in recordings(stack, False).of_type(RELEASE):
            values = release.inputs.get("values") or {}
            assert (values.get("mockDevicePlugin") or {}).get("enabled") is not True, release.name


def test_prod_runs_no_mock(prod: Recording) -> None:
    assert not [r for r in prod.of_type(DAEMON_SET) if _mock_containers(r.inputs["spec"])]


# ----------------------------------------------------------- the chart's mock (rendered)


def _hami(values: dict[str, Any]) -> list[dict[str, Any]]:
    rendered = render_pinned_or_skip(
        PINNED.hami.chart,
        PINNED.hami.version,
        values,
        name="hami",
        namespace="hami-system",
        kube_version=load_stack_config("lab")["gpu-platform:platform"]["kubernetesVersion"],
    )
    return rendered.all_objects()


def test_the_charts_mock_would_mount_a_config_mock_1_0_1_cannot_decode(lab: Recording) -> None:
    """HAMi 2.10's chart mock mounts ``hami-scheduler-device``; rendered with the lab's own HAMi
    values its ``vnpus`` is a mapping, and mock 1.0.1 exits on it."""
    (release,) = [r for r in lab.of_type(RELEASE) if r.name == "tenant-a-hami"]
    values = {**release.inputs["values"], "mockDevicePlugin": {"enabled": True}}
    objects = _hami(values)
    (daemon_set,) = [
        o for o in objects if o["kind"] == "DaemonSet" and "mock" in o["metadata"]["name"]
    ]
    (volume,) = [v for v in daemon_set["spec"]["template"]["spec"]["volumes"] if "configMap" in v]
    mounted = volume["configMap"]["name"]
    assert mounted == "hami-scheduler-device"
    (config_map,) = [
        o for o in objects if o["kind"] == "ConfigMap" and o["metadata"]["name"] == mounted
    ]
    errors = unmarshal_errors(config_map["data"]["device-config.yaml"], CONFIG)
    assert errors
    assert all("[]ascend.VNPUConfig" in e for e in errors), errors


def test_the_mock_uses_the_schedulers_resource_names(lab: Recording) -> None:
    """The names the mock advertises are the ones HAMi's scheduler and webhook count."""
    (release,) = [r for r in lab.of_type(RELEASE) if r.name == "tenant-a-hami"]
    (config_map,) = [
        o
        for o in _hami(release.inputs["values"])
        if o["kind"] == "ConfigMap" and o["metadata"]["name"] == "hami-scheduler-device"
    ]
    scheduler = yaml.safe_load(config_map["data"]["device-config.yaml"])["nvidia"]
    ours = mock.device_config()["nvidia"]
    for key in (
        "resourceCountName",
        "resourceMemoryName",
        "resourceMemoryPercentageName",
        "resourceCoreName",
        "memoryFactor",
    ):
        assert ours[key] == scheduler[key], key


def test_the_resource_names_are_the_charts_defaults(upstream_dir: Path) -> None:
    defaults = yaml.safe_load((upstream_dir / "hami" / "values.yaml").read_text())
    nvidia = mock.device_config()["nvidia"]
    assert nvidia["resourceCountName"] == defaults["resourceName"]
    assert nvidia["resourceMemoryName"] == defaults["resourceMem"]
    assert nvidia["resourceMemoryPercentageName"] == defaults["resourceMemPercentage"]
    assert nvidia["resourceCoreName"] == defaults["resourceCores"]
    assert defaults["mockDevicePlugin"]["image"]["repository"] == mock.REPOSITORY
    assert defaults["mockDevicePlugin"]["image"]["registry"] == mock.REGISTRY
