"""Check a stack file offline in seconds (``make validate``): no Pulumi CLI, cluster or Docker.

Three phases, as ``pulumi preview --policy-pack policies`` would run them:

1. the configuration (``gpu-platform:platform``), validated before anything is registered;
2. the whole program, under the project's Pulumi mocks in preview mode (``tests/support/
   harness.py``: every resource registered, every value a cluster would supply left unknown);
3. the CrossGuard policy pack over what the program registered, with the stack's policy config
   (``policies/config/<stack>.json``), as the engine hands it resources (``tests/policies/
   recorded.py``).

One line per problem, ``<stack>: <what>``; exit status 1 when the configuration or the program
fails or a mandatory policy blocks, 0 otherwise (advisory findings are printed, not failed).
What it cannot see: anything a live cluster answers (a preview of a deployed stack reads the
running control planes and can refuse more, e.g. a downgrade or a datastore change).

Usage: ``python scripts/validate.py [--stack lab|prod] [--file Pulumi.lab.yaml]``
"""

from __future__ import annotations

import argparse
import sys
import time
from pathlib import Path
from typing import Any

import yaml

# The repository (components, tests.support) and the policy pack (gpu_platform_policies), as
# pytest's configuration puts them on the path (pyproject.toml pythonpath).
sys.path.insert(0, str(Path(__file__).resolve().parents[1] / "policies"))
sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from tests.policies.recorded import blocking, load_policy_config, run_pack
from tests.support.harness import evaluate, load_stack_config


def _config(stack: str, path: Path | None) -> dict[str, Any]:
    if path is None:
        return load_stack_config(stack)
    data = yaml.safe_load(path.read_text()) or {}
    config = data.get("config") if isinstance(data, dict) else None
    if not isinstance(config, dict):
        raise SystemExit(f"{path}: no `config:` mapping (a Pulumi stack file has one)")
    return config


def _one_line(error: str) -> str:
    """The message the CLI would print: the last line of the program's error, without the
    exception's class (a traceback, where the program raised one, is not the user's)."""
    last = [line for line in error.strip().splitlines() if line.strip()][-1]
    kind, _, message = last.partition(": ")
    return message if message and kind.endswith(("Error", "Exception")) else last


def validate(stack: str, path: Path | None) -> tuple[list[str], bool]:
    """(lines to print, passed)."""
    started = time.monotonic()
    recording = evaluate(stack, preview=True, config=_config(stack, path))
    if recording.error is not None:
        return [f"{stack}: {_one_line(recording.error)}"], False
    findings = run_pack(recording.resources, load_policy_config(stack))
    names = {r.urn: r.name for r in recording.resources}
    lines = [
        f"{stack}: {finding.level.value} {finding.policy}: {finding.message}"
        + (f" ({names.get(finding.urn, finding.urn)})" if finding.urn else "")
        for finding in findings
    ]
    failed = blocking(findings)
    lines.append(
        f"{stack}: {'FAILED' if failed else 'ok'}: {len(recording.resources)} resources, "
        f"{len(failed)} mandatory and {len(findings) - len(failed)} advisory policy findings "
        f"({time.monotonic() - started:.0f} s)"
    )
    return lines, not failed


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", choices=("lab", "prod"), default="lab")
    parser.add_argument(
        "--file", type=Path, help="a stack file to check instead of Pulumi.<stack>.yaml"
    )
    args = parser.parse_args(argv)
    lines, passed = validate(args.stack, args.file)
    print("\n".join(lines))
    return 0 if passed else 1


if __name__ == "__main__":
    sys.exit(main())
