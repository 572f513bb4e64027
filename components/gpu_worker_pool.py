"""GpuWorkerPool: one pool of GPU nodes joined to one tenant."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi

from components.config import PlatformConfig, Tenant, WorkerPool
from components.gpu_tenant import GpuTenant
from components.management_cluster import ManagementCluster

TYPE_TOKEN = "gpu-platform:index:GpuWorkerPool"


@dataclass(frozen=True)
class GpuWorkerPoolArgs:
    platform: PlatformConfig
    tenant_config: Tenant
    pool: WorkerPool
    tenant: GpuTenant
    management: ManagementCluster


class GpuWorkerPool(pulumi.ComponentResource):
    """SKELETON: replaced by the lab/prod implementation."""

    node_names: pulumi.Output[list[str]]
    inventory: dict[str, int]

    def __init__(
        self, name: str, args: GpuWorkerPoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.node_names = pulumi.Output.from_input([])
        self.inventory = {}
        self.register_outputs({})
