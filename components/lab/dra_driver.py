"""The lab's DRA driver: kubernetes-sigs/dra-example-driver, a fake driver publishing simulated
cards as ResourceSlices, in place of HAMi's mock device plugin for a ``gpuSharing: dra`` tenant.

Pure facts and builders (no Pulumi). Traced at kubernetes-sigs/dra-example-driver v0.4.0
(chart 0.4.0, appVersion v0.4.0):

* Its ``gpu`` profile publishes ``numDevices`` cards per node, every one alike:
  ``memory`` capacity 80Gi and ``compute`` 100, attributes ``index``, ``uuid``, ``model``
  ("LATEST-GPU-MODEL") and ``driverVersion`` (internal/profiles/gpu/gpu.go:72-73, 81-94,
  172-181); ``numDevices`` is one chart value for every node
  (deployments/helm/dra-example-driver/templates/kubeletplugin.yaml:87-88, values.yaml
  ``kubeletPlugin.numDevices``). It therefore publishes a declared inventory exactly when every
  card is 81,920 MiB and 100 compute units (the catalog's A100-80GB) and every node of the
  tenant carries the same number of cards.
* Its driver name, the DeviceClass it installs and the attribute domain are
  ``<deviceProfile>.example.com``: ``gpu.example.com`` (templates/_helpers.tpl:128-130,
  templates/deviceclass.yaml).
* With ``gpuAllowMultipleAllocations`` it marks every card ``allowMultipleAllocations`` with a
  request policy of 1Gi steps for memory and 1 for compute (gpu.go:208-260); that needs
  ``DRAConsumableCapacity``, which the platform does not enable, so the lab leaves it off.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

from components import dra
from components.catalog import CardModel

DRIVER_RELEASE = "v0.4.0"
# The image its chart runs: values.yaml image.repository, tag the chart's appVersion (v0.4.0).
IMAGE = f"registry.k8s.io/dra-example-driver/dra-example-driver:{DRIVER_RELEASE}"
NAME = "dra-example-driver"
# kube-system, as the lab's kube-proxy: the plugin runs privileged, which the tenant's own
# admission rules (rule node-device-access) and the pack refuse outside the system namespaces
# HAMi's webhook skips (components.tenant_values.webhook_excluded_namespaces).
NAMESPACE = "kube-system"
# The kubelet's directories the plugin registers in and serves from (values.yaml
# kubeletPlugin.kubeletRegistrarDirectoryPath, kubeletPluginsDirectoryPath) and the CDI specs'.
_REGISTRAR_DIR = "/var/lib/kubelet/plugins_registry"
_PLUGINS_DIR = "/var/lib/kubelet/plugins"
_CDI_DIR = "/var/run/cdi"
_HEALTHCHECK_PORT = 51515
_METRICS_PORT = 8080
DRIVER_NAME = "gpu.example.com"
DEVICE_CLASS = DRIVER_NAME
CARD_MEMORY_MIB = 80 * 1024
CARD_COMPUTE = 100


def publishable(cards: Sequence[tuple[CardModel, int]]) -> bool:
    """Whether the driver can publish these cards of one node as they are declared."""
    return all(m.memory_mib == CARD_MEMORY_MIB and m.core_units == CARD_COMPUTE for m, _ in cards)


def cards_per_node(pools: Sequence[Sequence[tuple[CardModel, int]]]) -> set[int]:
    """The card counts per node across a tenant's pools (the driver takes one)."""
    return {sum(count for _, count in cards) for cards in pools}


