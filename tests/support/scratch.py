"""The test session's own temporary directory (issue 41 point 5).

``tests/conftest.py`` points ``TMPDIR`` at a directory made for the session, so that every
``tempfile`` call of the tests, of the support code and of the processes they start (which
inherit ``TMPDIR``) lands there and nowhere else; at the end of the session whatever is left in
it, other than pytest's own ``tmp_path`` base, fails the run, and the directory is removed. Runs
of other checkouts on the same machine share the machine's temp directory, so a comparison of it
before and after a run could not tell their files from this run's.
"""

from __future__ import annotations

from pathlib import Path

SESSION_PREFIX = "gpu-platform-tests-"
# pytest's own base of tmp_path and tmp_path_factory (pytest's tmpdir.py: ``pytest-of-<user>``),
# removed with the session's directory.
PYTEST_BASE_PREFIX = "pytest-of-"


def leftovers(root: Path) -> list[str]:
    """What a run left in its session directory, pytest's own base excepted."""
    return sorted(p.name for p in root.iterdir() if not p.name.startswith(PYTEST_BASE_PREFIX))


def leak_report(root: Path, left: list[str]) -> str:
    shown = ", ".join(left[:10]) + (f" and {len(left) - 10} more" if len(left) > 10 else "")
    return (
        f"FAIL: the run left {len(left)} entr{'y' if len(left) == 1 else 'ies'} in its temporary "
        f"directory {root} (removed now): {shown}. Remove them where they are made "
        f"(tests/support/scratch.py says why this is checked)."
    )
