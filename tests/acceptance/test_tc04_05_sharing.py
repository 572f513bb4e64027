"""TC-04 fractional sharing, TC-05 compute limit - HAMi's decisions on one card.

The GPU tenant comes from the config: the first pool whose nodes carry exactly one card on which
the report's scenario works (``stack.plan_sharing``; tenant-a's A100 80GB in the lab; the
``plan`` and ``target`` fixtures in conftest.py, shared with TC-06).

* TC-04: ``fitting_pods`` pods (3), each ``nvidia.com/gpu: 1``, ``gpumem: 20000``,
  ``gpucores: 30``, created one after the other; each is bound by HAMi to the same node and the
  same card UUID (``hami.io/vgpu-devices-allocated``), its allocation completed
  (``hami.io/bind-phase: success``), none rejected by the kubelet (``Failed``/``Succeeded``), and
  the shares add up to 60000 MiB and 90 %. Each bind is timed.
* TC-05: one more identical pod stays Pending and a Warning event names
  ``CardInsufficientCore`` - and no other HAMi reason - while memory would still fit
  (60000 + 20000 <= 81920 MiB).

The card must be free when the suite starts: no live pod that HAMi counts on the node (HAMi
counts a pod from Filter time by its ``hami.io/vgpu-node`` annotation, before any binding). The
shares are released when this module ends, so a cleanup failure lands on TC-05's row (or TC-04's
when TC-05 is not run), never on TC-06's.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.acceptance.hami_evidence import (
    HAMI_ASSIGNED_NODE,
    HAMI_BIND_PHASE,
    HAMI_BIND_TIME,
    PodPlacement,
    Verdict,
    card_usage,
    judge_rejection,
    judge_sharing,
)
from tests.acceptance.kube import (
    BIND_TIMEOUT,
    cleanup_namespace,
    condition,
    create_namespace,
    create_pod,
    is_bound,
    meta,
    node_lock,
    node_usage,
    placement,
    poll_until,
    read_pod,
    retrying,
    scheduling_message,
    wait_for_refusal,
)
from tests.acceptance.live import LiveStack, Target
from tests.acceptance.report import Evidence
from tests.acceptance.stack import SharingPlan
from tests.acceptance.workloads import gpu_limits, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

ADMISSION_TIMEOUT = 60.0  # for the kubelet to admit (or reject) the bound share pods


@dataclass
class Bind:
    pod: str
    bind_seconds: float | None = None  # creation -> bound, measured by the client
    success_seconds: float | None = None  # creation -> bind-phase success/failed
    # HAMi stamps hami.io/bind-time when its Bind starts, before it takes the node lock and binds
    # (HAMi v2.10.0 pkg/scheduler/scheduler.go:1031-1057), in unix seconds: this is creation ->
    # start of HAMi's Bind, at 1 s resolution, not bind completion.
    hami_bind_start_seconds: int | None = None
    # PodScheduled=True lastTransitionTime - creationTimestamp (1 s resolution): creation -> the
    # Binding stored by the API server.
    scheduled_seconds: int | None = None
    bind_phase: str | None = None
    status: str = ""
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "bindSeconds": None if self.bind_seconds is None else round(self.bind_seconds, 2),
            "bindPhaseSeconds": None
            if self.success_seconds is None
            else round(self.success_seconds, 2),
            "hamiBindStartSeconds": self.hami_bind_start_seconds,
            "scheduledSeconds": self.scheduled_seconds,
            "bindPhase": self.bind_phase,
            "status": self.status,
            "error": self.error,
        }


@dataclass
class SharingRun:
    namespace: str
    started: bool = False
    binds: list[Bind] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)
    baseline: list[dict[str, Any]] = field(default_factory=list)


@pytest.fixture(scope="module")
def sharing(live: LiveStack, plan: SharingPlan, target: Target) -> Iterator[SharingRun]:
    namespace = create_namespace(target.cluster, live.run_id)
    try:
        yield SharingRun(namespace=namespace)
    finally:
        cleanup_namespace(target.cluster, namespace)


def share_pod(
    plan: SharingPlan, node_selector: dict[str, str] | None, run_id: str, name: str
) -> dict[str, Any]:
    """One share of the sharing scenario (TC-04's pods and TC-05's one too many)."""
    return pod_body(
        name,
        run_id,
        limits=gpu_limits(1, memory_mib=plan.pod_memory_mib, cores=plan.pod_cores),
        node_selector=node_selector,
    )


def _seconds_since_creation(pod: Any, stamp: Any) -> int | None:
    created = meta(pod).creation_timestamp
    if created is None or stamp is None:
        return None
    return int(stamp.timestamp()) - int(created.timestamp())


def bind_one(
    live: LiveStack, plan: SharingPlan, target: Target, run: SharingRun, name: str
) -> Bind:
    """Create one share pod and wait (bounded) for its bind and for its allocation to finish;
    stops early when the kubelet rejects the pod (Failed/Succeeded)."""
    cluster = target.cluster
    body = share_pod(plan, target.node_selector, live.run_id, name)
    record = Bind(pod=name)
    started = time.monotonic()
    create_pod(cluster, run.namespace, body)

    def bound_or_ended() -> Any:
        pod = read_pod(cluster, run.namespace, name)
        return pod if is_bound(pod) or placement(pod).terminal else None

    bound = poll_until(bound_or_ended, timeout=BIND_TIMEOUT)
    if bound is None:
        last = retrying(lambda: read_pod(cluster, run.namespace, name))
        record.error = (
            f"{name} not bound within {BIND_TIMEOUT:.0f} s "
            f"({scheduling_message(last) or 'no scheduling condition yet'}; "
            f"HAMi node lock on {target.node}: {node_lock(cluster, target.node)})"
        )
        return record
    if is_bound(bound):
        record.bind_seconds = time.monotonic() - started

    def finished() -> Any:
        pod = read_pod(cluster, run.namespace, name)
        phase = (meta(pod).annotations or {}).get(HAMI_BIND_PHASE)
        return pod if phase in ("success", "failed") or placement(pod).terminal else None

    done = poll_until(finished, timeout=BIND_TIMEOUT)
    pod = done if done is not None else retrying(lambda: read_pod(cluster, run.namespace, name))
    if done is not None:
        record.success_seconds = time.monotonic() - started
    seen = placement(pod)
    record.bind_phase = seen.bind_phase
    record.status = seen.status_text()
    if seen.terminal:
        record.error = f"{name} was rejected or ended: {seen.status_text()}"
    bind_time = (meta(pod).annotations or {}).get(HAMI_BIND_TIME, "")
    created = meta(pod).creation_timestamp
    if bind_time.isdigit() and created is not None:
        record.hami_bind_start_seconds = int(bind_time) - int(created.timestamp())
    scheduled = condition(pod, "PodScheduled")
    if scheduled is not None and scheduled.status == "True":
        record.scheduled_seconds = _seconds_since_creation(pod, scheduled.last_transition_time)
    return record


def ensure_bound(live: LiveStack, plan: SharingPlan, target: Target, run: SharingRun) -> None:
    """Run TC-04's scenario once per module (TC-05 needs it even when selected alone)."""
    if run.started:
        return
    run.started = True
    busy = node_usage(target.cluster, target.node)
    run.baseline = [usage.as_dict() for usage in busy.values()]
    if busy:
        run.errors.append(
            f"card(s) on {target.node} already hold shares HAMi counts ({HAMI_ASSIGNED_NODE}) "
            "before the test: "
            + "; ".join(
                f"{u.uuid} {u.memory_mib} MiB / {u.cores} % ({', '.join(u.pods)})"
                for u in busy.values()
            )
        )
        return
    for index in range(1, plan.fitting_pods + 1):
        record = bind_one(live, plan, target, run, f"share-{index}")
        run.binds.append(record)
        if record.error:
            run.errors.append(record.error)
            break
    wait_admitted(target, run)


