"""TC-22 … TC-25: a ``gpuSharing: dra`` tenant's cards through kube-scheduler's DRA plugin.

The tenant comes from the config (``dra_evidence.plan_dra``: the first ``dra`` tenant with
workers); a stack without one skips these four with one line. Each case asks through a
ResourceClaimTemplate built by the platform's own builder (``components.dra.claim_template``,
whole cards of the driver's DeviceClass), in a fresh namespace removed afterwards.

* TC-22 allocation: a pod asking one whole card is Running, its generated claim is controlled
  by the pod, reserved for it, and holds one device that a ResourceSlice of the pod's node
  publishes. Needs a device no claim holds when it starts (a declared DRA workload may hold
  the lab's only card: scale it to 0 first); otherwise a failure naming what holds them.
* TC-23 refusal: a pod asking one card larger than any the tenant has stays Pending, and
  kube-scheduler's PodScheduled condition and FailedScheduling event give the DRA plugin's own
  reason, ``cannot allocate all claims``, for every node and no other reason.
* TC-24 visibility: inside TC-22's container, the variables dra-example-driver v0.4.0's CDI
  spec sets name exactly the claim's devices, each tagged with the claim's uid.
* TC-25 cleanup: TC-22's pod deleted, its generated claim is gone and no claim that held its
  device beside it before the deletion still does (another claim given the freed device is
  recorded, not failed).

What each judge relies on upstream is in ``dra_evidence.py``; the judges run offline on the
constructed samples in ``samples/dra.yaml`` (``tests/unit/test_acceptance_dra.py``).
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import kubernetes.client as k8s
import pytest

from components import dra
from tests.acceptance.dra_evidence import (
    DRA_REASON,
    FAILED_SCHEDULING,
    Device,
    DraPlan,
    allocated_devices,
    claim_name_of,
    free_devices,
    judge_allocation,
    judge_cleanup,
    judge_refusal,
    judge_visibility,
    plan_dra,
)
from tests.acceptance.kube import (
    BIND_TIMEOUT,
    CLEANUP_TIMEOUT,
    EVENT_TIMEOUT,
    REQUEST_TIMEOUT,
    Cluster,
    cleanup_namespace,
    create_namespace,
    create_pod,
    delete_pods,
    list_raw,
    log_or_reason,
    pod_log,
    poll_until,
    retrying,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import DRA_DEVICE_CLASS, DRA_DRIVER
from tests.acceptance.report import Evidence
from tests.acceptance.workloads import MANAGED_BY, RUN_LABEL, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

POD_CLAIM = dra.REQUEST_NAME  # the pod's resourceClaims entry (components.dra.pod_claim_fields)
# env first, so TC-24 reads it from the log; then sleep like every other suite pod.
ENV_COMMAND = ["sh", "-c", "env | sort; sleep 3600"]
ALLOCATED = "dra-whole"
REFUSED = "dra-too-many"


def claim_template(
    name: str, namespace: str, run_id: str, cards: int, memory_mib: int | None = None
) -> dict[str, Any]:
    """A whole-card ResourceClaimTemplate by the platform's builder, labelled as the suite's
    (``memory_mib``: only cards with at least that much memory)."""
    request = dra.CardRequest(cards=cards, memory_mib=memory_mib, compute=dra.WHOLE_CARD_COMPUTE)
    template = dra.claim_template(name, namespace, request, DRA_DEVICE_CLASS, DRA_DRIVER)
    template["metadata"]["labels"] = {RUN_LABEL: run_id, **MANAGED_BY}
    return template


def _with_claim(body: dict[str, Any], template: str) -> dict[str, Any]:
    claims, resources = dra.pod_claim_fields(template)
    body["spec"]["resourceClaims"] = claims
    body["spec"]["containers"][0]["resources"] = resources
    return body


def dra_whole_card_pod(run_id: str, name: str = ALLOCATED) -> dict[str, Any]:
    """TC-22/24/25: one whole card through the ``<name>-gpu`` template; prints its env."""
    return _with_claim(pod_body(name, run_id, command=ENV_COMMAND), f"{name}-gpu")


def refused_template(namespace: str, run_id: str, memory_mib: int) -> dict[str, Any]:
    """TC-23's template: one card with more memory than any the tenant has (a count over a
    node's cards would be refused by the tenant's claim policy before any scheduler ran)."""
    return claim_template(f"{REFUSED}-gpu", namespace, run_id, 1, memory_mib)


def dra_refused_pod(run_id: str, name: str = REFUSED) -> dict[str, Any]:
    """TC-23: the pod of the ``<name>-gpu`` template that asks more cards than a node has."""
    return _with_claim(pod_body(name, run_id), f"{name}-gpu")


def _resource(cluster: Cluster) -> k8s.ResourceV1Api:
    return k8s.ResourceV1Api(cluster.api)


def create_template(cluster: Cluster, namespace: str, body: dict[str, Any]) -> None:
    _resource(cluster).create_namespaced_resource_claim_template(
        namespace, body, _request_timeout=REQUEST_TIMEOUT
    )


def slices_raw(cluster: Cluster) -> list[dict[str, Any]]:
    return list_raw(_resource(cluster).list_resource_slice)


def claims_raw(cluster: Cluster, namespace: str | None = None) -> list[dict[str, Any]]:
    if namespace is None:
        return list_raw(_resource(cluster).list_resource_claim_for_all_namespaces)
    return list_raw(_resource(cluster).list_namespaced_resource_claim, namespace)


def pod_raw(cluster: Cluster, namespace: str, name: str) -> dict[str, Any] | None:
    found = list_raw(
        cluster.core.list_namespaced_pod, namespace, field_selector=f"metadata.name={name}"
    )
    return found[0] if found else None


def events_raw(cluster: Cluster, namespace: str, name: str) -> list[dict[str, Any]]:
    items = list_raw(
        cluster.core.list_namespaced_event,
        namespace,
        field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}",
    )
    return [
        {
            "type": e.get("type"),
            "reason": e.get("reason"),
            "message": e.get("message", ""),
            "source": (e.get("source") or {}).get("component") or e.get("reportingComponent"),
        }
        for e in sorted(items, key=lambda e: str(e.get("lastTimestamp") or e.get("eventTime")))
    ]


@dataclass
class DraRun:
    namespace: str
    plan: DraPlan
    started: bool = False
    errors: list[str] = field(default_factory=list)
    pod: dict[str, Any] | None = None
    claim: dict[str, Any] | None = None
    slices: list[dict[str, Any]] = field(default_factory=list)
    free_before: list[str] = field(default_factory=list)


@pytest.fixture(scope="module")
def dra_plan(live: LiveStack) -> DraPlan:
    planned = plan_dra(live.platform)
    if planned is None:
        pytest.skip(f"stack {live.stack} has no gpuSharing: dra tenant with workers")
    return planned


@pytest.fixture(scope="module")
def dra_run(live: LiveStack, dra_plan: DraPlan) -> Iterator[DraRun]:
    cluster = live.tenant(dra_plan.tenant)
    namespace = create_namespace(cluster, live.run_id)
    try:
        yield DraRun(namespace=namespace, plan=dra_plan)
    finally:
        cleanup_namespace(cluster, namespace)


def _find_claim(cluster: Cluster, namespace: str, pod: dict[str, Any]) -> dict[str, Any] | None:
    name = claim_name_of(pod, POD_CLAIM)
    if name is None:
        return None
    return next((c for c in claims_raw(cluster, namespace) if c["metadata"]["name"] == name), None)


def ensure_allocated(live: LiveStack, run: DraRun) -> None:
    """TC-22's pod, once per module (TC-24 and TC-25 read it)."""
    if run.started:
        return
    run.started = True
    cluster = live.tenant(run.plan.tenant)
    run.slices = slices_raw(cluster)
    free = free_devices(run.slices, claims_raw(cluster), DRA_DRIVER)
    run.free_before = ["/".join(k) for k in free]
    if not free:
        held = sorted(
            f"{c['metadata']['namespace']}/{c['metadata']['name']}: "
            + ", ".join(d.describe() for d in allocated_devices(c))
            for c in claims_raw(cluster)
            if allocated_devices(c)
        )
        run.errors.append(
            f"no free {DRA_DRIVER} device in {run.plan.tenant} before the test "
            f"(published: {len(run.slices)} slice(s); held: {'; '.join(held) or 'none'})"
        )
        return
    create_template(
        cluster, run.namespace, claim_template(f"{ALLOCATED}-gpu", run.namespace, live.run_id, 1)
    )
    create_pod(cluster, run.namespace, dra_whole_card_pod(live.run_id))

    def running() -> dict[str, Any] | None:
        pod = pod_raw(cluster, run.namespace, ALLOCATED)
        phase = (pod or {}).get("status", {}).get("phase")
        return pod if phase in ("Running", "Succeeded", "Failed") else None

    pod = poll_until(running, timeout=BIND_TIMEOUT)
    run.pod = pod or retrying(lambda: pod_raw(cluster, run.namespace, ALLOCATED))
    if pod is None:
        conditions = ((run.pod or {}).get("status") or {}).get("conditions") or []
        run.errors.append(
            f"{ALLOCATED} not Running within {BIND_TIMEOUT:.0f} s: "
            + "; ".join(
                f"{c.get('type')}={c.get('status')} {c.get('message', '')}" for c in conditions
            )
        )
    if run.pod is not None:
        run.claim = _find_claim(cluster, run.namespace, run.pod)


