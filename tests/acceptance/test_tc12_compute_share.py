"""TC-12 (real GPUs): HAMi-core holds a pod back to a compute share.

On the GPU pool's card (free when the test starts), the probe runs one fixed kernel in batches
for ``COMPUTE_SECONDS``, twice, one run after the other on the same card: unrestricted
(``gpucores: 100``, which HAMi-core's limiter never throttles) and limited
(``gpucores: COMPUTE_SHARE_CORES``, 30). Judged by direction until a real card calibrates the
limiter (``gpu_plan.COMPUTE_DIRECTION_MARGIN`` says why): passes when the limited run's steady
throughput (kernels per second after ``WARMUP_SECONDS``) is clearly below the unrestricted run's,
at most 1 - the margin of it; the ratio is reported next to the share asked, and a probe that
was not held back names the cause from HAMi-core's own log lines (both probes run with
``LIBCUDA_LOG_LEVEL=3``: ``SET_TASK_PID FAILED``, ``util_switch``, the watcher's ``userutil``).

The limited probe runs with ``GPU_CORE_UTILIZATION_POLICY=force``: under HAMi's default policy a
pod alone on its card is not throttled at all (the vGPU monitor switches its limiter off while no
other container of its priority is busy on the card; see ``gpu_plan.CORE_POLICY_ENV``), which is
what TC-14 reports on.

On cards of ``gpu_plan.KNOWN_UNTHROTTLED_SMS`` SMs or more, where HAMi-core's limiter is known not
to throttle (HAMi-core #274, #314; the fix #317 was still open when HAMi v2.10.0 took its
HAMi-core), a probe that was not held back although HAMi-core loaded and its limiter ran is
reported as an expected failure (xfail) with the ratio, not failed.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.gpu_judges import judge_compute_share
from tests.acceptance.gpu_live import (
    GpuTarget,
    busy_card_problem,
    compute_body,
    probe_namespace,
    run_probe,
    run_unrestricted_compute,
)
from tests.acceptance.gpu_plan import (
    COMPUTE_SECONDS,
    COMPUTE_SHARE_CORES,
    FORCE_CORE_POLICY,
    GpuPlan,
    unrestricted_reference_refused,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(1200)]


def limited_compute_pod(target: GpuTarget, run_id: str) -> dict[str, Any]:
    """The compute probe on ``COMPUTE_SHARE_CORES`` of the card, HAMi-core's policy forced."""
    return compute_body(
        target,
        run_id,
        "compute-limited",
        COMPUTE_SECONDS,
        COMPUTE_SHARE_CORES,
        policy=FORCE_CORE_POLICY,
    )


@pytest.mark.tc("TC-12")
def test_tc12_compute_share_holds(
    live: LiveStack, gpu_plan: GpuPlan, gpu_target: GpuTarget, evidence: Evidence
) -> None:
    refused = unrestricted_reference_refused(gpu_plan)
    if refused is not None:
        pytest.skip(refused)
    cluster = gpu_target.cluster
    evidence.record("target", gpu_target.as_dict())
    busy = busy_card_problem(cluster, gpu_target.node, gpu_target.card.uuid)
    if busy is not None:
        pytest.fail(busy, pytrace=False)
    with probe_namespace(cluster, live.run_id) as namespace:
        unrestricted = run_unrestricted_compute(
            cluster, namespace, gpu_target, live.run_id, "compute-unrestricted"
        )
        limited = run_probe(
            cluster,
            namespace,
            limited_compute_pod(gpu_target, live.run_id),
            COMPUTE_SECONDS,
        )
    verdict = judge_compute_share(limited.run, unrestricted.run, cores=COMPUTE_SHARE_CORES)
    problems = unrestricted.problems + limited.problems + verdict.problems
    evidence.record("pods", [unrestricted.as_dict(), limited.as_dict()])
    evidence.record("compute", verdict.facts)
    facts = verdict.facts
    evidence.summary(
        f"gpucores {COMPUTE_SHARE_CORES} ({FORCE_CORE_POLICY}) vs 100 on {gpu_target.card.uuid}: "
        f"{facts.get('limitedKernelsPerSecond')} / {facts.get('unrestrictedKernelsPerSecond')} "
        f"kernels/s = ratio {facts.get('ratio')} (share asked {COMPUTE_SHARE_CORES / 100:.2f}; "
        f"judged: at most {facts.get('ratioAtMost')}); {facts.get('hamiCoreCause')}"
    )
    assert not problems, "; ".join(problems)
    if "knownUpstreamLimit" in facts:
        # Reported, not failed: the pinned HAMi-core's known defect on large cards
        # (gpu_plan.KNOWN_UNTHROTTLED_SMS); the report keeps the measured ratio.
        pytest.xfail(str(facts["knownUpstreamLimit"]))
