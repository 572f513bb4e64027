"""Kubernetes objects of one tenant, as plain dicts built by pure functions.

Management-cluster side: the tenant namespace's NetworkPolicies, the lab's hosted control plane
(a Kamaji ``TenantControlPlane``; prod's Cluster API ``Cluster`` + ``KamajiControlPlane`` +
infrastructure cluster are built in ``components.prod.cluster_specs`` from the parts here) and
an external ``DataStore``. Tenant side: GPU ``ResourceQuota``s and the declared GPU workloads.
``components.gpu_tenant`` and the environments' ``tenant`` modules only wire these to Pulumi
resources; the unit and contract tests validate them against the pinned CRDs.

Facts these builders rely on (read from upstream at the pinned versions, see platform.md §3):

* TCP (``kamaji.clastix.io/v1alpha1``): ``networkProfile.podCidrs``/``serviceCidrs`` (the
  singular fields are deprecated); Kamaji does not set ``loadBalancerIP`` from
  ``networkProfile.address``, so the MetalLB annotation on the Service pins the IP; without an
  address the Service names the lab's MetalLB pool and Kamaji takes the address MetalLB assigns
  (see ``components.lab.network``); the Service
  selects pods by ``kamaji.clastix.io/name: <tcp>``; ready when
  ``status.kubernetesResources.version.status == Ready``; admin kubeconfig in Secret
  ``<tcp>-admin-kubeconfig`` key ``admin.conf``.
"""

from __future__ import annotations

import base64
import binascii
import hashlib
import json
import urllib.parse
from collections.abc import Mapping, Sequence
from types import MappingProxyType
from typing import TYPE_CHECKING, Any, TypeAlias

import yaml

from components import dra
from components.config import (
    SYSTEM_NAMESPACES,
    ConfigError,
    ControlPlaneResources,
    DedicatedDataStore,
    DeviceQuota,
    GpuQuota,
    GpuRequest,
    Tenant,
    Workload,
)
from components.labels import TENANT_LABEL

if TYPE_CHECKING:
    import pulumi

# A fixed control-plane address: plain text, or a Pulumi output resolved at deploy time (the
# lab's MetalLB address). None lets the load balancer pick one.
Address: TypeAlias = "str | pulumi.Output[str] | None"

KAMAJI_API_VERSION = "kamaji.clastix.io/v1alpha1"
KAMAJI_NAMESPACE = "kamaji-system"

API_SERVER_PORT = 6443
KONNECTIVITY_PORT = 8132
METALLB_IPS_ANNOTATION = "metallb.io/loadBalancerIPs"
METALLB_POOL_ANNOTATION = "metallb.io/address-pool"
TCP_POD_LABEL = "kamaji.clastix.io/name"

# pulumi-kubernetes >= 4.18 awaits a custom resource until this JSONPath matches.
WAIT_FOR_ANNOTATION = "pulumi.com/waitFor"
TCP_READY_CONDITION = "jsonpath={.status.kubernetesResources.version.status}=Ready"

ADMIN_KUBECONFIG_KEY = "admin.conf"
# corev1.ResourceClaimsPerClass (k8s.io/api v0.35.0 core/v1/types.go:7724).
DEVICE_CLASS_QUOTA_SUFFIX = ".deviceclass.resource.k8s.io/devices"
SUPER_ADMIN_KUBECONFIG_KEY = "super-admin.conf"


