"""The lab's management cluster: a kind cluster on this host and MetalLB on its docker network.

A kind cluster created and deleted by scripts through pulumi-command, its kubeconfig the
command's (secret) output; the ``kind`` docker network inspected for its IPv4 subnet, from whose
top the MetalLB pool is carved (``components.lab.network``); MetalLB with that pool and an L2
advertisement. Every in-cluster object goes with the kind cluster on destroy.
"""

from __future__ import annotations

import pulumi
import pulumi_kubernetes as k8s
from pulumi_command import local

from components.config import PlatformConfig
from components.lab import network as lab_network
from components.lab.management_values import (
    METALLB_POOL_NAME,
    METALLB_RELEASE,
    ip_address_pool,
    kind_cluster_identifier,
    kind_config,
    l2_advertisement,
    metallb_gate_env,
    metallb_values,
)
from components.management_values import METALLB_NAMESPACE
from components.scripts import read_script
from components.substrate import BASH, NOTHING_TO_DELETE, ClusterAccess, ManagementSite
from components.versions import PINNED


def _script(name: str) -> str:
    return read_script("management", name)


def kind_cluster(name: str, platform: PlatformConfig, component: pulumi.Resource) -> ClusterAccess:
    """The kind cluster, its provider, and the MetalLB pool its docker network leaves."""
    kind = platform.kind
    config = kind_config(kind.cluster_name, kind.node_image, kind.pod_subnet, kind.service_subnet)
    # One mapping for the command and the provider's identifier: whatever replaces the
    # cluster (stdin or environment) changes the identifier too.
    environment = {
        "KIND_CLUSTER_NAME": kind.cluster_name,
        "KIND_NODE_IMAGE": kind.node_image,
        "KIND_EXPERIMENTAL_DOCKER_NETWORK": kind.docker_network,
    }
    cluster = local.Command(
        f"{name}-kind-cluster",
        create=_script("kind-create.sh"),
        # An edited script re-runs in place (it reuses the cluster); a changed kind config
        # or name replaces the cluster, deleting the old one first.
        update=_script("kind-create.sh"),
        delete=_script("kind-delete.sh"),
        interpreter=list(BASH),
        stdin=config,
        environment=environment,
        # stdout is the kubeconfig: secret, and never logged.
        logging=local.Logging.STDERR,
        opts=pulumi.ResourceOptions(
            parent=component,
            additional_secret_outputs=["stdout"],
            replace_on_changes=["stdin", "environment"],
            delete_before_replace=True,
        ),
    )
    kubeconfig: pulumi.Output[str] = pulumi.Output.secret(cluster.stdout)
    provider = k8s.Provider(
        f"{name}-provider",
        kubeconfig=kubeconfig,
        cluster_identifier=kind_cluster_identifier(kind.cluster_name, config, environment),
        # A kind cluster deleted by hand must not block `pulumi destroy`.
        delete_unreachable=True,
        opts=pulumi.ResourceOptions(parent=component),
    )
    network = local.Command(
        f"{name}-kind-network",
        create=_script("network-inspect.sh"),
        delete=NOTHING_TO_DELETE,
        interpreter=list(BASH),
        environment={"DOCKER_NETWORK": kind.docker_network},
        # A replaced kind cluster (a new Command ID, pulumi-command v1.2.1
        # provider/pkg/provider/local/commandController.go:42) may sit on another network:
        # inspect it again (the review's finding 7).
        triggers=[cluster.id],
        opts=pulumi.ResourceOptions(parent=component, depends_on=[cluster]),
    )
    lb_pool = network.stdout.apply(
        lambda inspect: lab_network.metallb_pool(inspect, kind.metallb_pool_size)
    )
    return ClusterAccess(
        kubeconfig=kubeconfig,
        provider=provider,
        teardown_root=cluster,
        kind_network=pulumi.Output.from_input(kind.docker_network),
        lb_pool=lb_pool,
        tenant_address_pool=METALLB_POOL_NAME,
    )


def metallb(site: ManagementSite, lb_pool: pulumi.Output[list[str]]) -> list[pulumi.Resource]:
    """MetalLB, gated until it serves, with the pool and its L2 advertisement."""
    pool_manifest = lb_pool.apply(lambda pool: ip_address_pool(lab_network.address_ranges(pool)))
    release = site.release(METALLB_RELEASE, PINNED.metallb, METALLB_NAMESPACE, metallb_values())
    ready = site.gate("metallb-ready", pool_manifest.apply(metallb_gate_env), [release])
    pool = site.custom_resource(
        "metallb-pool",
        ip_address_pool([]),  # name and namespace; the addresses arrive at deploy time
        [ready],
        spec=pool_manifest.apply(lambda manifest: manifest["spec"]),
    )
    advertisement = site.custom_resource("metallb-l2", l2_advertisement(), [pool])
    return [pool, advertisement]


def pinned_tenant_address(
    platform: PlatformConfig, access: ClusterAccess, tenant_name: str
) -> pulumi.Output[str] | None:
    """The tenant's ``controlPlane.address``, checked against the MetalLB pool once the kind
    network is known (before the control plane, whose spec waits for it, is registered); None
    without one, and MetalLB assigns a free address of the pool (``components.lab.network``)."""
    tenants = {tenant.name: tenant for tenant in platform.tenants}
    address = tenants[tenant_name].control_plane.address
    if address is None or access.lb_pool is None:
        return None
    index = list(tenants).index(tenant_name)
    return access.lb_pool.apply(
        lambda pool: lab_network.pinned_address(pool, index, tenant_name, address)
    )
