"""What the ManagementCluster installs, as plain data: the kind cluster config, Helm values for
MetalLB, cert-manager, Kamaji and the cluster-api-operator, the MetalLB and Cluster API provider
objects, and the parameters of the readiness gates.

Pure functions only: the component wires them to resources, the unit tests read them directly and
the contract tests check every values key and custom resource against the pinned upstream copies.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

import pulumi
import yaml

from components.config import ClusterApiVersions, PlatformConfig, ProviderFetch
from components.versions import PINNED

# Namespaces and release names. Kamaji's CRDs hard-code the namespace ``kamaji-system`` and the
# webhook service ``kamaji-webhook-service`` (release ``kamaji`` -> fullname ``kamaji``).
METALLB_NAMESPACE = "metallb-system"
METALLB_RELEASE = "metallb"
CERT_MANAGER_NAMESPACE = "cert-manager"
CERT_MANAGER_RELEASE = "cert-manager"
KAMAJI_NAMESPACE = "kamaji-system"
KAMAJI_RELEASE = "kamaji"
KAMAJI_ETCD_NAME = "kamaji-etcd"
DEFAULT_DATASTORE = "default"
CAPI_OPERATOR_NAMESPACE = "capi-operator-system"
CAPI_OPERATOR_RELEASE = "capi-operator"
METALLB_POOL_NAME = "gpu-platform-lab"

METALLB_API = "metallb.io/v1beta1"
CAPI_OPERATOR_API = "operator.cluster.x-k8s.io/v1alpha2"
KAMAJI_API = "kamaji.clastix.io/v1alpha1"

# What the readiness gate's server-side dry run creates (never persisted).
PROBE_NAME = "gpu-platform-readiness-probe"
PROBE_NAMESPACE = "default"

# cert-manager's CRDs the charts installed after it use (Kamaji's and the cluster-api-operator's
# Certificate and Issuer; kamaji-etcd's, HAMi's too when enabled), by their names at v1.21.1
# (deploy/charts/cert-manager/templates/crd-cert-manager.io_*.yaml).
CERT_MANAGER_API = "cert-manager.io/v1"
CERT_MANAGER_CRDS = (
    "certificates.cert-manager.io",
    "issuers.cert-manager.io",
    "clusterissuers.cert-manager.io",
    "certificaterequests.cert-manager.io",
)
# The Secret (one per provider namespace: the operator reads ``configSecret`` there) holding the
# operator's GitHub token under clusterctl's variable name ``github-token`` (cluster-api v1.13.5
# cmd/clusterctl/client/config/variables_client.go:21; the operator loads every key of the Secret
# as a variable, cluster-api-operator v0.28.0 internal/controller/phase_initialize.go:36-60).
CAPI_GITHUB_TOKEN_KEY = "github-token"
CAPI_CONFIG_SECRET_PREFIX = "gpu-platform-capi-config"

Values = dict[str, Any]


# ------------------------------------------------------------------------------------ kind


def kind_config(cluster_name: str, node_image: str, pod_subnet: str, service_subnet: str) -> str:
    """The kind cluster config (``kind create cluster --config -``): one control-plane node on
    the pinned image, the configured pod and service subnets."""
    config = {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": cluster_name,
        "networking": {"podSubnet": pod_subnet, "serviceSubnet": service_subnet},
        "nodes": [{"role": "control-plane", "image": node_image}],
    }
    return yaml.safe_dump(config, sort_keys=False)


def kind_cluster_identifier(
    cluster_name: str, config: str, environment: Mapping[str, str] | None = None
) -> str:
    """The management Provider's ``cluster_identifier``: the same for as long as the kind cluster
    is the same one (a new kubeconfig alone updates the Provider in place), different whenever
    the kind cluster command is replaced, i.e. when its ``stdin`` (the kind config) or its
    ``environment`` (name, node image, ``KIND_EXPERIMENTAL_DOCKER_NETWORK``) changes.
    pulumi-kubernetes replaces a provider only when this changes
    (provider/pkg/provider/provider.go:486-500 at v4.32.0), and the engine replaces everything on
    a replaced provider (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go:2798-2850,
    2909-2913): a new, empty kind cluster must never keep the old identifier."""
    identity = json.dumps(
        {"config": config, "environment": dict(environment or {})}, sort_keys=True
    )
    digest = hashlib.sha256(identity.encode()).hexdigest()[:12]
    return f"kind-{cluster_name}-{digest}"


# ------------------------------------------------------------------------------- Helm values


def metallb_values() -> Values:
    """MetalLB in L2 mode only: the lab needs no BGP, so the bundled frr-k8s stays off."""
    return {"frrk8s": {"enabled": False}}


def cert_manager_values() -> Values:
    """cert-manager with its CRDs (v1.21 key ``crds.enabled``; ``installCRDs`` is deprecated)."""
    return {"crds": {"enabled": True}}


# The Kamaji controller's resources. The chart's defaults (limits cpu 200m / memory 100Mi,
# values.yaml at 26.8.2-edge) are what Kamaji's own guides remove (`--set resources=null` in
# docs/content/getting-started/kamaji-kind.md, cluster-api/external-cluster.md and the Makefile's
# install target): one process runs the TCP and DataStore reconcilers, a manager with caches per
# tenant and the `failurePolicy: Fail` webhooks, so an OOM kill blocks every TCP change. Kamaji's
# benchmark (docs/content/reference/benchmark.md) saw ~600 MiB for 100 control planes. Explicit
# values rather than null, which the Python SDK drops from Helm values (pulumi/pulumi#12178).
KAMAJI_RESOURCES: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType(
    {
        "requests": MappingProxyType({"cpu": "100m", "memory": "128Mi"}),
        "limits": MappingProxyType({"cpu": "1", "memory": "1Gi"}),
    }
)


def kamaji_values(image_tag: str, deploy_etcd: bool) -> Values:
    """Kamaji's image of the pinned release (the chart is that release's, pinned by content in
    ``chart_cache``), with room to run (``KAMAJI_RESOURCES``). With ``deploy_etcd`` the bundled
    kamaji-etcd creates the DataStore ``default`` and Kamaji uses it for tenants that name none;
    without it no default DataStore is set (every tenant names its own)."""
    values: Values = {
        "image": {"tag": image_tag, "pullPolicy": "IfNotPresent"},
        "resources": {key: dict(value) for key, value in KAMAJI_RESOURCES.items()},
        "defaultDatastoreName": DEFAULT_DATASTORE if deploy_etcd else "",
        "telemetry": {"disabled": True},
        "kamaji-etcd": {"deploy": deploy_etcd},
    }
    if deploy_etcd:
        values["kamaji-etcd"].update(
            {
                "fullnameOverride": KAMAJI_ETCD_NAME,
                "datastore": {"enabled": True, "name": DEFAULT_DATASTORE},
            }
        )
    return values


def capi_operator_values() -> Values:
    """The operator alone: providers are declared as separate objects (reviewable, validated
    against their CRDs) instead of through the chart's ``core``/``bootstrap``/... values."""
    return {}


