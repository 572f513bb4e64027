"""A recorded stack as the clusters would receive it: every chart rendered, every object placed.

``render_stack(recording)`` renders each ``helm.v3.Release`` (and ``helm.v4.Chart``) the program
registers, in dependency order, for the cluster its provider targets — with that cluster's
Kubernetes version and the API versions it serves at that point (built-in ones plus the CRDs
installed before the release, as ``.Capabilities.APIVersions`` would list them) — and places every
object the program creates directly on its cluster too. The result answers the questions a
cluster would answer at install time: is this kind served here, and was its CRD installed first?

Which Kubernetes version each cluster runs:
* a tenant: the platform's ``kubernetesVersion`` (Kamaji runs that version);
* the lab's management cluster: the version of its kind node image;
* an existing (prod) management cluster: not configured; the platform's ``kubernetesVersion`` is
  assumed. Of the charts installed there only kamaji-etcd branches on the version (the tag of its
  ``clastix/kubectl`` hook image).

Cluster API kinds count as served where a cluster-api-operator provider object installs them:
the CRDs of each provider come from ``../shared/upstream`` (the provider's own release files).

An adopted component (prod's ``management.existing.certManager: existing``) brings its CRDs
with the cluster: nothing in the stack installs them, and they count as served from the gate
that waits for them (``ADOPTED_CRD_GATES``), with the schemas of the component's pinned chart
standing in for the cluster's own copy.
"""

from __future__ import annotations

import copy
import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from components.versions import PINNED
from tests.support.charts import (
    ChartUnavailableError,
    ClusterCapabilities,
    RenderedRelease,
    RenderError,
    chart_source,
    render_release,
)
from tests.support.crd_schemas import CrdCatalog, CrdVersion, crds_in_file, served_versions
from tests.support.harness import Recording, Registration
from tests.support.kube_schemas import builtin_api_versions, is_builtin

RELEASE = "kubernetes:helm.sh/v3:Release"
CHART_V4 = "kubernetes:helm.sh/v4:Chart"
COMMAND_TYPE = "command:local:Command"
CAPI_PROVIDER_TYPE_PREFIX = "kubernetes:operator.cluster.x-k8s.io/"
CRD_TYPE = "kubernetes:apiextensions.k8s.io/v1:CustomResourceDefinition"
PROVIDER_TYPE = "pulumi:providers:kubernetes"
# Program-created objects that are not whole objects the API server stores as given.
NOT_WHOLE_OBJECTS = ("Patch",)

# cluster-api-operator provider object → the folder of ../shared/upstream holding the CRDs the
# provider's release installs (each folder is that provider's own CRDs; see SOURCES.md).
CAPI_PROVIDER_CRDS: Mapping[tuple[str, str], tuple[str, str]] = {
    ("CoreProvider", "cluster-api"): ("cluster-api", "cluster.x-k8s.io_"),
    ("BootstrapProvider", "kubeadm"): ("cluster-api", "bootstrap.cluster.x-k8s.io_"),
    ("ControlPlaneProvider", "kamaji"): ("kamaji-capi", ""),
    ("InfrastructureProvider", "metal3"): ("capm3", ""),
    ("InfrastructureProvider", "docker"): ("capd", ""),
}


# An adopted component's gate → the pinned chart whose CRDs stand for the cluster's: a
# ``local.Command`` whose environment names CRDs under the key serves those of them the chart has,
# on the management cluster, to everything that waits for the gate.
ADOPTED_CRD_GATES: Mapping[str, Mapping[str, Any]] = {
    "CERT_MANAGER_CRDS": {
        "name": "cert-manager",
        "chart": PINNED.cert_manager.chart,
        "version": PINNED.cert_manager.version,
        "namespace": "cert-manager",
        "values": {"crds": {"enabled": True}},
    },
}


class UpstreamUnavailableError(Exception):
    """The pinned upstream files a check needs are absent (the test skips with this text)."""


@dataclass(frozen=True)
class Cluster:
    """One Kubernetes cluster the program talks to, through one provider."""

    name: str  # "management" or the tenant's name
    provider_urn: str
    kube_version: str


@dataclass
class PlacedObject:
    """An object as it reaches a cluster, and what put it there."""

    obj: dict[str, Any]
    cluster: Cluster
    origin: Registration  # the Release, Chart or program resource that creates it
    phase: str  # "crds", "pre-install", "templates", "post-install" or "program"

    @property
    def api_version(self) -> str:
        return str(self.obj.get("apiVersion", ""))

    @property
    def kind(self) -> str:
        return str(self.obj.get("kind", ""))

    def describe(self) -> str:
        meta = self.obj.get("metadata") or {}
        where = f"{meta.get('namespace')}/" if meta.get("namespace") else ""
        source = f"release {self.origin.name}" if self.phase != "program" else self.origin.name
        return f"{self.kind} {where}{meta.get('name')} ({self.api_version}, {source})"


