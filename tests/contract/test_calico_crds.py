"""Calico's CRDs: the facts the separate ``crd.projectcalico.org.v1`` release rests on.

Since Calico v3.32.0 the tigera-operator chart ships no CRDs (projectcalico/calico v3.32.1
``charts/tigera-operator/README.md``): its ``Installation`` fails to install unless the
``crd.projectcalico.org.v1`` chart of the same release is installed first. That every tenant's
``Installation`` has its CRD installed before it is checked with every other custom resource by
the rendered-chart suite (``tests/render``); here: the chart facts and the release's size.
Rendered from the pinned archives; skipped when they are absent.
"""

from __future__ import annotations

import pytest

from components.versions import PINNED
from tests.support.charts import (
    ChartUnavailableError,
    release_secret_bytes,
    render_pinned_or_skip,
)
from tests.support.harness import load_stack_config

TENANT_VERSION = load_stack_config("lab")["gpu-platform:platform"]["kubernetesVersion"]
MIB = 1024 * 1024
# Helm v3 keeps a release in one Secret, whose data the API server limits to 1 MiB
# (k8s.io/api core/v1 MaxSecretSize). The estimate uses Python's zlib for Go's deflate, which
# compresses a few per cent worse: keep that much headroom.
RELEASE_SECRET_BUDGET = int(0.97 * MIB)


def test_the_tigera_operator_chart_ships_no_crds() -> None:
    """The upstream fact the CRD release rests on (it would be redundant if this changed)."""
    chart = PINNED.tigera_operator
    rendered = render_pinned_or_skip(
        chart.chart,
        chart.version,
        {},
        name="calico",
        namespace="tigera-operator",
        kube_version=TENANT_VERSION,
    )
    assert rendered.objects
    assert rendered.of_kind("CustomResourceDefinition") == []


def test_the_crd_chart_is_the_operators_calico_release() -> None:
    assert PINNED.calico_crds.version == PINNED.tigera_operator.version
    assert PINNED.calico_crds.repo == PINNED.tigera_operator.repo


def test_the_calico_crd_release_fits_helms_release_secret() -> None:
    """~3 MB of CRDs: Helm stores chart and manifest gzip'd in one Secret of at most 1 MiB.
    Measured 0.90 MiB at v3.32.1; a Calico bump past the budget needs another install route
    (a kubernetes.helm.v4.Chart or server-side apply of the rendered CRDs)."""
    chart = PINNED.calico_crds
    try:
        size = release_secret_bytes(
            chart.chart, chart.version, {}, name="calico-crds", namespace="tigera-operator"
        )
    except ChartUnavailableError as missing:
        pytest.skip(str(missing))
    assert size < RELEASE_SECRET_BUDGET, f"release Secret ~{size / MIB:.2f} MiB"