# ----------------------------------------------------------------------------- MetalLB objects


def _object(api_version: str, kind: str, name: str, namespace: str | None, spec: Values) -> Values:
    metadata: Values = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


def ip_address_pool(addresses: Sequence[str]) -> Values:
    """The lab's pool of tenant control-plane addresses. ``autoAssign: false``: MetalLB gives its
    addresses only to Services that name it (``metallb.io/address-pool``, what every unpinned
    tenant's control plane does) or pin one of them (``metallb.io/loadBalancerIPs``), never to
    another LoadBalancer Service (metallb/metallb@v0.16.1 internal/allocator/allocator.go:383-390
    skips such pools; AllocateFromPool, :423-473, serves a named one regardless)."""
    return _object(
        METALLB_API,
        "IPAddressPool",
        METALLB_POOL_NAME,
        METALLB_NAMESPACE,
        {"addresses": list(addresses), "autoAssign": False},
    )


def l2_advertisement() -> Values:
    """Announce the lab pool on the kind bridge (L2 / ARP)."""
    return _object(
        METALLB_API,
        "L2Advertisement",
        METALLB_POOL_NAME,
        METALLB_NAMESPACE,
        {"ipAddressPools": [METALLB_POOL_NAME]},
    )


# --------------------------------------------------------------------- Cluster API providers


