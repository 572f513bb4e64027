"""The prod environment: an existing management cluster, Cluster API machines, real GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components import kubernetes_versions
from components.backups.deploy import configured_targets
from components.backups.objects import PauseOwner
from components.config import PlatformConfig, Tenant, WorkerPool
from components.management_nodes import read_nodes
from components.management_values import KAMAJI_ETCD_REPLICAS, DefaultEtcd
from components.metrics.deploy import MetricsStorage
from components.metrics.objects import PROMETHEUS_CLAIM, prometheus_claim
from components.metrics.scrape import TenantSource, dcgm_source
from components.prod import cluster_checks
from components.prod import config_checks as prod_config_checks
from components.prod import management as prod_management
from components.prod import names as prod_names
from components.prod import tenant as prod_tenant
from components.prod.machines import cluster_api_machines
from components.prod.tenant_values import NVIDIA_DRA_DRIVER, NVIDIA_GPU_DEVICE_CLASS
from components.substrate import (
    ClusterAccess,
    ControlPlaneParts,
    DraDriver,
    InsideTenant,
    ManagementSite,
    PoolParts,
    PoolSite,
    TenantSite,
)
from components.tenant_values import GPU_OPERATOR_NAMESPACE

# The Kamaji control-plane provider rewrites the TenantControlPlane from its KamajiControlPlane
# (replicas included, clastix/cluster-api-control-plane-provider-kamaji v0.20.0
# controllers/kamajicontrolplane_controller_tcp.go:33-81) unless the Cluster is paused
# (kamajicontrolplane_controller.go:101-120, Cluster API v1.13.2 util/annotations/helpers.go:31-46:
# Cluster.spec.paused). Pausing the Cluster, not only the KamajiControlPlane, also holds
# MachineHealthChecks and MachineSets while the tenant API is down (nodes look unhealthy then).
CLUSTER_PAUSE = PauseOwner(
    resource="clusters.cluster.x-k8s.io", api_group="cluster.x-k8s.io", plural="clusters"
)


@dataclass(frozen=True)
class ProdSubstrate:
    """``components.substrate.Substrate`` for prod."""

    name: str = "prod"
    release_timeout_seconds: int = prod_tenant.RELEASE_TIMEOUT_SECONDS
    # The GPU Operator's driver, toolkit and validator pods must not wait on HAMi's webhook,
    # which waits on the toolkit.
    tenant_system_namespaces: tuple[str, ...] = (GPU_OPERATOR_NAMESPACE,)
    tenant_provider_deletes_unreachable: bool = False
    # Every tenant's agent also scrapes the GPU Operator's DCGM exporter (measured card use).
    tenant_metrics_sources: tuple[TenantSource, ...] = (dcgm_source(GPU_OPERATOR_NAMESPACE),)
    # A restore pauses the tenant's Cluster with the TenantControlPlane.
    control_plane_pause_owner: PauseOwner | None = CLUSTER_PAUSE
    # Two leader-elected Kamaji controllers on different nodes: one drained or lost, the other
    # takes the lease and keeps serving the webhooks every TenantControlPlane change goes through
    # (components.availability).
    kamaji_replicas: int = 2

    def config_problems(self, platform: PlatformConfig) -> list[str]:
        return prod_config_checks.problems(platform)

    def planned_tenant_parts(self, tenant: Tenant) -> Sequence[str]:
        return prod_names.tenant_parts(tenant)

    def planned_pool_parts(self, tenant: Tenant, pool: WorkerPool) -> Sequence[str]:
        return prod_names.pool_parts(pool)

    def name_length_problems(self, platform: PlatformConfig) -> list[str]:
        return prod_names.name_length_problems(platform)

    def check_before_registration(self, platform: PlatformConfig) -> None:
        if platform.adopted_namespaces:
            # In preview too: a tenant namespace to adopt that does not exist fails here as one
            # line naming its key, not as the engine's read error.
            cluster_checks.check_adopted_namespaces(
                platform.adopted_namespaces,
                pulumi.Config().get(platform.existing.kubeconfig_config_key),
            )

    def management_nodes(self, platform: PlatformConfig) -> Mapping[str, Any] | None:
        # The existing cluster, through the management kubeconfig (secret), as the adopted
        # namespaces are checked.
        kubeconfig = pulumi.Config().get(platform.existing.kubeconfig_config_key)
        return read_nodes({"KUBECONFIG_CONTENT": kubeconfig} if kubeconfig else {})

    def management_cluster(
        self, name: str, platform: PlatformConfig, component: pulumi.Resource
    ) -> ClusterAccess:
        return prod_management.existing_cluster(name, platform, component)

    def installs_cert_manager(self, platform: PlatformConfig) -> bool:
        return platform.existing.installs_cert_manager

    def default_etcd(self, platform: PlatformConfig) -> DefaultEtcd | None:
        if not platform.existing.kamaji_etcd:
            return None
        # Kamaji's bundled subchart: cert-manager renews its certificates on a cluster that runs
        # for years; three members, a quorum that survives one member's loss.
        return DefaultEtcd(
            members=KAMAJI_ETCD_REPLICAS,
            cluster_domain=platform.existing.cluster_domain,
            own_release=False,
        )

    def management_services(
        self,
        site: ManagementSite,
        access: ClusterAccess,
        cert_manager: pulumi.Resource,
        kamaji_ready: pulumi.Resource,
    ) -> list[pulumi.Resource]:
        return prod_management.cluster_api(site, cert_manager, kamaji_ready)

    def pinned_tenant_address(
        self, platform: PlatformConfig, access: ClusterAccess, tenant_name: str
    ) -> pulumi.Output[str] | None:
        return prod_management.pinned_tenant_address(platform, tenant_name)

    def default_device_mode(self) -> str:
        return "nvidia"

    def blocked_pod_cidrs(self, platform: PlatformConfig) -> list[str]:
        return []

    def control_plane(
        self, site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
    ) -> ControlPlaneParts:
        return prod_tenant.cluster_api_control_plane(site, namespace, policies)

    def tenant_kubernetes_versions(self) -> Sequence[str]:
        return kubernetes_versions.released_versions()

    def running_control_plane_version(self, spec: Any, status: Any) -> str | None:
        return prod_tenant.running_version(spec, status)

    def declared_control_plane_version(self, spec: Any) -> str | None:
        return prod_tenant.declared_version(spec)

    def before_hami(self, inside: InsideTenant, calico: pulumi.Resource) -> list[pulumi.Resource]:
        return [prod_tenant.gpu_operator(inside, calico)]

    def after_hami(self, inside: InsideTenant, hami: pulumi.Resource, modes: set[str]) -> None:
        return None

    def dra_driver(
        self, inside: InsideTenant, tenant: Tenant, after: Sequence[pulumi.Resource]
    ) -> DraDriver:
        # NVIDIA's DRA driver, which the tenant's GPU Operator runs through its GPUCluster
        # (before_hami, so ``after`` already waits for that release); the operator creates the
        # DeviceClass itself once the GPUCluster reconciles.
        return DraDriver(
            device_class=NVIDIA_GPU_DEVICE_CLASS, driver=NVIDIA_DRA_DRIVER, ready=list(after)
        )

    @property
    def dra_device_classes(self) -> tuple[str, ...]:
        # The class the GPU Operator's GPUCluster creates for whole GPUs (gpu-operator v26.7.0
        # manifests/state-dra-driver/0400_deviceclass-gpu.yaml:4-8), which dra_driver answers.
        return (NVIDIA_GPU_DEVICE_CLASS,)

    def worker_pool(self, site: PoolSite) -> PoolParts:
        return cluster_api_machines(site)

    def backup_targets(
        self, site: ManagementSite, access: ClusterAccess
    ) -> Mapping[str, pulumi.Output[dict[str, str]]]:
        # Prod keeps no store of its own: every backed-up tenant names its target
        # (config_checks._backup_targets refuses a stack that does not).
        return configured_targets(site.platform.tenants)

    def metrics_storage(self, platform: PlatformConfig) -> MetricsStorage:
        # A claim on the cluster's default StorageClass: samples outlive the pod.
        return MetricsStorage(
            volume={"persistentVolumeClaim": {"claimName": PROMETHEUS_CLAIM}},
            claims=(prometheus_claim(platform.metrics.storage_size),),
        )
