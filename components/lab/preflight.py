"""Lab host preflight: can this machine run the lab?

The lab runs a kind management cluster, two hosted control planes with a three-member etcd and a
``kindest/node`` worker per tenant on one Linux host with Docker (the lab report suggests at least
4 CPUs, 8 GB free memory and 20 GB free disk). MetalLB addresses live on the ``kind`` docker
bridge, which only a Linux host can reach directly.

Split in two so the decisions are testable without Docker:

* ``gather_facts()`` looks at the host (``docker info``, ``/proc/meminfo``, disk, ``PATH``,
  the inotify limits, the tools' versions, whether the lab's kind cluster already runs);
* ``failures(facts)`` is a pure function: one sentence per problem, each with its fix.

The free-disk threshold is 20 GiB under Docker's data directory (``Requirements``): the kind
node image, the management cluster's images, and per tenant a ``kindest/node`` worker whose
``/var`` volume pulls Calico's, HAMi's and the mock plugin's images. A host that knows it needs
less (a CI runner after freeing disk) lowers it with ``GPU_PLATFORM_MIN_FREE_DISK_GIB`` and says
why in ``GPU_PLATFORM_MIN_FREE_DISK_REASON``; the preflight prints both with the default, so the
log shows that the check was weakened and why.

The free-memory and free-disk checks measure what the lab still needs, so they are skipped when
the lab's kind cluster already runs: a second ``make lab`` (or a later ``pulumi up``) on a host
whose memory and disk the running lab itself uses must not be refused.

``check_lab_host()`` is what the ManagementCluster calls before it registers anything. It never
runs during ``pulumi preview`` (a PR runner has no Docker) nor with
``GPU_PLATFORM_SKIP_PREFLIGHT=1``. ``python -m components.lab.preflight`` runs the same check by
hand.

``check_kind_network()`` runs before registration in preview and up alike: the kind docker
network's subnets (known only on this host, ``docker network inspect``) against every configured
pod and service range, and pinned control-plane addresses against the pool carved from it.
"""

from __future__ import annotations

import contextlib
import json
import os
import platform
import re
import shutil
import subprocess
import sys
from collections.abc import Callable, Iterable, Mapping
from dataclasses import dataclass, field, replace
from pathlib import Path
from types import MappingProxyType

import yaml
from pulumi import RunError

from components.config import PlatformConfig
from components.lab import host_tools, registry_cache
from components.lab import network as lab_network
from components.lab.pinned_addresses import pins_outside_pool
from components.versions import KIND_RELEASE, PINNED

SKIP_ENV = "GPU_PLATFORM_SKIP_PREFLIGHT"
MIN_FREE_DISK_ENV = "GPU_PLATFORM_MIN_FREE_DISK_GIB"
MIN_FREE_DISK_REASON_ENV = "GPU_PLATFORM_MIN_FREE_DISK_REASON"
GIB = 1024**3
# What the lab's host needs on PATH. Inside `pulumi up` the CLI is the one running the program,
# so the program's own check leaves it out (LAB_HOST_TOOLS); `make preflight` checks it too.
LAB_HOST_TOOLS = ("docker", "kind", "kubectl")
REQUIRED_TOOLS = (*LAB_HOST_TOOLS, "pulumi")
DEFAULT_KIND_CLUSTER = "gpu-lab"
VERSION = re.compile(r"v?(\d+)\.(\d+)\.(\d+)")


def _version(text: str) -> tuple[int, int, int]:
    match = VERSION.search(text)
    if match is None:
        raise ValueError(f"no version in {text!r}")
    major, minor, patch = (int(part) for part in match.groups())
    return major, minor, patch


# The versions the README's Quick start names (tests/unit/test_preflight.py holds it to them):
# the kind release the lab's node images are pinned for, kubectl within one minor of the
# clusters' Kubernetes (kubectl's version skew policy), and a Pulumi CLI new enough for SDK 3.272.
MIN_KIND = _version(KIND_RELEASE)
CLUSTER_MINOR = _version(PINNED.kind_node_image.split(":", 1)[1])[1]


def kubectl_minors_for(cluster_minors: Iterable[int]) -> tuple[int, int]:
    """The kubectl minors within one of every cluster's (kubectl's version skew policy,
    kubernetes.io/releases/version-skew-policy/#kubectl): the management cluster's and each
    tenant's. ``low > high`` when no kubectl is: the clusters are more than two minors apart."""
    minors = set(cluster_minors)
    return max(minors) - 1, min(minors) + 1


