"""The mock allocation completer: its decisions on HAMi 2.10 annotation values, one polling round
against an in-memory API, and its manifests.

Recorded values follow HAMi v2.10.0's formats: ``hami.io/vgpu-devices-to-allocate`` from
docs/develop/protocol.md and ``device.EncodePodSingleDevice`` (devices ``<UUID>,NVIDIA,<MiB>,
<cores>`` each ended by ``:``, containers each ended by ``;``), the node lock
``<RFC3339>,<namespace>,<pod>`` from ``nodelock.GenerateNodeLockKeyByPod``.
"""

from __future__ import annotations

import ast
import copy
import sys
from typing import Any

import pytest

from components.lab.completer import mock_allocation_completer as completer
from components.lab.completer.manifests import (
    SCRIPT_PATH,
    completer_manifests,
    completer_namespace,
    completer_script,
)
from components.versions import PINNED

UUID_A = "GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448"
UUID_B = "GPU-00552014-5c87-89ac-b1a6-7b53aa24b0ec"
NODE = "tenant-a-a100-0"
POOL_NODES = {NODE}


def pod(
    name: str = "gpu-pod-1",
    namespace: str = "acceptance",
    devices: str | None = f"{UUID_A},NVIDIA,20000,30:;",
    phase: str = "allocating",
    node: str | None = NODE,
    bound_to: str | None = NODE,
    bind_time: str = "1761220000",
    status: str = "Pending",
) -> dict[str, Any]:
    """A pod as HAMi's scheduler leaves it after Bind (annotations as recorded)."""
    annotations = {
        "hami.io/bind-phase": phase,
        "hami.io/bind-time": bind_time,
        "hami.io/vgpu-devices-allocated": f"{UUID_A},NVIDIA,20000,30:;",
    }
    if devices is not None:
        annotations["hami.io/vgpu-devices-to-allocate"] = devices
    if node is not None:
        annotations["hami.io/vgpu-node"] = node
    spec: dict[str, Any] = {"schedulerName": "hami-scheduler", "containers": [{"name": "c"}]}
    if bound_to is not None:
        spec["nodeName"] = bound_to
    return {
        "metadata": {"name": name, "namespace": namespace, "annotations": annotations},
        "spec": spec,
        "status": {"phase": status},
    }


# ------------------------------------------------------------------- devices-to-allocate


@pytest.mark.parametrize(
    ("recorded", "emptied"),
    [
        # one container, one card (the lab pods)
        (f"{UUID_A},NVIDIA,20000,30:;", ";"),
        # protocol.md's two-container example
        (f"{UUID_A},NVIDIA,3000,0:;{UUID_A},NVIDIA,5000,0:;", ";;"),
        # the first container (e.g. an init container) has no GPU
        (f";{UUID_B},NVIDIA,3000,0:;", ";;"),
        # one container with two cards
        (f"{UUID_A},NVIDIA,1024,4:{UUID_B},NVIDIA,1024,4:;", ";"),
        # three containers, the middle one without GPU
        (f"{UUID_A},NVIDIA,1,1:;;{UUID_B},NVIDIA,2,2:;", ";;;"),
    ],
)
def test_every_container_segment_is_emptied_and_separators_stay(
    recorded: str, emptied: str
) -> None:
    result = completer.empty_container_segments(recorded)
    assert result == emptied
    assert result.count(";") == recorded.count(";")
    # the real plugin declares success only when no device type keyword is left
    assert "NVIDIA" not in result
    assert completer.empty_container_segments(result) == result  # idempotent


def test_container_devices_keeps_container_positions() -> None:
    value = f";{UUID_A},NVIDIA,3000,0:{UUID_B},NVIDIA,3000,0:;"
    assert completer.container_devices(value) == [
        [],
        [f"{UUID_A},NVIDIA,3000,0", f"{UUID_B},NVIDIA,3000,0"],
        [],
    ]


# --------------------------------------------------------------------------------- locks


