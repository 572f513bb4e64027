"""The prod environment: an existing management cluster, Cluster API machines, real GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.config import PlatformConfig
from components.prod import tenant as prod_tenant
from components.prod.machines import cluster_api_machines
from components.substrate import ControlPlaneParts, InsideTenant, PoolParts, PoolSite, TenantSite
from components.tenant_values import GPU_OPERATOR_NAMESPACE


@dataclass(frozen=True)
class ProdSubstrate:
    """``components.substrate.Substrate`` for prod."""

    name: str = "prod"
    release_timeout_seconds: int = prod_tenant.RELEASE_TIMEOUT_SECONDS
    # The GPU Operator's driver, toolkit and validator pods must not wait on HAMi's webhook,
    # which waits on the toolkit.
    tenant_system_namespaces: tuple[str, ...] = (GPU_OPERATOR_NAMESPACE,)
    tenant_provider_deletes_unreachable: bool = False

    def default_device_mode(self) -> str:
        return "nvidia"

    def blocked_pod_cidrs(self, platform: PlatformConfig) -> list[str]:
        return []

    def control_plane(
        self, site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
    ) -> ControlPlaneParts:
        return prod_tenant.cluster_api_control_plane(site, namespace, policies)

    def before_hami(self, inside: InsideTenant, calico: pulumi.Resource) -> list[pulumi.Resource]:
        return [prod_tenant.gpu_operator(inside, calico)]

    def after_hami(self, inside: InsideTenant, hami: pulumi.Resource, modes: set[str]) -> None:
        return None

    def worker_pool(self, site: PoolSite) -> PoolParts:
        return cluster_api_machines(site)
