"""Every PromQL expression of the rules, the dashboard and the usage command parses with a real
PromQL parser (``promql-parser``) and names only metrics and labels the pinned upstreams export
(``components.metrics.series.TRACED``, each entry citing its declaration), the platform adds, or
the rules record. HAMi's own dashboard, when ``scripts/fetch_dashboards.py`` has cached it, must
name only series HAMi v2.10.0 declares (upstream dashboards broke on the 2.9 rename)."""

from __future__ import annotations

import importlib.util
import json
import re
from pathlib import Path

import promql_parser
import pytest

from components.metrics import dashboards, hami_dashboard, rules, series, usage
from components.versions import HAMI_DASHBOARD

RECORDED = set(rules.recorded_names())
# Labels an aggregation or matcher may name: traced, the platform's, or the rules' own.
KNOWN_LABELS = {label for s in series.TRACED.values() for label in s.labels} | set(
    series.PLATFORM_LABELS
)


def _names(expr: str) -> tuple[set[str], set[str]]:
    """(metric names, label names) an expression reads."""
    metrics: set[str] = set()
    labels: set[str] = set()

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            if node.name:
                metrics.add(node.name)
            for matcher in node.matchers.matchers:
                # ``label=""`` selects series without the label (rules.RECORDED_ONLY): it
                # reads no label of the series.
                absent = matcher.op == promql_parser.MatchOp.Equal and matcher.value == ""
                if not (absent and node.name in RECORDED):
                    labels.add(matcher.name)
        if isinstance(node, promql_parser.AggregateExpr) and node.modifier is not None:
            labels.update(node.modifier.labels)
        if isinstance(node, promql_parser.BinaryExpr) and node.modifier is not None:
            matching = node.modifier.matching
            if matching is not None:
                labels.update(matching.labels)

    promql_parser.walk(promql_parser.parse(expr), pre_visit=visit)
    return metrics, labels


def _labels_of(metric: str) -> set[str]:
    if metric in RECORDED:
        return {"tenant"}
    return set(series.TRACED[metric].labels) | set(series.PLATFORM_LABELS)


ALL = [
    *(("rule", e) for e in rules.expressions()),
    *(("dashboard", e) for e in dashboards.expressions()),
    *(("usage", e) for e in (*usage.queries("7d").values(), usage.OLDEST_SAMPLE_QUERY)),
    *(("usage", e) for e in usage.queries("7d", "tenant-a").values()),
]


@pytest.mark.parametrize(("where", "expr"), ALL, ids=[f"{w}:{e[:60]}" for w, e in ALL])
def test_every_expression_parses_and_names_only_traced_series(where: str, expr: str) -> None:
    metrics, labels = _names(expr)
    assert metrics, f"{where}: {expr} reads no metric"
    unknown = metrics - set(series.TRACED) - RECORDED
    assert not unknown, f"{where}: {expr} names metrics no pinned upstream exports: {unknown}"
    allowed = set().union(*(_labels_of(m) for m in metrics))
    assert labels <= allowed, (
        f"{where}: {expr} names labels {labels - allowed} of none of {metrics}"
    )


def test_the_name_check_can_fail() -> None:
    metrics, labels = _names('sum by (tenant) (hami_vgpu_memory_alocated_bytes{nod="x"})')
    assert metrics - set(series.TRACED) == {"hami_vgpu_memory_alocated_bytes"}
    assert "nod" in labels
    assert "nod" not in KNOWN_LABELS
    with pytest.raises(ValueError, match="parenthesis"):
        promql_parser.parse("sum by (tenant (hami_vgpu_memory_allocated_bytes)")


def test_every_recorded_name_follows_the_level_metric_operation_convention() -> None:
    for name in rules.recorded_names():
        level, metric, operation = name.split(":")
        assert level == "tenant", name
        assert metric, name
        assert operation, name


def test_the_dashboard_variables_read_recorded_series() -> None:
    assert set(dashboards.variable_metrics()) <= RECORDED


def test_every_traced_series_cites_a_path_and_line() -> None:
    from components.metrics import dra_claims

    for s in series.TRACED.values():
        if s.source == series.DRA_SERIES:  # the platform's own exporter declares its names
            assert s.name in (dra_claims.CARDS, dra_claims.MEMORY), s
            assert s.labels == dra_claims.LABELS, s
            continue
        assert re.search(r"\S+\.(go|csv):\d+", s.source), s


def _cached_hami_dashboard() -> Path | None:
    spec = importlib.util.spec_from_file_location(
        "fetch_dashboards", Path(__file__).resolve().parents[2] / "scripts" / "fetch_dashboards.py"
    )
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    path: Path = module.cached_path(HAMI_DASHBOARD)
    return path if path.is_file() else None


