"""The Cluster API providers prod installs through the cluster-api-operator, one provider object
each (core, kubeadm bootstrap, the Kamaji control-plane provider, one infrastructure provider), as
plain data. ``components.prod.management`` registers them; ``components.prod.cluster_api_values``
builds the gate that waits for them."""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType

import pulumi

from components.config import ClusterApiVersions, ProviderFetch
from components.management_values import Values, api_object

CAPI_OPERATOR_API = "operator.cluster.x-k8s.io/v1alpha2"


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
        return api_object(CAPI_OPERATOR_API, self.kind, self.name, self.namespace, spec)

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
