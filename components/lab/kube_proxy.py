"""The lab tenants' own kube-proxy: kubeadm's addon, set up never to write a conntrack sysctl.

Why not Kamaji's ``kubeProxy`` addon: it deploys kubeadm's default ``KubeProxyConfiguration``
(clastix/kamaji 26.8.2-edge ``internal/kubeadm/addon.go`` ``AddKubeProxy`` calls kubeadm's
``EnsureProxyAddon``, with no conntrack override), whose ``conntrack.maxPerCore`` (32768) makes
kube-proxy write ``net.netfilter.nf_conntrack_max`` at start. Inside a kindest/node container that
sysctl is read-only (a non-init network namespace, kernel >= 5.13), so kube-proxy exits unless the
host's value happens to equal max(131072, 32768 x CPUs), and with it go ClusterIP Services, CoreDNS,
HAMi's certificate hook and the webhook path. Kamaji's addon has no knob for it and rewrites its
ConfigMap on every reconcile (``internal/resources/addons/kube_proxy.go`` ``mutateConfigMap``:
``cm.Data = k.configMap.Data``), so the lab drops the addon and runs this one instead.

The objects are kubeadm's (``cmd/kubeadm/app/phases/addons/proxy``: ``manifests.go`` and
``proxy.go``), as Kamaji renders them: ServiceAccount, ClusterRoleBinding ``kubeadm:node-proxier``
to ``system:node-proxier``, the Role/RoleBinding that let joining nodes read the ConfigMap, the
``kube-proxy`` ConfigMap and DaemonSet (label ``k8s-app: kube-proxy``, hostNetwork, privileged,
tolerating everything). Two differences:

* the kubeconfig's server is the tenant's LoadBalancer address (what Kamaji's kubeadm config calls
  ``controlPlaneEndpoint``), never a ClusterIP: kube-proxy is what makes ClusterIPs work;
* ``conntrack`` is set the way kind sets it for its own nodes (kind v0.31.0
  ``pkg/cluster/internal/kubeadm/config.go``: ``maxPerCore: 0``, "Skip setting sysctl value
  net.netfilter.nf_conntrack_max"), plus the two TCP timeouts at ``0s`` that kind adds for rootless
  hosts: kube-proxy's ``setupConntrack`` writes each conntrack sysctl only when its setting is
  positive (``cmd/kube-proxy/app/server_linux.go``), so this configuration writes none on any host.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

import yaml

NAMESPACE = "kube-system"
NAME = "kube-proxy"
APP_LABEL = ("k8s-app", "kube-proxy")
CONFIG_KEY = "config.conf"
KUBECONFIG_KEY = "kubeconfig.conf"
MOUNT_DIR = "/var/lib/kube-proxy"
IMAGE_REPOSITORY = "registry.k8s.io/kube-proxy"
# kubeadm's names (cmd/kubeadm/app/constants and phases/addons/proxy).
CLUSTER_ROLE = "system:node-proxier"
CLUSTER_ROLE_BINDING = "kubeadm:node-proxier"
BOOTSTRAP_GROUP = "system:bootstrappers:kubeadm:default-node-token"
SERVICE_ACCOUNT_DIR = "/var/run/secrets/kubernetes.io/serviceaccount"

# Every conntrack setting whose positive value makes kube-proxy write a sysctl, turned off.
CONNTRACK: Mapping[str, Any] = MappingProxyType(
    {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"}
)


def image(kubernetes_version: str) -> str:
    """kube-proxy at the tenant's version (the one version that drives the tenant)."""
    return f"{IMAGE_REPOSITORY}:{kubernetes_version}"


def configuration(cluster_cidr: str) -> dict[str, Any]:
    """The ``KubeProxyConfiguration``: iptables mode (kind's default), the tenant's pod CIDR as
    cluster CIDR (kubeadm passes ``networking.podSubnet``), no conntrack sysctl."""
    return {
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": f"{MOUNT_DIR}/{KUBECONFIG_KEY}"},
        "clusterCIDR": cluster_cidr,
        "mode": "iptables",
        "iptables": {"minSyncPeriod": "1s"},
        "conntrack": dict(CONNTRACK),
    }


