"""``metrics.prometheusOperator``: the PrometheusRule and the ScrapeConfig validate against the
Prometheus Operator's CRDs at the pinned tag (``objects.PROMETHEUS_OPERATOR_TAG``).

The CRDs are read from the operator's Go module at that tag
(``example/prometheus-operator-crd/monitoring.coreos.com_{prometheusrules,scrapeconfigs}.yaml``),
pinned with its checksum in ``tests/support/upstream-modules`` and fetched once from the Go
module proxy (``tests.support.go_modules``). Without Go or the proxy the test skips with one
line, and fails under CI, whose machines have both.
"""

from __future__ import annotations

import copy
import os
from pathlib import Path
from typing import Any

import pytest

from components.metrics import objects
from tests.support import go_modules
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


MODULE = "github.com/prometheus-operator/prometheus-operator"


@pytest.fixture(scope="module")
def operator_crds(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """A folder holding links to the two CRDs in the module (the folder beside them has files
    the CRD reader need not parse)."""
    found = go_modules.module_dir(MODULE)
    if isinstance(found, str):
        if os.environ.get("CI"):
            pytest.fail(f"{found} (CI's machines have Go and the Go module proxy)")
        pytest.skip(found)
    crds = tmp_path_factory.mktemp("prometheus-operator-crds")
    for name in CRDS.values():
        source = found / "example" / "prometheus-operator-crd" / name
        assert source.is_file(), f"{MODULE} has no {source}"
        (crds / name).symlink_to(source)
    return crds


def test_the_module_is_pinned_at_the_objects_tag() -> None:
    assert go_modules.pinned_version(MODULE) == objects.PROMETHEUS_OPERATOR_TAG


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
