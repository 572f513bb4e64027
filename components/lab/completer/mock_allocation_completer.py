#!/usr/bin/env python3
"""Mock allocation completer (lab only): finishes the HAMi allocations the mock plugin leaves open.

HAMi's scheduler binds a GPU pod in three steps (HAMi v2.10.0 ``pkg/scheduler/scheduler.go``
``Bind``): it takes the node lock (node annotation ``hami.io/mutex.lock`` =
``<RFC3339>,<namespace>,<pod>``), writes ``hami.io/bind-phase: allocating`` on the pod, and binds
it. Its real NVIDIA device plugin then finishes the allocation in ``Allocate``
(``pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go`` and ``util.go``):

1. it empties the pod's ``hami.io/vgpu-devices-to-allocate`` container by container,
2. once no device is left there, it patches ``hami.io/bind-phase: success``, and
3. it removes the node lock, but only when the lock's value ends with ``,<namespace>,<pod>``
   (``nodelock.ReleaseNodeLock``).

The mock device plugin (``projecthami/mock-device-plugin`` 1.0.1) answers ``Allocate`` with an
empty response, so the phase stays ``allocating`` and the node stays locked until the lock
expires (5 minutes by default): one HAMi pod per node per 5 minutes. This controller does those
three steps for pods on the mock nodes of one pool, polling the tenant API every second. Unlike
HAMi's ``ReleaseNodeLock`` it leaves a legacy lock without an owner (a bare timestamp) alone:
HAMi 2.10 always writes the owner form, and the scheduler's short ``--node-lock-timeout`` expires
anything else.

It also keeps the pool's nodes looking like GPU nodes (``NODES_FILE``: per node the labels, the
``hami.io/node-nvidia-register`` annotation and the ``nvidia.com/gpu`` capacity the program
declared). The kubelet zeroes extended resources it has no device-plugin checkpoint for whenever
it starts against an existing Node (``kubelet_node_status.go`` ``reconcileExtendedResource``,
``devicemanager`` ``ShouldResetExtendedResourceCapacity``), so a kubelet, container or host
restart would leave the node with no ``nvidia.com/gpu`` (the mock's health gate, HAMi's node
health) and nothing would set it again; a Node deleted and re-registered loses its labels and
annotation. Each round puts back whatever is missing or zero, never a value someone changed.

Annotation format (HAMi docs/develop/protocol.md, ``device.EncodePodSingleDevice``):
``hami.io/vgpu-devices-to-allocate`` lists containers in order (init containers first), every
container terminated by ``;``, every device of a container as ``<UUID>,NVIDIA,<MiB>,<cores>``
terminated by ``:``. One container with one card: ``GPU-x,NVIDIA,20000,30:;``; a pod whose first
container has no GPU: ``;GPU-x,NVIDIA,3000,0:;``. "Emptied" keeps every ``;`` and removes every
device, so the position of each container is kept: ``GPU-x,NVIDIA,20000,30:;`` becomes ``;`` and
``A:;B:;`` becomes ``;;``. (HAMi's own plugin re-encodes its decoded list, in which the text after
the last ``;`` counts as one more, empty, container, so it writes one ``;`` more; both decode to
"no device left for any container", which is what the plugin's success check and the scheduler
look at. This completer keeps the scheduler's separators exactly and is idempotent.)

Only the Python standard library is used: it runs from a ConfigMap in a stock python image, with
the pod's service account token and CA. Decisions are pure functions (imported by the tests).
"""

from __future__ import annotations

import json
import logging
import os
import ssl
import sys
import time
import urllib.error
import urllib.parse
import urllib.request
from collections.abc import Collection, Iterable, Mapping
from dataclasses import dataclass
from typing import Any

BIND_PHASE = "hami.io/bind-phase"
BIND_TIME = "hami.io/bind-time"
ASSIGNED_NODE = "hami.io/vgpu-node"
DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
NODE_LOCK = "hami.io/mutex.lock"
PHASE_ALLOCATING = "allocating"
PHASE_SUCCESS = "success"
CONTAINER_SEPARATOR = ";"
DEVICE_SEPARATOR = ":"
LOCK_SEPARATOR = ","
TERMINAL_POD_PHASES = ("Succeeded", "Failed")

SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"
JSON_PATCH = "application/json-patch+json"
MERGE_PATCH = "application/merge-patch+json"
FIELD_MANAGER = "gpu-mock-completer"

LOG = logging.getLogger("mock-allocation-completer")


# ------------------------------------------------------------------------- pure decisions