# kindest/node (and kubeadm nodes generally) run the kubelet with the systemd cgroup driver.
# ``add``, not ``replace``: Kamaji (26.8.2-edge, ``internal/kubeadm/uploadconfig.go:83``) sets the
# generated KubeletConfiguration's ``cgroupDriver`` from the deprecated ``kubelet.cgroupfs``, and
# the key (``omitempty``) is absent when that is unset, so an RFC 6902 ``replace`` of it fails: the
# kubelet-config phase would never finish and the control plane never become Ready. Upstream's own
# sample at that tag (``config/samples/kamaji_v1alpha1_tenantcontrolplane.yaml``) still uses
# ``replace``; ``add`` sets the member either way.
def kubelet_patches(lab: bool) -> list[dict[str, Any]]:
    """JSON patches of the kubelet configuration Kamaji generates for the tenant's nodes: the
    systemd cgroup driver everywhere; in the lab also what kind sets for its own nodes, since the
    kindest/node workers share the host's swap and disk (with failSwapOn the kubelet would not
    start on a host with a swap file, and the default eviction thresholds taint every worker on a
    laptop disk under 10-15 % free)."""
    patches: list[dict[str, Any]] = [{"op": "add", "path": "/cgroupDriver", "value": "systemd"}]
    if lab:
        patches += [
            {"op": "add", "path": "/failSwapOn", "value": False},
            {
                "op": "add",
                "path": "/evictionHard",
                "value": {
                    "nodefs.available": "0%",
                    "nodefs.inodesFree": "0%",
                    "imagefs.available": "0%",
                },
            },
            {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},
        ]
    return patches


# Keys of a Secret holding an external DataStore's credentials, per driver. The credentials config
# value is a JSON object with exactly these keys (PEM text or plain strings).
DATASTORE_SECRET_KEYS: MappingProxyType[str, tuple[str, ...]] = MappingProxyType(
    {
        # Kamaji signs a client certificate per tenant: it needs the CA key and its own pair.
        "etcd": ("ca.crt", "ca.key", "tls.crt", "tls.key"),
        # An admin user that creates one database and one user per tenant, over TLS.
        "PostgreSQL": ("ca.crt", "username", "password"),
        "MySQL": ("ca.crt", "username", "password"),
        "NATS": ("ca.crt", "username", "password"),
    }
)


def tenant_labels(tenant_name: str) -> dict[str, str]:
    """Labels every object created in or for a tenant carries."""
    return {TENANT_LABEL: tenant_name}


def admin_kubeconfig_secret(control_plane_name: str) -> str:
    """Kamaji's admin kubeconfig Secret of a TenantControlPlane."""
    return f"{control_plane_name}-admin-kubeconfig"


def data_store_name(tenant: Tenant) -> str:
    """The DataStore a tenant's control plane binds to: a named (shared) one, the tenant's
    kamaji-etcd release, or the tenant's external DataStore."""
    binding = tenant.data_store
    if binding.name is not None:
        return binding.name
    assert binding.dedicated is not None  # enforced by DataStoreBinding
    if binding.dedicated.deploys_kamaji_etcd:
        return dedicated_etcd_name(tenant.name)
    return f"{tenant.name}-datastore"


# On the control-plane object (lab: TenantControlPlane; prod: KamajiControlPlane): the shape of
# the tenant's datastore as deployed. The next preview reads it back from the live object
# (gpu_tenant's identity read) and refuses a change no component can apply to a running tenant:
# * Kamaji keeps a control plane on the DataStore, schema and user it was created with
#   (clastix/kamaji 26.8.2-edge api/v1alpha1/tenantcontrolplane_types.go:512-519: "changing the
#   dataStoreSchema is not supported", no migration across drivers; the prod provider refuses a
#   username change, cluster-api-control-plane-provider-kamaji v0.20.0
#   api/v1alpha2/kamajicontrolplane_types.go:198-205);
# * kamaji-etcd v0.17.0 starts every member with --initial-cluster-state=new
#   (charts/kamaji-etcd/templates/etcd_sts.yaml:83-84), so 3 -> 1 members loses quorum and
#   3 -> 5 adds members that never join, and a StatefulSet's volumeClaimTemplates cannot change
#   (:136-153; the API server refuses the update).
DATASTORE_SHAPE_ANNOTATION = "gpu-platform.io/datastore-shape"


