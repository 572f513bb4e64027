"""Every configuration key says what a change of it does to a running stack (issue 39):
changeable, changeable with care, or fixed at creation (components/config/changes.py), shown in
docs/configuration.md's reference table."""

from __future__ import annotations

from components.config.changes import CHANGES, MARKS
from components.config_reference import markdown_table, reference_rows


def test_every_key_of_the_schema_is_marked() -> None:
    keys = [row[0] for row in reference_rows()]
    missing = [key for key in keys if key not in CHANGES]
    assert not missing, f"mark these in components/config/changes.py: {missing}"
    stale = sorted(set(CHANGES) - set(keys))
    assert not stale, f"no such key any more: {stale}"


def test_each_mark_is_one_of_the_three_with_a_note() -> None:
    for key, (mark, note) in CHANGES.items():
        assert mark in MARKS, key
        assert note.strip(), f"{key}: say what a change does"


def test_the_reference_table_shows_each_keys_mark() -> None:
    table = markdown_table()
    for key, (mark, _note) in CHANGES.items():
        row = next(line for line in table.splitlines() if line.startswith(f"| `{key}` |"))
        assert f"| **{mark}**" in row, key
