"""TC-06: memory limit enforced - HAMi refuses a pod asking more memory than the card has.

On the sharing scenario's node and card (the ``plan`` and ``target`` fixtures in conftest.py,
shared with TC-04/05, whose shares are released before this runs): one pod asking
``gpumem: 90000`` (or one MiB more than a larger card) stays Pending, and a Warning event names
``CardInsufficientMemory`` and no other HAMi reason.
"""

from __future__ import annotations

import pytest

from tests.acceptance.hami_evidence import judge_rejection
from tests.acceptance.kube import (
    create_pod,
    placement,
    scheduling_message,
    scratch_namespace,
    wait_for_refusal,
)
from tests.acceptance.live import LiveStack, Target
from tests.acceptance.report import Evidence
from tests.acceptance.stack import SharingPlan
from tests.acceptance.workloads import gpu_limits, pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]


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
