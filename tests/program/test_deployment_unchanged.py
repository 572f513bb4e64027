"""Restructuring the code must not change what either stack deploys.

Both stacks are evaluated under the mocks twice: as the program was at ``BASELINE`` (with that
commit's own harness) and as it is now. Every resource the baseline registered must still be
registered — same URN, or an ``alias`` to it — with the same type, parent, provider, inputs,
secret inputs, dependencies and options, and nothing may be added; the stack outputs must match.

``BASELINE`` is the last commit whose deployment the tree must reproduce. Move it, in a commit of
its own that says why, when a change to what a stack deploys is intended; a refactoring never
moves it.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.deployment_snapshot import (
    aliases_of,
    differences,
    extract,
    recording_at,
    snapshot,
)
from tests.support.harness import REPO_ROOT, Recording

BASELINE = "6ce070450d426741c67ac9725aa151fd96c5b4d2"


def _has_commit(commit: str) -> bool:
    if shutil.which("git") is None or not (REPO_ROOT / ".git").exists():
        return False
    found = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "cat-file", "-e", f"{commit}^{{commit}}"],
        capture_output=True,
        check=False,
    )
    return found.returncode == 0


@pytest.fixture(scope="module")
def baseline_tree(tmp_path_factory: pytest.TempPathFactory) -> Path:
    if not _has_commit(BASELINE):
        pytest.skip(f"baseline commit {BASELINE[:12]} is not in this checkout's git history")
    return extract(BASELINE, tmp_path_factory.mktemp("baseline"))


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_stack_deploys_what_the_baseline_deployed(
    stack: str, baseline_tree: Path, recordings: Callable[[str, bool], Recording]
) -> None:
    current = recordings(stack, False)
    before = snapshot(recording_at(baseline_tree, stack))
    after = snapshot(current)
    found = differences(before, after, aliases_of(current))
    assert not found, f"{stack}: {len(found)} differences from {BASELINE[:12]}:\n" + "\n".join(
        found[:40]
    )


def test_a_changed_input_is_reported(baseline_tree: Path) -> None:
    """The comparison can fail: one changed input, one removed and one added resource."""
    before = snapshot(recording_at(baseline_tree, "lab"))
    after = {urn: dict(value) for urn, value in before.items()}
    urns = sorted(urn for urn in before if urn.startswith("urn:"))
    changed, removed = urns[0], urns[1]
    after[changed] = {**after[changed], "inputs": {"changed": True}}
    del after[removed]
    after["urn:pulumi:lab::gpu-platform::x:y:Z::new"] = before[urns[2]]
    found = differences(before, after, {})
    assert any(line.startswith(f"changed inputs of {changed}") for line in found)
    assert f"gone (no alias to it): {removed}" in found
    assert "added: urn:pulumi:lab::gpu-platform::x:y:Z::new" in found
    # An alias to the removed URN from the added resource accounts for both.
    moved = differences(before, after, {removed: "urn:pulumi:lab::gpu-platform::x:y:Z::new"})
    assert not [line for line in moved if line.startswith(("gone", "added"))]
