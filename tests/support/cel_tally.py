"""The tally of CEL rules the rendered-chart suite meets (``tests.support.crd_schemas``), in a
module of its own with no heavy imports: ``tests/conftest.py`` loads it in every session, also
in child pytest runs that have no ``policies`` on their path."""

from __future__ import annotations

from collections import Counter
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

import pytest


@dataclass
class CelTally:
    """What happened to the CEL rules met while validating (summed over a test session)."""

    evaluated: int = 0
    transition_rules: int = 0
    unsupported: Counter[str] = field(default_factory=Counter)

    def add(self, other: CelTally) -> None:
        self.evaluated += other.evaluated
        self.transition_rules += other.transition_rules
        self.unsupported.update(other.unsupported)

    @property
    def skipped(self) -> int:
        return self.transition_rules + sum(self.unsupported.values())

    def as_plain(self) -> dict[str, Any]:
        """What an xdist worker hands its controller (plain data: execnet sends it)."""
        return {
            "evaluated": self.evaluated,
            "transition_rules": self.transition_rules,
            "unsupported": dict(self.unsupported),
        }

    @classmethod
    def from_plain(cls, plain: Mapping[str, Any]) -> CelTally:
        return cls(plain["evaluated"], plain["transition_rules"], Counter(plain["unsupported"]))

    def summary(self) -> str:
        parts = [f"{self.evaluated} evaluated", f"{self.skipped} skipped"]
        detail = [f"{self.transition_rules} transition rules (oldSelf, update only)"]
        detail += [f"{n} unsupported: {reason}" for reason, n in sorted(self.unsupported.items())]
        return f"CEL rules: {', '.join(parts)} ({'; '.join(detail)})"


# The session's tally: tests/render/conftest.py's cel_tally fixture fills it, tests/conftest.py
# sums the xdist workers' and prints it.
CEL_TALLY = pytest.StashKey[CelTally]()
