"""Prod's hosted control plane of one tenant, as plain dicts built by pure functions: the Cluster
API ``Cluster``, the ``KamajiControlPlane`` it references and its infrastructure cluster
(``Metal3Cluster``, or CAPD's ``DockerCluster``). ``components.prod.tenant`` registers them; the
unit and contract tests validate them against the pinned CRDs.

Facts these builders rely on (read from upstream at the pinned versions, see platform.md §3):

* KamajiControlPlane (``controlplane.cluster.x-k8s.io/v1alpha2``, provider v0.20+): copied into a
  TCP of the same name; pod/service CIDRs come from the owning ``Cluster``'s ``clusterNetwork``;
  ``status.ready`` turns true only after the Secret ``<cluster>-kubeconfig`` (key ``value``) is
  written. The provider does not patch a ``Metal3Cluster``: it checks that its
  ``controlPlaneEndpoint`` equals the control plane's address, and CAPM3's webhook rejects a
  Metal3Cluster without ``controlPlaneEndpoint.host``.
* ``Cluster`` (``cluster.x-k8s.io/v1beta2``) references take ``apiGroup``/``kind``/``name``.
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from components.availability import topology_spread
from components.config import Tenant
from components.tenant_specs import (
    API_SERVER_PORT,
    WAIT_FOR_ANNOTATION,
    Address,
    addons,
    control_plane_resources,
    data_store_name,
    datastore_shape_annotation,
    kubernetes_spec,
    service_annotations,
    tenant_labels,
)

KCP_API_GROUP = "controlplane.cluster.x-k8s.io"
KCP_API_VERSION = f"{KCP_API_GROUP}/v1alpha2"
CAPI_API_VERSION = "cluster.x-k8s.io/v1beta2"
INFRASTRUCTURE_API_GROUP = "infrastructure.cluster.x-k8s.io"
INFRASTRUCTURE_API_VERSION = f"{INFRASTRUCTURE_API_GROUP}/v1beta2"
INFRASTRUCTURE_KINDS = MappingProxyType({"metal3": "Metal3Cluster", "docker": "DockerCluster"})
# The KamajiControlPlane is awaited (``WAIT_FOR_ANNOTATION``, a JSON list: every entry must
# hold, pulumi/pulumi-kubernetes v4.32.0 provider/pkg/metadata/overrides.go:85-140) until:
# * ``status.ready`` is true: the kubeconfig Secret exists (create);
# * its ``TenantControlPlaneCreated`` condition is True *for the current generation*: the
#   provider stamps the condition with the KCP's generation on every reconcile and sets it False
#   with the error when its write of the TenantControlPlane fails (clastix/cluster-api-control-
#   plane-provider-kamaji v0.20.0 controllers/conditions.go:14-50,
#   controllers/kamajicontrolplane_controller.go:129-178), and pulumi-kubernetes waits while the
#   condition's observedGeneration lags (provider/pkg/await/condition/kubectl.go:30-86). The KCP
#   status has no observedGeneration and ``ready`` stays true through an update, so the JSONPath
#   alone passed at once: a change Kamaji refuses (e.g. the datastore schema, kamaji 26.8.2-edge
#   api/v1alpha1/tenantcontrolplane_types.go:519) was reported as applied. Now ``up`` waits, and
#   fails at the update timeout with the condition's message.
KCP_READY_CONDITION = json.dumps(
    ["jsonpath={.status.ready}=true", "condition=TenantControlPlaneCreated"]
)
# The key of the kubeconfig in the Secret ``capi_kubeconfig_secret`` names.
CAPI_KUBECONFIG_KEY = "value"


def capi_kubeconfig_secret(cluster_name: str) -> str:
    """The Cluster API kubeconfig Secret the Kamaji control-plane provider writes."""
    return f"{cluster_name}-kubeconfig"


def kamaji_control_plane(
    tenant: Tenant, *, namespace: str, kubernetes_version: str, address: Address
) -> dict[str, Any]:
    """Prod: the KamajiControlPlane the Cluster references; the provider turns it into a TCP of
    the same name. Awaited until ``status.ready`` (the kubeconfig Secret exists) and the
    provider has written this generation into its TenantControlPlane (``KCP_READY_CONDITION``)."""
    kubernetes = kubernetes_spec(tenant, kubernetes_version, lab=False)
    resources = control_plane_resources(tenant.control_plane.resources)
    network: dict[str, Any] = {"serviceType": tenant.control_plane.service_type}
    if address is not None:
        network["serviceAddress"] = address
        network["serviceAnnotations"] = service_annotations(address)
    spec: dict[str, Any] = {
        "version": kubernetes["version"],
        "replicas": tenant.control_plane.replicas,
        "dataStoreName": data_store_name(tenant),
        "dataStoreSchema": tenant.data_store.schema_name,
        "dataStoreUsername": tenant.data_store.username,
        "addons": addons(lab=False),
        "kubelet": kubernetes["kubelet"],
        "network": network,
        "apiServer": {"resources": resources["apiServer"]},
        "controllerManager": {"resources": resources["controllerManager"]},
        "scheduler": {"resources": resources["scheduler"]},
    }
    if "admissionControllers" in kubernetes:
        spec["admissionControllers"] = kubernetes["admissionControllers"]
    if tenant.control_plane.replicas > 1:
        # Its replicas on different nodes (hard) and zones (soft); the provider copies this into
        # the TenantControlPlane and Kamaji fills in its Deployment's selector
        # (components.availability).
        spec["deployment"] = {"topologySpreadConstraints": topology_spread(None)}
    return {
        "apiVersion": KCP_API_VERSION,
        "kind": "KamajiControlPlane",
        "metadata": {
            "name": tenant.name,
            "namespace": namespace,
            "labels": tenant_labels(tenant.name),
            "annotations": {
                WAIT_FOR_ANNOTATION: KCP_READY_CONDITION,
                **datastore_shape_annotation(tenant),
            },
        },
        "spec": spec,
    }


def infrastructure_cluster(
    provider: str, *, name: str, namespace: str, labels: Mapping[str, str], address: Address
) -> dict[str, Any]:
    """The Cluster's infrastructure object. Metal3: the endpoint must be the control plane's
    fixed address (CAPM3 requires it, the Kamaji provider only checks it) and without a cloud
    provider CAPM3 sets node providerIDs itself."""
    kind = INFRASTRUCTURE_KINDS.get(provider)
    if kind is None:
        raise ValueError(f"unknown infrastructure provider {provider!r}: use metal3 or docker")
    spec: dict[str, Any] = {}
    if address is not None:
        spec["controlPlaneEndpoint"] = {"host": address, "port": API_SERVER_PORT}
    if provider == "metal3":
        spec["cloudProviderEnabled"] = False
    return {
        "apiVersion": INFRASTRUCTURE_API_VERSION,
        "kind": kind,
        "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
        "spec": spec,
    }


def capi_cluster(tenant: Tenant, *, namespace: str, infrastructure_provider: str) -> dict[str, Any]:
    """The Cluster API Cluster: network from the tenant config, the KamajiControlPlane and the
    infrastructure cluster (both named after the tenant) as v1beta2 references."""
    kind = INFRASTRUCTURE_KINDS.get(infrastructure_provider)
    if kind is None:
        raise ValueError(
            f"unknown infrastructure provider {infrastructure_provider!r}: use metal3 or docker"
        )
    return {
        "apiVersion": CAPI_API_VERSION,
        "kind": "Cluster",
        "metadata": {
            "name": tenant.name,
            "namespace": namespace,
            "labels": tenant_labels(tenant.name),
        },
        "spec": {
            "clusterNetwork": {
                "apiServerPort": API_SERVER_PORT,
                "pods": {"cidrBlocks": [tenant.network.pod_cidr]},
                "services": {"cidrBlocks": [tenant.network.service_cidr]},
            },
            "controlPlaneRef": {
                "apiGroup": KCP_API_GROUP,
                "kind": "KamajiControlPlane",
                "name": tenant.name,
            },
            "infrastructureRef": {
                "apiGroup": INFRASTRUCTURE_API_GROUP,
                "kind": kind,
                "name": tenant.name,
            },
        },
    }