def kubeconfig(server: str) -> str:
    """kubeadm's kube-proxy kubeconfig: the service account's token and CA, ``server`` the tenant
    API server's LoadBalancer URL."""
    if not server.startswith("https://"):
        raise ValueError(f"kube-proxy's API server must be an https:// URL, got {server!r}")
    config = {
        "apiVersion": "v1",
        "kind": "Config",
        "clusters": [
            {
                "name": "default",
                "cluster": {
                    "certificate-authority": f"{SERVICE_ACCOUNT_DIR}/ca.crt",
                    "server": server,
                },
            }
        ],
        "contexts": [
            {
                "name": "default",
                "context": {"cluster": "default", "namespace": "default", "user": "default"},
            }
        ],
        "current-context": "default",
        "users": [{"name": "default", "user": {"tokenFile": f"{SERVICE_ACCOUNT_DIR}/token"}}],
    }
    return yaml.safe_dump(config, sort_keys=False)


def config_map_data(cluster_cidr: str, server: str) -> dict[str, str]:
    """The ``kube-proxy`` ConfigMap's data, keyed as kubeadm keys it."""
    return {
        KUBECONFIG_KEY: kubeconfig(server),
        CONFIG_KEY: yaml.safe_dump(configuration(cluster_cidr), sort_keys=False),
    }


def manifests(kubernetes_version: str, labels: Mapping[str, str]) -> dict[str, dict[str, Any]]:
    """Every object but the ConfigMap's data (which needs the address known at deploy time), each
    a complete manifest keyed by role."""
    app = {APP_LABEL[0]: APP_LABEL[1]}
    meta_labels = {**labels, **app}

    def meta(name: str, namespaced: bool = True) -> dict[str, Any]:
        metadata: dict[str, Any] = {"name": name, "labels": dict(meta_labels)}
        if namespaced:
            metadata["namespace"] = NAMESPACE
        return metadata

    return {
        "serviceAccount": {"apiVersion": "v1", "kind": "ServiceAccount", "metadata": meta(NAME)},
        "clusterRoleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": meta(CLUSTER_ROLE_BINDING, namespaced=False),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": CLUSTER_ROLE,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": NAMESPACE}],
        },
        # kubeadm join reads this ConfigMap with the bootstrap token.
        "role": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta(NAME),
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": [NAME],
                    "verbs": ["get"],
                }
            ],
        },
        "roleBinding": {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta(NAME),
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": NAME},
            "subjects": [
                {"apiGroup": "rbac.authorization.k8s.io", "kind": "Group", "name": BOOTSTRAP_GROUP}
            ],
        },
        "configMap": {"apiVersion": "v1", "kind": "ConfigMap", "metadata": meta(NAME)},
        "daemonSet": {
            "apiVersion": "apps/v1",
            "kind": "DaemonSet",
            "metadata": meta(NAME),
            "spec": {
                "selector": {"matchLabels": dict(app)},
                "updateStrategy": {"type": "RollingUpdate"},
                "template": {
                    "metadata": {"labels": dict(meta_labels)},
                    "spec": {
                        "priorityClassName": "system-node-critical",
                        "containers": [
                            {
                                "name": NAME,
                                "image": image(kubernetes_version),
                                "imagePullPolicy": "IfNotPresent",
                                "command": [
                                    "/usr/local/bin/kube-proxy",
                                    f"--config={MOUNT_DIR}/{CONFIG_KEY}",
                                    "--hostname-override=$(NODE_NAME)",
                                ],
                                "securityContext": {"privileged": True},
                                "volumeMounts": [
                                    {"mountPath": MOUNT_DIR, "name": NAME},
                                    {
                                        "mountPath": "/run/xtables.lock",
                                        "name": "xtables-lock",
                                        "readOnly": False,
                                    },
                                    {
                                        "mountPath": "/lib/modules",
                                        "name": "lib-modules",
                                        "readOnly": True,
                                    },
                                ],
                                "env": [
                                    {
                                        "name": "NODE_NAME",
                                        "valueFrom": {"fieldRef": {"fieldPath": "spec.nodeName"}},
                                    }
                                ],
                            }
                        ],
                        "hostNetwork": True,
                        "serviceAccountName": NAME,
                        "volumes": [
                            {"name": NAME, "configMap": {"name": NAME}},
                            {
                                "name": "xtables-lock",
                                "hostPath": {"path": "/run/xtables.lock", "type": "FileOrCreate"},
                            },
                            {"name": "lib-modules", "hostPath": {"path": "/lib/modules"}},
                        ],
                        "tolerations": [{"operator": "Exists"}],
                        "nodeSelector": {"kubernetes.io/os": "linux"},
                    },
                },
            },
        },
    }
