"""TC-21's judge: what a tenant's client saw while the management cluster was disrupted (issue
44, point 3). Pure: samples and phases in, a ``Verdict`` out; the live test
(``test_tc21_management_drill.py``) records them.

A client in the tenant lists pods and creates one (a server-side dry run: the whole API path,
admission included, nothing persisted) about once a second for the whole drill. The drill has
phases, each one disruption of the management cluster:

* ``kamaji``: Kamaji's controller pods restarted (lab: deleted; prod: evicted, as a drain
  does). Kamaji reconciles control planes; it serves no tenant request, so **no request may
  fail**, in any environment.
* ``control-plane``: the tenant's control-plane pods restarted (lab: deleted; prod: evicted one
  at a time, each after the last replacement is Ready, as draining the nodes one after another
  does, the disruption budget holding the rest). With two or more replicas **no request may
  fail**; with one (the lab, on purpose: docs/prod.md "Availability") the API is down while its
  only pod restarts and must answer again within ``SINGLE_REPLICA_RECOVERY_SECONDS``.

A phase's recovery time runs from its start to the first answered request after its last failed
one (0 with no failure); a phase whose last sample failed did not recover.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from tests.acceptance.hami_evidence import Verdict

# The lab's single control-plane pod: a new pod's kube-apiserver answering again, its image
# already on the node (Kamaji's Deployment, the readiness probe's first success). Measured figures
# from a live lab replace this estimate once one has run (docs/acceptance.md, TC-21).
SINGLE_REPLICA_RECOVERY_SECONDS = 120.0
# Requests after the last disruption, so a late failure is seen.
TAIL_SECONDS = 20.0


@dataclass(frozen=True)
class Sample:
    """One request of the tenant's client."""

    at: float  # seconds since the drill began
    op: str  # "list" or "create"
    ok: bool
    error: str = ""


@dataclass(frozen=True)
class Phase:
    """One disruption: from ``start`` (seconds since the drill began) until the next phase's
    start, or the end of the run; ``replicas``: of what was disrupted that serves requests (0
    for a part that serves none, like Kamaji)."""

    name: str
    start: float
    replicas: int


@dataclass(frozen=True)
class Target:
    """What a phase may cost: failed requests (None: any) and recovery seconds."""

    max_failed: int | None
    max_recovery_seconds: float


def target_for(phase: Phase) -> Target:
    """No failed request where the disrupted part serves none or where another replica does;
    with a single serving replica, a bounded outage."""
    if phase.replicas != 1:
        return Target(max_failed=0, max_recovery_seconds=0.0)
    return Target(max_failed=None, max_recovery_seconds=SINGLE_REPLICA_RECOVERY_SECONDS)


@dataclass(frozen=True)
class PhaseResult:
    name: str
    requests: int
    failed: int
    recovery_seconds: float | None  # None: its last request failed
    first_errors: tuple[str, ...]


def phase_result(phase: Phase, samples: Sequence[Sample], end: float) -> PhaseResult:
    """The samples of ``[phase.start, end)`` counted and timed."""
    mine = sorted((s for s in samples if phase.start <= s.at < end), key=lambda s: s.at)
    failed = [s for s in mine if not s.ok]
    recovery: float | None = 0.0
    if failed:
        last_failure = failed[-1].at
        after = [s for s in mine if s.ok and s.at > last_failure]
        recovery = after[0].at - phase.start if after else None
    errors = tuple(dict.fromkeys(f"{s.op}: {s.error}" for s in failed))[:3]
    return PhaseResult(phase.name, len(mine), len(failed), recovery, errors)


def judge_drill(phases: Sequence[Phase], samples: Sequence[Sample], end: float) -> Verdict:
    """Each phase against its target; a phase with no request at all proves nothing and fails."""
    verdict = Verdict()
    ordered = sorted(phases, key=lambda p: p.start)
    bounds = [p.start for p in ordered[1:]] + [end]
    rows: dict[str, dict[str, object]] = {}
    for phase, until in zip(ordered, bounds, strict=True):
        result = phase_result(phase, samples, until)
        target = target_for(phase)
        rows[phase.name] = {
            "replicas": phase.replicas,
            "requests": result.requests,
            "failed": result.failed,
            "recoverySeconds": result.recovery_seconds,
            "target": {
                "maxFailed": target.max_failed,
                "maxRecoverySeconds": target.max_recovery_seconds,
            },
            "errors": list(result.first_errors),
        }
        if result.requests == 0:
            verdict.problems.append(f"{phase.name}: the client made no request during it")
            continue
        if target.max_failed is not None and result.failed > target.max_failed:
            verdict.problems.append(
                f"{phase.name}: {result.failed} of {result.requests} requests failed where "
                f"{target.max_failed} may ({phase.replicas} serving replicas; first: "
                f"{'; '.join(result.first_errors)})"
            )
        elif result.recovery_seconds is None:
            verdict.problems.append(
                f"{phase.name}: the tenant's API had not recovered when the drill ended "
                f"({result.failed} of {result.requests} requests failed)"
            )
        elif result.recovery_seconds > target.max_recovery_seconds and result.failed:
            verdict.problems.append(
                f"{phase.name}: recovered after {result.recovery_seconds:.0f} s, above the "
                f"{target.max_recovery_seconds:.0f} s target"
            )
    verdict.facts = {"phases": rows, "requests": len(samples), "seconds": round(end, 1)}
    return verdict
