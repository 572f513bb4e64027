"""Issue 44, point 1, under mocks: prod's rendered stack has two leader-elected Kamaji
controllers, a PodDisruptionBudget for Kamaji, every replicated tenant control plane and every
dedicated (and the default) kamaji-etcd, and their pods spread across nodes; the lab keeps one
of each and registers no budget."""

from __future__ import annotations

import copy
from typing import Any

from tests.support.harness import Recording, evaluate, load_stack_config

PDB = "kubernetes:policy/v1:PodDisruptionBudget"
RELEASE = "kubernetes:helm.sh/v3:Release"
KCP = "controlplane.cluster.x-k8s.io/v1alpha2"


def _budgets(recording: Recording) -> dict[tuple[str, str], dict[str, Any]]:
    return {
        (r.inputs["metadata"]["namespace"], r.inputs["metadata"]["name"]): r.inputs["spec"]
        for r in recording.of_type(PDB)
    }


def _release(recording: Recording, name: str) -> dict[str, Any]:
    [release] = [r for r in recording.of_type(RELEASE) if r.inputs["name"] == name]
    return release.inputs["values"]


def test_prod_budgets_kamaji_every_control_plane_and_every_dedicated_etcd(
    prod: Recording,
) -> None:
    assert _budgets(prod) == {
        ("kamaji-system", "kamaji"): {
            "maxUnavailable": 1,
            "selector": {
                "matchLabels": {
                    "app.kubernetes.io/name": "kamaji",
                    "app.kubernetes.io/instance": "kamaji",
                    "app.kubernetes.io/component": "controller-manager",
                }
            },
        },
        **{
            (tenant, f"{tenant}-control-plane"): {
                "maxUnavailable": 1,
                "selector": {"matchLabels": {"kamaji.clastix.io/name": tenant}},
            }
            for tenant in ("team-vision", "team-llm", "team-speech")
        },
        # team-speech's datastore is an external PostgreSQL: nothing of it runs here.
        **{
            (tenant, f"{tenant}-etcd"): {
                "maxUnavailable": 1,
                "selector": {
                    "matchLabels": {
                        "app.kubernetes.io/name": "kamaji-etcd",
                        "app.kubernetes.io/instance": f"{tenant}-etcd",
                    }
                },
            }
            for tenant in ("team-vision", "team-llm")
        },
    }


def test_prod_runs_two_kamaji_controllers_on_different_nodes(prod: Recording) -> None:
    values = _release(prod, "kamaji")
    assert values["replicaCount"] == 2
    anti = values["affinity"]["podAntiAffinity"]["preferredDuringSchedulingIgnoredDuringExecution"]
    assert {term["podAffinityTerm"]["topologyKey"] for term in anti} == {
        "kubernetes.io/hostname",
        "topology.kubernetes.io/zone",
    }


def test_prod_spreads_control_planes_and_etcd_members(prod: Recording) -> None:
    planes = [
        r
        for r in prod.resources
        if not r.read
        and r.inputs.get("apiVersion") == KCP
        and r.inputs.get("kind") == "KamajiControlPlane"
    ]
    assert len(planes) == 3
    for plane in planes:
        spread = plane.inputs["spec"]["deployment"]["topologySpreadConstraints"]
        assert [(c["topologyKey"], c["whenUnsatisfiable"]) for c in spread] == [
            ("kubernetes.io/hostname", "DoNotSchedule"),
            ("topology.kubernetes.io/zone", "ScheduleAnyway"),
        ]
    for tenant in ("team-vision", "team-llm"):
        values = _release(prod, f"{tenant}-etcd")
        assert values["replicas"] == 3
        selectors = [c["labelSelector"]["matchLabels"] for c in values["topologySpreadConstraints"]]
        assert {s["app.kubernetes.io/instance"] for s in selectors} == {f"{tenant}-etcd"}


def test_prods_default_etcd_has_three_spread_members_and_a_budget() -> None:
    config = copy.deepcopy(load_stack_config("prod"))
    config["gpu-platform:platform"]["management"]["existing"]["kamajiEtcd"] = True
    recording = evaluate("prod", False, config=config)
    assert recording.error is None
    etcd = _release(recording, "kamaji")["kamaji-etcd"]
    assert etcd["replicas"] == 3
    assert etcd["topologySpreadConstraints"][0]["labelSelector"]["matchLabels"] == {
        "app.kubernetes.io/name": "kamaji-etcd",
        "app.kubernetes.io/instance": "kamaji",
    }
    assert _budgets(recording)[("kamaji-system", "kamaji-etcd")]["maxUnavailable"] == 1


def test_the_lab_keeps_one_of_each_and_no_budget(lab: Recording) -> None:
    """One kind node: a second replica would share it (docs/lab.md)."""
    assert _budgets(lab) == {}
    kamaji = _release(lab, "kamaji")
    assert "replicaCount" not in kamaji
    assert "affinity" not in kamaji
    assert _release(lab, "kamaji-etcd")["replicas"] == 1
    assert "topologySpreadConstraints" not in _release(lab, "kamaji-etcd")
