"""``make validate`` (``scripts/validate.py``): a stack file checked offline, one line per
problem, exit status for CI and pre-commit hooks (issue 41)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.support.harness import REPO_ROOT, stack_file

SCRIPT = REPO_ROOT / "scripts" / "validate.py"


def _run(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(SCRIPT), *args],
        capture_output=True,
        text=True,
        check=False,
        timeout=240,
        cwd=REPO_ROOT,
    )


def _edited(tmp_path: Path, stack: str, edit: Any) -> Path:
    data = yaml.safe_load(stack_file(stack).read_text())
    edit(data["config"]["gpu-platform:platform"])
    path = tmp_path / f"Pulumi.{stack}.yaml"
    path.write_text(yaml.safe_dump(data))
    return path


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_committed_stacks_pass(stack: str) -> None:
    result = _run("--stack", stack)
    assert result.returncode == 0, result.stdout + result.stderr
    assert result.stdout.startswith(f"{stack}: ok: ")


def test_a_config_mistake_is_one_line_naming_the_key(tmp_path: Path) -> None:
    def mistake(platform: dict[str, Any]) -> None:
        platform["tenants"][0]["dataStore"]["schema"] = "Tenant-A"

    result = _run("--stack", "lab", "--file", str(_edited(tmp_path, "lab", mistake)))
    assert result.returncode == 1
    assert result.stdout.splitlines() == [
        "lab: invalid stack configuration: tenants[0].dataStore.schema: 'Tenant-A' is not usable "
        "as a schema or username: use lower-case letters, digits and '_', starting with a letter"
    ]
    assert "Traceback" not in result.stdout + result.stderr


def test_a_blocking_policy_fails_with_its_resource(tmp_path: Path) -> None:
    def too_big(platform: dict[str, Any]) -> None:
        # Within the quota, but three cards per pod on nodes of two: only the pack's fit sees it
        # (a request larger than every card is already a config error).
        platform["tenants"][1]["workloads"][0]["gpu"].update(cards=3, memoryMiB=10000)

    result = _run("--stack", "lab", "--file", str(_edited(tmp_path, "lab", too_big)))
    assert result.returncode == 1, result.stdout
    finding = next(line for line in result.stdout.splitlines() if "hami-capacity-fit" in line)
    assert finding.startswith("lab: mandatory hami-capacity-fit: ")
    assert finding.endswith("(tenant-b-workload-default-inference-sample)")
    assert result.stdout.splitlines()[-1].startswith("lab: FAILED: ")
