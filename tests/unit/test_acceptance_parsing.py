"""Offline tests of the acceptance suite's parsing and judging (issue #8, part 3).

Inputs are the recorded samples in ``tests/acceptance/samples`` (hand-written in the formats
HAMi 2.10.0 / Kamaji / Kubernetes write; each file names the upstream code it was checked
against). Expected numbers sit next to the samples or in these tests, computed by hand - never by
the code under test. Every judge is shown to fail on a broken variant, not only to pass.
"""

from __future__ import annotations

import copy
import json
import re
import subprocess
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from components.config import PlatformConfig
from components.stack import parse_platform
from tests.acceptance import hami_evidence as he
from tests.acceptance import kube, report, stack, workloads
from tests.support.harness import load_stack_config

SAMPLES = Path(__file__).resolve().parents[1] / "acceptance" / "samples"
PLATFORM_KEY = "gpu-platform:platform"


def sample(name: str) -> Any:
    return yaml.safe_load((SAMPLES / name).read_text())


def lab_raw() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab")[PLATFORM_KEY])


def lab_platform() -> PlatformConfig:
    return parse_platform(lab_raw())


def case_id(case: dict[str, Any]) -> str:
    return str(case["name"])


# --------------------------------------------------------------- hami.io/node-nvidia-register

REGISTER_CASES = sample("node_register.yaml")["cases"]


