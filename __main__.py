"""The platform program: validate the stack config, then build the management cluster, one
GpuTenant per tenant and its GpuWorkerPools, and export what users and the acceptance suite need.

Tenants never depend on each other, so Pulumi builds them in parallel.
"""

import pulumi

from components import resource_names
from components.config import Tenant
from components.gpu_tenant import GpuTenant, GpuTenantArgs
from components.gpu_worker_pool import GpuWorkerPool, GpuWorkerPoolArgs
from components.management_cluster import ManagementCluster, ManagementClusterArgs
from components.stack import Stack, load_stack


def build_tenant(
    stack: Stack, tenant_config: Tenant, management: ManagementCluster
) -> tuple[GpuTenant, pulumi.Output[dict[str, object]]]:
    """One tenant with its pools, and the summary the stack exports for it."""
    platform = stack.platform
    tenant = GpuTenant(
        tenant_config.name,
        GpuTenantArgs(
            platform=platform,
            substrate=stack.substrate,
            tenant=tenant_config,
            management=management,
            address=management.tenant_address(tenant_config.name),
        ),
    )
    pools = {
        pool.name: GpuWorkerPool(
            resource_names.pool_component(tenant_config.name, pool.name),
            GpuWorkerPoolArgs(
                platform=platform,
                substrate=stack.substrate,
                tenant_config=tenant_config,
                pool=pool,
                tenant=tenant,
                management=management,
            ),
            opts=pulumi.ResourceOptions(parent=tenant),
        )
        for pool in tenant_config.worker_pools
    }
    summary = pulumi.Output.all(
        namespace=tenant.namespace,
        controlPlane=tenant.control_plane_name,
        endpoint=tenant.endpoint,
        pools={
            name: pulumi.Output.all(nodes=pool.node_names, inventory=pool.inventory)
            for name, pool in pools.items()
        },
    ).apply(lambda values: {**values, "version": platform.version_of(tenant_config)})
    return tenant, summary


def main() -> None:
    stack = load_stack()
    platform = stack.platform
    management = ManagementCluster(
        "management", ManagementClusterArgs(platform=platform, substrate=stack.substrate)
    )
    built = {
        tenant_config.name: build_tenant(stack, tenant_config, management)
        for tenant_config in platform.tenants
    }
    pulumi.export("mode", platform.mode)
    pulumi.export("kubernetesVersion", platform.kubernetes_version)
    pulumi.export("versions", management.versions)
    pulumi.export("managementKubeconfig", pulumi.Output.secret(management.kubeconfig))
    pulumi.export("lbPool", management.lb_pool)
    pulumi.export("tenants", {name: summary for name, (_, summary) in built.items()})
    pulumi.export(
        "tenantKubeconfigs",
        pulumi.Output.secret({name: tenant.kubeconfig for name, (tenant, _) in built.items()}),
    )


main()
