"""Where the budgets and the spreading meet the pinned charts (issue 44, point 1): every
PodDisruptionBudget's selector matches the labels of the pods the chart renders, and the
rendered pod templates carry the replicas, affinity, spreading and requests the program set.

Rendered from the pinned archives (``make charts``); skipped with one line when absent.
"""

from __future__ import annotations

from typing import Any

import pytest

from components import availability, chart_cache
from components.config import DedicatedDataStore
from components.management_values import (
    KAMAJI_NAMESPACE,
    DefaultEtcd,
    default_etcd_budget,
    kamaji_budget,
    kamaji_values,
)
from components.prod.tenant_values import kamaji_etcd_values
from components.versions import PINNED
from tests.support.charts import (
    ChartUnavailableError,
    ClusterCapabilities,
    render_pinned_or_skip,
    render_release,
)
from tests.support.kube_schemas import builtin_api_versions

MANAGEMENT_VERSION = "v1.35.0"


def _selects(budget: dict[str, Any] | None, labels: dict[str, str]) -> bool:
    assert budget is not None
    wanted = budget["spec"]["selector"]["matchLabels"]
    return all(labels.get(key) == value for key, value in wanted.items())


def _kamaji(etcd: DefaultEtcd | None) -> Any:
    inputs = {
        "chart": chart_cache.kamaji_chart_input(),
        "name": "kamaji",
        "namespace": KAMAJI_NAMESPACE,
        "values": kamaji_values(PINNED.kamaji_image_tag, etcd, replicas=2),
    }
    caps = ClusterCapabilities(MANAGEMENT_VERSION, builtin_api_versions(MANAGEMENT_VERSION))
    try:
        return render_release(inputs, caps)
    except ChartUnavailableError as missing:
        pytest.skip(str(missing))


def test_two_kamaji_controllers_render_with_their_budget_and_anti_affinity() -> None:
    rendered = _kamaji(None)
    [deployment] = [d for d in rendered.of_kind("Deployment") if d["metadata"]["name"] == "kamaji"]
    assert deployment["spec"]["replicas"] == 2
    template = deployment["spec"]["template"]
    assert _selects(kamaji_budget(2), template["metadata"]["labels"])
    anti = template["spec"]["affinity"]["podAntiAffinity"]
    for term in anti["preferredDuringSchedulingIgnoredDuringExecution"]:
        selector = term["podAffinityTerm"]["labelSelector"]["matchLabels"]
        assert all(template["metadata"]["labels"].get(k) == v for k, v in selector.items())
    assert "--leader-elect" in template["spec"]["containers"][0]["args"]


def test_the_bundled_default_etcd_renders_spread_with_requests_under_its_budget() -> None:
    etcd = DefaultEtcd(members=3, cluster_domain="cluster.local", own_release=False)
    [statefulset] = _kamaji(etcd).of_kind("StatefulSet")
    template = statefulset["spec"]["template"]
    assert statefulset["spec"]["replicas"] == 3
    assert _selects(default_etcd_budget(etcd), template["metadata"]["labels"])
    for constraint in template["spec"]["topologySpreadConstraints"]:
        selector = constraint["labelSelector"]["matchLabels"]
        assert all(template["metadata"]["labels"].get(k) == v for k, v in selector.items())
    [container] = template["spec"]["containers"]
    assert container["resources"]["requests"] == {"cpu": "100m", "memory": "256Mi"}
    # The chart's own empty default, merged in: no limit.
    assert not container["resources"].get("limits")


def test_a_dedicated_etcd_renders_spread_under_its_budget() -> None:
    values = kamaji_etcd_values("team-a", DedicatedDataStore(replicas=3))
    chart = PINNED.kamaji_etcd
    rendered = render_pinned_or_skip(
        chart.chart,
        chart.version,
        values,
        name="team-a-etcd",
        namespace="team-a",
        kube_version=MANAGEMENT_VERSION,
    )
    [statefulset] = rendered.of_kind("StatefulSet")
    template = statefulset["spec"]["template"]
    budget = availability.etcd_budget("team-a-etcd", "team-a", "team-a-etcd", 3)
    assert _selects(budget, template["metadata"]["labels"])
    spread = template["spec"]["topologySpreadConstraints"]
    assert [c["topologyKey"] for c in spread] == [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    ]
    for constraint in spread:
        selector = constraint["labelSelector"]["matchLabels"]
        assert all(template["metadata"]["labels"].get(k) == v for k, v in selector.items())
