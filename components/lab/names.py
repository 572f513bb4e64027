"""The lab's own names under a tenant and a pool (components.name_plan plans them)."""

from __future__ import annotations

from components.config import PlatformConfig, WorkerPool
from components.resource_names import worker_node_name

# The TenantControlPlane and the read of its live uid (gpu_tenant.py, IDENTITY_READ_SUFFIX);
# the lab's own kube-proxy and mock device plugin (components/lab/tenant.py).
TENANT_PARTS = (
    "control-plane",
    "control-plane-identity",
    "kube-proxy",
    "kube-proxy-account",
    "kube-proxy-binding",
    "kube-proxy-config-reader",
    "kube-proxy-config-reader-binding",
    "kube-proxy-config",
    "mock-device-plugin",
    "mock-device-plugin-account",
    "mock-device-plugin-role",
    "mock-device-plugin-binding",
    "mock-device-plugin-config",
)
# A pool's image and completer, and each worker ``<pool>-<i>`` (components/lab/workers.py).
POOL_PARTS = (
    "version-gate",
    "worker-image",
    "completer-namespace",
    "completer-account",
    "completer-role",
    "completer-binding",
    "completer-script",
    "completer",
)
WORKER_PARTS = ("node-images", "node-join", "gpu-capacity", "inventory")


def pool_parts(pool: WorkerPool) -> list[str]:
    parts = [*POOL_PARTS]
    for node in range(pool.replicas):
        parts.append(str(node))
        parts += [f"{node}-{part}" for part in WORKER_PARTS]
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
