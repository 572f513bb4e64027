"""Integration: bring the lab up with the Pulumi Automation API, run the acceptance suite against
it, destroy it (always, in ``finally``).

Opt-in: it takes about 15 minutes and creates real containers. It runs only with
``GPU_PLATFORM_INTEGRATION=1`` on a Linux host with a reachable Docker engine (``docker info``),
``kind``, ``kubectl`` and the Pulumi CLI; otherwise it is skipped with one line naming what is
missing::

    GPU_PLATFORM_INTEGRATION=1 .venv/bin/pytest tests/integration -m integration

State goes to the local file backend ``file://<repo>/.pulumi-state`` (``PULUMI_BACKEND_URL``),
secrets use ``PULUMI_CONFIG_PASSPHRASE`` (a lab-only default when unset: the lab holds no secret
config, only secret outputs). The workspace is the repository itself (``work_dir`` = repo root,
its own ``Pulumi.yaml`` and ``Pulumi.lab.yaml``); no project settings are passed, because the
Automation API would write them over the repository's ``Pulumi.yaml``. ``Pulumi.lab.yaml`` carries
the lab passphrase's ``encryptionsalt``, so creating the stack writes nothing to it. A ``lab`` stack
that already holds resources is never touched: the test skips instead of destroying it.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.gpu_plan import GPU_TEST_IDS

REPO = Path(__file__).resolve().parents[2]
STACK = "lab"
STATE_DIR = REPO / ".pulumi-state"
BACKEND_URL = f"file://{STATE_DIR}"
LAB_PASSPHRASE = "gpu-platform-lab-only"
OPT_IN_ENV = "GPU_PLATFORM_INTEGRATION"
TOOLS = ("docker", "kind", "kubectl", "pulumi")
ACCEPTANCE_TIMEOUT_SECONDS = 45 * 60
# Every test must pass on the lab: the health check, the report's eight tests, the datastore
# check, the quota check (Pulumi.lab.yaml declares quotas for both tenants), the admission rules
# (TC-17), the per-tenant allocation series (TC-18; metrics are on in the lab) and the management
# drill (TC-21: the lab's single control-plane replica back within its recovery target).
REQUIRED_PASSED = (
    "TC-00",
    "TC-01",
    "TC-02",
    "TC-03",
    "TC-04",
    "TC-05",
    "TC-06",
    "TC-07",
    "TC-08",
    "TC-09",
    "TC-10",
    "TC-16",
    "TC-17",
    "TC-18",
    "TC-21",
)
# The runtime-isolation tests need real NVIDIA GPUs: on the lab's mock devices they must skip,
# never pass (tests/acceptance/gpu_plan.py).
REAL_GPU_ONLY = GPU_TEST_IDS
# Opt-in drills change the deployed stack for good (TC-19 upgrades a tenant, TC-20 rolls one back
# to a backup): not run here.
OPT_IN_DRILLS = ("TC-19", "TC-20")
# The DRA cases run on a gpuSharing: dra tenant; Pulumi.lab.yaml's tenants are all hami, so they
# skip there (tests/acceptance/test_tc22_25_dra.py), never pass or fail.
DRA_ONLY = ("TC-22", "TC-23", "TC-24", "TC-25")


def missing_requirements(
    environ: Mapping[str, str],
    which: Callable[[str], str | None] = shutil.which,
    run: Callable[..., subprocess.CompletedProcess[str]] = subprocess.run,
) -> list[str]:
    """What stops the integration run here, each as a short phrase (empty: ready to run)."""
    missing: list[str] = []
    if environ.get(OPT_IN_ENV) != "1":
        missing.append(f"{OPT_IN_ENV}=1 (opt-in: ~15 minutes, creates containers)")
    for tool in TOOLS:
        if which(tool) is None:
            missing.append(f"{tool} on PATH")
    if which("docker") is not None:
        try:
            done = run(["docker", "info"], capture_output=True, text=True, timeout=15, check=False)
        except (subprocess.TimeoutExpired, OSError) as exc:
            missing.append(f"a reachable Docker engine (`docker info`: {type(exc).__name__})")
        else:
            if done.returncode != 0:
                lines = [line for line in (done.stderr or "").splitlines() if line.strip()]
                why = lines[0].strip() if lines else f"exit {done.returncode}"
                missing.append(f"a reachable Docker engine (`docker info`: {why})")
    return missing


def test_requirements_are_named_in_one_line() -> None:
    """Offline: the skip reason names every missing piece (runs in the main suite)."""

    def which(tool: str) -> str | None:
        return None if tool in ("kind", "pulumi") else f"/usr/bin/{tool}"

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        return subprocess.CompletedProcess(command, 1, "", "Cannot connect to the Docker daemon\n")

    missing = missing_requirements({}, which, run)
    assert missing == [
        f"{OPT_IN_ENV}=1 (opt-in: ~15 minutes, creates containers)",
        "kind on PATH",
        "pulumi on PATH",
        "a reachable Docker engine (`docker info`: Cannot connect to the Docker daemon)",
    ]
    assert missing_requirements({OPT_IN_ENV: "1"}, lambda t: f"/bin/{t}", run)[-1].startswith(
        "a reachable Docker engine"
    )


class _Log:
    """Pulumi's progress output (secrets hidden, outputs suppressed), kept in a file and shown
    (tail) when the test fails."""

    def __init__(self, path: Path) -> None:
        self.path = path

    def __call__(self, line: str) -> None:
        with self.path.open("a") as handle:
            handle.write(line if line.endswith("\n") else line + "\n")

    def tail(self, lines: int = 60) -> str:
        if not self.path.exists():
            return ""
        return "\n".join(self.path.read_text().splitlines()[-lines:])


@pytest.mark.integration
@pytest.mark.timeout(2 * 60 * 60)
def test_lab_up_acceptance_destroy(tmp_path: Path) -> None:
    missing = missing_requirements(os.environ)
    if missing:
        pytest.skip("integration run needs " + "; ".join(missing))
    from pulumi import automation as auto  # imported here: it is only needed for a real run

    # The kubernetes provider leaves every kubeconfig it is given in the temp dir
    # (scripts/with-private-tmpdir.sh cites where): keep them in this test's own tmp_path.
    private_tmp = tmp_path / "tmp"
    private_tmp.mkdir(mode=0o700)
    env = {
        "PULUMI_BACKEND_URL": BACKEND_URL,
        "PULUMI_CONFIG_PASSPHRASE": os.environ.get("PULUMI_CONFIG_PASSPHRASE", LAB_PASSPHRASE),
        "TMPDIR": str(private_tmp),
    }
    STATE_DIR.mkdir(exist_ok=True)
    options = auto.LocalWorkspaceOptions(work_dir=str(REPO), env_vars=env)
    workspace = auto.LocalWorkspace(work_dir=str(REPO), env_vars=env)
    existing = {summary.name: summary for summary in workspace.list_stacks()}
    if STACK in existing and (existing[STACK].resource_count or 0) > 0:
        pytest.skip(
            f"stack {STACK!r} in {BACKEND_URL} already holds {existing[STACK].resource_count} "
            "resources; this test would destroy them (run `pulumi destroy -s lab` first)"
        )
    stack = auto.create_or_select_stack(stack_name=STACK, work_dir=str(REPO), opts=options)
    log = _Log(tmp_path / "pulumi.log")
    reports = REPO / "reports"
    report_json = reports / "acceptance.json"
    junit = reports / "acceptance.xml"
    try:
        try:
            result = stack.up(
                on_output=log, color="never", show_secrets=False, suppress_outputs=True
            )
        except auto.CommandError as exc:
            pytest.fail(f"pulumi up failed: {str(exc)[-2000:]}\n--- log tail ---\n{log.tail()}")
        assert result.summary.result == "succeeded", log.tail()
        report_json.unlink(missing_ok=True)
        acceptance = subprocess.run(
            [
                sys.executable,
                "-m",
                "pytest",
                "tests/acceptance",
                "-p",
                "no:cacheprovider",
                "--junitxml",
                str(junit),
            ],
            cwd=REPO,
            env={
                **os.environ,
                **env,
                "GPU_PLATFORM_STACK": STACK,
                "GPU_PLATFORM_ACCEPTANCE_JSON": str(report_json),
            },
            capture_output=True,
            text=True,
            timeout=ACCEPTANCE_TIMEOUT_SECONDS,
            check=False,
        )
        print(acceptance.stdout[-30_000:])
        assert acceptance.returncode == 0, (
            f"acceptance suite exit {acceptance.returncode}:\n{acceptance.stdout[-5000:]}"
            f"\n{acceptance.stderr[-2000:]}"
        )
        assert report_json.is_file(), "the acceptance run wrote no evidence (everything skipped?)"
        verdicts = {
            row["id"]: row["verdict"] for row in json.loads(report_json.read_text())["results"]
        }
        not_passed = {tc: verdicts.get(tc, "missing") for tc in REQUIRED_PASSED}
        not_passed = {tc: v for tc, v in not_passed.items() if v != "passed"}
        assert not not_passed, f"acceptance tests not passed: {not_passed}"
        not_skipped = {tc: verdicts.get(tc, "missing") for tc in REAL_GPU_ONLY}
        not_skipped = {tc: v for tc, v in not_skipped.items() if v != "skipped"}
        assert not not_skipped, f"real-GPU tests did not skip on mock GPUs: {not_skipped}"
        dra = {tc: verdicts.get(tc, "missing") for tc in DRA_ONLY}
        dra = {tc: v for tc, v in dra.items() if v != "skipped"}
        assert not dra, f"DRA cases did not skip on a lab without a dra tenant: {dra}"
        drills = {tc: verdicts.get(tc, "missing") for tc in OPT_IN_DRILLS}
        drills = {tc: v for tc, v in drills.items() if v != "skipped"}
        assert not drills, f"opt-in drills ran without being asked to: {drills}"
    finally:
        try:
            stack.destroy(on_output=log, color="never", show_secrets=False, suppress_outputs=True)
        except auto.CommandError as exc:
            pytest.fail(
                f"pulumi destroy failed - containers may be left (run `pulumi destroy -s lab`): "
                f"{str(exc)[-2000:]}\n--- log tail ---\n{log.tail()}"
            )
