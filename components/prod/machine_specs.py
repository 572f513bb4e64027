"""Prod worker pools as plain data: Cluster API objects for one pool.

Pure functions only; ``components.prod.machines`` turns them into resources and the contract
tests validate them against the pinned CRDs (cluster-api v1.13.5 v1beta2, CAPM3 v1.13.2 v1beta2,
CAPD v1.13.5 v1beta2).
"""

from __future__ import annotations

import hashlib
import json
import re
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from components.gpu_inventory import kubelet_node_labels_arg
from components.labels import POOL_LABEL, TENANT_LABEL

DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")

# API versions of the pinned Cluster API contract (v1beta2, CAPI v1.13).
CLUSTER_API = "cluster.x-k8s.io/v1beta2"
BOOTSTRAP_GROUP = "bootstrap.cluster.x-k8s.io"
BOOTSTRAP_API = f"{BOOTSTRAP_GROUP}/v1beta2"
INFRASTRUCTURE_GROUP = "infrastructure.cluster.x-k8s.io"
INFRASTRUCTURE_API = f"{INFRASTRUCTURE_GROUP}/v1beta2"
INFRASTRUCTURE_KINDS = MappingProxyType(
    {"metal3": "Metal3MachineTemplate", "docker": "DockerMachineTemplate"}
)
CLUSTER_NAME_LABEL = "cluster.x-k8s.io/cluster-name"