def test_lock_is_held_only_by_the_named_pod() -> None:
    lock = "2026-10-23T10:00:00Z,acceptance,gpu-pod-1"
    assert completer.lock_held_by(lock, "acceptance", "gpu-pod-1")
    assert not completer.lock_held_by(lock, "acceptance", "pod-1")
    assert not completer.lock_held_by(lock, "other", "gpu-pod-1")
    assert not completer.lock_held_by(
        "2026-10-23T10:00:00Z,acceptance,gpu-pod-11", "acceptance", "gpu-pod-1"
    )
    assert not completer.lock_held_by(
        "2026-10-23T10:00:00Z,xacceptance,gpu-pod-1", "acceptance", "gpu-pod-1"
    )


def test_node_unlock_patch_tests_then_removes_the_lock() -> None:
    lock = "2026-10-23T10:00:00Z,acceptance,gpu-pod-1"
    node = {"metadata": {"name": NODE, "annotations": {"hami.io/mutex.lock": lock}}}
    assert completer.node_unlock_patch(node, "acceptance", "gpu-pod-1") == [
        {"op": "test", "path": "/metadata/annotations/hami.io~1mutex.lock", "value": lock},
        {"op": "remove", "path": "/metadata/annotations/hami.io~1mutex.lock"},
    ]


@pytest.mark.parametrize(
    "annotations",
    [
        {},
        {"hami.io/mutex.lock": "2026-10-23T10:00:00Z,acceptance,gpu-pod-2"},
        {"hami.io/mutex.lock": "2026-10-23T10:00:00Z"},  # legacy lock without an owner
    ],
)
def test_a_lock_that_is_not_the_pods_is_left_alone(annotations: dict[str, str]) -> None:
    node = {"metadata": {"name": NODE, "annotations": annotations}}
    assert completer.node_unlock_patch(node, "acceptance", "gpu-pod-1") is None


# ------------------------------------------------------------------------------ decisions


def test_a_bound_allocating_pod_on_a_pool_node_needs_completion() -> None:
    assert completer.needs_completion(pod(), POOL_NODES)
    assert completer.needs_completion(pod(status="Running"), POOL_NODES)


@pytest.mark.parametrize(
    "changes",
    [
        {"phase": "success"},
        {"phase": "failed"},
        {"node": "tenant-b-l4-0", "bound_to": "tenant-b-l4-0"},  # not our pool
        {"node": None},
        {"bound_to": None},  # not bound yet: the kubelet has not called Allocate
        {"devices": None},
        {"status": "Succeeded"},
        {"status": "Failed"},
    ],
)
def test_other_pods_are_not_touched(changes: dict[str, Any]) -> None:
    assert not completer.needs_completion(pod(**changes), POOL_NODES)


def test_a_pod_being_deleted_is_not_touched() -> None:
    deleting = pod()
    deleting["metadata"]["deletionTimestamp"] = "2026-10-23T10:00:05Z"
    assert not completer.needs_completion(deleting, POOL_NODES)


def test_pod_completion_patch_is_conditional_on_what_was_read() -> None:
    assert completer.pod_completion_patch(pod()) == [
        {"op": "test", "path": "/metadata/annotations/hami.io~1bind-phase", "value": "allocating"},
        {
            "op": "test",
            "path": "/metadata/annotations/hami.io~1vgpu-devices-to-allocate",
            "value": f"{UUID_A},NVIDIA,20000,30:;",
        },
        {
            "op": "replace",
            "path": "/metadata/annotations/hami.io~1vgpu-devices-to-allocate",
            "value": ";",
        },
        {"op": "replace", "path": "/metadata/annotations/hami.io~1bind-phase", "value": "success"},
    ]


