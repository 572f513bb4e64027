"""Prod worker pools: Cluster API machines (Metal3, or CAPD) for one tenant's pool.

A MachineDeployment with its KubeadmConfigTemplate (node labels through the kubelet) and
infrastructure machine template, plus an optional MachineHealthCheck, in the tenant's namespace
of the management cluster. The objects come from ``components.prod.machine_specs``; this file only
registers them.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import WorkerPool
from components.gpu_inventory import node_labels
from components.prod.machine_specs import (
    BOOTSTRAP_API,
    CAPI_DELETE_TIMEOUT,
    CLUSTER_API,
    INFRASTRUCTURE_API,
    INFRASTRUCTURE_KINDS,
    infrastructure_machine_template,
    kubeadm_config_template,
    machine_deployment,
    machine_health_check,
    rollout_strategy,
)
from components.substrate import PoolParts, PoolSite


def cluster_api_machines(site: PoolSite) -> PoolParts:
    """A MachineDeployment with its KubeadmConfigTemplate and machine template (and an optional
    MachineHealthCheck) in the tenant's namespace of the management cluster."""
    args = site
    name = site.name
    tenant_name = args.tenant_config.name
    pool = args.pool
    machine = pool.machine
    if machine is None:  # the config validation requires it in prod
        raise ValueError(f"pool {pool.name}: prod pools need a machine spec")
    labels = node_labels(tenant_name, pool.name, pool.resolved_cards(), lab=False)
    version = args.platform.version_of(args.tenant_config)
    stale = image_version_mismatch(machine.template, version)
    if stale is not None:
        pulumi.log.warn(
            f"pool {pool.name}: machine.template names Kubernetes {stale} but the tenant runs "
            f"{version}: Cluster API installs nothing, the machine image brings the kubelet "
            "and kubeadm; give the template an image of the tenant version",
            resource=site.component,
        )
    objects = pulumi.Output.all(args.tenant.namespace, args.tenant.cluster_name).apply(
        lambda values: _capi_objects(
            name, tenant_name, pool, labels, version, str(values[0]), str(values[1])
        )
    )

    def custom_resource(
        resource_name: str,
        key: str,
        depends_on: list[pulumi.Resource] | None = None,
        timeouts: pulumi.CustomTimeouts | None = None,
    ) -> k8s.apiextensions.CustomResource:
        obj = objects.apply(lambda o: o[key])
        template = _capi_static(key, machine.provider)
        return k8s.apiextensions.CustomResource(
            resource_name,
            api_version=template[0],
            kind=template[1],
            metadata=obj.apply(lambda o: o["metadata"]),
            spec=obj.apply(lambda o: o["spec"]),
            opts=site.opts(
                provider=args.management.provider,
                depends_on=[*args.management.ready, *(depends_on or [])],
                custom_timeouts=timeouts,
            ),
        )

    bootstrap = custom_resource(f"{name}-kubeadm-config", "bootstrap")
    infrastructure = custom_resource(f"{name}-machine-template", "infrastructure")
    # After the control plane, so that on destroy (reverse order) the machines are drained
    # and deprovisioned while the tenant's API still answers, and only then the control plane
    # goes. Creating it earlier would gain nothing: CAPM3 picks a host only once the machine's
    # bootstrap data exists, which needs an initialized control plane (CAPM3 v1.13.2
    # docs/deployment_workflow.md:50-56,81-82).
    machine_deployment = custom_resource(
        f"{name}-machines",
        "deployment",
        depends_on=[bootstrap, infrastructure, *args.tenant.control_plane_ready],
        timeouts=pulumi.CustomTimeouts(delete=CAPI_DELETE_TIMEOUT),
    )
    if machine.health_check.enabled:
        custom_resource(f"{name}-health-check", "healthCheck", depends_on=[machine_deployment])
    return PoolParts(node_names=pulumi.Output.from_input([]), machine_deployment=machine_deployment)


_IMAGE_VERSION = re.compile(r"v1\.\d+\.\d+")


def image_version_mismatch(template: Any, version: str) -> str | None:
    """A Kubernetes version written into the machine template (an image URL such as
    ``ubuntu-24.04-k8s-v1.35.0.qcow2``) that is not ``version``, else None: the Metal3 image
    is the user's and carries the kubelet, so after a tenant upgrade it must change too."""
    found = set(_IMAGE_VERSION.findall(json.dumps(template)))
    found.discard(version)
    return min(found) if found else None


def _capi_static(key: str, provider: str) -> tuple[str, str]:
    """apiVersion and kind of each Cluster API object (known before any output resolves)."""
    return {
        "bootstrap": (BOOTSTRAP_API, "KubeadmConfigTemplate"),
        "infrastructure": (INFRASTRUCTURE_API, INFRASTRUCTURE_KINDS[provider]),
        "deployment": (CLUSTER_API, "MachineDeployment"),
        "healthCheck": (CLUSTER_API, "MachineHealthCheck"),
    }[key]


def _capi_objects(
    name: str,
    tenant: str,
    pool: WorkerPool,
    labels: dict[str, str],
    version: str,
    namespace: str,
    cluster_name: str,
) -> dict[str, dict[str, Any]]:
    """Every Cluster API object of a prod pool, once the namespace and cluster name are known."""
    machine = pool.machine
    assert machine is not None
    bootstrap = kubeadm_config_template(
        name, namespace, tenant, pool.name, labels, machine.provider
    )
    infrastructure = infrastructure_machine_template(
        machine.provider, name, namespace, tenant, pool.name, machine.template
    )
    objects = {
        "bootstrap": bootstrap,
        "infrastructure": infrastructure,
        "deployment": machine_deployment(
            name,
            namespace,
            tenant,
            pool.name,
            cluster_name,
            pool.replicas,
            version,
            bootstrap,
            infrastructure,
            rollout_strategy(
                machine.provider,
                machine.rollout.model_dump(by_alias=True) if machine.rollout else None,
            ),
        ),
        "healthCheck": machine_health_check(
            f"{name}-health",
            namespace,
            tenant,
            pool.name,
            cluster_name,
            machine.health_check.unhealthy_after,
            machine.health_check.max_unhealthy,
        ),
    }
    return objects