def datastore_shape(tenant: Tenant) -> dict[str, str]:
    """The keys of ``tenants[].dataStore`` fixed at creation, with their values."""
    binding = tenant.data_store
    shape = {"dataStore.schema": binding.schema_name, "dataStore.username": binding.username}
    if binding.name is not None:
        shape["dataStore.name"] = binding.name
        return shape
    assert binding.dedicated is not None  # enforced by DataStoreBinding
    dedicated = binding.dedicated
    shape["dataStore.dedicated.driver"] = dedicated.driver
    shape["dataStore.dedicated.endpoints"] = (
        "external" if dedicated.endpoints else "none (a kamaji-etcd release)"
    )
    if dedicated.deploys_kamaji_etcd:
        shape["dataStore.dedicated.replicas"] = str(dedicated.replicas)
        shape["dataStore.dedicated.storageSize"] = dedicated.storage_size
        shape["dataStore.dedicated.storageClassName"] = (
            dedicated.storage_class_name or "(the cluster's default)"
        )
    return shape


def datastore_shape_annotation(tenant: Tenant) -> dict[str, str]:
    return {DATASTORE_SHAPE_ANNOTATION: json.dumps(datastore_shape(tenant), sort_keys=True)}


def deployed_datastore_shape(metadata: Any) -> dict[str, str] | None:
    """The shape a live control-plane object was deployed with; None where it carries none (in
    a preview of a first deployment, or an object deployed before the annotation existed)."""
    if not isinstance(metadata, Mapping):
        return None
    annotations = metadata.get("annotations")
    text = annotations.get(DATASTORE_SHAPE_ANNOTATION) if isinstance(annotations, Mapping) else None
    if not isinstance(text, str):
        return None
    shape = json.loads(text)
    return {str(key): str(value) for key, value in shape.items()}


def datastore_shape_problem(
    index: int, deployed: Mapping[str, str], wanted: Mapping[str, str]
) -> str | None:
    """One line naming the first key of ``tenants[index].dataStore`` that differs from what the
    running tenant was created with, and the supported way; None when nothing differs."""
    changed = sorted(k for k in deployed.keys() | wanted.keys() if deployed.get(k) != wanted.get(k))
    if not changed:
        return None
    key = changed[0]
    return (
        f"tenants[{index}].{key}: {deployed.get(key, '(not set)')} -> "
        f"{wanted.get(key, '(not set)')} cannot be applied to a running tenant (its datastore's "
        "binding, schema, user, members and volumes are fixed at creation): keep the deployed "
        "value; to move a tenant to another datastore see docs/configuration.md, "
        '"Fixed at creation"'
    )


def dedicated_etcd_name(tenant_name: str) -> str:
    """Name of a tenant's dedicated kamaji-etcd: Helm release, workloads and DataStore."""
    return f"{tenant_name}-etcd"


def _resources(spec: Any) -> dict[str, dict[str, str]]:
    out: dict[str, dict[str, str]] = {}
    if spec.requests:
        out["requests"] = dict(spec.requests)
    if spec.limits:
        out["limits"] = dict(spec.limits)
    return out


def control_plane_resources(resources: ControlPlaneResources) -> dict[str, dict[str, Any]]:
    """Per-component requests/limits keyed like the TCP's ``deployment.resources``."""
    return {
        "apiServer": _resources(resources.api_server),
        "controllerManager": _resources(resources.controller_manager),
        "scheduler": _resources(resources.scheduler),
    }


def addons(lab: bool) -> dict[str, Any]:
    """CoreDNS and Konnectivity (the tenant API server reaches webhooks, aggregated APIs, logs and
    exec on the workers only through Konnectivity); in prod also Kamaji's kube-proxy. The lab runs
    its own kube-proxy instead (``components.lab.kube_proxy``): Kamaji's writes a conntrack sysctl
    that is read-only inside a kindest/node container and exits there."""
    enabled: dict[str, Any] = {
        "coreDNS": {},
        "konnectivity": {
            "server": {"port": KONNECTIVITY_PORT},
            "agent": {"mode": "DaemonSet"},
        },
    }
    if not lab:
        enabled["kubeProxy"] = {}
    return enabled


