"""TC-13 (real GPUs): a card's memory is reclaimed when the pod holding it ends.

Two rounds on the GPU pool's card (free when the test starts), each in its own namespace:

* a "hog" asks ``HOG_FRACTION`` of the card's memory and really holds it (the probe's ``hold``
  mode allocates all of it but its context's headroom and touches it with a kernel);
* a "waiter" asks the rest plus ``WAITER_EXCESS_MIB``: it must stay Pending with HAMi's
  ``CardInsufficientMemory`` (it does not fit while the hog is counted);
* the hog ends once the refusal has been seen, never on a timer - round ``exit``: the suite
  writes ``gpu_workloads.RELEASE_ANNOTATION`` on it, the probe reads it through a downward-API
  volume, frees its memory and exits by itself (pod Succeeded, a ``released`` line in its log);
  round ``delete``: the pod is deleted while holding;
* the waiter must bind within ``RECLAIM_BIND_SECONDS`` of that, and HAMi must then count only
  the baseline plus the waiter on the card - in the pods' allocation annotations and in its
  scheduler's per-card metrics (``hami_gpu_memory_allocated_bytes``, ``hami_gpu_shared_count``)
  - and the baseline again once the waiter is deleted: no allocation leaked.

Times are the suite's own clock (hog end as the suite saw it, waiter bound as the suite saw it).
"""

from __future__ import annotations

import time
from collections.abc import Callable
from typing import Any

import pytest

from tests.acceptance.gpu_judges import ProbeRun, ReclaimRound, judge_reclamation
from tests.acceptance.gpu_live import (
    GpuTarget,
    busy_card_problem,
    load_view,
    output,
    probe_body,
    probe_namespace,
    settled_view,
    wait_bound,
    wait_output,
    wait_phase,
)
from tests.acceptance.gpu_plan import (
    HOG_RELEASE_SECONDS,
    HOLD_INTERVAL_SECONDS,
    PROBE_START_SECONDS,
    RECLAIM_BIND_SECONDS,
    RECLAIM_CORES,
    GpuPlan,
    ReclaimSizes,
    reclaim_sizes,
    sharing_problem,
)
from tests.acceptance.gpu_workloads import hold_args, releasable, release_patch
from tests.acceptance.hami_evidence import judge_rejection
from tests.acceptance.kube import (
    CLEANUP_TIMEOUT,
    REQUEST_TIMEOUT,
    create_pod,
    delete_pods,
    placement,
    poll_until,
    read_pod,
    read_pod_or_none,
    retrying,
    wait_for_refusal,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]

WAITER_HOLD_MIB = 256
ROUNDS = ("exit", "delete")


def held(mib: int) -> Callable[[ProbeRun], bool]:
    """The probe reports holding at least ``mib`` MiB."""
    return lambda run: any(int(h.get("heldMiB", 0)) >= mib for h in run.of("hold"))


def end_by_deletion(target: GpuTarget, namespace: str, name: str) -> str:
    """Delete the pod with its grace period (the kubelet stops the process before the pod goes,
    so HAMi frees the share only once the memory is really released) and wait until it is gone:
    "deleted", or the phase it is still in."""
    cluster = target.cluster
    cluster.core.delete_namespaced_pod(
        name, namespace, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
    )

    def gone() -> bool | None:
        return True if read_pod_or_none(cluster, namespace, name) is None else None

    if poll_until(gone, timeout=CLEANUP_TIMEOUT) is not None:
        return "deleted"
    left = read_pod_or_none(cluster, namespace, name)
    return f"still present ({placement(left).phase if left is not None else 'gone'})"


def hog_pod(target: GpuTarget, run_id: str, how: str, sizes: ReclaimSizes) -> dict[str, Any]:
    """The share that holds the card's memory; in the exit round it reads its own annotations
    to know when to exit."""
    exiting = how == "exit"
    body = probe_body(
        target,
        run_id,
        f"hog-{how}",
        hold_args(sizes.hog_hold_mib, 0, HOLD_INTERVAL_SECONDS, releasable=exiting),
        memory_mib=sizes.hog_mib,
        cores=RECLAIM_CORES,
    )
    return releasable(body) if exiting else body


def waiter_pod(target: GpuTarget, run_id: str, how: str, sizes: ReclaimSizes) -> dict[str, Any]:
    """The share that fits only once the hog's memory is reclaimed."""
    return probe_body(
        target,
        run_id,
        f"waiter-{how}",
        hold_args(WAITER_HOLD_MIB, 0, HOLD_INTERVAL_SECONDS),
        memory_mib=sizes.waiter_mib,
        cores=RECLAIM_CORES,
    )