def test_plan_completions_orders_by_bind_time_and_counts_devices() -> None:
    pods = [
        pod("late", bind_time="1761220009"),
        pod("done", phase="success"),
        pod("early", devices=f"{UUID_A},NVIDIA,1,1:{UUID_B},NVIDIA,1,1:;", bind_time="1761220001"),
    ]
    plans = completer.plan_completions(pods, POOL_NODES)
    assert [p.name for p in plans] == ["early", "late"]
    assert (plans[0].devices, plans[0].containers, plans[0].bind_time) == (2, 1, 1761220001)
    message = completer.completion_message(plans[0], "released", 1761220003.5)
    assert message.startswith("completed acceptance/early on tenant-a-a100-0: 2.5s after bind")
    assert "bind-phase=success" in message


# ---------------------------------------------------------- the nodes' declared identity

REGISTER = "hami.io/node-nvidia-register"
REGISTER_VALUE = '[{"id":"GPU-0","count":10,"devmem":81920,"devcore":100,"type":"NVIDIA-A100"}]'
IDENTITY = {
    "labels": {"gpu": "on", "gpu-platform.io/pool": "a100"},
    "annotations": {REGISTER: REGISTER_VALUE},
    "capacity": {"nvidia.com/gpu": "10"},
}
DESIRED = {NODE: IDENTITY}


def node_object(
    labels: dict[str, str] | None = None,
    annotations: dict[str, str] | None = None,
    capacity: dict[str, str] | None = None,
) -> dict[str, Any]:
    return {
        "metadata": {
            "name": NODE,
            "labels": dict(IDENTITY["labels"] if labels is None else labels),
            "annotations": dict(IDENTITY["annotations"] if annotations is None else annotations),
        },
        "status": {
            "capacity": dict(IDENTITY["capacity"] if capacity is None else capacity),
            "allocatable": dict(IDENTITY["capacity"] if capacity is None else capacity),
        },
    }


def test_a_node_with_its_identity_needs_nothing() -> None:
    assert completer.node_metadata_patch(node_object(), IDENTITY) is None
    assert completer.node_status_patch(node_object(), IDENTITY["capacity"]) is None


def test_a_restarted_kubelets_zeroed_capacity_is_put_back() -> None:
    """The kubelet sets extended resources to 0 when it starts without a device-plugin
    checkpoint; capacity and allocatable both come back."""
    for zeroed in ({"nvidia.com/gpu": "0"}, {}):
        patch = completer.node_status_patch(node_object(capacity=zeroed), IDENTITY["capacity"])
        assert patch == {
            "status": {
                "capacity": {"nvidia.com/gpu": "10"},
                "allocatable": {"nvidia.com/gpu": "10"},
            }
        }


def test_a_re_registered_nodes_labels_and_annotation_are_put_back() -> None:
    patch = completer.node_metadata_patch(node_object(labels={}, annotations={}), IDENTITY)
    assert patch == {
        "metadata": {"labels": IDENTITY["labels"], "annotations": IDENTITY["annotations"]}
    }


def test_a_value_someone_changed_is_left_alone() -> None:
    changed = node_object(annotations={REGISTER: "[]"}, capacity={"nvidia.com/gpu": "20"})
    assert completer.node_metadata_patch(changed, IDENTITY) is None
    assert completer.node_status_patch(changed, IDENTITY["capacity"]) is None


def test_the_nodes_file_is_read_as_string_maps() -> None:
    text = '{"n": {"labels": {"a": "b"}, "annotations": {}, "capacity": {"nvidia.com/gpu": 10}}}'
    assert completer.load_desired_nodes(text) == {
        "n": {"labels": {"a": "b"}, "annotations": {}, "capacity": {"nvidia.com/gpu": "10"}}
    }
    with pytest.raises(ValueError, match="node names"):
        completer.load_desired_nodes("{}")


# ------------------------------------------------------------ one round against a fake API


def _pointer_key(path: str) -> str:
    prefix = "/metadata/annotations/"
    assert path.startswith(prefix)
    return path[len(prefix) :].replace("~1", "/").replace("~0", "~")