def lab_cluster_minors(platform: PlatformConfig) -> list[int]:
    """The minors of the clusters the lab's kubectl talks to: the kind management cluster (its
    pinned node image) and every tenant's control plane."""
    tenants = [_version(platform.version_of(tenant))[1] for tenant in platform.tenants]
    return [CLUSTER_MINOR, *tenants]


KUBECTL_MINORS = kubectl_minors_for([CLUSTER_MINOR])
LAB_STACK_FILE = Path("Pulumi.lab.yaml")


def stack_file_minors(text: str) -> list[int]:
    """``lab_cluster_minors`` read from a lab stack file's raw text, for ``make preflight``, which
    runs before the program: the versions it names (``kubernetesVersion``, each tenant's); what
    it cannot read is left out (the program checks again, on the validated configuration)."""
    try:
        config = yaml.safe_load(text)["config"]["gpu-platform:platform"]
        named = [config.get("kubernetesVersion")]
        named += [tenant.get("kubernetesVersion") for tenant in config.get("tenants") or []]
    except (yaml.YAMLError, KeyError, TypeError, AttributeError):
        return [CLUSTER_MINOR]
    minors = [CLUSTER_MINOR]
    for version in named:
        with contextlib.suppress(ValueError, TypeError):
            minors.append(_version(version)[1])
    return minors


MIN_PULUMI = (3, 200, 0)


@dataclass(frozen=True)
class Requirements:
    """What the lab needs from its host (the lab report's suggested minimum)."""

    min_cpus: int = 4
    min_free_memory_gib: float = 8.0
    min_free_disk_gib: float = 20.0
    # What the registry caches take once warm, needed on top while they do not exist yet.
    registry_cache_gib: float = registry_cache.CACHE_DISK_GIB
    # kind's known issue "too many open files": 128 (a common default) is too few for several
    # node containers; kind's docs recommend 512.
    min_inotify_instances: int = 512
    tools: tuple[str, ...] = REQUIRED_TOOLS
    min_kind: tuple[int, int, int] = MIN_KIND
    kubectl_minors: tuple[int, int] = KUBECTL_MINORS
    min_pulumi: tuple[int, int, int] = MIN_PULUMI


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
    # Version text each tool printed (absent: not found, or it printed none).
    tool_versions: Mapping[str, str] = field(default_factory=dict)
    # The lab's kind cluster already exists (its memory and disk are already in use).
    lab_running: bool = False
    # Whether the registry caches' volumes exist (None: not looked at).
    registry_caches_present: bool | None = None


class PreflightError(RunError, RuntimeError):
    """The lab host cannot run the lab; the message lists every problem with its fix. A
    RunError: the CLI prints it as its message alone, without a traceback."""


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
    problems += free_resource_failures(facts, requirements)
    problems += tool_version_failures(facts, requirements)
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


def free_resource_failures(facts: HostFacts, requirements: Requirements) -> list[str]:
    """Free memory and disk for a lab still to be created; nothing when it already runs (its
    own containers and images are what use them)."""
    if facts.lab_running:
        return []
    problems: list[str] = []
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
    elif facts.free_disk_bytes < _disk_needed(facts, requirements) * GIB:
        caches = (
            f" ({requirements.registry_cache_gib:g} of them for the registry caches it creates)"
            if facts.registry_caches_present is False
            else ""
        )
        problems.append(
            f"Only {_gib(facts.free_disk_bytes)} is free under {facts.disk_path} (Docker's data "
            f"directory) and the lab needs {_disk_needed(facts, requirements):g} GiB{caches}: "
            "free space (e.g. `docker system prune`) or move Docker's data-root to a larger disk."
        )
    return problems


def _disk_needed(facts: HostFacts, requirements: Requirements) -> float:
    """The free-disk threshold, plus the registry caches' share while they do not exist."""
    extra = requirements.registry_cache_gib if facts.registry_caches_present is False else 0.0
    return requirements.min_free_disk_gib + extra


def _text(version: tuple[int, ...]) -> str:
    return "v" + ".".join(str(part) for part in version)