def container_devices(value: str) -> list[list[str]]:
    """The devices of each container segment of a ``vgpu-devices-to-allocate`` value (every
    ``;``-separated piece, the piece after the last ``;`` included, as HAMi decodes it)."""
    containers: list[list[str]] = []
    for segment in value.split(CONTAINER_SEPARATOR):
        containers.append([d for d in segment.split(DEVICE_SEPARATOR) if "," in d])
    return containers


def empty_container_segments(value: str) -> str:
    """``value`` with every container segment emptied and every ``;`` kept."""
    return CONTAINER_SEPARATOR.join("" for _ in value.split(CONTAINER_SEPARATOR))


def lock_owner_suffix(namespace: str, name: str) -> str:
    """How a node lock taken for a pod ends (HAMi ``nodelock.GenerateNodeLockKeyByPod``)."""
    return f"{LOCK_SEPARATOR}{namespace}{LOCK_SEPARATOR}{name}"


def lock_held_by(lock_value: str, namespace: str, name: str) -> bool:
    """True when the node lock names exactly this pod (``<time>,<namespace>,<pod>``)."""
    return lock_value.endswith(lock_owner_suffix(namespace, name))


def annotation_pointer(key: str) -> str:
    """The JSON pointer (RFC 6901) of an annotation: ``/`` in the key becomes ``~1``."""
    return "/metadata/annotations/" + key.replace("~", "~0").replace("/", "~1")


def _annotations(obj: Mapping[str, Any]) -> Mapping[str, str]:
    metadata = obj.get("metadata") or {}
    return metadata.get("annotations") or {}


def needs_completion(pod: Mapping[str, Any], pool_nodes: Collection[str]) -> bool:
    """True for a pod HAMi bound to one of our mock nodes whose allocation is still open:
    ``bind-phase`` is ``allocating``, ``vgpu-node`` names a pool node, the pod is bound to that
    node (the kubelet's Allocate happens only then), it has devices to allocate and it is neither
    finished nor being deleted."""
    annotations = _annotations(pod)
    if annotations.get(BIND_PHASE) != PHASE_ALLOCATING:
        return False
    node = annotations.get(ASSIGNED_NODE)
    if node is None or node not in pool_nodes:
        return False
    spec = pod.get("spec") or {}
    if spec.get("nodeName") != node:
        return False
    if DEVICES_TO_ALLOCATE not in annotations:
        return False
    metadata = pod.get("metadata") or {}
    if metadata.get("deletionTimestamp"):
        return False
    status = pod.get("status") or {}
    return status.get("phase") not in TERMINAL_POD_PHASES


def pod_completion_patch(pod: Mapping[str, Any]) -> list[dict[str, Any]]:
    """A JSON patch that empties the devices to allocate and sets ``bind-phase: success`` only if
    the pod still holds what we read (``test`` ops), so a concurrent change wins."""
    annotations = _annotations(pod)
    current = annotations[DEVICES_TO_ALLOCATE]
    return [
        {"op": "test", "path": annotation_pointer(BIND_PHASE), "value": PHASE_ALLOCATING},
        {"op": "test", "path": annotation_pointer(DEVICES_TO_ALLOCATE), "value": current},
        {
            "op": "replace",
            "path": annotation_pointer(DEVICES_TO_ALLOCATE),
            "value": empty_container_segments(current),
        },
        {"op": "replace", "path": annotation_pointer(BIND_PHASE), "value": PHASE_SUCCESS},
    ]


def node_unlock_patch(
    node: Mapping[str, Any], namespace: str, name: str
) -> list[dict[str, Any]] | None:
    """A JSON patch removing the node lock if (and only as long as) it is this pod's; None when
    there is no lock or it belongs to another pod (or is a legacy lock without an owner)."""
    lock = _annotations(node).get(NODE_LOCK)
    if lock is None or not lock_held_by(lock, namespace, name):
        return None
    return [
        {"op": "test", "path": annotation_pointer(NODE_LOCK), "value": lock},
        {"op": "remove", "path": annotation_pointer(NODE_LOCK)},
    ]


@dataclass(frozen=True)
class Completion:
    """One pod to complete."""

    namespace: str
    name: str
    node: str
    containers: int
    devices: int
    bind_time: int | None
    pod_patch: list[dict[str, Any]]