@dataclass(frozen=True)
class CapiProvider:
    """One provider object of the cluster-api-operator, in its own namespace."""

    kind: str
    name: str
    namespace: str
    version: str
    crds: tuple[str, ...]
    fetch_url: str | None = None
    manager: Values | None = None
    deployment: Values | None = None
    fetch: ProviderFetch | None = None

    @property
    def resource(self) -> str:
        """The fully qualified resource name (``kubectl wait <resource>/<name>``)."""
        return f"{self.kind.lower()}s.operator.cluster.x-k8s.io"

    def manifest(self, config_secret: pulumi.Input[str] | None = None) -> Values:
        """The provider object; ``config_secret`` names the Secret in the provider's namespace
        whose keys the operator reads as clusterctl variables (``spec.configSecret``)."""
        spec: Values = {"version": self.version}
        fetch_config = self.fetch_config()
        if fetch_config is not None:
            spec["fetchConfig"] = fetch_config
        if config_secret is not None:
            spec["configSecret"] = {"name": config_secret, "namespace": self.namespace}
        if self.manager is not None:
            spec["manager"] = self.manager
        if self.deployment is not None:
            spec["deployment"] = self.deployment
        return _object(CAPI_OPERATOR_API, self.kind, self.name, self.namespace, spec)

    def fetch_config(self) -> Values | None:
        """``spec.fetchConfig``: one of url, an OCI artifact or a ConfigMap label selector (the
        CRD allows exactly one); None lets the operator use clusterctl's built-in GitHub
        repository for the provider's name. The operator looks for the ConfigMaps in the
        provider's own namespace, by ``matchLabels`` only (cluster-api-operator v0.28.0
        internal/controller/manifests_downloader.go:54-66, 127-142)."""
        if self.fetch_url is not None:
            return {"url": self.fetch_url}
        if self.fetch is None:
            return None
        if self.fetch.oci is not None:
            return {"oci": self.fetch.oci}
        return {"selector": {"matchLabels": dict(self.fetch.config_map_labels or {})}}


def capi_config_secret_name(token: str) -> str:
    """The name of the providers' config Secret for ``token``. The operator treats the Secret's
    content as immutable ("If changes need to be made, a new object can be created and the name
    should be updated", ``spec.configSecret`` in the v0.28.0 CRDs): a new token gets a new name,
    which updates every provider object. The name carries 40 bits of the token's SHA-256, which
    tells nothing usable about a token."""
    digest = hashlib.sha256(token.encode()).hexdigest()[:10]
    return f"{CAPI_CONFIG_SECRET_PREFIX}-{digest}"


# The Kamaji control-plane provider's Deployment has one container, named ``controller`` (not
# ``manager``), started with ``--dynamic-infrastructure-clusters=${CACPPK_INFRASTRUCTURE_...}``
# and limited to 128Mi of memory (v0.20.0 config/control-plane-components.yaml:15426-15455),
# while it ``Owns(&corev1.Secret{})`` and so caches every Secret of the management cluster
# (controllers/kamajicontrolplane_controller.go:406-413): on a real management cluster it is
# OOM-killed in a loop and no KamajiControlPlane is reconciled (cozystack/cozystack#2708, whose
# first override missed because it named the container ``manager``).
KAMAJI_PROVIDER_CONTAINER = "controller"
KAMAJI_PROVIDER_UPSTREAM_MEMORY_LIMIT = "128Mi"
# cluster-api-operator replaces a container's resources whole (v0.28.0
# internal/controller/component_customizer.go:308-340 customizeContainer), so requests and limits
# are both given; CPU as upstream.
KAMAJI_PROVIDER_RESOURCES: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType(
    {
        "requests": MappingProxyType({"cpu": "10m", "memory": "256Mi"}),
        "limits": MappingProxyType({"cpu": "500m", "memory": "1Gi"}),
    }
)


# The Kamaji control-plane provider patches only the infrastructure clusters it knows (Metal3 is
# one); others (CAPD's DockerCluster) need its DynamicInfrastructureClusterPatch feature gate and
# their kind listed in --dynamic-infrastructure-clusters, or it refuses the Cluster.
def _kamaji_provider_manager(infrastructure: str) -> Values | None:
    """The Kamaji control-plane provider's manager settings for ``infrastructure``, if any.
    Feature gates merge with the manifest's own ``--feature-gates`` (component_customizer.go
    ``parseFeatureGates``)."""
    if infrastructure == "docker":
        return {"featureGates": {"DynamicInfrastructureClusterPatch": True}}
    return None


def _kamaji_provider_deployment(infrastructure: str) -> Values:
    """The Kamaji control-plane provider's container: memory for its Secret cache and, for CAPD,
    the DockerCluster kind. The flag is already in the manifest, so it goes through the
    container's ``args`` (``setArgs`` replaces an existing flag); ``manager.additionalArgs``
    refuses a flag the manifest has ("arg ... already exists", component_customizer.go:293-302)
    and the provider would never install."""
    container: Values = {
        "name": KAMAJI_PROVIDER_CONTAINER,
        "resources": {key: dict(value) for key, value in KAMAJI_PROVIDER_RESOURCES.items()},
    }
    if infrastructure == "docker":
        container["args"] = {"--dynamic-infrastructure-clusters": "DockerCluster"}
    return {"containers": [container]}


