"""HAMi's mock device plugin for the lab, with a device config it can decode.

Why not the HAMi chart's ``mockDevicePlugin.enabled``: its DaemonSet
(``charts/hami/templates/device-plugin/daemonsetmock.yaml`` at HAMi v2.10.0) mounts the
scheduler's ``hami-scheduler-device`` ConfigMap, whose ``vnpus`` has been a mapping since HAMi 2.9
(``templates/scheduler/device-configmap.yaml``: ``vnpus: {hamiVnpuCore, configs: [...]}``).
``projecthami/mock-device-plugin`` 1.0.1 declares ``VNPUs []ascend.VNPUConfig`` and decodes the
file with yaml.v2 (``internal/pkg/config/config.go``), so it exits through ``klog.Fatalf`` at
start; upstream fixed it after 1.0.1 without a tag. The lab runs the same image with the chart's
DaemonSet shape, mounting its own ConfigMap that holds only the ``nvidia`` section.

What the mock 1.0.1 advertises (``internal/pkg/api/device/nvidia/device.go`` ``GetResource``,
re-read every 30 s by ``device.Register``), per node, from the node's
``hami.io/node-nvidia-register`` annotation and only while the node's
``status.capacity["nvidia.com/gpu"]`` is above 0 (``device.CheckHealthy``):

* ``nvidia.com/gpumem``: the cards' ``devmem`` summed (MiB; divided by ``memoryFactor`` above 1);
* ``nvidia.com/gpucores``: the cards' ``devcore`` summed;
* ``nvidia.com/gpumem-percentage``: 100 per card.

It never advertises ``nvidia.com/gpu`` (the lab patches that capacity to cards x slots) and its
``Allocate`` returns empty responses (the lab's completer finishes HAMi's bind). The resource names
come from this config; they are the HAMi chart's own (``resourceName``, ``resourceMem``,
``resourceMemPercentage``, ``resourceCores``), which the scheduler's config uses too.
"""

from __future__ import annotations

import hashlib
from collections.abc import Mapping, Sequence
from typing import Any

import yaml

NAME = "hami-mock-device-plugin"
CONFIG_NAME = "hami-mock-device-config"
CONFIG_KEY = "device-config.yaml"
REGISTRY = "docker.io"
REPOSITORY = "projecthami/mock-device-plugin"
COMPONENT_LABEL = ("app.kubernetes.io/component", "hami-mock-device-plugin")
PLUGIN_DIR = "/var/lib/kubelet/device-plugins"

# HAMi chart 2.10.0 values.yaml: resourceName, resourceMem, resourceMemPercentage, resourceCores.
COUNT_RESOURCE = "nvidia.com/gpu"
MEMORY_RESOURCE = "nvidia.com/gpumem"
MEMORY_PERCENTAGE_RESOURCE = "nvidia.com/gpumem-percentage"
CORES_RESOURCE = "nvidia.com/gpucores"
# The scheduler's memoryFactor (device-configmap.yaml renders 1): the mock must count gpumem in
# the same unit, or the kubelet would refuse pods HAMi placed.
MEMORY_FACTOR = 1
# mock 1.0.1 lists one fake device per advertised unit (one per MiB for gpumem) in a single
# ListAndWatch message (internal/pkg/mock/server.go:78-96, IDs "mock-devices-id-%d"); the kubelet
# dials plugins without a message-size option, so gRPC's default 4 MiB receive limit applies
# (kubelet pkg/kubelet/cm/devicemanager/plugin/v1beta1/client.go, dial). A larger list breaks the
# stream, the device manager marks the resource unhealthy with 0 devices, and the kubelet refuses
# every pod HAMi places there. The per-node memory bound keeps the message under the limit
# (``list_and_watch_bytes``; the limit is crossed near 123,000 devices).
GRPC_DEFAULT_MAX_RECEIVE_BYTES = 4 * 1024 * 1024
MAX_NODE_MEMORY_MIB = 120_000


def image(tag: str) -> str:
    return f"{REGISTRY}/{REPOSITORY}:{tag}"


def device_config() -> dict[str, Any]:
    """The mock's device config: the ``nvidia`` fields mock 1.0.1 reads, nothing else (the other
    vendors' sections are what broke it, and the lab simulates NVIDIA cards only)."""
    return {
        "nvidia": {
            "resourceCountName": COUNT_RESOURCE,
            "resourceMemoryName": MEMORY_RESOURCE,
            "resourceMemoryPercentageName": MEMORY_PERCENTAGE_RESOURCE,
            "resourceCoreName": CORES_RESOURCE,
            "memoryFactor": MEMORY_FACTOR,
        }
    }


