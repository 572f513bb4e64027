"""The platform program: validate the stack config, then build the management cluster, one
GpuTenant per tenant and its GpuWorkerPools, and export what users and the acceptance suite need.

Tenants never depend on each other, so Pulumi builds them in parallel.
"""

import pulumi

from components.config import load_platform_config
from components.gpu_tenant import GpuTenant, GpuTenantArgs
from components.gpu_worker_pool import GpuWorkerPool, GpuWorkerPoolArgs
from components.management_cluster import ManagementCluster, ManagementClusterArgs

platform = load_platform_config()
management = ManagementCluster("management", ManagementClusterArgs(platform=platform))

tenant_summaries: dict[str, pulumi.Output[dict[str, object]]] = {}
tenant_kubeconfigs: dict[str, pulumi.Output[str]] = {}
for index, tenant_config in enumerate(platform.tenants):
    tenant = GpuTenant(
        tenant_config.name,
        GpuTenantArgs(
            platform=platform,
            tenant=tenant_config,
            management=management,
            address=management.tenant_address(index),
        ),
    )
    pools = {
        pool.name: GpuWorkerPool(
            f"{tenant_config.name}-{pool.name}",
            GpuWorkerPoolArgs(
                platform=platform,
                tenant_config=tenant_config,
                pool=pool,
                tenant=tenant,
                management=management,
            ),
            opts=pulumi.ResourceOptions(parent=tenant),
        )
        for pool in tenant_config.worker_pools
    }
    tenant_kubeconfigs[tenant_config.name] = tenant.kubeconfig
    tenant_summaries[tenant_config.name] = pulumi.Output.all(
        namespace=tenant.namespace,
        controlPlane=tenant.control_plane_name,
        endpoint=tenant.endpoint,
        pools={
            name: pulumi.Output.all(nodes=pool.node_names, inventory=pool.inventory)
            for name, pool in pools.items()
        },
    ).apply(lambda summary: {**summary, "version": platform.kubernetes_version})

pulumi.export("mode", platform.mode)
pulumi.export("kubernetesVersion", platform.kubernetes_version)
pulumi.export("versions", management.versions)
pulumi.export("managementKubeconfig", pulumi.Output.secret(management.kubeconfig))
pulumi.export("lbPool", management.lb_pool)
pulumi.export("tenants", tenant_summaries)
pulumi.export("tenantKubeconfigs", pulumi.Output.secret(tenant_kubeconfigs))