@pytest.mark.tc("TC-22")
def test_dra_allocation(
    live: LiveStack, dra_plan: DraPlan, dra_run: DraRun, evidence: Evidence
) -> None:
    ensure_allocated(live, dra_run)
    evidence.record("plan", dra_plan.as_dict())
    evidence.record("freeBefore", dra_run.free_before)
    if dra_run.errors and dra_run.pod is None:
        pytest.fail("; ".join(dra_run.errors))
    verdict = judge_allocation(
        dra_run.pod or {},
        dra_run.claim,
        dra_run.slices,
        pod_claim=POD_CLAIM,
        driver=DRA_DRIVER,
        cards=1,
    )
    evidence.record("allocation", verdict.facts)
    evidence.summary(
        f"{ALLOCATED} {verdict.facts.get('phase')} on {verdict.facts.get('node') or '-'} with "
        f"{', '.join(verdict.facts.get('devices') or ['no device'])} ({verdict.facts.get('claim')})"
    )
    problems = dra_run.errors + verdict.problems
    assert not problems, "; ".join(problems)


@pytest.mark.tc("TC-23")
def test_dra_refusal(
    live: LiveStack, dra_plan: DraPlan, dra_run: DraRun, evidence: Evidence
) -> None:
    cluster = live.tenant(dra_plan.tenant)
    nodes = len(retrying(lambda: cluster.core.list_node(_request_timeout=REQUEST_TIMEOUT).items))
    create_template(
        cluster,
        dra_run.namespace,
        refused_template(dra_run.namespace, live.run_id, dra_plan.refused_memory_mib),
    )
    create_pod(cluster, dra_run.namespace, dra_refused_pod(live.run_id))

    def refused() -> tuple[dict[str, Any], list[dict[str, Any]]] | None:
        pod = pod_raw(cluster, dra_run.namespace, REFUSED) or {}
        events = events_raw(cluster, dra_run.namespace, REFUSED)
        if (pod.get("spec") or {}).get("nodeName") or any(
            e["reason"] == FAILED_SCHEDULING and DRA_REASON in e["message"] for e in events
        ):
            return pod, events
        return None

    seen = poll_until(refused, timeout=EVENT_TIMEOUT, interval=1.0)
    if seen is None:
        seen = (
            retrying(lambda: pod_raw(cluster, dra_run.namespace, REFUSED)) or {},
            events_raw(cluster, dra_run.namespace, REFUSED),
        )
    pod, events = seen
    verdict = judge_refusal(pod, events, nodes=nodes)
    evidence.record("plan", dra_plan.as_dict())
    evidence.record("refusal", verdict.facts)
    evidence.record("events", events)
    said = verdict.facts.get("messages", {}).get(FAILED_SCHEDULING, "no event")
    evidence.summary(
        f"a card of {dra_plan.refused_memory_mib} MiB asked, the largest has "
        f"{dra_plan.largest_card_mib}: "
        f"{verdict.facts.get('phase')}, {said}"
    )
    assert verdict.ok, verdict.explain()


