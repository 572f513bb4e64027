"""The lab environment: kind on this host, Docker workers, simulated GPUs."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from components import kubernetes_versions
from components.backups.deploy import configured_targets
from components.backups.objects import PauseOwner
from components.config import PlatformConfig, Tenant, WorkerPool
from components.lab import backup_store, pinned_addresses, preflight
from components.lab import config_checks as lab_config_checks
from components.lab import dra_driver as lab_dra_driver
from components.lab import management as lab_management
from components.lab import names as lab_names
from components.lab import network as lab_network
from components.lab import tenant as lab_tenant
from components.lab.workers import lab_workers
from components.management_nodes import read_nodes
from components.management_values import DefaultEtcd
from components.metrics.deploy import MetricsStorage
from components.metrics.scrape import TenantSource
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


@dataclass(frozen=True)
class LabSubstrate:
    """``components.substrate.Substrate`` for the lab."""

    name: str = "lab"
    release_timeout_seconds: int = lab_tenant.RELEASE_TIMEOUT_SECONDS
    tenant_system_namespaces: tuple[str, ...] = ()
    # A lab torn down by hand (kind cluster deleted) must still be destroyable.
    tenant_provider_deletes_unreachable: bool = True
    # No GPU, no DCGM: the agents scrape HAMi alone.
    tenant_metrics_sources: tuple[TenantSource, ...] = ()
    # The program owns the TenantControlPlane directly: a restore pauses only it.
    control_plane_pause_owner: PauseOwner | None = None
    # One Kamaji on the one kind node: a second would share the node, so it survives no drain
    # and protects nothing (docs/lab.md, "One of each").
    kamaji_replicas: int = 1

    def config_problems(self, platform: PlatformConfig) -> list[str]:
        return lab_config_checks.problems(platform)

    def planned_tenant_parts(self, tenant: Tenant) -> Sequence[str]:
        return lab_names.tenant_parts(tenant)

    def planned_pool_parts(self, tenant: Tenant, pool: WorkerPool) -> Sequence[str]:
        return lab_names.pool_parts(tenant, pool)

    def name_length_problems(self, platform: PlatformConfig) -> list[str]:
        return lab_names.name_length_problems(platform)

    def check_before_registration(self, platform: PlatformConfig) -> None:
        # A host that cannot run the lab fails here, with every problem listed. Skipped in
        # preview and with GPU_PLATFORM_SKIP_PREFLIGHT=1.
        dry_run = pulumi.runtime.is_dry_run()
        if preflight.check_lab_host(
            dry_run,
            kind_cluster=platform.kind.cluster_name,
            cluster_minors=preflight.lab_cluster_minors(platform),
        ):
            pulumi.log.info("lab host preflight passed")
        lab_network.check_pool_size(platform.kind.metallb_pool_size, len(platform.tenants))
        # The kind network's range is known only here, on the host: a configured range inside
        # it is refused now, in preview too (components.lab.preflight.check_kind_network).
        info, warnings = preflight.check_kind_network(platform)
        for line in info:
            pulumi.log.info(line)
        for line in warnings:
            pulumi.log.warn(line)
        # In preview too, when the kind network exists: a pin outside the pool fails here.
        pinned_addresses.check_pinned_addresses(platform)

    def management_nodes(self, platform: PlatformConfig) -> Mapping[str, Any] | None:
        # The kind node, once the cluster exists (nothing before the first `make lab`).
        return read_nodes({"KIND_CLUSTER_NAME": platform.kind.cluster_name})

    def management_cluster(
        self, name: str, platform: PlatformConfig, component: pulumi.Resource
    ) -> ClusterAccess:
        return lab_management.kind_cluster(name, platform, component)

    def installs_cert_manager(self, platform: PlatformConfig) -> bool:
        return True

    def default_etcd(self, platform: PlatformConfig) -> DefaultEtcd:
        return DefaultEtcd(
            # One: every member would sit on the one kind node, on the one disk of the one host,
            # so a quorum of three protects nothing there, while it triples the etcd's memory and
            # its start (kamaji-etcd v0.17.0 templates/etcd_sts.yaml sets no podManagementPolicy:
            # the members start one after another, OrderedReady).
            members=1,
            # kind sets no dnsDomain in its kubeadm config (kind v0.31.0
            # pkg/cluster/internal/kubeadm/config.go), so kubeadm's default applies; kind itself
            # counts on it (pkg/cluster/internal/providers/docker/provision.go:304).
            cluster_domain="cluster.local",
            # Its own release, beside cert-manager: the lab comes up faster, and a lab lives far
            # less than the one year its certificates last.
            own_release=True,
        )

    def management_services(
        self,
        site: ManagementSite,
        access: ClusterAccess,
        cert_manager: pulumi.Resource,
        kamaji_ready: pulumi.Resource,
    ) -> list[pulumi.Resource]:
        if access.lb_pool is None:  # the kind cluster's access always carries its pool
            raise ValueError("the lab's management cluster has no MetalLB pool")
        return lab_management.metallb(site, access.lb_pool)

    def pinned_tenant_address(
        self, platform: PlatformConfig, access: ClusterAccess, tenant_name: str
    ) -> pulumi.Output[str] | None:
        return lab_management.pinned_tenant_address(platform, access, tenant_name)

    def default_device_mode(self) -> str:
        return "mock"

    def blocked_pod_cidrs(self, platform: PlatformConfig) -> list[str]:
        # The kind cluster's pods: nothing there but Kamaji's own talks to a control plane.
        return [platform.kind.pod_subnet]

    def control_plane(
        self, site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
    ) -> ControlPlaneParts:
        return lab_tenant.lab_control_plane(site, namespace, policies)

    def tenant_kubernetes_versions(self) -> Sequence[str]:
        return kubernetes_versions.kind_versions()

    def running_control_plane_version(self, spec: Any, status: Any) -> str | None:
        return lab_tenant.running_version(spec, status)

    def declared_control_plane_version(self, spec: Any) -> str | None:
        return lab_tenant.declared_version(spec)

    def before_hami(self, inside: InsideTenant, calico: pulumi.Resource) -> list[pulumi.Resource]:
        # HAMi's certificate hook Job and scheduler reach the API through its ClusterIP.
        return [lab_tenant.lab_kube_proxy(inside)]

    def after_hami(self, inside: InsideTenant, hami: pulumi.Resource, modes: set[str]) -> None:
        if "mock" in modes:
            lab_tenant.mock_device_plugin(inside, after=[hami])

    def dra_driver(
        self, inside: InsideTenant, tenant: Tenant, after: Sequence[pulumi.Resource]
    ) -> DraDriver:
        return lab_tenant.dra_driver(inside, tenant, after)

    @property
    def dra_device_classes(self) -> tuple[str, ...]:
        return (lab_dra_driver.DEVICE_CLASS,)

    def worker_pool(self, site: PoolSite) -> PoolParts:
        return lab_workers(site)

    def backup_targets(
        self, site: ManagementSite, access: ClusterAccess
    ) -> Mapping[str, pulumi.Output[dict[str, str]]]:
        tenants = site.platform.tenants
        # The lab's own object store, only when a tenant keeps its backups there.
        local_store = [t for t in tenants if t.backups.enabled and t.backups.named_target is None]
        stored = backup_store.register(site, local_store) if local_store else {}
        return {**stored, **configured_targets(tenants)}

    def metrics_storage(self, platform: PlatformConfig) -> MetricsStorage:
        # The lab keeps its samples as long as the pod lives: nothing to clean up on destroy.
        return MetricsStorage(volume={"emptyDir": {"sizeLimit": "2Gi"}})
