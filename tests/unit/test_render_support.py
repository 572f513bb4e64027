"""The rendered-chart machinery itself, on a small chart made here (no upstream chart needed):
Capabilities pinned to the target cluster, kubeVersion constraints, enabled subcharts' CRDs,
Helm's manifest splitting, and the CEL and schema checks."""

from __future__ import annotations

import os
import subprocess
import sys
import textwrap
from pathlib import Path

import pytest

from tests.support import charts
from tests.support.charts import ClusterCapabilities, RenderError
from tests.support.crd_schemas import CelTally, cel_violations, escape_property
from tests.support.kube_schemas import builtin_api_versions, builtin_violations, is_builtin

CAPS = ClusterCapabilities("v1.35.0", frozenset({"v1", "apps/v1", "example.io/v1/Widget"}))


def _write(root: Path, files: dict[str, str]) -> Path:
    for name, text in files.items():
        path = root / name
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(textwrap.dedent(text).lstrip())
    return root


@pytest.fixture
def demo_chart(tmp_path: Path) -> Path:
    """A parent chart with a CRD in crds/, an optional subchart that has its own crds/, hooks,
    and templates reading the cluster's capabilities."""
    return _write(
        tmp_path / "demo",
        {
            "Chart.yaml": """
                apiVersion: v2
                name: demo
                version: 1.0.0
                kubeVersion: ">= 1.30.0-0"
                dependencies:
                  - name: extra
                    version: 0.1.0
                    condition: extra.enabled
            """,
            "values.yaml": "extra:\n  enabled: false\n",
            "crds/widgets.yaml": """
                apiVersion: apiextensions.k8s.io/v1
                kind: CustomResourceDefinition
                metadata: {name: widgets.example.io}
            """,
            "templates/cm.yaml": """
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: caps
                data:
                  version: {{ .Capabilities.KubeVersion.Version | quote }}
                  minor: {{ $.Capabilities.KubeVersion.Minor | quote }}
                  widgets: {{ .Capabilities.APIVersions.Has "example.io/v1/Widget" | quote }}
                  monitoring: {{ .Capabilities.APIVersions.Has "monitoring.coreos.com/v1" | quote }}
                ---# a comment straight after the separator, as cert-manager's chart has
                apiVersion: v1
                kind: ConfigMap
                metadata:
                  name: second
            """,
            "templates/hooks.yaml": """
                apiVersion: batch/v1
                kind: Job
                metadata:
                  name: before
                  annotations: {"helm.sh/hook": pre-install}
                ---
                apiVersion: batch/v1
                kind: Job
                metadata:
                  name: on-upgrade-only
                  annotations: {"helm.sh/hook": pre-upgrade}
            """,
            "charts/extra/Chart.yaml": "apiVersion: v2\nname: extra\nversion: 0.1.0\n",
            "charts/extra/crds/gadgets.yaml": """
                apiVersion: apiextensions.k8s.io/v1
                kind: CustomResourceDefinition
                metadata: {name: gadgets.example.io}
            """,
        },
    )


def _render(chart: Path, caps: ClusterCapabilities = CAPS, values: dict | None = None):
    inputs = {"chart": str(chart), "name": "demo", "namespace": "ns", "values": values or {}}
    return charts.render_release(inputs, caps)


def test_capabilities_are_the_target_clusters_not_helms_defaults(demo_chart: Path) -> None:
    rendered = _render(demo_chart)
    caps = next(o for o in rendered.objects if o["metadata"]["name"] == "caps")["data"]
    # Helm's engine alone would say v1.36.0 (its client library's version) and false.
    assert caps == {"version": "v1.35.0", "minor": "35", "widgets": "true", "monitoring": "false"}
    older = _render(demo_chart, ClusterCapabilities("v1.31.2", frozenset()))
    caps = next(o for o in older.objects if o["metadata"]["name"] == "caps")["data"]
    assert caps["version"] == "v1.31.2"
    assert caps["widgets"] == "false"


def test_install_order_crds_then_pre_install_hooks_then_templates(demo_chart: Path) -> None:
    rendered = _render(demo_chart)
    assert [c["metadata"]["name"] for c in rendered.crds] == ["widgets.example.io"]
    assert [h["metadata"]["name"] for h in rendered.pre_install_hooks] == ["before"]
    # Helm's splitter separates "---# comment"; upgrade hooks do not run on install.
    assert sorted(o["metadata"]["name"] for o in rendered.objects) == ["caps", "second"]


def test_only_enabled_subcharts_contribute_crds(demo_chart: Path) -> None:
    enabled = _render(demo_chart, values={"extra": {"enabled": True}})
    assert sorted(c["metadata"]["name"] for c in enabled.crds) == [
        "gadgets.example.io",
        "widgets.example.io",
    ]


def test_an_incompatible_kube_version_is_refused_like_helm_install(demo_chart: Path) -> None:
    with pytest.raises(RenderError, match=r"requires kubeVersion >= 1\.30\.0-0"):
        _render(demo_chart, ClusterCapabilities("v1.29.9", frozenset()))


@pytest.mark.parametrize(
    "template",
    [
        '{{ include "x" .Capabilities.KubeVersion }}',
        "{{ with .Capabilities }}{{ .KubeVersion.Version }}{{ end }}",
        "{{ $c := .Capabilities }}{{ $c.KubeVersion.Minor }}",
    ],
)
def test_a_capability_reference_that_cannot_be_pinned_is_an_error(template: str) -> None:
    """Left alone these would render with Helm's defaults (v1.36.0), not the cluster's."""
    with pytest.raises(RenderError, match="cannot pin"):
        charts.pin_capabilities(template, CAPS)
    assert charts.pin_capabilities("{{ .Capabilities.HelmVersion.Version }}", CAPS)


