"""Lab host preflight: can this machine run the lab?

The lab runs a kind management cluster, two hosted control planes with a three-member etcd and a
``kindest/node`` worker per tenant on one Linux host with Docker (the lab report suggests at least
4 CPUs, 8 GB free memory and 20 GB free disk). MetalLB addresses live on the ``kind`` docker
bridge, which only a Linux host can reach directly.

Split in two so the decisions are testable without Docker:

* ``gather_facts()`` looks at the host (``docker info``, ``/proc/meminfo``, disk, ``PATH``,
  the inotify limits);
* ``failures(facts)`` is a pure function: one sentence per problem, each with its fix.

``check_lab_host()`` is what the ManagementCluster calls before it registers anything. It never
runs during ``pulumi preview`` (a PR runner has no Docker) nor with
``GPU_PLATFORM_SKIP_PREFLIGHT=1``. ``python -m components.preflight`` runs the same check by hand.
"""

from __future__ import annotations

import json
import os
import platform
import shutil
import subprocess
import sys
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from types import MappingProxyType

SKIP_ENV = "GPU_PLATFORM_SKIP_PREFLIGHT"
GIB = 1024**3
REQUIRED_TOOLS = ("docker", "kind", "kubectl")


@dataclass(frozen=True)
class Requirements:
    """What the lab needs from its host (the lab report's suggested minimum)."""

    min_cpus: int = 4
    min_free_memory_gib: float = 8.0
    min_free_disk_gib: float = 20.0
    # kind's known issue "too many open files": 128 (a common default) is too few for several
    # node containers; kind's docs recommend 512.
    min_inotify_instances: int = 512
    tools: tuple[str, ...] = REQUIRED_TOOLS


@dataclass(frozen=True)
class HostFacts:
    """What the preflight found on the host. ``None`` means it could not be determined."""

    system: str
    docker_reachable: bool
    docker_error: str | None = None
    cpus: int | None = None
    free_memory_bytes: int | None = None
    free_disk_bytes: int | None = None
    disk_path: str = "/"
    tools_found: frozenset[str] = field(default_factory=frozenset)
    inotify_max_user_instances: int | None = None


class PreflightError(RuntimeError):
    """The lab host cannot run the lab; the message lists every problem with its fix."""


def _gib(value: int) -> str:
    return f"{value / GIB:.1f} GiB"


def failures(facts: HostFacts, requirements: Requirements | None = None) -> list[str]:
    """Every reason this host cannot run the lab, one sentence each with the fix; [] = fine."""
    requirements = requirements or Requirements()
    problems: list[str] = []
    if facts.system != "Linux":
        problems.append(
            f"This host runs {facts.system or 'an unknown system'}, not Linux: the lab's MetalLB "
            "addresses on the kind bridge network are reachable only from a Linux host, so run "
            "the lab on a Linux machine or VM with Docker."
        )
    missing = [tool for tool in requirements.tools if tool not in facts.tools_found]
    for tool in missing:
        problems.append(_missing_tool(tool))
    if "docker" not in missing and not facts.docker_reachable:
        detail = f" ({facts.docker_error})" if facts.docker_error else ""
        problems.append(
            f"Docker is installed but not reachable{detail}: start the Docker daemon "
            "(`sudo systemctl start docker`) and make sure your user may use it "
            "(`sudo usermod -aG docker $USER`, then log in again)."
        )
    if facts.cpus is None:
        problems.append(
            "The number of CPUs could not be determined: check that `nproc` works on this host."
        )
    elif facts.cpus < requirements.min_cpus:
        problems.append(
            f"This host has {facts.cpus} CPUs and the lab needs at least "
            f"{requirements.min_cpus}: use a machine or VM with more CPUs."
        )
    if facts.free_memory_bytes is None:
        if facts.system == "Linux":
            problems.append(
                "Free memory could not be read from /proc/meminfo (MemAvailable): check that "
                "/proc is mounted and readable."
            )
    elif facts.free_memory_bytes < requirements.min_free_memory_gib * GIB:
        problems.append(
            f"Only {_gib(facts.free_memory_bytes)} of memory is free and the lab needs "
            f"{requirements.min_free_memory_gib:g} GiB: stop other workloads (or old kind "
            "clusters: `kind get clusters`) or add memory."
        )
    if facts.free_disk_bytes is None:
        problems.append(
            f"Free disk space under {facts.disk_path} could not be determined: check that the "
            "path exists and is readable."
        )
    elif facts.free_disk_bytes < requirements.min_free_disk_gib * GIB:
        problems.append(
            f"Only {_gib(facts.free_disk_bytes)} is free under {facts.disk_path} (Docker's data "
            f"directory) and the lab needs {requirements.min_free_disk_gib:g} GiB: free space "
            "(e.g. `docker system prune`) or move Docker's data-root to a larger disk."
        )
    instances = facts.inotify_max_user_instances
    if instances is not None and instances < requirements.min_inotify_instances:
        wanted = requirements.min_inotify_instances
        problems.append(
            f"fs.inotify.max_user_instances is {instances} and the lab's node containers need "
            f"at least {wanted} (else pods fail with 'too many open files', a known kind "
            f"issue): raise it with `sudo sysctl fs.inotify.max_user_instances={wanted}` (and "
            "in /etc/sysctl.d/ to keep it)."
        )
    return problems


