"""What one cluster of a rendered stack gets, put to a real API server.

``install(server, stack, cluster, upstream)``: the CustomResourceDefinitions every source of the
stack installs on that cluster (the charts' ``crds/`` and templates, the program's own, the
Cluster API providers' from their pinned release files, an adopted component's from its pinned
chart) are created for real and waited for until Established; the Namespaces the stack creates
or adopts are created for real; every other object (the charts' hooks and templates, the
program's own objects as recorded under Pulumi mocks) is sent as a server-side dry-run create
(``dryRun=All``, ``fieldValidation=Strict``): the real server's decoding, defaulting, schema and
CEL validation (``x-kubernetes-validations``) and admission all run, nothing is stored.

Only what must exist for a later object is created for real: a Namespace (NamespaceLifecycle
refuses any object in a namespace that is not there, dry-run or not) and a CRD (its kind is not
served before). Everything a controller would create later is not there: that is the tier's
limit, not hidden (``Finding.limit`` names it where a refusal is of that kind).
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from tests.local.kube import APIServer, KubeError, wait_for
from tests.support.charts import ClusterCapabilities, render_release
from tests.support.crd_schemas import crds_in_file
from tests.support.kube_schemas import builtin_api_versions
from tests.support.rendered_stack import (
    ADOPTED_CRD_GATES,
    CAPI_PROVIDER_CRDS,
    COMMAND_TYPE,
    Cluster,
    PlacedObject,
    RenderedStack,
    capi_providers,
)

BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})
PHASES = ("crds", "pre-install", "templates", "post-install", "program")


@dataclass
class Finding:
    """An object the real server refused."""

    what: str
    status: int
    message: str

    def __str__(self) -> str:
        return f"{self.what}: HTTP {self.status}: {self.message}"


@dataclass
class ClusterResult:
    cluster: str
    crds: list[str] = field(default_factory=list)  # names installed and Established
    crd_findings: list[Finding] = field(default_factory=list)
    namespaces: list[str] = field(default_factory=list)
    dry_run: int = 0  # objects the server accepted in a dry-run
    findings: list[Finding] = field(default_factory=list)
    warnings: list[str] = field(default_factory=list)
    kinds: set[str] = field(default_factory=set)
    # A deliberately broken copy of an object, by description: the server's refusal ("" when
    # it accepted the copy).
    probes: dict[str, str] = field(default_factory=dict)


def crd_documents(
    stack: RenderedStack, cluster: Cluster, upstream: Path | None
) -> list[dict[str, Any]]:
    """Every CustomResourceDefinition the stack installs on ``cluster``, by name, first source
    first (a chart's, the program's, a Cluster API provider's release file, an adopted
    component's pinned chart)."""
    found: dict[str, dict[str, Any]] = {}

    def add(doc: Mapping[str, Any]) -> None:
        name = str((doc.get("metadata") or {}).get("name"))
        found.setdefault(name, dict(doc))

    for placed in stack.on_cluster(cluster):
        if placed.kind == "CustomResourceDefinition":
            add(placed.obj)
    if upstream is not None:
        for reg in capi_providers(stack.recording):
            key = (str(reg.inputs.get("kind")), str((reg.inputs.get("metadata") or {}).get("name")))
            if key not in CAPI_PROVIDER_CRDS or stack.clusters.get(reg.provider_urn) != cluster:
                continue
            folder, prefix = CAPI_PROVIDER_CRDS[key]
            for path in sorted((upstream / folder).glob(f"{prefix}*.yaml")):
                for doc in crds_in_file(path):
                    add(doc)
    for gate in stack.recording.of_type(COMMAND_TYPE):
        environment = gate.inputs.get("environment") or {}
        for key, chart in ADOPTED_CRD_GATES.items():
            waited = set(str(environment.get(key, "")).split())
            if not waited or cluster.name != "management":
                continue
            caps = ClusterCapabilities(
                cluster.kube_version, frozenset(builtin_api_versions(cluster.kube_version))
            )
            for obj in render_release(chart, caps).all_objects():
                name = (obj.get("metadata") or {}).get("name")
                if obj.get("kind") == "CustomResourceDefinition" and name in waited:
                    add(obj)
    return list(found.values())


def stack_namespaces(stack: RenderedStack, cluster: Cluster) -> list[str]:
    """The namespaces the stack creates on ``cluster`` (Namespace objects of the program and the
    charts) or adopts (a read Namespace: it exists on the real cluster)."""
    names = [
        str((p.obj.get("metadata") or {}).get("name"))
        for p in stack.on_cluster(cluster)
        if p.kind == "Namespace"
    ]
    names.extend(
        str((reg.outputs.get("metadata") or {}).get("name"))
        for reg in stack.recording.resources
        if reg.read
        and reg.type == "kubernetes:core/v1:Namespace"
        and stack.clusters.get(reg.provider_urn) == cluster
    )
    return sorted({n for n in names if n not in BUILTIN_NAMESPACES})


def dry_run_objects(stack: RenderedStack, cluster: Cluster) -> list[PlacedObject]:
    """Every object of ``cluster`` but its CRDs and Namespaces, in install order."""
    objs = [
        p
        for p in stack.on_cluster(cluster)
        if p.kind not in ("CustomResourceDefinition", "Namespace")
    ]
    return sorted(objs, key=lambda p: PHASES.index(p.phase))


def _established(server: APIServer, name: str) -> bool:
    crd = server.admin.get("apiextensions.k8s.io/v1", "CustomResourceDefinition", name)
    conditions = (crd.get("status") or {}).get("conditions") or []
    return any(c.get("type") == "Established" and c.get("status") == "True" for c in conditions)


def install(
    server: APIServer, stack: RenderedStack, cluster: Cluster, upstream: Path | None
) -> ClusterResult:
    result = ClusterResult(cluster.name)
    kube = server.admin
    for crd in crd_documents(stack, cluster, upstream):
        name = str(crd["metadata"]["name"])
        try:
            kube.create(_clean(crd))
        except KubeError as error:
            result.crd_findings.append(
                Finding(f"CustomResourceDefinition {name}", error.status, error.message)
            )
            continue
        result.crds.append(name)
    for name in result.crds:
        wait_for(f"CRD {name} Established", lambda n=name: _established(server, n), log=server.log)
    kube.refresh()
    for name in stack_namespaces(stack, cluster):
        namespace = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name}}
        created = next(
            (
                p.obj
                for p in stack.on_cluster(cluster)
                if p.kind == "Namespace" and p.obj.get("metadata", {}).get("name") == name
            ),
            namespace,
        )
        try:
            kube.create(_clean(created))
        except KubeError as error:
            result.findings.append(Finding(f"Namespace {name}", error.status, error.message))
            continue
        result.namespaces.append(name)
    for placed in dry_run_objects(stack, cluster):
        result.kinds.add(placed.kind)
        try:
            kube.create(_clean(placed.obj), dry_run=True)
        except KubeError as error:
            result.findings.append(Finding(placed.describe(), error.status, error.message))
            continue
        result.dry_run += 1
        result.warnings.extend(f"{placed.describe()}: {w}" for w in kube.last_warnings)
    return result


