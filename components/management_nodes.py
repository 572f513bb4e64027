"""The management cluster's nodes, read live before anything is registered (in preview too),
for the capacity check (``components.capacity``): ``scripts/management/nodes-allocatable.sh``
runs ``kubectl get nodes -o json`` with the management kubeconfig (prod, as the adopted-namespace
check does, ``components.prod.cluster_checks``) or the kind cluster's (lab, once it exists).

``GPU_PLATFORM_MANAGEMENT_NODES`` names a file holding such JSON instead (a recorded cluster:
offline checks, ``make capacity NODES=...``, the program tests); ``GPU_PLATFORM_SKIP_PREFLIGHT=1``
without it skips the read (the mock harness sets it), and the check with it.
"""

from __future__ import annotations

import json
import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from pulumi import RunError

from components.scripts import read_script

NODES_ENV = "GPU_PLATFORM_MANAGEMENT_NODES"
SKIP_ENV = "GPU_PLATFORM_SKIP_PREFLIGHT"
READ_TIMEOUT_SECONDS = 120


def _run_script(environment: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["/bin/bash", "-c", read_script("management", "nodes-allocatable.sh")],
        env={**os.environ, **environment},
        capture_output=True,
        text=True,
        timeout=READ_TIMEOUT_SECONDS,
        check=False,
    )


def recorded_nodes(environ: Mapping[str, str]) -> dict[str, Any] | None:
    """The nodes of the file ``GPU_PLATFORM_MANAGEMENT_NODES`` names, or None when unset."""
    path = environ.get(NODES_ENV, "").strip()
    if not path:
        return None
    try:
        nodes = json.loads(Path(path).read_text())
    except (OSError, ValueError) as exc:
        raise RunError(
            f"{NODES_ENV}={path}: not a readable `kubectl get nodes -o json` file ({exc})"
        ) from None
    if not isinstance(nodes, dict) or not isinstance(nodes.get("items"), list):
        raise RunError(f"{NODES_ENV}={path}: not a `kubectl get nodes -o json` list (no items)")
    return nodes


def read_nodes(
    environment: Mapping[str, str],
    environ: Mapping[str, str] | None = None,
    run: Callable[[Mapping[str, str]], subprocess.CompletedProcess[str]] = _run_script,
) -> dict[str, Any] | None:
    """The management cluster's nodes (``kubectl get nodes -o json``): from the recorded file,
    else live with ``environment`` (``KUBECONFIG_CONTENT`` or ``KIND_CLUSTER_NAME``); None when
    skipped or when the lab's cluster does not exist yet."""
    env = os.environ if environ is None else environ
    recorded = recorded_nodes(env)
    if recorded is not None:
        return recorded
    if env.get(SKIP_ENV, "").strip() == "1":
        return None
    try:
        result = run(environment)
    except subprocess.TimeoutExpired:
        raise RunError(
            f"the management cluster did not list its nodes within {READ_TIMEOUT_SECONDS}s for "
            "the capacity check: check its kubeconfig and that this machine reaches its API server"
        ) from None
    if result.returncode != 0:
        reason = (result.stderr.strip().splitlines() or ["no message"])[-1]
        raise RunError(
            f"cannot list the management cluster's nodes for the capacity check: {reason}"
        )
    if not result.stdout.strip():
        return None
    try:
        nodes = json.loads(result.stdout)
    except ValueError:
        nodes = None
    if not isinstance(nodes, dict) or not isinstance(nodes.get("items"), list):
        raise RunError(
            "the management cluster's node list for the capacity check is not `kubectl get "
            "nodes -o json` output"
        )
    return nodes
