"""Fakes for GpuTenant: the kubeconfig Secrets a ready control plane leaves in the management
cluster, and the namespace a tenant adopts (``managementNamespace.existing``), which exists
before the program runs.

Update mode answers the read like a live cluster would: base64 ``data`` holding a placeholder
kubeconfig whose server names the tenant (Kamaji's ``<tcp>-admin-kubeconfig`` with ``admin.conf``
and ``super-admin.conf``, which both stacks read; a read of the Cluster API
``<cluster>-kubeconfig`` key ``value`` is answered too). Preview answers
nothing, so the kubeconfig stays unknown as in ``pulumi preview`` before the control plane
exists.
"""

from __future__ import annotations

import base64
from typing import Any

from pulumi.runtime.mocks import MockResourceArgs

SECRET_TYPE = "kubernetes:core/v1:Secret"
NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
FAKE_SERVER = "https://{tenant}.tenant.invalid:6443"


def placeholder_kubeconfig(tenant: str, user: str = "admin") -> str:
    """A syntactically valid kubeconfig that reaches nothing."""
    server = FAKE_SERVER.format(tenant=tenant)
    return (
        "apiVersion: v1\n"
        "kind: Config\n"
        "clusters:\n"
        f"- name: {tenant}\n"
        "  cluster:\n"
        f"    server: {server}\n"
        "    certificate-authority-data: cGxhY2Vob2xkZXI=\n"
        "contexts:\n"
        f"- name: {tenant}-admin\n"
        "  context:\n"
        f"    cluster: {tenant}\n"
        "    user: admin\n"
        f"current-context: {tenant}-admin\n"
        "users:\n"
        "- name: admin\n"
        "  user:\n"
        f"    token: placeholder-{user}\n"
    )


def _encoded(text: str) -> str:
    return base64.b64encode(text.encode()).decode()


def fake_outputs(args: MockResourceArgs, preview: bool) -> dict[str, Any] | None:
    if args.typ == NAMESPACE_TYPE and args.resource_id:
        # An adopted namespace (managementNamespace.existing) exists before the program runs,
        # so its read answers in preview too.
        name = str(args.resource_id)
        return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
    if args.typ != SECRET_TYPE or not args.resource_id:
        return None
    namespace, _, secret = str(args.resource_id).partition("/")
    if args.name.endswith("-admin-kubeconfig") and secret.endswith("-admin-kubeconfig"):
        key = "admin.conf"
    elif args.name.endswith("-capi-kubeconfig") and secret.endswith("-kubeconfig"):
        key = "value"
    else:
        return None
    if preview:
        return {}
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret, "namespace": namespace},
        "type": "Opaque",
        "data": {
            key: _encoded(placeholder_kubeconfig(namespace)),
            # Kamaji's admin Secret also holds super-admin.conf (system:masters).
            **(
                {"super-admin.conf": _encoded(placeholder_kubeconfig(namespace, "super-admin"))}
                if key == "admin.conf"
                else {}
            ),
        },
    }
