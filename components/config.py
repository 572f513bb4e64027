"""Stack configuration: the pydantic models for ``<project>:platform`` and its loader.

The whole platform is one structured value in ``Pulumi.<stack>.yaml``. It is validated once,
before any resource is registered; every model forbids unknown keys and is frozen, and every
error names the key (``tenants[1].dataStore.schema``) and the fix.
"""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Callable, Iterable, Mapping
from types import MappingProxyType
from typing import Annotated, Any, Literal

from pulumi import RunError
from pydantic import (
    BaseModel,
    ConfigDict,
    Field,
    PositiveInt,
    ValidationError,
    field_validator,
    model_validator,
)
from pydantic.alias_generators import to_camel

from components.catalog import CARD_CATALOG, CardModel
from components.lab.mock_device_plugin import MAX_NODE_MEMORY_MIB as MOCK_MAX_NODE_MEMORY_MIB
from components.lab.network import pinned_address_problems, pool_size_problem
from components.versions import PINNED, kind_node_image

CONFIG_KEY = "platform"
DNS1123_LABEL = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$")
DNS1123_SUBDOMAIN = re.compile(
    r"^(?=.{1,253}$)[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$"
)
KUBERNETES_VERSION = re.compile(r"^v1\.(\d+)\.(\d+)$")
# Schema and username end up in etcd prefixes, SQL database and role names: keep them portable.
DATASTORE_IDENTIFIER = re.compile(r"^[a-z][a-z0-9_]{0,62}$")
# Namespaces HAMi's webhook must never gate (platform.md §3, pitfall 3).
SYSTEM_NAMESPACES = ("kube-system", "kube-public", "kube-node-lease")
# Cross-field checks report every problem at once; each becomes its own line in the error.
PROBLEM_SEPARATOR = "\n"
# Fixes for pydantic's generic messages, by error type.
_FIXES = MappingProxyType(
    {
        "greater_than": "zero or negative values are not allowed",
        "greater_than_equal": "use a larger value",
        "less_than_equal": "use a smaller value",
        "too_short": "add at least one entry",
        "literal_error": "use one of the listed values",
        "int_parsing": "write a whole number",
        "int_from_float": "write a whole number",
        "string_type": "write a string (quote it in YAML)",
        "bool_parsing": "write true or false",
        "string_pattern_mismatch": "see this key in docs/configuration.md",
    }
)


class ConfigError(RunError, ValueError):
    """Bad stack configuration: one message per problem, each naming the key and the fix.

    A ``pulumi.RunError``: the CLI's Python host prints a RunError as its message alone and any
    other exception with a traceback (pulumi/pulumi v3.259.0,
    sdk/python/cmd/pulumi-language-python-exec:234-240)."""


def problem_message(header: str, problems: list[str]) -> str:
    """``header: problem`` on one line for one problem; one indented line per problem else."""
    if len(problems) == 1:
        return f"{header}: {problems[0]}"
    return f"{header}:\n  " + "\n  ".join(problems)


class _Model(BaseModel):
    """Strict base: camelCase keys in YAML, unknown keys rejected, values frozen."""

    model_config = ConfigDict(
        extra="forbid",
        frozen=True,
        alias_generator=to_camel,
        populate_by_name=True,
    )


def _dns1123(value: str, what: str) -> str:
    if len(value) > 63 or not DNS1123_LABEL.match(value):
        raise ValueError(
            f"{what} {value!r} is not a DNS-1123 label: use at most 63 lower-case letters, "
            "digits and '-', starting and ending with a letter or digit"
        )
    return value


def _kubernetes_version(value: str) -> str:
    match = KUBERNETES_VERSION.match(value)
    if not match:
        raise ValueError(f"{value!r} is not a Kubernetes version: write it like v1.35.0")
    if int(match.group(1)) > PINNED.kamaji_max_tenant_minor:
        raise ValueError(
            f"{value} is above what Kamaji {PINNED.kamaji_image_tag} accepts "
            f"(v1.{PINNED.kamaji_max_tenant_minor}): pick v1.{PINNED.kamaji_max_tenant_minor}.x "
            "or lower"
        )
    return value


# --------------------------------------------------------------------------- GPU cards and pools


class CardSpec(_Model):
    """Cards of one kind on each node: a catalog model, or explicit MiB and compute units."""

    model: str | None = Field(
        default=None, description=f"a catalog model: {', '.join(CARD_CATALOG)}"
    )
    memory_mib: PositiveInt | None = Field(
        default=None, alias="memoryMiB", description="MiB per card (explicit)"
    )
    core_units: PositiveInt | None = Field(
        default=None, description="HAMi compute units per card (explicit; 100 = one card)"
    )
    product: str | None = Field(
        default=None, description="model string the node registers; must contain NVIDIA"
    )
    count: PositiveInt = Field(default=1, description="cards of this kind per node")

    @model_validator(mode="after")
    def _catalog_or_explicit(self) -> CardSpec:
        explicit = self.memory_mib is not None or self.core_units is not None
        if self.model is None and not explicit:
            raise ValueError(
                "name a catalog model (model: A100-80GB) or give memoryMiB and coreUnits"
            )
        if self.model is not None and self.model not in CARD_CATALOG and not explicit:
            raise ValueError(
                f"unknown card model {self.model!r}: use one of {', '.join(CARD_CATALOG)} "
                "or give memoryMiB and coreUnits explicitly"
            )
        if explicit and (self.memory_mib is None or self.core_units is None):
            raise ValueError("explicit cards need both memoryMiB and coreUnits")
        if self.product is not None and "NVIDIA" not in self.product:
            raise ValueError(
                f"product {self.product!r} must contain 'NVIDIA': HAMi ignores other card types"
            )
        return self

    def resolved(self) -> CardModel:
        """The card as HAMi will see it, catalog values overridden by explicit ones."""
        base = CARD_CATALOG.get(self.model or "")
        memory = self.memory_mib if self.memory_mib is not None else base.memory_mib  # type: ignore[union-attr]
        cores = self.core_units if self.core_units is not None else base.core_units  # type: ignore[union-attr]
        name = self.model or f"custom-{memory}MiB"
        product = self.product or (base.product if base else f"NVIDIA-{name}")
        return CardModel(name=name, memory_mib=memory, core_units=cores, product=product)


