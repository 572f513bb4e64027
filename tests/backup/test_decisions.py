"""The pure decisions of scripts/backup/tenant_backup.py, without etcd or S3."""

from __future__ import annotations

import pytest

from tests.backup.conftest import load_tool

tool = load_tool()


@pytest.mark.parametrize(
    ("keys", "revision", "previous", "words"),
    [
        (100, 50, None, None),
        (100, 50, {"keyCount": 100, "revision": 40}, None),
        (50, 50, {"keyCount": 100, "revision": 40}, None),
        (49, 50, {"keyCount": 100, "revision": 40}, "key count fell from 100 to 49"),
        (1000, 39, {"keyCount": 100, "revision": 40}, "revision went back from 40 to 39"),
        (100, 50, {"revision": 40}, "has no keyCount"),
    ],
)
def test_suspect_backups(
    keys: int, revision: int, previous: dict[str, int] | None, words: str | None
) -> None:
    reason = tool.suspect_reason(keys, revision, previous)
    if words is None:
        assert reason is None
    else:
        assert reason is not None
        assert words in reason
