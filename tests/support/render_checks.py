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
from tests.support.kube_schemas import builtin_violations, is_builtin
from tests.support.rendered_stack import CrdSource, PlacedObject, RenderedStack

PHASE_ORDER = {"crds": 0, "pre-install": 1, "templates": 2, "post-install": 3}
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
    if source.installer.urn == placed.origin.urn:
        if placed.phase == "program":
            return False
        return PHASE_ORDER[source.phase] < PHASE_ORDER[placed.phase]
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