def reclaim_round(
    live: LiveStack, target: GpuTarget, namespace: str, how: str, sizes: ReclaimSizes
) -> ReclaimRound:
    cluster, node, uuid = target.cluster, target.node, target.card.uuid
    baseline, _ = load_view(cluster, node, uuid)
    hog, waiter = f"hog-{how}", f"waiter-{how}"
    exiting = how == "exit"
    create_pod(cluster, namespace, hog_pod(target, live.run_id, how, sizes))
    holding = wait_output(cluster, namespace, hog, held(sizes.hog_hold_mib), PROBE_START_SECONDS)
    hog_run = holding if holding is not None else output(cluster, namespace, hog)
    base = baseline.annotations
    with_hog = settled_view(cluster, node, uuid, base.plus(sizes.hog_mib, RECLAIM_CORES))
    create_pod(
        cluster,
        namespace,
        waiter_pod(target, live.run_id, how, sizes),
    )
    pod, events = wait_for_refusal(cluster, namespace, waiter, "CardInsufficientMemory")
    refusal = judge_rejection(placement(pod), events, "CardInsufficientMemory", exclusive=True)
    if exiting:
        # Only now, with the refusal seen, is the hog told to end (no timer to race the waits).
        retrying(
            lambda: cluster.core.patch_namespaced_pod(
                hog,
                namespace,
                release_patch(f"after-refusal-{int(time.time())}"),
                _request_timeout=REQUEST_TIMEOUT,
            )
        )
        ended = wait_phase(cluster, namespace, hog, ("Succeeded", "Failed"), HOG_RELEASE_SECONDS)
        end_mark = time.monotonic()
        hog_end = placement(ended if ended is not None else read_pod(cluster, namespace, hog)).phase
        hog_run = output(cluster, namespace, hog)
    else:
        hog_run = output(cluster, namespace, hog)
        end_mark = time.monotonic()
        hog_end = end_by_deletion(target, namespace, hog)
    bound = wait_bound(cluster, namespace, waiter, RECLAIM_BIND_SECONDS)
    bind_seconds = time.monotonic() - end_mark if bound is not None else None
    with_waiter = after = None
    if bound is not None:
        wait_phase(cluster, namespace, waiter, ("Running",), PROBE_START_SECONDS)
        with_waiter = settled_view(cluster, node, uuid, base.plus(sizes.waiter_mib, RECLAIM_CORES))
    left = delete_pods(cluster, namespace, [waiter, hog], CLEANUP_TIMEOUT)
    if not left:
        after = settled_view(cluster, node, uuid, base)
    return ReclaimRound(
        how=how,
        hog=hog,
        hog_share=(sizes.hog_mib, RECLAIM_CORES),
        waiter=waiter,
        waiter_share=(sizes.waiter_mib, RECLAIM_CORES),
        baseline=baseline,
        with_hog=with_hog,
        waiter_refusal=refusal,
        hog_run=hog_run,
        hog_hold_mib=sizes.hog_hold_mib,
        hog_end=hog_end,
        bind_seconds=bind_seconds,
        with_waiter=with_waiter,
        after=after,
    )


@pytest.mark.tc("TC-13")
def test_tc13_memory_reclaimed_after_exit_and_deletion(
    live: LiveStack, gpu_plan: GpuPlan, gpu_target: GpuTarget, evidence: Evidence
) -> None:
    cluster = gpu_target.cluster
    evidence.record("target", gpu_target.as_dict())
    cannot = sharing_problem(gpu_target.card.slots, 2, "TC-13 (hog + waiter)")
    busy = busy_card_problem(cluster, gpu_target.node, gpu_target.card.uuid)
    for why in (cannot, busy):
        if why is not None:
            pytest.fail(why, pytrace=False)
    sizes = reclaim_sizes(gpu_target.card.memory_mib)
    evidence.record("sizes", sizes.as_dict())
    problems: list[str] = []
    rounds = []
    for how in ROUNDS:
        with probe_namespace(cluster, live.run_id) as namespace:
            round_ = reclaim_round(live, gpu_target, namespace, how, sizes)
        verdict = judge_reclamation(round_, bound_seconds=RECLAIM_BIND_SECONDS)
        problems.extend(verdict.problems)
        rounds.append(verdict.facts)
        seconds = round_.bind_seconds
        evidence.summary(
            f"{how}: waiter ({sizes.waiter_mib} MiB) bound "
            + (f"{seconds:.1f} s after the hog ({sizes.hog_mib} MiB) ended" if seconds else "never")
            + f"; after: {round_.after.annotations.as_dict() if round_.after else 'unseen'}"
        )
    evidence.record("rounds", rounds)
    assert not problems, "; ".join(problems)
