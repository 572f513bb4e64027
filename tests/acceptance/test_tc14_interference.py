"""TC-14 (real GPUs): two pods on one card each keep their compute share against a busy
neighbour.

On the GPU pool's card (free when the test starts), under HAMi's default core policy:

* an unrestricted probe (``gpucores: 100``) measures the card's full throughput;
* the first probe (``gpucores`` = ``INTERFERENCE_SHARES[0]``, 70) starts and runs alone for
  ``INTERFERENCE_ALONE_SECONDS``, then the second (30) joins; each runs ``INTERFERENCE_SECONDS``
  (which holds ``SECOND_START_ALLOWANCE`` for the second's start-up, ``interference_phases``) and
  tries to use the whole card, so the second also runs alone at the end;
* their one-second rate windows (the node's clock, both pods on one node) are split into: first
  alone, both, second alone (``gpu_judges.judge_interference``).

Informational under HAMi's default policy (``gpu_plan.INTERFERENCE_SHARES`` says why HAMi-core's
limiter may stay off for both probes): the report gives each probe's fraction of the card together
and alone, the interference (1 - together / alone), whether it fell below its share minus
``COMPUTE_SHARE_TOLERANCE`` and HAMi-core's own limiter state (``LIBCUDA_LOG_LEVEL=3``), never a
share failure; the test fails only when it measured nothing (a probe failed, HAMi-core absent,
the probes on different cards, too few windows). 70 / 30 rather than 50 / 50: an even split is
what the driver's own time-slicing gives two unthrottled processes, so it could not show HAMi at
work.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from tests.acceptance.gpu_judges import ProbeRun, judge_interference, rate_windows
from tests.acceptance.gpu_live import (
    GpuTarget,
    busy_card_problem,
    compute_body,
    probe_namespace,
    result_of,
    run_unrestricted_compute,
    wait_output,
    wait_phase,
)
from tests.acceptance.gpu_plan import (
    INTERFERENCE_ALONE_SECONDS,
    INTERFERENCE_SECONDS,
    INTERFERENCE_SHARES,
    PROBE_SLACK_SECONDS,
    PROBE_START_SECONDS,
    GpuPlan,
    sharing_problem,
    unrestricted_reference_refused,
)
from tests.acceptance.kube import create_pod
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]


def ran_for(seconds: float) -> Callable[[ProbeRun], bool]:
    """The probe has rate windows covering ``seconds``."""

    def check(run: ProbeRun) -> bool:
        windows = rate_windows(run)
        return bool(windows) and windows[-1].t1 - windows[0].t0 >= seconds

    return check


def interference_pod(target: GpuTarget, run_id: str, name: str, share: int) -> dict[str, Any]:
    return compute_body(target, run_id, name, INTERFERENCE_SECONDS, share)


@pytest.mark.tc("TC-14")
def test_tc14_shares_hold_against_a_busy_neighbour(
    live: LiveStack, gpu_plan: GpuPlan, gpu_target: GpuTarget, evidence: Evidence
) -> None:
    refused = unrestricted_reference_refused(gpu_plan)
    if refused is not None:
        pytest.skip(refused)
    cluster = gpu_target.cluster
    evidence.record("target", gpu_target.as_dict())
    for why in (
        sharing_problem(gpu_target.card.slots, 2, "TC-14 (two probes)"),
        busy_card_problem(cluster, gpu_target.node, gpu_target.card.uuid),
    ):
        if why is not None:
            pytest.fail(why, pytrace=False)
    first_share, second_share = INTERFERENCE_SHARES
    problems: list[str] = []
    with probe_namespace(cluster, live.run_id) as namespace:
        unrestricted = run_unrestricted_compute(
            cluster, namespace, gpu_target, live.run_id, "card-unrestricted"
        )
        problems.extend(unrestricted.problems)
        names = ("share-first", "share-second")
        for index, (name, share) in enumerate(zip(names, INTERFERENCE_SHARES, strict=True)):
            create_pod(
                cluster,
                namespace,
                interference_pod(gpu_target, live.run_id, name, share),
            )
            if index == 0:
                alone = wait_output(
                    cluster,
                    namespace,
                    name,
                    ran_for(INTERFERENCE_ALONE_SECONDS),
                    PROBE_START_SECONDS + INTERFERENCE_ALONE_SECONDS,
                )
                if alone is None:
                    problems.append(f"{name} did not run {INTERFERENCE_ALONE_SECONDS:.0f} s alone")
        for name in names:
            ended = wait_phase(
                cluster,
                namespace,
                name,
                ("Succeeded", "Failed"),
                PROBE_START_SECONDS + INTERFERENCE_SECONDS + PROBE_SLACK_SECONDS,
            )
            if ended is None:
                problems.append(f"{name} did not finish")
        first, second = (result_of(cluster, namespace, name) for name in names)
    for result in (first, second):
        if result.pod.phase != "Succeeded":
            problems.append(f"{result.pod.name} ended {result.pod.status_text()}")
    verdict = judge_interference(
        first.run, second.run, unrestricted.run, shares=(first_share, second_share)
    )
    problems.extend(verdict.problems)
    evidence.record("pods", [unrestricted.as_dict(), first.as_dict(), second.as_dict()])
    evidence.record("interference", verdict.facts)
    together = verdict.facts.get("interference", {})
    evidence.summary(
        f"{first_share}/{second_share} on {gpu_target.card.uuid}: "
        + "; ".join(
            f"{label} {row.get('cardFractionTogether')} of the card together "
            f"({row.get('cardFractionAlone')} alone, interference {row.get('interference')})"
            for label, row in together.items()
        )
        + "; informational: "
        + ("; ".join(verdict.facts.get("findings") or []) or "each at or above its share")
    )
    assert not problems, "; ".join(problems)
