"""Where things live in the Kubernetes resources the platform registers.

Type tokens are pulumi-kubernetes' (``kubernetes:<group>/<version>:<Kind>``); custom resources
registered with ``apiextensions.CustomResource`` get the same shape of token from their
``apiVersion`` and ``kind``. Field names of Kamaji's TenantControlPlane come from
``kamaji.clastix.io/v1alpha1`` and of KamajiControlPlane from the pinned Cluster API provider CRD
(``controlplane.cluster.x-k8s.io/v1alpha2``: ``dataStoreName``, ``dataStoreSchema``,
``dataStoreUsername``, ``version``, ``admissionControllers``, ``addons.konnectivity``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any, Final

from gpu_platform_policies.labels import IDENTITY_READ_SUFFIX
from gpu_platform_policies.model import Resource
from gpu_platform_policies.props import UNKNOWN, get

# --------------------------------------------------------------------------------- workloads

_POD_SPEC_PATHS: Final[dict[str, tuple[str, ...]]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
WORKLOAD_TYPES: Final = frozenset(_POD_SPEC_PATHS)
"""The workload kinds every GPU check covers."""
PATCH_SUFFIX: Final = "Patch"
WORKLOAD_PATCH_TYPES: Final = frozenset(t + PATCH_SUFFIX for t in WORKLOAD_TYPES)
"""Their server-side-apply patch variants (``kubernetes:apps/v1:DeploymentPatch``...)."""
CONTAINER_LISTS: Final = ("initContainers", "containers")
DAEMONSET_TYPE: Final = "kubernetes:apps/v1:DaemonSet"


def _base_type(resource_type: str) -> str:
    if resource_type in WORKLOAD_PATCH_TYPES:
        return resource_type[: -len(PATCH_SUFFIX)]
    return resource_type


def is_workload(resource_type: str, include_patches: bool = True) -> bool:
    return resource_type in WORKLOAD_TYPES or (
        include_patches and resource_type in WORKLOAD_PATCH_TYPES
    )


def pod_spec_path(resource_type: str) -> tuple[str, ...]:
    return _POD_SPEC_PATHS[_base_type(resource_type)]


def pod_spec(resource: Resource) -> Any:
    """The pod spec of a workload (dict, :data:`UNKNOWN` or None)."""
    return get(resource.props, *pod_spec_path(resource.type))


def pod_metadata(resource: Resource) -> Any:
    """The pod's metadata: the Pod's own, or the template's."""
    path = pod_spec_path(resource.type)
    return get(resource.props, *path[:-1], "metadata")


@dataclass(frozen=True)
class ContainerRef:
    """One container of a pod spec, with where it is (for messages)."""

    list_name: str  # "initContainers" or "containers"
    index: int
    container: Any  # dict or UNKNOWN

    @property
    def init(self) -> bool:
        return self.list_name == "initContainers"

    @property
    def label(self) -> str:
        name = get(self.container, "name")
        shown = name if isinstance(name, str) else f"#{self.index}"
        return f"{'init container' if self.init else 'container'} {shown}"


def containers(spec: Any) -> list[ContainerRef]:
    """Init containers first (as they run), then app containers; unknown lists yield nothing."""
    found: list[ContainerRef] = []
    for list_name in CONTAINER_LISTS:
        items = get(spec, list_name)
        if isinstance(items, list):
            found.extend(ContainerRef(list_name, i, c) for i, c in enumerate(items))
    return found


def replicas(resource: Resource) -> Any:
    """How many pods of the workload run at once (int), :data:`UNKNOWN`, or None when the
    workload runs one pod per node (DaemonSet)."""
    base = _base_type(resource.type)
    if base == DAEMONSET_TYPE:
        return None
    if base == "kubernetes:core/v1:Pod":
        return 1
    if base in ("kubernetes:batch/v1:Job", "kubernetes:batch/v1:CronJob"):
        job = (
            get(resource.props, "spec")
            if base.endswith(":Job")
            else get(resource.props, "spec", "jobTemplate", "spec")
        )
        parallelism = get(job, "parallelism")
        completions = get(job, "completions")
        if parallelism is UNKNOWN or completions is UNKNOWN:
            return UNKNOWN
        count = _count(parallelism, 1)
        if isinstance(completions, int | float) and not isinstance(completions, bool):
            count = min(count, int(completions))
        return count
    value = get(resource.props, "spec", "replicas")
    if value is UNKNOWN:
        return UNKNOWN
    return _count(value, 1)