def parse_duration_seconds(text: str) -> int:
    """Seconds in a Go-style duration of whole h/m/s units (``300s``, ``5m``, ``1h30m``)."""
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", text.strip())
    if not text.strip() or match is None:
        raise ValueError(f"{text!r} is not a duration like 300s, 5m or 1h30m")
    hours, minutes, seconds = (int(part) if part else 0 for part in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def content_name(base: str, content: Any) -> str:
    """``<base>-<8 hex>`` from the content: Cluster API templates are treated as immutable, so a
    changed template gets a new name and the MachineDeployment rolls its machines to it."""
    digest = hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()[:8]
    return f"{base[:54]}-{digest}"


def _object_name(name: str) -> str:
    if len(name) > 63 or not DNS1123_LABEL.match(name):
        raise ValueError(
            f"{name!r} must be a DNS-1123 label of at most 63 characters (Cluster API uses it "
            "as a label value): shorten the tenant or pool name"
        )
    return name


def machine_selector(cluster_name: str, pool: str) -> dict[str, str]:
    """Labels that pick the pool's machines (MachineDeployment selector, health check)."""
    return {CLUSTER_NAME_LABEL: cluster_name, POOL_LABEL: pool}


# Without a cloud provider (the tenant's Metal3Cluster sets cloudProviderEnabled: false), CAPM3
# finds a Node by this label, the BareMetalHost's UID that the bare-metal operator always puts in
# the config drive's metadata as ``uuid``, and then writes ``metal3://<ns>/<bmh>/<m3m>`` into
# the Node's (empty) spec.providerID itself (CAPM3 v1.13.2
# baremetal/metal3machine_manager.go:1548-1612 SetProviderIDFromNodeLabel;
# docs/deployment_workflow.md:15-25). The kubelet must therefore NOT get a --provider-id: the
# metadata key ``providerid`` exists only when a Metal3DataTemplate renders it
# (baremetal/metal3data_manager.go:1692), cloud-init renders a missing key as
# ``CI_MISSING_JINJA_VAR/providerid``, the field is immutable, and CAPM3 then refuses the node
# ("node using unsupported providerID format"), so the Machine never gets its provider ID and the
# node keeps Cluster API's uninitialized taint.
METAL3_NODE_LABEL = "metal3.io/uuid={{ ds.meta_data.uuid }}"


def kubeadm_config_template(
    name: str,
    namespace: str,
    tenant: str,
    pool: str,
    node_labels: Mapping[str, str],
    provider: str = "metal3",
) -> dict[str, Any]:
    """KubeadmConfigTemplate (v1beta2): kubeadm join with the pool's node labels.

    v1beta2 ``nodeRegistration.kubeletExtraArgs`` is a list of ``{name, value}``. Labels go
    through the kubelet's ``--node-labels`` (the kubelet may set labels outside the
    ``kubernetes.io``/``k8s.io`` namespaces on itself). The kubelet's own configuration comes from
    the tenant's kubelet-config ConfigMap at join, so it matches the tenant's control plane.
    Metal3 machines also get the ``metal3.io/uuid`` label CAPM3 matches without a cloud provider
    (and no ``--provider-id``: CAPM3 sets it, see METAL3_NODE_LABEL).
    """
    labels_arg = kubelet_node_labels_arg(node_labels)
    if provider == "metal3":
        labels_arg = f"{labels_arg},{METAL3_NODE_LABEL}"
    extra_args = [{"name": "node-labels", "value": labels_arg}]
    spec = {"joinConfiguration": {"nodeRegistration": {"kubeletExtraArgs": extra_args}}}
    return {
        "apiVersion": BOOTSTRAP_API,
        "kind": "KubeadmConfigTemplate",
        "metadata": {
            "name": _object_name(content_name(name, spec)),
            "namespace": namespace,
            "labels": {TENANT_LABEL: tenant, POOL_LABEL: pool},
        },
        "spec": {"template": {"spec": spec}},
    }


def infrastructure_machine_template(
    provider: str,
    name: str,
    namespace: str,
    tenant: str,
    pool: str,
    template_spec: Mapping[str, Any],
) -> dict[str, Any]:
    """Metal3MachineTemplate or DockerMachineTemplate (v1beta2) with ``spec.template.spec`` =
    the pool's ``machine.template`` verbatim."""
    kind = INFRASTRUCTURE_KINDS.get(provider)
    if kind is None:
        raise ValueError(
            f"unknown infrastructure provider {provider!r}: use one of "
            f"{', '.join(sorted(INFRASTRUCTURE_KINDS))}"
        )
    spec = {"template": {"spec": dict(template_spec)}}
    return {
        "apiVersion": INFRASTRUCTURE_API,
        "kind": kind,
        "metadata": {
            "name": _object_name(content_name(name, {"kind": kind, **spec})),
            "namespace": namespace,
            "labels": {TENANT_LABEL: tenant, POOL_LABEL: pool},
        },
        "spec": spec,
    }


# Cluster API defaults a RollingUpdate to maxSurge 1, maxUnavailable 0 (v1.13.5
# internal/webhooks/machinedeployment.go:108-116): a rollout first creates one machine more than
# ``replicas``. A bare-metal pool usually has exactly as many GPU hosts as replicas, so that
# machine waits forever for a free BareMetalHost and the rollout never ends — and templates are
# named by their content, so any change to the image, labels or version starts one. Metal3 pools
# therefore replace one machine at a time in place of surging.
METAL3_ROLLOUT = MappingProxyType({"maxSurge": 0, "maxUnavailable": 1})


def rollout_strategy(
    provider: str, rolling_update: Mapping[str, int | str] | None = None
) -> dict[str, Any] | None:
    """``spec.rollout`` of a pool's MachineDeployment: the configured rolling update, else the
    metal3 default (no surge), else None (Cluster API's defaults, fine where machines are free)."""
    chosen = rolling_update
    if chosen is None and provider == "metal3":
        chosen = METAL3_ROLLOUT
    if chosen is None:
        return None
    return {"strategy": {"type": "RollingUpdate", "rollingUpdate": dict(chosen)}}


# How long Cluster API drains a Machine's node before deleting it anyway. The default, 0, drains
# without limit (cluster-api v1.13.5 internal/controllers/machine/machine_controller.go:712-726),
# and a tenant's drain cannot end on its own: tigera-operator and Calico's typha tolerate every
# NoSchedule taint, the cordon included (calico v3.32.1 charts/tigera-operator/values.yaml:123-127),
# so their pods are recreated on the node being drained, and the drain filters do not skip them
# (drain/filters.go; kubernetes-sigs/cluster-api#6894). Since pools are deleted while the control
# plane still runs (so the drain is not skipped, machine_controller.go:749-816), destroying a
# one-node pool, or rolling it with maxSurge 0, would wait forever. Ten minutes leaves the
# evictions that do end time to finish, well inside CAPI_DELETE_TIMEOUT.
NODE_DRAIN_TIMEOUT_SECONDS = 600
# After the drain, Cluster API waits for the node's volumes to be detached, also without limit by
# default (nodeVolumeDetachTimeoutExceeded is false while the timeout is unset or 0,
# machine_controller.go:728-745, waited on at :556-585): a GPU pod's volume whose driver cannot
# detach it (the node gone, a stuck attachment) would hold destroy and every rollout of the pool
# forever. Five minutes, so the drain and the detach together end well inside
# CAPI_DELETE_TIMEOUT.
NODE_VOLUME_DETACH_TIMEOUT_SECONDS = 300


def machine_deployment(
    name: str,
    namespace: str,
    tenant: str,
    pool: str,
    cluster_name: str,
    replicas: int,
    version: str,
    bootstrap_template: Mapping[str, Any],
    infrastructure_template: Mapping[str, Any],
    rollout: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """MachineDeployment (v1beta2): ``replicas`` machines of the tenant version, built from the
    two templates (referenced by apiGroup/kind/name, the v1beta2 contract), rolled out as
    ``rollout`` says (``rollout_strategy``; None keeps Cluster API's defaults)."""
    selector = machine_selector(cluster_name, pool)
    deployment: dict[str, Any] = {
        "apiVersion": CLUSTER_API,
        "kind": "MachineDeployment",
        "metadata": {
            "name": _object_name(name),
            "namespace": namespace,
            "labels": {**selector, TENANT_LABEL: tenant},
        },
        "spec": {
            "clusterName": cluster_name,
            "replicas": replicas,
            "selector": {"matchLabels": selector},
            "template": {
                "metadata": {"labels": {**selector, TENANT_LABEL: tenant}},
                "spec": {
                    "clusterName": cluster_name,
                    "version": version,
                    "bootstrap": {
                        "configRef": {
                            "apiGroup": BOOTSTRAP_GROUP,
                            "kind": bootstrap_template["kind"],
                            "name": bootstrap_template["metadata"]["name"],
                        }
                    },
                    "infrastructureRef": {
                        "apiGroup": INFRASTRUCTURE_GROUP,
                        "kind": infrastructure_template["kind"],
                        "name": infrastructure_template["metadata"]["name"],
                    },
                    "deletion": {
                        "nodeDrainTimeoutSeconds": NODE_DRAIN_TIMEOUT_SECONDS,
                        "nodeVolumeDetachTimeoutSeconds": NODE_VOLUME_DETACH_TIMEOUT_SECONDS,
                    },
                },
            },
        },
    }
    if rollout is not None:
        deployment["spec"]["rollout"] = dict(rollout)
    return deployment


# How long Pulumi waits for a Cluster API object to be gone on delete. pulumi-kubernetes deletes
# in the foreground and waits 10 minutes by default (v4.32.0 provider/pkg/await/await.go:964-981);
# a MachineDeployment is gone only once its Machines are, which on Metal3 means deprovisioning
# each host (cleaning and an IPA boot cycle, well over 10 minutes), and the Cluster and its
# KamajiControlPlane wait for the same Machines and the datastore cleanup. Applied to the
# MachineDeployment, the Cluster and the KamajiControlPlane.
CAPI_DELETE_TIMEOUT = "60m"

# How long a machine may go without a Node before its health check remediates it. Cluster API's
# default (10 minutes, counted from the Machine's creation until its infrastructure is ready) is
# shorter than provisioning a bare-metal GPU server (cleaning, writing the image, reboots with
# long POSTs, or waiting for a free BareMetalHost): the check would delete machines that are
# still being provisioned, and their replacements, over and over.
DEFAULT_NODE_STARTUP_TIMEOUT = "60m"


def machine_health_check(
    name: str,
    namespace: str,
    tenant: str,
    pool: str,
    cluster_name: str,
    unhealthy_after: str,
    max_unhealthy: str,
    node_startup_timeout: str = DEFAULT_NODE_STARTUP_TIMEOUT,
) -> dict[str, Any]:
    """MachineHealthCheck (v1beta2): a machine whose node is Ready=False/Unknown for
    ``unhealthy_after``, or that has no node ``node_startup_timeout`` after it was created (or
    its infrastructure became ready), is remediated, unless more than ``max_unhealthy`` are
    unhealthy (v1beta2 moved ``maxUnhealthy`` to
    ``remediation.triggerIf.unhealthyLessThanOrEqualTo``)."""
    timeout = parse_duration_seconds(unhealthy_after)
    startup = parse_duration_seconds(node_startup_timeout)
    limit: int | str = int(max_unhealthy) if max_unhealthy.isdigit() else max_unhealthy
    return {
        "apiVersion": CLUSTER_API,
        "kind": "MachineHealthCheck",
        "metadata": {
            "name": _object_name(name),
            "namespace": namespace,
            "labels": {TENANT_LABEL: tenant, POOL_LABEL: pool},
        },
        "spec": {
            "clusterName": cluster_name,
            "selector": {"matchLabels": machine_selector(cluster_name, pool)},
            "checks": {
                "nodeStartupTimeoutSeconds": startup,
                "unhealthyNodeConditions": [
                    {"type": "Ready", "status": "False", "timeoutSeconds": timeout},
                    {"type": "Ready", "status": "Unknown", "timeoutSeconds": timeout},
                ],
            },
            "remediation": {"triggerIf": {"unhealthyLessThanOrEqualTo": limit}},
        },
    }
