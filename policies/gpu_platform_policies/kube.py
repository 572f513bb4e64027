"""Where things live in the Kubernetes resources the platform registers.

Type tokens are pulumi-kubernetes' (``kubernetes:<group>/<version>:<Kind>``); custom resources
registered with ``apiextensions.CustomResource`` get the same shape of token from their
``apiVersion`` and ``kind``. Field names of Kamaji's TenantControlPlane come from
``kamaji.clastix.io/v1alpha1`` and of KamajiControlPlane from the pinned Cluster API provider CRD
(``controlplane.cluster.x-k8s.io/v1alpha2``: ``dataStoreName``, ``dataStoreSchema``,
``dataStoreUsername``, ``version``, ``admissionControllers``, ``addons.konnectivity``).
"""

from __future__ import annotations

import re
from dataclasses import dataclass
from typing import Any, Final

from gpu_platform_policies.labels import IDENTITY_READ_SUFFIX
from gpu_platform_policies.model import Resource
from gpu_platform_policies.props import UNKNOWN, dotted, get

# --------------------------------------------------------------------------------- workloads

# Where the pod spec of each built-in kind lives. Every other registered object is searched by
# shape (:func:`pod_specs`), so a pod template inside any custom resource is found too.
_POD_SPEC_PATHS: Final[dict[str, tuple[str, ...]]] = {
    "kubernetes:core/v1:Pod": ("spec",),
    "kubernetes:core/v1:PodTemplate": ("template", "spec"),
    "kubernetes:core/v1:ReplicationController": ("spec", "template", "spec"),
    "kubernetes:apps/v1:Deployment": ("spec", "template", "spec"),
    "kubernetes:apps/v1:StatefulSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:DaemonSet": ("spec", "template", "spec"),
    "kubernetes:apps/v1:ReplicaSet": ("spec", "template", "spec"),
    "kubernetes:batch/v1:Job": ("spec", "template", "spec"),
    "kubernetes:batch/v1:CronJob": ("spec", "jobTemplate", "spec", "template", "spec"),
}
WORKLOAD_TYPES: Final = frozenset(_POD_SPEC_PATHS)
"""The built-in workload kinds (their pod spec at a fixed path)."""
PATCH_SUFFIX: Final = "Patch"
WORKLOAD_PATCH_TYPES: Final = frozenset(t + PATCH_SUFFIX for t in WORKLOAD_TYPES)
"""Their server-side-apply patch variants (``kubernetes:apps/v1:DeploymentPatch``...)."""
CONTAINER_LISTS: Final = ("initContainers", "containers")
DAEMONSET_TYPE: Final = "kubernetes:apps/v1:DaemonSet"
# Registered objects that are never searched for pod specs: Helm releases (their values are the
# chart's input, not Kubernetes objects; the charts' own workloads are the chart's), providers,
# and CRDs (an OpenAPI schema describes pod specs without being one).
_NOT_OBJECTS: Final = (
    "kubernetes:helm.sh/",
    "pulumi:",
    "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition",
)
# Keys under which an unknown value (preview) may hide a pod spec in a custom resource.
_TEMPLATE_KEYS: Final = ("spec", "template")
_TEMPLATE_SUFFIXES: Final = ("Template", "Templates", "Spec", "Specs")


def _base_type(resource_type: str) -> str:
    if resource_type.endswith(PATCH_SUFFIX) and resource_type.startswith("kubernetes:"):
        return resource_type[: -len(PATCH_SUFFIX)]
    return resource_type


def is_patch(resource_type: str) -> bool:
    """A server-side-apply patch (``...Patch``): it modifies an object declared elsewhere."""
    return _base_type(resource_type) != resource_type


def is_workload(resource_type: str, include_patches: bool = True) -> bool:
    """A built-in workload kind (see :func:`may_hold_pod_specs` for every searched object)."""
    return resource_type in WORKLOAD_TYPES or (
        include_patches and resource_type in WORKLOAD_PATCH_TYPES
    )