@dataclass
class CrdSource:
    """Something that installs CRDs on a cluster, and when."""

    installer: Registration
    cluster: Cluster
    crds: list[CrdVersion]
    # "crds", "pre-install", "templates", "post-install" (a release's), "program" (a CRD object
    # the program creates), "gate" (a readiness gate that waits for them) or "async" (installed
    # by an operator at some later time: never before anything).
    phase: str


@dataclass
class RenderedStack:
    """Every object the stack puts on every cluster, with the CRD sources per cluster."""

    recording: Recording
    clusters: dict[str, Cluster]
    releases: dict[str, RenderedRelease] = field(default_factory=dict)  # by registration URN
    # How each release was rendered (by registration URN), so a test can render it again with
    # other values for the same cluster.
    capabilities: dict[str, ClusterCapabilities] = field(default_factory=dict)
    sources: dict[str, Path | None] = field(default_factory=dict)
    objects: list[PlacedObject] = field(default_factory=list)
    crd_sources: list[CrdSource] = field(default_factory=list)
    render_errors: dict[str, str] = field(default_factory=dict)  # registration name → error

    def cluster_of(self, reg: Registration) -> Cluster | None:
        return self.clusters.get(reg.provider_urn)

    def on_cluster(self, cluster: Cluster) -> Iterator[PlacedObject]:
        return (o for o in self.objects if o.cluster == cluster)

    def release_named(self, name: str) -> RenderedRelease:
        reg = self.recording.named(name)
        return self.releases[reg.urn]

    def crd_catalog(self, cluster: Cluster) -> CrdCatalog:
        """Every CRD version any source installs on ``cluster`` (for schema validation)."""
        return CrdCatalog(
            crd for src in self.crd_sources if src.cluster == cluster for crd in src.crds
        )


# ------------------------------------------------------------------------------ clusters


def _kind_node_version(image: str) -> str:
    match = re.search(r"kindest/node:(v\d+\.\d+\.\d+)", image)
    if match is None:
        raise ValueError(f"cannot read a Kubernetes version from kind node image {image!r}")
    return match.group(1)


def stack_clusters(recording: Recording, platform: Mapping[str, Any]) -> dict[str, Cluster]:
    """Each Kubernetes provider of the recording as a cluster with its version."""
    tenant_version = str(platform["kubernetesVersion"])
    management = platform.get("management") or {}
    kind = management.get("kind")
    if kind is not None:
        from components.config import KindManagement

        image = kind.get("nodeImage") or KindManagement().node_image
        management_version = _kind_node_version(image)
    else:
        management_version = tenant_version
    clusters: dict[str, Cluster] = {}
    for reg in recording.of_type(PROVIDER_TYPE):
        tenant = recording.component_of(reg, ":GpuTenant")
        if tenant is not None:
            clusters[reg.urn] = Cluster(tenant.name, reg.urn, tenant_version)
        else:
            clusters[reg.urn] = Cluster("management", reg.urn, management_version)
    return clusters


# ------------------------------------------------------------------------------ rendering


def _installs_before(recording: Recording, reg: Registration) -> set[str]:
    return recording.dependency_closure(reg)


def _topological(recording: Recording, regs: list[Registration]) -> list[Registration]:
    """``regs`` ordered so that each comes after those it (transitively) depends on."""
    closures = {r.urn: _installs_before(recording, r) for r in regs}
    ordered: list[Registration] = []
    pending = list(regs)
    while pending:
        ready = [r for r in pending if not (closures[r.urn] & {p.urn for p in pending})]
        if not ready:
            raise RuntimeError("dependency cycle between releases")
        ordered.extend(ready)
        pending = [r for r in pending if r not in ready]
    return ordered


def capi_providers(recording: Recording) -> list[Registration]:
    """The cluster-api-operator provider objects of the recording."""
    return [r for r in recording.resources if r.type.startswith(CAPI_PROVIDER_TYPE_PREFIX)]


