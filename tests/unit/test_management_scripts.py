"""kind-create.sh with stub `kind` and `docker`: a cluster is reused only when it is the one the
config describes (node image, pod and service subnets), because the tenants' NetworkPolicies
exclude the configured pod subnet and would not hold for a cluster built with another."""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path

import pytest

from components.lab.management_values import kind_config
from components.scripts import SCRIPTS_ROOT

IMAGE = "kindest/node:v1.35.0@sha256:abc"
CONFIG = kind_config("gpu-lab", IMAGE, "10.240.0.0/16", "10.96.0.0/12")
# What kind v0.31.0 writes to /kind/kubeadm.conf on the node (pkg/cluster/internal/kubeadm/
# config.go: `podSubnet: "{{ .PodSubnet }}"`), abridged.
KUBEADM_CONF = """apiVersion: kubeadm.k8s.io/v1beta4
kind: ClusterConfiguration
networking:
  podSubnet: "{pod}"
  serviceSubnet: "{service}"
"""

KIND = """#!/usr/bin/env bash
echo "kind $*" >>"$STUB_DIR/calls"
case "$1 $2" in
  "get clusters") [[ -f "$STUB_DIR/exists" ]] && echo gpu-lab; exit 0 ;;
  "get kubeconfig") echo "apiVersion: v1 # kubeconfig"; exit 0 ;;
  "create cluster") cat >"$STUB_DIR/created-with"; exit 0 ;;
esac
exit 0
"""
DOCKER = """#!/usr/bin/env bash
echo "docker $*" >>"$STUB_DIR/calls"
case "$1" in
  inspect) echo "${STUB_IMAGE}" ;;
  exec) [[ -f "$STUB_DIR/kubeadm.conf" ]] || exit 1; cat "$STUB_DIR/kubeadm.conf" ;;
esac
"""


class Stubs:
    def __init__(self, root: Path) -> None:
        self.dir = root
        (root / "bin").mkdir()
        for name, body in {"kind": KIND, "docker": DOCKER}.items():
            path = root / "bin" / name
            path.write_text(body)
            path.chmod(0o755)

    def existing(self, pod: str | None = "10.240.0.0/16", service: str = "10.96.0.0/12") -> None:
        (self.dir / "exists").touch()
        if pod is not None:
            (self.dir / "kubeadm.conf").write_text(KUBEADM_CONF.format(pod=pod, service=service))

    def run(self, image: str = IMAGE) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/bash", "-c", (SCRIPTS_ROOT / "management" / "kind-create.sh").read_text()],
            input=CONFIG,
            env={
                "PATH": f"{self.dir / 'bin'}:{os.environ['PATH']}",
                "STUB_DIR": str(self.dir),
                "STUB_IMAGE": image,
                "KIND_CLUSTER_NAME": "gpu-lab",
                "KIND_NODE_IMAGE": IMAGE,
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def created(self) -> bool:
        return (self.dir / "created-with").exists()


@pytest.fixture
def stubs(tmp_path: Path) -> Stubs:
    if shutil.which("bash") is None or shutil.which("sed") is None:
        pytest.skip("bash and sed are needed to run the management scripts")
    return Stubs(tmp_path)


def test_a_new_cluster_is_created_from_the_config(stubs: Stubs) -> None:
    result = stubs.run()
    assert result.returncode == 0, result.stderr
    assert (stubs.dir / "created-with").read_text().strip() == CONFIG.strip()
    assert result.stdout.startswith("apiVersion: v1")


def test_the_same_cluster_is_reused(stubs: Stubs) -> None:
    stubs.existing()
    result = stubs.run()
    assert result.returncode == 0, result.stderr
    assert not stubs.created()
    assert "reusing it" in result.stderr
    assert result.stdout.startswith("apiVersion: v1")


@pytest.mark.parametrize(
    ("pod", "service", "key", "have"),
    [
        ("10.244.0.0/16", "10.96.0.0/12", "podSubnet", "10.244.0.0/16"),
        ("10.240.0.0/16", "10.97.0.0/16", "serviceSubnet", "10.97.0.0/16"),
    ],
)
def test_a_cluster_with_other_subnets_is_refused(
    stubs: Stubs, pod: str, service: str, key: str, have: str
) -> None:
    stubs.existing(pod, service)
    result = stubs.run()
    assert result.returncode != 0
    assert not stubs.created()
    assert result.stdout == ""
    assert f"{key} {have}" in result.stderr
    assert f"management.kind.{key}" in result.stderr
    assert "kind delete cluster --name gpu-lab" in result.stderr


def test_a_cluster_with_another_node_image_is_refused(stubs: Stubs) -> None:
    stubs.existing()
    result = stubs.run(image="kindest/node:v1.34.0")
    assert result.returncode != 0
    assert "node image kindest/node:v1.34.0" in result.stderr


def test_unreadable_subnets_are_reported_not_fatal(stubs: Stubs) -> None:
    stubs.existing(pod=None)
    result = stubs.run()
    assert result.returncode == 0, result.stderr
    assert "subnets are unchecked" in result.stderr