def tool_version_failures(facts: HostFacts, requirements: Requirements) -> list[str]:
    """kind, kubectl and the Pulumi CLI at the versions the README names; a tool whose version
    could not be read is not refused (it is on PATH; the run itself will tell)."""
    problems: list[str] = []
    found: dict[str, tuple[int, int, int]] = {}
    for tool in ("kind", "kubectl", "pulumi"):
        text = facts.tool_versions.get(tool)
        if tool in requirements.tools and tool in facts.tools_found and text:
            try:
                found[tool] = _version(text)
            except ValueError:
                continue
    if "kind" in found and found["kind"] < requirements.min_kind:
        problems.append(
            f"kind {_text(found['kind'])} is older than {_text(requirements.min_kind)}, the "
            f"release the lab's node images are pinned for: {_INSTALL_HINTS['kind']}, "
            f"{_text(requirements.min_kind)} or later."
        )
    low, high = requirements.kubectl_minors
    if low > high:
        problems.append(
            f"The lab's clusters run v1.{high - 1} to v1.{low + 1}: no kubectl is within one "
            "minor version of all of them (kubectl's version skew policy); bring the tenants' "
            "kubernetesVersion within two minors of each other and of the management cluster."
        )
    elif "kubectl" in found and not low <= found["kubectl"][1] <= high:
        problems.append(
            f"kubectl {_text(found['kubectl'])} is more than one minor version away from a "
            f"cluster the lab runs: {_INSTALL_HINTS['kubectl']}, v1.{low} to v1.{high}."
        )
    if "pulumi" in found and found["pulumi"] < requirements.min_pulumi:
        problems.append(
            f"The Pulumi CLI {_text(found['pulumi'])} is older than "
            f"{_text(requirements.min_pulumi)}: {_INSTALL_HINTS['pulumi']}, "
            f"{_text(requirements.min_pulumi)} or later."
        )
    return problems


# The official install command of each tool (components/lab/host_tools.py, which
# scripts/preflight.py prints too when a make target finds one missing).
_INSTALL_HINTS = host_tools.install_hints()


def _missing_tool(tool: str) -> str:
    return host_tools.missing_tool(tool, _INSTALL_HINTS)


def with_environment(
    requirements: Requirements, environ: Mapping[str, str]
) -> tuple[Requirements, str | None]:
    """``requirements`` with the free-disk threshold that ``GPU_PLATFORM_MIN_FREE_DISK_GIB``
    lowers it to, and the line to print about it (None: the default applies). Only lowering is
    accepted: a bad value fails here, naming the variable, before any fact is gathered."""
    raw = environ.get(MIN_FREE_DISK_ENV, "").strip()
    if not raw:
        return requirements, None
    default = requirements.min_free_disk_gib
    try:
        wanted = float(raw)
    except ValueError:
        wanted = float("nan")
    if not 0 < wanted <= default:  # also false for nan
        raise PreflightError(
            f"lab host preflight: {MIN_FREE_DISK_ENV}={raw!r} is not a number of GiB above 0 "
            f"and at most the default {default:g}: set it to e.g. 14, or unset it."
        )
    reason = environ.get(MIN_FREE_DISK_REASON_ENV, "").strip() or (
        f"no reason given in {MIN_FREE_DISK_REASON_ENV}"
    )
    notice = (
        f"lab host preflight: free-disk threshold lowered from {default:g} to {wanted:g} GiB by "
        f"{MIN_FREE_DISK_ENV} ({reason}); the lab may run out of disk below {default:g} GiB."
    )
    return replace(requirements, min_free_disk_gib=wanted), notice


def skipped(environ: Mapping[str, str]) -> bool:
    """Whether the user skipped every environment check (``GPU_PLATFORM_SKIP_PREFLIGHT=1``)."""
    return environ.get(SKIP_ENV, "").strip() == "1"


def should_run(dry_run: bool, environ: Mapping[str, str]) -> bool:
    """The preflight runs on ``pulumi up`` only, and not when explicitly skipped."""
    return not dry_run and not skipped(environ)


