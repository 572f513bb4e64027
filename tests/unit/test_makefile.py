"""The README's commands work from a fresh clone: what `make -n` says each target would run.

``make -n`` prints the recipes without running them, so these tests need GNU make but no venv,
no Pulumi CLI and no network. ``-B`` treats every file target as out of date (what a fresh clone
sees for the virtualenv stamps and the state directory).
"""

from __future__ import annotations

import shutil
import subprocess
from pathlib import Path

import pytest

from tests.support.harness import REPO_ROOT

pytestmark = pytest.mark.skipif(shutil.which("make") is None, reason="GNU make is not installed")


def dry_run(*args: str) -> list[str]:
    proc = subprocess.run(
        ["make", "--no-print-directory", "-n", *args],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return proc.stdout.splitlines()


def index_of(lines: list[str], fragment: str) -> int:
    found = [i for i, line in enumerate(lines) if fragment in line]
    assert found, f"no recipe line contains {fragment!r}:\n" + "\n".join(lines)
    return found[0]


def test_make_test_prepares_the_venv_it_runs_from(tmp_path: Path) -> None:
    venv = f"{tmp_path}/fresh-venv"
    lines = dry_run("test", f"VENV={venv}")
    create = index_of(lines, f"-m venv {venv}")
    install = index_of(lines, f"{venv}/bin/python -m pip install --quiet -r requirements-dev.txt")
    run = index_of(lines, f"{venv}/bin/python -m pytest")
    assert create < install < run


def test_make_test_is_silent_about_a_prepared_venv(tmp_path: Path) -> None:
    # A stamp newer than every requirements file: nothing to prepare, pytest runs at once.
    venv = tmp_path / "prepared-venv"
    venv.mkdir()
    (venv / ".gpu-platform-installed").touch()
    # (-o: policies/.venv counts as prepared too, whatever this checkout holds.)
    lines = dry_run("test", f"VENV={venv}", "-o", "policies/.venv/.gpu-platform-installed")
    assert lines == [f'{venv}/bin/python -m pytest -q -m "not live and not integration"']


def test_make_test_prepares_the_policy_venv_the_grpc_test_starts_the_pack_from() -> None:
    lines = dry_run("-B", "test")
    create = index_of(lines, "-m venv policies/.venv")
    run = index_of(lines, "-m pytest")
    assert create < run


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_make_preview_prepares_the_policy_packs_venv_first(stack: str) -> None:
    lines = dry_run("-B", "preview", f"STACK={stack}")
    create = index_of(lines, "-m venv policies/.venv")
    install = index_of(lines, "policies/.venv/bin/python -m pip install --quiet -r policies/req")
    preview = index_of(lines, "preview --stack")
    assert create < install < preview
    assert "--policy-pack policies" in "\n".join(lines[preview:])


@pytest.mark.parametrize("target", ["preview", "kubeconfigs", "destroy"])
def test_lab_targets_create_the_state_directory_and_stack_first(target: str) -> None:
    lines = dry_run("-B", target, "STACK=lab")
    state = index_of(lines, f"mkdir -p {REPO_ROOT}/.pulumi-state")
    stack = index_of(lines, "stack select lab --create")
    command = "stack output" if target == "kubeconfigs" else target
    pulumi = index_of(lines, f"pulumi --non-interactive {command}")
    assert state < stack < pulumi


def test_prod_targets_leave_the_lab_backend_alone() -> None:
    lines = dry_run("-B", "destroy", "STACK=prod")
    assert not any(".pulumi-state" in line or "--create" in line for line in lines)


@pytest.mark.parametrize("target", ["lab", "preview"])
def test_the_kamaji_chart_is_in_place_before_the_program_runs(target: str) -> None:
    """The program refuses to register anything without the pinned Kamaji chart in the project's
    .charts/ (components/chart_cache.py), copied there from the cache by ``--project`` with the
    directory pulumi runs in; every other chart comes from its repository at up/preview."""
    lines = dry_run("-B", target, "STACK=lab")
    fetch = index_of(lines, "scripts/fetch_charts.py --only kamaji --project .")
    program = index_of(
        lines, "pulumi --non-interactive up" if target == "lab" else "preview --stack"
    )
    assert fetch < program


def test_make_lab_writes_the_kubeconfigs_even_when_the_acceptance_suite_fails() -> None:
    lines = dry_run("-B", "lab")
    recipe = "\n".join(lines)
    assert "acceptance STACK=lab || status=$?" in recipe
    assert recipe.index("kubeconfigs STACK=lab") > recipe.index("acceptance STACK=lab")
    assert "exit $status" in recipe
