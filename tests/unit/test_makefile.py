"""The documented commands (README, docs/lab.md) work from a fresh clone: what `make -n` says
each target would run.

``make -n`` prints the recipes without running them, so these tests need GNU make but no venv,
no Pulumi CLI and no network. ``-B`` treats every file target as out of date (what a fresh clone
sees for the virtualenv stamps and the state directory).
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
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
    # One recipe (continued over lines): the suite, and what to say when it collected nothing.
    assert lines[0].startswith(f'{venv}/bin/python -m pytest -q -m "not live and not integration"')
    assert not any("venv" in line.replace(str(venv), "") or "pip" in line for line in lines)


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


@pytest.mark.parametrize(
    "target", ["lab", "preview", "kubeconfigs", "destroy", "usage", "backups TENANT=tenant-a"]
)
def test_every_pulumi_command_runs_in_a_private_temp_dir(target: str) -> None:
    """The kubernetes provider leaves every tenant's admin kubeconfig in the temp dir
    (scripts/with-private-tmpdir.sh says where upstream): no target runs the CLI without the
    wrapper that gives it a private TMPDIR and removes it."""
    lines = dry_run("-B", *target.split(), "STACK=lab")
    # Quoted text is what a recipe says (an echo naming `pulumi up`), not what it runs.
    commands = [re.sub(r'"[^"]*"', '""', line) for line in lines]
    runs = [(line, m.start()) for line in commands for m in re.finditer(r"\bpulumi\s", line)]
    assert runs, f"make {target} runs no pulumi command:\n" + "\n".join(lines)
    for line, at in runs:
        assert line[:at].endswith("bash scripts/with-private-tmpdir.sh "), line


def test_prod_targets_leave_the_lab_backend_alone() -> None:
    lines = dry_run("-B", "destroy", "STACK=prod")
    assert not any(".pulumi-state" in line or "--create" in line for line in lines)


@pytest.mark.parametrize("target", ["lab", "preview"])
def test_the_pinned_charts_are_in_place_before_the_program_runs(target: str) -> None:
    """The program refuses to register anything without every pinned chart it installs in the
    project's .charts/ (components/chart_cache.py), copied there from the cache by ``--project``
    with the directory pulumi runs in (all of them: ``--only kamaji`` would not do)."""
    lines = dry_run("-B", target, "STACK=lab")
    fetch = index_of(lines, "scripts/fetch_charts.py --project .")
    assert "--only" not in lines[fetch]
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


# ------------------------------------------------------------------ .ci/run end to end, faked

# Stands in for .venv/bin/python, ruff, mypy, lint-imports and shellcheck: the offline suite (the
# README's `make test` line) exits with $FAKE_SUITE_STATUS, everything else succeeds.
FAKE_TOOL = """#!/usr/bin/env bash
case "$*" in
  *"not live and not integration"*)
    echo "fake pytest: exit $FAKE_SUITE_STATUS"
    exit "$FAKE_SUITE_STATUS";;
  *) exit 0;;