@pytest.mark.parametrize("case", REGISTER_CASES, ids=case_id)
def test_node_register_samples(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(he.EvidenceError, match=case["error"]):
            he.parse_node_register(case["value"])
        return
    cards = he.parse_node_register(case["value"])
    totals = he.inventory_of(cards)
    want = case["expect"]
    assert (totals.cards, totals.memory_mib, totals.core_units, totals.slots) == (
        want["cards"],
        want["memory_mib"],
        want["core_units"],
        want["slots"],
    )
    assert [c.uuid for c in cards] == case["uuids"]
    assert all(c.health for c in cards) is want["healthy"]


def test_node_register_omitempty_fields_default_to_go_zero_values() -> None:
    (first, second) = he.parse_node_register(REGISTER_CASES[2]["value"])
    assert (first.index, first.numa, first.type) == (0, 0, "NVIDIA A100-SXM4-80GB")
    assert (second.index, second.numa, second.mode) == (1, 1, "hami-core")


LAB_A_CARDS = he.parse_node_register(REGISTER_CASES[0]["value"])
LAB_B_CARDS = he.parse_node_register(REGISTER_CASES[1]["value"])
# The report's inventory (acceptance.md), by hand.
LAB_A = he.Inventory(cards=1, memory_mib=81_920, core_units=100, slots=10)
LAB_B = he.Inventory(cards=2, memory_mib=49_152, core_units=200, slots=20)


def test_node_inventory_judge_accepts_the_lab_nodes() -> None:
    a = he.judge_node_inventory("tenant-a-a100-0", LAB_A_CARDS, LAB_A)
    b = he.judge_node_inventory("tenant-b-l4-0", LAB_B_CARDS, LAB_B)
    assert a.ok, a.explain()
    assert b.ok, b.explain()
    assert a.facts["registered"] == {
        "cards": 1,
        "memoryMiB": 81920,
        "coreUnits": 100,
        "slots": 10,
    }


@pytest.mark.parametrize(
    ("cards", "expected", "fragment"),
    [
        (LAB_B_CARDS, LAB_A, "2 cards registered, 1 declared"),
        (LAB_A_CARDS, LAB_B, "81920 MiB registered, more than the 49152 MiB declared"),
        (LAB_A_CARDS, LAB_A.__class__(1, 81_920, 100, 20), "10 sharing slots registered"),
        (LAB_A_CARDS, LAB_A.__class__(1, 81_920, 200, 10), "100 compute units registered"),
        (he.parse_node_register(REGISTER_CASES[3]["value"]), LAB_A, "is not healthy"),
        (LAB_A_CARDS * 2, LAB_A.times(2), "registered twice"),
    ],
)
def test_node_inventory_judge_fails_on_mismatch(
    cards: list[he.RegisteredCard], expected: he.Inventory, fragment: str
) -> None:
    verdict = he.judge_node_inventory("node", cards, expected)
    assert not verdict.ok
    assert fragment in verdict.explain()


def test_node_inventory_judge_rejects_cards_hami_would_skip() -> None:
    card = he.RegisteredCard("GPU-x", 0, 10, 81_920, 100, "A100", 0, "hami-core", True)
    verdict = he.judge_node_inventory("node", [card], LAB_A)
    assert "lacks 'NVIDIA'" in verdict.explain()


@pytest.mark.parametrize("card_type", ["nvidia-a100", "Nvidia A100-SXM4-80GB", "NVIDIA-H100"])
def test_node_inventory_judge_matches_nvidia_like_hami_case_insensitively(card_type: str) -> None:
    # HAMi v2.10.0 pkg/scheduler/score.go:43-48 lower-cases the type before matching "nvidia".
    card = he.RegisteredCard("GPU-x", 0, 10, 81_920, 100, card_type, 0, "hami-core", True)
    assert he.judge_node_inventory("node", [card], LAB_A).ok


def test_memory_tolerance_allows_a_little_more_but_never_less() -> None:
    """Less than declared lets the preview approve pods HAMi refuses; much more is another card."""

    def card(mib: int) -> list[he.RegisteredCard]:
        return [he.RegisteredCard("GPU-x", 0, 10, mib, 100, "NVIDIA H100", 0, "hami-core", True)]

    assert he.judge_node_inventory("n", card(81_920), LAB_A, memory_tolerance=0.05).ok
    assert he.judge_node_inventory("n", card(84_000), LAB_A, memory_tolerance=0.05).ok
    assert not he.judge_node_inventory("n", card(84_000), LAB_A).ok  # lab: exact
    verdict = he.judge_node_inventory("n", card(81_559), LAB_A, memory_tolerance=0.05)
    assert "less than the 81920 MiB declared" in verdict.explain()
    assert not he.judge_node_inventory("n", card(90_000), LAB_A, memory_tolerance=0.05).ok


# ------------------------------------------------------ hami.io/vgpu-devices-allocated etc.

DEVICE_CASES = sample("pod_devices.yaml")["cases"]


@pytest.mark.parametrize("case", DEVICE_CASES, ids=case_id)
def test_pod_devices_samples(case: dict[str, Any]) -> None:
    if "error" in case:
        with pytest.raises(he.EvidenceError, match=case["error"]):
            he.parse_pod_devices(case["value"])
        return
    containers = he.parse_pod_devices(case["value"])
    got = [[[s.uuid, s.memory_mib, s.cores] for s in c] for c in containers]
    assert got == case["containers"]
    assert all(s.vendor == "NVIDIA" for c in containers for s in c)


def test_empty_annotation_has_no_containers() -> None:
    assert he.parse_pod_devices("") == []


def test_card_usage_adds_the_three_report_pods() -> None:
    value = DEVICE_CASES[0]["value"]
    usage = he.card_usage({"share-1": value, "share-2": value, "share-3": value})
    (card,) = usage.values()
    assert (card.uuid, card.memory_mib, card.cores) == (
        "GPU-2ee0ff0b-4199-49c9-9ad5-1a5b6022d3ae",
        60_000,
        90,
    )
    assert card.pods == ["share-1", "share-2", "share-3"]


def test_card_usage_splits_multi_card_pods() -> None:
    (whole,) = [c for c in DEVICE_CASES if "two distinct cards" in c["name"]]
    usage = he.card_usage({"whole": whole["value"]})
    assert {u.uuid: (u.memory_mib, u.cores) for u in usage.values()} == {
        "GPU-6c5a6dac-dde7-43f1-a8da-9423880998d5": (24_576, 100),
        "GPU-6775fe86-54fd-455e-81d9-0aca453040ee": (24_576, 100),
    }


# ------------------------------------------------------------------------------ TC-04 judge

SHARING = sample("sharing.yaml")


def sharing_pods(patch: dict[str, Any] | None = None) -> list[he.PodPlacement]:
    pods = []
    for raw in copy.deepcopy(SHARING["pods"]):
        change = (patch or {}).get(raw["name"], {})
        annotations = {**raw["annotations"], **change.get("annotations", {})}
        annotations = {k: v for k, v in annotations.items() if v is not None}
        pods.append(
            he.PodPlacement(
                name=raw["name"],
                node=change.get("node", raw["node"]),
                phase=change.get("phase", raw["phase"]),
                scheduler_name=change.get("scheduler_name", raw["scheduler_name"]),
                annotations=annotations,
                reason=change.get("reason", ""),
                message=change.get("message", ""),
            )
        )
    return pods


def judge_sample(pods: list[he.PodPlacement], registered: list[str] | None = None) -> he.Verdict:
    card = SHARING["card"]
    return he.judge_sharing(
        pods,
        pod_memory_mib=SHARING["request"]["memory_mib"],
        pod_cores=SHARING["request"]["cores"],
        expected_memory_mib=SHARING["expect_totals"]["memory_mib"],
        expected_cores=SHARING["expect_totals"]["cores"],
        card_memory_mib=card["memory_mib"],
        card_core_units=card["core_units"],
        registered_uuids=registered if registered is not None else [card["uuid"]],
        expected_node=SHARING["node"],
    )


def test_sharing_judge_accepts_the_report_allocation() -> None:
    verdict = judge_sample(sharing_pods())
    assert verdict.ok, verdict.explain()
    assert verdict.facts["usage"] == {"memoryMiB": 60_000, "cores": 90}
    assert verdict.facts["node"] == "tenant-a-a100-0"
    assert [c["uuid"] for c in verdict.facts["cards"]] == [SHARING["card"]["uuid"]]


@pytest.mark.parametrize("variant", SHARING["variants"], ids=case_id)
def test_sharing_judge_fails_on_each_broken_variant(variant: dict[str, Any]) -> None:
    verdict = judge_sample(sharing_pods(variant["patch"]), variant.get("registered_uuids"))
    assert not verdict.ok
    assert variant["problem"] in verdict.explain()


def test_sharing_judge_needs_pods() -> None:
    assert not judge_sample([]).ok


# --------------------------------------------------------------------------- events

EVENTS = sample("events.yaml")
EVENT_BY_ID = {
    e["id"]: he.EventRecord(e["type"], e["reason"], e["message"], e["source"])
    for e in EVENTS["events"]
}


@pytest.mark.parametrize("raw", EVENTS["events"], ids=lambda e: e["id"])
def test_event_reasons_samples(raw: dict[str, Any]) -> None:
    assert he.hami_reasons(EVENT_BY_ID[raw["id"]]) == set(raw["reasons"])


def test_filtering_failed_names_reason_and_nodes() -> None:
    assert he.parse_filtering_failed("1 nodes CardInsufficientCore(tenant-a-a100-0)") == (
        "CardInsufficientCore",
        1,
        ["tenant-a-a100-0"],
    )
    assert he.parse_filtering_failed("2 nodes CardInsufficientMemory(n-0,n-1)") == (
        "CardInsufficientMemory",
        2,
        ["n-0", "n-1"],
    )
    assert he.parse_filtering_failed("no available node, 1 nodes do not meet") is None


def test_fit_error_keeps_the_filter_part_only() -> None:
    message = EVENT_BY_ID["kube-two-nodes"].message
    assert he.parse_fit_error(message) == (
        2,
        "1 1/1 CardInsufficientCore, 1 node(s) didn't match Pod's node affinity/selector",
    )
    assert he.parse_fit_error("Successfully assigned a/b to n") is None


def test_card_reasons_are_counted_per_card() -> None:
    assert he.parse_card_reasons("1/2 CardInsufficientCore, 1/2 CardInsufficientMemory") == {
        "CardInsufficientCore": (1, 2),
        "CardInsufficientMemory": (1, 2),
    }
    # "0/1 nodes" is kube-scheduler's node count, not a card reason.
    assert he.parse_card_reasons("0/1 nodes are available") == {}


def test_card_reasons_keep_their_counts_per_event() -> None:
    """kube-scheduler's FailedScheduling carries GenReason's counts; HAMi's FilteringFailed not."""
    assert he.hami_reason_counts(EVENT_BY_ID["kube-memory-pinned-8"]) == {
        "CardInsufficientMemory": (1, 8),
        "CardUuidMismatch": (7, 8),
    }
    assert he.hami_reason_counts(EVENT_BY_ID["hami-uuid-h100"]) == {"CardUuidMismatch": None}


def test_a_pinned_refusal_records_the_other_cards_mismatch_as_noise() -> None:
    """TC-13 on an 8-card node (issue 24): the other seven cards' CardUuidMismatch is recorded,
    not held against the scenario."""
    pod = he.PodPlacement(
        "waiter-exit",
        "",
        "Pending",
        "hami-scheduler",
        annotations={he.GPU_USE_UUID: " GPU-8a1f6c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b ,"},
    )
    ids = ("hami-memory-h100", "hami-uuid-h100", "kube-memory-pinned-8")
    events = [EVENT_BY_ID[i] for i in ids]
    verdict = he.judge_rejection(pod, events, "CardInsufficientMemory", exclusive=True)
    assert verdict.ok, verdict.explain()
    assert verdict.facts["pinnedCards"] == ["GPU-8a1f6c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"]
    assert len(verdict.facts["expectedNoise"]) == 2
    assert len(verdict.facts["matching"]) == 2


@pytest.mark.parametrize(
    ("others", "ok"),
    [
        # One of the other seven cards unhealthy, cordoned or of another type: it stops before
        # the UUID check (HAMi v2.10.0 pkg/device/nvidia/device.go:730-748), still noise.
        ("1/8 CardNotHealth, 6/8 CardUuidMismatch", True),
        ("2/8 CardCordoned, 5/8 CardUuidMismatch", True),
        ("1/8 CardTypeMismatch, 6/8 CardUuidMismatch", True),
        # Eight answers from seven other cards: the pinned card itself gave one of them.
        ("1/8 CardNotHealth, 7/8 CardUuidMismatch", False),
    ],
)
def test_the_other_cards_pre_uuid_reasons_are_noise_too(others: str, ok: bool) -> None:
    """reviews/acceptance.md section 5, "TC-13 edge case": a node with one unhealthy or cordoned
    card besides the pinned one must not fail TC-13."""
    pod = he.PodPlacement(
        "waiter-exit",
        "",
        "Pending",
        "hami-scheduler",
        annotations={he.GPU_USE_UUID: "GPU-8a1f6c2e-3b4d-4e5f-8a9b-0c1d2e3f4a5b"},
    )
    message = (
        f"0/1 nodes are available: 1 1/8 CardInsufficientMemory, {others}. preemption: 0/1 "
        "nodes are available: 1 No preemption victims found for incoming pod.."
    )
    event = he.EventRecord("Warning", "FailedScheduling", message, "hami-scheduler")
    verdict = he.judge_rejection(pod, [event], "CardInsufficientMemory", exclusive=True)
    assert verdict.ok is ok, verdict.explain()


@pytest.mark.parametrize("case", EVENTS["rejections"], ids=case_id)
def test_rejection_judge_samples(case: dict[str, Any]) -> None:
    events = [EVENT_BY_ID[i] for i in case["events"]]
    if "as_type" in case:
        events = [he.EventRecord(case["as_type"], e.reason, e.message, e.source) for e in events]
    pod = he.PodPlacement(**case["pod"])
    verdict = he.judge_rejection(
        pod,
        events,
        case["expect"],
        contradicting=case.get("contradicting", ()),
        exclusive=case.get("exclusive", False),
    )
    assert verdict.ok is case["ok"], verdict.explain()
    if not case["ok"]:
        assert case["problem"] in verdict.explain()
    else:
        assert verdict.facts["matching"], "a passing verdict names the event it relied on"


# ---------------------------------------------------------------- TC-06 accumulation

ACCUMULATION_CARD = "GPU-2ee0ff0b-4199-49c9-9ad5-1a5b6022d3ae"


def accumulation_holder(**changes: Any) -> he.PodPlacement:
    annotations = {
        he.HAMI_DEVICES_ALLOCATED: f"{ACCUMULATION_CARD},NVIDIA,40960,10:;",
        he.HAMI_BIND_PHASE: "success",
    }
    base = he.PodPlacement(
        "mem-holder", "tenant-a-a100-0", "Running", "hami-scheduler", annotations=annotations
    )
    return he.PodPlacement(**{**base.__dict__, **changes})


def accumulation_second(*event_ids: str) -> he.Verdict:
    pod = he.PodPlacement("mem-second", "", "Pending", "hami-scheduler")
    events = [EVENT_BY_ID[i] for i in event_ids]
    return he.judge_rejection(pod, events, "CardInsufficientMemory", exclusive=True)


def test_accumulation_sizes_fit_alone_but_not_together() -> None:
    """By hand: 81920 MiB -> 40960 held + 40961 asked (81921 > 81920, 40961 <= 81920)."""
    sizes = stack.accumulation_sizes(81_920)
    assert (sizes.holder_mib, sizes.second_mib) == (40_960, 40_961)
    for card in (2, 3, 23_034, 81_559):
        sizes = stack.accumulation_sizes(card)
        assert sizes.second_mib <= card < sizes.holder_mib + sizes.second_mib


def test_accumulation_judge_accepts_a_refusal_caused_by_what_is_held() -> None:
    verdict = he.judge_accumulation(
        accumulation_holder(),
        accumulation_second("hami-memory", "hami-summary", "kube-memory"),
        card_uuid=ACCUMULATION_CARD,
        card_mib=81_920,
        holder_mib=40_960,
        second_mib=40_961,
    )
    assert verdict.ok, verdict.explain()
    assert verdict.facts["second"]["matching"]


@pytest.mark.parametrize(
    ("holder", "events", "sizes", "fragment"),
    [
        (
            {"node": "", "phase": "Pending", "annotations": {}},
            ("hami-memory",),
            (40_960, 40_961),
            "the holder mem-holder is not bound",
        ),
        ({}, ("kube-mixed-cards",), (40_960, 40_961), "also refused for CardInsufficientCore"),
        ({}, ("hami-core",), (40_960, 40_961), "no Warning event for mem-second names"),
        ({}, ("hami-memory",), (40_960, 90_000), "that is the single-pod case"),
        ({}, ("hami-memory",), (40_960, 20_000), "nothing to refuse"),
        (
            {"annotations": {he.HAMI_DEVICES_ALLOCATED: "GPU-other,NVIDIA,40960,10:;"}},
            ("hami-memory",),
            (40_960, 40_961),
            "not 40960 MiB of",
        ),
    ],
)
def test_accumulation_judge_fails_other_scenarios(
    holder: dict[str, Any], events: tuple[str, ...], sizes: tuple[int, int], fragment: str
) -> None:
    base = accumulation_holder()
    if holder.get("annotations"):
        holder = {**holder, "annotations": {**base.annotations, **holder["annotations"]}}
    verdict = he.judge_accumulation(
        accumulation_holder(**holder),
        accumulation_second(*events),
        card_uuid=ACCUMULATION_CARD,
        card_mib=81_920,
        holder_mib=sizes[0],
        second_mib=sizes[1],
    )
    assert not verdict.ok
    assert fragment in verdict.explain()


# ---------------------------------------------------------- TC-16 Konnectivity down

# The API server's refusal when a Fail-policy webhook cannot be called (k8s.io/apiserver
# pkg/util/webhook/error.go:34-39 "failed calling webhook %q: %v", as an internal error), with a
# Konnectivity dial error as the reason - written by hand.
CUT_MESSAGE = (
    'Internal error occurred: failed calling webhook "vgpu.hami.io": failed to call webhook: '
    'Post "https://hami-scheduler.hami-system.svc:443/webhook?timeout=10s": dial tcp '
    "10.96.12.7:443: connect: no agent available"
)


def tunnel_cut(**changes: Any) -> he.TunnelCut:
    base = he.TunnelCut(
        tenant="tenant-a",
        agents_replaced=True,
        api_answered=True,
        create_status=500,
        create_message=CUT_MESSAGE,
        created_scheduler=None,
        restored_scheduler="hami-scheduler",
        recovered_seconds=21.4,
    )
    return he.TunnelCut(**{**base.__dict__, **changes})


def test_tunnel_cut_judge_accepts_a_webhook_refused_for_want_of_the_tunnel() -> None:
    verdict = he.judge_tunnel_cut(tunnel_cut())
    assert verdict.ok, verdict.explain()
    assert verdict.facts["recoveredSeconds"] == 21.4


@pytest.mark.parametrize(
    ("changes", "fragment"),
    [
        ({"create_status": None, "created_scheduler": "hami-scheduler"}, "reached the webhook"),
        ({"create_status": None, "created_scheduler": "default-scheduler"}, "not fail closed"),
        ({"create_status": 403, "create_message": "forbidden"}, "not by the webhook call"),
        ({"agents_replaced": False}, "the tunnel was never cut"),
        ({"api_answered": False}, "API server itself did not answer"),
        ({"restored_scheduler": None}, "did not recover"),
    ],
)
def test_tunnel_cut_judge_fails_what_does_not_show_the_tunnel(
    changes: dict[str, Any], fragment: str
) -> None:
    verdict = he.judge_tunnel_cut(tunnel_cut(**changes))
    assert not verdict.ok
    assert fragment in verdict.explain()


def test_the_cut_denies_all_egress_of_the_agents_only() -> None:
    policy = workloads.deny_egress_policy("run", "kube-system", "k8s-app=konnectivity-agent")
    assert policy["metadata"]["namespace"] == "kube-system"
    assert policy["spec"] == {
        "podSelector": {"matchLabels": {"k8s-app": "konnectivity-agent"}},
        "policyTypes": ["Egress"],
    }


# ------------------------------------------------------------------------ visibility

VISIBILITY = sample("visibility.yaml")


def view(tenant: str, **changes: Any) -> he.ClusterView:
    raw = copy.deepcopy(VISIBILITY["views"][tenant])
    nodes = tuple(
        he.ObjectRef(n["name"], n["uid"], tenant=n["tenant"], capacity=n["capacity"])
        for n in raw["nodes"]
    )
    namespaces = tuple(he.ObjectRef(n["name"], n["uid"]) for n in raw["namespaces"])
    pods = tuple(he.ObjectRef(p["name"], p["uid"], namespace=p["namespace"]) for p in raw["pods"])
    base = he.ClusterView(
        tenant=tenant,
        nodes=nodes,
        namespaces=namespaces,
        pods=pods,
        marker_namespaces=tuple(raw["markers"]["namespaces"]),
        marker_pods=tuple(raw["markers"]["pods"]),
    )
    return he.ClusterView(**{**base.__dict__, **changes})


def judge_view(own: he.ClusterView, other: he.ClusterView, **kwargs: Any) -> he.Verdict:
    expected = VISIBILITY["expected"][own.tenant]
    arguments: dict[str, Any] = {
        "expected_nodes": expected["nodes"],
        "expected_capacity": expected["capacity"],
        "others": [other],
    }
    arguments.update(kwargs)
    return he.judge_visibility(own, **arguments)


def test_each_lab_tenant_sees_only_itself() -> None:
    a, b = view("tenant-a"), view("tenant-b")
    verdict_a = judge_view(a, b)
    verdict_b = judge_view(b, a)
    assert verdict_a.ok, verdict_a.explain()
    assert verdict_b.ok, verdict_b.explain()
    assert verdict_a.facts["nodes"] == ["tenant-a-a100-0"]
    assert verdict_a.facts["capacity"]["nvidia.com/gpu"] == 10


def test_same_namespace_names_are_not_leaks() -> None:
    a, b = view("tenant-a"), view("tenant-b")
    assert {"default", "kube-system"} <= {n.name for n in a.namespaces} & {
        n.name for n in b.namespaces
    }
    assert judge_view(a, b).ok


def leaked(field: str, item: Any) -> he.ClusterView:
    a = view("tenant-a")
    return view("tenant-a", **{field: (*getattr(a, field), item)})


B = view("tenant-b")


@pytest.mark.parametrize(
    ("own", "fragment"),
    [
        (leaked("nodes", B.nodes[0]), "node tenant-b-l4-0 of tenant-b"),
        (leaked("pods", B.pods[2]), "pod default/inference-sample-0 of tenant-b"),
        (leaked("namespaces", B.namespaces[0]), "namespace default of tenant-b"),
        (
            leaked("namespaces", he.ObjectRef("acceptance-c4n8wd", "another-uid")),
            "namespace acceptance-c4n8wd of tenant-b",
        ),
        (
            leaked("pods", he.ObjectRef("marker", "another-uid", namespace="acceptance-c4n8wd")),
            "pod acceptance-c4n8wd/marker of tenant-b",
        ),
        (
            leaked("nodes", he.ObjectRef("spare-0", "uid-spare", tenant="tenant-b", capacity={})),
            "labelled gpu-platform.io/tenant=tenant-b",
        ),
    ],
    ids=["node", "pod-uid", "namespace-uid", "marker-namespace", "marker-pod", "node-label"],
)
def test_visibility_judge_reports_leaks(own: he.ClusterView, fragment: str) -> None:
    verdict = judge_view(own, B)
    assert not verdict.ok
    assert "shows other tenants' objects" in verdict.explain()
    assert fragment in verdict.explain()


def test_visibility_judge_needs_own_marker_listed() -> None:
    a = view("tenant-a", pods=view("tenant-a").pods[:-1])
    assert "own marker pod acceptance-q7m2xa/marker is not listed" in judge_view(a, B).explain()


def test_visibility_judge_checks_nodes_and_capacity() -> None:
    a = view("tenant-a")
    missing = judge_view(a, B, expected_nodes=["tenant-a-a100-0", "tenant-a-a100-1"])
    assert "missing from its API: tenant-a-a100-1" in missing.explain()
    extra = judge_view(a, B, expected_nodes=[])
    assert "lists nodes it does not own: tenant-a-a100-0" in extra.explain()
    wrong = judge_view(a, B, expected_capacity={"nvidia.com/gpu": 20, "nvidia.com/gpumem": 81920})
    assert "nvidia.com/gpu=10, its inventory is 20" in wrong.explain()
    counted = judge_view(a, B, expected_nodes=None, expected_node_count=2)
    assert "lists 1 nodes, its pools declare 2" in counted.explain()
    assert judge_view(a, B, expected_nodes=None, expected_node_count=1).ok


def test_visibility_judge_optional_capacity_only_when_advertised() -> None:
    real_plugin = he.ObjectRef(
        "tenant-a-a100-0", "uid-a", tenant="tenant-a", capacity={"nvidia.com/gpu": 10}
    )
    a = view("tenant-a", nodes=(real_plugin,))
    assert judge_view(a, B).ok  # gpumem / gpucores not advertised by the real device plugin
    bare = he.ObjectRef("tenant-a-a100-0", "uid-a", tenant="tenant-a", capacity={})
    assert "advertise no nvidia.com/gpu" in judge_view(view("tenant-a", nodes=(bare,)), B).explain()


# ------------------------------------------------------------------ control plane, datastores


def test_version_matches_ignores_build_metadata_only() -> None:
    assert he.version_matches("v1.35.0", "v1.35.0")
    assert he.version_matches("v1.35.0+k3s1", "v1.35.0")
    assert not he.version_matches("v1.35.1", "v1.35.0")
    assert not he.version_matches("v1.35.0-rc.1", "v1.35.0")


DATASTORE = sample("datastore.yaml")


def storages(patch: dict[str, dict[str, str]] | None = None) -> list[he.TcpStorage]:
    result = []
    for raw in copy.deepcopy(DATASTORE["tenantControlPlanes"]):
        raw["status"]["storage"]["setup"].update((patch or {}).get(raw["tenant"], {}))
        obj = {"metadata": {"namespace": raw["namespace"], "name": raw["name"]}, **raw}
        result.append(he.tcp_storage(raw["tenant"], obj))
    return result


EXPECTED_DS = {t: (v["schema"], v["user"]) for t, v in DATASTORE["expected"].items()}
USED_BY = {name: ds["usedBy"] for name, ds in DATASTORE["dataStores"].items()}


def test_tcp_status_reads_ready_and_version() -> None:
    raw = DATASTORE["tenantControlPlanes"][0]
    assert he.tcp_status(raw) == ("Ready", "v1.35.0")
    assert he.tcp_status({}) == ("", "")


def test_datastore_judge_accepts_the_lab() -> None:
    verdict = he.judge_datastores(storages(), USED_BY, expected=EXPECTED_DS)
    assert verdict.ok, verdict.explain()
    assert [t["schema"] for t in verdict.facts["tenantControlPlanes"]] == ["tenant_a", "tenant_b"]


def test_datastore_judge_fails_on_shared_schema() -> None:
    same = storages({"tenant-b": {"schema": "tenant_a"}})
    verdict = he.judge_datastores(same, USED_BY, expected=EXPECTED_DS)
    assert "share a datastore schema: 'tenant_a' (tenant-a, tenant-b)" in verdict.explain()
    assert "schema 'tenant_a', configured 'tenant_b'" in verdict.explain()


def test_datastore_judge_fails_when_used_by_misses_a_tenant() -> None:
    verdict = he.judge_datastores(
        storages(), {"default": ["tenant-a/tenant-a"]}, expected=EXPECTED_DS
    )
    assert "does not list tenant-b/tenant-b" in verdict.explain()
    missing = he.judge_datastores(storages(), {}, expected=EXPECTED_DS)
    assert "DataStore 'default' not found" in missing.explain()


def test_datastore_judge_fails_on_empty_schema() -> None:
    verdict = he.judge_datastores(
        storages({"tenant-a": {"schema": ""}}), USED_BY, expected=EXPECTED_DS
    )
    assert "tenant-a: status.storage.setup.schema is empty" in verdict.explain()


# ---------------------------------------------------------------------------- quotas

QUOTA = sample("quota.yaml")


@pytest.mark.parametrize("case", QUOTA["refusals"], ids=case_id)
def test_quota_refusal_samples(case: dict[str, Any]) -> None:
    refusal = he.parse_quota_exceeded(case["message"])
    denial = he.parse_webhook_denial(case["message"])
    assert denial == (tuple(case["webhook"]) if case.get("webhook") else None)
    if case["quota"] is None:
        assert refusal is None
        return
    assert refusal is not None
    assert refusal.quota == case["quota"]
    assert refusal.requested == case["requested"]
    assert refusal.used == case["used"]
    assert refusal.limited == case["limited"]


@pytest.mark.parametrize("case", QUOTA["cards"], ids=case_id)
def test_card_quota_refusal_judge(case: dict[str, Any]) -> None:
    verdict = he.judge_card_quota_refusal(
        case["status"],
        case["message"],
        resource="requests.nvidia.com/gpu",
        requested=case["requested"],
        limit=case["limit"],
    )
    assert verdict.ok is case["ok"], verdict.explain()
    if not case["ok"]:
        assert case["problem"] in verdict.explain()
    else:
        assert verdict.facts["quota"] == "gpu-quota"


@pytest.mark.parametrize("case", QUOTA["memory"], ids=case_id)
def test_hami_webhook_quota_denial_judge(case: dict[str, Any]) -> None:
    verdict = he.judge_hami_quota_denial(case["status"], case["message"], what="a pod")
    assert verdict.ok is case["ok"], verdict.explain()
    if not case["ok"]:
        assert case["problem"] in verdict.explain()


def test_webhook_quota_denial_text_is_what_the_api_server_builds() -> None:
    # apiserver ToStatusErr: `admission webhook %q denied the request: %s` around HAMi's
    # admission.Denied("exceeding resource quota") (webhook.go:115), webhook name from the chart.
    built = f'admission webhook "{he.HAMI_WEBHOOK}" denied the request: {he.HAMI_QUOTA_DENIAL}'
    assert built == QUOTA["memory"][0]["message"]
    assert he.judge_hami_quota_denial(403, built, what="x").ok


def test_quota_hard_judge() -> None:
    want = {
        "requests.nvidia.com/gpu": 10,
        "limits.nvidia.com/gpumem": 81920,
        "limits.nvidia.com/gpucores": 100,
    }
    assert he.judge_quota_hard("default", {"gpu": dict(want)}, want).ok
    partial = {"gpu": {"requests.nvidia.com/gpu": 10}}
    assert (
        "no ResourceQuota in default holds"
        in he.judge_quota_hard("default", partial, want).explain()
    )
    assert not he.judge_quota_hard("default", {}, want).ok


# ------------------------------------------------------------------ stack outputs / config


def outputs_sample() -> dict[str, Any]:
    return {
        "mode": "lab",
        "kubernetesVersion": "v1.35.0",
        "versions": {"hami": "2.10.0"},
        "managementKubeconfig": "apiVersion: v1\nkind: Config\n# management-secret\n",
        "lbPool": ["172.18.255.240"],
        "tenants": {
            "tenant-a": {
                "namespace": "tenant-a",
                "controlPlane": "tenant-a",
                "endpoint": "https://172.18.255.240:6443",
                "version": "v1.35.0",
                "pools": {"a100": {"nodes": ["tenant-a-a100-0"], "inventory": {"cards": 1}}},
            },
            "tenant-b": {
                "namespace": "tenant-b",
                "controlPlane": "tenant-b",
                "endpoint": "https://172.18.255.241:6443",
                "version": "v1.35.0",
                "pools": {"l4": {"nodes": ["tenant-b-l4-0"], "inventory": {"cards": 2}}},
            },
        },
        "tenantKubeconfigs": {"tenant-a": "kubeconfig-a-secret", "tenant-b": "kubeconfig-b-secret"},
    }


def test_parse_outputs_reads_the_program_exports() -> None:
    out = stack.parse_outputs(outputs_sample(), "lab")
    assert sorted(out.tenants) == ["tenant-a", "tenant-b"]
    assert out.tenants["tenant-a"].nodes == ["tenant-a-a100-0"]
    assert out.tenants["tenant-b"].pools["l4"].nodes == ("tenant-b-l4-0",)
    assert out.tenants["tenant-a"].kubeconfig == "kubeconfig-a-secret"
    # Kubeconfigs are secrets: never in a repr (assertion messages, logs).
    assert "secret" not in repr(out)


def test_parse_outputs_without_outputs_is_a_skip_reason() -> None:
    with pytest.raises(stack.StackUnavailableError, match="run `pulumi up -s lab` first"):
        stack.parse_outputs({}, "lab")


def test_parse_outputs_missing_kubeconfig_is_an_error() -> None:
    raw = outputs_sample()
    del raw["tenantKubeconfigs"]["tenant-b"]
    with pytest.raises(stack.OutputsError, match=r"tenantKubeconfigs\.tenant-b"):
        stack.parse_outputs(raw, "lab")


def test_outputs_must_belong_to_the_stack_file() -> None:
    out = stack.parse_outputs(outputs_sample(), "lab")
    assert stack.check_outputs_match_config(out, lab_platform()) == []
    raw = lab_raw()
    raw["tenants"][0]["name"] = "tenant-c"
    raw["tenants"][0]["dataStore"]["schema"] = "tenant_c"
    raw["tenants"][0]["dataStore"]["username"] = "tenant_c"
    problems = stack.check_outputs_match_config(out, parse_platform(raw))
    assert problems
    assert "run `pulumi up`" in problems[0]


def fake_run(returncode: int, stdout: str = "", stderr: str = "") -> Any:
    calls: list[list[str]] = []

    def run(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        calls.append(command)
        assert kwargs["timeout"] > 0
        return subprocess.CompletedProcess(command, returncode, stdout, stderr)

    run.calls = calls  # type: ignore[attr-defined]
    return run


def test_read_outputs_without_cli_is_a_skip_reason() -> None:
    with pytest.raises(stack.StackUnavailableError, match="no Pulumi CLI on PATH"):
        stack.read_outputs("lab", which=lambda _: None, run=fake_run(0))


def test_read_outputs_passes_secrets_flag_and_stack() -> None:
    run = fake_run(0, stdout=json.dumps(outputs_sample()))
    data = stack.read_outputs("lab", which=lambda _: "/usr/bin/pulumi", run=run)
    assert data["mode"] == "lab"
    assert run.calls == [
        ["/usr/bin/pulumi", "stack", "output", "--json", "--show-secrets", "--stack", "lab"]
    ]


def test_read_outputs_without_the_stack_is_a_skip_reason() -> None:
    run = fake_run(255, stderr="\nerror: no stack named 'lab' found\nmore\n")
    with pytest.raises(stack.StackUnavailableError, match=r"error: no stack named 'lab' found$"):
        stack.read_outputs("lab", which=lambda _: "pulumi", run=run)


@pytest.mark.parametrize(
    "stderr",
    [
        'error: constructing secrets manager of type "passphrase": incorrect passphrase, please '
        "set PULUMI_CONFIG_PASSPHRASE to the correct passphrase\n",
        "error: PULUMI_ACCESS_TOKEN must be set for login during non-interactive CLI sessions\n",
        "",
    ],
    ids=["wrong-passphrase", "not-logged-in", "silent"],
)
def test_read_outputs_failing_otherwise_is_a_failure_not_a_skip(stderr: str) -> None:
    run = fake_run(255, stderr=stderr)
    with pytest.raises(stack.StackBrokenError, match="`pulumi stack output --stack lab` failed"):
        stack.read_outputs("lab", which=lambda _: "pulumi", run=run)


def test_read_outputs_timeout_and_garbage_are_failures() -> None:
    def slow(command: list[str], **kwargs: Any) -> subprocess.CompletedProcess[str]:
        raise subprocess.TimeoutExpired(command, kwargs["timeout"])

    with pytest.raises(stack.StackBrokenError, match="took over"):
        stack.read_outputs("lab", which=lambda _: "pulumi", run=slow, timeout=2)
    with pytest.raises(stack.StackBrokenError, match="did not print JSON"):
        stack.read_outputs("lab", which=lambda _: "pulumi", run=fake_run(0, stdout="nope"))
    with pytest.raises(stack.StackBrokenError, match="did not print an object"):
        stack.read_outputs("lab", which=lambda _: "pulumi", run=fake_run(0, stdout="[1]"))


def test_deployed_stack_skips_only_when_nothing_is_deployed() -> None:
    def none(_: str) -> dict[str, Any]:
        return {}

    with pytest.raises(stack.StackUnavailableError, match="has no outputs"):
        stack.deployed_stack("lab", read=none)
    outputs, platform = stack.deployed_stack("lab", read=lambda _: outputs_sample())
    assert sorted(outputs.tenants) == [t.name for t in platform.tenants]

    def no_file(name: str) -> PlatformConfig:
        raise stack.StackUnavailableError(f"no stack file Pulumi.{name}.yaml: ...")

    with pytest.raises(stack.StackBrokenError, match="has outputs but no stack file"):
        stack.deployed_stack("lab", read=lambda _: outputs_sample(), load=no_file)
    stale = outputs_sample()
    stale["tenants"]["tenant-c"] = stale["tenants"].pop("tenant-b")
    stale["tenantKubeconfigs"]["tenant-c"] = stale["tenantKubeconfigs"].pop("tenant-b")
    with pytest.raises(stack.OutputsError, match="run `pulumi up`"):
        stack.deployed_stack("lab", read=lambda _: stale)


def test_an_unreachable_deployed_stack_is_a_failure_message() -> None:
    down = {"management cluster": "https://127.0.0.1:6443: connection refused"}
    assert stack.unreachable_failure("lab", {}, 3) is None
    assert stack.unreachable_failure("lab", down, 3) is None  # tests report who is down
    everything = {**down, "tenant-a": "x: timed out", "tenant-b": "y: timed out"}
    message = stack.unreachable_failure("lab", everything, 3)
    assert message is not None
    assert message.startswith("stack 'lab' is deployed but no API server answers from here")


def test_stack_name_from_env_with_lab_default() -> None:
    assert stack.stack_name({}) == "lab"
    assert stack.stack_name({"GPU_PLATFORM_STACK": " prod "}) == "prod"
    assert stack.stack_name({"GPU_PLATFORM_STACK": ""}) == "lab"


def test_load_platform_reads_the_stack_file(tmp_path: Path) -> None:
    assert [t.name for t in stack.load_platform("lab").tenants] == ["tenant-a", "tenant-b"]
    (tmp_path / "Pulumi.yaml").write_text("name: gpu-platform\n")
    with pytest.raises(stack.StackUnavailableError, match=r"no stack file Pulumi\.nope\.yaml"):
        stack.load_platform("nope", repo_root=tmp_path)


def test_expected_inventories_from_the_lab_config() -> None:
    tenants = {t.name: t for t in lab_platform().tenants}
    (pool_a,) = tenants["tenant-a"].worker_pools
    (pool_b,) = tenants["tenant-b"].worker_pools
    assert stack.node_inventory(pool_a) == LAB_A
    assert stack.node_inventory(pool_b) == LAB_B
    assert stack.expected_capacity(lab_platform(), tenants["tenant-b"]) == {
        "nvidia.com/gpu": 20,
        "nvidia.com/gpumem": 49_152,
        "nvidia.com/gpucores": 200,
    }


def test_expected_capacity_counts_mock_resources_only_where_the_mock_runs() -> None:
    raw = lab_raw()
    raw["tenants"][1]["workerPools"][0]["replicas"] = 3
    lab = parse_platform(raw)
    # 3 nodes x 2 L4: 60 slots, 3 x 49152 MiB, 3 x 200 units (by hand).
    assert stack.expected_capacity(lab, lab.tenants[1]) == {
        "nvidia.com/gpu": 60,
        "nvidia.com/gpumem": 147_456,
        "nvidia.com/gpucores": 600,
    }
    prod = parse_platform(copy.deepcopy(load_stack_config("prod")[PLATFORM_KEY]))
    for tenant in prod.tenants:
        # The real device plugin advertises only nvidia.com/gpu.
        assert set(stack.expected_capacity(prod, tenant)) == {"nvidia.com/gpu"}


def test_node_resources_are_the_mock_plugins_arithmetic() -> None:
    platform = lab_platform()
    (pool_a,) = platform.tenants[0].worker_pools
    (pool_b,) = platform.tenants[1].worker_pools
    want = sample("node_status.yaml")["expect"]
    assert stack.node_resources(platform, pool_a) == want["a100"]
    assert stack.node_resources(platform, pool_b) == want["l4"]


def test_tenant_inventory_multiplies_replicas() -> None:
    raw = lab_raw()
    raw["tenants"][1]["workerPools"][0]["replicas"] = 3
    tenant_b = parse_platform(raw).tenants[1]
    assert stack.tenant_inventory(tenant_b) == he.Inventory(6, 147_456, 600, 60)


def test_sharing_plan_for_the_lab_is_the_report_scenario() -> None:
    plan = stack.plan_sharing(lab_platform())
    assert plan is not None
    assert (plan.tenant, plan.pool, plan.card.memory_mib, plan.card.core_units) == (
        "tenant-a",
        "a100",
        81_920,
        100,
    )
    assert (plan.fitting_pods, plan.pod_memory_mib, plan.pod_cores) == (3, 20_000, 30)
    assert (plan.expected_memory_mib, plan.expected_cores) == (60_000, 90)
    assert plan.memory_with_one_more == 80_000
    assert plan.oversized_memory_mib == 90_000


def test_sharing_plan_is_chosen_from_config_not_by_name() -> None:
    raw = lab_raw()
    raw["tenants"][0]["workerPools"][0]["cards"] = [{"model": "L4-24GB", "count": 1}]
    raw["tenants"][1]["workerPools"][0]["cards"] = [{"model": "H100-80GB", "count": 1}]
    plan = stack.plan_sharing(parse_platform(raw))
    assert plan is not None
    assert (plan.tenant, plan.pool) == ("tenant-b", "l4")


@pytest.mark.parametrize(
    ("cards", "slots"),
    [
        # Two cards per node, one of which alone would do: HAMi may spread.
        ([{"model": "A100-80GB", "count": 1}, {"model": "T4-16GB", "count": 1}], 10),
        ([{"model": "A100-40GB", "count": 1}], 10),  # 4 x 20000 > 40960: memory runs out first
        ([{"model": "A100-80GB", "count": 1}], 3),  # the 4th pod would fail on slots
        ([{"memoryMiB": 81920, "coreUnits": 200, "count": 1}], 10),  # not 100 compute units
    ],
)
def test_sharing_plan_skips_cards_where_the_scenario_does_not_hold(
    cards: list[dict[str, Any]], slots: int
) -> None:
    raw = lab_raw()
    raw["tenants"] = raw["tenants"][:1]
    raw["tenants"][0]["workerPools"][0]["cards"] = cards
    raw["tenants"][0]["workerPools"][0]["slotsPerCard"] = slots
    assert stack.plan_sharing(parse_platform(raw)) is None


def test_sharing_plan_oversizes_beyond_a_large_card() -> None:
    raw = lab_raw()
    raw["tenants"][0]["workerPools"][0]["cards"] = [
        {"memoryMiB": 98_304, "coreUnits": 100, "count": 1, "product": "NVIDIA-H200"}
    ]
    plan = stack.plan_sharing(parse_platform(raw))
    assert plan is not None
    assert plan.oversized_memory_mib == 98_305


def test_visibility_ids() -> None:
    assert [stack.visibility_test_id(i) for i in range(4)] == [
        "TC-07",
        "TC-08",
        "TC-08.1",
        "TC-08.2",
    ]


def test_memory_tolerance_by_mode() -> None:
    assert stack.memory_tolerance(lab_platform()) == 0.0
    prod = parse_platform(copy.deepcopy(load_stack_config("prod")[PLATFORM_KEY]))
    assert stack.memory_tolerance(prod) == stack.PROD_MEMORY_TOLERANCE


# ------------------------------------------------------------------------- workloads


def test_gpu_pod_asks_hami_the_plain_integer_way() -> None:
    body = workloads.pod_body(
        "share-1",
        "run1",
        limits=workloads.gpu_limits(1, memory_mib=20_000, cores=30),
        node_selector={"kubernetes.io/hostname": "tenant-a-a100-0"},
    )
    (container,) = body["spec"]["containers"]
    assert container["resources"] == {
        "limits": {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}
    }
    assert container["image"] == "busybox:1.37.0"
    assert container["command"] == ["sleep", "3600"]
    assert "schedulerName" not in body["spec"]  # the webhook must set it
    assert body["spec"]["nodeSelector"] == {"kubernetes.io/hostname": "tenant-a-a100-0"}
    assert body["metadata"]["labels"][workloads.RUN_LABEL] == "run1"


def test_plain_pod_has_no_gpu_resources() -> None:
    body = workloads.pod_body("marker", "run1")
    assert "resources" not in body["spec"]["containers"][0]
    assert "nodeSelector" not in body["spec"]


def test_probe_pods_can_bypass_hamis_webhook_and_run_another_command() -> None:
    from tests.acceptance.lookups import HAMI_WEBHOOK_IGNORE

    body = workloads.pod_body(
        "dns-probe", "run1", labels=HAMI_WEBHOOK_IGNORE, image="python:x", command=["python3"]
    )
    # HAMi chart webhook.yaml objectSelector: hami.io/webhook NotIn [ignore].
    assert body["metadata"]["labels"]["hami.io/webhook"] == "ignore"
    assert body["metadata"]["labels"][workloads.RUN_LABEL] == "run1"
    assert body["spec"]["containers"][0]["image"] == "python:x"
    assert body["spec"]["containers"][0]["command"] == ["python3"]


def test_namespace_names_are_fresh_dns_labels() -> None:
    names = {workloads.namespace_name() for _ in range(50)}
    assert len(names) == 50
    assert all(n.startswith("acceptance-") and len(n) <= 63 for n in names)
    assert all(n[len("acceptance-")].isalpha() and n.islower() for n in names)


# ------------------------------------------------------ API object -> judge values (kube.py)


def v1_pod(**overrides: Any) -> k8s.V1Pod:
    return k8s.V1Pod(
        metadata=k8s.V1ObjectMeta(
            name="share-1",
            namespace="acceptance-q7m2xa",
            uid="uid-1",
            annotations=SHARING["pods"][0]["annotations"],
            creation_timestamp=datetime(2026, 10, 23, 9, 14, 2, tzinfo=UTC),
        ),
        spec=k8s.V1PodSpec(
            containers=[k8s.V1Container(name="main")],
            node_name=overrides.get("node_name", "tenant-a-a100-0"),
            scheduler_name="hami-scheduler",
        ),
        status=k8s.V1PodStatus(
            phase=overrides.get("phase", "Running"),
            conditions=overrides.get(
                "conditions", [k8s.V1PodCondition(type="PodScheduled", status="True")]
            ),
        ),
    )


def test_placement_from_a_pod_object() -> None:
    seen = kube.placement(v1_pod())
    assert seen == sharing_pods()[0]
    assert kube.is_bound(v1_pod())


def test_unbound_pod_and_its_scheduling_message() -> None:
    pending = v1_pod(
        node_name=None,
        phase="Pending",
        conditions=[
            k8s.V1PodCondition(
                type="PodScheduled",
                status="False",
                reason="Unschedulable",
                message=EVENT_BY_ID["kube-core"].message,
            )
        ],
    )
    assert not kube.is_bound(pending)
    assert kube.scheduling_message(pending).startswith("Unschedulable: 0/1 nodes are available")
    assert kube.placement(pending).node == ""


def test_node_facts_reads_capacity_and_labels() -> None:
    node = k8s.V1Node(
        metadata=k8s.V1ObjectMeta(
            name="tenant-a-a100-0",
            uid="uid-n",
            labels={"gpu-platform.io/tenant": "tenant-a", "gpu-platform.io/pool": "a100"},
            annotations={"hami.io/node-nvidia-register": REGISTER_CASES[0]["value"]},
        ),
        status=k8s.V1NodeStatus(
            capacity={"cpu": "8", "nvidia.com/gpu": "10", "nvidia.com/gpumem": "81920"},
            allocatable={"cpu": "8", "nvidia.com/gpu": "10", "nvidia.com/gpumem": "0"},
            conditions=[k8s.V1NodeCondition(type="Ready", status="True")],
        ),
    )
    facts = kube.node_facts(node)
    assert facts.ready
    assert (facts.tenant, facts.pool) == ("tenant-a", "a100")
    assert facts.capacity == {"nvidia.com/gpu": 10, "nvidia.com/gpumem": 81920}
    assert facts.allocatable == {"nvidia.com/gpu": 10, "nvidia.com/gpumem": 0}
    assert facts.ref().capacity == facts.capacity
    found, missing = kube.pool_nodes("a100", [], [facts])
    assert (found, missing) == ([facts], [])
    found, missing = kube.pool_nodes("a100", ["tenant-a-a100-0", "tenant-a-a100-1"], [facts])
    assert (found, missing) == ([facts], ["tenant-a-a100-1"])


def test_node_not_ready() -> None:
    node = k8s.V1Node(
        metadata=k8s.V1ObjectMeta(name="n"),
        status=k8s.V1NodeStatus(conditions=[k8s.V1NodeCondition(type="Ready", status="False")]),
    )
    assert not kube.node_facts(node).ready


def test_event_record_source_falls_back_to_reporting_component() -> None:
    core = k8s.CoreV1Event(
        involved_object=k8s.V1ObjectReference(name="share-4"),
        metadata=k8s.V1ObjectMeta(name="share-4.1"),
        type="Warning",
        reason="FailedScheduling",
        message=EVENT_BY_ID["kube-core"].message,
        reporting_component="hami-scheduler",
        count=3,
    )
    record = kube.event_record(core)
    assert record == he.EventRecord(
        "Warning", "FailedScheduling", EVENT_BY_ID["kube-core"].message, "hami-scheduler", 3
    )
    assert he.hami_reasons(record) == {"CardInsufficientCore"}


def test_api_errors_are_described_in_one_line() -> None:
    exc = ApiException(status=403, reason="Forbidden")
    exc.body = json.dumps({"kind": "Status", "message": QUOTA["refusals"][0]["message"]})
    assert kube.api_message(exc) == QUOTA["refusals"][0]["message"]
    assert kube.describe_error(exc).startswith('HTTP 403 Forbidden: pods "quota-cards-k2x9q"')
    assert kube.describe_error(OSError("connection refused\nmore")) == (
        "OSError: connection refused"
    )


# ------------------------------------------------------------------------- the report


def test_result_rows_fold_the_three_phases() -> None:
    row = report.ResultRow("TC-04", "tests/acceptance/x.py::t")
    row.merge_phase("setup", "passed", 1.0, "")
    row.merge_phase("call", "failed", 2.5, "AssertionError: share-2 not bound")
    row.merge_phase("teardown", "failed", 0.5, "CleanupError: pods still present")
    assert (row.verdict, row.seconds, row.detail) == (
        "failed",
        4.0,
        "AssertionError: share-2 not bound",
    )
    error = report.ResultRow("TC-01", "t")
    error.merge_phase("setup", "failed", 0.1, "OutputsError: stale")
    assert error.verdict == "error"
    skipped = report.ResultRow("TC-02", "t")
    skipped.merge_phase("setup", "skipped", 0.0, "no Pulumi CLI on PATH")
    assert (skipped.verdict, skipped.detail) == ("skipped", "no Pulumi CLI on PATH")


def test_table_lists_id_verdict_seconds_evidence() -> None:
    ok = report.ResultRow("TC-04", "t", seconds=4.26, summary="3 pods on GPU-2ee0 60000/81920")
    bad = report.ResultRow("TC-05", "t", verdict="failed", seconds=90.0, detail="no event")
    lines = report.format_table([ok, bad])
    assert lines[0].split() == ["id", "verdict", "seconds", "evidence"]
    assert lines[1].split()[:3] == ["TC-04", "passed", "4.3"]
    assert lines[1].endswith("3 pods on GPU-2ee0 60000/81920")
    assert lines[2].endswith("no event")
    assert lines[-1] == "1 failed, 1 passed in 94.3 s"


def test_report_document_and_helpers(tmp_path: Path) -> None:
    evidence = report.Evidence("TC-04")
    evidence.record("usage", {"memoryMiB": 60_000})
    evidence.summary("3 pods")
    row = report.ResultRow("TC-04", "t", summary=evidence.one_line, facts=evidence.facts)
    doc = report.report_document([row], stack="lab", started="s", finished="f")
    path = tmp_path / "reports" / "acceptance.json"
    report.write_report(path, doc)
    written = json.loads(path.read_text())
    assert written["results"][0]["evidence"] == {"usage": {"memoryMiB": 60_000}}
    assert written["results"][0]["summary"] == "3 pods"
    assert report.first_line("\n  Skipped: no CLI\nrest") == "no CLI"
    assert report.all_skipped([report.ResultRow("a", "t", verdict="skipped")])
    assert not report.all_skipped([])


# --------------------------------------------------- what the lab and the acceptance page promise

ACCEPTANCE_DIR = Path(__file__).resolve().parents[1] / "acceptance"
ACCEPTANCE_PAGE = Path(__file__).resolve().parents[2] / "docs" / "acceptance.md"


def suite_ids() -> set[str]:
    """The ids the live suite reports (its tc markers, and the per-tenant visibility ids)."""
    ids: set[str] = set()
    for path in ACCEPTANCE_DIR.glob("test_*.py"):
        ids |= set(re.findall(r'pytest\.mark\.tc\("(TC-\d\d)"\)', path.read_text()))
    return ids | {stack.visibility_test_id(0), stack.visibility_test_id(1)}


def table_ids(text: str) -> set[str]:
    return {
        tc
        for row in text.splitlines()
        if row.startswith("| TC-")
        for tc in re.findall(r"TC-\d\d", row.split("|")[1])
    }


def test_readmes_list_every_test_of_the_suite_including_the_health_check() -> None:
    ids = suite_ids()
    assert {"TC-00", "TC-10"} <= ids
    assert table_ids(ACCEPTANCE_PAGE.read_text()) == ids
    assert table_ids((ACCEPTANCE_DIR / "README.md").read_text()) == ids


def test_the_lab_declares_what_the_integration_run_requires_to_pass() -> None:
    """test_lab_lifecycle requires TC-04..06 and TC-10 to pass on the lab: the lab has a sharing
    pool and quotas on every tenant, and every lab pool runs the mock device plugin (TC-00/02).
    The real-GPU tests (TC-11 ... TC-15) must skip there instead."""
    from tests.acceptance.dra_evidence import plan_dra
    from tests.integration.test_lab_lifecycle import (
        DRA_ONLY,
        OPT_IN_DRILLS,
        REAL_GPU_ONLY,
        REQUIRED_PASSED,
    )

    platform = lab_platform()
    groups = (REQUIRED_PASSED, REAL_GPU_ONLY, OPT_IN_DRILLS, DRA_ONLY)
    assert set().union(*groups) == suite_ids()
    assert sum(len(set(g)) for g in groups) == len(suite_ids())  # no id in two groups
    assert plan_dra(platform) is None  # so the DRA cases skip on the lab
    assert not set(REQUIRED_PASSED) & set(REAL_GPU_ONLY)
    assert not (set(REQUIRED_PASSED) | set(REAL_GPU_ONLY)) & set(OPT_IN_DRILLS)
    assert stack.plan_sharing(platform) is not None
    assert all(t.gpu_quotas for t in platform.tenants)
    assert all(stack.uses_mock(platform, p) for t in platform.tenants for p in t.worker_pools)
