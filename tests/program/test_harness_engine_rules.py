"""The mock harness keeps the engine's own rules: a URN registered twice fails the evaluation,
whatever config or program it runs, and URNs are the engine's (the whole parent type chain)."""

from __future__ import annotations

import pytest

from tests.support.harness import DuplicateUrnError, evaluate


def test_the_harness_refuses_a_duplicate_urn_like_the_engine() -> None:
    with pytest.raises(DuplicateUrnError, match="Duplicate resource URN"):
        evaluate("lab", False, program="tests/support/programs/duplicate_urn.py")


def test_the_harness_uses_the_engines_qualified_type_chain() -> None:
    """Same-named, same-typed grandchildren under different grandparent types: one mock URN,
    two engine URNs, so no duplicate."""
    recording = evaluate("lab", False, program="tests/support/programs/distinct_urns.py")
    assert recording.error is None, recording.error
    assert len(recording.resources) == 6