def as_the_provider_sends(value: Any) -> Any:
    """A program object's inputs as pulumi-kubernetes sends them to the API server.

    The engine carries every number as a double (protobuf ``Struct``), so the recording holds
    ``9090.0`` where the program wrote ``9090``; the provider encodes the object with Go's
    encoding/json, which writes an integral float64 without a fraction (``9090``: Go 1.26
    src/encoding/json/encode.go floatEncoder, ``strconv.AppendFloat(b, f, 'f', -1, bits)`` below
    1e21), and the API server's int32 fields take that. Python's json would send ``9090.0``,
    which the server refuses: that would be this tier's artefact, not the program's defect. Helm
    sends a chart's objects through the same encoder (sigs.k8s.io/yaml: YAML to JSON via Go
    values), so every object goes through this."""
    if isinstance(value, float) and value.is_integer() and abs(value) < 1e21:
        return int(value)
    if isinstance(value, Mapping):
        return {k: as_the_provider_sends(v) for k, v in value.items()}
    if isinstance(value, list):
        return [as_the_provider_sends(v) for v in value]
    return value


def probe(server: APIServer, obj: Mapping[str, Any]) -> str:
    """A dry-run of ``obj`` (a broken copy of a stack's object): the server's refusal, or ""."""
    try:
        server.admin.create(_clean(obj), dry_run=True)
    except KubeError as error:
        return f"HTTP {error.status}: {error.message}"
    return ""


def _clean(obj: Mapping[str, Any]) -> dict[str, Any]:
    """The object as a client sends it: without the ``status`` a CRD file may carry (the server
    ignores it on create, but a strict decode would name it)."""
    return {k: as_the_provider_sends(v) for k, v in obj.items() if k != "status"}


def summary(results: Iterable[ClusterResult]) -> str:
    return "; ".join(
        f"{r.cluster}: {len(r.crds)} CRDs, {len(r.namespaces)} namespaces, {r.dry_run} objects"
        for r in results
    )