class FakeApi:
    """Nodes and pods in memory; JSON patches on annotations as the API server applies them
    (a failed ``test`` op rejects the whole patch with 422), merge patches on nodes and their
    status; an unknown node is a 404."""

    def __init__(self, nodes: dict[str, dict[str, str]], pods: list[dict[str, Any]]) -> None:
        self.nodes = {}
        for name, extra in nodes.items():
            node = node_object(annotations={**IDENTITY["annotations"], **extra})
            node["metadata"]["name"] = name
            self.nodes[name] = node
        self.pods = {(p["metadata"]["namespace"], p["metadata"]["name"]): p for p in pods}
        self.patches: list[str] = []

    def get(self, path: str, params: dict[str, str] | None = None) -> Any:
        if path.startswith("/api/v1/nodes/"):
            name = path.rsplit("/", 1)[1]
            if name not in self.nodes:
                raise completer.ApiError(404, "NotFound")
            return copy.deepcopy(self.nodes[name])
        if path == "/api/v1/pods":
            assert params is not None
            node = params["fieldSelector"].removeprefix("spec.nodeName=")
            items = [p for p in self.pods.values() if p["spec"].get("nodeName") == node]
            return {"items": copy.deepcopy(items)}
        raise AssertionError(path)

    def json_patch(self, path: str, operations: list[dict[str, Any]]) -> Any:
        parts = path.split("/")
        obj = self.nodes[parts[4]] if parts[3] == "nodes" else self.pods[(parts[4], parts[6])]
        annotations = dict(obj["metadata"]["annotations"])
        for op in operations:
            key = _pointer_key(op["path"])
            if op["op"] == "test" and annotations.get(key) != op["value"]:
                raise completer.ApiError(422, "test failed")
            if op["op"] == "replace":
                annotations[key] = op["value"]
            if op["op"] == "remove":
                del annotations[key]
        obj["metadata"]["annotations"] = annotations
        self.patches.append(path)
        return obj

    def merge_patch(self, path: str, body: dict[str, Any]) -> Any:
        parts = path.split("/")
        assert parts[3] == "nodes", path
        node = self.nodes[parts[4]]
        if parts[5:] == ["status"]:
            assert set(body) == {"status"}, body
            for key, values in body["status"].items():
                node["status"].setdefault(key, {}).update(values)
        else:
            assert parts[5:] == [], path
            assert set(body) == {"metadata"}, body
            for key, values in body["metadata"].items():
                node["metadata"].setdefault(key, {}).update(values)
        self.patches.append(path)
        return node


def hami_binds(api: FakeApi, name: str, at: int) -> None:
    """What HAMi's scheduler Bind does: take the node lock (it refuses while one is held),
    annotate the pod allocating, bind it."""
    annotations = api.nodes[NODE]["metadata"]["annotations"]
    assert "hami.io/mutex.lock" not in annotations, "node still locked: the pod would wait 5 min"
    annotations["hami.io/mutex.lock"] = f"2026-10-23T10:00:0{at}Z,acceptance,{name}"
    api.pods[("acceptance", name)] = pod(name, bind_time=str(1761220000 + at))


def test_three_pods_bind_one_after_another_without_waiting_for_the_lock() -> None:
    api = FakeApi({NODE: {}}, [])
    for at, name in enumerate(["gpu-pod-1", "gpu-pod-2", "gpu-pod-3"]):
        hami_binds(api, name, at)
        assert completer.run_once(api, DESIRED) == 1  # type: ignore[arg-type]
    for name in ("gpu-pod-1", "gpu-pod-2", "gpu-pod-3"):
        annotations = api.pods[("acceptance", name)]["metadata"]["annotations"]
        assert annotations["hami.io/bind-phase"] == "success"
        assert annotations["hami.io/vgpu-devices-to-allocate"] == ";"
        # what the acceptance suite reads for the card UUID stays untouched
        assert annotations["hami.io/vgpu-devices-allocated"] == f"{UUID_A},NVIDIA,20000,30:;"
    assert "hami.io/mutex.lock" not in api.nodes[NODE]["metadata"]["annotations"]
    assert completer.run_once(api, DESIRED) == 0  # type: ignore[arg-type]


