"""Fakes for the metrics stack: a ``kubernetes.io/service-account-token`` Secret comes back from
an update with ``data`` filled (``token``, ``ca.crt``, ``namespace``), as the tenant's token
controller fills it and pulumi-kubernetes waits for (provider/pkg/await/awaiters.go:431-462 at
v4.32.0). In a preview of its creation the data is unknown."""

from __future__ import annotations

import base64
from typing import Any

from pulumi.runtime.mocks import MockResourceArgs

SECRET_TYPE = "kubernetes:core/v1:Secret"
TOKEN_TYPE = "kubernetes.io/service-account-token"


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def fake_outputs(args: MockResourceArgs, preview: bool) -> dict[str, Any] | None:
    if args.typ != SECRET_TYPE or args.inputs.get("type") != TOKEN_TYPE or preview:
        return None
    namespace = str((args.inputs.get("metadata") or {}).get("namespace", ""))
    return {
        "data": {
            "token": _encoded(f"placeholder-token-{args.name}"),
            "ca.crt": _encoded("-----BEGIN CERTIFICATE-----placeholder"),
            "namespace": _encoded(namespace),
        }
    }
