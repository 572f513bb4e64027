"""What a cluster would refuse in a rendered stack: pure judges over ``RenderedStack``.

* ``missing_crds``: an object of a non-built-in kind whose CRD is not installed on *its* cluster
  before it — by its own chart's ``crds/`` (Helm installs those first), by an earlier install
  phase of the same release, or by a release, program object or Cluster API provider that the
  object's creator waits for. Helm refuses the whole release in that case ("no matches for kind
  … ensure CRDs are installed first": it maps every manifest before creating any, helm v3.20
  ``pkg/action/install.go`` → ``KubeClient.Build``), so a CRD in the same phase does not count.
* ``schema_violations``: built-in objects against the Kubernetes OpenAPI schema of the cluster's
  version, custom resources against the CRD the cluster has for them, CEL rules included.
"""

from __future__ import annotations

from collections.abc import Iterator

from tests.support.crd_schemas import CelTally, CrdVersion, crd_violations
from tests.support.harness import Registration
from tests.support.kube_schemas import builtin_violations, is_builtin
from tests.support.rendered_stack import (
    CLUSTER_SCOPED_BUILTINS,
    CrdSource,
    PlacedObject,
    RenderedStack,
)

# Which install phases of a release may use a CRD from which earlier phase of the same release.
# Helm maps the whole manifest (templates and hooks alike) against the API before it runs any
# hook (helm v3.20 pkg/action/install.go:333 KubeClient.Build, then pre-install hooks at :409
# and performInstall at :448), so a template may only use CRDs from crds/; a post-install hook is
# built when it runs (pkg/action/hooks.go:65), after the templates exist.
USABLE_BEFORE = {
    "crds": frozenset(),
    "pre-install": frozenset({"crds"}),
    "templates": frozenset({"crds"}),
    "post-install": frozenset({"crds", "pre-install", "templates"}),
}
UNKNOWN = "<unknown>"


def custom_objects(stack: RenderedStack) -> Iterator[PlacedObject]:
    for placed in stack.objects:
        if not is_builtin(placed.cluster.kube_version, placed.api_version, placed.kind):
            yield placed


def _serves(source: CrdSource, placed: PlacedObject) -> bool:
    return any(
        crd.api_version == placed.api_version and crd.kind == placed.kind for crd in source.crds
    )


def _installed_before(stack: RenderedStack, source: CrdSource, placed: PlacedObject) -> bool:
    if source.phase == "async":
        return False
    if source.installer.urn == placed.origin.urn:
        if placed.phase == "program":
            return False
        return source.phase in USABLE_BEFORE[placed.phase]
    return source.installer.urn in stack.recording.dependency_closure(placed.origin)


def missing_crds(stack: RenderedStack) -> list[str]:
    """One line per object whose kind no CRD serves on its cluster before it is created."""
    problems: list[str] = []
    for placed in custom_objects(stack):
        serving = [
            s for s in stack.crd_sources if s.cluster == placed.cluster and _serves(s, placed)
        ]
        if any(_installed_before(stack, s, placed) for s in serving):
            continue
        if serving:
            late = ", ".join(sorted({f"{s.installer.name} ({s.phase})" for s in serving}))
            why = f"its CRD comes from {late}, which is not installed before it"
        else:
            why = "nothing installs its CRD there"
        problems.append(
            f"{placed.describe()} on cluster {placed.cluster.name}: {why} "
            f"(kind {placed.kind} of {placed.api_version})"
        )
    return problems


