"""scripts/with-private-tmpdir.sh: what the Makefile runs every pulumi command through, so the
kubeconfig files the kubernetes provider leaves in the temp dir (the script cites where) go with a
private directory when the command ends."""

from __future__ import annotations

import os
import signal
import subprocess
import time
from pathlib import Path

from tests.support.harness import REPO_ROOT

SCRIPT = REPO_ROOT / "scripts" / "with-private-tmpdir.sh"

# What the provider does: a kubeconfig file in os.TempDir(), never removed.
LEAVE_A_KUBECONFIG = 'umask 077; echo secret > "$(mktemp "$TMPDIR/kubeconfigXXXX")"; echo "$TMPDIR"'


def _run(parent: Path, command: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["bash", str(SCRIPT), "sh", "-c", command],
        env={**os.environ, "TMPDIR": str(parent)},
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_the_command_writes_into_a_private_directory_that_is_gone_afterwards(
    tmp_path: Path,
) -> None:
    done = _run(tmp_path, LEAVE_A_KUBECONFIG + '; stat -c %a "$TMPDIR"')
    assert done.returncode == 0, done.stderr
    private, mode = done.stdout.split()
    assert Path(private).parent == tmp_path
    assert mode == "700"
    assert not Path(private).exists()
    assert list(tmp_path.iterdir()) == []


def test_a_failing_command_keeps_its_status_and_still_leaves_nothing(tmp_path: Path) -> None:
    done = _run(tmp_path, LEAVE_A_KUBECONFIG + "; exit 3")
    assert done.returncode == 3
    assert list(tmp_path.iterdir()) == []


def test_an_interrupted_run_leaves_nothing(tmp_path: Path) -> None:
    ready = tmp_path / "ready"
    parent = tmp_path / "temp"
    parent.mkdir()
    wrapper = subprocess.Popen(
        ["bash", str(SCRIPT), "sh", "-c", LEAVE_A_KUBECONFIG + f'; touch "{ready}"; sleep 30'],
        env={**os.environ, "TMPDIR": str(parent)},
        stdout=subprocess.DEVNULL,
        start_new_session=True,
    )
    deadline = time.monotonic() + 10
    while not ready.exists() and time.monotonic() < deadline:
        time.sleep(0.05)
    assert ready.exists()
    assert len(list(parent.iterdir())) == 1
    # Ctrl-C in a terminal signals the whole process group, the CLI and the wrapper alike.
    os.killpg(wrapper.pid, signal.SIGINT)
    assert wrapper.wait(timeout=10) != 0
    assert list(parent.iterdir()) == []


def test_no_command_is_a_usage_line(tmp_path: Path) -> None:
    done = subprocess.run(["bash", str(SCRIPT)], capture_output=True, text=True, timeout=10)
    assert done.returncode == 2
    assert done.stderr.startswith("usage:")