def manifests(num_devices: int, labels: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """The driver's objects, keyed by role, in the shape of its chart's templates at v0.4.0
    (deployments/helm/dra-example-driver/templates: serviceaccount.yaml, clusterrole.yaml,
    clusterrolebinding.yaml, kubeletplugin.yaml, deviceclass.yaml) with the chart's default
    values but ``numDevices`` (the tenant's cards per node): the kubelet plugin alone (no
    controller, no webhook: both off by default), ``gpuAllowMultipleAllocations`` false.

    Written here rather than installed from the chart: no archive of the chart is pinned in
    the project's charts directory yet, and the program installs no chart it cannot verify
    (components/chart_cache.py). The namespace is not ``default``, which the chart refuses
    (templates/validation.yml, ``allowDefaultNamespace: false``)."""
    if num_devices < 1:
        raise ValueError(f"num_devices must be at least 1, got {num_devices}")
    meta_labels = {**labels, "app.kubernetes.io/name": NAME}
    selector = {"app.kubernetes.io/name": NAME, "app.kubernetes.io/component": "kubeletplugin"}

    def meta(name: str, namespaced: bool = True) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "labels": dict(meta_labels)}
        if namespaced:
            metadata["namespace"] = NAMESPACE
        return metadata

    def env(name: str, value: object) -> dict[str, str]:
        return {
            "name": name,
            "value": str(value).lower() if isinstance(value, bool) else str(value),
        }

    def field(name: str, path: str) -> dict[str, Any]:
        return {"name": name, "valueFrom": {"fieldRef": {"fieldPath": path}}}

    role = f"{NAME}-role"
    return {
        "serviceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME)},
        "clusterRole": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": meta(role, namespaced=False),
            "rules": [
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceclaims"],
                    "verbs": ["get", "list", "watch"],
                },
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceclaims/status"],
                    "verbs": ["update"],
                },
                {"apiGroups": [""], "resources": ["nodes"], "verbs": ["get"]},
                {
                    "apiGroups": ["resource.k8s.io"],
                    "resources": ["resourceslices"],
                    "verbs": ["get", "list", "watch", "create", "update", "patch", "delete"],
                },
            ],
        },
        "clusterRoleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(f"{role}-binding", namespaced=False),
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": role,
            },
        },
        "daemonSet": {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta(f"{NAME}-kubeletplugin"),
            "spec": {
                "selector": {"matchLabels": dict(selector)},
                "updateStrategy": {
                    "type": "RollingUpdate",
                    "rollingUpdate": {"maxSurge": 1, "maxUnavailable": 0},
                },
                "template": {
                    "metadata": {"labels": {**meta_labels, **selector}},
                    "spec": {
                        "priorityClassName": "system-node-critical",
                        "serviceAccountName": NAME,
                        "containers": [
                            {
                                "name": "plugin",
                                "image": IMAGE,
                                "command": ["dra-example-kubeletplugin"],
                                "securityContext": {"privileged": True},
                                "livenessProbe": {
                                    "grpc": {"port": _HEALTHCHECK_PORT, "service": "liveness"},
                                    "failureThreshold": 3,
                                    "periodSeconds": 10,
                                },
                                "ports": [
                                    {
                                        "name": "metrics",
                                        "containerPort": _METRICS_PORT,
                                        "protocol": "TCP",
                                    }
                                ],
                                "env": [
                                    env("DRIVER_NAME", DRIVER_NAME),
                                    env("DEVICE_PROFILE", "gpu"),
                                    env("CDI_ROOT", _CDI_DIR),
                                    env("KUBELET_REGISTRAR_DIRECTORY_PATH", _REGISTRAR_DIR),
                                    env("KUBELET_PLUGINS_DIRECTORY_PATH", _PLUGINS_DIR),
                                    field("NODE_NAME", "spec.nodeName"),
                                    field("NAMESPACE", "metadata.namespace"),
                                    env("NUM_DEVICES", num_devices),
                                    env("GPU_DEVICE_STATUS", False),
                                    env("GPU_ALLOW_MULTIPLE_ALLOCATIONS", False),
                                    env("HEALTHCHECK_PORT", _HEALTHCHECK_PORT),
                                    env("METRICS_PORT", _METRICS_PORT),
                                    env("GPU_PARTITIONS", 0),
                                    env("CPU_NUMA_NODES", 8),
                                    env("CPUS_PER_NUMA_NODE", 4),
                                    field("POD_UID", "metadata.uid"),
                                    env("BINDING_CONDITIONS", False),
                                ],
                                "volumeMounts": [
                                    {"name": "plugins-registry", "mountPath": _REGISTRAR_DIR},
                                    {"name": "plugins", "mountPath": _PLUGINS_DIR},
                                    {"name": "cdi", "mountPath": _CDI_DIR},
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "plugins-registry", "hostPath": {"path": _REGISTRAR_DIR}},
                            {"name": "plugins", "hostPath": {"path": _PLUGINS_DIR}},
                            {"name": "cdi", "hostPath": {"path": _CDI_DIR}},
                        ],
                    },
                },
            },
        },
        "deviceClass": {
            **dra.device_class(DEVICE_CLASS, DRIVER_NAME),
            "metadata": meta(DEVICE_CLASS, namespaced=False),
        },
    }
