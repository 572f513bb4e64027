"""TC-04 fractional sharing, TC-05 compute limit, TC-06 memory limit - HAMi's decisions on one card.

The GPU tenant comes from the config: the first pool whose nodes carry exactly one card on which
the report's scenario works (``stack.plan_sharing``; tenant-a's A100 80GB in the lab).

* TC-04: ``fitting_pods`` pods (3), each ``nvidia.com/gpu: 1``, ``gpumem: 20000``,
  ``gpucores: 30``, created one after the other; each is bound by HAMi to the same node and the
  same card UUID (``hami.io/vgpu-devices-allocated``), its allocation completed
  (``hami.io/bind-phase: success``), and the shares add up to 60000 MiB and 90 %. Each bind's
  seconds are measured (creation -> bound, and -> bind-phase success).
* TC-05: one more identical pod stays Pending and a Warning event names
  ``CardInsufficientCore`` while memory would still fit (60000 + 20000 <= 81920 MiB).
* TC-06: a pod asking ``gpumem: 90000`` stays Pending with ``CardInsufficientMemory``.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any

import pytest

from tests.acceptance.hami_evidence import (
    HAMI_BIND_PHASE,
    HAMI_BIND_TIME,
    HAMI_NODE_REGISTER,
    CardUsage,
    EvidenceError,
    RegisteredCard,
    Verdict,
    card_usage,
    judge_rejection,
    judge_sharing,
    parse_node_register,
)
from tests.acceptance.kube import (
    BIND_TIMEOUT,
    REQUEST_TIMEOUT,
    Cluster,
    cleanup_namespace,
    create_namespace,
    create_pod,
    is_bound,
    list_nodes,
    meta,
    node_lock,
    placement,
    poll_until,
    pool_nodes,
    read_pod,
    scheduling_message,
    scratch_namespace,
    wait_for_refusal,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence
from tests.acceptance.stack import SharingPlan, plan_sharing
from tests.acceptance.workloads import HOSTNAME_LABEL, gpu_limits, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]

TERMINAL_PHASES = ("Succeeded", "Failed")


@pytest.fixture(scope="module")
def plan(live: LiveStack) -> SharingPlan:
    found = plan_sharing(live.platform)
    if found is None:
        pytest.skip(
            "no tenant pool has nodes with exactly one card of >= 80000 MiB and 100 compute "
            "units and >= 4 slots: the report's sharing scenario does not apply to this stack"
        )
    return found


@dataclass
class Target:
    """The node and card the scenario runs on."""

    cluster: Cluster
    node: str
    node_selector: dict[str, str] | None
    cards: list[RegisteredCard]

    @property
    def card(self) -> RegisteredCard:
        return self.cards[0]


@pytest.fixture(scope="module")
def target(live: LiveStack, plan: SharingPlan) -> Target:
    cluster = live.tenant(plan.tenant)
    nodes = list_nodes(cluster)
    named = live.outputs.tenants[plan.tenant].pools[plan.pool].nodes
    found, _ = pool_nodes(plan.pool, named, nodes)
    if not found:
        pytest.fail(f"{plan.tenant}: no node of pool {plan.pool} is listed by its API")
    node = sorted(found, key=lambda n: n.name)[0]
    raw = node.annotations.get(HAMI_NODE_REGISTER)
    if raw is None:
        pytest.fail(f"{node.name} has no {HAMI_NODE_REGISTER}: HAMi cannot schedule on it")
    try:
        cards = parse_node_register(raw)
    except EvidenceError as exc:
        pytest.fail(f"{node.name}: {exc}")
    # Pin only when the tenant has other nodes a pod could go to (the lab has one).
    selector = (
        {HOSTNAME_LABEL: node.labels.get(HOSTNAME_LABEL, node.name)} if len(nodes) > 1 else None
    )
    return Target(cluster=cluster, node=node.name, node_selector=selector, cards=cards)


@dataclass
class Bind:
    pod: str
    bind_seconds: float | None = None  # creation -> bound, measured by the client
    success_seconds: float | None = None  # creation -> bind-phase success/failed
    server_bind_seconds: int | None = None  # hami.io/bind-time - creationTimestamp (1 s steps)
    bind_phase: str | None = None
    error: str = ""

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod,
            "bindSeconds": None if self.bind_seconds is None else round(self.bind_seconds, 2),
            "bindPhaseSeconds": None
            if self.success_seconds is None
            else round(self.success_seconds, 2),
            "serverBindSeconds": self.server_bind_seconds,
            "bindPhase": self.bind_phase,
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


def node_usage(cluster: Cluster, node: str) -> dict[str, CardUsage]:
    """Card usage by every live pod bound to the node (any namespace)."""
    pods = cluster.core.list_pod_for_all_namespaces(
        field_selector=f"spec.nodeName={node}", _request_timeout=REQUEST_TIMEOUT
    ).items
    allocations = {}
    for pod in pods:
        seen = placement(pod)
        if seen.allocated and seen.phase not in TERMINAL_PHASES:
            allocations[f"{meta(pod).namespace}/{seen.name}"] = seen.allocated
    return card_usage(allocations)


def bind_one(
    live: LiveStack, plan: SharingPlan, target: Target, run: SharingRun, name: str
) -> Bind:
    """Create one share pod and wait (bounded) for its bind and for its allocation to finish."""
    cluster = target.cluster
    body = pod_body(
        name,
        live.run_id,
        limits=gpu_limits(1, memory_mib=plan.pod_memory_mib, cores=plan.pod_cores),
        node_selector=target.node_selector,
    )
    record = Bind(pod=name)
    started = time.monotonic()
    create_pod(cluster, run.namespace, body)
    bound = poll_until(
        lambda: pod if is_bound(pod := read_pod(cluster, run.namespace, name)) else None,
        timeout=BIND_TIMEOUT,
    )
    if bound is None:
        last = read_pod(cluster, run.namespace, name)
        record.error = (
            f"{name} not bound within {BIND_TIMEOUT:.0f} s "
            f"({scheduling_message(last) or 'no scheduling condition yet'}; "
            f"HAMi node lock on {target.node}: {node_lock(cluster, target.node)})"
        )
        return record
    record.bind_seconds = time.monotonic() - started

    def finished() -> Any:
        pod = read_pod(cluster, run.namespace, name)
        phase = (meta(pod).annotations or {}).get(HAMI_BIND_PHASE)
        return pod if phase in ("success", "failed") else None

    done = poll_until(finished, timeout=BIND_TIMEOUT)
    pod = done if done is not None else read_pod(cluster, run.namespace, name)
    if done is not None:
        record.success_seconds = time.monotonic() - started
    annotations = meta(pod).annotations or {}
    record.bind_phase = annotations.get(HAMI_BIND_PHASE)
    bind_time = annotations.get(HAMI_BIND_TIME, "")
    created = meta(pod).creation_timestamp
    if bind_time.isdigit() and created is not None:
        record.server_bind_seconds = int(bind_time) - int(created.timestamp())
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
            f"card(s) on {target.node} already hold shares before the test: "
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


@pytest.mark.tc("TC-04")
def test_fractional_sharing(
    live: LiveStack, plan: SharingPlan, target: Target, sharing: SharingRun, evidence: Evidence
) -> None:
    ensure_bound(live, plan, target, sharing)
    pods = [placement(read_pod(target.cluster, sharing.namespace, b.pod)) for b in sharing.binds]
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
    held = [placement(read_pod(cluster, sharing.namespace, b.pod)) for b in sharing.binds]
    bound = [p for p in held if p.node and p.allocated]
    if len(bound) != plan.fitting_pods:
        pytest.fail(
            f"precondition not met: {len(bound)} of {plan.fitting_pods} share pods are bound "
            f"(see TC-04), so the compute limit cannot be shown"
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
        pod_body(
            name,
            live.run_id,
            limits=gpu_limits(1, memory_mib=plan.pod_memory_mib, cores=plan.pod_cores),
            node_selector=target.node_selector,
        ),
    )
    pod, events = wait_for_refusal(cluster, sharing.namespace, name, "CardInsufficientCore")
    judged = judge_rejection(
        placement(pod), events, "CardInsufficientCore", contradicting=("CardInsufficientMemory",)
    )
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


@pytest.mark.tc("TC-06")
def test_memory_limit_enforced(
    live: LiveStack, plan: SharingPlan, target: Target, evidence: Evidence
) -> None:
    cluster = target.cluster
    card = target.card
    name = "mem-over"
    with scratch_namespace(cluster, live.run_id) as namespace:
        create_pod(
            cluster,
            namespace,
            pod_body(
                name,
                live.run_id,
                limits=gpu_limits(1, memory_mib=plan.oversized_memory_mib),
                node_selector=target.node_selector,
            ),
        )
        pod, events = wait_for_refusal(cluster, namespace, name, "CardInsufficientMemory")
        judged = judge_rejection(placement(pod), events, "CardInsufficientMemory")
        evidence.record(
            "request", f"{plan.oversized_memory_mib} MiB on a {card.memory_mib} MiB card"
        )
        evidence.record("rejection", judged.facts)
        evidence.record("podScheduledCondition", scheduling_message(pod))
    matching = judged.facts.get("matching") or ["no matching event"]
    evidence.summary(
        f"{plan.oversized_memory_mib} MiB pod {placement(pod).phase or '?'}: {matching[0]}"
    )
    assert judged.ok, judged.explain()
