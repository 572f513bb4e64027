"""Shared pytest fixtures: where the pinned upstream files live; the session's own temporary
directory, which must be empty at the end (tests/support/scratch.py)."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Generator
from pathlib import Path
from typing import Any

import pytest

from tests.support import charts
from tests.support.cel_tally import CEL_TALLY, CelTally
from tests.support.harness import Recording, shipped
from tests.support.scratch import SESSION_PREFIX, leak_report, leftovers
from tests.support.upstream import upstream_dir_or_none

SESSION_TEMP = pytest.StashKey[Path]()


def pytest_configure(config: pytest.Config) -> None:
    """Every temporary file of the session (and of the processes it starts) goes to a directory
    of its own. An xdist worker (``workerinput``: pytest-xdist's mark of one) inherits its
    controller's through ``TMPDIR``; the controller checks it after the workers have stopped."""
    if hasattr(config, "workerinput"):
        return
    root = Path(tempfile.mkdtemp(prefix=SESSION_PREFIX))
    config.stash[SESSION_TEMP] = root
    os.environ["TMPDIR"] = str(root)
    tempfile.tempdir = None  # tempfile.gettempdir() reads TMPDIR again


@pytest.hookimpl(wrapper=True)
def pytest_sessionfinish(session: pytest.Session) -> Generator[None, None, None]:
    """Fail the run when it left anything in its temporary directory; remove that directory.
    Runs after every other sessionfinish hook (xdist's stops the workers in its own)."""
    root = session.config.stash.get(SESSION_TEMP, None)
    # An xdist worker hands its CEL tally to the controller in ``workeroutput``, which
    # pytest-xdist 3.8.0 sends once every sessionfinish hook has run (src/xdist/remote.py:141-149).
    workeroutput = getattr(session.config, "workeroutput", None)
    tally = session.config.stash.get(CEL_TALLY, None)
    if workeroutput is not None and tally is not None:
        workeroutput["cel_tally"] = tally.as_plain()
    try:
        charts.release_scratch()
        result = yield
        left = leftovers(root) if root is not None and root.is_dir() else []
    finally:
        if root is not None:
            shutil.rmtree(root, ignore_errors=True)
    if left:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write("\n")
            reporter.write_line(leak_report(root, left), red=True, bold=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED
    return result


@pytest.hookimpl(optionalhook=True)
def pytest_testnodedown(node: Any, error: object) -> None:
    """pytest-xdist's controller, as each worker stops: add the worker's CEL tally (handed over
    in its sessionfinish above) to the session's, which the summary prints."""
    counted = getattr(node, "workeroutput", {}).get("cel_tally")
    if counted:
        tally = node.config.stash.setdefault(CEL_TALLY, CelTally())
        tally.add(CelTally.from_plain(counted))


def pytest_terminal_summary(terminalreporter: Any, config: pytest.Config) -> None:
    tally = config.stash.get(CEL_TALLY, None)
    if tally is not None and (tally.evaluated or tally.skipped):
        terminalreporter.write_line(f"rendered-chart suite: {tally.summary()}")


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    """The pinned upstream charts and CRDs; the test is skipped when they are absent."""
    found = upstream_dir_or_none()
    if found is None:
        pytest.skip(
            "pinned upstream files not found: set GPU_PLATFORM_UPSTREAM_DIR or run "
            "scripts/fetch-upstream.sh"
        )
    return found


@pytest.fixture(scope="session")
def upstream_file(upstream_dir: Path) -> Callable[[str], Path]:
    """``upstream_file("hami/fit-cases.json")``: a file of the pinned upstream folder, or skip
    with one line naming it (``.upstream/`` from ``make fetch-upstream`` lacks the workspace's
    own files: SOURCES.md, the transcribed HAMi fit vectors)."""

    def get(relative: str) -> Path:
        path = upstream_dir / relative
        if not path.is_file():
            pytest.skip(f"{relative} is not in {upstream_dir} (it comes with ../shared/upstream)")
        return path

    return get


STACKS = ("lab", "prod")


@pytest.fixture(scope="session")
def recordings() -> Callable[[str, bool], Recording]:
    """``recordings(stack, preview)``: the program evaluated under mocks, cached per session."""
    return shipped


@pytest.fixture(scope="session")
def lab(recordings: Callable[[str, bool], Recording]) -> Recording:
    """The lab stack as ``pulumi up`` would register it."""
    return recordings("lab", False)


@pytest.fixture(scope="session")
def prod(recordings: Callable[[str, bool], Recording]) -> Recording:
    """The prod stack as ``pulumi up`` would register it."""
    return recordings("prod", False)
