"""The GPU Operator and HAMi agree on how devices reach a container (prod).

HAMi's device plugin answers Allocate with ``NVIDIA_VISIBLE_DEVICES=GPU-<uuid>`` (its default
``envvar`` device list strategy); the GPU Operator v26.7.0 turns CDI on by default, and with CDI
on its ``nvidia`` runtime resolves that list against a CDI spec holding only ``all``, so every
shared-GPU container fails with "unresolvable CDI devices". The pairing (CDI off) is checked on
the pinned defaults, on the recorded releases and, where the chart archives are present, on the
objects Helm renders from them.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.chart_cache import release_chart_name
from components.config import GpuDriver
from components.prod.tenant_values import gpu_operator_values
from components.versions import PINNED
from tests.support.charts import render_pinned_or_skip
from tests.support.contracts import chart_defaults
from tests.support.harness import Recording, load_stack_config

RELEASE = "kubernetes:helm.sh/v3:Release"
TENANT_VERSION = load_stack_config("prod")["gpu-platform:platform"]["kubernetesVersion"]


def _releases(prod: Recording, chart: str) -> list[Any]:
    found = [
        r for r in prod.of_type(RELEASE) if release_chart_name(str(r.inputs.get("chart"))) == chart
    ]
    assert found, f"prod registers no {chart} release"
    return found


def _hami_strategy(values: dict[str, Any], defaults: dict[str, Any]) -> Any:
    plugin = values.get("devicePlugin") or {}
    return plugin.get("deviceListStrategy", defaults["devicePlugin"]["deviceListStrategy"])


def _cdi_enabled(values: dict[str, Any], defaults: dict[str, Any]) -> Any:
    cdi = values.get("cdi") or {}
    return cdi.get("enabled", defaults["cdi"]["enabled"])


# ------------------------------------------------------------------------ pinned defaults


def test_the_pinned_defaults_disagree_so_the_program_must_pair_them(upstream_dir: Path) -> None:
    """Why the values matter: left alone, the pinned charts pair CDI-on with envvar."""
    assert chart_defaults(upstream_dir, "gpu-operator")["cdi"]["enabled"] is True
    assert chart_defaults(upstream_dir, "hami")["devicePlugin"]["deviceListStrategy"] == "envvar"


def test_every_prod_tenant_turns_cdi_off_for_hamis_envvar_list(
    prod: Recording, upstream_dir: Path
) -> None:
    operator_defaults = chart_defaults(upstream_dir, "gpu-operator")
    hami_defaults = chart_defaults(upstream_dir, "hami")
    operators = {r.name.removesuffix("-gpu-operator"): r for r in _releases(prod, "gpu-operator")}
    hamis = {r.name.removesuffix("-hami"): r for r in _releases(prod, "hami")}
    assert set(operators) == set(hamis)
    for tenant, hami in hamis.items():
        strategy = _hami_strategy(hami.inputs.get("values") or {}, hami_defaults)
        cdi = _cdi_enabled(operators[tenant].inputs.get("values") or {}, operator_defaults)
        assert (strategy, cdi) == ("envvar", False), tenant


# ------------------------------------------------------------------------ rendered charts
# That every rendered ClusterPolicy has CDI off and every rendered HAMi device plugin lists
# devices by envvar is checked on both stacks by the rendered-chart suite
# (tests/support/rendered_facts.py: gpu_operator); here the driver settings reach it.


@pytest.mark.parametrize(
    ("driver", "expected"),
    [
        (GpuDriver(source="preinstalled"), {"enabled": False}),
        (
            GpuDriver(source="precompiled", version="595"),
            {"usePrecompiled": True, "version": "595"},
        ),
        (
            GpuDriver(package_repositories={"m.list": "deb http://m/ noble main"}),
            {"repoConfig": {"configMapName": "gpu-driver-repositories"}},
        ),
    ],
)
def test_the_rendered_cluster_policy_carries_the_driver_settings(
    driver: GpuDriver, expected: dict[str, Any]
) -> None:
    chart = PINNED.gpu_operator
    rendered_release = render_pinned_or_skip(
        chart.chart,
        chart.version,
        gpu_operator_values(driver),
        name="gpu-operator",
        namespace="gpu-operator",
        kube_version=TENANT_VERSION,
    )
    (policy,) = rendered_release.of_kind("ClusterPolicy")
    rendered = policy["spec"]["driver"]
    assert {key: rendered.get(key) for key in expected} == expected
    assert policy["spec"]["cdi"]["enabled"] is False