def test_a_lock_taken_by_another_pod_meanwhile_survives() -> None:
    other_lock = "2026-10-23T10:00:09Z,acceptance,someone-else"
    api = FakeApi({NODE: {"hami.io/mutex.lock": other_lock}}, [pod()])
    assert completer.run_once(api, DESIRED) == 1  # type: ignore[arg-type]
    assert (
        api.pods[("acceptance", "gpu-pod-1")]["metadata"]["annotations"]["hami.io/bind-phase"]
        == "success"
    )
    assert api.nodes[NODE]["metadata"]["annotations"]["hami.io/mutex.lock"] == other_lock
    assert all("/nodes/" not in p for p in api.patches)


def test_a_pod_changed_between_read_and_patch_is_left_for_the_next_round() -> None:
    api = FakeApi({NODE: {"hami.io/mutex.lock": "t,acceptance,gpu-pod-1"}}, [pod()])
    plans = completer.plan_completions(list(api.pods.values()), POOL_NODES)
    api.pods[("acceptance", "gpu-pod-1")]["metadata"]["annotations"]["hami.io/bind-phase"] = (
        "failed"
    )
    completer.complete(api, plans[0])  # type: ignore[arg-type]
    annotations = api.pods[("acceptance", "gpu-pod-1")]["metadata"]["annotations"]
    assert annotations["hami.io/bind-phase"] == "failed"
    assert annotations["hami.io/vgpu-devices-to-allocate"] == f"{UUID_A},NVIDIA,20000,30:;"
    assert "hami.io/mutex.lock" in api.nodes[NODE]["metadata"]["annotations"]


def test_each_round_puts_back_what_a_restart_took() -> None:
    api = FakeApi({NODE: {}}, [])
    api.nodes[NODE]["status"] = {"capacity": {"nvidia.com/gpu": "0", "cpu": "8"}, "allocatable": {}}
    del api.nodes[NODE]["metadata"]["annotations"][REGISTER]
    assert completer.run_once(api, DESIRED) == 0  # type: ignore[arg-type]
    node = api.nodes[NODE]
    assert node["status"]["capacity"] == {"nvidia.com/gpu": "10", "cpu": "8"}
    assert node["status"]["allocatable"] == {"nvidia.com/gpu": "10"}
    assert node["metadata"]["annotations"][REGISTER] == REGISTER_VALUE
    assert api.patches == [f"/api/v1/nodes/{NODE}", f"/api/v1/nodes/{NODE}/status"]
    api.patches.clear()
    assert completer.run_once(api, DESIRED) == 0  # type: ignore[arg-type]
    assert api.patches == []


def test_a_node_not_registered_yet_is_skipped() -> None:
    api = FakeApi({}, [pod()])
    assert completer.run_once(api, DESIRED) == 0  # type: ignore[arg-type]
    assert api.patches == []


def test_pods_on_nodes_outside_the_pool_are_ignored() -> None:
    api = FakeApi({NODE: {}}, [pod(node="stranger", bound_to=NODE)])
    assert completer.run_once(api, DESIRED) == 0  # type: ignore[arg-type]
    assert api.patches == []


# -------------------------------------------------------------------------- the script file


def test_the_script_imports_only_the_standard_library() -> None:
    tree = ast.parse(SCRIPT_PATH.read_text())
    modules = set()
    for node in ast.walk(tree):
        if isinstance(node, ast.Import):
            modules.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.module and node.level == 0:
            modules.add(node.module.split(".")[0])
    assert modules
    assert modules <= set(sys.stdlib_module_names) | {"__future__"}, modules


def test_the_script_has_an_entry_point_and_reads_its_settings_from_env() -> None:
    text = SCRIPT_PATH.read_text()
    assert text.startswith("#!/usr/bin/env python3")
    assert 'if __name__ == "__main__":' in text
    assert 'os.environ["NODES_FILE"]' in text


# ------------------------------------------------------------------------------ manifests


