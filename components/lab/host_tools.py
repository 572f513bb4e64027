"""The command-line tools the lab and the make targets need, and how to install each one.

Standard library and ``components.versions`` only: ``scripts/preflight.py`` imports it with the
system Python before any virtualenv exists (``make preview`` on a fresh clone), and the lab host
preflight (``components.lab.preflight``) prints the same hints, so the two never disagree.
"""

from __future__ import annotations

import platform
import re
from pathlib import Path
from types import MappingProxyType

from components.versions import KIND_RELEASE, PINNED

REQUIREMENTS = Path(__file__).resolve().parents[2] / "requirements.txt"
# The clusters' Kubernetes release, whose kubectl the hint installs (kubectl's skew policy: within
# one minor of the API server).
CLUSTER_KUBERNETES = PINNED.kind_node_image.split(":", 1)[1].split("@", 1)[0]


def pinned_sdk_version(requirements: Path = REQUIREMENTS) -> str:
    """The Python SDK release ``requirements.txt`` pins (``pulumi==X.Y.Z``): the CLI and the SDK are
    released together from pulumi/pulumi, and CI installs the CLI of this release
    (.github/workflows/*.yml ``PULUMI_VERSION``)."""
    match = re.search(r"^pulumi==(\d+\.\d+\.\d+)\s*$", requirements.read_text(), re.M)
    if match is None:
        raise ValueError(f"{requirements} pins no pulumi==X.Y.Z")
    return match.group(1)


def release_arch(machine: str | None = None) -> str:
    """The release binaries' architecture for this host (``platform.machine()``): kind's quick
    start picks ``kind-linux-amd64`` or ``-arm64`` from ``uname -m`` the same way
    (kubernetes-sigs/kind v0.31.0 site/content/docs/user/quick-start.md:41-43: x86_64 ->
    ``kind-linux-amd64``, aarch64 -> ``kind-linux-arm64``); dl.k8s.io names kubectl's the same."""
    name = (machine if machine is not None else platform.machine()).lower()
    return "arm64" if name in ("aarch64", "arm64") else "amd64"


def install_hints(
    sdk_version: str | None = None, machine: str | None = None
) -> MappingProxyType[str, str]:
    """Per tool, the official install command (or page) to print when it is missing, for this
    host's architecture (``machine``: ``platform.machine()`` when not given)."""
    sdk = sdk_version or pinned_sdk_version()
    arch = release_arch(machine)
    # get.pulumi.com takes --version (https://www.pulumi.com/docs/install/, "Linux"); kind's and
    # kubectl's release binaries are the ones the lab-e2e workflow installs.
    return MappingProxyType(
        {
            "docker": "install Docker Engine (https://docs.docker.com/engine/install/)",
            "kind": (
                "install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation): "
                f"`curl -fsSLo kind https://kind.sigs.k8s.io/dl/{KIND_RELEASE}/kind-linux-{arch} "
                "&& sudo install -m 0755 kind /usr/local/bin/kind`"
            ),
            "kubectl": (
                "install kubectl (https://kubernetes.io/docs/tasks/tools/): `curl -fsSLO "
                f"https://dl.k8s.io/release/{CLUSTER_KUBERNETES}/bin/linux/{arch}/kubectl "
                "&& sudo install -m 0755 kubectl /usr/local/bin/kubectl`"
            ),
            "pulumi": (
                "install the Pulumi CLI (https://www.pulumi.com/docs/install/): "
                f"`curl -fsSL https://get.pulumi.com | sh -s -- --version {sdk}`"
            ),
        }
    )


def missing_tool(tool: str, hints: MappingProxyType[str, str] | None = None) -> str:
    """The one line for a tool that is not on PATH."""
    hint = (hints or install_hints()).get(tool, f"install {tool}")
    return f"`{tool}` is not on PATH: {hint}, and make sure it is on PATH."
