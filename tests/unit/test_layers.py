"""The program's import layers hold (pyproject.toml [tool.importlinter], docs/architecture.md),
and the contracts really catch an import that breaks them."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from tests.support.harness import REPO_ROOT

LINT_IMPORTS = Path(sys.executable).with_name("lint-imports")


def _lint(root: Path) -> subprocess.CompletedProcess[str]:
    if not LINT_IMPORTS.exists():
        pytest.skip(f"{LINT_IMPORTS} is missing: run make venv (requirements-dev.txt has it)")
    return subprocess.run(
        [str(LINT_IMPORTS), "--no-cache"],
        cwd=root,
        env={**os.environ, "PYTHONPATH": str(root)},
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )


def test_the_layer_contracts_are_kept() -> None:
    done = _lint(REPO_ROOT)
    assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-2000:]
    assert "0 broken" in done.stdout


@pytest.mark.parametrize(
    ("module", "bad_import", "contract"),
    [
        ("components/config/base.py", "import components.lab.network", "Layers"),
        ("components/gpu_tenant.py", "import components.lab.tenant", "ask the seam"),
        ("components/lab/tenant.py", "import components.prod.tenant", "never import each other"),
        ("components/config/tenants.py", "import pulumi_kubernetes", "register nothing"),
    ],
)
def test_an_import_against_the_layers_is_refused(
    tmp_path: Path, module: str, bad_import: str, contract: str
) -> None:
    shutil.copytree(REPO_ROOT / "components", tmp_path / "components")
    shutil.copy(REPO_ROOT / "pyproject.toml", tmp_path / "pyproject.toml")
    target = tmp_path / module
    target.write_text(target.read_text() + f"\n{bad_import}  # noqa\n")
    done = _lint(tmp_path)
    assert done.returncode != 0, done.stdout[-2000:]
    broken = [line for line in done.stdout.splitlines() if line.endswith("BROKEN")]
    assert any(contract in line for line in broken), done.stdout[-2000:]
