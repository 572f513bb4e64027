"""Fakes for GpuTenant: the kubeconfig Secrets a ready control plane leaves in the management
cluster, and the namespace a tenant adopts (``managementNamespace.existing``), which exists
before the program runs.

Update mode answers the read like a live cluster would: base64 ``data`` holding a placeholder
kubeconfig whose server names the tenant (Kamaji's ``<tcp>-admin-kubeconfig`` with ``admin.conf``
and ``super-admin.conf``, which both stacks read; a read of the Cluster API
``<cluster>-kubeconfig`` key ``value`` is answered too). Preview answers
nothing, so the kubeconfig stays unknown as in ``pulumi preview`` before the control plane
exists.

A lab TenantControlPlane is answered as Kamaji and MetalLB leave it: its address is
``networkProfile.address`` when pinned, else the lowest free address of the MetalLB pool its
Service names (metallb/metallb@v0.16.1 internal/allocator/allocator.go:709-726 walks the pool's
ranges upwards and skips held addresses), in ``status.controlPlaneEndpoint``
(clastix/kamaji@26.8.2-edge internal/resources/k8s_service_resource.go:56-60) and as the server of
its kubeconfigs (internal/resources/kubeadm_config.go:99, kubeconfig.go:216). The pool is the one
the program registered (``IPAddressPool``, which every control plane depends on, so it is seen
first). Unpinned control planes take the free addresses in the order of the stack's tenants
list, whatever order the registrations arrive in (they race), so one stack always evaluates to
the same addresses; MetalLB's order is whatever order it converges the Services in, so tests must
not read stickiness out of these addresses.
"""

from __future__ import annotations

import base64
import ipaddress
from typing import Any

from pulumi.runtime.mocks import MockResourceArgs

SECRET_TYPE = "kubernetes:core/v1:Secret"
NAMESPACE_TYPE = "kubernetes:core/v1:Namespace"
POOL_TYPE = "kubernetes:metallb.io/v1beta1:IPAddressPool"
TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
KCP_TYPE = "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane"
FAKE_SERVER = "https://{tenant}.tenant.invalid:6443"
POOL_ANNOTATION = "metallb.io/address-pool"

# This evaluation's MetalLB: pool name -> its addresses, ascending; namespace/name -> address.
_POOLS: dict[str, list[str]] = {}
_ASSIGNED: dict[str, str] = {}


def _pool_addresses(ranges: list[str]) -> list[str]:
    addresses: list[int] = []
    for entry in ranges:
        first, _, last = entry.partition("-")
        start = int(ipaddress.IPv4Address(first))
        addresses += range(start, int(ipaddress.IPv4Address(last or first)) + 1)
    return [str(ipaddress.IPv4Address(value)) for value in sorted(addresses)]


def _control_plane_address(args: MockResourceArgs) -> str | None:
    """What Kamaji puts into ``status.controlPlaneEndpoint`` (without the port)."""
    spec = args.inputs.get("spec") or {}
    pinned = (spec.get("networkProfile") or {}).get("address")
    if pinned:
        return str(pinned)
    service = (spec.get("controlPlane") or {}).get("service") or {}
    annotations = (service.get("additionalMetadata") or {}).get("annotations") or {}
    pool = _POOLS.get(annotations.get(POOL_ANNOTATION, ""), [])
    name = str((args.inputs.get("metadata") or {}).get("name"))
    tenants = _configured_tenants()
    if name in tenants:
        pins = {address for address in tenants.values() if address}
        free = [address for address in pool if address not in pins]
        unpinned = [tenant for tenant, address in tenants.items() if not address]
        index = unpinned.index(name)
        return free[index] if index < len(free) else None
    held = set(_ASSIGNED.values())
    free = [a for a in pool if a not in held]
    return free[0] if free else None


def _configured_tenants() -> dict[str, str | None]:
    """Tenant name -> pinned ``controlPlane.address`` (or None), in the stack's order."""
    import pulumi

    platform = pulumi.Config("gpu-platform").get_object("platform") or {}
    tenants = platform.get("tenants") if isinstance(platform, dict) else None
    if not isinstance(tenants, list):
        return {}
    return {
        str(tenant.get("name")): (tenant.get("controlPlane") or {}).get("address")
        for tenant in tenants
        if isinstance(tenant, dict)
    }


def placeholder_kubeconfig(tenant: str, user: str = "admin", server: str | None = None) -> str:
    """A syntactically valid kubeconfig that reaches nothing."""
    server = server or FAKE_SERVER.format(tenant=tenant)
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
    if args.typ == POOL_TYPE and not preview:
        metadata = args.inputs.get("metadata") or {}
        _POOLS[str(metadata.get("name"))] = _pool_addresses(
            list((args.inputs.get("spec") or {}).get("addresses") or [])
        )
        return None
    if args.typ == KCP_TYPE and not preview:
        # A ready KamajiControlPlane runs its spec's version (provider v0.20.0
        # controllers/kamajicontrolplane_controller.go:301 copies its TCP's running version).
        version = (args.inputs.get("spec") or {}).get("version")
        return {"status": {"version": version}} if version else None
    if args.typ == TCP_TYPE:
        metadata = args.inputs.get("metadata") or {}
        address = None if preview else _control_plane_address(args)
        if address is None:
            return None
        _ASSIGNED[f"{metadata.get('namespace')}/{metadata.get('name')}"] = address
        spec = args.inputs.get("spec") or {}
        port = (spec.get("networkProfile") or {}).get("port", 6443)
        # Ready: Kamaji has set the running version to the spec's
        # (26.8.2-edge internal/resources/k8s_deployment_resource.go:104-109).
        version = (spec.get("kubernetes") or {}).get("version")
        return {
            "status": {
                "controlPlaneEndpoint": f"{address}:{int(port)}",
                "kubernetesResources": {"version": {"version": version, "status": "Ready"}},
            }
        }
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
    control_plane = f"{namespace}/{secret.removesuffix('-admin-kubeconfig')}"
    assigned = _ASSIGNED.get(control_plane) if key == "admin.conf" else None
    server = f"https://{assigned}:6443" if assigned else None
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {"name": secret, "namespace": namespace},
        "type": "Opaque",
        "data": {
            key: _encoded(placeholder_kubeconfig(namespace, server=server)),
            # Kamaji's admin Secret also holds super-admin.conf (system:masters).
            **(
                {
                    "super-admin.conf": _encoded(
                        placeholder_kubeconfig(namespace, "super-admin", server)
                    )
                }
                if key == "admin.conf"
                else {}
            ),
        },
    }