def _count(value: Any, default: int) -> int:
    if isinstance(value, bool) or value is None:
        return default
    if isinstance(value, int | float):
        return max(int(value), 0)
    if isinstance(value, str) and value.strip().isdigit():
        return int(value.strip())
    return default


# ------------------------------------------------------------------------------- helm releases

HELM_RELEASE_TYPES: Final = frozenset(
    {"kubernetes:helm.sh/v3:Release", "kubernetes:helm.sh/v4:Chart"}
)
HAMI_CHART: Final = "hami"


def is_hami_release(resource: Resource) -> bool:
    """A Helm release of HAMi's chart (``chart: hami``, ``<repo>/hami`` or an OCI ``.../hami``)."""
    if resource.type not in HELM_RELEASE_TYPES:
        return False
    chart = get(resource.props, "chart")
    return isinstance(chart, str) and chart.rstrip("/").rsplit("/", 1)[-1] == HAMI_CHART


def release_values(resource: Resource) -> Any:
    """The release's ``values`` (dict, :data:`UNKNOWN`, or {} when none are given)."""
    values = get(resource.props, "values")
    return {} if values is None else values


# ------------------------------------------------------------------------------ control planes

TCP_TYPE: Final = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
KCP_TYPE: Final = "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane"
DATASTORE_TYPE: Final = "kubernetes:kamaji.clastix.io/v1alpha1:DataStore"
CONTROL_PLANE_TYPES: Final = frozenset({TCP_TYPE, KCP_TYPE})


@dataclass(frozen=True)
class ControlPlane:
    """The fields of a TenantControlPlane or KamajiControlPlane the policies read.

    Each value is as found: a str/list/dict, :data:`UNKNOWN`, or None when absent.
    """

    resource: Resource
    data_store: Any
    data_store_key: str  # the field name, for messages
    schema: Any
    username: Any
    version: Any
    version_key: str
    admission_controllers: Any
    admission_controllers_key: str
    konnectivity: Any
    addons: Any

    @property
    def kind(self) -> str:
        return "TenantControlPlane" if self.resource.type == TCP_TYPE else "KamajiControlPlane"


def control_plane(resource: Resource) -> ControlPlane | None:
    """The control-plane view of a TCP or KCP, None for any other resource and for the program's
    read of a control plane's live uid (``<name>-identity``: the same object again, with no
    outputs while its ID is unknown)."""
    if resource.name.endswith(IDENTITY_READ_SUFFIX):
        return None
    spec = get(resource.props, "spec")
    if resource.type == TCP_TYPE:
        return ControlPlane(
            resource=resource,
            data_store=get(spec, "dataStore"),
            data_store_key="spec.dataStore",
            schema=get(spec, "dataStoreSchema"),
            username=get(spec, "dataStoreUsername"),
            version=get(spec, "kubernetes", "version"),
            version_key="spec.kubernetes.version",
            admission_controllers=get(spec, "kubernetes", "admissionControllers"),
            admission_controllers_key="spec.kubernetes.admissionControllers",
            konnectivity=get(spec, "addons", "konnectivity"),
            addons=get(spec, "addons"),
        )
    if resource.type == KCP_TYPE:
        return ControlPlane(
            resource=resource,
            data_store=get(spec, "dataStoreName"),
            data_store_key="spec.dataStoreName",
            schema=get(spec, "dataStoreSchema"),
            username=get(spec, "dataStoreUsername"),
            version=get(spec, "version"),
            version_key="spec.version",
            admission_controllers=get(spec, "admissionControllers"),
            admission_controllers_key="spec.admissionControllers",
            konnectivity=get(spec, "addons", "konnectivity"),
            addons=get(spec, "addons"),
        )
    return None