def may_hold_pod_specs(resource_type: str, include_patches: bool = True) -> bool:
    """Every Kubernetes object the program registers, built-in or custom resource."""
    if not resource_type.startswith("kubernetes:"):
        return False
    if any(resource_type.startswith(prefix) for prefix in _NOT_OBJECTS):
        return False
    return include_patches or not is_patch(resource_type)


def pod_spec_path(resource_type: str) -> tuple[str, ...]:
    return _POD_SPEC_PATHS[_base_type(resource_type)]


def _is_container(value: Any) -> bool:
    """A container: a mapping with a ``name`` and an ``image`` or ``resources`` (either may be
    unknown during preview). The API requires ``name``; ``image`` may be left to a controller to
    fill in, so a container that only asks for resources counts too."""
    if not isinstance(value, dict):
        return False
    name = value.get("name")
    if not (isinstance(name, str) or name is UNKNOWN):
        return False
    return "image" in value or "resources" in value


def is_pod_spec(value: Any) -> bool:
    """The shape of a Kubernetes PodSpec (core/v1): a mapping whose ``containers`` is a non-empty
    list of containers (:func:`_is_container`; unknown items allowed next to at least one known
    one), or is itself unknown during preview."""
    if not isinstance(value, dict) or "containers" not in value:
        return False
    items = value["containers"]
    if items is UNKNOWN:
        return True
    if not isinstance(items, list) or not items:
        return False
    known = [item for item in items if item is not UNKNOWN]
    return bool(known) and all(_is_container(item) for item in known)


def _argo_template(value: Any) -> dict[str, Any] | None:
    """An Argo Workflows template (``container``/``script`` with ``sidecars``/``initContainers``,
    argoproj.io/v1alpha1 Template) as the pod spec Argo runs it in: one pod whose main container
    is named ``main``; None for any other mapping."""
    if not isinstance(value, dict):
        return None
    main = value.get("container")
    if not isinstance(main, dict):
        main = value.get("script")
    if not isinstance(main, dict) or "image" not in main:
        return None
    containers_: list[Any] = [{"name": "main", **main}]
    sidecars = value.get("sidecars")
    if isinstance(sidecars, list):
        containers_.extend(sidecars)
    spec: dict[str, Any] = {"containers": containers_}
    for key in ("initContainers", "nodeSelector", "securityContext", "schedulerName"):
        if key in value:
            spec[key] = value[key]
    return spec


@dataclass(frozen=True)
class PodSpecRef:
    """One pod spec found in a registered object: where (for messages), the spec (a dict or
    :data:`UNKNOWN`), the pod's metadata, and how many such pods run at once (int, :data:`UNKNOWN`,
    or None for one per node)."""

    path: tuple[str | int, ...]
    spec: Any
    metadata: Any
    count: Any

    @property
    def where(self) -> str:
        return dotted(self.path)


def _count_on_path(props: Any, path: tuple[str | int, ...]) -> Any:
    """Pods of one template: the product of the ``replicas`` and ``parallelism`` (at most
    ``completions``) on the way from the object to the pod spec (Deployment ``spec.replicas``,
    Job ``spec.parallelism``, PyTorchJob ``pytorchReplicaSpecs.<role>.replicas``, JobSet
    ``replicatedJobs[].replicas`` x the Job's parallelism, RayCluster ``workerGroupSpecs[]
    .replicas``); a LeaderWorkerSet group has one leader and ``size - 1`` workers."""
    count = 1
    node = props
    for depth in range(len(path)):
        if isinstance(node, dict):
            for key in ("replicas", "parallelism"):
                if key not in node:
                    continue
                value = node[key]
                if value is UNKNOWN:
                    return UNKNOWN
                factor = _count(value, 1)
                if key == "parallelism":
                    completions = node.get("completions")
                    if completions is UNKNOWN:
                        return UNKNOWN
                    if isinstance(completions, int | float) and not isinstance(completions, bool):
                        factor = min(factor, int(completions))
                count *= factor
            if path[depth] == "workerTemplate" and "size" in node:
                size = node["size"]
                if size is UNKNOWN:
                    return UNKNOWN
                count *= max(_count(size, 1) - 1, 0)
        node = get(node, path[depth])
        if node is UNKNOWN:
            return UNKNOWN
    return count