esac
"""


def _ci_checkout(tmp_path: Path) -> Path:
    """A checkout with the real .ci/run and Makefile, prepared virtualenvs whose tools are fakes,
    and requirements files older than the venv stamps (nothing to install)."""
    root = tmp_path / "checkout"
    (root / ".ci").mkdir(parents=True)
    shutil.copy2(REPO_ROOT / ".ci" / "run", root / ".ci" / "run")
    shutil.copy2(REPO_ROOT / "Makefile", root / "Makefile")
    (root / "scripts" / "local_e2e").mkdir(parents=True)
    # The local tier's tool build (Go, minutes) is not what this test is about.
    for script in ("build-kube-tools.sh", "build-pulumi-tools.sh"):
        (root / "scripts" / "local_e2e" / script).write_text("exit 0\n")
    (root / "policies").mkdir()
    for name in ("requirements.txt", "requirements-dev.txt", "constraints.txt"):
        (root / name).touch()
    (root / "policies" / "requirements.txt").touch()
    (root / "tests" / "backup").mkdir(parents=True)
    (root / "tests" / "backup" / "requirements-s3.txt").touch()
    venvs = (root / ".venv", root / "policies" / ".venv", root / "tests" / "backup" / ".venv")
    for venv in venvs:
        (venv / "bin").mkdir(parents=True)
        for tool in ("python", "ruff", "mypy", "lint-imports", "shellcheck"):
            fake = venv / "bin" / tool
            fake.write_text(FAKE_TOOL)
            fake.chmod(0o755)
    old = 1_000_000_000
    for path in root.rglob("*requirements*.txt"):
        os.utime(path, (old, old))
    os.utime(root / "constraints.txt", (old, old))
    for venv in venvs:
        (venv / ".gpu-platform-installed").touch()
    return root


def _ci_run(root: Path, suite_status: int) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "FAKE_SUITE_STATUS": str(suite_status)}
    return subprocess.run(
        ["bash", str(root / ".ci" / "run")],
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
def test_a_ci_run_in_which_no_test_ran_fails_and_says_so(tmp_path: Path) -> None:
    """pytest's exit status 5 (nothing collected) must fail CI with a message naming it, not pass
    and not hide among ordinary failures (make reports every failed recipe as 2)."""
    root = _ci_checkout(tmp_path)
    ran = _ci_run(root, 0)
    assert ran.returncode == 0, ran.stdout + ran.stderr  # the fakes let a real pass through
    assert "fake pytest: exit 0" in ran.stdout
    none = _ci_run(root, 5)
    assert none.returncode != 0
    assert _said_no_tests_ran(none), none.stdout + none.stderr
    failed = _ci_run(root, 1)
    assert failed.returncode != 0
    assert not _said_no_tests_ran(failed)


@pytest.mark.skipif(shutil.which("bash") is None, reason="bash is not installed")
@pytest.mark.parametrize("suite_status", [0, 1])
def test_a_ci_run_ends_with_the_suites_and_its_own_wall_clock(
    tmp_path: Path, suite_status: int
) -> None:
    """Issue 41: the time `make test` took, and the whole run's, are the last lines, whether the
    suite passed or failed (a failing suite stops the run)."""
    ran = _ci_run(_ci_checkout(tmp_path), suite_status)
    status = 2 if suite_status else 0  # make's own status for a failed recipe
    assert ran.returncode == status
    lines = ran.stdout.splitlines()
    suite = [line for line in lines if line.startswith("== make test: ")]
    assert len(suite) == 1, ran.stdout
    assert re.fullmatch(
        rf"== make test: \d+ min \d\d s wall clock \(exit status {status}\)", suite[0]
    )
    assert re.fullmatch(
        r"== wall clock: make test \d+ min \d\d s; \.ci/run \d+ min \d\d s in all "
        rf"\(exit status {status}\)",
        lines[-1],
    ), ran.stdout


def _said_no_tests_ran(run: subprocess.CompletedProcess[str]) -> bool:
    """A line of its own (make also echoes the recipe, which holds the same words)."""
    return any(line.startswith("FAIL: no tests ran") for line in run.stderr.splitlines())


# ------------------------------------------------------------ the tools preflight, really run


def _path_without_pulumi(tmp_path: Path) -> str:
    """A PATH of shims for what the recipes before the CLI call (bash, mkdir, python3), and no
    ``pulumi``, whatever this host has installed."""
    shims = tmp_path / "path"
    shims.mkdir()
    for tool in ("bash", "mkdir", "env"):
        found = shutil.which(tool)
        assert found is not None, tool
        (shims / tool).symlink_to(found)
    (shims / "python3").symlink_to(os.path.realpath(sys.executable))
    return str(shims)


def _prepared_fake_venv(tmp_path: Path) -> Path:
    """A virtualenv that counts as prepared, whose python succeeds at everything (the chart fetch
    and the host preflight it would run), so only the tools preflight can stop a target."""
    venv = tmp_path / "venv"
    (venv / "bin").mkdir(parents=True)
    fake = venv / "bin" / "python"
    fake.write_text("#!/bin/sh\nexit 0\n")
    fake.chmod(0o755)
    (venv / ".gpu-platform-installed").touch()
    return venv


@pytest.mark.parametrize(
    ("target", "stack"),
    [
        ("preview", "lab"),
        ("preview", "prod"),
        ("lab", "lab"),
        ("destroy", "lab"),
        ("kubeconfigs", "prod"),
    ],
)
def test_a_target_run_without_the_pulumi_cli_stops_at_the_preflight_with_the_install_line(
    tmp_path: Path, target: str, stack: str
) -> None:
    make = shutil.which("make")
    assert make is not None
    venv = _prepared_fake_venv(tmp_path)
    env = {"PATH": _path_without_pulumi(tmp_path), "HOME": str(tmp_path)}
    ran = subprocess.run(
        [
            make,
            "--no-print-directory",
            target,
            f"STACK={stack}",
            f"VENV={venv}",
            "-o",
            "policies/.venv/.gpu-platform-installed",
            f"STATE_DIR={tmp_path}/state",
        ],
        cwd=REPO_ROOT,
        capture_output=True,
        text=True,
        env=env,
        timeout=120,
        check=False,
    )
    said = ran.stdout + ran.stderr
    assert ran.returncode != 0, said
    assert "command not found" not in said
    lines = [line for line in ran.stderr.splitlines() if "`pulumi` is not on PATH" in line]
    assert len(lines) == 1, said
    assert lines[0].startswith(f"preflight (make {target}): ")
    assert "curl -fsSL https://get.pulumi.com | sh -s -- --version" in lines[0]
    # Nothing after the preflight ran: no state directory, no stack.
    assert not (tmp_path / "state").exists()


def test_make_lab_deploys_with_the_policy_pack_and_the_lab_policy_config() -> None:
    """The same flags preview.yml and lab-e2e.yml pass to `pulumi preview`, on the `up` itself,
    with the pack's interpreter prepared first."""
    lines = dry_run("-B", "lab")
    up = index_of(lines, "pulumi --non-interactive up --yes --stack lab")
    recipe = " ".join(line.rstrip("\\").strip() for line in lines[up : up + 2])
    assert "--policy-pack policies --policy-pack-config policies/config/lab.json" in recipe
    assert index_of(lines, "-m venv policies/.venv") < up
    for workflow in ("preview.yml", "lab-e2e.yml"):
        text = (REPO_ROOT / ".github" / "workflows" / workflow).read_text()
        assert "--policy-pack policies" in text
        assert "--policy-pack-config" in text