def device_config_text() -> str:
    return yaml.safe_dump(device_config(), sort_keys=False)


def _varint_size(value: int) -> int:
    size = 1
    while value >= 0x80:
        value >>= 7
        size += 1
    return size


def list_and_watch_bytes(devices: int) -> int:
    """The protobuf size of mock 1.0.1's ListAndWatchResponse for ``devices`` devices (field 1
    ``ID`` "mock-devices-id-<i>", field 2 ``Health`` "Healthy"; k8s.io/kubelet
    pkg/apis/deviceplugin/v1beta1/api.proto ``Device``, each a repeated field 1 of the response)."""
    total = 0
    health = 1 + _varint_size(len("Healthy")) + len("Healthy")
    for index in range(devices):
        name = len(f"mock-devices-id-{index}")
        device = 1 + _varint_size(name) + name + health
        total += 1 + _varint_size(device) + device
    return total


def advertised(register: Sequence[Mapping[str, Any]], gpu_capacity: int) -> dict[str, int]:
    """What mock 1.0.1 advertises for a node whose register annotation holds ``register`` (HAMi
    ``DeviceInfo`` objects) and whose ``nvidia.com/gpu`` capacity is ``gpu_capacity``."""
    resources = {MEMORY_RESOURCE: 0, CORES_RESOURCE: 0, MEMORY_PERCENTAGE_RESOURCE: 0}
    if gpu_capacity <= 0 or not register:
        return resources
    for card in register:
        resources[MEMORY_RESOURCE] += int(card["devmem"])
        resources[CORES_RESOURCE] += int(card["devcore"])
        resources[MEMORY_PERCENTAGE_RESOURCE] += 100
    if MEMORY_FACTOR > 1:
        resources[MEMORY_RESOURCE] //= MEMORY_FACTOR
    return resources


def manifests(namespace: str, tag: str, labels: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The mock's objects in ``namespace``, keyed by role: ServiceAccount, a ClusterRole that only
    reads nodes (all the mock does with the API: ``device.Register`` gets its own Node), its
    binding, the config and the DaemonSet (the chart's ``daemonsetmock.yaml`` shape)."""
    component = {COMPONENT_LABEL[0]: COMPONENT_LABEL[1]}
    meta_labels = {**labels, **component}
    config = device_config_text()

    def meta(name: str, namespaced: bool = True) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "labels": dict(meta_labels)}
        if namespaced:
            metadata["namespace"] = namespace
        return metadata

    return {
        "serviceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME)},
        "clusterRole": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta(NAME, namespaced=False),
            "rules": [{"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]}],
        },
        "clusterRoleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(NAME, namespaced=False),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": NAME,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
        "configMap": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": meta(CONFIG_NAME),
            "data": {CONFIG_KEY: config},
        },
        "daemonSet": {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta(NAME),
            "spec": {
                "selector": {"matchLabels": dict(component)},
                "template": {
                    "metadata": {
                        "labels": dict(meta_labels),
                        # A changed config rolls the pods (they read it once, at start).
                        "annotations": {
                            "gpu-platform.io/device-config-sha256": hashlib.sha256(
                                config.encode()
                            ).hexdigest()
                        },
                    },
                    "spec": {
                        "serviceAccountName": NAME,
                        "tolerations": [{"key": "CriticalAddonsOnly", "operator": "Exists"}],
                        "containers": [
                            {
                                "name": "hami-mock-dp-cntr",
                                "image": image(tag),
                                "imagePullPolicy": "IfNotPresent",
                                "env": [
                                    {
                                        "name": "NODE_NAME",
                                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                    }
                                ],
                                "command": [
                                    "./k8s-device-plugin",
                                    "-v=5",
                                    f"--device-config-file=/{CONFIG_KEY}",
                                ],
                                "volumeMounts": [
                                    {"name": "dp", "mountPath": PLUGIN_DIR},
                                    {"name": "sys", "mountPath": "/sys"},
                                    {
                                        "name": "device-config",
                                        "mountPath": f"/{CONFIG_KEY}",
                                        "subPath": CONFIG_KEY,
                                    },
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "dp", "hostPath": {"path": PLUGIN_DIR}},
                            {"name": "sys", "hostPath": {"path": "/sys"}},
                            {"name": "device-config", "configMap": {"name": CONFIG_NAME}},
                        ],
                    },
                },
            },
        },
    }
