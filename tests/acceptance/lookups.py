"""Where the suite finds the platform's running parts inside a tenant: the one place to adjust.

Every name, namespace, label and image the live tests use to *locate* a component is here, with
the upstream (or project) source it comes from. Lookups are by what a component is (a label
selector, a container image), never by a generated pod name, and tolerate renames where the
platform may change how it deploys a part (the mock device plugin, kube-proxy). Pure values and
predicates; nothing here talks to a cluster.
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

SYSTEM_NAMESPACE = "kube-system"

# HAMi chart 2.10.0, installed by the platform as release "hami" of chart "hami" in namespace
# hami-system (components/tenant_values.py HAMI_NAMESPACE, components/gpu_tenant.py). With release
# name == chart name the chart's fullname is "hami" (charts/hami/templates/_helpers.tpl
# "hami-vgpu.fullname"), so the scheduler objects are "hami-scheduler".
HAMI_NAMESPACE = "hami-system"
HAMI_SCHEDULER_SERVICE = "hami-scheduler"  # _helpers.tpl "hami-vgpu.scheduler"
# charts/hami/templates/scheduler/service.yaml: port "monitor" (31993) -> targetPort 9395, where
# cmd/scheduler/main.go:72 serves /metrics (--metrics-bind-address ":9395").
HAMI_METRICS_PORT_NAME = "monitor"
HAMI_METRICS_PATH = "metrics"
# charts/hami/templates/scheduler/deployment.yaml pod label.
HAMI_SCHEDULER_SELECTOR = "app.kubernetes.io/component=hami-scheduler"
# charts/hami/templates/device-plugin/daemonsetnvidia.yaml: HAMi's real device plugin (prod) is a
# DaemonSet in HAMi's namespace whose pods carry this label (and run the vGPU monitor beside it).
HAMI_DEVICE_PLUGIN_SELECTOR = "app.kubernetes.io/component=hami-device-plugin"
# The plugin's own container in that pod (HAMi v2.10.0
# charts/hami/templates/device-plugin/daemonsetnvidia.yaml:71 "name: device-plugin"; the pod also
# runs vgpu-monitor).
HAMI_PLUGIN_CONTAINER = "device-plugin"
# charts/hami/templates/scheduler/webhook.yaml objectSelector: pods labelled so are never sent to
# HAMi's webhook (the suite's probes that must not depend on it carry this label).
HAMI_WEBHOOK_IGNORE = {"hami.io/webhook": "ignore"}

# HAMi's mock device plugin (mock-device-plugin v1.0.1): a DaemonSet, deployed by HAMi's chart
# (templates/device-plugin/daemonsetmock.yaml: DaemonSet "<fullname>-mock-device-plugin", pod
# label app.kubernetes.io/component=hami-mock-device-plugin, image
# docker.io/projecthami/mock-device-plugin) or by the lab itself. Found in any namespace by its
# image or that label, whatever its name.
MOCK_PLUGIN_IMAGE = "projecthami/mock-device-plugin"
MOCK_PLUGIN_COMPONENT = ("app.kubernetes.io/component", "hami-mock-device-plugin")

# kube-proxy: a DaemonSet in kube-system whose pods carry k8s-app=kube-proxy (kubeadm's addon, which
# Kamaji's kubeProxy addon deploys, and the lab's own DaemonSet use the same label).
KUBE_PROXY_SELECTOR = "k8s-app=kube-proxy"
# CoreDNS: kubeadm's addon (Kamaji internal/kubeadm/addon.go), pods k8s-app=kube-dns, Service
# kube-dns, both in kube-system.
COREDNS_SELECTOR = "k8s-app=kube-dns"
# Kamaji 26.8.2-edge internal/resources/konnectivity/agent.go: the agent's pods carry
# k8s-app=konnectivity-agent in kube-system (constants.go AgentName / AgentNamespace).
KONNECTIVITY_SELECTOR = "k8s-app=konnectivity-agent"

# Kamaji (clastix/kamaji 26.8.2-edge), in the management cluster, for TC-21: the chart's controller
# Deployment labels its pods with "kamaji.selectorLabels" (charts/kamaji/templates/controller.yaml
# :19-20, _helpers.tpl:48-52; release "kamaji" in kamaji-system, components/management_values.py),
# and each TenantControlPlane's Deployment selects its pods by the control plane's name
# (internal/builders/controlplane/deployment.go:1076-1081; constants/labels.go:10).
KAMAJI_NAMESPACE = "kamaji-system"
KAMAJI_CONTROLLER_LABELS: Mapping[str, str] = {
    "app.kubernetes.io/name": "kamaji",
    "app.kubernetes.io/instance": "kamaji",
    "app.kubernetes.io/component": "controller-manager",
}
CONTROL_PLANE_POD_LABEL = "kamaji.clastix.io/name"


def selector(labels: Mapping[str, str]) -> str:
    """A label selector matching every label of ``labels``."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


# The lab's mock allocation completer, one per pool (components/lab/completer/manifests.py):
# Deployment and namespace "gpu-mock-completer-<pool>", pods labelled with the app name and the
# pool.
COMPLETER_APP = ("app.kubernetes.io/name", "gpu-mock-allocation-completer")
POOL_LABEL = "gpu-platform.io/pool"  # components/labels.py POOL_LABEL


def completer_selector(pool: str) -> str:
    """The label selector of one pool's completer pods (found in any namespace)."""
    return f"{COMPLETER_APP[0]}={COMPLETER_APP[1]},{POOL_LABEL}={pool}"


def completer_name(pool: str) -> str:
    """The completer's Deployment and namespace name, for messages (short pool names)."""
    return f"gpu-mock-completer-{pool}"


def selector_of(match_labels: Mapping[str, str]) -> str:
    """``{"a": "1", "b": "2"}`` -> ``"a=1,b=2"`` (a DaemonSet's spec.selector.matchLabels)."""
    return ",".join(f"{key}={value}" for key, value in sorted(match_labels.items()))


def is_mock_device_plugin(daemonset: Mapping[str, Any]) -> bool:
    """A DaemonSet (as the API returns it, a plain dict) that runs HAMi's mock device plugin."""
    template = (daemonset.get("spec") or {}).get("template") or {}
    labels = (template.get("metadata") or {}).get("labels") or {}
    if labels.get(MOCK_PLUGIN_COMPONENT[0]) == MOCK_PLUGIN_COMPONENT[1]:
        return True
    containers = (template.get("spec") or {}).get("containers") or []
    return any(MOCK_PLUGIN_IMAGE in str(c.get("image", "")) for c in containers)


# A ``gpuSharing: dra`` tenant's driver in the lab: kubernetes-sigs/dra-example-driver v0.4.0,
# whose driver name defaults to "<deviceProfile>.example.com" with deviceProfile "gpu"
# (deployments/helm/dra-example-driver/templates/_helpers.tpl:129, values.yaml:17-21); the
# platform names its DeviceClass the same (components/lab/dra_driver.py DEVICE_CLASS).
DRA_DRIVER = "gpu.example.com"
DRA_DEVICE_CLASS = DRA_DRIVER
