"""The objects the acceptance suite creates inside tenants (pure builders).

Pods run a tiny pinned image that sleeps; no CUDA runs. GPU requests are written the HAMi way:
limits only (Kubernetes copies limits to requests for extended resources), integer card count,
plain-integer MiB (``20000``, never ``20Gi``, which makes HAMi ignore the request).
"""

from __future__ import annotations

import secrets
import string
from typing import Any

from tests.acceptance.hami_evidence import NVIDIA_GPU, NVIDIA_GPUCORES, NVIDIA_GPUMEM

IMAGE = "busybox:1.37.0"
COMMAND = ["sleep", "3600"]
RUN_LABEL = "gpu-platform.io/acceptance-run"
MANAGED_BY = {"app.kubernetes.io/managed-by": "gpu-platform-acceptance"}
HOSTNAME_LABEL = "kubernetes.io/hostname"
# A node selector no node carries: the pod is admitted (webhook runs) but never scheduled, so it
# never takes a share of a card or HAMi's node lock.
UNSCHEDULABLE_SELECTOR = {"gpu-platform.io/acceptance-never-schedule": "true"}

_ALPHABET = string.ascii_lowercase + string.digits


def random_suffix(length: int = 6) -> str:
    """Lower-case letters and digits, starting with a letter (DNS-1123 friendly)."""
    first = secrets.choice(string.ascii_lowercase)
    return first + "".join(secrets.choice(_ALPHABET) for _ in range(length - 1))


def namespace_name(prefix: str = "acceptance") -> str:
    """A fresh namespace name such as ``acceptance-q7m2xa`` (drawn per tenant, so names differ
    between tenants and can serve as markers)."""
    return f"{prefix}-{random_suffix()}"


def namespace_body(name: str, run_id: str) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": name, "labels": {RUN_LABEL: run_id, **MANAGED_BY}},
    }


def gpu_limits(
    gpus: int, memory_mib: int | None = None, cores: int | None = None
) -> dict[str, str]:
    """HAMi resource limits: cards, MiB per card, % of a card."""
    limits = {NVIDIA_GPU: str(gpus)}
    if memory_mib is not None:
        limits[NVIDIA_GPUMEM] = str(memory_mib)
    if cores is not None:
        limits[NVIDIA_GPUCORES] = str(cores)
    return limits


def pod_body(
    name: str,
    run_id: str,
    *,
    limits: dict[str, str] | None = None,
    node_selector: dict[str, str] | None = None,
    labels: dict[str, str] | None = None,
    image: str = IMAGE,
    command: list[str] | None = None,
) -> dict[str, Any]:
    """A sleeping busybox pod, optionally asking HAMi for GPU shares (or another image and
    command, for probes)."""
    container: dict[str, Any] = {
        "name": "main",
        "image": image,
        "command": list(command or COMMAND),
        "securityContext": {"allowPrivilegeEscalation": False},
    }
    if limits:
        container["resources"] = {"limits": dict(limits)}
    spec: dict[str, Any] = {
        "containers": [container],
        "restartPolicy": "Never",
        "terminationGracePeriodSeconds": 1,
        "automountServiceAccountToken": False,
    }
    if node_selector:
        spec["nodeSelector"] = dict(node_selector)
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": {
            "name": name,
            "labels": {**(labels or {}), RUN_LABEL: run_id, **MANAGED_BY},
        },
        "spec": spec,
    }


# TC-16: the NetworkPolicy that cuts the Konnectivity agents off (removed after the test).
CUT_POLICY = "acceptance-konnectivity-down"


def deny_egress_policy(run_id: str, namespace: str, selector: str) -> dict[str, Any]:
    """All egress of the konnectivity-agent pods denied (an Egress policy with no rules)."""
    key, value = selector.split("=", 1)
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": {
            "name": CUT_POLICY,
            "namespace": namespace,
            "labels": {RUN_LABEL: run_id, **MANAGED_BY},
        },
        "spec": {"podSelector": {"matchLabels": {key: value}}, "policyTypes": ["Egress"]},
    }