def test_hamis_own_dashboard_names_only_series_hami_declares() -> None:
    path = _cached_hami_dashboard()
    if path is None:
        pytest.skip("HAMi's dashboard is not cached: run python scripts/fetch_dashboards.py")
    document = json.loads(path.read_text())
    exprs = [
        target["expr"]
        for panel in document.get("panels", [])
        for target in panel.get("targets", [])
        if target.get("expr")
    ]
    assert exprs
    hami = {name for name in series.TRACED if name.startswith("hami_")}
    for expr in exprs:
        # Grafana variables ($node, ${__rate_interval}) are not PromQL: give them values.
        concrete = re.sub(r"\$\{?__\w+\}?", "5m", expr)
        concrete = re.sub(r"\$\{?\w+\}?", ".*", concrete)
        metrics, _ = _names(concrete)
        hamis = {m for m in metrics if m.startswith("hami_")}
        assert hamis <= hami, f"{expr}: {hamis - hami} not traced to HAMi v2.10.0"


def _selectors_without_tenant(expr: str) -> list[str]:
    """The vector selectors of ``expr`` (Grafana's variables given values) lacking
    ``tenant="$tenant"``."""
    concrete = re.sub(r"\$\{?__\w+\}?", "5m", expr.replace("$tenant", "TENANT"))
    concrete = re.sub(r"\$\{?\w+\}?", ".*", concrete)
    missing: list[str] = []

    def visit(node: object) -> None:
        if isinstance(node, promql_parser.VectorSelector):
            scoped = [
                m
                for m in node.matchers.matchers
                if m.name == "tenant" and m.op == promql_parser.MatchOp.Equal
            ]
            if [m.value for m in scoped] != ["TENANT"]:
                missing.append(str(node))

    promql_parser.walk(promql_parser.parse(concrete), pre_visit=visit)
    return missing


def _label_values_series(definition: str) -> str:
    """``label_values(<series>, <label>)`` -> ``<series>`` (a Grafana variable query)."""
    match = re.fullmatch(r"label_values\((.*), *\w+\)", definition)
    assert match, definition
    return match.group(1)


def test_scoping_adds_the_tenant_to_every_selector_and_nothing_else() -> None:
    scope = hami_dashboard.scope_expr
    assert (
        scope('count(hami_gpu_memory_limit_bytes{node=~"$node"})')
        == 'count(hami_gpu_memory_limit_bytes{tenant="$tenant",node=~"$node"})'
    )
    joined = (
        "hami_host_gpu_utilization_ratio and on (device_uuid) "
        'hami_gpu_memory_limit_bytes{node=~"$node"}'
    )
    assert scope(joined) == (
        'hami_host_gpu_utilization_ratio{tenant="$tenant"} and on (device_uuid) '
        'hami_gpu_memory_limit_bytes{tenant="$tenant",node=~"$node"}'
    )
    # Not a selector: a longer name, a label, a string.
    assert scope("sum by (node) (xhami_y)") == "sum by (node) (xhami_y)"
    assert _selectors_without_tenant(scope("topk(10, hami_vgpu_memory_used_bytes{})")) == []
    # The check can fail.
    assert len(_selectors_without_tenant("hami_gpu_shared_count")) == 1


def test_hamis_dashboard_as_grafana_gets_it_shows_one_tenant_at_a_time() -> None:
    path = _cached_hami_dashboard()
    if path is None:
        pytest.skip("HAMi's dashboard is not cached: run python scripts/fetch_dashboards.py")
    document = hami_dashboard.scope_to_tenant(json.loads(path.read_text()))
    exprs = [
        target["expr"]
        for panel in document.get("panels", [])
        for target in panel.get("targets", [])
        if target.get("expr")
    ]
    assert exprs
    for expr in exprs:
        assert _selectors_without_tenant(expr) == [], expr
    variables = {v["name"]: v for v in document["templating"]["list"]}
    tenant = variables["tenant"]
    assert (tenant["multi"], tenant["includeAll"]) == (False, False)  # one tenant, never "All"
    for name in ("node", "namespace"):
        query = variables[name]["query"]["query"]
        assert _selectors_without_tenant(_label_values_series(query)) == [], query
    # The tenant variable comes before the variables that read it; applying twice changes
    # nothing.
    names = [v["name"] for v in document["templating"]["list"]]
    assert names.index("tenant") < names.index("node")
    again = hami_dashboard.scope_to_tenant(json.loads(json.dumps(document)))
    assert again == document
