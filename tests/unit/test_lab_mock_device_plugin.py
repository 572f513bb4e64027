"""HAMi's mock device plugin in the lab: a device config mock 1.0.1 decodes, the chart's
DaemonSet shape around it, and what it advertises from a node's register annotation."""

from __future__ import annotations

import json

import pytest

from components.catalog import CARD_CATALOG
from components.gpu_inventory import node_register_entries
from components.lab import mock_device_plugin as mock
from tests.support.go_yaml_v2 import INT32, STRING, Slice, Struct, unmarshal_errors
from tests.support.mock_device_plugin_shape import CONFIG

# ---------------------------------------------------------------- the yaml.v2 model itself

POINT = Struct("main.Point", {"name": STRING, "count": INT32, "tags": Slice(STRING)})


@pytest.mark.parametrize(
    ("text", "error"),
    [
        ("name: a\ncount: 3\ntags: [x]\nunknown: {deep: [1]}\n", None),  # unknown keys ignored
        ("name: 7\ncount: 3.0\ntags: ~\n", None),  # a number into a string; 3.0 into an int
        ("tags:\n  first: x\n", "line 2: cannot unmarshal !!map into []string"),
        ("tags: x\n", "line 1: cannot unmarshal !!str `x` into []string"),
        ("count: many\n", "line 1: cannot unmarshal !!str `many` into int32"),
        ("count: 2.5\n", "line 1: cannot unmarshal !!float `2.5` into int32"),
        ("name: [a]\n", "line 1: cannot unmarshal !!seq into string"),
    ],
)
def test_the_decoder_model_follows_yaml_v2(text: str, error: str | None) -> None:
    assert unmarshal_errors(text, POINT) == ([] if error is None else [error])


def test_hami_2_10s_vnpus_mapping_does_not_decode_into_mock_1_0_1() -> None:
    """The shape of HAMi 2.10's ``vnpus`` (charts/hami/templates/scheduler/device-configmap.yaml,
    abridged): a mapping where mock 1.0.1 declares ``[]ascend.VNPUConfig``."""
    excerpt = (
        "nvidia:\n  resourceCountName: nvidia.com/gpu\n"
        "vnpus:\n  hamiVnpuCore: false\n  configs:\n  - chipName: 910A\n"
    )
    assert unmarshal_errors(excerpt, CONFIG) == [
        "line 4: cannot unmarshal !!map into []ascend.VNPUConfig"
    ]


# ------------------------------------------------------------------------ the lab's config


def test_the_labs_device_config_decodes_into_mock_1_0_1() -> None:
    assert unmarshal_errors(mock.device_config_text(), CONFIG) == []


def test_the_config_names_every_resource_the_mock_advertises() -> None:
    nvidia = mock.device_config()["nvidia"]
    assert nvidia == {
        "resourceCountName": "nvidia.com/gpu",
        "resourceMemoryName": "nvidia.com/gpumem",
        "resourceMemoryPercentageName": "nvidia.com/gpumem-percentage",
        "resourceCoreName": "nvidia.com/gpucores",
        "memoryFactor": 1,
    }


def test_the_daemon_set_mounts_its_own_config_where_the_plugin_reads_it() -> None:
    objects = mock.manifests("hami-system", "1.0.1", {"gpu-platform.io/tenant": "tenant-a"})
    pod = objects["daemonSet"]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["image"] == "docker.io/projecthami/mock-device-plugin:1.0.1"
    flag = next(a for a in container["command"] if a.startswith("--device-config-file="))
    mount = next(m for m in container["volumeMounts"] if m["name"] == "device-config")
    assert flag == f"--device-config-file={mount['mountPath']}"
    volume = next(v for v in pod["volumes"] if v["name"] == "device-config")
    config = objects["configMap"]
    assert volume["configMap"]["name"] == config["metadata"]["name"] != "hami-scheduler-device"
    assert unmarshal_errors(config["data"][mount["subPath"]], CONFIG) == []
    assert {"name": "NODE_NAME", "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}}} in (
        container["env"]
    )
    # It only reads its own Node.
    assert objects["clusterRole"]["rules"] == [
        {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}
    ]


# --------------------------------------------------------------------- what it advertises


def _register(model: str, count: int) -> list[dict[str, object]]:
    entries = node_register_entries("t", "p", "n", [(CARD_CATALOG[model], count)], 10)
    return json.loads(json.dumps(entries))


def test_it_advertises_memory_cores_and_percentage_from_the_annotation() -> None:
    assert mock.advertised(_register("A100-80GB", 1), gpu_capacity=10) == {
        "nvidia.com/gpumem": 81920,
        "nvidia.com/gpucores": 100,
        "nvidia.com/gpumem-percentage": 100,
    }
    # The catalog's L4 is what NVML reports (23,034 MiB, components/catalog.py).
    assert mock.advertised(_register("L4-24GB", 2), gpu_capacity=20) == {
        "nvidia.com/gpumem": 2 * 23034,
        "nvidia.com/gpucores": 200,
        "nvidia.com/gpumem-percentage": 200,
    }


def test_it_advertises_nothing_while_the_gpu_capacity_is_zero() -> None:
    assert set(mock.advertised(_register("A100-80GB", 1), gpu_capacity=0).values()) == {0}
    assert "nvidia.com/gpu" not in mock.advertised(_register("A100-80GB", 1), gpu_capacity=10)


def test_the_per_node_memory_bound_keeps_the_device_list_under_grpcs_limit() -> None:
    """One fake device per MiB in one ListAndWatch message: the bound must fit the kubelet's
    4 MiB gRPC receive limit, and the limit must really be near it (or the bound is arbitrary)."""
    limit = mock.GRPC_DEFAULT_MAX_RECEIVE_BYTES
    assert mock.list_and_watch_bytes(mock.MAX_NODE_MEMORY_MIB) < limit
    assert mock.list_and_watch_bytes(125_000) > limit
    # One device: tag + length + ("mock-devices-id-0" and "Healthy", each tagged).
    assert mock.list_and_watch_bytes(1) == 2 + (2 + len("mock-devices-id-0")) + (2 + 7)