# Per infrastructure provider: namespace (clusterctl's default) and the CRDs a worker pool uses.
_INFRASTRUCTURE: MappingProxyType[str, tuple[str, tuple[str, ...]]] = MappingProxyType(
    {
        "metal3": (
            "capm3-system",
            (
                "metal3clusters.infrastructure.cluster.x-k8s.io",
                "metal3machinetemplates.infrastructure.cluster.x-k8s.io",
            ),
        ),
        "docker": (
            "capd-system",
            (
                "dockerclusters.infrastructure.cluster.x-k8s.io",
                "dockermachinetemplates.infrastructure.cluster.x-k8s.io",
            ),
        ),
    }
)


def capi_providers(versions: ClusterApiVersions) -> list[CapiProvider]:
    """Core Cluster API, the kubeadm bootstrap provider, the Kamaji control-plane provider and
    one infrastructure provider (metal3 is the reference, docker for tests), in install order.

    Every name here is in clusterctl's built-in provider list, which the operator consults (the
    Kamaji control-plane provider is there as ``kamaji``, fetched from
    github.com/clastix/cluster-api-control-plane-provider-kamaji releases), so no ``fetchConfig``
    is needed: ``spec.version`` selects the release. ``versions.fetch`` replaces that source for
    an offline cluster (an OCI artifact or ConfigMaps)."""
    infra_namespace, infra_crds = _INFRASTRUCTURE[versions.infrastructure.name]
    fetch = versions.fetch
    return [
        CapiProvider(
            "CoreProvider",
            "cluster-api",
            "capi-system",
            versions.core,
            (
                "clusters.cluster.x-k8s.io",
                "machinedeployments.cluster.x-k8s.io",
                # Pools with a health check create MachineHealthChecks; the gate is what orders
                # them after the operator has installed the CRD (it does so asynchronously).
                "machinehealthchecks.cluster.x-k8s.io",
            ),
            fetch=fetch.core,
        ),
        CapiProvider(
            "BootstrapProvider",
            "kubeadm",
            "capi-kubeadm-bootstrap-system",
            versions.bootstrap_kubeadm,
            ("kubeadmconfigtemplates.bootstrap.cluster.x-k8s.io",),
            fetch=fetch.bootstrap_kubeadm,
        ),
        CapiProvider(
            "ControlPlaneProvider",
            "kamaji",
            "capi-kamaji-control-plane-system",
            versions.control_plane_kamaji,
            ("kamajicontrolplanes.controlplane.cluster.x-k8s.io",),
            manager=_kamaji_provider_manager(versions.infrastructure.name),
            deployment=_kamaji_provider_deployment(versions.infrastructure.name),
            fetch=fetch.control_plane_kamaji,
        ),
        CapiProvider(
            "InfrastructureProvider",
            versions.infrastructure.name,
            infra_namespace,
            versions.infrastructure.version,
            infra_crds,
            fetch=fetch.infrastructure,
        ),
    ]


# ------------------------------------------------------------------------- readiness gates


def readiness_probe_tcp(kubernetes_version: str) -> Values:
    """The smallest TenantControlPlane Kamaji's webhooks will look at; the gate submits it with
    ``kubectl create --dry-run=server`` (nothing is persisted) to prove the webhooks answer."""
    return _object(
        KAMAJI_API,
        "TenantControlPlane",
        PROBE_NAME,
        PROBE_NAMESPACE,
        {
            "controlPlane": {"service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": kubernetes_version, "kubelet": {}},
        },
    )


