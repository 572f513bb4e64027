"""TC-21's judge (``tests.acceptance.management_drill``) on recorded client samples: a drill
passes only when every phase meets its target, and says which did not."""

from __future__ import annotations

import pytest

from tests.acceptance.management_drill import (
    SINGLE_REPLICA_RECOVERY_SECONDS,
    Phase,
    Sample,
    judge_drill,
    target_for,
)

KAMAJI = Phase("kamaji", 0.0, replicas=0)


def steady(start: float, end: float, fail: tuple[float, float] | None = None) -> list[Sample]:
    """A list and a create every second in ``[start, end)``, failing inside ``fail``."""
    samples = []
    t = start
    while t < end:
        down = fail is not None and fail[0] <= t < fail[1]
        for op in ("list", "create"):
            samples.append(Sample(t, op, not down, "connection refused" if down else ""))
        t += 1.0
    return samples


def test_three_replicas_and_no_failure_pass() -> None:
    phases = [KAMAJI, Phase("control-plane", 60.0, replicas=3)]
    verdict = judge_drill(phases, steady(0, 200), end=200.0)
    assert verdict.ok, verdict.explain()
    assert verdict.facts["phases"]["control-plane"]["recoverySeconds"] == 0.0


def test_one_failed_request_with_three_replicas_fails() -> None:
    phases = [KAMAJI, Phase("control-plane", 60.0, replicas=3)]
    samples = steady(0, 200)
    samples.append(Sample(90.5, "create", False, "EOF"))
    verdict = judge_drill(phases, samples, end=200.0)
    assert not verdict.ok
    assert verdict.problems == [
        "control-plane: 1 of 281 requests failed where 0 may (3 serving replicas; first: "
        "create: EOF)"
    ]


def test_kamaji_serves_no_request_so_none_may_fail_even_in_the_lab() -> None:
    phases = [KAMAJI, Phase("control-plane", 60.0, replicas=1)]
    verdict = judge_drill(phases, steady(0, 200, fail=(10, 12)), end=200.0)
    assert [p.split(":")[0] for p in verdict.problems] == ["kamaji"]


def test_the_labs_single_replica_may_be_down_for_a_bounded_time() -> None:
    phases = [KAMAJI, Phase("control-plane", 60.0, replicas=1)]
    verdict = judge_drill(phases, steady(0, 200, fail=(62, 100)), end=200.0)
    assert verdict.ok, verdict.explain()
    row = verdict.facts["phases"]["control-plane"]
    assert row["recoverySeconds"] == 40.0
    assert row["failed"] == 76


def test_a_slow_or_missing_recovery_fails() -> None:
    phases = [KAMAJI, Phase("control-plane", 60.0, replicas=1)]
    late = 60 + SINGLE_REPLICA_RECOVERY_SECONDS + 10
    slow = judge_drill(phases, steady(0, 400, fail=(62, late)), end=400.0)
    assert "above the 120 s target" in slow.explain()
    never = judge_drill(phases, steady(0, 200, fail=(62, 200)), end=200.0)
    assert "had not recovered when the drill ended" in never.explain()


def test_a_phase_without_requests_proves_nothing() -> None:
    phases = [KAMAJI, Phase("control-plane", 60.0, replicas=3)]
    verdict = judge_drill(phases, steady(0, 50), end=200.0)
    assert verdict.problems == ["control-plane: the client made no request during it"]


@pytest.mark.parametrize(("replicas", "max_failed"), [(0, 0), (1, None), (2, 0), (3, 0)])
def test_targets_follow_the_serving_replicas(replicas: int, max_failed: int | None) -> None:
    assert target_for(Phase("x", 0.0, replicas)).max_failed == max_failed
