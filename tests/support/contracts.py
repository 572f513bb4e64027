"""Contract checks against the pinned upstream files.

Two silent failure modes motivate these helpers:

* Helm ignores values keys that the chart does not have (platform.md pitfall 8), so a typo or a
  key from another chart version changes nothing and says nothing. ``missing_values_keys`` lists
  every key the program sets that the pinned chart's default ``values.yaml`` does not have.
* The API server prunes unknown fields of a custom resource, so a misspelt field disappears.
  ``crd_violations`` validates a custom resource against its CRD's ``openAPIV3Schema`` with
  unknown fields treated as errors, and evaluates the CRD's CEL rules
  (``tests.support.crd_schemas``).
"""

from __future__ import annotations

import copy
from collections.abc import Iterator, Mapping
from functools import cache
from pathlib import Path
from typing import Any

import yaml

from tests.support.crd_schemas import CelTally, CrdCatalog, crds_in_file
from tests.support.crd_schemas import crd_violations as check_custom_resource

# Chart name -> folder under upstream/ holding its default values.yaml.
CHART_DIRS: dict[str, str] = {
    "metallb": "metallb",
    "cert-manager": "cert-manager",
    "kamaji": "kamaji",
    "kamaji-etcd": "kamaji-etcd",
    "tigera-operator": "tigera-operator",
    "hami": "hami",
    "gpu-operator": "gpu-operator",
    "cluster-api-operator": "cluster-api-operator",
}

# Charts whose default values.yaml is empty and whose templates read no value: every key set for
# them is unknown. Each entry names the evidence.
VALUELESS_CHARTS: dict[str, str] = {
    # projectcalico/calico v3.32.1: charts/crd.projectcalico.org.v1/values.yaml is the empty blob
    # (e69de29b) and its templates are plain CRD manifests.
    "crd.projectcalico.org.v1": "plain CRDs, empty values.yaml",
}

# Subcharts bundled by a chart: their keys live under the subchart's name and are checked
# against the subchart's own defaults (platform.md §6).
SUBCHARTS: dict[str, dict[str, str]] = {"kamaji": {"kamaji-etcd": "kamaji-etcd"}}

# Keys a chart documents and its templates read but whose defaults are commented out in
# values.yaml. Each entry names the template evidence; keep this list short.
COMMENTED_DEFAULTS: dict[str, set[str]] = {
    # values.yaml documents `installation.calicoNetwork` as a comment; the chart's
    # templates/crs/custom-resources.yaml renders `omit .Values.installation "enabled"` as the
    # Installation spec, so the key reaches the operator.Installation object verbatim.
    "tigera-operator": {"installation.calicoNetwork"},
}


def release_chart(inputs: Mapping[str, Any]) -> str:
    """The chart a recorded Release installs, by name ("kamaji" for the local Kamaji chart
    pinned by content; the pinned chart's name for its archive in .charts/:
    components/chart_cache.py)."""
    from components.chart_cache import release_chart_name

    return release_chart_name(str(inputs.get("chart")))


@cache
def chart_defaults(upstream: Path, chart: str) -> dict[str, Any]:
    """The pinned chart's default values."""
    folder = CHART_DIRS.get(chart)
    if folder is None:
        raise KeyError(f"no pinned upstream copy for chart {chart!r}: add it to CHART_DIRS")
    data = yaml.safe_load((upstream / folder / "values.yaml").read_text())
    return data or {}


def _leaf_paths(value: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    if isinstance(value, Mapping) and value:
        for key, child in value.items():
            yield from _leaf_paths(child, (*prefix, str(key)))
    else:
        yield prefix


def _path_exists(defaults: Any, path: tuple[str, ...]) -> bool:
    """True when the chart accepts ``path``: every key exists in the defaults, or the walk reaches
    a free-form part (an empty map, a null, a list or a scalar the value replaces whole)."""
    node = defaults
    for key in path:
        if not isinstance(node, Mapping):
            return True  # below a scalar/list/null default the set value replaces it whole
        if not node:
            return True  # an empty map in the defaults is free-form (nodeSelector: {})
        if key not in node:
            return False
        node = node[key]
    return True


def missing_values_keys(upstream: Path, chart: str, values: Mapping[str, Any]) -> list[str]:
    """Dotted keys set in ``values`` that the pinned chart (or its subcharts) does not have."""
    if chart in VALUELESS_CHARTS:
        return [".".join(path) for path in _leaf_paths(values) if path]
    defaults = chart_defaults(upstream, chart)
    subcharts = SUBCHARTS.get(chart, {})
    allowed_extra = COMMENTED_DEFAULTS.get(chart, set())
    missing: list[str] = []
    for path in _leaf_paths(values):
        if not path:
            continue
        dotted = ".".join(path)
        if any(dotted == extra or dotted.startswith(extra + ".") for extra in allowed_extra):
            continue
        if path[0] in subcharts:
            merged = copy.deepcopy(chart_defaults(upstream, subcharts[path[0]]))
            parent_view = defaults.get(path[0]) or {}
            merged.update(parent_view)
            if not _path_exists(merged, path[1:]):
                missing.append(dotted)
            continue
        if not _path_exists(defaults, path):
            missing.append(dotted)
    return missing


# ------------------------------------------------------------------------------------ CRDs


@cache
def crd_index(upstream: Path) -> CrdCatalog:
    """Every served CRD version under the upstream folder."""
    catalog = CrdCatalog()
    for path in sorted(upstream.rglob("*.yaml")):
        for document in crds_in_file(path):
            catalog.add_crd(document, str(path.relative_to(upstream)))
    return catalog


def crd_violations(
    upstream: Path, obj: Mapping[str, Any], tally: CelTally | None = None
) -> list[str]:
    """Schema and CEL-rule violations of a whole custom resource against its pinned CRD."""
    crd = crd_index(upstream).get(str(obj.get("apiVersion", "")), str(obj.get("kind", "")))
    if crd is None:
        return [f"no pinned CRD serves {obj.get('apiVersion')} {obj.get('kind')}"]
    return check_custom_resource(crd, obj, tally)


def has_crd(upstream: Path, api_version: str, kind: str) -> bool:
    return (api_version, kind) in crd_index(upstream)
