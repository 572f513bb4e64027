"""What a stack deploys, as one comparable value, at this tree or at an earlier commit.

A refactoring must not change what either stack deploys: every resource keeps its URN, type,
parent, provider, inputs, dependencies and options (a resource that has to move carries an
``alias`` to its old URN). ``snapshot_at(commit, stack)`` evaluates the program *as it was at
that commit* under that commit's own mock harness (``git archive`` into a scratch directory, run
in a child process), so the comparison never depends on this tree's code to describe the past.
"""

from __future__ import annotations

import dataclasses
import io
import json
import subprocess
import sys
import tarfile
from pathlib import Path
from typing import Any

from tests.support.harness import REPO_ROOT, Recording, Registration

# Run inside the extracted tree: that tree's harness evaluates that tree's program.
_DUMP = """
import dataclasses, json, sys
from tests.support.harness import evaluate
recording = evaluate(sys.argv[1], False)
json.dump(dataclasses.asdict(recording), sys.stdout)
"""


def describe(reg: Registration | dict[str, Any]) -> dict[str, Any]:
    """The parts of one registration that decide what the engine deploys and when."""
    data = dataclasses.asdict(reg) if isinstance(reg, Registration) else reg
    options = dict(data.get("options") or {})
    options.pop("aliases", None)
    return {
        "type": data["type"],
        "custom": data["custom"],
        "read": data.get("read", False),
        "parent": data["parent"],
        "provider": (data["provider"] or "").rsplit("::", 1)[0],
        "inputs": data["inputs"],
        "secret_inputs": sorted(data["secret_inputs"]),
        "dependencies": sorted(data["dependencies"]),
        "property_dependencies": {
            key: sorted(value) for key, value in sorted(data["property_dependencies"].items())
        },
        "options": options,
    }


def snapshot(recording: Recording | dict[str, Any]) -> dict[str, dict[str, Any]]:
    """URN -> ``describe`` of every registration, plus the stack outputs under ``"outputs"``."""
    data = dataclasses.asdict(recording) if isinstance(recording, Recording) else recording
    if data.get("error"):
        raise RuntimeError(f"the {data['stack']} stack failed under the mocks: {data['error']}")
    described = {reg["urn"]: describe(reg) for reg in data["resources"]}
    described["outputs"] = {"outputs": data["outputs"], "secret": sorted(data["secret_outputs"])}
    return described


def aliases_of(recording: Recording) -> dict[str, str]:
    """Old URN -> the URN of the registration that declares it as an alias."""
    found: dict[str, str] = {}
    for reg in recording.resources:
        for alias in reg.options.get("aliases", []) or []:
            found[str(alias)] = reg.urn
    return found


def extract(commit: str, into: Path) -> Path:
    """The tracked tree at ``commit`` (from this checkout's git history) under ``into``."""
    archive = subprocess.run(
        ["git", "-C", str(REPO_ROOT), "archive", "--format=tar", commit],
        check=True,
        capture_output=True,
    ).stdout
    with tarfile.open(fileobj=io.BytesIO(archive)) as tar:
        tar.extractall(into, filter="data")
    return into


def recording_at(tree: Path, stack: str) -> dict[str, Any]:
    """``dataclasses.asdict`` of the Recording that ``tree``'s own harness makes of ``stack``."""
    done = subprocess.run(
        [sys.executable, "-c", _DUMP, stack],
        cwd=tree,
        env={"PATH": "/usr/bin:/bin", "PYTHONPATH": str(tree), "HOME": str(Path.home())},
        capture_output=True,
        text=True,
        check=False,
    )
    if done.returncode != 0:
        raise RuntimeError(f"evaluating {stack} at {tree} failed: {done.stderr[-2000:]}")
    result: dict[str, Any] = json.loads(done.stdout)
    return result


def differences(
    before: dict[str, dict[str, Any]],
    after: dict[str, dict[str, Any]],
    aliases: dict[str, str],
) -> list[str]:
    """One line per difference: a resource gone (and not aliased), added, or changed."""
    lines: list[str] = []
    for urn, old in sorted(before.items()):
        new_urn = urn if urn in after else aliases.get(urn)
        if new_urn is None:
            lines.append(f"gone (no alias to it): {urn}")
            continue
        new = after[new_urn]
        for key in old:
            if old[key] != new.get(key):
                where = ", ".join(_paths(old[key], new.get(key))[:5])
                lines.append(f"changed {key} of {urn} at {where}")
    claimed = set(before) | {new for old, new in aliases.items() if old in before}
    lines += [f"added: {urn}" for urn in sorted(set(after) - claimed)]
    return lines


def _paths(old: Any, new: Any, prefix: str = "") -> list[str]:
    """Dotted paths where ``old`` and ``new`` differ, each with both values (shortened)."""
    if isinstance(old, dict) and isinstance(new, dict):
        found: list[str] = []
        for key in sorted(set(old) | set(new), key=str):
            if old.get(key) != new.get(key):
                found += _paths(old.get(key), new.get(key), f"{prefix}.{key}" if prefix else key)
        return found
    return [f"{prefix or '(whole)'}: {_short(old)} -> {_short(new)}"]


def _short(value: Any) -> str:
    text = json.dumps(value, sort_keys=True, default=str)
    return text if len(text) <= 80 else text[:80] + "…"