def wait_admitted(target: Target, run: SharingRun) -> None:
    """Give the kubelet its say before judging: each bound pod either has container statuses
    (the kubelet admitted it and works on it) or ended (it rejected it, e.g. OutOfnvidia.com/
    gpumem when the mock plugin is not serving). Bounded; a pod still without statuses is judged
    as it is."""

    def settled() -> bool | None:
        for bind in run.binds:
            pod = read_pod(target.cluster, run.namespace, bind.pod)
            ended = placement(pod).terminal
            started = bool(pod.status and pod.status.container_statuses)
            if is_bound(pod) and not (ended or started):
                return None
        return True

    poll_until(settled, timeout=ADMISSION_TIMEOUT, interval=1.0)


def held_pods(target: Target, run: SharingRun) -> list[PodPlacement]:
    """The share pods as they are now (each read retried through transient errors)."""

    def read(name: str) -> PodPlacement:
        return placement(retrying(lambda: read_pod(target.cluster, run.namespace, name)))

    return [read(b.pod) for b in run.binds]


@pytest.mark.tc("TC-04")
def test_fractional_sharing(
    live: LiveStack, plan: SharingPlan, target: Target, sharing: SharingRun, evidence: Evidence
) -> None:
    ensure_bound(live, plan, target, sharing)
    pods = held_pods(target, sharing)
    card = target.card
    verdict = judge_sharing(
        pods,
        pod_memory_mib=plan.pod_memory_mib,
        pod_cores=plan.pod_cores,
        expected_memory_mib=plan.expected_memory_mib,
        expected_cores=plan.expected_cores,
        card_memory_mib=card.memory_mib,
        card_core_units=card.core_units,
        registered_uuids=[c.uuid for c in target.cards],
        expected_node=target.node,
    )
    problems = list(sharing.errors) + verdict.problems
    if len(sharing.binds) < plan.fitting_pods:
        problems.append(f"only {len(sharing.binds)} of {plan.fitting_pods} pods were created")
    evidence.record("plan", plan.as_dict())
    evidence.record("namespace", f"{plan.tenant}:{sharing.namespace}")
    evidence.record("registeredCards", [c.uuid for c in target.cards])
    evidence.record("baselineUsage", sharing.baseline)
    evidence.record("allocation", verdict.facts)
    evidence.record("binds", [b.as_dict() for b in sharing.binds])
    usage = verdict.facts.get("usage", {})
    uuids = ", ".join(c["uuid"] for c in verdict.facts.get("cards", [])) or "no card"
    binds = ", ".join(
        f"{b.bind_seconds:.1f} s" if b.bind_seconds is not None else "unbound"
        for b in sharing.binds
    )
    evidence.summary(
        f"{len(pods)} pods on {uuids} ({target.node}): {usage.get('memoryMiB')}/"
        f"{card.memory_mib} MiB, {usage.get('cores')}/{card.core_units} %; binds {binds}"
    )
    assert not problems, "; ".join(problems)


