"""The lab's own names under a tenant and a pool (components.name_plan plans them)."""

from __future__ import annotations

from components.config import PlatformConfig, Tenant, WorkerPool
from components.resource_names import worker_node_name

# The TenantControlPlane and the read of its live uid (gpu_tenant.py, IDENTITY_READ_SUFFIX);
# the lab's own kube-proxy, mock device plugin and DRA driver (components/lab/tenant.py).
TENANT_PARTS = (
    "control-plane",
    "control-plane-identity",
    "kube-proxy",
    "kube-proxy-account",
    "kube-proxy-binding",
    "kube-proxy-config-reader",
    "kube-proxy-config-reader-binding",
    "kube-proxy-config",
)
# HAMi's mock device plugin (gpuSharing: hami) or the fake DRA driver (dra).
MOCK_DEVICE_PLUGIN_PARTS = (
    "mock-device-plugin",
    "mock-device-plugin-account",
    "mock-device-plugin-role",
    "mock-device-plugin-binding",
    "mock-device-plugin-config",
)
DRA_DRIVER_PARTS = (
    "dra-driver",
    "dra-driver-account",
    "dra-driver-role",
    "dra-driver-binding",
    "dra-driver-device-class",
)
# A pool's image and completer, and each worker ``<pool>-<i>`` (components/lab/workers.py); a
# gpuSharing: dra tenant's pools have no completer and no HAMi capacity patch.
POOL_PARTS = ("version-gate", "worker-image")
COMPLETER_PARTS = (
    "completer-namespace",
    "completer-account",
    "completer-role",
    "completer-binding",
    "completer-script",
    "completer",
)
WORKER_PARTS = ("node-images", "node-join", "inventory")
HAMI_WORKER_PARTS = ("gpu-capacity",)


def tenant_parts(tenant: Tenant) -> list[str]:
    sharing = DRA_DRIVER_PARTS if tenant.gpu_sharing == "dra" else MOCK_DEVICE_PLUGIN_PARTS
    return [*TENANT_PARTS, *sharing]


def pool_parts(tenant: Tenant, pool: WorkerPool) -> list[str]:
    hami = tenant.gpu_sharing == "hami"
    parts = [*POOL_PARTS, *(COMPLETER_PARTS if hami else ())]
    for node in range(pool.replicas):
        parts.append(str(node))
        parts += [
            f"{node}-{part}" for part in (*WORKER_PARTS, *(HAMI_WORKER_PARTS if hami else ()))
        ]
    return parts


def name_length_problems(platform: PlatformConfig) -> list[str]:
    """A worker's name is its container's, hostname and node name: a DNS-1123 label."""
    found: list[str] = []
    for index, tenant in enumerate(platform.tenants):
        for p_index, pool in enumerate(tenant.worker_pools):
            try:
                worker_node_name(tenant.name, pool.name, pool.replicas - 1)
            except ValueError as error:
                found.append(f"tenants[{index}].workerPools[{p_index}].name: {error}")
    return found
