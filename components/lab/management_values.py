"""The lab's management cluster as plain data: the kind cluster config and identity, MetalLB's
Helm values, its address pool and L2 advertisement, and the parameters of its readiness gate.

Pure functions only: ``components.lab.management`` wires them to resources, the unit tests read
them directly and the contract tests check the MetalLB objects against the pinned CRDs.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence

import yaml

from components.management_values import METALLB_NAMESPACE, Values, api_object, gate_env

METALLB_RELEASE = "metallb"
METALLB_POOL_NAME = "gpu-platform-lab"
METALLB_API = "metallb.io/v1beta1"


# ------------------------------------------------------------------------------------ kind


def kind_config(cluster_name: str, node_image: str, pod_subnet: str, service_subnet: str) -> str:
    """The kind cluster config (``kind create cluster --config -``): one control-plane node on
    the pinned image, the configured pod and service subnets."""
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": cluster_name,
        "networking": {"podSubnet": pod_subnet, "serviceSubnet": service_subnet},
        "nodes": [{"role": "control-plane", "image": node_image}],
    }
    return yaml.safe_dump(config, sort_keys=False)


def kind_cluster_identifier(
    cluster_name: str, config: str, environment: Mapping[str, str] | None = None
) -> str:
    """The management Provider's ``cluster_identifier``: the same for as long as the kind cluster
    is the same one (a new kubeconfig alone updates the Provider in place), different whenever
    the kind cluster command is replaced, i.e. when its ``stdin`` (the kind config) or its
    ``environment`` (name, node image, ``KIND_EXPERIMENTAL_DOCKER_NETWORK``) changes.
    pulumi-kubernetes replaces a provider only when this changes
    (provider/pkg/provider/provider.go:486-500 at v4.32.0), and the engine replaces everything on
    a replaced provider (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go:2798-2850,
    2909-2913): a new, empty kind cluster must never keep the old identifier."""
    identity = json.dumps(
        {"config": config, "environment": dict(environment or {})}, sort_keys=True
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return f"kind-{cluster_name}-{digest}"


# ------------------------------------------------------------------------------- Helm values


def metallb_values() -> Values:
    """MetalLB in L2 mode only: the lab needs no BGP, so the bundled frr-k8s stays off."""
    return {"frrk8s": {"enabled": False}}


# ----------------------------------------------------------------------------- MetalLB objects


def ip_address_pool(addresses: Sequence[str]) -> Values:
    """The lab's pool of tenant control-plane addresses. ``autoAssign: false``: MetalLB gives its
    addresses only to Services that name it (``metallb.io/address-pool``, what every unpinned
    tenant's control plane does) or pin one of them (``metallb.io/loadBalancerIPs``), never to
    another LoadBalancer Service (metallb/metallb@v0.16.1 internal/allocator/allocator.go:383-390
    skips such pools; AllocateFromPool, :423-473, serves a named one regardless)."""
    return api_object(
        METALLB_API,
        "IPAddressPool",
        METALLB_POOL_NAME,
        METALLB_NAMESPACE,
        {"addresses": list(addresses), "autoAssign": False},
    )


def l2_advertisement() -> Values:
    """Announce the lab pool on the kind bridge (L2 / ARP)."""
    return api_object(
        METALLB_API,
        "L2Advertisement",
        METALLB_POOL_NAME,
        METALLB_NAMESPACE,
        {"ipAddressPools": [METALLB_POOL_NAME]},
    )


# ------------------------------------------------------------------------- readiness gate


def metallb_gate_env(pool: Values) -> dict[str, str]:
    """MetalLB serving: its CRDs established, its controller (which serves the webhook) rolled
    out, and the lab's pool accepted by a server-side dry run."""
    return gate_env(
        crds=["ipaddresspools.metallb.io", "l2advertisements.metallb.io"],
        rollouts=[f"{METALLB_NAMESPACE}/deployment/{METALLB_RELEASE}-controller"],
        dry_run_manifest=pool,
        timeout_seconds=600,
    )