def _contains_unknown(value: object) -> bool:
    if isinstance(value, dict):
        return any(_contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(_contains_unknown(v) for v in value)
    return value == UNKNOWN


def schema_violations(stack: RenderedStack, tally: CelTally | None = None) -> list[str]:
    """One line per schema or CEL violation of any object of the stack on its cluster."""
    problems: list[str] = []
    catalogs = {c.provider_urn: stack.crd_catalog(c) for c in stack.clusters.values()}
    for placed in stack.objects:
        if _contains_unknown(placed.obj):
            problems.append(f"{placed.describe()}: holds a value unknown at update time")
            continue
        version = placed.cluster.kube_version
        if is_builtin(version, placed.api_version, placed.kind):
            found = builtin_violations(version, placed.obj)
        else:
            crd: CrdVersion | None = catalogs[placed.cluster.provider_urn].get(
                placed.api_version, placed.kind
            )
            if crd is None:
                continue  # reported by missing_crds
            found = crd_violations(crd, placed.obj, tally)
        problems.extend(f"{placed.describe()}: {v}" for v in found)
    return problems


# Namespaces every cluster has from the start.
BUILTIN_NAMESPACES = frozenset({"default", "kube-system", "kube-public", "kube-node-lease"})


def _namespace_of(stack: RenderedStack, placed: PlacedObject) -> str | None:
    """The namespace an object lands in, or None for a cluster-scoped one. A namespaced custom
    resource without one goes to its release's namespace, as Helm sends it."""
    meta = placed.obj.get("metadata") or {}
    version = placed.cluster.kube_version
    if is_builtin(version, placed.api_version, placed.kind):
        if placed.kind in CLUSTER_SCOPED_BUILTINS:
            return None
        return str(meta.get("namespace") or "default")
    crd = stack.crd_catalog(placed.cluster).get(placed.api_version, placed.kind)
    if crd is None or crd.scope == "Cluster":
        return None
    if meta.get("namespace"):
        return str(meta["namespace"])
    if placed.phase != "program":
        return str(stack.releases[placed.origin.urn].namespace)
    return "default"


def missing_namespaces(stack: RenderedStack) -> list[str]:
    """One line per release or namespaced object whose namespace does not exist on its cluster
    before it: Helm installs into an existing namespace only (pulumi-kubernetes never sets
    CreateNamespace unless asked, helm_release.go), and the API server refuses an object in a
    namespace that is not there. A Namespace counts when the program reads it (an adopted one),
    creates it before, or a release renders it in an earlier phase or among its own templates
    (Helm creates Namespaces first: pkg/releaseutil/kind_sorter.go InstallOrder)."""
    by_cluster: dict[str, list[PlacedObject]] = {}
    for placed in stack.objects:
        if placed.kind == "Namespace":
            by_cluster.setdefault(placed.cluster.provider_urn, []).append(placed)
    # An adopted namespace is read (Namespace.get): the read's outputs name it.
    read = {
        (reg.provider_urn, str((reg.outputs.get("metadata") or {}).get("name")))
        for reg in stack.recording.resources
        if reg.read and reg.type == "kubernetes:core/v1:Namespace"
    }

    def exists(cluster_urn: str, name: str, origin: Registration, phase: str) -> bool:
        if name in BUILTIN_NAMESPACES or name == UNKNOWN or (cluster_urn, name) in read:
            return True
        closure = stack.recording.dependency_closure(origin)
        for namespace in by_cluster.get(cluster_urn, []):
            if (namespace.obj.get("metadata") or {}).get("name") != name:
                continue
            if namespace.origin.urn == origin.urn:
                if phase != "program" and (
                    namespace.phase == phase or namespace.phase in USABLE_BEFORE[phase]
                ):
                    return True
            elif namespace.origin.urn in closure:
                return True
        return False

    problems: list[str] = []
    for urn, release in stack.releases.items():
        reg = stack.recording.by_urn()[urn]
        if not exists(reg.provider_urn, release.namespace, reg, "program"):
            problems.append(
                f"release {reg.name}: its namespace {release.namespace} does not exist on cluster "
                f"{stack.clusters[reg.provider_urn].name} before it"
            )
    for placed in stack.objects:
        namespace = _namespace_of(stack, placed)
        if namespace is None or (placed.origin.urn in stack.releases and placed.phase == "program"):
            continue
        if not exists(placed.cluster.provider_urn, namespace, placed.origin, placed.phase):
            problems.append(
                f"{placed.describe()} on cluster {placed.cluster.name}: namespace {namespace} "
                "does not exist there before it"
            )
    return problems
