"""The DRA cases' judges (TC-22 … TC-25, ``tests/acceptance/dra_evidence.py``) on the constructed
samples of ``tests/acceptance/samples/dra.yaml``: each passes its good sample and fails each
broken one; the suite's DRA objects are the platform's builders' and valid at v1.35.0."""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any
from unittest import mock

import kubernetes.client as k8s
import pytest
import yaml

from components.stack import parse_platform
from tests.acceptance import dra_evidence as de
from tests.acceptance import test_tc22_25_dra as tc
from tests.acceptance.stack import load_platform
from tests.support.kube_schemas import builtin_violations
from tests.unit.test_dra_config import dra_lab

SAMPLES = Path(__file__).resolve().parents[1] / "acceptance" / "samples"


@pytest.fixture(scope="module")
def sample() -> dict[str, Any]:
    return yaml.safe_load((SAMPLES / "dra.yaml").read_text())


def _allocation(sample: dict[str, Any], **changes: Any) -> de.Verdict:
    pod = changes.pop("pod", sample["pod"])
    claim = changes.pop("claim", sample["claim"])
    return de.judge_allocation(
        pod,
        claim,
        sample["slices"],
        pod_claim="gpu",
        driver=sample["driver"],
        cards=changes.pop("cards", 1),
    )


def test_allocation_holds_on_the_sample(sample: dict[str, Any]) -> None:
    verdict = _allocation(sample)
    assert verdict.ok, verdict.explain()
    assert verdict.facts["devices"] == ["gpu.example.com/tenant-a-a100-0/gpu-0"]
    assert verdict.facts["claim"] == "dra-whole-gpu-5xk8d"


def test_allocation_fails_on_a_device_the_tenant_does_not_publish(sample: dict[str, Any]) -> None:
    claim = copy.deepcopy(sample["claim"])
    claim["status"]["allocation"]["devices"]["results"] = [sample["broken"]["foreign_device"]]
    assert "in no ResourceSlice" in _allocation(sample, claim=claim).explain()


def test_allocation_fails_on_a_device_of_another_node(sample: dict[str, Any]) -> None:
    pod = copy.deepcopy(sample["pod"])
    pod["spec"]["nodeName"] = "tenant-a-a100-1"
    assert "published by tenant-a-a100-0" in _allocation(sample, pod=pod).explain()


@pytest.mark.parametrize(
    ("change", "words"),
    [
        (lambda p, c: p["status"].update(phase="Pending"), "not Running"),
        (lambda p, c: c["status"].pop("allocation"), "not allocated"),
        (lambda p, c: c["status"].update(reservedFor=[]), "not reserved"),
        (lambda p, c: c["metadata"]["ownerReferences"][0].update(uid="x"), "not controlled"),
        (lambda p, c: c["metadata"].update(annotations={}), "pod-claim-name"),
        (lambda p, c: p["status"].update(resourceClaimStatuses=[]), "no status.resourceClaim"),
    ],
)
def test_allocation_fails_on_each_broken_fact(
    sample: dict[str, Any], change: Any, words: str
) -> None:
    pod, claim = copy.deepcopy(sample["pod"]), copy.deepcopy(sample["claim"])
    change(pod, claim)
    verdict = _allocation(sample, pod=pod, claim=claim)
    assert words in verdict.explain()


def test_allocation_fails_when_fewer_cards_than_asked(sample: dict[str, Any]) -> None:
    assert "1 distinct device(s), asked 2" in _allocation(sample, cards=2).explain()


def test_refusal_holds_on_the_schedulers_words(sample: dict[str, Any]) -> None:
    refused = sample["refused"]
    verdict = de.judge_refusal(refused["pod"], refused["events"], nodes=sample["nodes"])
    assert verdict.ok, verdict.explain()
    assert de.fit_error_reasons(refused["events"][0]["message"]) == (2, {de.DRA_REASON: 2})


def test_refusal_reads_a_combined_event() -> None:
    text = "(combined from similar events): 0/1 nodes are available: 1 cannot allocate all claims."
    assert de.fit_error_reasons(text) == (1, {de.DRA_REASON: 1})


@pytest.mark.parametrize("broken", ["resources_reason", "mixed_reason", "prefilter_reason"])
def test_refusal_fails_when_dra_is_not_the_only_reason(sample: dict[str, Any], broken: str) -> None:
    refused = copy.deepcopy(sample["refused"])
    text = sample["broken"][broken]
    refused["events"][0]["message"] = text
    refused["pod"]["status"]["conditions"][0]["message"] = text
    verdict = de.judge_refusal(refused["pod"], refused["events"], nodes=2)
    assert not verdict.ok
    assert "not 'cannot allocate all claims' for all 2 node(s)" in verdict.explain()


