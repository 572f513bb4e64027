"""HAMi's own dashboard, scoped to one tenant at a time.

HAMi v2.10.0's ``dashboards/hami-vgpu-dashboard.json`` knows nothing of tenants: its variables
are ``node`` and ``namespace``, so "Physical GPUs" counts every tenant's cards and ``default``
merges every tenant's ``default`` namespace. ``scope_to_tenant`` adds a single-valued ``tenant``
variable (no "All") and the matcher ``tenant="$tenant"`` to every HAMi series the dashboard
selects, in its panels and in its other variables, so each view shows one tenant's GPUs only.

Grafana's init container runs this file's source, with the Python standard library only, after
it checked the downloaded file against the pinned sha256 (``objects.FETCH_SCRIPT``): the content
check covers what HAMi published, this function what is changed, and nothing else is.
"""

from __future__ import annotations

import re
from typing import Any

TENANT_VARIABLE = "tenant"
TENANT_MATCHER = 'tenant="$tenant"'
# A HAMi series name as a selector: not part of a longer name, not a label (``by (hami_x)``
# never occurs), with or without a ``{...}`` matcher list.
_SELECTOR = re.compile(r"(?<![A-Za-z0-9_:])(hami_[A-Za-z0-9_]+)(\s*\{)?")
# The variable that lists the tenants: the scheduler's per-card series, present for every tenant
# whose HAMi is scraped (the lab's mock device plugin included).
_TENANTS_QUERY = "label_values(hami_gpu_memory_limit_bytes, tenant)"


def scope_expr(expr: str) -> str:
    """``expr`` with ``tenant="$tenant"`` in every HAMi series selector."""

    def scoped(match: re.Match[str]) -> str:
        name, brace = match.group(1), match.group(2)
        if brace:
            return f"{name}{{{TENANT_MATCHER},"
        return f"{name}{{{TENANT_MATCHER}}}"

    # ``name{}`` would become ``name{tenant="$tenant",}``: PromQL accepts a trailing comma.
    return _SELECTOR.sub(scoped, expr)


def _tenant_variable(datasource: Any) -> dict[str, Any]:
    return {
        "current": {},
        "datasource": datasource,
        "definition": _TENANTS_QUERY,
        "hide": 0,
        "includeAll": False,
        "label": "Tenant",
        "multi": False,
        "name": TENANT_VARIABLE,
        "options": [],
        "query": {"qryType": 1, "query": _TENANTS_QUERY, "refId": "StandardVariableQuery"},
        "refresh": 2,
        "regex": "",
        "skipUrlSync": False,
        "sort": 1,
        "type": "query",
    }


def _scope_panels(panels: list[Any]) -> None:
    for panel in panels:
        for target in panel.get("targets", []):
            if isinstance(target.get("expr"), str):
                target["expr"] = scope_expr(target["expr"])
        _scope_panels(panel.get("panels", []))  # rows hold their panels


def scope_to_tenant(dashboard: dict[str, Any]) -> dict[str, Any]:
    """The dashboard with a ``tenant`` variable and every HAMi selector scoped to it (in place;
    returned for convenience). Idempotent."""
    variables: list[dict[str, Any]] = dashboard.setdefault("templating", {}).setdefault("list", [])
    if any(v.get("name") == TENANT_VARIABLE for v in variables):
        return dashboard
    for variable in variables:
        if variable.get("type") != "query":
            continue
        if isinstance(variable.get("definition"), str):
            variable["definition"] = scope_expr(variable["definition"])
        query = variable.get("query")
        if isinstance(query, dict) and isinstance(query.get("query"), str):
            query["query"] = scope_expr(query["query"])
        elif isinstance(query, str):
            variable["query"] = scope_expr(query)
    datasource = next(
        (v.get("datasource") for v in variables if v.get("type") == "query"),
        {"type": "prometheus", "uid": "${datasource}"},
    )
    # After the datasource variable (the others' queries read it), before those that read it.
    at = next((i + 1 for i, v in enumerate(variables) if v.get("type") == "datasource"), 0)
    variables.insert(at, _tenant_variable(datasource))
    _scope_panels(dashboard.get("panels", []))
    return dashboard