def kubernetes_spec(tenant: Tenant, version: str, lab: bool) -> dict[str, Any]:
    """The control plane's ``kubernetes`` block: version, kubelet patches, admission controllers
    (a TenantControlPlane's ``spec.kubernetes``; prod copies its fields into the
    KamajiControlPlane)."""
    kubernetes: dict[str, Any] = {
        "version": version,
        "kubelet": {"configurationJSONPatches": kubelet_patches(lab)},
    }
    if tenant.control_plane.admission_controllers is not None:
        kubernetes["admissionControllers"] = list(tenant.control_plane.admission_controllers)
    return kubernetes


def service_annotations(address: Address) -> dict[str, Any]:
    """The control-plane Service's annotation that pins ``address`` (MetalLB's), if any."""
    return {METALLB_IPS_ANNOTATION: address} if address is not None else {}


def tenant_control_plane(
    tenant: Tenant,
    *,
    namespace: str,
    kubernetes_version: str,
    address: Address,
    address_pool: str | None = None,
) -> dict[str, Any]:
    """The lab's TenantControlPlane: one per tenant, in the tenant's namespace, named after it.
    A pinned ``address`` goes into ``networkProfile.address`` and the MetalLB annotation;
    without one, the Service names ``address_pool`` and Kamaji reads back what MetalLB assigns
    (clastix/kamaji@26.8.2-edge api/v1alpha1/tenantcontrolplane_funcs.go:58-82)."""
    service: dict[str, Any] = {"serviceType": tenant.control_plane.service_type}
    network: dict[str, Any] = {
        "port": API_SERVER_PORT,
        "podCidrs": [tenant.network.pod_cidr],
        "serviceCidrs": [tenant.network.service_cidr],
    }
    if address is not None:
        network["address"] = address
        service["additionalMetadata"] = {"annotations": service_annotations(address)}
    elif address_pool is not None:
        # Kamaji merges these annotations into the Service it creates
        # (internal/resources/k8s_service_resource.go:94-95).
        service["additionalMetadata"] = {"annotations": {METALLB_POOL_ANNOTATION: address_pool}}
    return {
        "apiVersion": KAMAJI_API_VERSION,
        "kind": "TenantControlPlane",
        "metadata": {
            "name": tenant.name,
            "namespace": namespace,
            "labels": tenant_labels(tenant.name),
            "annotations": {
                WAIT_FOR_ANNOTATION: TCP_READY_CONDITION,
                **datastore_shape_annotation(tenant),
            },
        },
        "spec": {
            "dataStore": data_store_name(tenant),
            "dataStoreSchema": tenant.data_store.schema_name,
            "dataStoreUsername": tenant.data_store.username,
            "controlPlane": {
                "deployment": {
                    "replicas": tenant.control_plane.replicas,
                    "resources": control_plane_resources(tenant.control_plane.resources),
                },
                "service": service,
            },
            "kubernetes": kubernetes_spec(tenant, kubernetes_version, lab=True),
            "networkProfile": network,
            "addons": addons(lab=True),
        },
    }


# ------------------------------------------------------------------------------- DataStores


def _secret_ref(secret_name: str, secret_namespace: str, key: str) -> dict[str, Any]:
    return {"secretReference": {"name": secret_name, "namespace": secret_namespace, "keyPath": key}}