_INSTALL_HINTS = MappingProxyType(
    {
        "docker": "install Docker Engine (https://docs.docker.com/engine/install/)",
        "kind": "install kind (https://kind.sigs.k8s.io/docs/user/quick-start/#installation)",
        "kubectl": "install kubectl (https://kubernetes.io/docs/tasks/tools/)",
    }
)


def _missing_tool(tool: str) -> str:
    hint = _INSTALL_HINTS.get(tool, f"install {tool}")
    return f"`{tool}` is not on PATH: {hint} and make sure it is on PATH."


def should_run(dry_run: bool, environ: Mapping[str, str]) -> bool:
    """The preflight runs on ``pulumi up`` only, and not when explicitly skipped."""
    return not dry_run and environ.get(SKIP_ENV, "").strip() != "1"


def report(problems: list[str]) -> str:
    """The error text: every problem, then how to skip the check deliberately."""
    count = f"{len(problems)} problem{'s' if len(problems) != 1 else ''}"
    lines = "\n".join(f"  - {problem}" for problem in problems)
    return (
        f"lab host preflight failed ({count}):\n{lines}\n"
        f"Fix these and run again (set {SKIP_ENV}=1 to skip this check at your own risk)."
    )


# ----------------------------------------------------------------------- fact gathering (impure)


def _docker_info(timeout: float) -> tuple[bool, str | None, str | None]:
    """(reachable, error, docker root dir) from ``docker info``."""
    try:
        proc = subprocess.run(
            ["docker", "info", "--format", "{{json .}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return False, "docker not found", None
    except subprocess.TimeoutExpired:
        return False, f"`docker info` did not answer within {timeout:g}s", None
    if proc.returncode != 0:
        first = next((line for line in proc.stderr.splitlines() if line.strip()), "")
        return False, first.strip() or f"`docker info` exited with {proc.returncode}", None
    try:
        info = json.loads(proc.stdout)
    except json.JSONDecodeError:
        return True, None, None
    root = info.get("DockerRootDir") if isinstance(info, dict) else None
    return True, None, root if isinstance(root, str) and root else None


def _mem_available(meminfo: Path = Path("/proc/meminfo")) -> int | None:
    try:
        text = meminfo.read_text()
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemAvailable:"):
            parts = line.split()
            if len(parts) >= 2 and parts[1].isdigit():
                return int(parts[1]) * 1024
    return None


def _free_disk(path: str) -> tuple[int | None, str]:
    """(free bytes, the existing directory measured) for ``path`` or its nearest parent."""
    candidate = Path(path)
    while not candidate.exists() and candidate != candidate.parent:
        candidate = candidate.parent
    try:
        return shutil.disk_usage(candidate).free, str(candidate)
    except OSError:
        return None, str(candidate)


def _read_int(path: Path) -> int | None:
    try:
        return int(path.read_text().strip())
    except (OSError, ValueError):
        return None


def gather_facts(timeout: float = 20.0) -> HostFacts:
    """Look at this host. Never raises: what cannot be found is reported as unknown."""
    tools = frozenset(tool for tool in REQUIRED_TOOLS if shutil.which(tool))
    if "docker" in tools:
        reachable, error, root = _docker_info(timeout)
    else:
        reachable, error, root = False, None, None
    free_disk, disk_path = _free_disk(root or "/var/lib/docker")
    return HostFacts(
        system=platform.system(),
        docker_reachable=reachable,
        docker_error=error,
        cpus=os.cpu_count(),
        free_memory_bytes=_mem_available(),
        free_disk_bytes=free_disk,
        disk_path=disk_path,
        tools_found=tools,
        inotify_max_user_instances=_read_int(Path("/proc/sys/fs/inotify/max_user_instances")),
    )


def check_lab_host(
    dry_run: bool,
    environ: Mapping[str, str] | None = None,
    gather: Callable[[], HostFacts] | None = None,
) -> bool:
    """Run the preflight when it applies (``pulumi up`` without the skip variable) and raise
    PreflightError listing every problem. Returns whether it ran."""
    if not should_run(dry_run, os.environ if environ is None else environ):
        return False
    problems = failures((gather or gather_facts)())
    if problems:
        raise PreflightError(report(problems))
    return True


def main() -> int:
    """``python -m components.preflight``: check this host and say what to fix."""
    facts = gather_facts()
    problems = failures(facts)
    if problems:
        print(report(problems), file=sys.stderr)
        return 1
    print(
        f"lab host preflight passed: {facts.system}, {facts.cpus} CPUs, "
        f"{_gib(facts.free_memory_bytes or 0)} free memory, "
        f"{_gib(facts.free_disk_bytes or 0)} free under {facts.disk_path}, "
        f"{', '.join(sorted(facts.tools_found))} on PATH, Docker reachable"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
