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
from components.lab import lab_images, registry_cache
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
    _caches, mirrors = _registry_caches(name, platform, component, cluster)
    # Nothing in the cluster pulls an image before its node pulls through the caches: every
    # resource on the management provider waits for the wiring (components.lab.registry_cache).
    kubeconfig: pulumi.Output[str] = pulumi.Output.secret(
        pulumi.Output.all(cluster.stdout, mirrors.id).apply(lambda out: str(out[0]))
    )
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
        # The name, once the kind network exists with the caches on it: a worker container
        # created on it may start before the management cluster serves (it waits only for this).
        kind_network=mirrors.id.apply(lambda _: kind.docker_network),
        lb_pool=lb_pool,
        tenant_address_pool=METALLB_POOL_NAME,
    )


def _registry_caches(
    name: str, platform: PlatformConfig, component: pulumi.Resource, cluster: local.Command
) -> tuple[local.Command, local.Command]:
    """The host's pull-through caches, one per registry of the derived image list, started at
    once (beside ``kind create cluster``), and the kind node wired to them as soon as it exists.
    Neither deletes anything: the caches outlive ``pulumi destroy``."""
    network = platform.kind.docker_network
    pinned = lab_images.pinned()
    found = registry_cache.caches(lab_images.registries(pinned))
    caches = local.Command(
        f"{name}-registry-caches",
        create=_script("registry-caches-up.sh"),
        update=_script("registry-caches-up.sh"),
        delete=NOTHING_TO_DELETE,
        interpreter=list(BASH),
        environment=registry_cache.caches_env(found, network),
        logging=local.Logging.STDOUT_AND_STDERR,
        opts=pulumi.ResourceOptions(parent=component),
    )
    mirrors = local.Command(
        f"{name}-kind-node-mirrors",
        create=_script("node-mirrors.sh"),
        update=_script("node-mirrors.sh"),
        delete=NOTHING_TO_DELETE,
        interpreter=list(BASH),
        # kind names its one control-plane node <cluster>-control-plane (kind v0.31.0
        # pkg/cluster/internal/providers/common/namer.go:25-37).
        environment=registry_cache.mirrors_env(
            found, [f"{platform.kind.cluster_name}-control-plane"], network
        ),
        logging=local.Logging.STDOUT_AND_STDERR,
        # A new kind cluster (a new Command ID) is a new node: wire it again.
        triggers=[cluster.id],
        opts=pulumi.ResourceOptions(parent=component, depends_on=[cluster, caches]),
    )
    # The management cluster's own images, pulled through the caches while cert-manager (which
    # nothing waits on this for) installs: Kamaji, etcd, MetalLB and the tenants' control planes
    # then start from local images.
    local.Command(
        f"{name}-kind-node-images",
        create=_script("node-mirrors.sh"),
        update=_script("node-mirrors.sh"),
        delete=NOTHING_TO_DELETE,
        interpreter=list(BASH),
        environment=registry_cache.mirrors_env(
            found,
            [f"{platform.kind.cluster_name}-control-plane"],
            network,
            [
                image
                for image in lab_images.prepull_images(pinned, lab_images.MANAGEMENT)
                if image not in STARTS_AT_ONCE
            ],
        ),
        logging=local.Logging.STDOUT_AND_STDERR,
        triggers=[cluster.id],
        opts=pulumi.ResourceOptions(parent=component, depends_on=[mirrors]),
    )
    return caches, mirrors


# The default etcd starts at once, beside cert-manager (components.management_cluster): its member
# (kamaji-etcd 0.17.0's appVersion), its certificate job's cfssl and kubectl (tagged with the kind
# node's minor) and its root-user job's etcdctl, the last two the images the backups run too
# (versions.py); tests/contract/test_default_datastore.py renders the chart and compares.
DEFAULT_ETCD_IMAGES = frozenset(
    {
        "quay.io/coreos/etcd:v3.6.12",
        f"cfssl/cfssl:{PINNED.kamaji_etcd_cfssl_tag}",
        PINNED.backup_kubectl_image,
        PINNED.backup_etcd_image,
    }
)
# What starts as soon as the management cluster serves pulls its own images through the caches
# as it starts: the default etcd, and the metrics stack (Prometheus, Grafana and its dashboard
# fetcher), which waits on nothing. Pulling them ahead as well would only delay the pre-pull
# Kamaji and the control planes start from (benchmarks/bringup.py NOT_PULLED_AHEAD models the
# same).
STARTS_AT_ONCE = DEFAULT_ETCD_IMAGES | {
    PINNED.prometheus_image,
    PINNED.grafana_image,
    PINNED.completer_image,
}


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