def external_datastore(
    name: str,
    dedicated: DedicatedDataStore,
    *,
    secret_name: str,
    secret_namespace: str,
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """A cluster-scoped DataStore for an external server, its credentials in one Secret with the
    keys of ``DATASTORE_SECRET_KEYS[driver]``."""
    if not dedicated.endpoints:
        raise ValueError("an external DataStore needs endpoints")

    def ref(key: str) -> dict[str, Any]:
        return _secret_ref(secret_name, secret_namespace, key)

    spec: dict[str, Any] = {"driver": dedicated.driver, "endpoints": list(dedicated.endpoints)}
    if dedicated.driver == "etcd":
        spec["tlsConfig"] = {
            "certificateAuthority": {"certificate": ref("ca.crt"), "privateKey": ref("ca.key")},
            "clientCertificate": {"certificate": ref("tls.crt"), "privateKey": ref("tls.key")},
        }
    else:
        spec["tlsConfig"] = {"certificateAuthority": {"certificate": ref("ca.crt")}}
        spec["basicAuth"] = {"username": ref("username"), "password": ref("password")}
    return {
        "apiVersion": KAMAJI_API_VERSION,
        "kind": "DataStore",
        "metadata": {"name": name, "labels": dict(labels)},
        "spec": spec,
    }


def datastore_secret_data(driver: str, raw: str, config_key: str) -> dict[str, str]:
    """The Secret ``stringData`` from the credentials config value: a JSON object with the
    driver's keys. Errors name the config key and the expected keys, never the value."""
    expected = DATASTORE_SECRET_KEYS[driver]
    try:
        parsed = json.loads(raw)
    except ValueError:
        parsed = None
    if not isinstance(parsed, dict):
        raise ConfigError(
            f"config {config_key}: expected a JSON object with keys {', '.join(expected)} "
            f"for a {driver} DataStore"
        )
    missing = [key for key in expected if not isinstance(parsed.get(key), str) or not parsed[key]]
    if missing:
        raise ConfigError(
            f"config {config_key}: the {driver} DataStore credentials lack {', '.join(missing)}"
        )
    return {key: parsed[key] for key in expected}


# -------------------------------------------------------------------------- NetworkPolicies


def network_policies(
    tenant_name: str, namespace: str, blocked_sources: Sequence[str] = ()
) -> list[dict[str, Any]]:
    """Ingress isolation of a tenant namespace in the management cluster.

    * deny all ingress by default;
    * allow pods of the same namespace (control plane replicas, a dedicated etcd, its jobs);
    * allow the ``kamaji-system`` namespace (Kamaji's controller drives the control plane and
      sets up the datastore);
    * allow the API server (6443) and Konnectivity (8132) of this tenant's control plane pods
      from any address *except* ``blocked_sources``.

    Workers reach the control plane through its LoadBalancer address from outside the
    management cluster's pod network: in the lab from the ``kind`` docker network, whose subnet
    is known only at deploy time, in prod from the machine network. So the worker-facing rule
    allows ``0.0.0.0/0`` and excludes the management cluster's pod CIDR (``blocked_sources``,
    known in the lab): pods of other tenants' namespaces — other control planes, other
    datastores — are then refused on every port, including these two. Where the pod CIDR is
    not known (an existing prod cluster), the two ports stay open cluster-wide; they are the
    ones exposed to the workers anyway and are protected by the API server's authentication.
    "Cluster-wide" is said with an explicit all-namespaces peer next to the ``ipBlock``: the
    Cluster API controllers (bootstrap tokens, node references, provider IDs) reach the tenant
    API from management-cluster pods, and CNIs such as Cilium never match pod traffic with an
    ``ipBlock``, not even ``0.0.0.0/0``.
    """
    labels = tenant_labels(tenant_name)
    all_pods: dict[str, Any] = {}
    ip_block: dict[str, Any] = {"cidr": "0.0.0.0/0"}
    port_sources: list[dict[str, Any]] = [{"ipBlock": ip_block}]
    if blocked_sources:
        ip_block["except"] = list(blocked_sources)
    else:
        port_sources.append({"namespaceSelector": {}})

    def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "metadata": {"name": name, "namespace": namespace, "labels": dict(labels)},
            "spec": spec,
        }

    return [
        policy("default-deny-ingress", {"podSelector": all_pods, "policyTypes": ["Ingress"]}),
        policy(
            "allow-same-namespace",
            {
                "podSelector": all_pods,
                "policyTypes": ["Ingress"],
                "ingress": [{"from": [{"podSelector": {}}]}],
            },
        ),
        policy(
            "allow-kamaji-system",
            {
                "podSelector": all_pods,
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": [
                            {
                                "namespaceSelector": {
                                    "matchLabels": {"kubernetes.io/metadata.name": KAMAJI_NAMESPACE}
                                }
                            }
                        ]
                    }
                ],
            },
        ),
        policy(
            "allow-control-plane-ports",
            {
                "podSelector": {"matchLabels": {TCP_POD_LABEL: tenant_name}},
                "policyTypes": ["Ingress"],
                "ingress": [
                    {
                        "from": port_sources,
                        "ports": [
                            {"protocol": "TCP", "port": API_SERVER_PORT},
                            {"protocol": "TCP", "port": KONNECTIVITY_PORT},
                        ],
                    }
                ],
            },
        ),
    ]