@pytest.mark.tc("TC-24")
def test_dra_visibility(
    live: LiveStack, dra_plan: DraPlan, dra_run: DraRun, evidence: Evidence
) -> None:
    ensure_allocated(live, dra_run)
    if dra_run.pod is None or dra_run.claim is None:
        pytest.fail("precondition not met: TC-22's pod has no allocated claim (see TC-22)")
    cluster = live.tenant(dra_plan.tenant)

    def printed() -> str | None:
        text = pod_log(cluster, dra_run.namespace, ALLOCATED, lines=200)
        return text if "PATH=" in text else None

    text = poll_until(printed, timeout=EVENT_TIMEOUT, interval=1.0)
    if text is None:
        pytest.fail(
            f"{ALLOCATED} printed no environment: "
            f"{log_or_reason(cluster, dra_run.namespace, ALLOCATED)}"
        )
    verdict = judge_visibility(text, dra_run.claim, driver=DRA_DRIVER)
    evidence.record("visibility", verdict.facts)
    evidence.summary(
        f"sees {', '.join(verdict.facts['visible']) or 'nothing'}; "
        f"claim holds {', '.join(verdict.facts['allocated']) or 'nothing'}"
    )
    assert verdict.ok, verdict.explain()


@pytest.mark.tc("TC-25")
def test_dra_cleanup(
    live: LiveStack, dra_plan: DraPlan, dra_run: DraRun, evidence: Evidence
) -> None:
    ensure_allocated(live, dra_run)
    if dra_run.claim is None:
        pytest.fail("precondition not met: TC-22's pod has no claim to clean up (see TC-22)")
    cluster = live.tenant(dra_plan.tenant)
    claim = dra_run.claim
    devices: list[Device] = allocated_devices(claim)
    claims_before = claims_raw(cluster)
    started = time.monotonic()
    left = delete_pods(cluster, dra_run.namespace, [ALLOCATED], CLEANUP_TIMEOUT)

    def claim_gone() -> list[dict[str, Any]] | None:
        claims = claims_raw(cluster)
        uid = claim["metadata"]["uid"]
        return None if any(c["metadata"].get("uid") == uid for c in claims) else claims

    claims = poll_until(claim_gone, timeout=CLEANUP_TIMEOUT)
    seconds = time.monotonic() - started
    verdict = judge_cleanup(
        claim["metadata"]["name"],
        claim["metadata"]["uid"],
        devices,
        claims if claims is not None else claims_raw(cluster),
        claims_before=claims_before,
    )
    if left:
        verdict.problems.append(f"pod {ALLOCATED} still present after {CLEANUP_TIMEOUT:.0f} s")
    evidence.record("cleanup", {**verdict.facts, "seconds": round(seconds, 1)})
    evidence.summary(
        f"claim {claim['metadata']['name']} "
        f"{'gone' if claims is not None else 'still there'} {seconds:.1f} s after deleting the pod"
    )
    assert verdict.ok, verdict.explain()
