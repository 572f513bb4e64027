"""``python -m benchmarks.measured EVENTS``: what a real ``pulumi up`` of the lab took, per
resource, next to the bring-up model's estimate (``benchmarks.bringup``), so the figures in
docs/benchmark.md can be checked against a measurement instead of trusted.

EVENTS is the engine's event log: ``pulumi up --event-log FILE`` (a debug flag, listed only with
``PULUMI_DEBUG_COMMANDS=true``: pulumi/pulumi v3.274.0 pkg/cmd/pulumi/operations/up.go:1023-1028)
writes one JSON ``apitype.EngineEvent`` per line (pkg/backend/display/display.go:264-282,
``json.Encoder.Encode``), each with a Unix ``timestamp`` in seconds
(sdk/go/common/apitype/events.go:355-365). A resource's step starts at its ``resourcePreEvent``
(emitted when the step runs, after what it depends on) and ends at its ``resOutputsEvent``
(or ``resOpFailedEvent``); both carry ``metadata.urn``, ``.type`` and ``.op``
(events.go:295-316); a preview's events are marked ``planning`` and skipped. The whole run is
the first event to the last. Timestamps are whole seconds, so a step is measured to +-1 s.

``make lab UP_EVENT_LOG=reports/lab-up-events.jsonl`` records the log (the nightly lab workflow
does, and uploads it with the comparison ``make bringup-compare`` writes). Pure, except ``main``.
"""

from __future__ import annotations

import argparse
import json
import sys
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from benchmarks import bringup, graph

DEFAULT_SCENARIO = "caches, first run"  # a fresh CI runner: cold host, cold caches
TOP = 15  # rows printed: the largest differences


class EventLogError(ValueError):
    """The event log cannot be read as the engine's: one line saying why."""


@dataclass(frozen=True)
class Step:
    """One resource's step as the engine ran it."""

    urn: str
    type: str
    op: str
    started: int
    finished: int | None  # None: no outputs or failure event (the run was cut short)
    failed: bool = False

    @property
    def seconds(self) -> float | None:
        return None if self.finished is None else float(self.finished - self.started)


@dataclass(frozen=True)
class Measured:
    steps: Mapping[str, Step]  # by URN
    first: int
    last: int

    @property
    def wall_seconds(self) -> float:
        return float(self.last - self.first)


def read_events(lines: Iterable[str]) -> Measured:
    """The steps of an event log's lines; EventLogError when there are none or a line is not
    the engine's JSON."""
    started: dict[str, tuple[str, str, int]] = {}
    ended: dict[str, tuple[int, bool]] = {}
    stamps: list[int] = []
    for number, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            event = json.loads(line)
            stamp = int(event["timestamp"])
        except (ValueError, KeyError, TypeError):
            raise EventLogError(
                f"line {number} is not an engine event (JSON with a timestamp): record the log "
                "with `pulumi up --event-log FILE` (PULUMI_DEBUG_COMMANDS=true)"
            ) from None
        stamps.append(stamp)
        for key, failed in (
            ("resourcePreEvent", None),
            ("resOutputsEvent", False),
            ("resOpFailedEvent", True),
        ):
            body = event.get(key)
            if not isinstance(body, Mapping) or body.get("planning"):
                continue  # a preview's step (planning: true) took no time
            meta = body.get("metadata") or {}
            urn = str(meta.get("urn", ""))
            if not urn:
                continue
            if failed is None:
                started.setdefault(urn, (str(meta.get("type", "")), str(meta.get("op", "")), stamp))
            else:
                ended[urn] = (stamp, failed)
    if not started:
        raise EventLogError(
            "the event log holds no resource steps: was it written by `pulumi up --event-log`?"
        )
    steps = {
        urn: Step(
            urn=urn,
            type=kind,
            op=op,
            started=begin,
            finished=ended[urn][0] if urn in ended else None,
            failed=ended.get(urn, (0, False))[1],
        )
        for urn, (kind, op, begin) in started.items()
    }
    return Measured(steps=steps, first=min(stamps), last=max(stamps))


@dataclass(frozen=True)
class Row:
    urn: str
    type: str
    op: str
    measured: float | None
    estimated: float | None  # None: the model has no such resource

    @property
    def difference(self) -> float:
        return (self.measured or 0.0) - (self.estimated or 0.0)