# --------------------------------------------------------------------------- inside a tenant


def gpu_limits(request: GpuRequest) -> dict[str, str]:
    """A container's HAMi resources: whole cards as an integer, memory as plain MiB (a unit
    suffix makes HAMi ignore the request) or a percentage, compute as % of one card."""
    limits = {"nvidia.com/gpu": str(request.cards)}
    if request.memory_mib is not None:
        limits["nvidia.com/gpumem"] = str(request.memory_mib)
    else:
        limits["nvidia.com/gpumem-percentage"] = str(request.memory_percentage)
    limits["nvidia.com/gpucores"] = str(request.cores)
    return limits


def resource_quota(quota: GpuQuota, tenant_name: str) -> dict[str, Any]:
    """A namespace's GPU quota: HAMi enforces the ``limits.nvidia.com/gpumem``/``gpucores`` keys
    itself, ``requests.nvidia.com/gpu`` is Kubernetes' own extended-resource quota."""
    return _gpu_quota(
        quota.namespace,
        tenant_name,
        {
            "limits.nvidia.com/gpumem": str(quota.gpu_memory_mib),
            "limits.nvidia.com/gpucores": str(quota.gpu_cores),
            "requests.nvidia.com/gpu": str(quota.gpus),
        },
    )


def device_quota(
    quota: DeviceQuota, tenant_name: str, device_classes: Sequence[str]
) -> dict[str, Any]:
    """A ``gpuSharing: dra`` namespace's quota: ``devices`` for each of the platform's
    DeviceClasses, under the name Kubernetes' ResourceClaim evaluator charges
    (``<class>.deviceclass.resource.k8s.io/devices``: kubernetes v1.35.0
    pkg/quota/v1/evaluator/core/resource_claims.go:46-50, k8s.io/api v0.35.0
    core/v1/types.go:7724). Each ResourceClaim in the namespace, those the resourceclaim
    controller creates from templates for pods included, counts its requests' ``count`` per class
    (``allocationMode: All`` as 32, resource_claims.go:240-256) at creation, allocated or not.
    A class per key: the claim rules refuse any other class, and one class's devices cannot be
    claimed under another's quota."""
    hard = {
        f"{name}{DEVICE_CLASS_QUOTA_SUFFIX}": str(quota.devices)
        for name in sorted(set(device_classes))
    }
    return _gpu_quota(quota.namespace, tenant_name, hard)


def _gpu_quota(namespace: str, tenant_name: str, hard: dict[str, str]) -> dict[str, Any]:
    """The namespace's ResourceQuota ``gpu-quota`` (one name for either path, so a tenant that
    switches gpuSharing updates it in place)."""
    return {
        "metadata": {
            "name": "gpu-quota",
            "namespace": namespace,
            "labels": tenant_labels(tenant_name),
        },
        "spec": {"hard": hard},
    }


def namespaces_to_create(tenant: Tenant, existing: Sequence[str] = ()) -> list[str]:
    """Namespaces the tenant's quotas and workloads need that a cluster does not start with
    (``default`` and the system ones) and that are not created otherwise (``existing``)."""
    skip = {"default", *SYSTEM_NAMESPACES, *existing}
    wanted = [
        *(quota.namespace for quota in tenant.gpu_quotas),
        *(quota.namespace for quota in tenant.device_quotas),
        *(workload.namespace for workload in tenant.workloads),
    ]
    return sorted({ns for ns in wanted if ns not in skip})


