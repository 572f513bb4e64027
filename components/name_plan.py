"""Every name a stack's components will register, planned before anything is, and the configs
whose names would clash, be reserved or be too long.

A Pulumi URN holds the parent's *type* chain, never the parent's name
(``components.resource_names``), so every tenant's direct children share one name space and
every pool's children another. ``planned_names`` lists every name the GpuTenant and GpuWorkerPool
components register for a config — what every stack has, plus the environment's own parts
(``NamePlan``, which each substrate implements) — so ``name_problems`` refuses a clashing config
before anything is registered, naming both entries. ``planned_names`` is compared with what the
components really register under mocks (tests/program/test_resource_names.py), so the list cannot
drift from the components.

The check is a little stricter than the engine: it ignores the resource *type*, so a pool or
workload may not take a name that one of the tenant's own parts already has (a pool called
``hami`` next to the tenant's ``<tenant>-hami`` release), although the engine would allow it.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from dataclasses import dataclass
from typing import Protocol

from components.availability import control_plane_budget
from components.backups.deploy import TENANT_PARTS as BACKUP_TENANT_PARTS
from components.config import PLATFORM_NAMESPACES, PlatformConfig, Tenant, WorkerPool
from components.metrics.deploy import USAGE_PARTS
from components.metrics.deploy import tenant_parts as metrics_tenant_parts
from components.metrics.scrape import TenantSource, tenant_sources
from components.metrics.self_view import NAMESPACE as USAGE_NAMESPACE
from components.metrics.usage_publisher import publishes_usage
from components.resource_names import (
    CLUSTER_NAMESPACES,
    POOL_SCOPE,
    RESERVED_PREFIX,
    TENANT_SCOPE,
    pool_child,
    pool_component,
    tenant_child,
    tenant_namespace,
    tenant_quota,
    tenant_workload,
    tenant_workload_claims,
)
from components.tenant_specs import namespaces_to_create, network_policies
from components.tenant_values import HAMI_NAMESPACE, TIGERA_OPERATOR_NAMESPACE

# Fixed parts of every tenant, whatever its environment (gpu_tenant.py). NetworkPolicies and
# in-tenant namespaces come from the same functions the component calls.
# The gate between a tenant's control plane and its workers (``<tenant>-served-version``).
SERVED_VERSION_PART = "served-version"
TENANT_PARTS = (
    "namespace",
    "admin-kubeconfig",
    SERVED_VERSION_PART,
    "provider",
    "calico-crds",
    "calico",
    "hami",
    "admission-limits",
    "admission-policy",
    "admission-binding",
    "claim-admission-policy",
    "claim-admission-binding",
)
# A replicated control plane's PodDisruptionBudget (gpu_tenant.py).
CONTROL_PLANE_BUDGET_PART = "control-plane-budget"
# Fixed parts of every pool (gpu_worker_pool.py).
POOL_PARTS = ("declared-inventory",)


class NamePlan(Protocol):
    """What an environment adds to the names of a tenant and of a pool."""

    @property
    def tenant_system_namespaces(self) -> tuple[str, ...]: ...
    @property
    def tenant_metrics_sources(self) -> tuple[TenantSource, ...]: ...

    def planned_tenant_parts(self, tenant: Tenant) -> Sequence[str]:
        """Suffixes of the environment's own children of a GpuTenant."""
        ...

    def planned_pool_parts(self, tenant: Tenant, pool: WorkerPool) -> Sequence[str]:
        """Suffixes of the environment's own children of a GpuWorkerPool (of ``tenant``)."""
        ...

    def name_length_problems(self, platform: PlatformConfig) -> list[str]:
        """Names the environment derives that would be too long for Helm or Kubernetes."""
        ...


@dataclass(frozen=True)
class PlannedName:
    """One registration: the component type it sits under, its name, the config entry behind it."""

    scope: str
    name: str
    owner: str


def _tenant_key(index: int, tenant: Tenant) -> str:
    return f"tenants[{index}] ({tenant.name})"