@dataclass(frozen=True)
class Comparison:
    scenario: str
    wall_seconds: float
    critical_path_seconds: float
    rows: tuple[Row, ...]
    unmeasured: tuple[str, ...]  # resources the model has and the run did not step

    @property
    def ratio(self) -> float:
        return self.wall_seconds / self.critical_path_seconds if self.critical_path_seconds else 0.0


def compare(
    measured: Measured, nodes: Sequence[graph.Node], scenario: str = DEFAULT_SCENARIO
) -> Comparison:
    """Each measured step next to ``scenario``'s estimate for the same URN, and the run's wall
    time next to the scenario's critical path."""
    chosen = next((s for s in bringup.SCENARIOS if s.name == scenario), None)
    if chosen is None:
        names = ", ".join(repr(s.name) for s in bringup.SCENARIOS)
        raise EventLogError(f"unknown scenario {scenario!r}: pick one of {names}")
    weights = bringup.weights(nodes, chosen)
    run = next(r for r in bringup.runs(nodes) if r.scenario == chosen)
    custom = {n.urn for n in nodes if n.custom}
    rows = tuple(
        Row(step.urn, step.type, step.op, step.seconds, weights.get(step.urn))
        for step in measured.steps.values()
        if step.urn in custom or step.urn not in weights
    )
    unmeasured = tuple(sorted(custom - set(measured.steps)))
    return Comparison(chosen.name, measured.wall_seconds, run.path.total, rows, unmeasured)


def to_json(comparison: Comparison) -> dict[str, Any]:
    return {
        "scenario": comparison.scenario,
        "wall_seconds": comparison.wall_seconds,
        "critical_path_seconds": comparison.critical_path_seconds,
        "wall_over_estimate": round(comparison.ratio, 3),
        "resources": [
            {
                "urn": row.urn,
                "type": row.type,
                "op": row.op,
                "measured_seconds": row.measured,
                "estimated_seconds": row.estimated,
            }
            for row in sorted(comparison.rows, key=lambda r: r.urn)
        ],
        "unmeasured": list(comparison.unmeasured),
    }


def render(comparison: Comparison, top: int = TOP) -> list[str]:
    lines = [
        f"make lab measured {comparison.wall_seconds:g} s; the model's {comparison.scenario!r} "
        f"critical path is {comparison.critical_path_seconds:g} s "
        f"({comparison.ratio:.2f} x the estimate)",
        f"the {top} largest differences (measured - estimated, seconds):",
    ]
    ordered = sorted(comparison.rows, key=lambda r: abs(r.difference), reverse=True)[:top]
    for row in ordered:
        measured = "unfinished" if row.measured is None else f"{row.measured:g}"
        estimated = "not in the model" if row.estimated is None else f"{row.estimated:g}"
        name = row.urn.rsplit("::", 1)[-1]
        lines.append(
            f"  {row.difference:+7.0f}  {measured:>10} vs {estimated:<16} {row.type} {name}"
        )
    if comparison.unmeasured:
        lines.append(f"{len(comparison.unmeasured)} modelled resources had no step in the log")
    return lines


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks.measured",
        description="A real pulumi up's per-resource durations next to the bring-up model's.",
    )
    parser.add_argument("events", type=Path, help="pulumi up --event-log FILE")
    parser.add_argument("--scenario", default=DEFAULT_SCENARIO, help="the model's scenario")
    parser.add_argument("--json", type=Path, help="where to write the comparison (JSON)")
    args = parser.parse_args(argv)
    from tests.support.harness import evaluate

    try:
        measured = read_events(args.events.read_text().splitlines())
    except OSError as exc:
        print(f"bringup-compare: cannot read {args.events}: {exc.strerror}", file=sys.stderr)
        return 1
    except EventLogError as exc:
        print(f"bringup-compare: {args.events}: {exc}", file=sys.stderr)
        return 1
    recording = evaluate("lab", False)
    if recording.error is not None:
        print(
            f"bringup-compare: the lab stack failed to evaluate: {recording.error}", file=sys.stderr
        )
        return 1
    try:
        comparison = compare(measured, graph.nodes_from(recording.resources), args.scenario)
    except EventLogError as exc:
        print(f"bringup-compare: {exc}", file=sys.stderr)
        return 1
    print("\n".join(render(comparison)))
    if args.json is not None:
        args.json.parent.mkdir(parents=True, exist_ok=True)
        args.json.write_text(json.dumps(to_json(comparison), indent=2) + "\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