class MachineHealthCheckSpec(_Model):
    """Cluster API remediation for a prod pool (off unless enabled)."""

    enabled: bool = Field(default=False, description="create a MachineHealthCheck")
    unhealthy_after: str = Field(default="300s", description="NotReady/Unknown for this long")
    max_unhealthy: str = Field(
        default="1",
        pattern=r"^(\d+|\d{1,3}%)$",
        description="remediate only while at most this many (or this % of) machines are "
        "unhealthy; a % of a 1-2 machine pool rounds down to 0 and never remediates",
    )


_ROLLOUT_AMOUNT = re.compile(r"^(100|[1-9]?\d)%$")


class RollingUpdate(_Model):
    """How a pool replaces its machines when its templates change (Cluster API RollingUpdate)."""

    max_surge: int | str = Field(
        description="machines above replicas during a rollout (a number or a %); each needs a "
        "free host"
    )
    max_unavailable: int | str = Field(
        description="machines below replicas during a rollout (a number or a %)"
    )

    @field_validator("max_surge", "max_unavailable")
    @classmethod
    def _amount(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value >= 0:
            return value
        if isinstance(value, str) and _ROLLOUT_AMOUNT.match(value):
            return value
        raise ValueError(f"{value!r} is not a whole number >= 0 or a percentage like 25%")

    @model_validator(mode="after")
    def _not_both_zero(self) -> RollingUpdate:
        # Cluster API v1.13.5 internal/webhooks/machinedeployment.go:270-276 refuses both 0.
        zero = {0, "0%"}
        if self.max_surge in zero and self.max_unavailable in zero:
            raise ValueError(
                "maxSurge and maxUnavailable cannot both be 0: the rollout could never replace "
                "a machine (on bare metal without spare hosts use maxSurge: 0, maxUnavailable: 1)"
            )
        return self


class MachineSpec(_Model):
    """Prod only: how Cluster API builds the pool's machines (pluggable infrastructure)."""

    provider: Literal["metal3", "docker"] = Field(
        default="metal3", description="infrastructure provider of the machine template"
    )
    template: dict[str, Any] = Field(
        default_factory=dict,
        description="the infrastructure machine template's spec.template.spec, verbatim",
    )
    health_check: MachineHealthCheckSpec = Field(
        default=MachineHealthCheckSpec(), description="remediation of unhealthy machines"
    )
    rollout: RollingUpdate | None = Field(
        default=None,
        description="rolling update of the pool's machines; default for metal3: maxSurge 0, "
        "maxUnavailable 1 (no spare host needed); docker: Cluster API's 1 and 0",
    )


class WorkerPool(_Model):
    """One pool of identical GPU nodes in one tenant."""

    name: str = Field(description="DNS-1123 label, unique in the tenant")
    replicas: PositiveInt = Field(default=1, description="nodes")
    cards: list[CardSpec] = Field(min_length=1, description="the cards on each node")
    slots_per_card: PositiveInt = Field(
        default=10, description="pods that may share one card (HAMi deviceSplitCount)"
    )
    device_mode: Literal["mock", "nvidia"] | None = Field(
        default=None, description="mock (lab default) or nvidia (prod default)"
    )
    machine: MachineSpec | None = Field(default=None, description="prod only")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "pool name")

    def resolved_cards(self) -> list[tuple[CardModel, int]]:
        """Each card kind on one node with its count."""
        return [(spec.resolved(), spec.count) for spec in self.cards]


# ------------------------------------------------------------------------------- datastores