def _capi_crd_sources(
    recording: Recording, clusters: Mapping[str, Cluster], upstream: Path
) -> list[CrdSource]:
    """Where the Cluster API CRDs come from, and when they can be used.

    A provider object only asks the operator to install its provider; the CRDs appear later,
    asynchronously, and pulumi-kubernetes reports a custom resource without ``pulumi.com/waitFor``
    created at once (v4.32.0 provider/pkg/metadata/overrides.go:110-116) and retries a create on
    NoMatch for about half a minute only (await/await.go:250-274). So the provider's CRDs are an
    ``async`` source, never "installed before" anything; what orders them is a readiness gate
    (a ``local.Command`` whose ``WAIT_CRDS`` names them, ``wait-ready.sh``) that waits for the
    provider object: that gate is the source CRs must wait for."""
    sources: list[CrdSource] = []
    by_name: dict[str, tuple[Registration, CrdVersion]] = {}
    for reg in capi_providers(recording):
        key = (str(reg.inputs.get("kind")), str((reg.inputs.get("metadata") or {}).get("name")))
        cluster = clusters.get(reg.provider_urn)
        if key not in CAPI_PROVIDER_CRDS or cluster is None:
            continue
        folder, prefix = CAPI_PROVIDER_CRDS[key]
        crds: list[CrdVersion] = []
        for path in sorted((upstream / folder).glob(f"{prefix}*.yaml")):
            for doc in crds_in_file(path):
                crds.extend(served_versions(doc, f"{folder}/{path.name}"))
        sources.append(CrdSource(reg, cluster, crds, "async"))
        by_name.update({crd.crd_name: (reg, crd) for crd in crds})
    for gate in recording.of_type(COMMAND_TYPE):
        waited = str((gate.inputs.get("environment") or {}).get("WAIT_CRDS", "")).split()
        closure = recording.dependency_closure(gate)
        served = [
            (provider, crd)
            for name in waited
            if name in by_name
            for provider, crd in [by_name[name]]
            if provider.urn in closure
        ]
        for provider, crd in served:
            cluster = clusters[provider.provider_urn]
            sources.append(CrdSource(gate, cluster, [crd], "gate"))
    return sources


def _adopted_crd_sources(recording: Recording, clusters: Mapping[str, Cluster]) -> list[CrdSource]:
    """The CRDs an adopted component brings, served from the gate that proves them Established
    (``ADOPTED_CRD_GATES``); a CRD the gate does not wait for is not counted."""
    management = [c for c in clusters.values() if c.name == "management"]
    sources: list[CrdSource] = []
    for gate in recording.of_type(COMMAND_TYPE):
        environment = gate.inputs.get("environment") or {}
        for key, chart in ADOPTED_CRD_GATES.items():
            waited = set(str(environment.get(key, "")).split())
            if not waited or not management:
                continue
            caps = ClusterCapabilities(
                management[0].kube_version,
                frozenset(builtin_api_versions(management[0].kube_version)),
            )
            rendered = render_release(chart, caps)
            crds = [
                crd
                for crd in _crds_in(rendered.all_objects(), f"adopted {chart['chart']}")
                if crd.crd_name in waited
            ]
            sources.append(CrdSource(gate, management[0], crds, "gate"))
    return sources


def _crds_in(objs: list[dict[str, Any]], source: str) -> list[CrdVersion]:
    return [
        version
        for obj in objs
        if obj.get("kind") == "CustomResourceDefinition"
        for version in served_versions(obj, source)
    ]