def workload_deployment(workload: Workload, tenant_name: str) -> dict[str, Any]:
    """A declared GPU workload as a Deployment whose containers ask HAMi for their share."""
    selector = {"app.kubernetes.io/name": workload.name, **tenant_labels(tenant_name)}
    return {
        "metadata": {
            "name": workload.name,
            "namespace": workload.namespace,
            "labels": dict(selector),
        },
        "spec": {
            "replicas": workload.replicas,
            "selector": {"matchLabels": dict(selector)},
            "template": {
                "metadata": {"labels": dict(selector)},
                "spec": {
                    "containers": [
                        {
                            "name": workload.name,
                            "image": workload.image,
                            "command": list(workload.command),
                            "resources": {"limits": gpu_limits(workload.gpu)},
                        }
                    ]
                },
            },
        },
    }


# The digest of a DRA workload's claim template spec on its pod template (``dra_workload``).
CLAIM_SPEC_ANNOTATION = "gpu-platform.io/claim-template-spec"


def dra_workload(
    workload: Workload, tenant_name: str, device_class: str, driver: str
) -> tuple[dict[str, Any], dict[str, Any]]:
    """A declared workload of a ``gpuSharing: dra`` tenant: its ResourceClaimTemplate (one
    claim per pod for the same cards, MiB and units, ``components.dra``) and its Deployment,
    whose pods refer to the template instead of asking HAMi's extended resources."""
    deployment = workload_deployment(workload, tenant_name)
    name = f"{workload.name}-gpu"
    request = dra.CardRequest(
        cards=workload.gpu.cards, memory_mib=workload.gpu.memory_mib, compute=workload.gpu.cores
    )
    template = dra.claim_template(name, workload.namespace, request, device_class, driver)
    template["metadata"]["labels"] = dict(deployment["metadata"]["labels"])
    claims, resources = dra.pod_claim_fields(name)
    pod = deployment["spec"]["template"]["spec"]
    pod["resourceClaims"] = claims
    pod["containers"][0]["resources"] = resources
    # A template's spec is immutable (kubernetes v1.35.0
    # pkg/apis/resource/validation/validation.go:617-624), so a changed request replaces it
    # under the same name (gpu_tenant.py) and the pods must follow: the spec's digest in the pod
    # template rolls the Deployment onto claims made from the new one.
    digest = hashlib.sha256(json.dumps(template["spec"], sort_keys=True).encode()).hexdigest()
    annotations = deployment["spec"]["template"]["metadata"].setdefault("annotations", {})
    annotations[CLAIM_SPEC_ANNOTATION] = digest[:16]
    return template, deployment


# ------------------------------------------------------------------------------ kubeconfig


def decode_kubeconfig(data: Mapping[str, str] | None, key: str, secret_name: str) -> str:
    """The kubeconfig text from a Secret's base64 ``data``."""
    if not data or key not in data:
        raise ValueError(f"Secret {secret_name} has no key {key!r}: is the control plane ready?")
    try:
        return base64.b64decode(data[key], validate=True).decode()
    except (binascii.Error, UnicodeDecodeError) as exc:
        raise ValueError(f"Secret {secret_name} key {key!r} is not base64 text") from exc


def kubeconfig_server(kubeconfig: str) -> str:
    """The API server URL of the kubeconfig's current context (or its only cluster)."""
    config = yaml.safe_load(kubeconfig)
    if not isinstance(config, dict):
        raise ValueError("not a kubeconfig")
    clusters = {c.get("name"): c.get("cluster", {}) for c in config.get("clusters") or []}
    contexts = {c.get("name"): c.get("context", {}) for c in config.get("contexts") or []}
    current = contexts.get(config.get("current-context"), {})
    cluster = clusters.get(current.get("cluster"))
    if cluster is None and len(clusters) == 1:
        cluster = next(iter(clusters.values()))
    server = (cluster or {}).get("server")
    if not isinstance(server, str) or not server:
        raise ValueError("the kubeconfig names no API server")
    return server


def kubeconfig_address(kubeconfig: str) -> str:
    """The host of the kubeconfig's API server URL (Kamaji writes ``https://<address>:<port>``)."""
    host = urllib.parse.urlsplit(kubeconfig_server(kubeconfig)).hostname
    if not host:
        raise ValueError("the kubeconfig's API server URL names no host")
    return host
