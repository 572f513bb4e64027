"""Offline tests of the evidence running components produce (TC-02, TC-07/08, TC-10).

* HAMi's scheduler metrics (``samples/hami_metrics.yaml``, HAMi 2.10.0's text format): parsed,
  turned into HAMi's view of each node's cards and of the namespace quotas, and judged against
  the node's registered cards and the declared inventory.
* Node capacity / allocatable (``samples/node_status.yaml``): the mock device plugin's resources
  and ``nvidia.com/gpu``, through ``kube.node_facts`` from a real client object.
* The polls' retry of transient API errors (``kube.poll_until``).

Expected values are written by hand in the samples or here; every judge fails on a broken sample.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException

from components.stack import parse_platform
from tests.acceptance import hami_evidence as he
from tests.acceptance import hami_metrics as hm
from tests.acceptance import kube, stack
from tests.support.harness import load_stack_config

SAMPLES = Path(__file__).resolve().parents[1] / "acceptance" / "samples"
METRICS = yaml.safe_load((SAMPLES / "hami_metrics.yaml").read_text())
REGISTER = yaml.safe_load((SAMPLES / "node_register.yaml").read_text())["cases"]
NODES = yaml.safe_load((SAMPLES / "node_status.yaml").read_text())
LAB_A_CARDS = he.parse_node_register(REGISTER[0]["value"])
LAB_B_CARDS = he.parse_node_register(REGISTER[1]["value"])
# The report's inventory (acceptance.md), by hand.
LAB_A = he.Inventory(cards=1, memory_mib=81_920, core_units=100, slots=10)
LAB_B = he.Inventory(cards=2, memory_mib=49_152, core_units=200, slots=20)
REGISTERED = {"tenant-a-a100-0": (LAB_A_CARDS, LAB_A), "tenant-b-l4-0": (LAB_B_CARDS, LAB_B)}


def case_id(case: dict[str, Any]) -> str:
    return str(case["name"])


def page(name: str) -> list[hm.Sample]:
    return hm.parse_exposition(METRICS["pages"][name])


# ------------------------------------------------------------------------------ exposition


def test_exposition_parses_labels_and_go_floats() -> None:
    samples = page("tenant-a")
    memory = [s for s in samples if s.name == hm.MEMORY_LIMIT]
    assert len(memory) == 1
    assert memory[0].value == 81_920 * 1024 * 1024
    assert memory[0].labels == {
        "device_index": "0",
        "device_type": "NVIDIA-A100-SXM4-80GB",
        "device_uuid": "GPU-2ee0ff0b-4199-49c9-9ad5-1a5b6022d3ae",
        "node": "tenant-a-a100-0",
        "zone": "vGPU",
    }
    build = next(s for s in samples if s.name == "hami_build_info")
    assert build.labels["version"] == "v2.10.0"
    assert "zone" not in build.labels


def test_exposition_unescapes_label_values_and_skips_comments() -> None:
    text = '# HELP x y\n# TYPE x gauge\nx{a="q\\"uote",b="back\\\\slash",c="new\\nline"} +Inf\n'
    (only,) = hm.parse_exposition(text)
    assert only.labels == {"a": 'q"uote', "b": "back\\slash", "c": "new\nline"}
    assert only.value == float("inf")
    (plain,) = hm.parse_exposition("up 1 1700000000000\n")
    assert (plain.name, dict(plain.labels), plain.value) == ("up", {}, 1.0)


@pytest.mark.parametrize("case", METRICS["unparseable"], ids=case_id)
def test_exposition_rejects_what_is_not_the_text_format(case: dict[str, Any]) -> None:
    with pytest.raises(he.EvidenceError, match=case["error"]):
        hm.parse_exposition(case["text"])


# ------------------------------------------------------------------------- HAMi's card view


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_hami_cards_per_node_from_the_three_series(tenant: str) -> None:
    cards = hm.hami_cards(page(tenant))
    want = METRICS["expect"][tenant]
    assert sorted(cards) == sorted(want)
    for node, expect in want.items():
        seen = cards[node]
        assert len(seen) == expect["cards"]
        assert sum(c.memory_mib or 0 for c in seen) == expect["memory_mib"]
        assert sum(c.cores or 0 for c in seen) == expect["cores"]
        assert [c.shared for c in seen] == expect["shared"]
        assert [c.uuid for c in seen] == [c.uuid for c in REGISTERED[node][0]]
        assert all(not c.missing for c in seen)


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_hami_view_judge_accepts_the_lab(tenant: str) -> None:
    for node, cards in hm.hami_cards(page(tenant)).items():
        registered, declared = REGISTERED[node]
        verdict = hm.judge_hami_view(node, cards, registered, declared)
        assert verdict.ok, verdict.explain()
        assert verdict.facts["totals"]["cards"] == declared.cards


def variant_page(variant: dict[str, Any]) -> str:
    text = str(METRICS["pages"][variant["page"]])
    if "replace" in variant:
        old, new = variant["replace"]
        assert old in text
        text = text.replace(old, new)
    if "drop" in variant:
        assert variant["drop"] in text
        text = "\n".join(line for line in text.splitlines() if variant["drop"] not in line)
    return text


@pytest.mark.parametrize("variant", METRICS["variants"], ids=case_id)
def test_hami_view_judge_fails_on_each_broken_page(variant: dict[str, Any]) -> None:
    node = variant["node"]
    registered, declared = REGISTERED[node]
    cards = hm.hami_cards(hm.parse_exposition(variant_page(variant))).get(node, [])
    verdict = hm.judge_hami_view(node, cards, registered, declared)
    assert not verdict.ok
    assert variant["problem"] in verdict.explain()


def test_hami_view_memory_tolerance_only_above() -> None:
    (card,) = hm.hami_cards(page("tenant-a"))["tenant-a-a100-0"]
    larger = hm.HamiCard(**{**card.__dict__, "memory_mib": 83_000.0})
    registered = [he.RegisteredCard(**{**LAB_A_CARDS[0].__dict__, "memory_mib": 83_000})]
    assert hm.judge_hami_view("n", [larger], registered, LAB_A, memory_tolerance=0.05).ok
    assert not hm.judge_hami_view("n", [larger], registered, LAB_A).ok
    smaller = hm.HamiCard(**{**card.__dict__, "memory_mib": 81_559.0})
    fewer = [he.RegisteredCard(**{**LAB_A_CARDS[0].__dict__, "memory_mib": 81_559})]
    assert not hm.judge_hami_view("n", [smaller], fewer, LAB_A, memory_tolerance=0.05).ok


# ---------------------------------------------------------------------- HAMi's quota view


@pytest.mark.parametrize("tenant", ["tenant-a", "tenant-b"])
def test_hami_quotas_used_and_limits(tenant: str) -> None:
    quotas = hm.hami_quotas(page(tenant))
    for resource, (used, limit) in METRICS["expect"]["quotas"][tenant].items():
        quota = quotas[("default", resource)]
        assert (quota.used, quota.limit) == (used, limit)


def lab_quota_limits(tenant: int) -> dict[str, int]:
    platform = parse_platform(copy.deepcopy(load_stack_config("lab")["gpu-platform:platform"]))
    (quota,) = platform.tenants[tenant].gpu_quotas
    return {"nvidia.com/gpumem": quota.gpu_memory_mib, "nvidia.com/gpucores": quota.gpu_cores}


def test_hami_quota_judge_accepts_the_lab_and_fails_without_limits() -> None:
    for index, tenant in enumerate(["tenant-a", "tenant-b"]):
        view = hm.QuotaView("default", hm.hami_quotas(page(tenant)))
        verdict = hm.judge_hami_quota(view, lab_quota_limits(index))
        assert verdict.ok, verdict.explain()
    unknown = hm.QuotaView("default", hm.hami_quotas(page("no-node")))
    verdict = hm.judge_hami_quota(unknown, lab_quota_limits(0))
    assert "holds no nvidia.com/gpumem quota limit for namespace default" in verdict.explain()
    assert "holds no nvidia.com/gpucores quota limit" in verdict.explain()
    other = hm.QuotaView("default", hm.hami_quotas(page("tenant-b")))
    assert "holds nvidia.com/gpumem limit 49152 for default, configured 81920" in (
        hm.judge_hami_quota(other, lab_quota_limits(0)).explain()
    )


# ------------------------------------------------------------------ node capacity/allocatable


def v1_node(raw: dict[str, Any]) -> k8s.V1Node:
    """A client V1Node from the API JSON, deserialized the way the client does it."""
    return k8s.ApiClient().deserialize(json.dumps(raw), "V1Node", "application/json")


def node_variant(change: dict[str, Any]) -> kube.NodeFacts:
    raw = copy.deepcopy(NODES["nodes"]["tenant-a"])
    for section in ("capacity", "allocatable"):
        for key, value in (change.get(section) or {}).items():
            if value is None:
                raw["status"][section].pop(key, None)
            else:
                raw["status"][section][key] = value
    return kube.node_facts(v1_node(raw))


ADVERTISED_BY = {"nvidia.com/gpumem": "the mock device plugin"}


@pytest.mark.parametrize(("tenant", "pool"), [("tenant-a", "a100"), ("tenant-b", "l4")])
def test_node_resources_judge_accepts_the_lab(tenant: str, pool: str) -> None:
    facts = kube.node_facts(v1_node(NODES["nodes"][tenant]))
    verdict = he.judge_node_resources(
        facts.name,
        facts.capacity,
        facts.allocatable,
        NODES["expect"][pool],
        advertised_by=ADVERTISED_BY,
    )
    assert verdict.ok, verdict.explain()
    assert "cpu" not in facts.capacity  # only nvidia.com/* is read


@pytest.mark.parametrize("variant", NODES["variants"], ids=case_id)
def test_node_resources_judge_fails_on_each_broken_node(variant: dict[str, Any]) -> None:
    facts = node_variant(variant)
    verdict = he.judge_node_resources(
        facts.name,
        facts.capacity,
        facts.allocatable,
        NODES["expect"]["a100"],
        advertised_by=ADVERTISED_BY,
    )
    assert not verdict.ok
    assert variant["problem"] in verdict.explain()


def test_visibility_requires_the_mock_resources_in_the_lab() -> None:
    """TC-07/08 in the lab: a tenant whose mock plugin is down (only the platform's
    nvidia.com/gpu left) fails, because all three keys are required."""
    platform = parse_platform(copy.deepcopy(load_stack_config("lab")["gpu-platform:platform"]))
    tenant = platform.tenants[0]
    wanted = stack.expected_capacity(platform, tenant)
    only_gpu = he.ObjectRef(
        "tenant-a-a100-0", "uid", tenant="tenant-a", capacity={"nvidia.com/gpu": 10}
    )
    view = he.ClusterView("tenant-a", nodes=(only_gpu,), namespaces=(), pods=())
    verdict = he.judge_visibility(
        view,
        expected_nodes=["tenant-a-a100-0"],
        expected_capacity=wanted,
        required_capacity=tuple(wanted),
    )
    assert "advertise no nvidia.com/gpumem (expected 81920)" in verdict.explain()
    assert "advertise no nvidia.com/gpucores (expected 100)" in verdict.explain()
    facts = kube.node_facts(v1_node(NODES["nodes"]["tenant-a"]))
    full = he.ClusterView("tenant-a", nodes=(facts.ref(),), namespaces=(), pods=())
    assert he.judge_visibility(
        full,
        expected_nodes=["tenant-a-a100-0"],
        expected_capacity=wanted,
        required_capacity=tuple(wanted),
    ).ok


# ------------------------------------------------------------------------ polling and retries


class Flaky:
    """A check that fails with the given errors first, then answers."""

    def __init__(self, errors: list[BaseException], answer: Any = "ok") -> None:
        self.errors = list(errors)
        self.answer = answer
        self.calls = 0

    def __call__(self) -> Any:
        self.calls += 1
        if self.errors:
            raise self.errors.pop(0)
        return self.answer


@pytest.mark.parametrize(
    "error",
    [ApiException(status=503), ApiException(status=0), ApiException(status=429), OSError("reset")],
    ids=["503", "no-answer", "throttled", "socket"],
)
def test_polls_retry_transient_api_errors(error: BaseException) -> None:
    check = Flaky([error, error])
    assert kube.poll_until(check, timeout=5, interval=0) == "ok"
    assert check.calls == 3


@pytest.mark.parametrize("status", [404, 403, 422])
def test_polls_raise_real_answers_at_once(status: int) -> None:
    check = Flaky([ApiException(status=status)])
    with pytest.raises(ApiException):
        kube.poll_until(check, timeout=5, interval=0)
    assert check.calls == 1


def test_a_poll_ending_on_a_transient_error_raises_it() -> None:
    check = Flaky([ApiException(status=502)] * 1000)
    with pytest.raises(ApiException) as raised:
        kube.poll_until(check, timeout=0.05, interval=0.01)
    assert raised.value.status == 502


def test_a_poll_without_an_answer_returns_none() -> None:
    assert kube.poll_until(lambda: None, timeout=0.02, interval=0.01) is None


def test_retrying_reads_through_transient_errors() -> None:
    check = Flaky([ApiException(status=500)], answer=[1, 2])
    assert kube.retrying(check, timeout=5) == [1, 2]
