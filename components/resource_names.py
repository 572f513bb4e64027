"""The names the tenant and pool components register, and the configs whose names would clash.

A Pulumi URN is ``urn:pulumi:<stack>::<project>::<parent types>$<type>::<name>``: it holds the
parent's *type* chain, never the parent's name (pulumi/pulumi v3.259.0,
pkg/resource/deploy/deployment.go:795-805). So every tenant's direct children share one name
space, and every pool's children share another. The components build those names by joining
config names with ``-``, and joins can meet: tenant ``team`` with pool ``a-l4`` and tenant
``team-a`` with pool ``l4`` both give ``team-a-l4`` (and the same docker container and node
``team-a-l4-0``). Mocks accept that silently; the engine refuses the second registration with
``Duplicate resource URN`` (sdk/go/common/diag/errors.go:33) after the first has been created.

The components take the config-derived names from the functions here, and
``components.name_plan.planned_names`` lists every name the two components register for a config
(with the environment's own parts), so ``name_problems`` refuses a clashing config before anything
is registered, naming both entries.

"""

from __future__ import annotations

import re

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


def tenant_workload_claims(tenant: str, namespace: str, name: str) -> str:
    """A DRA tenant's workload's ResourceClaimTemplate inside the tenant cluster."""
    return tenant_child(tenant, f"workload-{namespace}-{name}-claims")


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
