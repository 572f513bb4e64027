"""The session's temporary directory must be empty at its end (issue 41 point 5,
tests/support/scratch.py): a run that leaves a file there fails, naming it."""

from __future__ import annotations

import subprocess
import sys
import textwrap
from pathlib import Path

from tests.support.scratch import leak_report, leftovers

REPO_ROOT = Path(__file__).resolve().parents[2]


def test_pytests_own_base_is_not_a_leftover(tmp_path: Path) -> None:
    (tmp_path / "pytest-of-root").mkdir()
    (tmp_path / "gpu-platform-chart-abc").mkdir()
    (tmp_path / "kubeconfig42").write_text("")
    assert leftovers(tmp_path) == ["gpu-platform-chart-abc", "kubeconfig42"]
    report = leak_report(tmp_path, leftovers(tmp_path))
    assert report.startswith(f"FAIL: the run left 2 entries in its temporary directory {tmp_path}")
    assert report.count("gpu-platform-chart-abc") == 1


def _run(tmp_path: Path, body: str) -> subprocess.CompletedProcess[str]:
    test = tmp_path / "test_scratch_child.py"
    test.write_text(textwrap.dedent(body))
    # tests/conftest.py as a plugin: the child's test is outside the repository's tests.
    plugin = ["-p", "no:cacheprovider", "-p", "tests.conftest", "--rootdir", str(tmp_path)]
    return subprocess.run(
        [sys.executable, "-m", "pytest", "-q", *plugin, str(test)],
        capture_output=True,
        text=True,
        cwd=REPO_ROOT,
        check=False,
    )


def test_a_run_that_leaves_a_temporary_file_fails_naming_it(tmp_path: Path) -> None:
    leaking = _run(
        tmp_path,
        """
        import tempfile

        def test_leaks():
            tempfile.mkdtemp(prefix="gpu-platform-chart-")
        """,
    )
    assert leaking.returncode == 1, leaking.stdout[-2000:]
    assert "1 passed" in leaking.stdout
    assert "FAIL: the run left 1 entry in its temporary directory" in leaking.stdout
    assert "gpu-platform-chart-" in leaking.stdout


def test_a_run_that_cleans_up_passes(tmp_path: Path) -> None:
    tidy = _run(
        tmp_path,
        """
        import shutil
        import tempfile

        def test_tidy(tmp_path):
            shutil.rmtree(tempfile.mkdtemp(prefix="gpu-platform-chart-"))
            (tmp_path / "kept-by-pytest").write_text("")
        """,
    )
    assert tidy.returncode == 0, tidy.stdout[-2000:]
    assert "FAIL" not in tidy.stdout
