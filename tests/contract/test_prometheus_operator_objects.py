"""``metrics.prometheusOperator``: the PrometheusRule and the ScrapeConfig validate against the
Prometheus Operator's CRDs at the pinned tag (``objects.PROMETHEUS_OPERATOR_TAG``).

The CRDs are read from the pinned upstream folder,
``prometheus-operator/<tag>/monitoring.coreos.com_{prometheusrules,scrapeconfigs}.yaml`` (from
prometheus-operator/prometheus-operator at that tag, ``example/prometheus-operator-crd/``); the
test is skipped, with one line naming the file, where the folder lacks them.
"""

from __future__ import annotations

import copy
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from components.metrics import objects
from tests.support.contracts import crd_violations

CRDS = {
    "PrometheusRule": "monitoring.coreos.com_prometheusrules.yaml",
    "ScrapeConfig": "monitoring.coreos.com_scrapeconfigs.yaml",
}
LABELS = {"release": "kube-prometheus-stack"}


def _objects() -> list[dict[str, Any]]:
    return [
        objects.operator_rule(LABELS),
        objects.operator_kamaji_scrape("30s", "kamaji-system", LABELS),
    ]


@pytest.fixture
def operator_crds(upstream_file: Callable[[str], Path], upstream_dir: Path) -> Path:
    for name in CRDS.values():
        upstream_file(f"prometheus-operator/{objects.PROMETHEUS_OPERATOR_TAG}/{name}")
    return upstream_dir


@pytest.mark.parametrize("manifest", _objects(), ids=lambda m: m["kind"])
def test_the_operator_objects_validate_against_its_pinned_crds(
    manifest: dict[str, Any], operator_crds: Path
) -> None:
    assert crd_violations(operator_crds, manifest) == []


def test_the_check_can_fail(operator_crds: Path) -> None:
    rule, scrape = _objects()
    broken_rule = copy.deepcopy(rule)
    broken_rule["spec"]["groups"][0]["rules"][0]["recrod"] = "x"
    assert crd_violations(operator_crds, broken_rule)
    broken_scrape = copy.deepcopy(scrape)
    broken_scrape["spec"]["metricRelabelings"][0]["source_labels"] = ["tcp_name"]
    assert crd_violations(operator_crds, broken_scrape)
