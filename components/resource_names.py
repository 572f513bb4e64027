"""The names the tenant and pool components register, and the configs whose names would clash.

A Pulumi URN is ``urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>``: it holds the
parent's *type* chain, never the parent's name (pulumi/pulumi v3.259.0,
pkg/resource/deploy/deployment.go:795-805). So every tenant's direct children share one name
space, and every pool's children share another. The components build those names by joining
config names with ``-``, and joins can meet: tenant ``team`` with pool ``a-l4`` and tenant
``team-a`` with pool ``l4`` both give ``team-a-l4`` (and the same docker container and node
``team-a-l4-0``). Mocks accept that silently; the engine refuses the second registration with
``Duplicate resource URN`` (sdk/go/common/diag/errors.go:33) after the first has been created.

The components take the config-derived names from the functions here, and ``planned_names`` lists
every name the two components register for a config, so ``name_problems`` refuses a clashing
config before anything is registered, naming both entries. ``planned_names`` is compared with what
the components really register under mocks (tests/program/test_resource_names.py), so the list
cannot drift from the components.

The check is a little stricter than the engine: it ignores the resource *type*, so a pool or
workload may not take a name that one of the tenant's own parts already has (a pool called
``hami`` next to the tenant's ``<tenant>-hami`` release), although the engine would allow it.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from dataclasses import dataclass
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from components.config import PlatformConfig, Tenant

TENANT_SCOPE = "gpu-platform:index:GpuTenant"
POOL_SCOPE = "gpu-platform:index:GpuWorkerPool"
# Helm refuses longer release names (helm/helm v3.21.4 pkg/chartutil/validate_name.go:61).
HELM_RELEASE_NAME_MAX = 53
DNS1123_LABEL_MAX = 63
# Namespaces a tenant may not be named after: the tenant's Namespace and NetworkPolicies would be
# created in a namespace the cluster or this stack already owns. ``kube-`` is Kubernetes' own
# prefix; local-path-storage is kind's default storage class.
CLUSTER_NAMESPACES = ("default", "local-path-storage")
RESERVED_PREFIX = "kube-"


# ------------------------------------------------------------------ the names the components use


def tenant_child(tenant: str, suffix: str) -> str:
    """A resource directly under a GpuTenant: ``<tenant>-<suffix>``."""
    return f"{tenant}-{suffix}"


def pool_component(tenant: str, pool: str) -> str:
    """A GpuWorkerPool; its children are ``<this>-<suffix>``, its lab nodes ``<this>-<i>``."""
    return tenant_child(tenant, pool)


def tenant_namespace(tenant: str, namespace: str) -> str:
    """A Namespace inside the tenant cluster."""
    return tenant_child(tenant, f"ns-{namespace}")


def tenant_quota(tenant: str, namespace: str) -> str:
    """A GPU ResourceQuota inside the tenant cluster."""
    return tenant_child(tenant, f"quota-{namespace}")


def tenant_workload(tenant: str, namespace: str, name: str) -> str:
    """A declared GPU workload's Deployment inside the tenant cluster."""
    return tenant_child(tenant, f"workload-{namespace}-{name}")


def pool_child(pool: str, suffix: str) -> str:
    """A resource under a GpuWorkerPool named ``pool`` (see ``pool_component``)."""
    return f"{pool}-{suffix}"


_DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")


def worker_node_name(tenant: str, pool: str, index: int) -> str:
    """``<tenant>-<pool>-<i>``: container name, hostname and so the tenant's node name."""
    name = f"{tenant}-{pool}-{index}"
    if len(name) > 63 or not _DNS1123_LABEL.match(name):
        raise ValueError(
            f"worker name {name!r} is not a DNS-1123 label of at most 63 characters "
            "(it becomes the hostname and node name): shorten the tenant or pool name"
        )
    return name


def worker_node_names(tenant: str, pool: str, replicas: int) -> list[str]:
    return [worker_node_name(tenant, pool, index) for index in range(replicas)]


# ----------------------------------------------------------------- every name the components make