def _tenant_names(
    plan: NamePlan, index: int, tenant: Tenant, metrics: bool, usage_view: bool = False
) -> Iterator[PlannedName]:
    t = tenant.name
    key = _tenant_key(index, tenant)

    def planned(name: str, owner: str = key) -> PlannedName:
        return PlannedName(TENANT_SCOPE, name, owner)

    for part in (*TENANT_PARTS, *plan.planned_tenant_parts(tenant)):
        yield planned(tenant_child(t, part))
    if control_plane_budget(t, t, tenant.control_plane.replicas, {}) is not None:
        yield planned(tenant_child(t, CONTROL_PLANE_BUDGET_PART))
    if tenant.backups.enabled:
        for part in BACKUP_TENANT_PARTS:
            yield planned(tenant_child(t, part))
    if metrics:
        for part in metrics_tenant_parts(
            tenant_sources(tenant.gpu_sharing, plan.tenant_metrics_sources)
        ):
            yield planned(tenant_child(t, part))
    if usage_view:
        for part in USAGE_PARTS:
            yield planned(tenant_child(t, part))
        # The platform's: a tenant's quota or workload namespace of that name is what must move.
        yield planned(
            tenant_namespace(t, USAGE_NAMESPACE),
            f"the platform's usage namespace {USAGE_NAMESPACE!r} in {t} (reserved)",
        )
    for policy in network_policies(t, t):
        yield planned(tenant_child(t, policy["metadata"]["name"]))
    system = [TIGERA_OPERATOR_NAMESPACE, HAMI_NAMESPACE, *plan.tenant_system_namespaces]
    for namespace in system:
        yield planned(tenant_namespace(t, namespace))
    for namespace in namespaces_to_create(tenant, existing=system):
        yield planned(tenant_namespace(t, namespace), f"{key} namespace {namespace!r}")
    for q_index, quota in enumerate(tenant.gpu_quotas):
        owner = f"tenants[{index}].gpuQuotas[{q_index}] ({t}: {quota.namespace})"
        yield planned(tenant_quota(t, quota.namespace), owner)
    for q_index, device_quota in enumerate(tenant.device_quotas):
        owner = f"tenants[{index}].deviceQuotas[{q_index}] ({t}: {device_quota.namespace})"
        yield planned(tenant_quota(t, device_quota.namespace), owner)
    for w_index, workload in enumerate(tenant.workloads):
        owner = f"tenants[{index}].workloads[{w_index}] ({t}: {workload.namespace}/{workload.name})"
        yield planned(tenant_workload(t, workload.namespace, workload.name), owner)
        if tenant.gpu_sharing == "dra":
            yield planned(tenant_workload_claims(t, workload.namespace, workload.name), owner)
    for p_index, pool in enumerate(tenant.worker_pools):
        owner = f"tenants[{index}].workerPools[{p_index}] ({t}: pool {pool.name})"
        name = pool_component(t, pool.name)
        yield planned(name, owner)
        for part in (*POOL_PARTS, *plan.planned_pool_parts(tenant, pool)):
            yield PlannedName(POOL_SCOPE, pool_child(name, part), owner)


def planned_names(platform: PlatformConfig, plan: NamePlan) -> list[PlannedName]:
    """Every name the GpuTenant and GpuWorkerPool components register for ``platform``."""
    return [
        planned
        for index, tenant in enumerate(platform.tenants)
        for planned in _tenant_names(
            plan, index, tenant, platform.metrics.enabled, publishes_usage(platform.metrics)
        )
    ]


def name_collisions(platform: PlatformConfig, plan: NamePlan) -> list[str]:
    """One line per pair of config entries that would register the same name, with the fix."""
    first: dict[tuple[str, str], str] = {}
    reported: set[tuple[str, str]] = set()
    problems: list[str] = []
    for planned in planned_names(platform, plan):
        key = (planned.scope, planned.name)
        owner = first.setdefault(key, planned.owner)
        if owner == planned.owner or (owner, planned.owner) in reported:
            continue
        reported.add((owner, planned.owner))
        problems.append(
            f"{owner} and {planned.owner} both give the resource name {planned.name!r} "
            "(names join tenant, pool and workload names with '-', and Pulumi refuses a "
            "duplicate URN): rename one of them"
        )
    return problems


def reserved_namespaces() -> set[str]:
    """Namespaces of the management cluster that the cluster itself or the platform owns (in
    either environment: ``PLATFORM_NAMESPACES``, which a config test holds to every namespace the
    program installs into)."""
    return {*CLUSTER_NAMESPACES, *PLATFORM_NAMESPACES}


def _reserved_problems(platform: PlatformConfig) -> Iterator[str]:
    reserved = reserved_namespaces()
    for index, tenant in enumerate(platform.tenants):
        if tenant.name in reserved or tenant.name.startswith(RESERVED_PREFIX):
            yield (
                f"tenants[{index}].name: {tenant.name!r} is a namespace the management cluster "
                "or this stack already owns (every tenant gets a namespace of its name): pick "
                "another name"
            )


def name_problems(platform: PlatformConfig, plan: NamePlan) -> list[str]:
    """Everything about names that would fail only at registration or in a cluster: reserved
    tenant names, names too long for Helm or Kubernetes, and names two entries would share."""
    return [
        *_reserved_problems(platform),
        *plan.name_length_problems(platform),
        *name_collisions(platform, plan),
    ]
