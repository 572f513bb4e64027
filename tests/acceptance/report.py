"""Evidence per acceptance test and the end-of-run table / JSON report (pure).

Each live test gets an ``Evidence`` (fixture ``evidence``): ``record(key, value)`` stores what it
saw (card UUIDs and usage, event texts, node and pod lists, bind seconds) and prints it, so a
failed test's captured output shows it too; ``summary(text)`` adds to the one-line evidence shown
in the table. The conftest collects one ``ResultRow`` per test and prints ``format_table`` in
pytest's terminal summary and writes ``report_document`` as JSON.
"""

from __future__ import annotations

import json
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

VERDICT_ORDER = ("failed", "error", "passed", "skipped")


@dataclass
class Evidence:
    """What one test saw."""

    tc_id: str
    facts: dict[str, Any] = field(default_factory=dict)
    lines: list[str] = field(default_factory=list)

    def record(self, key: str, value: Any) -> None:
        """Store a fact (JSON-able) and print it."""
        self.facts[key] = value
        print(f"[{self.tc_id}] {key}: {json.dumps(value, default=str, sort_keys=True)}")

    def summary(self, text: str) -> None:
        """Add a short phrase to the table's evidence column."""
        self.lines.append(text)
        print(f"[{self.tc_id}] {text}")

    @property
    def one_line(self) -> str:
        return "; ".join(self.lines)


@dataclass
class ResultRow:
    """One test in the final table."""

    tc_id: str
    nodeid: str
    verdict: str = "passed"
    seconds: float = 0.0
    summary: str = ""
    detail: str = ""  # skip reason or first line of the failure
    facts: dict[str, Any] = field(default_factory=dict)

    def merge_phase(self, when: str, outcome: str, duration: float, detail: str) -> None:
        """Fold one of setup / call / teardown into the row."""
        self.seconds += duration
        if outcome == "skipped":
            self.verdict = "skipped"
            self.detail = detail
        elif outcome == "failed":
            if when == "call":
                self.verdict = "failed"
            elif self.verdict != "failed":
                self.verdict = "error"
            if not self.detail:
                self.detail = detail

    def as_dict(self) -> dict[str, Any]:
        return {
            "id": self.tc_id,
            "test": self.nodeid,
            "verdict": self.verdict,
            "seconds": round(self.seconds, 2),
            "summary": self.summary,
            "detail": self.detail,
            "evidence": self.facts,
        }


def first_line(text: str, limit: int = 300) -> str:
    """The first non-empty line of a failure or skip text, shortened to ``limit``."""
    for raw in text.splitlines():
        line = raw.strip().removeprefix("Skipped: ")
        if line:
            return line if len(line) <= limit else line[: limit - 1] + "…"
    return ""


def all_skipped(rows: list[ResultRow]) -> bool:
    return bool(rows) and all(row.verdict == "skipped" for row in rows)


def format_table(rows: list[ResultRow]) -> list[str]:
    """``id | verdict | seconds | evidence`` lines, in run order."""
    header = ("id", "verdict", "seconds", "evidence")
    cells = [
        (
            row.tc_id,
            row.verdict,
            f"{row.seconds:.1f}",
            row.summary if row.verdict == "passed" else (row.detail or row.summary),
        )
        for row in rows
    ]
    widths = (
        [max(len(header[i]), *(len(c[i]) for c in cells)) for i in range(3)]
        if cells
        else [len(h) for h in header[:3]]
    )
    lines = [
        f"{header[0]:<{widths[0]}}  {header[1]:<{widths[1]}}  {header[2]:>{widths[2]}}  {header[3]}"
    ]
    for tc_id, verdict, seconds, evidence in cells:
        lines.append(
            f"{tc_id:<{widths[0]}}  {verdict:<{widths[1]}}  {seconds:>{widths[2]}}  {evidence}"
        )
    counts = {v: sum(1 for r in rows if r.verdict == v) for v in VERDICT_ORDER}
    lines.append(
        ", ".join(f"{n} {verdict}" for verdict, n in counts.items() if n)
        + f" in {sum(r.seconds for r in rows):.1f} s"
    )
    return lines


def report_document(
    rows: list[ResultRow], *, stack: str, started: str, finished: str
) -> dict[str, Any]:
    return {
        "stack": stack,
        "started": started,
        "finished": finished,
        "results": [row.as_dict() for row in rows],
    }


def write_report(path: Path, document: dict[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(document, indent=2, default=str, sort_keys=False) + "\n")