@dataclass(frozen=True)
class PlannedName:
    """One registration: the component type it sits under, its name, the config entry behind it."""

    scope: str
    name: str
    owner: str


# Fixed parts of every tenant, by mode (gpu_tenant.py). NetworkPolicies and in-tenant namespaces
# come from the same functions the component calls.
_LAB_TENANT_PARTS = (
    "namespace",
    "control-plane",
    # The read of the control plane's live uid (gpu_tenant.py, IDENTITY_READ_SUFFIX).
    "control-plane-identity",
    "admin-kubeconfig",
    "provider",
    "calico-crds",
    "calico",
    "hami",
    # The lab's own kube-proxy and mock device plugin (gpu_tenant.py, components/lab/).
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
_PROD_TENANT_PARTS = (
    "namespace",
    "infrastructure-cluster",
    "control-plane",
    "cluster",
    "control-plane-identity",
    "cluster-identity",
    "admin-kubeconfig",
    "provider",
    "calico-crds",
    "calico",
    "gpu-operator",
    "hami",
)
# Fixed parts of every pool (gpu_worker_pool.py), and of each lab worker ``<pool>-<i>``.
_LAB_POOL_PARTS = (
    "declared-inventory",
    "worker-image",
    "completer-namespace",
    "completer-account",
    "completer-role",
    "completer-binding",
    "completer-script",
    "completer",
)
_LAB_WORKER_PARTS = ("var", "node-join", "gpu-capacity", "inventory")
_PROD_POOL_PARTS = ("declared-inventory", "kubeadm-config", "machine-template", "machines")


def _tenant_key(index: int, tenant: Tenant) -> str:
    return f"tenants[{index}] ({tenant.name})"


def _tenant_names(platform: PlatformConfig, index: int, tenant: Tenant) -> Iterator[PlannedName]:
    from components.tenant_specs import namespaces_to_create, network_policies
    from components.tenant_values import (
        GPU_OPERATOR_NAMESPACE,
        HAMI_NAMESPACE,
        TIGERA_OPERATOR_NAMESPACE,
    )

    t = tenant.name
    key = _tenant_key(index, tenant)

    def planned(name: str, owner: str = key) -> PlannedName:
        return PlannedName(TENANT_SCOPE, name, owner)

    lab = platform.mode == "lab"
    for part in _LAB_TENANT_PARTS if lab else _PROD_TENANT_PARTS:
        yield planned(tenant_child(t, part))
    for policy in network_policies(t, t):
        yield planned(tenant_child(t, policy["metadata"]["name"]))
    dedicated = tenant.data_store.dedicated
    if not lab and dedicated is not None:
        if dedicated.deploys_kamaji_etcd:
            yield planned(tenant_child(t, "etcd"))
        else:
            yield planned(tenant_child(t, "datastore-credentials"))
            yield planned(tenant_child(t, "datastore"))
    system = [TIGERA_OPERATOR_NAMESPACE, HAMI_NAMESPACE]
    if not lab:
        system.append(GPU_OPERATOR_NAMESPACE)
    for namespace in system:
        yield planned(tenant_namespace(t, namespace))
    for namespace in namespaces_to_create(tenant, existing=system):
        yield planned(tenant_namespace(t, namespace), f"{key} namespace {namespace!r}")
    for q_index, quota in enumerate(tenant.gpu_quotas):
        owner = f"tenants[{index}].gpuQuotas[{q_index}] ({t}: {quota.namespace})"
        yield planned(tenant_quota(t, quota.namespace), owner)
    for w_index, workload in enumerate(tenant.workloads):
        owner = f"tenants[{index}].workloads[{w_index}] ({t}: {workload.namespace}/{workload.name})"
        yield planned(tenant_workload(t, workload.namespace, workload.name), owner)
    for p_index, pool in enumerate(tenant.worker_pools):
        owner = f"tenants[{index}].workerPools[{p_index}] ({t}: pool {pool.name})"
        name = pool_component(t, pool.name)
        yield planned(name, owner)
        if lab:
            parts = [*_LAB_POOL_PARTS]
            for node in range(pool.replicas):
                parts.append(str(node))
                parts += [f"{node}-{part}" for part in _LAB_WORKER_PARTS]
        else:
            parts = [*_PROD_POOL_PARTS]
            if pool.machine is not None and pool.machine.health_check.enabled:
                parts.append("health-check")
        for part in parts:
            yield PlannedName(POOL_SCOPE, pool_child(name, part), owner)


def planned_names(platform: PlatformConfig) -> list[PlannedName]:
    """Every name the GpuTenant and GpuWorkerPool components register for ``platform``."""
    return [
        planned
        for index, tenant in enumerate(platform.tenants)
        for planned in _tenant_names(platform, index, tenant)
    ]


# ------------------------------------------------------------------------------------ the checks


def name_collisions(platform: PlatformConfig) -> list[str]:
    """One line per pair of config entries that would register the same name, with the fix."""
    first: dict[tuple[str, str], str] = {}
    reported: set[tuple[str, str]] = set()
    problems: list[str] = []
    for planned in planned_names(platform):
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


def reserved_namespaces(platform: PlatformConfig) -> set[str]:
    """Namespaces of the management cluster that the cluster itself or this stack owns."""
    from components.config import ClusterApiVersions
    from components.management_values import (
        CAPI_OPERATOR_NAMESPACE,
        CERT_MANAGER_NAMESPACE,
        KAMAJI_NAMESPACE,
        METALLB_NAMESPACE,
        capi_providers,
    )

    versions = (
        platform.management.existing.cluster_api
        if platform.management.existing is not None
        else ClusterApiVersions()
    )
    return {
        *CLUSTER_NAMESPACES,
        METALLB_NAMESPACE,
        CERT_MANAGER_NAMESPACE,
        KAMAJI_NAMESPACE,
        CAPI_OPERATOR_NAMESPACE,
        *(provider.namespace for provider in capi_providers(versions)),
    }


def _reserved_and_length_problems(platform: PlatformConfig) -> Iterator[str]:
    from components.tenant_specs import dedicated_etcd_name

    reserved = reserved_namespaces(platform)
    for index, tenant in enumerate(platform.tenants):
        key = f"tenants[{index}].name"
        if tenant.name in reserved or tenant.name.startswith(RESERVED_PREFIX):
            yield (
                f"{key}: {tenant.name!r} is a namespace the management cluster or this stack "
                "already owns (every tenant gets a namespace of its name): pick another name"
            )
        dedicated = tenant.data_store.dedicated
        if platform.mode == "prod" and dedicated is not None and dedicated.deploys_kamaji_etcd:
            release = dedicated_etcd_name(tenant.name)
            if len(release) > HELM_RELEASE_NAME_MAX:
                yield (
                    f"{key}: the tenant's kamaji-etcd Helm release {release!r} is "
                    f"{len(release)} characters and Helm allows {HELM_RELEASE_NAME_MAX}: shorten "
                    f"the tenant name to {HELM_RELEASE_NAME_MAX - len(release) + len(tenant.name)}"
                    " characters or fewer"
                )
        for p_index, pool in enumerate(tenant.worker_pools):
            pool_key = f"tenants[{index}].workerPools[{p_index}].name"
            if platform.mode == "lab":
                try:
                    worker_node_name(tenant.name, pool.name, pool.replicas - 1)
                except ValueError as error:
                    yield f"{pool_key}: {error}"
                continue
            longest = pool_component(tenant.name, pool.name)
            if pool.machine is not None and pool.machine.health_check.enabled:
                longest = pool_child(longest, "health")
            if len(longest) > DNS1123_LABEL_MAX:
                yield (
                    f"{pool_key}: the pool's Cluster API object {longest!r} is {len(longest)} "
                    f"characters and Kubernetes allows {DNS1123_LABEL_MAX}: shorten the tenant "
                    "or pool name"
                )


def name_problems(platform: PlatformConfig) -> list[str]:
    """Everything about names that would fail only at registration or in a cluster: reserved
    tenant names, names too long for Helm or Kubernetes, and names two entries would share."""
    return [*_reserved_and_length_problems(platform), *name_collisions(platform)]