def plan_completions(
    pods: Iterable[Mapping[str, Any]], pool_nodes: Collection[str]
) -> list[Completion]:
    """The completions to perform for a list of pods, oldest bind first."""
    plans: list[Completion] = []
    for pod in pods:
        if not needs_completion(pod, pool_nodes):
            continue
        metadata = pod["metadata"]
        annotations = _annotations(pod)
        containers = container_devices(annotations[DEVICES_TO_ALLOCATE])
        bind_time = annotations.get(BIND_TIME, "")
        plans.append(
            Completion(
                namespace=metadata["namespace"],
                name=metadata["name"],
                node=annotations[ASSIGNED_NODE],
                containers=sum(1 for devices in containers if devices),
                devices=sum(len(devices) for devices in containers),
                bind_time=int(bind_time) if bind_time.isdigit() else None,
                pod_patch=pod_completion_patch(pod),
            )
        )
    return sorted(plans, key=lambda p: (p.bind_time or 0, p.namespace, p.name))


def load_desired_nodes(text: str) -> dict[str, dict[str, dict[str, str]]]:
    """``NODES_FILE``: node name -> ``labels``, ``annotations``, ``capacity`` (string maps)."""
    data = json.loads(text)
    if not isinstance(data, dict) or not data:
        raise ValueError(
            "the nodes file must map node names to their labels, annotations, capacity"
        )
    desired: dict[str, dict[str, dict[str, str]]] = {}
    for node, state in data.items():
        if not isinstance(state, dict):
            raise ValueError(f"node {node}: expected an object")
        desired[str(node)] = {
            key: {str(k): str(v) for k, v in (state.get(key) or {}).items()}
            for key in ("labels", "annotations", "capacity")
        }
    return desired


def node_metadata_patch(
    node: Mapping[str, Any], desired: Mapping[str, Mapping[str, str]]
) -> dict[str, Any] | None:
    """A merge patch adding the desired labels and annotations the node lacks (a Node that was
    deleted and registered again has none); a key that holds another value is left alone, since
    someone (a newer declaration) changed it. None when nothing is missing."""
    metadata = node.get("metadata") or {}
    patch: dict[str, dict[str, str]] = {}
    for key in ("labels", "annotations"):
        present = metadata.get(key) or {}
        missing = {k: v for k, v in (desired.get(key) or {}).items() if k not in present}
        if missing:
            patch[key] = missing
    return {"metadata": patch} if patch else None


def _is_zero(quantity: Any) -> bool:
    return quantity is None or str(quantity).strip() in ("", "0")


def node_status_patch(
    node: Mapping[str, Any], capacity: Mapping[str, str]
) -> dict[str, Any] | None:
    """A status merge patch putting back each desired extended resource whose capacity or
    allocatable is missing or zero (what the kubelet leaves after a restart without a
    device-plugin checkpoint). None when the node has them."""
    status = node.get("status") or {}
    have_capacity = status.get("capacity") or {}
    have_allocatable = status.get("allocatable") or {}
    wanted = {
        resource: value
        for resource, value in capacity.items()
        if _is_zero(have_capacity.get(resource)) or _is_zero(have_allocatable.get(resource))
    }
    if not wanted:
        return None
    return {"status": {"capacity": dict(wanted), "allocatable": dict(wanted)}}


def completion_message(completion: Completion, lock: str, now: float) -> str:
    """The log line for one completion (no secrets: names, counts and timings only)."""
    waited = (
        "" if completion.bind_time is None else f" {now - completion.bind_time:.1f}s after bind,"
    )
    return (
        f"completed {completion.namespace}/{completion.name} on {completion.node}:{waited} "
        f"{completion.devices} device(s) in {completion.containers} container(s), "
        f"bind-phase={PHASE_SUCCESS}, node lock {lock}"
    )


# ------------------------------------------------------------------------- API (stdlib only)


class ApiError(Exception):
    def __init__(self, status: int, reason: str) -> None:
        super().__init__(f"{status} {reason}")
        self.status = status


