"""The management cluster: a kind cluster here (lab) or an existing one (prod)."""

from __future__ import annotations

import re
from typing import Annotated, Literal

from pydantic import (
    Field,
    field_validator,
    model_validator,
)

from components.config.base import (
    DNS1123_SUBDOMAIN,
    IMAGE_REFERENCE,
    RELEASE_VERSION,
    _cidr,
    _config_key,
    _dns1123,
    _labels,
    _matching,
    _Model,
)
from components.versions import PINNED

_DOCKER_NAME = re.compile(r"^[a-zA-Z0-9][a-zA-Z0-9_.-]*$")


class KindManagement(_Model):
    """Lab: a kind cluster on this host, MetalLB on the kind docker network."""

    cluster_name: str = Field(default="gpu-lab", description="the kind cluster's name")
    node_image: str = Field(
        default=PINNED.kind_node_image, description="kindest/node image of the management cluster"
    )
    docker_network: str = Field(
        default="kind", description="docker network of kind; MetalLB uses its IPv4 subnet"
    )
    metallb_pool_size: Annotated[int, Field(ge=2, le=256)] = Field(
        default=16, description="LoadBalancer addresses carved from the top of that subnet"
    )
    pod_subnet: str = Field(default="10.244.0.0/16", description="management cluster pods")
    service_subnet: str = Field(default="10.96.0.0/12", description="management cluster services")

    @field_validator("cluster_name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "kind cluster name")

    @field_validator("node_image")
    @classmethod
    def _node_image(cls, value: str) -> str:
        return _matching(value, IMAGE_REFERENCE, "an image reference", PINNED.kind_node_image)

    @field_validator("docker_network")
    @classmethod
    def _docker_network(cls, value: str) -> str:
        return _matching(value, _DOCKER_NAME, "a docker network name", "kind")

    @field_validator("pod_subnet", "service_subnet")
    @classmethod
    def _subnets(cls, value: str) -> str:
        return _cidr(value)


class InfrastructureProvider(_Model):
    name: Literal["metal3", "docker"] = Field(
        default="metal3", description="Cluster API infrastructure provider for GPU machines"
    )
    version: str = Field(default=PINNED.metal3_provider, description="its release")

    @field_validator("version")
    @classmethod
    def _version(cls, value: str) -> str:
        return _matching(value, RELEASE_VERSION, "a release version", PINNED.metal3_provider)


# An OCI artifact the cluster-api-operator fetches a provider from: ``registry/repository`` with an
# optional ``:tag`` (default: the provider's version) and an optional ``http://`` prefix for a
# plain-HTTP registry (cluster-api-operator v0.28.0 internal/controller/oci_source.go:202-215
# parseOCISource; any other scheme reaches oras' reference parser and fails there).
_OCI_REFERENCE = re.compile(r"^(http://)?[a-z0-9.-]+(:\d+)?(/[a-z0-9._/-]+)+(:[\w][\w.-]{0,127})?$")


class ProviderFetch(_Model):
    """Where the cluster-api-operator fetches one provider's components from instead of its
    GitHub releases (an offline or rate-limited management cluster): an OCI artifact, or
    ConfigMaps already in the provider's namespace (``fetchConfig.oci`` / ``.selector``)."""

    oci: str | None = Field(
        default=None,
        description="OCI artifact with the provider's metadata and components, e.g. "
        "registry.example.internal/capi/metal3 (tag: the provider version)",
    )
    config_map_labels: dict[str, str] | None = Field(
        default=None,
        description="labels of the ConfigMap in the provider's namespace holding its components "
        "(named after the version, or labelled provider.cluster.x-k8s.io/version)",
    )

    @field_validator("oci")
    @classmethod
    def _oci(cls, value: str | None) -> str | None:
        if value is not None and not _OCI_REFERENCE.match(value):
            raise ValueError(
                f"{value!r} is not an OCI reference like registry.example.internal/capi/metal3"
                "[:tag] (no scheme; http:// only for a plain-HTTP registry)"
            )
        return value

    @field_validator("config_map_labels")
    @classmethod
    def _labels(cls, value: dict[str, str] | None) -> dict[str, str] | None:
        if value is not None and not value:
            raise ValueError("give at least one label, or remove configMapLabels")
        return value if value is None else _labels(value)

    @model_validator(mode="after")
    def _one_source(self) -> ProviderFetch:
        # The CRD's own rule: "Must specify one and only one of {oci, url, selector}".
        if (self.oci is None) == (self.config_map_labels is None):
            raise ValueError("give exactly one of oci or configMapLabels")
        return self


class ProviderFetchSources(_Model):
    """Per provider, where the operator fetches it from (default: its GitHub releases)."""

    core: ProviderFetch | None = Field(default=None, description="cluster-api core")
    bootstrap_kubeadm: ProviderFetch | None = Field(
        default=None, description="kubeadm bootstrap provider"
    )
    control_plane_kamaji: ProviderFetch | None = Field(
        default=None, description="Kamaji control-plane provider"
    )
    infrastructure: ProviderFetch | None = Field(
        default=None, description="the infrastructure provider"
    )


class ClusterApiVersions(_Model):
    """Cluster API providers installed through the cluster-api-operator chart."""

    core: str = Field(default=PINNED.cluster_api, description="cluster-api core (v1.13.x)")
    bootstrap_kubeadm: str = Field(
        default=PINNED.cluster_api, description="kubeadm bootstrap provider (v1.13.x)"
    )
    control_plane_kamaji: str = Field(
        default=PINNED.kamaji_control_plane_provider,
        description="Kamaji control-plane provider (v0.20.0 or later)",
    )
    infrastructure: InfrastructureProvider = Field(
        default=InfrastructureProvider(), description="where GPU machines come from"
    )
    github_token_config_key: str | None = Field(
        default=None,
        description="secret config key holding a GitHub token for the operator's release "
        "downloads (upstream documents the repo scope): without one, GitHub allows 60 API calls "
        "an hour per egress IP",
    )
    fetch: ProviderFetchSources = Field(
        default=ProviderFetchSources(),
        description="per provider, an OCI artifact or ConfigMaps to install from instead of "
        "GitHub (offline management clusters)",
    )

    @field_validator("github_token_config_key")
    @classmethod
    def _token_key(cls, value: str | None) -> str | None:
        return _config_key(value)

    @field_validator("core", "bootstrap_kubeadm")
    @classmethod
    def _capi_line(cls, value: str) -> str:
        if not re.match(r"^v1\.13\.\d+$", value):
            raise ValueError(
                f"{value!r}: the Kamaji control-plane provider needs Cluster API v1.13.x "
                "(contract v1beta2)"
            )
        return value

    @field_validator("control_plane_kamaji")
    @classmethod
    def _kamaji_provider(cls, value: str) -> str:
        match = re.match(r"^v0\.(\d+)\.(\d+)$", value)
        if not match or int(match.group(1)) < 20:
            raise ValueError(
                f"{value!r}: use the Kamaji control-plane provider v0.20.0 or later "
                "(API controlplane.cluster.x-k8s.io/v1alpha2)"
            )
        return value


class ExistingManagement(_Model):
    """Prod: an existing management cluster reached through a secret kubeconfig."""

    kubeconfig_config_key: str = Field(
        default="managementKubeconfig",
        description="the secret config key holding the management kubeconfig",
    )
    kamaji_etcd: bool = Field(
        default=False,
        description="deploy a kamaji-etcd beside Kamaji as the DataStore 'default' for tenants "
        "that name none",
    )
    cert_manager: Literal["existing", "install"] = Field(
        default="existing",
        description="existing: adopt the cert-manager the cluster runs (Metal3's bare-metal "
        "operator needs one), never install or delete it, and wait until its CRDs and webhook "
        "serve; install: the program installs (and destroy removes) cert-manager "
        f"{PINNED.cert_manager.version} in namespace cert-manager",
    )
    cluster_domain: str = Field(
        default="cluster.local",
        description="the management cluster's DNS domain: kamaji-etcd member and DataStore "
        "endpoint names end in it",
    )
    cluster_api: ClusterApiVersions = Field(
        default=ClusterApiVersions(), description="provider versions (cluster-api-operator)"
    )

    @field_validator("kubeconfig_config_key")
    @classmethod
    def _kubeconfig_key(cls, value: str) -> str:
        return _config_key(value) or value

    @field_validator("cluster_domain")
    @classmethod
    def _domain(cls, value: str) -> str:
        if not DNS1123_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a DNS domain like cluster.local")
        return value

    @property
    def installs_cert_manager(self) -> bool:
        """True when the program installs cert-manager (else it adopts the cluster's)."""
        return self.cert_manager == "install"


class Management(_Model):
    """Exactly one of kind (lab) or existing (prod)."""

    kind: KindManagement | None = Field(default=None, description="lab: a kind cluster here")
    existing: ExistingManagement | None = Field(
        default=None, description="prod: an existing management cluster"
    )