def report(problems: list[str]) -> str:
    """The error text: every problem (one line for one), then how to skip the check."""
    skip = f"set {SKIP_ENV}=1 to skip this check at your own risk"
    if len(problems) == 1:
        return f"lab host preflight failed: {problems[0]} (Fix it and run again, or {skip}.)"
    lines = "\n".join(f"  - {problem}" for problem in problems)
    return (
        f"lab host preflight failed ({len(problems)} problems):\n{lines}\n"
        f"Fix these and run again ({skip})."
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


# How each tool prints its version: ``kind v0.31.0 go1.25.5 linux/amd64``, ``v3.272.0``, and
# kubectl's JSON ``{"clientVersion": {"gitVersion": "v1.35.0", ...}}``.
_VERSION_COMMANDS = MappingProxyType(
    {
        "kind": ("kind", "version"),
        "kubectl": ("kubectl", "version", "--client", "--output=json"),
        "pulumi": ("pulumi", "version"),
    }
)


def _run(command: tuple[str, ...], timeout: float) -> str | None:
    """stdout of a command that succeeded, else None (never raises)."""
    try:
        proc = subprocess.run(
            list(command), capture_output=True, text=True, timeout=timeout, check=False
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def _tool_versions(tools: frozenset[str], timeout: float) -> dict[str, str]:
    versions: dict[str, str] = {}
    for tool, command in _VERSION_COMMANDS.items():
        if tool not in tools:
            continue
        out = _run(command, timeout)
        if out is None:
            continue
        if tool == "kubectl":
            with contextlib.suppress(ValueError, KeyError, TypeError):
                out = str(json.loads(out)["clientVersion"]["gitVersion"])
        versions[tool] = out.strip()
    return versions


def _kind_cluster_exists(name: str, timeout: float) -> bool:
    """``kind get clusters`` lists ``name`` (kind asks Docker, so False when Docker is down)."""
    out = _run(("kind", "get", "clusters"), timeout)
    return out is not None and name in out.split()


def gather_facts(timeout: float = 20.0, kind_cluster: str = DEFAULT_KIND_CLUSTER) -> HostFacts:
    """Look at this host. Never raises: what cannot be found is reported as unknown."""
    tools = frozenset(tool for tool in REQUIRED_TOOLS if shutil.which(tool))
    if "docker" in tools:
        reachable, error, root = _docker_info(timeout)
    else:
        reachable, error, root = False, None, None
    free_disk, disk_path = _free_disk(root or "/var/lib/docker")
    running = reachable and "kind" in tools and _kind_cluster_exists(kind_cluster, timeout)
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
        tool_versions=_tool_versions(tools, timeout),
        lab_running=running,
        registry_caches_present=(
            registry_cache.cache_volumes_present(timeout) if reachable else None
        ),
    )


def check_lab_host(
    dry_run: bool,
    environ: Mapping[str, str] | None = None,
    gather: Callable[[], HostFacts] | None = None,
    kind_cluster: str = DEFAULT_KIND_CLUSTER,
    cluster_minors: Iterable[int] = (CLUSTER_MINOR,),
) -> bool:
    """Run the preflight when it applies (``pulumi up`` without the skip variable) and raise
    PreflightError listing every problem. Returns whether it ran. The CLI is not looked for:
    it is what runs the program. ``cluster_minors``: the stack's clusters
    (``lab_cluster_minors``), which kubectl must be within one minor of."""
    environ = os.environ if environ is None else environ
    if not should_run(dry_run, environ):
        return False
    requirements, notice = with_environment(
        Requirements(tools=LAB_HOST_TOOLS, kubectl_minors=kubectl_minors_for(cluster_minors)),
        environ,
    )
    if notice:
        print(notice, file=sys.stderr)
    facts = gather() if gather is not None else gather_facts(kind_cluster=kind_cluster)
    problems = failures(facts, requirements)
    if problems:
        raise PreflightError(report(problems))
    return True


# ------------------------------------------------ the kind network against the configured ranges


def inspect_docker_network(name: str, timeout: float = 20.0) -> tuple[str, str]:
    """``("present", inspect JSON)``, ``("absent", "")`` or ``("unknown", why)`` for the docker
    network ``name``. Docker answers a missing network with "network NAME not found"
    (moby/moby v28.5.2 libnetwork/error.go:12; older clients print "No such network")."""
    try:
        proc = subprocess.run(
            ["docker", "network", "inspect", name],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except FileNotFoundError:
        return "unknown", "docker is not on PATH"
    except (OSError, subprocess.TimeoutExpired) as error:
        return "unknown", f"`docker network inspect {name}` failed ({error})"
    if proc.returncode == 0:
        return "present", proc.stdout
    said = " ".join(proc.stderr.split())
    if re.search(r"not found|no such network", said, re.I):
        return "absent", ""
    return "unknown", said or f"`docker network inspect {name}` exited with {proc.returncode}"


def configured_ranges(platform: PlatformConfig) -> list[tuple[str, str]]:
    """Every range the stack config routes inside the clusters, with its config key."""
    kind = platform.kind
    ranges = [
        ("management.kind.podSubnet", kind.pod_subnet),
        ("management.kind.serviceSubnet", kind.service_subnet),
    ]
    for index, tenant in enumerate(platform.tenants):
        ranges.append((f"tenants[{index}].network.podCidr", tenant.network.pod_cidr))
        ranges.append((f"tenants[{index}].network.serviceCidr", tenant.network.service_cidr))
    return ranges


def check_kind_network(
    platform: PlatformConfig,
    environ: Mapping[str, str] | None = None,
    inspect: Callable[[str], tuple[str, str]] | None = None,
) -> tuple[list[str], list[str]]:
    """Refuse, before anything is registered (preview and up alike), a configured range that
    overlaps the kind docker network, or a pinned control-plane address outside the pool carved
    from it: only this host knows the network's subnet. Returns ``(info, warnings)`` to log:
    what was checked, or why nothing could be (no Docker, no network yet). Skipped with
    ``GPU_PLATFORM_SKIP_PREFLIGHT=1``."""
    environ = os.environ if environ is None else environ
    if skipped(environ):
        return [], []
    name = platform.kind.docker_network
    ranges = configured_ranges(platform)
    state, text = (inspect or inspect_docker_network)(name)
    if state == "absent":
        first, *rest = lab_network.absent_network_notes(name, ranges)
        return [f"kind network check: {first}"], [f"kind network check: {n}" for n in rest]
    if state != "present":
        return [], [f"kind network check: the range of docker network {name!r} is unknown ({text})"]
    problems = lab_network.kind_network_problems(
        name, lab_network.network_subnets(text), ranges
    ) + pins_outside_pool(platform, text)
    if len(problems) == 1:
        raise lab_network.LabNetworkError(f"kind network check failed: {problems[0]}")
    if problems:
        lines = "\n".join(f"  - {problem}" for problem in problems)
        raise lab_network.LabNetworkError(
            f"kind network check failed ({len(problems)} problems):\n{lines}"
        )
    subnets = ", ".join(str(net) for net in lab_network.network_subnets(text))
    return [f"kind network check passed: no configured range overlaps {name!r} ({subnets})"], []


def main(argv: list[str] | None = None) -> int:
    """``python -m components.lab.preflight [kind cluster name]``: check this host, the Pulumi CLI
    included, and say what to fix."""
    args = sys.argv[1:] if argv is None else argv
    if skipped(os.environ):
        # The refusal below advertises the variable: `make preflight` (and so `make lab`)
        # honours it like the in-program check does (newcomer review, friction list).
        print(
            f"lab host preflight skipped ({SKIP_ENV}=1): nothing about this host was checked; "
            "the lab may fail later on what it would have caught",
            file=sys.stderr,
        )
        return 0
    minors = (
        stack_file_minors(LAB_STACK_FILE.read_text())
        if LAB_STACK_FILE.is_file()
        else [CLUSTER_MINOR]
    )
    try:
        requirements, notice = with_environment(
            Requirements(kubectl_minors=kubectl_minors_for(minors)), os.environ
        )
    except PreflightError as error:
        print(error, file=sys.stderr)
        return 1
    if notice:
        print(notice, file=sys.stderr)
    facts = gather_facts(kind_cluster=args[0] if args else DEFAULT_KIND_CLUSTER)
    problems = failures(facts, requirements)
    if problems:
        print(report(problems), file=sys.stderr)
        return 1
    versions = ", ".join(f"{tool} {text}" for tool, text in sorted(facts.tool_versions.items()))
    resources = (
        "the lab already runs (free memory and disk not measured)"
        if facts.lab_running
        else f"{_gib(facts.free_memory_bytes or 0)} free memory, "
        f"{_gib(facts.free_disk_bytes or 0)} free under {facts.disk_path}"
    )
    print(
        f"lab host preflight passed: {facts.system}, {facts.cpus} CPUs, {resources}, "
        f"{', '.join(sorted(facts.tools_found))} on PATH ({versions}), Docker reachable"
    )
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