class InClusterApi:
    """The tenant API through the pod's service account (token re-read: it is rotated)."""

    def __init__(self, sa_dir: str = SERVICE_ACCOUNT_DIR, timeout: float = 10.0) -> None:
        host = os.environ["KUBERNETES_SERVICE_HOST"]
        port = os.environ.get("KUBERNETES_SERVICE_PORT", "443")
        if ":" in host:
            host = f"[{host}]"
        self.base = f"https://{host}:{port}"
        self.token_path = os.path.join(sa_dir, "token")
        self.context = ssl.create_default_context(cafile=os.path.join(sa_dir, "ca.crt"))
        self.timeout = timeout

    def _request(
        self, method: str, path: str, body: bytes | None = None, content_type: str | None = None
    ) -> Any:
        with open(self.token_path, encoding="utf-8") as handle:
            token = handle.read().strip()
        headers = {"Authorization": f"Bearer {token}", "Accept": "application/json"}
        if content_type:
            headers["Content-Type"] = content_type
        request = urllib.request.Request(
            self.base + path, data=body, method=method, headers=headers
        )
        try:
            with urllib.request.urlopen(
                request, context=self.context, timeout=self.timeout
            ) as response:
                return json.loads(response.read() or b"{}")
        except urllib.error.HTTPError as exc:
            raise ApiError(exc.code, exc.reason) from None

    def get(self, path: str, params: Mapping[str, str] | None = None) -> Any:
        query = f"?{urllib.parse.urlencode(params)}" if params else ""
        return self._request("GET", path + query)

    def json_patch(self, path: str, operations: list[dict[str, Any]]) -> Any:
        return self._request("PATCH", path, json.dumps(operations).encode(), JSON_PATCH)

    def merge_patch(self, path: str, body: Mapping[str, Any]) -> Any:
        query = urllib.parse.urlencode({"fieldManager": FIELD_MANAGER})
        return self._request("PATCH", f"{path}?{query}", json.dumps(body).encode(), MERGE_PATCH)


# Conflicts and failed ``test`` ops: someone else changed the object; look again next round.
_LOST_RACE = (404, 409, 422)


def complete(api: InClusterApi, completion: Completion) -> None:
    """Finish one allocation: the pod first (as the real plugin does), then the node lock."""
    ns, name = urllib.parse.quote(completion.namespace), urllib.parse.quote(completion.name)
    try:
        api.json_patch(f"/api/v1/namespaces/{ns}/pods/{name}", completion.pod_patch)
    except ApiError as exc:
        if exc.status in _LOST_RACE:
            LOG.info(
                "pod %s/%s changed meanwhile (%s); retrying next round",
                completion.namespace,
                completion.name,
                exc,
            )
            return
        raise
    node_path = f"/api/v1/nodes/{urllib.parse.quote(completion.node)}"
    unlock = node_unlock_patch(api.get(node_path), completion.namespace, completion.name)
    lock = "not held by this pod (left alone)"
    if unlock is not None:
        try:
            api.json_patch(node_path, unlock)
            lock = "released"
        except ApiError as exc:
            if exc.status not in _LOST_RACE:
                raise
            lock = f"changed meanwhile ({exc}), left alone"
    LOG.info("%s", completion_message(completion, lock, time.time()))


def reassert(api: InClusterApi, name: str, desired: Mapping[str, Mapping[str, str]]) -> bool:
    """Put back what the node lacks of its declared GPU identity; False when it is not
    registered (yet)."""
    path = f"/api/v1/nodes/{urllib.parse.quote(name)}"
    try:
        node = api.get(path)
    except ApiError as exc:
        if exc.status == 404:
            return False
        raise
    metadata = node_metadata_patch(node, desired)
    if metadata is not None:
        api.merge_patch(path, metadata)
        keys = sorted(k for part in metadata["metadata"].values() for k in part)
        LOG.info("node %s: put back %s", name, ", ".join(keys))
    status = node_status_patch(node, desired.get("capacity") or {})
    if status is not None:
        api.merge_patch(f"{path}/status", status)
        LOG.info("node %s: put back capacity %s", name, status["status"]["capacity"])
    return True


def run_once(api: InClusterApi, desired: Mapping[str, Mapping[str, Mapping[str, str]]]) -> int:
    """One polling round over the pool's nodes; returns how many pods were completed."""
    nodes = set(desired)
    done = 0
    for node in sorted(nodes):
        if not reassert(api, node, desired[node]):
            continue
        pods = api.get("/api/v1/pods", {"fieldSelector": f"spec.nodeName={node}"})
        for completion in plan_completions(pods.get("items") or [], nodes):
            complete(api, completion)
            done += 1
    return done


def main() -> int:
    logging.basicConfig(
        level=logging.INFO, stream=sys.stdout, format="%(asctime)s %(levelname)s %(message)s"
    )
    with open(os.environ["NODES_FILE"], encoding="utf-8") as handle:
        desired = load_desired_nodes(handle.read())
    interval = float(os.environ.get("POLL_SECONDS", "1"))
    api = InClusterApi()
    LOG.info("watching nodes %s every %ss", ", ".join(sorted(desired)), interval)
    while True:
        try:
            run_once(api, desired)
        except Exception as exc:  # keep polling: the API may be briefly unreachable
            LOG.warning("round failed: %s", exc)
        time.sleep(interval)


if __name__ == "__main__":
    sys.exit(main())