def gate_env(
    *,
    crds: Sequence[str] = (),
    rollouts: Sequence[str] = (),
    conditions: Sequence[str] = (),
    dry_run_manifest: Values | None = None,
    timeout_seconds: int = 900,
) -> dict[str, str]:
    """The environment of ``scripts/management/wait-ready.sh`` (the management kubeconfig is
    added by the component, as a secret). Lists are space-separated tokens:

    * ``WAIT_CRDS``: CRD names that must exist and be ``Established``;
    * ``WAIT_ROLLOUTS``: ``<namespace>/<kind>/<name>`` that must finish rolling out;
    * ``WAIT_CONDITIONS``: ``<namespace or ->/<resource>/<name>/<kubectl wait --for value>``;
    * ``DRY_RUN_MANIFEST``: an object, or a v1 ``List`` of objects (JSON), that a server-side dry
      run must get through the admission webhooks with (accepted, or denied by the webhook
      itself: either way it answers; a webhook that cannot be called fails the gate).
    """
    for token in [*rollouts, *conditions, *crds]:
        if not token or any(ch.isspace() for ch in token):
            raise ValueError(f"gate token {token!r} must be non-empty without whitespace")
    return {
        "WAIT_TIMEOUT_SECONDS": str(timeout_seconds),
        "WAIT_CRDS": " ".join(crds),
        "WAIT_ROLLOUTS": " ".join(rollouts),
        "WAIT_CONDITIONS": " ".join(conditions),
        "DRY_RUN_MANIFEST": json.dumps(dry_run_manifest, sort_keys=True)
        if dry_run_manifest is not None
        else "",
    }


def metallb_gate_env(pool: Values) -> dict[str, str]:
    """MetalLB serving: its CRDs established, its controller (which serves the webhook) rolled
    out, and the lab's pool accepted by a server-side dry run."""
    return gate_env(
        crds=["ipaddresspools.metallb.io", "l2advertisements.metallb.io"],
        rollouts=[f"{METALLB_NAMESPACE}/deployment/{METALLB_RELEASE}-controller"],
        dry_run_manifest=pool,
        timeout_seconds=600,
    )


def kamaji_gate_env(kubernetes_version: str, with_etcd: bool) -> dict[str, str]:
    """Kamaji serving: its CRDs established, its controller (which serves the webhooks) rolled
    out, the bundled etcd and DataStore ``default`` ready when deployed, and a TenantControlPlane
    through the admission webhooks by a server-side dry run."""
    rollouts = [f"{KAMAJI_NAMESPACE}/deployment/{KAMAJI_RELEASE}"]
    conditions: list[str] = []
    if with_etcd:
        rollouts.append(f"{KAMAJI_NAMESPACE}/statefulset/{KAMAJI_ETCD_NAME}")
        conditions.append(
            f"-/datastores.kamaji.clastix.io/{DEFAULT_DATASTORE}/jsonpath={{.status.ready}}=true"
        )
    env = gate_env(
        crds=["tenantcontrolplanes.kamaji.clastix.io", "datastores.kamaji.clastix.io"],
        rollouts=rollouts,
        conditions=conditions,
        dry_run_manifest=readiness_probe_tcp(kubernetes_version),
    )
    # Re-run the gate when Kamaji itself changes.
    env["KAMAJI_IMAGE_TAG"] = PINNED.kamaji_image_tag
    return env


def readiness_probe_issuer() -> Values:
    """The smallest cert-manager Issuer (self-signed); the adopted cert-manager's gate submits it
    with a server-side dry run (nothing is persisted)."""
    return _object(CERT_MANAGER_API, "Issuer", PROBE_NAME, PROBE_NAMESPACE, {"selfSigned": {}})


def cert_manager_gate_env() -> dict[str, str]:
    """An adopted cert-manager serving (``scripts/management/cert-manager-ready.sh``): its CRDs
    present (absent: cert-manager is not installed, and the gate says so at once) and
    Established, and an Issuer through its admission webhook by a server-side dry run.

    cert-manager's ValidatingWebhookConfiguration covers every ``cert-manager.io`` resource on
    CREATE with ``failurePolicy: Fail``, and its CA bundle is injected by cert-manager's own
    cainjector (``cert-manager.io/inject-ca-from-secret``; cert-manager v1.21.1
    deploy/charts/cert-manager/templates/webhook-validating-webhook.yaml:12, 22-39): an Issuer
    accepted through it proves the webhook answers with a trusted certificate, so the
    Certificates and Issuers of the charts after it will be admitted. The probe's namespace
    ``default`` carries no ``cert-manager.io/disable-validation`` label, which the chart's
    default namespaceSelector would skip (values.yaml:891-898)."""
    return {
        "WAIT_TIMEOUT_SECONDS": "600",
        "CERT_MANAGER_CRDS": " ".join(CERT_MANAGER_CRDS),
        "PROBE_MANIFEST": json.dumps(readiness_probe_issuer(), sort_keys=True),
    }


