"""Kubernetes objects that run the mock allocation completer inside a lab tenant (pure builder).

One completer per pool, restricted to that pool's nodes by name: pools are the unit the
GpuWorkerPool component owns, so every pool brings (and removes) its own completer and no pool
depends on another. Per pool: a Namespace (excluded from HAMi's webhook, lab-only), a
ServiceAccount, a ClusterRole that may list and patch pods and get and patch the pool's own nodes
and their status (nothing else: ``resourceNames`` pins the nodes), its binding, a ConfigMap
holding the script and the nodes' declared GPU identity (labels, register annotation,
``nvidia.com/gpu`` capacity), and a one-replica Deployment of the pinned stdlib-only Python image
running it as non-root with a read-only root filesystem and small requests/limits.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from components.labels import (
    HAMI_WEBHOOK_IGNORE_LABEL,
    LAB_ONLY_LABEL,
    POOL_LABEL,
    TENANT_LABEL,
)

SCRIPT_PATH = Path(__file__).with_name("mock_allocation_completer.py")
SCRIPT_KEY = "mock_allocation_completer.py"
NODES_KEY = "nodes.json"
MOUNT_DIR = "/opt/completer"
APP_LABEL = "app.kubernetes.io/name"
APP_NAME = "gpu-mock-allocation-completer"
# The image's "nobody".
NON_ROOT_ID = 65534


def completer_script() -> str:
    """The completer's source, shipped verbatim in the ConfigMap."""
    return SCRIPT_PATH.read_text()


def _label_safe(prefix: str, pool: str) -> str:
    name = f"{prefix}-{pool}"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(pool.encode()).hexdigest()[:8]
    return f"{name[:54].rstrip('-')}-{digest}"


def completer_namespace(pool: str) -> str:
    return _label_safe("gpu-mock-completer", pool)


def node_state(
    labels: Mapping[str, str], annotations: Mapping[str, str], capacity: Mapping[str, str]
) -> dict[str, dict[str, str]]:
    """One node's declared GPU identity, as the completer keeps it in place."""
    return {
        "labels": dict(labels),
        "annotations": dict(annotations),
        "capacity": dict(capacity),
    }


def completer_manifests(
    tenant: str,
    pool: str,
    script: str,
    image: str,
    nodes: Mapping[str, Mapping[str, Mapping[str, str]]],
    poll_seconds: float = 1.0,
) -> dict[str, dict[str, Any]]:
    """Every object of one pool's completer, keyed by role, each a complete manifest; ``nodes``
    maps the pool's node names to their ``node_state``."""
    if not nodes:
        raise ValueError(f"pool {pool}: the completer needs the pool's nodes")
    namespace = completer_namespace(pool)
    name = _label_safe("gpu-mock-completer", pool)
    labels = {
        APP_LABEL: APP_NAME,
        TENANT_LABEL: tenant,
        POOL_LABEL: pool,
        LAB_ONLY_LABEL: "true",
    }
    selector = {APP_LABEL: APP_NAME, POOL_LABEL: pool}
    nodes_json = json.dumps({name: nodes[name] for name in sorted(nodes)}, sort_keys=True)
    script_sha = hashlib.sha256(script.encode()).hexdigest()
    nodes_sha = hashlib.sha256(nodes_json.encode()).hexdigest()
    node_names = sorted(nodes)
    return {
        "namespace": {
            "apiVersion": "v1",
            "kind": "Namespace",
            "metadata": {
                "name": namespace,
                "labels": {**labels, HAMI_WEBHOOK_IGNORE_LABEL: "ignore"},
            },
        },
        "serviceAccount": {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
        },
        "clusterRole": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": {"name": name, "labels": labels},
            "rules": [
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch"]},
                {
                    "apiGroups": [""],
                    "resources": ["nodes"],
                    "resourceNames": node_names,
                    "verbs": ["get", "patch"],
                },
                {
                    "apiGroups": [""],
                    "resources": ["nodes/status"],
                    "resourceNames": node_names,
                    "verbs": ["patch"],
                },
            ],
        },
        "clusterRoleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": {"name": name, "labels": labels},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": name,
            },
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": namespace}],
        },
        "configMap": {
            "apiVersion": "v1",
            "kind": "ConfigMap",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "data": {SCRIPT_KEY: script, NODES_KEY: nodes_json},
        },
        "deployment": {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": {"name": name, "namespace": namespace, "labels": labels},
            "spec": {
                "replicas": 1,
                "strategy": {"type": "Recreate"},
                "selector": {"matchLabels": selector},
                "template": {
                    "metadata": {
                        "labels": labels,
                        # A new script or node list rolls the pod (the ConfigMap alone would
                        # not: both are read once, at start).
                        "annotations": {
                            "gpu-platform.io/script-sha256": script_sha,
                            "gpu-platform.io/nodes-sha256": nodes_sha,
                        },
                    },
                    "spec": {
                        "serviceAccountName": name,
                        "automountServiceAccountToken": True,
                        "enableServiceLinks": False,
                        "securityContext": {
                            "runAsNonRoot": True,
                            "runAsUser": NON_ROOT_ID,
                            "runAsGroup": NON_ROOT_ID,
                            "seccompProfile": {"type": "RuntimeDefault"},
                        },
                        "containers": [
                            {
                                "name": "completer",
                                "image": image,
                                "imagePullPolicy": "IfNotPresent",
                                "command": ["python3", "-u", f"{MOUNT_DIR}/{SCRIPT_KEY}"],
                                "env": [
                                    {"name": "NODES_FILE", "value": f"{MOUNT_DIR}/{NODES_KEY}"},
                                    {"name": "POLL_SECONDS", "value": f"{poll_seconds:g}"},
                                    {"name": "PYTHONDONTWRITEBYTECODE", "value": "1"},
                                ],
                                "resources": {
                                    "requests": {"cpu": "10m", "memory": "32Mi"},
                                    "limits": {"cpu": "200m", "memory": "64Mi"},
                                },
                                "securityContext": {
                                    "allowPrivilegeEscalation": False,
                                    "readOnlyRootFilesystem": True,
                                    "runAsNonRoot": True,
                                    "capabilities": {"drop": ["ALL"]},
                                },
                                "volumeMounts": [
                                    {"name": "script", "mountPath": MOUNT_DIR, "readOnly": True}
                                ],
                            }
                        ],
                        "volumes": [
                            {"name": "script", "configMap": {"name": name, "defaultMode": 0o444}}
                        ],
                    },
                },
            },
        },
    }
