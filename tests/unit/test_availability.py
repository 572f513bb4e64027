"""The management cluster's availability builders (components.availability): budgets only where
more than one pod runs, a quorum kept for etcd, spreading by node (hard) and zone (soft), and
the Helm values they become, checked against the pinned charts' values files."""

from __future__ import annotations

import pytest

from components import availability
from components.management_values import (
    KAMAJI_SELECTOR,
    DefaultEtcd,
    default_etcd_budget,
    default_etcd_values,
    kamaji_budget,
    kamaji_etcd_values,
    kamaji_values,
)


@pytest.mark.parametrize(
    ("replicas", "quorum", "expected"),
    [
        (1, False, None),
        (2, False, 1),
        (3, False, 1),
        (1, True, None),
        # Two etcd members have no quorum to spare: any disruption stops writes.
        (2, True, None),
        (3, True, 1),
        (5, True, 2),
        (7, True, 3),
    ],
)
def test_how_many_pods_a_drain_may_take(replicas: int, quorum: bool, expected: int | None) -> None:
    assert availability.max_unavailable(replicas, quorum) == expected


def test_one_pod_gets_no_budget() -> None:
    """A budget over one pod blocks every drain (minAvailable 1) or protects nothing."""
    assert availability.control_plane_budget("team-a", "team-a", 1, {}) is None
    assert kamaji_budget(1) is None
    assert default_etcd_budget(DefaultEtcd(1, "cluster.local", own_release=True)) is None


def test_a_control_plane_budget_selects_kamajis_deployment_pods() -> None:
    budget = availability.control_plane_budget("team-a", "ns-a", 3, {"l": "v"})
    assert budget == {
        "apiVersion": "policy/v1",
        "kind": "PodDisruptionBudget",
        "metadata": {"name": "team-a-control-plane", "namespace": "ns-a", "labels": {"l": "v"}},
        "spec": {
            "maxUnavailable": 1,
            "selector": {"matchLabels": {"kamaji.clastix.io/name": "team-a"}},
        },
    }


def test_the_kamaji_budget_selects_the_controller_pods() -> None:
    budget = kamaji_budget(2)
    assert budget is not None
    assert budget["metadata"] == {"name": "kamaji", "namespace": "kamaji-system"}
    assert budget["spec"]["selector"]["matchLabels"] == dict(KAMAJI_SELECTOR)
    assert budget["spec"]["maxUnavailable"] == 1


def test_the_default_etcd_budget_follows_its_release() -> None:
    """Kamaji's bundled subchart labels its pods with the parent release (kamaji)."""
    bundled = default_etcd_budget(DefaultEtcd(3, "cluster.local", own_release=False))
    own = default_etcd_budget(DefaultEtcd(3, "cluster.local", own_release=True))
    assert bundled is not None
    assert own is not None
    assert bundled["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "kamaji"
    assert own["spec"]["selector"]["matchLabels"]["app.kubernetes.io/instance"] == "kamaji-etcd"
    assert bundled["spec"]["maxUnavailable"] == 1


def test_spreading_is_hard_by_node_and_soft_by_zone() -> None:
    hostname, zone = availability.topology_spread({"a": "b"})
    assert hostname == {
        "maxSkew": 1,
        "topologyKey": "kubernetes.io/hostname",
        "whenUnsatisfiable": "DoNotSchedule",
        "nodeTaintsPolicy": "Honor",
        "labelSelector": {"matchLabels": {"a": "b"}},
    }
    assert zone["topologyKey"] == "topology.kubernetes.io/zone"
    assert zone["whenUnsatisfiable"] == "ScheduleAnyway"
    # Without a selector Kamaji fills in its Deployment's.
    assert all("labelSelector" not in c for c in availability.topology_spread(None))


def test_one_kamaji_keeps_the_charts_defaults() -> None:
    values = kamaji_values("v1", None)
    assert "replicaCount" not in values
    assert "affinity" not in values


def test_two_kamajis_prefer_different_nodes() -> None:
    values = kamaji_values("v1", None, replicas=2)
    assert values["replicaCount"] == 2
    terms = values["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert [t["podAffinityTerm"]["topologyKey"] for t in terms] == [
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    ]
    assert all(
        t["podAffinityTerm"]["labelSelector"]["matchLabels"] == dict(KAMAJI_SELECTOR) for t in terms
    )


def test_etcd_members_spread_only_where_there_are_several() -> None:
    assert "topologySpreadConstraints" not in default_etcd_values("cluster.local", 1)
    values = kamaji_etcd_values("team-a-etcd", cluster_domain="cluster.local", replicas=3)
    selectors = [c["labelSelector"]["matchLabels"] for c in values["topologySpreadConstraints"]]
    assert (
        selectors
        == [{"app.kubernetes.io/name": "kamaji-etcd", "app.kubernetes.io/instance": "team-a-etcd"}]
        * 2
    )


def test_the_bundled_default_etcd_spreads_by_the_parent_release() -> None:
    values = kamaji_values("v1", DefaultEtcd(3, "cluster.local", own_release=False), replicas=2)
    etcd = values["kamaji-etcd"]
    assert etcd["replicas"] == 3
    assert etcd["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "kamaji-etcd",
        "app.kubernetes.io/instance": "kamaji",
    }


def test_every_etcd_member_requests_resources() -> None:
    """The chart requests nothing: a BestEffort member is the first evicted under memory
    pressure. Requests only, no limits (a limit would let the kernel kill a quorum member)."""
    expected = {"requests": {"cpu": "100m", "memory": "256Mi"}}
    assert default_etcd_values("cluster.local", 1)["resources"] == expected
    assert kamaji_etcd_values("t-etcd", cluster_domain="cluster.local")["resources"] == expected
    bundled = kamaji_values("v1", DefaultEtcd(3, "cluster.local", own_release=False))
    assert bundled["kamaji-etcd"]["resources"] == expected