def render_stack(
    recording: Recording,
    platform: Mapping[str, Any],
    upstream: Path | None,
    overrides: Mapping[str, Path] | None = None,
) -> RenderedStack:
    """Render every chart of ``recording`` and place every object; raises ``ChartUnavailableError``
    naming every archive this machine lacks. ``overrides`` maps a release's registration name
    to a chart copy to render instead (tests that break a chart on purpose)."""
    overrides = dict(overrides or {})
    clusters = stack_clusters(recording, platform)
    stack = RenderedStack(recording=recording, clusters=clusters)
    charts = [r for r in recording.resources if r.type in (RELEASE, CHART_V4)]
    missing: list[Path] = []
    adopted = [
        ADOPTED_CRD_GATES[key]
        for gate in recording.of_type(COMMAND_TYPE)
        for key in ADOPTED_CRD_GATES
        if (gate.inputs.get("environment") or {}).get(key)
    ]
    for inputs in [*(r.inputs for r in charts if r.name not in overrides), *adopted]:
        try:
            chart_source(inputs)
        except ChartUnavailableError as error:
            missing.extend(error.paths)
    if missing:
        raise ChartUnavailableError(missing)
    stack.crd_sources.extend(_adopted_crd_sources(recording, clusters))

    if capi_providers(recording):
        if upstream is None:
            raise UpstreamUnavailableError(
                "the Cluster API providers' CRDs are read from the pinned upstream copies, which "
                "are not here: set GPU_PLATFORM_UPSTREAM_DIR or run `make fetch-upstream`"
            )
        stack.crd_sources.extend(_capi_crd_sources(recording, clusters, upstream))
    for reg in recording.resources:
        if reg.type == CRD_TYPE and reg.provider_urn in clusters:
            crds = _crds_in([reg.inputs], reg.name)
            stack.crd_sources.append(CrdSource(reg, clusters[reg.provider_urn], crds, "program"))

    for reg in _topological(recording, charts):
        cluster = clusters[reg.provider_urn]
        before = _installs_before(recording, reg)
        served = set(builtin_api_versions(cluster.kube_version))
        for src in stack.crd_sources:
            if src.cluster == cluster and src.installer.urn in before:
                served.update(_api_forms(src.crds))
        source = overrides.get(reg.name)
        caps = ClusterCapabilities(cluster.kube_version, frozenset(served))
        stack.capabilities[reg.urn] = caps
        stack.sources[reg.urn] = source
        try:
            rendered = render_release(release_inputs(reg), caps, source=source)
        except RenderError as error:
            stack.render_errors[reg.name] = str(error)
            continue
        stack.releases[reg.urn] = rendered
        for phase, objs in (
            ("crds", rendered.crds),
            ("pre-install", rendered.pre_install_hooks),
            ("templates", rendered.objects),
            ("post-install", rendered.post_install_hooks),
        ):
            crds = _crds_in(objs, f"release {reg.name} ({phase})")
            if crds:
                stack.crd_sources.append(CrdSource(reg, cluster, crds, phase))
            for obj in objs:
                # A copy: the rendered release stays as Helm rendered it (tests compare renders).
                placed = copy.deepcopy(obj)
                _default_namespace(placed, rendered.namespace, cluster)
                stack.objects.append(PlacedObject(placed, cluster, reg, phase))

    for reg in recording.resources:
        cluster = clusters.get(reg.provider_urn)
        if (
            cluster is None
            or reg.read
            or reg.type in (RELEASE, CHART_V4, PROVIDER_TYPE)
            or not reg.type.startswith("kubernetes:")
            or reg.type.endswith(NOT_WHOLE_OBJECTS)
        ):
            continue
        stack.objects.append(PlacedObject(dict(reg.inputs), cluster, reg, "program"))
    return stack


def release_inputs(reg: Registration) -> dict[str, Any]:
    """A registration's inputs as ``render_release`` takes them (a v4 Chart's release name is its
    resource name unless it names one)."""
    inputs = dict(reg.inputs)
    if reg.type == CHART_V4:
        inputs.setdefault("name", reg.name)
    return inputs


def _api_forms(crds: list[CrdVersion]) -> set[str]:
    forms: set[str] = set()
    for crd in crds:
        forms.add(crd.api_version)
        forms.add(f"{crd.api_version}/{crd.kind}")
    return forms


def _default_namespace(obj: dict[str, Any], namespace: str, cluster: Cluster) -> None:
    """Helm sends a namespaced built-in object without a namespace to the release namespace
    (custom kinds are left as rendered: their scope is their CRD's)."""
    meta = obj.setdefault("metadata", {})
    api_version = str(obj.get("apiVersion", ""))
    kind = str(obj.get("kind", ""))
    if (
        not meta.get("namespace")
        and is_builtin(cluster.kube_version, api_version, kind)
        and kind not in CLUSTER_SCOPED_BUILTINS
    ):
        meta["namespace"] = namespace


CLUSTER_SCOPED_BUILTINS = frozenset(
    {
        "Namespace",
        "Node",
        "PersistentVolume",
        "ClusterRole",
        "ClusterRoleBinding",
        "CustomResourceDefinition",
        "MutatingWebhookConfiguration",
        "ValidatingWebhookConfiguration",
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "MutatingAdmissionPolicy",
        "MutatingAdmissionPolicyBinding",
        "PriorityClass",
        "StorageClass",
        "CSIDriver",
        "CSINode",
        "VolumeAttachment",
        "RuntimeClass",
        "APIService",
        "IngressClass",
        "PodSecurityPolicy",
        "DeviceClass",
        "ResourceSlice",
        "FlowSchema",
        "PriorityLevelConfiguration",
        "CertificateSigningRequest",
        "ClusterTrustBundle",
        "ServiceCIDR",
        "IPAddress",
        "VolumeAttributesClass",
        "DeviceTaintRule",
        "StorageVersionMigration",
    }
)
