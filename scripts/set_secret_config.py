"""Set a stack's secret config values in CI from one repository secret, before `pulumi preview`.

The committed ``Pulumi.<stack>.yaml`` holds no secret: the operator sets them with
``pulumi config set --secret``, which encrypts each value and writes it to that file on their
machine (pulumi/pulumi v3.259.0, pkg/cmd/pulumi/config/config.go:798-880). A CI runner checks out
the committed file, so it has none of them, and the program stops at its missing-secrets check.
This script takes them from ``PULUMI_SECRET_CONFIG``, a JSON object of config key to value (one
repository secret), and sets each key the stack's platform block names
(``components.config.required_secret_keys``) with ``pulumi config set --secret``, the value on
stdin (never on the command line; the CLI reads stdin when it is not a terminal and strips one
trailing newline, config.go:816-823). A key the file already holds encrypted (an operator who
committed their encrypted stack file instead) needs no value here.

    PULUMI_SECRET_CONFIG='{"managementKubeconfig": "..."}' python scripts/set_secret_config.py prod
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Mapping
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import yaml

REPO_ROOT = Path(__file__).resolve().parents[1]
sys.path.insert(0, str(REPO_ROOT))

from components.config import required_secret_keys  # noqa: E402
from components.stack import parse_platform  # noqa: E402

PROJECT = "gpu-platform"
ENV = "PULUMI_SECRET_CONFIG"


@dataclass(frozen=True)
class Plan:
    """What to set, what is missing, and what was given but is not used."""

    to_set: dict[str, str]
    missing: list[str]
    unused: list[str]


def plan(required: list[str], provided: Mapping[str, Any], committed: set[str]) -> Plan:
    """Keys to set from ``provided``; required keys neither provided nor ``committed`` (already
    ``secure:`` in the stack file); provided keys the stack does not use."""
    to_set = {key: str(provided[key]) for key in required if key in provided}
    missing = [key for key in required if key not in provided and key not in committed]
    unused = sorted(set(provided) - set(required))
    return Plan(to_set, missing, unused)


def committed_secrets(config: Mapping[str, Any]) -> set[str]:
    """Bare keys the stack file already holds encrypted (``key: {secure: ...}``)."""
    found = set()
    for key, value in config.items():
        if isinstance(value, dict) and set(value) == {"secure"}:
            found.add(key.split(":", 1)[1] if key.startswith(f"{PROJECT}:") else key)
    return found


def main(argv: list[str]) -> int:
    if len(argv) != 2:
        print(f"usage: {ENV}='<json object>' set_secret_config.py <stack>", file=sys.stderr)
        return 2
    stack = argv[1]
    config = (yaml.safe_load((REPO_ROOT / f"Pulumi.{stack}.yaml").read_text()) or {})["config"]
    required = required_secret_keys(parse_platform(config[f"{PROJECT}:platform"]))
    try:
        provided = json.loads(os.environ.get(ENV) or "{}")
    except json.JSONDecodeError as error:
        print(f"{ENV} is not a JSON object ({error.msg}): see the README", file=sys.stderr)
        return 1
    if not isinstance(provided, dict):
        print(f"{ENV} must be a JSON object of config key to value", file=sys.stderr)
        return 1
    result = plan(required, provided, committed_secrets(config))
    for key in result.unused:
        print(f"{ENV}: {key} is not a secret the {stack} stack names; ignored", file=sys.stderr)
    if result.missing:
        print(
            f"the {stack} stack needs secret config values CI does not have: "
            f"{', '.join(result.missing)}; add them to the {ENV} repository secret "
            "(a JSON object of config key to value), or commit the encrypted stack file",
            file=sys.stderr,
        )
        return 1
    for key, value in result.to_set.items():
        subprocess.run(
            ["pulumi", "config", "set", "--secret", "--stack", stack, key],
            input=value,
            text=True,
            check=True,
            cwd=REPO_ROOT,
        )
        print(f"{stack}: set secret {key}")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
