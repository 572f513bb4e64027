"""``benchmarks.measured``: a real ``pulumi up``'s event log read per resource and set beside the
bring-up model, on an event log shaped as the engine writes it (pulumi/pulumi v3.274.0
sdk/go/common/apitype/events.go: one EngineEvent per line, Unix seconds)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from benchmarks import bringup, graph, measured
from tests.support.harness import shipped


def _event(
    stamp: int, kind: str, urn: str, type_: str = "t", op: str = "create", **extra: object
) -> str:
    body = {"metadata": {"urn": urn, "type": type_, "op": op}, **extra}
    return json.dumps({"sequence": stamp, "timestamp": stamp, kind: body})


def test_a_step_lasts_from_its_pre_event_to_its_outputs() -> None:
    lines = [
        json.dumps({"sequence": 0, "timestamp": 100, "preludeEvent": {"config": {}}}),
        _event(101, "resourcePreEvent", "urn:a", planning=True),  # a preview's: ignored
        _event(103, "resourcePreEvent", "urn:a"),
        _event(104, "resourcePreEvent", "urn:b"),
        _event(113, "resOutputsEvent", "urn:a"),
        _event(130, "resOpFailedEvent", "urn:b"),
        _event(131, "resourcePreEvent", "urn:c"),
        json.dumps({"sequence": 9, "timestamp": 140, "summaryEvent": {}}),
    ]
    run = measured.read_events(lines)
    assert run.wall_seconds == 40
    assert run.steps["urn:a"].seconds == 10
    assert run.steps["urn:b"].failed
    assert run.steps["urn:b"].seconds == 26
    assert run.steps["urn:c"].seconds is None  # cut short: no end event


@pytest.mark.parametrize(
    ("lines", "says"),
    [
        (["not json"], "line 1 is not an engine event"),
        ([json.dumps({"summaryEvent": {}})], "line 1 is not an engine event"),
        ([json.dumps({"timestamp": 1, "summaryEvent": {}})], "no resource steps"),
    ],
)
def test_a_log_that_is_not_the_engines_is_one_line(lines: list[str], says: str) -> None:
    with pytest.raises(measured.EventLogError, match=says):
        measured.read_events(lines)


def test_the_lab_compared_with_its_model(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    """Every modelled resource of the lab, each measured at twice its estimate: the comparison
    pairs them by URN and the command prints and writes it."""
    recording = shipped("lab")
    assert recording.error is None, recording.error
    nodes = graph.nodes_from(recording.resources)
    scenario = next(s for s in bringup.SCENARIOS if s.name == measured.DEFAULT_SCENARIO)
    weights = bringup.weights(nodes, scenario)
    lines, clock = [], 1000
    custom = [n for n in nodes if n.custom]
    for node in custom:
        lines.append(_event(clock, "resourcePreEvent", node.urn, node.type))
        clock += int(2 * weights[node.urn])
        lines.append(_event(clock, "resOutputsEvent", node.urn, node.type))
    comparison = measured.compare(measured.read_events(lines), nodes)
    assert comparison.unmeasured == ()
    assert len(comparison.rows) == len(custom)
    assert all(row.measured == pytest.approx(2 * row.estimated, abs=1) for row in comparison.rows)
    assert comparison.critical_path_seconds > 0

    log = tmp_path / "events.jsonl"
    log.write_text("\n".join(lines) + "\n")
    out = tmp_path / "compare.json"
    assert measured.main([str(log), "--json", str(out)]) == 0
    printed = capsys.readouterr().out
    assert printed.startswith("make lab measured ")
    written = json.loads(out.read_text())
    assert written["scenario"] == measured.DEFAULT_SCENARIO
    assert len(written["resources"]) == len(custom)


def test_an_unknown_scenario_is_one_line() -> None:
    run = measured.read_events([_event(1, "resourcePreEvent", "urn:a")])
    with pytest.raises(measured.EventLogError, match="pick one of"):
        measured.compare(run, [], "tomorrow")
