"""GpuWorkerPool: one pool of GPU nodes joined to one tenant.

Every pool has a ConfigMap in the tenant's kube-system declaring its cards (read by the policy
pack to check capacity fit at preview). Its machines come from the stack's substrate
(``components.substrate``): in the lab kindest/node containers joined with kubeadm, carrying
simulated cards, plus the pool's mock allocation completer (``components.lab.workers``); in prod
a Cluster API MachineDeployment with its bootstrap and machine templates
(``components.prod.machines``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import PlatformConfig, Tenant, WorkerPool
from components.gpu_inventory import declared_inventory_configmap, pool_inventory
from components.gpu_tenant import GpuTenant
from components.management_cluster import ManagementCluster
from components.substrate import PoolSite, Substrate

TYPE_TOKEN = "gpu-platform:index:GpuWorkerPool"


@dataclass(frozen=True)
class GpuWorkerPoolArgs:
    platform: PlatformConfig
    substrate: Substrate
    tenant_config: Tenant
    pool: WorkerPool
    tenant: GpuTenant
    management: ManagementCluster


class GpuWorkerPool(pulumi.ComponentResource):
    """One pool of identical GPU nodes in one tenant (lab containers or prod CAPI machines)."""

    node_names: pulumi.Output[list[str]]
    """lab: the tenant's node names, once joined. prod: [] (Cluster API names the machines)."""
    inventory: dict[str, Any]
    """Declared totals: nodes, cards, memoryMiB, coreUnits, slots (pool) and perNode."""
    declared_inventory: k8s.core.v1.ConfigMap
    machine_deployment: k8s.apiextensions.CustomResource | None
    completer: k8s.apps.v1.Deployment | None

    def __init__(
        self, name: str, args: GpuWorkerPoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        pool = args.pool
        cards = pool.resolved_cards()
        self.inventory = pool_inventory(pool.replicas, cards, pool.slots_per_card)
        site = PoolSite(
            name=name,
            platform=args.platform,
            tenant_config=args.tenant_config,
            pool=pool,
            tenant=args.tenant,
            management=args.management,
            component=self,
        )

        declared = declared_inventory_configmap(
            args.tenant_config.name, pool.name, pool.replicas, cards, pool.slots_per_card
        )
        self.declared_inventory = k8s.core.v1.ConfigMap(
            f"{name}-declared-inventory",
            metadata=declared["metadata"],
            data=declared["data"],
            opts=site.in_tenant(),
        )

        parts = args.substrate.worker_pool(site)
        self.node_names = parts.node_names
        self.machine_deployment = parts.machine_deployment
        self.completer = parts.completer

        self.register_outputs({"nodeNames": self.node_names, "inventory": self.inventory})