def test_refusal_fails_when_the_pod_was_placed_or_the_event_is_missing(
    sample: dict[str, Any],
) -> None:
    refused = copy.deepcopy(sample["refused"])
    assert (
        "counts 2 nodes, the tenant has 3"
        in de.judge_refusal(refused["pod"], refused["events"], nodes=3).explain()
    )
    assert "no Warning FailedScheduling" in de.judge_refusal(refused["pod"], [], nodes=2).explain()
    refused["pod"]["spec"]["nodeName"] = "tenant-a-a100-0"
    refused["pod"]["status"]["phase"] = "Running"
    assert (
        "not Pending unbound"
        in de.judge_refusal(refused["pod"], refused["events"], nodes=2).explain()
    )


def test_visibility_holds_on_the_drivers_variables(sample: dict[str, Any]) -> None:
    verdict = de.judge_visibility(sample["env"], sample["claim"], driver=sample["driver"])
    assert verdict.ok, verdict.explain()
    assert verdict.facts["visible"] == ["gpu-0"]
    # GPU_DEVICE_0_SHARING_STRATEGY and the claim variable are not devices.
    assert de.visible_devices(de.parse_env(sample["env"])) == {"gpu-0"}
    assert de.claim_variable("gpu-0") == "GPU_DEVICE_GPU_0_RESOURCE_CLAIM"


def test_visibility_fails_on_an_extra_device_or_another_claim(sample: dict[str, Any]) -> None:
    extra = de.judge_visibility(
        sample["broken"]["env_extra_device"], sample["claim"], driver="gpu.example.com"
    )
    assert "sees ['gpu-0', 'gpu-1']" in extra.explain()
    other = sample["env"].replace("0c9b8a7d-6e5f-4a3b-9c2d-1e0f9a8b7c6d", "another-uid")
    assert (
        "not the claim's"
        in de.judge_visibility(other, sample["claim"], driver="gpu.example.com").explain()
    )
    none = "\n".join(line for line in sample["env"].splitlines() if "GPU_DEVICE" not in line)
    assert (
        "sees no device"
        in de.judge_visibility(none, sample["claim"], driver="gpu.example.com").explain()
    )


def test_cleanup_holds_when_the_claim_is_gone(sample: dict[str, Any]) -> None:
    devices = de.allocated_devices(sample["claim"])
    verdict = de.judge_cleanup(
        "dra-whole-gpu-5xk8d",
        sample["claim"]["metadata"]["uid"],
        devices,
        [],
        claims_before=[sample["claim"]],
    )
    assert verdict.ok, verdict.explain()


def test_cleanup_fails_on_a_leftover_claim_or_a_holder_of_before(sample: dict[str, Any]) -> None:
    devices = de.allocated_devices(sample["claim"])
    uid = sample["claim"]["metadata"]["uid"]
    broken = sample["broken"]
    before = [sample["claim"]]
    left = de.judge_cleanup(
        "dra-whole-gpu-5xk8d", uid, devices, [broken["leftover_claim"]], claims_before=before
    )
    assert "still exists" in left.explain()
    # A claim that held the device beside the deleted one before the deletion, and still does.
    other = copy.deepcopy(broken["other_claim_holding"])
    held = de.judge_cleanup(
        "dra-whole-gpu-5xk8d", uid, devices, [other], claims_before=[*before, other]
    )
    assert "held gpu.example.com/tenant-a-a100-0/gpu-0 beside the deleted claim" in held.explain()
    # Given the freed device afterwards: a claim that waited since before the deletion (older
    # than it, as another replica's would be) or a new one. Recorded, not a failure.
    waited = copy.deepcopy(other)
    waited["metadata"]["creationTimestamp"] = "2026-12-06T04:59:00Z"
    reused = de.judge_cleanup("dra-whole-gpu-5xk8d", uid, devices, [waited], claims_before=before)
    assert reused.ok, reused.explain()
    assert reused.facts["reallocatedTo"] == [
        "team/someone-gpu-abcde (gpu.example.com/tenant-a-a100-0/gpu-0)"
    ]


