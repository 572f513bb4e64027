"""What a make target needs on PATH, checked before it runs anything.

``make preview``, ``make lab``, ``make destroy`` and ``make kubeconfigs`` run this first (the
Makefile's ``tools`` target), with the system Python and before any virtualenv exists: one line
per missing tool with its official install command, and a non-zero exit, instead of a
``pulumi: command not found`` halfway through a recipe. The Pulumi CLI's version is compared with
the Python SDK that requirements.txt pins (the two are released together; CI installs that CLI):
older than the lab host preflight's minimum is refused, any other release is only noted.

What the lab's host needs beyond its tools (Docker reachable, CPUs, memory, disk, inotify, tool
versions) is the lab host preflight's (``make preflight``, ``components.lab.preflight``), which
``make lab`` runs next.

Usage: ``python3 scripts/preflight.py [--stack STACK] TARGET``.
"""

from __future__ import annotations

import argparse
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.lab import host_tools

# The lab host preflight's minimum (components.lab.preflight.MIN_PULUMI; a unit test holds the two
# equal): that module needs the virtualenv, this one must run without it.
MIN_PULUMI = (3, 200, 0)
VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def needed(target: str, stack: str) -> tuple[str, ...]:
    """The tools ``make TARGET STACK=stack`` calls. Every target talks to the stack through the
    Pulumi CLI; the lab's `up` and `destroy` run kind and Docker (scripts/management/,
    scripts/worker/), and `make lab`'s acceptance suite runs kubectl."""
    tools: tuple[str, ...] = ("pulumi",)
    if target == "lab":
        tools += ("docker", "kind", "kubectl")
    elif target == "destroy" and stack == "lab":
        tools += ("docker", "kind")
    return tools


def _version(text: str) -> tuple[int, int, int] | None:
    match = VERSION.search(text)
    if match is None:
        return None
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


def _dotted(version: tuple[int, ...]) -> str:
    return ".".join(str(part) for part in version)


def problems(
    tools: Sequence[str],
    found: Mapping[str, str | None],
    sdk_version: str,
) -> tuple[list[str], list[str]]:
    """(problems, notes) for ``tools`` given what is on PATH: ``found`` maps each tool on PATH to
    the version text it printed (None: it printed none). Pure."""
    hints = host_tools.install_hints(sdk_version)
    failed = [host_tools.missing_tool(tool, hints) for tool in tools if tool not in found]
    notes: list[str] = []
    if "pulumi" in tools and "pulumi" in found:
        text = found["pulumi"] or ""
        cli = _version(text)
        sdk = _version(sdk_version)
        if cli is None:
            notes.append(
                f"`pulumi version` printed no version ({text.strip()!r}); the program's SDK is "
                f"{sdk_version} (requirements.txt)"
            )
        elif cli < MIN_PULUMI:
            failed.append(
                f"the Pulumi CLI is v{_dotted(cli)}, older than v{_dotted(MIN_PULUMI)}, the oldest "
                f"the program runs under: {hints['pulumi']}"
            )
        elif cli != sdk:
            notes.append(
                f"the Pulumi CLI is v{_dotted(cli)} and the program's SDK {sdk_version} "
                f"(requirements.txt), the release CI runs; to match it: {hints['pulumi']}"
            )
    return failed, notes


def _pulumi_version(timeout: float = 30.0) -> str | None:
    try:
        proc = subprocess.run(
            ["pulumi", "version"], capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def gather(
    tools: Sequence[str],
    which: Callable[[str], str | None] = shutil.which,
    pulumi_version: Callable[[], str | None] = _pulumi_version,
) -> dict[str, str | None]:
    """Each of ``tools`` on PATH, with the Pulumi CLI's version text."""
    found: dict[str, str | None] = {}
    for tool in tools:
        if which(tool):
            found[tool] = pulumi_version() if tool == "pulumi" else None
    return found


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("target", help="the make target about to run (preview, lab, destroy, …)")
    parser.add_argument("--stack", default="lab")
    args = parser.parse_args(argv)
    tools = needed(args.target, args.stack)
    failed, notes = problems(tools, gather(tools), host_tools.pinned_sdk_version())
    for note in notes:
        print(f"preflight: note: {note}", file=sys.stderr)
    if failed:
        for line in failed:
            print(f"preflight (make {args.target}): {line}", file=sys.stderr)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
