"""Fakes for GpuWorkerPool: what the lab's commands and docker print after a successful
``pulumi up``. In preview nothing is computed yet, so nothing is returned (outputs stay unknown).

* ``<pool>-<i>-node-join`` (command): stdout is the node name (join-node.sh prints only that);
  the component keeps it secret (additional_secret_outputs).
* ``<pool>-<i>-gpu-capacity`` (command): stdout is the capacity it set.
* ``<pool>-worker-image`` (docker RemoteImage): the pulled image's id and digest.
"""

from __future__ import annotations

import hashlib
from typing import Any

from pulumi.runtime import rpc
from pulumi.runtime.mocks import MockResourceArgs

COMMAND = "command:local:Command"
REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage"


def _plain(value: Any) -> Any:
    """The value inside a secret wrapper (mock inputs keep the engine's wrapping)."""
    while isinstance(value, dict) and value.get(rpc._special_sig_key) == rpc._special_secret_sig:
        value = value.get("value")
    return value


def _environment(args: MockResourceArgs) -> dict[str, Any]:
    environment = _plain(args.inputs.get("environment")) or {}
    if not isinstance(environment, dict):
        return {}
    return {key: _plain(value) for key, value in environment.items()}


def fake_outputs(args: MockResourceArgs, preview: bool) -> dict[str, Any] | None:
    if args.typ == COMMAND and args.name.endswith("-node-join"):
        if preview:
            return {}
        return {"stdout": f"{_environment(args).get('NODE_NAME', '')}\n", "stderr": ""}
    if args.typ == COMMAND and args.name.endswith("-gpu-capacity"):
        if preview:
            return {}
        return {"stdout": f"{_environment(args).get('GPU_CAPACITY', '')}\n", "stderr": ""}
    if args.typ == REMOTE_IMAGE and args.name.endswith("-worker-image"):
        if preview:
            return {}
        image = str(args.inputs.get("name", ""))
        digest = hashlib.sha256(image.encode()).hexdigest()
        return {
            "imageId": f"sha256:{digest}",
            "repoDigest": f"{image.rsplit(':', 1)[0]}@sha256:{digest}",
        }
    return None