class DataStoreSpec(_Model):
    """A DataStore the platform creates and tenants may bind to by name."""

    name: str = Field(description="DataStore name (cluster-scoped)")
    driver: Literal["etcd", "PostgreSQL", "MySQL", "NATS"] = Field(description="its kind")
    endpoints: list[str] = Field(min_length=1, description="host:port of each server")
    credentials_config_key: str | None = Field(
        default=None,
        description="secret config key holding TLS material / password (never in clear text)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "DataStore name")


class DedicatedDataStore(_Model):
    """A DataStore that serves exactly one tenant: a kamaji-etcd release, or an external one."""

    driver: Literal["etcd", "PostgreSQL", "MySQL", "NATS"] = Field(
        default="etcd", description="etcd is deployed per tenant; others are external"
    )
    replicas: PositiveInt = Field(default=3, description="kamaji-etcd members (etcd only)")
    storage_size: str = Field(default="8Gi", description="kamaji-etcd PVC size (etcd only)")
    storage_class_name: str | None = Field(
        default=None,
        description="kamaji-etcd PVC StorageClass (etcd only); default: the management "
        "cluster's default StorageClass, which must then exist",
    )
    endpoints: list[str] = Field(
        default_factory=list, description="external servers; empty = deploy kamaji-etcd"
    )
    credentials_config_key: str | None = Field(
        default=None, description="secret config key with its TLS material / password"
    )

    @model_validator(mode="after")
    def _external_needs_endpoints(self) -> DedicatedDataStore:
        if self.driver != "etcd" and not self.endpoints:
            raise ValueError(
                f"a dedicated {self.driver} DataStore is external: give its endpoints "
                "(only etcd is deployed by the platform)"
            )
        if self.endpoints and self.credentials_config_key is None:
            raise ValueError(
                "an external DataStore needs credentialsConfigKey naming a secret config value"
            )
        return self

    @field_validator("storage_class_name")
    @classmethod
    def _storage_class(cls, value: str | None) -> str | None:
        if value is not None and not DNS1123_SUBDOMAIN.match(value):
            raise ValueError(f"{value!r} is not a StorageClass name (a DNS-1123 subdomain)")
        return value

    @model_validator(mode="after")
    def _storage_class_only_for_kamaji_etcd(self) -> DedicatedDataStore:
        if self.storage_class_name is not None and not self.deploys_kamaji_etcd:
            raise ValueError(
                "storageClassName sizes the kamaji-etcd the platform deploys; an external "
                "DataStore has none: remove it"
            )
        return self

    @property
    def deploys_kamaji_etcd(self) -> bool:
        """True when the platform runs the etcd itself (no external endpoints)."""
        return self.driver == "etcd" and not self.endpoints


class DataStoreBinding(_Model):
    """Where a tenant's state lives: a named (possibly shared) DataStore, or a dedicated one."""

    name: str | None = Field(default=None, description="an existing or declared DataStore")
    dedicated: DedicatedDataStore | None = Field(
        default=None, description="a DataStore serving this tenant only"
    )
    schema_name: str = Field(alias="schema", description="etcd prefix / SQL database")
    username: str = Field(description="datastore user (etcd user / SQL role)")

    @field_validator("schema_name", "username")
    @classmethod
    def _identifier(cls, value: str) -> str:
        if not DATASTORE_IDENTIFIER.match(value):
            raise ValueError(
                f"{value!r} is not usable as a schema or username: use lower-case letters, "
                "digits and '_', starting with a letter"
            )
        return value

    @model_validator(mode="after")
    def _one_target(self) -> DataStoreBinding:
        if (self.name is None) == (self.dedicated is None):
            raise ValueError("give exactly one of name (a shared DataStore) or dedicated")
        return self


# ---------------------------------------------------------------------------------- tenants


class ComponentResources(_Model):
    """Requests (and optional limits) of one control-plane container."""

    requests: dict[str, str] = Field(default_factory=dict, description="cpu/memory requests")
    limits: dict[str, str] = Field(default_factory=dict, description="cpu/memory limits")


class ControlPlaneResources(_Model):
    """Requests of the hosted control plane's containers (per replica)."""

    api_server: ComponentResources = Field(
        default=ComponentResources(requests={"cpu": "250m", "memory": "512Mi"}),
        description="kube-apiserver container",
    )
    controller_manager: ComponentResources = Field(
        default=ComponentResources(requests={"cpu": "125m", "memory": "256Mi"}),
        description="kube-controller-manager container",
    )
    scheduler: ComponentResources = Field(
        default=ComponentResources(requests={"cpu": "125m", "memory": "128Mi"}),
        description="kube-scheduler container",
    )


WEBHOOK_PLUGINS = ("MutatingAdmissionWebhook", "ValidatingAdmissionWebhook")


class ControlPlane(_Model):
    """The hosted control plane's shape."""

    replicas: PositiveInt = Field(default=1, description="control-plane pods")
    service_type: Literal["LoadBalancer"] = Field(
        default="LoadBalancer",
        description="how workers reach the API (6443) and Konnectivity (8132); NodePort would "
        "need both ports in 30000-32767 and is not supported",
    )
    address: str | None = Field(
        default=None,
        description="fixed LoadBalancer IP (lab: an optional pin, one of the MetalLB pool's and "
        "no other tenant's; unset: MetalLB assigns a free pool address, which stays the "
        "tenant's while its control plane exists)",
    )
    resources: ControlPlaneResources = Field(
        default=ControlPlaneResources(), description="per control-plane container"
    )
    admission_controllers: list[str] | None = Field(
        default=None, description="None keeps Kamaji's default list"
    )

    @field_validator("admission_controllers")
    @classmethod
    def _keeps_webhooks(cls, value: list[str] | None) -> list[str] | None:
        if value is not None:
            missing = [plugin for plugin in WEBHOOK_PLUGINS if plugin not in value]
            if missing:
                raise ValueError(
                    f"admissionControllers must keep {' and '.join(missing)}: without them "
                    "HAMi's webhook never runs (or drop the key to keep Kamaji's default)"
                )
        return value

    @field_validator("address")
    @classmethod
    def _ip(cls, value: str | None) -> str | None:
        if value is not None:
            ipaddress.IPv4Address(value)
        return value


class TenantNetwork(_Model):
    pod_cidr: str = Field(description="tenant pods (Calico pool and TCP podCidr)")
    service_cidr: str = Field(description="tenant services")

    @field_validator("pod_cidr", "service_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        try:
            ipaddress.ip_network(value, strict=True)
        except ValueError as exc:
            raise ValueError(f"{value!r} is not a network CIDR like 10.10.0.0/16 ({exc})") from exc
        return value

    @model_validator(mode="after")
    def _disjoint(self) -> TenantNetwork:
        if ipaddress.ip_network(self.pod_cidr).overlaps(ipaddress.ip_network(self.service_cidr)):
            raise ValueError(
                f"podCidr {self.pod_cidr} overlaps serviceCidr {self.service_cidr}: "
                "give them disjoint ranges"
            )
        return self


class GpuQuota(_Model):
    """A namespace ResourceQuota on HAMi's resources inside the tenant."""

    namespace: str = Field(description="tenant namespace the quota applies to")
    gpu_memory_mib: PositiveInt = Field(
        alias="gpuMemoryMiB", description="limits.nvidia.com/gpumem"
    )
    gpu_cores: PositiveInt = Field(description="limits.nvidia.com/gpucores")
    gpus: PositiveInt = Field(description="requests.nvidia.com/gpu (cards, i.e. sharing slots)")

    @field_validator("namespace")
    @classmethod
    def _namespace(cls, value: str) -> str:
        return _dns1123(value, "quota namespace")


class GpuRequest(_Model):
    """What one workload container asks of HAMi."""

    cards: PositiveInt = Field(default=1, description="nvidia.com/gpu: distinct cards")
    memory_mib: PositiveInt | None = Field(
        default=None, alias="memoryMiB", description="nvidia.com/gpumem"
    )
    memory_percentage: Annotated[int, Field(ge=1, le=100)] | None = Field(
        default=None, description="nvidia.com/gpumem-percentage"
    )
    cores: Annotated[int, Field(ge=1, le=100)] = Field(description="nvidia.com/gpucores")

    @model_validator(mode="after")
    def _one_memory(self) -> GpuRequest:
        if (self.memory_mib is None) == (self.memory_percentage is None):
            raise ValueError("give exactly one of memoryMiB or memoryPercentage")
        return self


class Workload(_Model):
    """A GPU workload declared for a tenant, so previews (and the policy pack) review it."""

    name: str = Field(description="Deployment name")
    namespace: str = Field(default="default", description="tenant namespace")
    replicas: Annotated[int, Field(ge=0)] = Field(default=1, description="pods")
    image: str = Field(default="busybox:1.37.0", description="container image (pinned tag)")
    command: list[str] = Field(
        default_factory=lambda: ["sleep", "infinity"], description="container command"
    )
    gpu: GpuRequest = Field(description="what each pod asks of HAMi")

    @field_validator("name", "namespace")
    @classmethod
    def _names(cls, value: str) -> str:
        return _dns1123(value, "workload name/namespace")


# Namespaces of the management cluster that are not a tenant's to take: Kubernetes' own and the
# ones the platform installs into (components.management_values; a test keeps them equal).
PLATFORM_NAMESPACES = (
    "default",
    *SYSTEM_NAMESPACES,
    "cert-manager",
    "kamaji-system",
    "metallb-system",
    "capi-operator-system",
    "capi-system",
    "capi-kubeadm-bootstrap-system",
    "capi-kamaji-control-plane-system",
    "capm3-system",
    "capd-system",
)


class ManagementNamespace(_Model):
    """The tenant's namespace in the management cluster: its Cluster API objects, control plane,
    datastore and — on Metal3 — the BareMetalHosts its machines may take."""

    name: str | None = Field(default=None, description="default: the tenant's name")
    existing: bool = Field(
        default=False,
        description="adopt a namespace that already exists (it holds the tenant's "
        "BareMetalHosts and BMC Secrets): read it, never create or delete it; required with "
        "metal3",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str | None) -> str | None:
        if value is None:
            return value
        _dns1123(value, "namespace")
        if value in PLATFORM_NAMESPACES:
            raise ValueError(
                f"{value!r} belongs to Kubernetes or the platform; give the tenant a namespace "
                "of its own"
            )
        return value


class Tenant(_Model):
    """One team: its hosted control plane, datastore binding, network, quotas and GPU pools."""

    name: str = Field(description="DNS-1123 label; names the TCP, namespace and resources")
    data_store: DataStoreBinding = Field(description="where its control-plane state lives")
    network: TenantNetwork = Field(description="disjoint from every other tenant")
    control_plane: ControlPlane = Field(
        default=ControlPlane(), description="the hosted control plane"
    )
    gpu_quotas: list[GpuQuota] = Field(
        default_factory=list, description="HAMi ResourceQuotas inside the tenant"
    )
    worker_pools: list[WorkerPool] = Field(
        min_length=1,
        description="GPU node pools (at least one: the tenant's CNI and HAMi run on its workers)",
    )
    workloads: list[Workload] = Field(
        default_factory=list, description="GPU workloads reviewed at preview, then deployed"
    )
    management_namespace: ManagementNamespace = Field(
        default=ManagementNamespace(),
        description="its namespace in the management cluster (created, or adopted with existing)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "tenant name")

    @property
    def namespace(self) -> str:
        """The tenant's namespace in the management cluster."""
        return self.management_namespace.name or self.name

    @model_validator(mode="after")
    def _unique_children(self) -> Tenant:
        for what, names in (
            ("worker pool", [pool.name for pool in self.worker_pools]),
            ("workload", [f"{w.namespace}/{w.name}" for w in self.workloads]),
            ("quota namespace", [quota.namespace for quota in self.gpu_quotas]),
        ):
            dupes = sorted(name for name, n in Counter(names).items() if n > 1)
            if dupes:
                raise ValueError(f"{what} {', '.join(dupes)} is declared twice: names are unique")
        return self


# ------------------------------------------------------------------------ management cluster


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


class InfrastructureProvider(_Model):
    name: Literal["metal3", "docker"] = Field(
        default="metal3", description="Cluster API infrastructure provider for GPU machines"
    )
    version: str = Field(default=PINNED.metal3_provider, description="its release")


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
        return value

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
    kamaji_etcd: bool = Field(default=False, description="deploy Kamaji's bundled etcd")
    cert_manager: Literal["existing", "install"] = Field(
        default="existing",
        description="existing: adopt the cert-manager the cluster runs (Metal3's bare-metal "
        "operator needs one), never install or delete it, and wait until its CRDs and webhook "
        "serve; install: the program installs (and destroy removes) cert-manager "
        f"{PINNED.cert_manager.version} in namespace cert-manager",
    )
    cluster_domain: str = Field(
        default="cluster.local",
        description="the management cluster's DNS domain: per-tenant kamaji-etcd member and "
        "DataStore endpoint names end in it",
    )
    cluster_api: ClusterApiVersions = Field(
        default=ClusterApiVersions(), description="provider versions (cluster-api-operator)"
    )

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


class HamiSettings(_Model):
    """How HAMi runs inside every tenant."""

    webhook_failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail", description="Fail: GPU pods are refused, never silently unscheduled by HAMi"
    )
    node_lock_timeout: str = Field(
        default="30s", description="backstop for locks the device plugin never releases"
    )
    gpu_scheduler_policy: Literal["spread", "binpack"] = Field(
        default="spread", description="card order on a node"
    )
    node_scheduler_policy: Literal["spread", "binpack"] = Field(
        default="binpack", description="node order"
    )


_DRIVER_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_DRIVER_BRANCH = re.compile(r"^\d+$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


class GpuDriver(_Model):
    """Prod: how the NVIDIA kernel driver reaches the GPU machines (the GPU Operator's
    ``driver.*``, one setting for every tenant's ClusterPolicy)."""

    source: Literal["runtime-built", "precompiled", "preinstalled"] = Field(
        default="runtime-built",
        description="runtime-built: the operator's driver container compiles the module on each "
        "node (needs the running kernel's headers, no Secure Boot, no driver in the image); "
        "precompiled: per-kernel driver images (driver.usePrecompiled); preinstalled: the "
        "machine image ships the driver (driver.enabled false)",
    )
    version: str | None = Field(
        default=None,
        description="driver.version: a full version for runtime-built (default the chart's "
        "595.91.07), the driver branch for precompiled (e.g. 595, required)",
    )
    package_repositories: dict[str, str] = Field(
        default_factory=dict,
        description="runtime-built: package repository files (file name: content, e.g. an apt "
        "mirror with the kernel headers) the driver container installs from; the program "
        "creates them as driver.repoConfig",
    )
    auto_upgrade: bool | None = Field(
        default=None,
        description="driver.upgradePolicy.autoUpgrade (chart default true: a driver change "
        "drains GPU pods node by node)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> GpuDriver:
        if self.source == "preinstalled":
            given = [
                key
                for key, value in (
                    ("version", self.version),
                    ("packageRepositories", self.package_repositories or None),
                    ("autoUpgrade", self.auto_upgrade),
                )
                if value is not None
            ]
            if given:
                raise ValueError(
                    f"a preinstalled driver comes with the machine image and the GPU Operator "
                    f"does not manage it: remove {', '.join(given)}"
                )
        if self.source == "precompiled":
            if self.version is None or not _DRIVER_BRANCH.match(self.version):
                raise ValueError(
                    "precompiled driver images are tagged <branch>-<kernel>: give version as the "
                    "driver branch, e.g. 595"
                )
            if self.package_repositories:
                raise ValueError(
                    "precompiled drivers need no kernel headers (the GPU Operator ignores "
                    "repoConfig for them): remove packageRepositories"
                )
        runtime_version = self.version if self.source == "runtime-built" else None
        if runtime_version is not None and not _DRIVER_VERSION.match(runtime_version):
            raise ValueError(f"{runtime_version!r} is not a driver version like 595.91.07")
        for name in self.package_repositories:
            if not _CONFIGMAP_KEY.match(name):
                raise ValueError(
                    f"packageRepositories: {name!r} is not a file name (letters, digits, '-', "
                    "'_', '.')"
                )
            if not name.endswith(_REPOSITORY_FILE_SUFFIXES):
                raise ValueError(
                    f"packageRepositories: {name!r} would be ignored: the operator mounts each "
                    "key as a file in the driver container's /etc/apt/sources.list.d or "
                    "/etc/yum.repos.d, and apt reads only *.list and *.sources files there, "
                    "yum/dnf/zypper only *.repo; name it e.g. mirror.list"
                )
        return self


# --------------------------------------------------------------------------------- platform


# apt reads /etc/apt/sources.list.d/*.list and *.sources (sources.list(5)); yum, dnf and
# zypper read *.repo from their repository directories (yum.conf(5) reposdir, zypper(8)).
_REPOSITORY_FILE_SUFFIXES = (".list", ".sources", ".repo")


class PlatformConfig(_Model):
    """The whole stack: mode, one Kubernetes version, management cluster, tenants."""

    mode: Literal["lab", "prod"] = Field(
        description="lab: kind + simulated GPUs on one host; prod: existing cluster + Cluster API"
    )
    kubernetes_version: str = Field(
        description="drives tenant control planes, worker images and HAMi's kube-scheduler"
    )
    worker_image: str | None = Field(
        default=None,
        description="lab: kindest/node image (default: the tenant version, by digest when the "
        "pinned kind release published one)",
    )
    management: Management = Field(description="exactly one of kind (lab) or existing (prod)")
    hami: HamiSettings = Field(default=HamiSettings(), description="HAMi inside every tenant")
    gpu_driver: GpuDriver = Field(
        default=GpuDriver(), description="prod: the NVIDIA driver on the GPU machines"
    )
    data_stores: list[DataStoreSpec] = Field(
        default_factory=list, description="extra (external) DataStores tenants may bind to by name"
    )
    tenants: list[Tenant] = Field(min_length=1, description="one entry per team")

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str) -> str:
        return _kubernetes_version(value)

    @model_validator(mode="after")
    def _cross_checks(self) -> PlatformConfig:
        problems: list[str] = []
        problems += self._check_mode_sections()
        problems += self._check_worker_image()
        problems += _duplicates("tenants[].name", [t.name for t in self.tenants])
        problems += _duplicates("dataStores[].name", [d.name for d in self.data_stores])
        problems += self._check_datastore_bindings()
        problems += self._check_cidrs()
        problems += self._check_pools()
        problems += self._check_management_namespaces()
        problems += self._check_pool_providers()
        problems += self._check_gpu_driver()
        problems += self._check_lab_addresses()
        if problems:
            raise ValueError(PROBLEM_SEPARATOR.join(problems))
        return self

    def _check_mode_sections(self) -> list[str]:
        if self.mode == "lab" and (self.management.kind is None or self.management.existing):
            return ["management: mode lab needs management.kind (and no management.existing)"]
        if self.mode == "prod" and (self.management.existing is None or self.management.kind):
            return ["management: mode prod needs management.existing (and no management.kind)"]
        return []

    def _check_worker_image(self) -> list[str]:
        if self.worker_image is None:
            return []
        if self.mode == "prod":
            return ["workerImage: prod workers are Cluster API machines; remove workerImage"]
        tag = self.worker_image.split("@", 1)[0].rsplit(":", 1)[-1]
        if tag != self.kubernetes_version:
            return [
                f"workerImage {self.worker_image} is not {self.kubernetes_version}: workers must "
                f"run the tenant version (kindest/node:{self.kubernetes_version}), or drop the key"
            ]
        return []

    def _check_datastore_bindings(self) -> list[str]:
        problems: list[str] = []
        bindings = [t.data_store for t in self.tenants]
        for key, values in (
            ("schema", [b.schema_name for b in bindings]),
            ("username", [b.username for b in bindings]),
        ):
            for dupe in _repeated(values):
                problems.append(
                    f"tenants[].dataStore.{key}: {dupe!r} is used by more than one tenant; "
                    f"give every tenant its own {key} (Kamaji does not enforce it)"
                )
        declared = {d.name: d for d in self.data_stores}
        known = set(declared)
        if self.mode == "lab" or (
            self.management.existing and self.management.existing.kamaji_etcd
        ):
            known.add("default")
        users: dict[str, list[str]] = {}
        for index, tenant in enumerate(self.tenants):
            binding = tenant.data_store
            if binding.name is None:
                continue
            if binding.name not in known:
                problems.append(
                    f"tenants[{index}].dataStore.name: {binding.name!r} is not a DataStore this "
                    f"stack has (known: {', '.join(sorted(known)) or 'none'}); declare it under "
                    "dataStores or use dedicated"
                )
            users.setdefault(binding.name, []).append(tenant.name)
        for name, tenants in users.items():
            spec = declared.get(name)
            if spec is not None and spec.driver == "NATS" and len(tenants) > 1:
                problems.append(
                    f"dataStores {name!r} is NATS and serves {', '.join(tenants)}: a NATS "
                    "DataStore serves one tenant only; give the others their own DataStore"
                )
            if self.mode == "prod" and len(tenants) > 1:
                problems.append(
                    f"tenants {', '.join(tenants)} share DataStore {name!r}: prod requires a "
                    "dedicated DataStore per tenant (dataStore.dedicated)"
                )
        return problems

    def _check_cidrs(self) -> list[str]:
        problems: list[str] = []
        networks: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
        for index, tenant in enumerate(self.tenants):
            networks.append((f"tenants[{index}].network.podCidr", _net(tenant.network.pod_cidr)))
            networks.append(
                (f"tenants[{index}].network.serviceCidr", _net(tenant.network.service_cidr))
            )
        if self.management.kind is not None:
            networks.append(("management.kind.podSubnet", _net(self.management.kind.pod_subnet)))
            networks.append(
                ("management.kind.serviceSubnet", _net(self.management.kind.service_subnet))
            )
        for i, (key_a, net_a) in enumerate(networks):
            for key_b, net_b in networks[i + 1 :]:
                same_tenant = key_a.split(".network")[0] == key_b.split(".network")[0]
                if net_a.overlaps(net_b) and not same_tenant:
                    problems.append(
                        f"{key_b} {net_b} overlaps {key_a} {net_a}: give every tenant and the "
                        "management cluster disjoint ranges"
                    )
        return problems

    def _check_pools(self) -> list[str]:
        problems: list[str] = []
        default_mode = "mock" if self.mode == "lab" else "nvidia"
        for t_index, tenant in enumerate(self.tenants):
            for p_index, pool in enumerate(tenant.worker_pools):
                key = f"tenants[{t_index}].workerPools[{p_index}]"
                device_mode = pool.device_mode or default_mode
                if self.mode == "prod" and device_mode == "mock":
                    problems.append(f"{key}.deviceMode: mock GPUs are lab-only; use nvidia in prod")
                if self.mode == "lab" and device_mode == "nvidia":
                    problems.append(
                        f"{key}.deviceMode: the lab's kindest/node workers have no GPUs; use mock"
                    )
                if self.mode == "prod" and pool.machine is None:
                    problems.append(f"{key}.machine: prod pools need a Cluster API machine spec")
                if self.mode == "lab" and pool.machine is not None:
                    problems.append(f"{key}.machine: lab workers are containers; remove machine")
                if device_mode == "mock":
                    memory = sum(card.memory_mib * count for card, count in pool.resolved_cards())
                    if memory > MOCK_MAX_NODE_MEMORY_MIB:
                        problems.append(
                            f"{key}.cards: {memory} MiB per node is more than the mock device "
                            f"plugin can advertise ({MOCK_MAX_NODE_MEMORY_MIB} MiB: one device per "
                            "MiB in one message to the kubelet); put fewer cards on each node and "
                            "raise replicas"
                        )
        if self.mode == "prod":
            for t_index, tenant in enumerate(self.tenants):
                slots = {pool.slots_per_card for pool in tenant.worker_pools}
                if len(slots) > 1:
                    problems.append(
                        f"tenants[{t_index}].workerPools[].slotsPerCard: HAMi's device plugin "
                        f"splits every card of a tenant the same way, but the pools say "
                        f"{sorted(slots)}; give them one value"
                    )
        if self.mode == "prod" and self.existing.cluster_api.infrastructure.name == "metal3":
            for t_index, tenant in enumerate(self.tenants):
                if tenant.control_plane.address is None:
                    problems.append(
                        f"tenants[{t_index}].controlPlane.address: Metal3 clusters need a fixed "
                        "control-plane endpoint; give the LoadBalancer IP the tenant's API will use"
                    )
        return problems

    def _check_management_namespaces(self) -> list[str]:
        """One namespace per tenant; adoption only where it can exist, and required on Metal3.

        CAPM3 picks BareMetalHosts only in the Metal3Machine's own namespace (CAPM3 v1.13.2
        baremetal/metal3machine_manager.go:857-869, ``client.InNamespace``) and Cluster API keeps
        a cluster's objects in one namespace, so the tenant's hosts must be enrolled in its
        namespace before ``up``. A namespace the program created would then fail with
        AlreadyExists (pulumi-kubernetes v4.32.0 provider/pkg/await/await.go:274-291), and
        ``destroy`` would delete it with the hosts and their BMC Secrets in it."""
        problems: list[str] = []
        for dupe in _repeated(t.namespace for t in self.tenants):
            problems.append(
                f"tenants[].managementNamespace.name: {dupe!r} is the namespace of more than one "
                "tenant; give each its own (a tenant's NetworkPolicies admit all of its namespace)"
            )
        metal3 = self.mode == "prod" and self.existing.cluster_api.infrastructure.name == "metal3"
        for index, tenant in enumerate(self.tenants):
            key = f"tenants[{index}].managementNamespace.existing"
            if self.mode == "lab" and tenant.management_namespace.existing:
                problems.append(
                    f"{key}: the lab's kind cluster is created by this program, so no namespace "
                    "exists in it beforehand; remove existing"
                )
            if metal3 and not tenant.management_namespace.existing:
                problems.append(
                    f"{key}: Metal3 machines take BareMetalHosts only from their own namespace "
                    f"({tenant.namespace!r}); enrol the tenant's hosts there and set existing: "
                    "true, so the program adopts the namespace and never deletes it"
                )
        return problems

    def _check_pool_providers(self) -> list[str]:
        """A pool's machine template must belong to the infrastructure provider the stack
        installs: a DockerMachineTemplate with only CAPM3 installed (or the reverse) is never
        reconciled, and the MachineDeployment waits forever for machines."""
        if self.mode != "prod":
            return []
        installed = self.existing.cluster_api.infrastructure.name
        problems: list[str] = []
        for t_index, tenant in enumerate(self.tenants):
            for p_index, pool in enumerate(tenant.worker_pools):
                if pool.machine is not None and pool.machine.provider != installed:
                    problems.append(
                        f"tenants[{t_index}].workerPools[{p_index}].machine.provider: "
                        f"{pool.machine.provider!r} is not the installed infrastructure provider "
                        f"({installed!r}, management.existing.clusterApi.infrastructure.name); "
                        "use the same for both"
                    )
        return problems

    def _check_gpu_driver(self) -> list[str]:
        if self.mode == "lab" and "gpu_driver" in self.model_fields_set:
            return ["gpuDriver: the lab's GPUs are simulated and get no driver; remove gpuDriver"]
        return []

    def _check_lab_addresses(self) -> list[str]:
        """Lab tenants without a pin get their address from MetalLB (components.lab.network):
        the pool must hold one per tenant, and no address may be pinned twice."""
        if self.mode != "lab" or self.management.kind is None:
            return []
        too_small = pool_size_problem(self.management.kind.metallb_pool_size, len(self.tenants))
        if too_small is not None:
            return [too_small]
        return pinned_address_problems(
            [(tenant.name, tenant.control_plane.address) for tenant in self.tenants]
        )

    # ----- derived views the components use

    def tenant_device_mode(self, pool: WorkerPool) -> Literal["mock", "nvidia"]:
        """The pool's device mode with the mode's default applied."""
        if pool.device_mode is not None:
            return pool.device_mode
        return "mock" if self.mode == "lab" else "nvidia"

    @property
    def adopted_namespaces(self) -> list[tuple[str, str]]:
        """``(config key, namespace)`` of every tenant namespace the program adopts (reads and
        never creates): each must exist on the management cluster before ``up`` or preview."""
        return [
            (f"tenants[{index}].managementNamespace.existing", tenant.namespace)
            for index, tenant in enumerate(self.tenants)
            if tenant.management_namespace.existing
        ]

    @property
    def effective_worker_image(self) -> str:
        """The kindest/node image every lab worker runs: always the tenant version."""
        return self.worker_image or kind_node_image(self.kubernetes_version)

    @property
    def kind(self) -> KindManagement:
        """The lab's kind settings (only valid in mode lab)."""
        if self.management.kind is None:
            raise ConfigError("management.kind is only set in mode lab")
        return self.management.kind

    @property
    def existing(self) -> ExistingManagement:
        """The prod management settings (only valid in mode prod)."""
        if self.management.existing is None:
            raise ConfigError("management.existing is only set in mode prod")
        return self.management.existing


def _net(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr)


def _repeated(values: Iterable[str]) -> list[str]:
    return sorted(value for value, n in Counter(values).items() if n > 1)


def _duplicates(key: str, values: list[str]) -> list[str]:
    return [
        f"{key}: {dupe!r} is declared twice; names must be unique" for dupe in _repeated(values)
    ]


# ---------------------------------------------------------------------------------- loading


def _location(loc: tuple[int | str, ...]) -> str:
    text = ""
    for part in loc:
        if isinstance(part, int):
            text += f"[{part}]"
        else:
            text += ("." if text else "") + part
    return text or "platform"


def parse_platform(raw: Mapping[str, Any] | None) -> PlatformConfig:
    """Validate the raw ``platform`` object; raise ConfigError with one line per problem."""
    if raw is None:
        raise ConfigError(
            f"config key '{CONFIG_KEY}' is missing: copy Pulumi.lab.yaml's platform block "
            "into your stack file"
        )
    try:
        platform = PlatformConfig.model_validate(raw)
    except ValidationError as exc:
        lines = []
        for error in exc.errors():
            where = _location(error["loc"])
            message = error["msg"].removeprefix("Value error, ")
            if error["type"] == "extra_forbidden":
                message = "unknown key: remove it or check its spelling (keys are camelCase)"
            elif error["type"] == "missing":
                message = "required key is missing: add it"
            elif error["type"] in _FIXES:
                message = f"{message}: {_FIXES[error['type']]}"
            if not error["loc"]:
                # Cross-field problems already name their keys, one per line.
                lines.extend(message.split(PROBLEM_SEPARATOR))
                continue
            lines.extend(f"{where}: {part}" for part in message.split(PROBLEM_SEPARATOR))
        raise ConfigError(problem_message("invalid stack configuration", lines)) from None
    # Names need the components' naming functions, which import these models.
    from components.resource_names import name_problems

    problems = name_problems(platform)
    if problems:
        raise ConfigError(problem_message("invalid stack configuration", problems))
    return platform


def load_platform_config() -> PlatformConfig:
    """Read and validate ``<project>:platform`` and check that the secrets it names are set."""
    import pulumi  # local import: reading config needs the program's runtime settings

    config = pulumi.Config()
    platform = parse_platform(config.get_object(CONFIG_KEY))
    check_secrets_present(platform, lambda key: config.get_secret(key))
    # The plain value, read once here and never logged: a malformed one fails now, as one line,
    # rather than inside an apply after registration (where the SDK wraps it in a traceback).
    check_secret_shapes(platform, config.get)
    return platform


def check_secret_shapes(platform: PlatformConfig, lookup: Callable[[str], str | None]) -> None:
    """External DataStore credentials must be the JSON object their driver needs; the error
    names the key and the expected keys, never the value."""
    from components.tenant_specs import datastore_secret_data  # it imports these models

    drivers = {d.credentials_config_key: d.driver for d in platform.data_stores}
    for tenant in platform.tenants:
        dedicated = tenant.data_store.dedicated
        if dedicated is not None and dedicated.credentials_config_key:
            drivers[dedicated.credentials_config_key] = dedicated.driver
    problems = []
    for key, driver in sorted((k, v) for k, v in drivers.items() if k):
        raw = lookup(key)
        if raw is None:
            continue
        try:
            datastore_secret_data(driver, raw, key)
        except ConfigError as error:
            problems.append(str(error))
    if problems:
        raise ConfigError(problem_message("invalid secret config", problems))


def required_secret_keys(platform: PlatformConfig) -> list[str]:
    """Config keys (besides ``platform``) that must hold secrets: the prod management kubeconfig,
    the Cluster API operator's GitHub token when one is named, and the credentials of external
    DataStores. The program reads them with ``require_secret``."""
    keys: list[str] = []
    if platform.management.existing is not None:
        keys.append(platform.management.existing.kubeconfig_config_key)
        token_key = platform.management.existing.cluster_api.github_token_config_key
        if token_key is not None:
            keys.append(token_key)
    keys += [d.credentials_config_key for d in platform.data_stores if d.credentials_config_key]
    for tenant in platform.tenants:
        dedicated = tenant.data_store.dedicated
        if dedicated is not None and dedicated.credentials_config_key:
            keys.append(dedicated.credentials_config_key)
    return sorted(set(keys))


def check_secrets_present(platform: PlatformConfig, lookup: Callable[[str], object | None]) -> None:
    """Fail early, naming the command, when a secret the stack refers to is not set."""
    missing = [key for key in required_secret_keys(platform) if lookup(key) is None]
    if missing:
        raise ConfigError(
            problem_message(
                "secret config values are missing",
                [
                    f"{key}: set it with `pulumi config set --secret {key} < <file>`"
                    for key in missing
                ],
            )
        )