def _metadata_of(props: Any, path: tuple[str | int, ...]) -> Any:
    """The pod's metadata: the sibling ``metadata`` of a template's ``spec`` (or the object's own
    for a bare pod spec at the top)."""
    if path and path[-1] == "spec":
        return get(props, *path[:-1], "metadata")
    return None


def _walk(
    value: Any, path: tuple[str | int, ...], found: list[tuple[tuple[str | int, ...], Any]]
) -> None:
    if isinstance(value, dict):
        if is_pod_spec(value):
            found.append((path, value))
            return
        argo = _argo_template(value)
        if argo is not None:
            found.append((path, argo))
            return
        for key, item in value.items():
            if key in ("metadata", "status"):
                continue
            if item is UNKNOWN and (key in _TEMPLATE_KEYS or key.endswith(_TEMPLATE_SUFFIXES)):
                found.append(((*path, key), UNKNOWN))
                continue
            _walk(item, (*path, key), found)
    elif isinstance(value, list):
        for index, item in enumerate(value):
            _walk(item, (*path, index), found)


def pod_specs(resource: Resource) -> list[PodSpecRef]:
    """Every pod spec in a registered object: at the fixed path of a built-in kind, and by shape
    (:func:`is_pod_spec`, Argo templates) anywhere in any other object. Unknown during preview:
    a built-in kind's spec, or a custom resource's ``spec``/``template``/``...Template(s)``/
    ``...Spec(s)`` value, is returned as :data:`UNKNOWN` (callers never judge it)."""
    if not may_hold_pod_specs(resource.type):
        return []
    base = _base_type(resource.type)
    props = resource.props
    if base in _POD_SPEC_PATHS:
        path: tuple[str | int, ...] = _POD_SPEC_PATHS[base]
        spec = get(props, *path)
        if spec is None:
            return []
        if base == DAEMONSET_TYPE:
            count: Any = None
        elif base == "kubernetes:core/v1:Pod":
            count = 1
        else:
            count = _count_on_path(props, path)
        metadata = (
            get(props, "metadata")
            if base == "kubernetes:core/v1:Pod"
            else (_metadata_of(props, path))
        )
        return [PodSpecRef(path, spec, metadata, count)]
    found: list[tuple[tuple[str | int, ...], Any]] = []
    _walk(props, (), found)
    refs = []
    for where, spec in found:
        count = _count_on_path(props, where)
        refs.append(PodSpecRef(where, spec, _metadata_of(props, where), count))
    return refs


def pod_spec(resource: Resource) -> Any:
    """The pod spec of a built-in workload (dict, :data:`UNKNOWN` or None)."""
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
    """How many pods of a built-in workload run at once (int), :data:`UNKNOWN`, or None when the
    workload runs one pod per node (DaemonSet)."""
    refs = pod_specs(resource)
    return refs[0].count if refs else 1


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


# A local archive of the chart as ``helm pull`` names it: ``hami-<version>.tgz``.
_HAMI_ARCHIVE: Final = re.compile(rf"{HAMI_CHART}-v?\d[\w.+-]*\.tgz")


def is_hami_release(resource: Resource) -> bool:
    """A Helm release of HAMi's chart (``chart: hami``, ``<repo>/hami``, an OCI ``.../hami``, a
    local chart directory ``.../hami`` or archive ``.../hami-<version>.tgz``, the form the
    program installs: ``.charts/hami-2.10.0.tgz``)."""
    if resource.type not in HELM_RELEASE_TYPES:
        return False
    chart = get(resource.props, "chart")
    if not isinstance(chart, str):
        return False
    base = chart.rstrip("/").rsplit("/", 1)[-1]
    return base == HAMI_CHART or _HAMI_ARCHIVE.fullmatch(base) is not None


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