@pytest.mark.parametrize(
    ("constraint", "version", "holds"),
    [
        (">= 1.18.0-0", "v1.35.0", True),
        (">=1.21.0-0", "v1.20.9", False),
        (">= 1.19.0-0 < 1.36.0", "v1.35.0", True),
        (">= 1.19.0-0 < 1.35.0", "v1.35.0", False),
        ("< 1.20.0 || >= 1.30.0", "v1.35.0", True),
    ],
)
def test_kube_version_constraints(constraint: str, version: str, holds: bool) -> None:
    assert charts.kube_version_satisfies(constraint, version) is holds


def test_builtin_kinds_follow_the_clusters_version() -> None:
    assert is_builtin("v1.35.0", "apps/v1", "Deployment")
    assert not is_builtin("v1.35.0", "operator.tigera.io/v1", "Installation")
    assert "resource.k8s.io/v1/DeviceClass" in builtin_api_versions("v1.35.0")
    assert "resource.k8s.io/v1/DeviceClass" not in builtin_api_versions("v1.33.0")
    assert (
        builtin_violations(
            "v1.35.0",
            {
                "apiVersion": "v1",
                "kind": "ConfigMap",
                "metadata": {"name": "a"},
                "data": {"k": "v"},
            },
        )
        == []
    )
    assert builtin_violations(
        "v1.35.0", {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {"name": "a"}, "dta": {}}
    )


def test_cel_rules_are_evaluated_with_kubernetes_semantics() -> None:
    schema = {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.tls != null || self.mode == 'plain'", "message": "tls required"},
            {"rule": "self.cidrs.all(c, isCIDR(c))", "message": "bad CIDR"},
            {"rule": "self.mode == oldSelf.mode", "message": "immutable"},
            {"rule": "self.x__dash__y == 1", "message": "escaped name"},
        ],
        "properties": {
            "tls": {"type": "object"},
            "mode": {"type": "string"},
            "cidrs": {"type": "array", "items": {"type": "string"}},
            "x-y": {"type": "integer"},
        },
    }
    tally = CelTally()
    good = {"tls": {"ca": "x"}, "mode": "tls", "cidrs": ["10.0.0.0/16"], "x-y": 1}
    assert cel_violations(schema, good, tally) == []
    assert (tally.evaluated, tally.transition_rules) == (3, 1)
    bad = {"mode": "tls", "tls": None, "cidrs": ["10.0.0.0/33"], "x-y": 2}
    problems = cel_violations(schema, bad, CelTally())
    assert problems == ["<root>: tls required", "<root>: bad CIDR", "<root>: escaped name"]
    assert escape_property("namespace") == "__namespace__"


def test_a_cel_function_cel_python_lacks_is_counted_not_hidden() -> None:
    schema = {"type": "string", "x-kubernetes-validations": [{"rule": "isURL(self)"}]}
    tally = CelTally()
    assert cel_violations(schema, "https://x", tally) == []
    assert tally.unsupported == {"function isURL()": 1}
    assert "1 unsupported: function isURL()" in tally.summary()


def test_cel_sees_what_the_api_server_stores_defaults_ints_and_membership() -> None:
    """Defaults are applied before the rules run; integers that arrive as JSON floats are CEL
    ints; ``in`` compares like ``==``."""
    schema = {
        "type": "object",
        "x-kubernetes-validations": [
            {"rule": "self.port % 2 == 0", "message": "even port"},
            {"rule": "self.port in [8132, 8133]", "message": "known port"},
            {"rule": "has(self.mode) && self.mode == 'DaemonSet'", "message": "defaulted mode"},
        ],
        "properties": {
            "port": {"type": "integer"},
            "mode": {"type": "string", "default": "DaemonSet"},
        },
    }
    from tests.support.crd_schemas import apply_defaults

    tally = CelTally()
    assert cel_violations(schema, apply_defaults(schema, {"port": 8132.0}), tally) == []
    assert tally.evaluated == 3
    assert cel_violations(schema, apply_defaults(schema, {"port": 8131.0}), CelTally()) == [
        "<root>: even port",
        "<root>: known port",
    ]


_SCRATCH_CHILD = """
import sys
from pathlib import Path
sys.path.insert(0, ".")
from tests.support import charts
inputs = {"chart": sys.argv[1], "name": "demo", "namespace": "ns", "values": {}}
caps = charts.ClusterCapabilities("v1.35.0", frozenset())
charts.render_release(inputs, caps)
root = charts._scratch_root()
print("prepared", sorted(p.name for p in root.iterdir()) != [])
charts.release_scratch()
print("released", not root.exists())
charts.render_release(inputs, caps)  # prepared anew, removed at exit
"""


def test_prepared_charts_are_removed_after_use(demo_chart: Path, tmp_path: Path) -> None:
    """Issue 41 point 5: the scratch directories of prepared charts are removed by
    ``release_scratch`` (the session's end) or at the process's exit, never left in the temp
    directory (146 were, after one day of runs)."""
    temp = tmp_path / "temp"
    temp.mkdir()
    child = subprocess.run(
        [sys.executable, "-c", _SCRATCH_CHILD, str(demo_chart)],
        capture_output=True,
        text=True,
        cwd=Path(__file__).resolve().parents[2],
        env={**os.environ, "TMPDIR": str(temp)},
        check=False,
    )
    assert child.returncode == 0, child.stderr[-2000:]
    assert child.stdout.split() == ["prepared", "True", "released", "True"]
    assert sorted(p.name for p in temp.iterdir()) == []
