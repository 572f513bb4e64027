"""Prod's own names under a tenant and a pool (components.name_plan plans them)."""

from __future__ import annotations

from components import availability
from components.config import PlatformConfig, Tenant, WorkerPool
from components.resource_names import (
    DNS1123_LABEL_MAX,
    HELM_RELEASE_NAME_MAX,
    pool_child,
    pool_component,
)
from components.tenant_specs import dedicated_etcd_name

# The Cluster API objects, the reads of the control plane's and the Cluster's live uids
# (gpu_tenant.py, IDENTITY_READ_SUFFIX) and the GPU Operator (components/prod/tenant.py).
TENANT_PARTS = (
    "infrastructure-cluster",
    "control-plane",
    "cluster",
    "control-plane-identity",
    "cluster-identity",
    "gpu-operator",
)
# A dedicated kamaji-etcd's PodDisruptionBudget (components/prod/tenant.py), where it has a
# quorum to keep.
ETCD_BUDGET_PART = "etcd-budget"
# A pool's Cluster API objects (components/prod/machines.py).
POOL_PARTS = ("kubeadm-config", "machine-template", "machines")


def tenant_parts(tenant: Tenant) -> list[str]:
    parts = [*TENANT_PARTS]
    dedicated = tenant.data_store.dedicated
    if dedicated is not None:
        if dedicated.deploys_kamaji_etcd:
            parts += ["etcd-issuer", "etcd", "etcd-defrag"]
            if availability.max_unavailable(dedicated.replicas, quorum=True) is not None:
                parts.append(ETCD_BUDGET_PART)
        else:
            parts += ["datastore-credentials", "datastore"]
    return parts


def pool_parts(pool: WorkerPool) -> list[str]:
    parts = [*POOL_PARTS]
    if pool.machine is not None and pool.machine.health_check.enabled:
        parts.append("health-check")
    return parts


def name_length_problems(platform: PlatformConfig) -> list[str]:
    """The tenant's kamaji-etcd release name (Helm's limit) and each pool's Cluster API object
    names (a DNS-1123 label)."""
    found: list[str] = []
    for index, tenant in enumerate(platform.tenants):
        key = f"tenants[{index}].name"
        dedicated = tenant.data_store.dedicated
        if dedicated is not None and dedicated.deploys_kamaji_etcd:
            release = dedicated_etcd_name(tenant.name)
            if len(release) > HELM_RELEASE_NAME_MAX:
                found.append(
                    f"{key}: the tenant's kamaji-etcd Helm release {release!r} is "
                    f"{len(release)} characters and Helm allows {HELM_RELEASE_NAME_MAX}: shorten "
                    f"the tenant name to {HELM_RELEASE_NAME_MAX - len(release) + len(tenant.name)}"
                    " characters or fewer"
                )
        for p_index, pool in enumerate(tenant.worker_pools):
            longest = pool_component(tenant.name, pool.name)
            if pool.machine is not None and pool.machine.health_check.enabled:
                longest = pool_child(longest, "health")
            if len(longest) > DNS1123_LABEL_MAX:
                found.append(
                    f"tenants[{index}].workerPools[{p_index}].name: the pool's Cluster API object "
                    f"{longest!r} is {len(longest)} characters and Kubernetes allows "
                    f"{DNS1123_LABEL_MAX}: shorten the tenant or pool name"
                )
    return found