@pytest.mark.parametrize("target", ["preview", "lab", "destroy", "kubeconfigs"])
def test_the_tools_preflight_runs_before_the_venv_and_the_first_cli_call(target: str) -> None:
    lines = dry_run("-B", target, "STACK=lab")
    tools = index_of(lines, f"scripts/preflight.py --stack lab {target}")
    first_cli = index_of(lines, "pulumi --non-interactive")
    assert tools < first_cli
    if target != "destroy":
        assert tools < index_of(lines, "-m venv")


def test_destroy_keeps_the_registry_caches_and_clean_caches_removes_them() -> None:
    destroy = dry_run("-B", "destroy", "STACK=lab")
    assert not [line for line in destroy if "registry-caches-remove" in line]
    clean = dry_run("clean-caches")
    assert clean == ["bash scripts/management/registry-caches-remove.sh"]


def test_make_docs_regenerates_the_lab_image_list() -> None:
    lines = dry_run("-o", ".venv/.gpu-platform-installed", "docs")
    assert any(line.endswith("python scripts/lab_images.py") for line in lines), lines


def test_make_help_keeps_every_target_in_its_column() -> None:
    """The newcomer review found `make help`'s column overflowing for the longer names: every
    target with a description fits the column, and the first line says where to start."""
    makefile = (REPO_ROOT / "Makefile").read_text()
    width = int(re.search(r'printf "  make %-(\d+)s', makefile).group(1))  # type: ignore[union-attr]
    targets = re.findall(r"^([a-z0-9-]+):.*## ", makefile, re.M)
    assert targets
    assert max(len(t) for t in targets) <= width, [t for t in targets if len(t) > width]
    assert "Start here: make validate" in makefile
