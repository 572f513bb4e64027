"""TC-06: memory limit enforced - HAMi refuses a pod asking more memory than the card has left.

On the sharing scenario's node and card (the ``plan`` and ``target`` fixtures in conftest.py,
shared with TC-04/05, whose shares are released before this runs), two cases:

* single pod: one pod asking ``gpumem: 90000`` (or one MiB more than a larger card) stays
  Pending, and a Warning event names ``CardInsufficientMemory`` and no other HAMi reason;
* accumulation: a holder takes half the card's registered memory and is bound; a second pod asks
  one MiB more than the rest (``stack.accumulation_sizes``: it fits the card alone) and stays
  Pending with ``CardInsufficientMemory`` and no other HAMi reason - HAMi counts what is already
  allocated (``hami_evidence.judge_accumulation``). Both pods ask 10 % of the card, so cores and
  slots never run out first.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.hami_evidence import judge_accumulation, judge_rejection
from tests.acceptance.kube import (
    BIND_TIMEOUT,
    create_pod,
    is_bound,
    placement,
    poll_until,
    read_pod,
    scheduling_message,
    scratch_namespace,
    wait_for_refusal,
)
from tests.acceptance.live import LiveStack, Target
from tests.acceptance.report import Evidence
from tests.acceptance.stack import SharingPlan, accumulation_sizes
from tests.acceptance.workloads import gpu_limits, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]


def oversized_pod(
    plan: SharingPlan, node_selector: dict[str, str] | None, run_id: str, name: str
) -> dict[str, Any]:
    """More memory than the card has (no cores: HAMi's webhook makes it exclusive, 100)."""
    return pod_body(
        name,
        run_id,
        limits=gpu_limits(1, memory_mib=plan.oversized_memory_mib),
        node_selector=node_selector,
    )


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
            oversized_pod(plan, target.node_selector, live.run_id, name),
        )
        pod, events = wait_for_refusal(cluster, namespace, name, "CardInsufficientMemory")
        judged = judge_rejection(placement(pod), events, "CardInsufficientMemory", exclusive=True)
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


ACCUMULATION_CORES = 10


def accumulation_pod(
    memory_mib: int, node_selector: dict[str, str] | None, run_id: str, name: str
) -> dict[str, Any]:
    return pod_body(
        name,
        run_id,
        limits=gpu_limits(1, memory_mib=memory_mib, cores=ACCUMULATION_CORES),
        node_selector=node_selector,
    )


@pytest.mark.tc("TC-06")
def test_memory_limit_counts_what_is_already_allocated(
    live: LiveStack, plan: SharingPlan, target: Target, evidence: Evidence
) -> None:
    cluster = target.cluster
    sizes = accumulation_sizes(target.card.memory_mib)  # the card as the node registered it
    evidence.record("sizes", sizes.as_dict())
    with scratch_namespace(cluster, live.run_id) as namespace:
        create_pod(
            cluster,
            namespace,
            accumulation_pod(sizes.holder_mib, target.node_selector, live.run_id, "mem-holder"),
        )

        def allocated() -> Any:
            pod = read_pod(cluster, namespace, "mem-holder")
            return pod if is_bound(pod) and placement(pod).allocated else None

        holder_pod = poll_until(allocated, timeout=BIND_TIMEOUT) or read_pod(
            cluster, namespace, "mem-holder"
        )
        create_pod(
            cluster,
            namespace,
            accumulation_pod(sizes.second_mib, target.node_selector, live.run_id, "mem-second"),
        )
        pod, events = wait_for_refusal(cluster, namespace, "mem-second", "CardInsufficientMemory")
        second = judge_rejection(placement(pod), events, "CardInsufficientMemory", exclusive=True)
        judged = judge_accumulation(
            placement(holder_pod),
            second,
            card_uuid=target.card.uuid,
            card_mib=sizes.card_mib,
            holder_mib=sizes.holder_mib,
            second_mib=sizes.second_mib,
        )
        evidence.record("accumulation", judged.facts)
    matching = second.facts.get("matching") or ["no matching event"]
    evidence.summary(
        f"{sizes.holder_mib} MiB held, {sizes.second_mib} MiB (fits alone in "
        f"{sizes.card_mib}) {placement(pod).phase or '?'}: {matching[0]}"
    )
    assert judged.ok, judged.explain()