# Infrastructure cluster kinds by provider, and what their webhooks accept: CAPM3's Metal3Cluster
# webhook requires spec.controlPlaneEndpoint.host (CAPM3 v1.13.2
# internal/webhooks/v1beta2/metal3cluster_webhook.go, validate). The address is TEST-NET-1 (RFC
# 5737): the object is never persisted.
_PROBE_INFRASTRUCTURE: MappingProxyType[str, tuple[str, Values]] = MappingProxyType(
    {
        "metal3": ("Metal3Cluster", {"controlPlaneEndpoint": {"host": "192.0.2.1", "port": 6443}}),
        "docker": ("DockerCluster", {}),
    }
)


def readiness_probe_capi(infrastructure: str) -> Values:
    """What the Cluster API gate submits with a server-side dry run (nothing is persisted): a
    ``List`` of a Cluster (core webhooks), a KubeadmConfigTemplate (bootstrap webhooks) and the
    infrastructure cluster (CAPM3's or CAPD's webhooks), the kinds tenants and pools create.
    Provider Ready only means the Deployment is available; cert-manager's CA injection can lag
    behind, and pulumi-kubernetes retries a create only on NotFound/NoMatch (v4.32.0
    provider/pkg/await/await.go:274), so the first tenant object would fail on a webhook."""
    infra_kind, infra_spec = _PROBE_INFRASTRUCTURE[infrastructure]
    infra_group = "infrastructure.cluster.x-k8s.io"
    items = [
        _object(
            "cluster.x-k8s.io/v1beta2",
            "Cluster",
            PROBE_NAME,
            PROBE_NAMESPACE,
            {
                "controlPlaneRef": {
                    "apiGroup": "controlplane.cluster.x-k8s.io",
                    "kind": "KamajiControlPlane",
                    "name": PROBE_NAME,
                },
                "infrastructureRef": {
                    "apiGroup": infra_group,
                    "kind": infra_kind,
                    "name": PROBE_NAME,
                },
            },
        ),
        _object(
            "bootstrap.cluster.x-k8s.io/v1beta2",
            "KubeadmConfigTemplate",
            PROBE_NAME,
            PROBE_NAMESPACE,
            {
                "template": {
                    "spec": {
                        "joinConfiguration": {
                            "nodeRegistration": {
                                "kubeletExtraArgs": [{"name": "node-labels", "value": "gpu=on"}]
                            }
                        }
                    }
                }
            },
        ),
        _object(
            f"{infra_group}/v1beta2", infra_kind, PROBE_NAME, PROBE_NAMESPACE, dict(infra_spec)
        ),
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def capi_gate_env(providers: Sequence[CapiProvider]) -> dict[str, str]:
    """Cluster API serving: every provider object Ready (the operator installed it and its
    deployment is available), the CRDs tenants and worker pools create (Cluster,
    MachineDeployment, KamajiControlPlane, KubeadmConfigTemplate, machine templates)
    established, and the core, bootstrap and infrastructure webhooks answering a server-side dry
    run (``readiness_probe_capi``), as the Kamaji gate proves Kamaji's."""
    infrastructure = next(p.name for p in providers if p.kind == "InfrastructureProvider")
    env = gate_env(
        crds=[crd for provider in providers for crd in provider.crds],
        conditions=[f"{p.namespace}/{p.resource}/{p.name}/condition=Ready" for p in providers],
        dry_run_manifest=readiness_probe_capi(infrastructure),
        timeout_seconds=1200,
    )
    # Re-run the gate when a provider version changes.
    env["PROVIDER_VERSIONS"] = " ".join(f"{p.name}={p.version}" for p in providers)
    return env


# ----------------------------------------------------------------------------- versions


def management_versions(platform: PlatformConfig) -> dict[str, object]:
    """Every pinned version, with the ones this stack's config chose in place of the defaults."""
    versions = PINNED.as_dict()
    if platform.management.kind is not None:
        versions["kind_node_image"] = platform.management.kind.node_image
    if platform.management.existing is not None:
        if not platform.management.existing.installs_cert_manager:
            versions["cert_manager"] = "existing (the cluster's own)"
        capi = platform.management.existing.cluster_api
        versions["cluster_api"] = capi.core
        versions["cluster_api_bootstrap_kubeadm"] = capi.bootstrap_kubeadm
        versions["kamaji_control_plane_provider"] = capi.control_plane_kamaji
        versions["infrastructure_provider"] = {
            "name": capi.infrastructure.name,
            "version": capi.infrastructure.version,
        }
    return versions