def manifests() -> dict[str, dict[str, Any]]:
    return completer_manifests(
        "tenant-a", "a100", completer_script(), PINNED.completer_image, DESIRED
    )


def test_least_privilege_cluster_role() -> None:
    """Pods: list (by node) and patch; the pool's own nodes, by name: get and patch, and patch
    their status (the capacity the kubelet zeroes on restart). Nothing else."""
    role = manifests()["clusterRole"]
    assert role["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch"]},
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "resourceNames": [NODE],
            "verbs": ["get", "patch"],
        },
        {
            "apiGroups": [""],
            "resources": ["nodes/status"],
            "resourceNames": [NODE],
            "verbs": ["patch"],
        },
    ]
    binding = manifests()["clusterRoleBinding"]
    assert binding["roleRef"]["name"] == role["metadata"]["name"]
    assert binding["subjects"] == [
        {
            "kind": "ServiceAccount",
            "name": manifests()["serviceAccount"]["metadata"]["name"],
            "namespace": "gpu-mock-completer-a100",
        }
    ]


def test_namespace_is_excluded_from_hamis_webhook_and_lab_only() -> None:
    labels = manifests()["namespace"]["metadata"]["labels"]
    assert labels["hami.io/webhook"] == "ignore"
    assert labels["gpu-platform.io/lab-only"] == "true"
    for key, obj in manifests().items():
        assert obj["metadata"]["labels"]["gpu-platform.io/lab-only"] == "true", key


def test_deployment_runs_the_shipped_script_hardened() -> None:
    objects = manifests()
    data = objects["configMap"]["data"]
    assert data["mock_allocation_completer.py"] == SCRIPT_PATH.read_text()
    assert completer.load_desired_nodes(data["nodes.json"]) == DESIRED
    pod_spec = objects["deployment"]["spec"]["template"]["spec"]
    assert pod_spec["serviceAccountName"] == objects["serviceAccount"]["metadata"]["name"]
    assert pod_spec["securityContext"]["runAsNonRoot"] is True
    assert pod_spec["securityContext"]["runAsUser"] != 0
    (container,) = pod_spec["containers"]
    assert container["image"] == PINNED.completer_image
    assert ":" in container["image"]
    assert not container["image"].endswith(":latest")
    assert container["command"] == [
        "python3",
        "-u",
        "/opt/completer/mock_allocation_completer.py",
    ]
    security = container["securityContext"]
    assert security["readOnlyRootFilesystem"] is True
    assert security["allowPrivilegeEscalation"] is False
    assert security["capabilities"] == {"drop": ["ALL"]}
    assert set(container["resources"]) == {"requests", "limits"}
    env = {item["name"]: item["value"] for item in container["env"]}
    assert env["NODES_FILE"] == "/opt/completer/nodes.json"
    assert env["POLL_SECONDS"] == "1"
    assert pod_spec["volumes"][0]["configMap"]["name"] == objects["configMap"]["metadata"]["name"]


def test_a_new_script_rolls_the_pod() -> None:
    first = completer_manifests("t", "p", "print(1)", "img:1", DESIRED)["deployment"]
    second = completer_manifests("t", "p", "print(2)", "img:1", DESIRED)["deployment"]
    key = "gpu-platform.io/script-sha256"
    assert (
        first["spec"]["template"]["metadata"]["annotations"][key]
        != second["spec"]["template"]["metadata"]["annotations"][key]
    )
    other = {NODE: {**IDENTITY, "capacity": {"nvidia.com/gpu": "20"}}}
    third = completer_manifests("t", "p", "print(1)", "img:1", other)["deployment"]
    key = "gpu-platform.io/nodes-sha256"
    assert (
        first["spec"]["template"]["metadata"]["annotations"][key]
        != third["spec"]["template"]["metadata"]["annotations"][key]
    )


def test_long_pool_names_still_give_a_valid_namespace() -> None:
    name = completer_namespace("p" * 63)
    assert len(name) <= 63
    assert name != completer_namespace("p" * 62 + "q")