@pytest.mark.tc("TC-05")
def test_compute_limit_enforced(
    live: LiveStack, plan: SharingPlan, target: Target, sharing: SharingRun, evidence: Evidence
) -> None:
    ensure_bound(live, plan, target, sharing)
    cluster = target.cluster
    held = held_pods(target, sharing)
    bound = [p for p in held if p.node and p.allocated and not p.terminal]
    if len(bound) != plan.fitting_pods:
        ended = [f"{p.name} {p.status_text()}" for p in held if p.terminal]
        pytest.fail(
            f"precondition not met: {len(bound)} of {plan.fitting_pods} share pods are bound and "
            f"live (see TC-04{'; ' + ', '.join(ended) if ended else ''}), so the compute limit "
            "cannot be shown"
        )
    usage = card_usage({p.name: p.allocated for p in bound if p.allocated})
    used_memory = sum(u.memory_mib for u in usage.values())
    used_cores = sum(u.cores for u in usage.values())
    card = target.card
    memory_after = used_memory + plan.pod_memory_mib
    cores_after = used_cores + plan.pod_cores
    verdict = Verdict()
    if memory_after > card.memory_mib:
        verdict.problems.append(
            f"scenario broken: memory would not fit ({memory_after} > {card.memory_mib} MiB)"
        )
    if cores_after <= card.core_units:
        verdict.problems.append(
            f"scenario broken: cores would still fit ({cores_after} <= {card.core_units} %)"
        )
    name = "share-over"
    create_pod(
        cluster,
        sharing.namespace,
        share_pod(plan, target.node_selector, live.run_id, name),
    )
    pod, events = wait_for_refusal(cluster, sharing.namespace, name, "CardInsufficientCore")
    judged = judge_rejection(placement(pod), events, "CardInsufficientCore", exclusive=True)
    verdict.problems.extend(judged.problems)
    evidence.record(
        "arithmetic",
        {
            "memory": f"{used_memory} + {plan.pod_memory_mib} = {memory_after} "
            f"{'<=' if memory_after <= card.memory_mib else '>'} {card.memory_mib} MiB",
            "cores": f"{used_cores} + {plan.pod_cores} = {cores_after} "
            f"{'>' if cores_after > card.core_units else '<='} {card.core_units} %",
        },
    )
    evidence.record("rejection", judged.facts)
    evidence.record("podScheduledCondition", scheduling_message(pod))
    matching = judged.facts.get("matching") or ["no matching event"]
    evidence.summary(
        f"4th pod {placement(pod).phase or '?'}: {matching[0]} "
        f"(memory {memory_after} <= {card.memory_mib}, cores {cores_after} > {card.core_units})"
    )
    assert verdict.ok, verdict.explain()
