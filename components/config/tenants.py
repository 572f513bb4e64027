"""One team: its hosted control plane, network, quotas, workloads and worker pools."""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from typing import Annotated, Literal

from pydantic import (
    Field,
    PositiveInt,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.config.backups import TenantBackups
from components.config.base import (
    IMAGE_REFERENCE,
    RESOURCE_QUANTITY,
    SYSTEM_NAMESPACES,
    _cidr,
    _dns1123,
    _kubernetes_version,
    _Model,
)
from components.config.datastores import DataStoreBinding
from components.config.pools import WorkerPool

_CONTAINER_RESOURCES = ("cpu", "memory", "ephemeral-storage")


class ComponentResources(_Model):
    """Requests (and optional limits) of one control-plane container."""

    requests: dict[str, str] = Field(default_factory=dict, description="cpu/memory requests")
    limits: dict[str, str] = Field(default_factory=dict, description="cpu/memory limits")

    @field_validator("requests", "limits")
    @classmethod
    def _quantities(cls, value: dict[str, str]) -> dict[str, str]:
        # The API server refuses any other value when the control plane is created (after
        # registration): k8s.io/apimachinery pkg/api/resource/quantity.go, <quantity>.
        for name, quantity in value.items():
            if name not in _CONTAINER_RESOURCES:
                raise ValueError(
                    f"{name!r} is not a container resource here: use "
                    f"{', '.join(_CONTAINER_RESOURCES)}"
                )
            if not RESOURCE_QUANTITY.match(quantity):
                raise ValueError(
                    f"{name}: {quantity!r} is not a Kubernetes quantity: write it like 250m "
                    "(CPU) or 512Mi (memory)"
                )
        return value


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
_PLUGIN_NAME = re.compile(r"^[A-Z][A-Za-z0-9]+$")


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
            odd = [plugin for plugin in value if not _PLUGIN_NAME.match(plugin)]
            if odd:
                raise ValueError(
                    f"admissionControllers: {', '.join(map(repr, odd))} is not an admission "
                    "plugin name (CamelCase, like NodeRestriction): kube-apiserver would not start"
                )
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
            try:
                ipaddress.IPv4Address(value)
            except ValueError:
                raise ValueError(
                    f"{value!r} is not an IPv4 address: write one like 10.0.100.10"
                ) from None
        return value


class TenantNetwork(_Model):
    pod_cidr: str = Field(description="tenant pods (Calico pool and TCP podCidr)")
    service_cidr: str = Field(description="tenant services")

    @field_validator("pod_cidr", "service_cidr")
    @classmethod
    def _cidr(cls, value: str) -> str:
        return _cidr(value)

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


class DeviceQuota(_Model):
    """A namespace ResourceQuota on DRA devices inside a ``gpuSharing: dra`` tenant."""

    namespace: str = Field(description="tenant namespace the quota applies to")
    devices: PositiveInt = Field(
        description="<class>.deviceclass.resource.k8s.io/devices for each of the platform's "
        "DeviceClasses: the cards the namespace's ResourceClaims may ask together "
        "(docs/dra.md, Quota)"
    )

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

    @field_validator("image")
    @classmethod
    def _pinned_image(cls, value: str) -> str:
        """A tag that names one build, or a digest: ``latest`` (written, or implied by no tag)
        moves under the workload, and a preview reviews one image while ``up`` runs another."""
        if not IMAGE_REFERENCE.match(value):
            raise ValueError(
                f"image {value!r} is not an image reference: write it like busybox:1.37.0 or "
                "registry.example.internal/team/app:1.2.3"
            )
        reference = value.split("@", 1)[0]
        last = reference.rsplit("/", 1)[-1]
        tag = last.rsplit(":", 1)[1] if ":" in last else None
        if "@" not in value and tag in (None, "latest"):
            raise ValueError(
                f"image {value!r} has no pinned tag: write a release tag (busybox:1.37.0) or a "
                "digest (busybox@sha256:...), not latest"
            )
        return value


class AdmissionSettings(_Model):
    """The tenant API server's own GPU rules (a ValidatingAdmissionPolicy, the policy pack's
    ``hami-admission-rules``): how they act and the tenant's ceilings."""

    # No "Audit": it only annotates audit events, and a tenant API server has no audit backend
    # (Kamaji 26.8.2-edge passes audit flags only as user extraArgs), so it would record nothing.
    mode: Literal["Deny", "Warn"] = Field(
        default="Deny",
        description="Deny refuses a pod that breaks a rule; Warn admits it with a warning to "
        "the client (roll out on a running tenant with Warn, then Deny)",
    )
    max_gpu_memory_mib: PositiveInt | None = Field(
        default=None,
        alias="maxGpuMemoryMiB",
        description="largest nvidia.com/gpumem one container may ask for (MiB); unset: no ceiling",
    )
    whole_cards: bool = Field(
        default=True,
        description="false: no container may take a whole card (gpucores 100 or "
        "gpumem-percentage 100), only shares",
    )
    privileged_namespaces: list[str] = Field(
        default_factory=list,
        alias="privilegedNamespaces",
        description="namespaces where pods that ask for no GPU may still be privileged or add "
        "SYS_ADMIN-like capabilities (rule node-device-access); GPU pods never may",
    )

    @field_validator("privileged_namespaces")
    @classmethod
    def _namespace_names(cls, value: list[str]) -> list[str]:
        for name in value:
            _dns1123(name, "privileged namespace")
        if len(set(value)) != len(value):
            raise ValueError("a namespace is listed twice: list each one once")
        return value


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
    "gpu-platform-metrics",
    "gpu-platform-backups",
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
    kubernetes_version: str | None = Field(
        default=None,
        description="this tenant's control plane, workers and HAMi kube-scheduler (default: the "
        "platform's kubernetesVersion); a change upgrades the control plane first, then the "
        "workers (docs/configuration.md, Tenant versions and upgrades)",
    )
    data_store: DataStoreBinding = Field(description="where its control-plane state lives")
    network: TenantNetwork = Field(description="disjoint from every other tenant")
    control_plane: ControlPlane = Field(
        default=ControlPlane(), description="the hosted control plane"
    )
    gpu_quotas: list[GpuQuota] = Field(
        default_factory=list, description="HAMi ResourceQuotas inside the tenant"
    )
    device_quotas: list[DeviceQuota] = Field(
        default_factory=list,
        description="DRA device ResourceQuotas inside a gpuSharing: dra tenant (its gpuQuotas' "
        "counterpart; docs/dra.md)",
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
    admission: AdmissionSettings = Field(
        default=AdmissionSettings(),
        description="the GPU rules its API server enforces on every pod (mode and ceilings)",
    )
    backups: TenantBackups = Field(
        default=TenantBackups(),
        description="scheduled, verified exports of its datastore to S3-compatible storage "
        "(docs/backups.md)",
    )
    gpu_sharing: Literal["hami", "dra"] = Field(
        default="hami",
        description="how its GPUs are shared: hami (HAMi's device plugin, webhook and "
        "scheduler extender) or dra (Dynamic Resource Allocation: ResourceSlices from a DRA "
        "driver, ResourceClaims; whole cards only until a tenant version enables "
        "DRAConsumableCapacity; docs/dra.md)",
    )

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "tenant name")

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str | None, info: ValidationInfo) -> str | None:
        return value if value is None else _kubernetes_version(value, info)

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
            ("device quota namespace", [quota.namespace for quota in self.device_quotas]),
        ):
            dupes = sorted(name for name, n in Counter(names).items() if n > 1)
            if dupes:
                raise ValueError(f"{what} {', '.join(dupes)} is declared twice: names are unique")
        return self

    @model_validator(mode="after")
    def _workloads_within_ceilings(self) -> Tenant:
        """Declared workloads obey the tenant's own admission ceilings (its API server would
        refuse their pods, after everything else was deployed)."""
        limit, whole = self.admission.max_gpu_memory_mib, self.admission.whole_cards
        for index, workload in enumerate(self.workloads):
            memory = workload.gpu.memory_mib
            if limit is not None and memory is not None and memory > limit:
                raise ValueError(
                    f"workloads[{index}].gpu.memoryMiB is {memory} but admission.maxGpuMemoryMiB "
                    f"is {limit}: lower the workload's memoryMiB to at most {limit} or raise the "
                    "ceiling"
                )
            if not whole and 100 in (workload.gpu.cores, workload.gpu.memory_percentage):
                raise ValueError(
                    f"workloads[{index}].gpu takes a whole card (cores or memoryPercentage 100) "
                    "but admission.wholeCards is false: ask for a share (e.g. cores: 50) or set "
                    "admission.wholeCards: true"
                )
        return self
