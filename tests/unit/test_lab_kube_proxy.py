"""The lab's own kube-proxy: kubeadm's objects, a kubeconfig on the LoadBalancer address, and a
configuration with which kube-proxy writes no conntrack sysctl on any host (the sysctls are
read-only inside a kindest/node container and kube-proxy exits on the failed write)."""

from __future__ import annotations

import pytest
import yaml

from components.lab import kube_proxy
from tests.support.kube_proxy_model import sysctl_writes

SERVER = "https://172.18.255.200:6443"
LABELS = {"gpu-platform.io/tenant": "tenant-a"}


@pytest.mark.parametrize("cpus", [1, 4, 8, 12, 64, 256])
def test_the_configuration_writes_no_conntrack_sysctl_on_any_host(cpus: int) -> None:
    assert sysctl_writes(kube_proxy.configuration("10.10.0.0/16")["conntrack"], cpus) == []


def test_kubeadms_default_configuration_writes_nf_conntrack_max() -> None:
    """What Kamaji's addon runs (no conntrack block): the write that fails in a node container.
    Also shows the model can tell the two apart."""
    assert "net.netfilter.nf_conntrack_max" in sysctl_writes({}, 8)
    # kind's own setting alone still sets the TCP timeouts (fine unless the host is rootless).
    assert sysctl_writes({"maxPerCore": 0}, 8) == [
        "net.netfilter.nf_conntrack_tcp_timeout_established",
        "net.netfilter.nf_conntrack_tcp_timeout_close_wait",
    ]


def test_the_config_map_holds_kubeadms_two_files() -> None:
    data = kube_proxy.config_map_data("10.10.0.0/16", SERVER)
    assert set(data) == {"config.conf", "kubeconfig.conf"}
    config = yaml.safe_load(data["config.conf"])
    assert config["kind"] == "KubeProxyConfiguration"
    assert config["apiVersion"] == "kubeproxy.config.k8s.io/v1alpha1"
    assert config["clusterCIDR"] == "10.10.0.0/16"
    assert config["clientConnection"]["kubeconfig"] == "/var/lib/kube-proxy/kubeconfig.conf"
    kubeconfig = yaml.safe_load(data["kubeconfig.conf"])
    (cluster,) = kubeconfig["clusters"]
    assert cluster["cluster"]["server"] == SERVER
    assert cluster["cluster"]["certificate-authority"].endswith("/serviceaccount/ca.crt")
    (user,) = kubeconfig["users"]
    assert user["user"] == {"tokenFile": "/var/run/secrets/kubernetes.io/serviceaccount/token"}


def test_the_kubeconfig_needs_an_https_server() -> None:
    with pytest.raises(ValueError, match="https"):
        kube_proxy.kubeconfig("172.18.255.200:6443")


def test_the_daemon_set_is_kubeadms() -> None:
    objects = kube_proxy.manifests("v1.35.0", LABELS)
    daemon_set = objects["daemonSet"]
    assert daemon_set["metadata"]["namespace"] == "kube-system"
    assert daemon_set["metadata"]["name"] == "kube-proxy"
    # The acceptance suite's health check finds the pods by this label.
    assert daemon_set["spec"]["template"]["metadata"]["labels"]["k8s-app"] == "kube-proxy"
    assert daemon_set["spec"]["selector"] == {"matchLabels": {"k8s-app": "kube-proxy"}}
    pod = daemon_set["spec"]["template"]["spec"]
    assert pod["hostNetwork"] is True
    assert pod["tolerations"] == [{"operator": "Exists"}]
    (container,) = pod["containers"]
    assert container["image"] == "registry.k8s.io/kube-proxy:v1.35.0"
    assert "--config=/var/lib/kube-proxy/config.conf" in container["command"]
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["kube-proxy"]["configMap"]["name"] == objects["configMap"]["metadata"]["name"]
    assert pod["serviceAccountName"] == objects["serviceAccount"]["metadata"]["name"]


def test_rbac_is_kubeadms() -> None:
    objects = kube_proxy.manifests("v1.35.0", LABELS)
    binding = objects["clusterRoleBinding"]
    assert binding["metadata"]["name"] == "kubeadm:node-proxier"
    assert binding["roleRef"]["name"] == "system:node-proxier"
    assert binding["subjects"] == [
        {"kind": "ServiceAccount", "name": "kube-proxy", "namespace": "kube-system"}
    ]
    assert objects["role"]["rules"][0]["resourceNames"] == ["kube-proxy"]
    assert objects["roleBinding"]["subjects"][0]["name"] == (
        "system:bootstrappers:kubeadm:default-node-token"
    )