def test_free_devices_leave_out_what_claims_hold(sample: dict[str, Any]) -> None:
    assert de.free_devices(sample["slices"], [sample["claim"]], "gpu.example.com") == [
        ("gpu.example.com", "tenant-a-a100-1", "gpu-0")
    ]
    assert de.free_devices(sample["slices"], [], "other.example.com") == []


def test_the_plan_comes_from_the_config() -> None:
    assert de.plan_dra(load_platform("lab")) is None  # every lab tenant is hami: TC-22 … skip
    plan = de.plan_dra(parse_platform(dra_lab()))
    assert plan == de.DraPlan("tenant-a", 1, 1, 81920)
    assert plan.refused_memory_mib == 81921


def test_the_suites_dra_objects_are_the_platforms_and_valid_at_v1_35() -> None:
    template = tc.claim_template("dra-whole-gpu", "acceptance-r0", "r0", 1)
    assert template["spec"] == {
        "spec": {
            "devices": {
                "requests": [
                    {
                        "name": "gpu",
                        "exactly": {
                            "deviceClassName": "gpu.example.com",
                            "allocationMode": "ExactCount",
                            "count": 1,
                        },
                    }
                ]
            }
        }
    }
    for body in (template, tc.dra_whole_card_pod("r0"), tc.dra_refused_pod("r0")):
        assert builtin_violations("v1.35.0", body) == [], body["metadata"]["name"]
    pod = tc.dra_refused_pod("r0")
    assert pod["spec"]["resourceClaims"] == [
        {"name": "gpu", "resourceClaimTemplateName": "dra-too-many-gpu"}
    ]


def test_the_python_client_sends_the_bodies_unchanged() -> None:
    """The client converts a dict body into its models before sending: nothing of the claim
    template or the pod may be lost on the way (kubernetes client 37's pydantic models)."""
    api = k8s.ApiClient()
    sent: list[Any] = []
    template = tc.claim_template("dra-whole-gpu", "acceptance-r0", "r0", 2)
    pod = tc.dra_whole_card_pod("r0")
    with (
        mock.patch.object(api, "call_api", side_effect=RuntimeError("not sent")),
        mock.patch.object(api, "param_serialize", wraps=api.param_serialize) as serialize,
    ):
        for call in (
            lambda: k8s.ResourceV1Api(api).create_namespaced_resource_claim_template(
                "acceptance-r0", template
            ),
            lambda: k8s.CoreV1Api(api).create_namespaced_pod("acceptance-r0", pod),
        ):
            with pytest.raises(RuntimeError):
                call()
        sent = [api.sanitize_for_serialization(c.kwargs["body"]) for c in serialize.call_args_list]
    assert [json.dumps(s, sort_keys=True) for s in sent] == [
        json.dumps(b, sort_keys=True) for b in (template, pod)
    ]


def test_tc18_counts_what_a_dra_tenants_claims_hold(sample: dict[str, Any]) -> None:
    """One whole 80Gi card: 81,920 MiB and 100 %, by hand; nothing without an allocation."""
    assert de.dra_granted([sample["claim"]], sample["slices"], "gpu.example.com") == (81920, 100)
    assert de.dra_granted([sample["claim"]], sample["slices"], "other.example.com") == (0, 0)
    assert de.dra_granted([], sample["slices"], "gpu.example.com") == (0, 0)
    assert de.memory_mib("80Gi") == 81920
    assert de.memory_mib(str(2**30)) == 1024
    assert de.memory_mib("80G") is None


def test_tc18_and_the_exporter_count_the_same_devices(sample: dict[str, Any]) -> None:
    """TC-18's reference and the claims exporter (components/metrics/dra_claims.py) agree: the
    tenant's GPU driver only, an adminAccess result not held (k8s.io/api v0.35.0
    resource/v1/types.go:1626-1636)."""
    from components.metrics import dra_claims

    claim = copy.deepcopy(sample["claim"])
    results = claim["status"]["allocation"]["devices"]["results"]
    gpu = results[0]
    results.append({**gpu, "driver": "compute-domain.nvidia.com", "device": "channel-0"})
    admin = copy.deepcopy(sample["claim"])
    admin["metadata"]["name"] = "admin"
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    claims = [claim, admin]
    driver = "gpu.example.com"
    rows = dra_claims.samples(claims, sample["slices"], [driver])
    cards = sum(v for name, _, v in rows if name == dra_claims.CARDS)
    mib = sum(v for name, _, v in rows if name == dra_claims.MEMORY) / 2**20
    assert de.dra_granted(claims, sample["slices"], driver) == (mib, 100 * cards) == (81920, 100)
