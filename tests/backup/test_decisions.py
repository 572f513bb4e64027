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


@pytest.mark.parametrize(
    ("taken", "running", "refused", "warned"),
    [
        ("v1.33.4", "v1.33.4", False, False),
        ("v1.33.4", "", False, False),
        ("v1.33.4", "v1.33.5", False, True),
        ("v1.32.9", "v1.33.4", False, True),
        ("v1.35.0", "v1.33.4", True, False),
        ("v1.34.0", "v1.33.9", True, False),
        ("v2.0.0", "v1.35.0", True, False),
        ("not-a-version", "v1.33.4", False, True),
    ],
)
def test_a_backup_of_a_newer_minor_is_refused(
    taken: str, running: str, refused: bool, warned: bool
) -> None:
    refusal, warning = tool.version_refusal(taken, running)
    assert (refusal is not None) is refused
    assert (warning is not None) is warned


NAME = "p/tenant_a-20260102T030405Z-rev42.json.gz"


def _manifest(name: str = NAME, time: str = "2026-01-02T03:04:05Z", rev: int = 42) -> dict:
    return {"archive": {"name": name}, "metadata": {"time": time, "revision": rev}}


@pytest.mark.parametrize(
    ("manifest", "words"),
    [
        (_manifest(), None),
        (_manifest(name="p/tenant_a-20250101T000000Z-rev7.json.gz"), "was written for"),
        (_manifest(time="2025-01-01T00:00:00Z"), "its manifest says time"),
        (_manifest(rev=41), "revision 41"),
        (_manifest(time="yesterday"), "is not a time"),
    ],
)
def test_the_name_must_be_the_manifests_own(manifest: dict, words: str | None) -> None:
    reason = tool.name_mismatch(NAME, manifest, "p/", "tenant_a")
    if words is None:
        assert reason is None
    else:
        assert reason is not None
        assert words in reason
