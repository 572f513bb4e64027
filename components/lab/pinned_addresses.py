"""Lab control-plane pins checked against the MetalLB pool before anything is registered.

The pool is the top of the kind docker network's IPv4 subnet (``components.lab.network``), known
only from the host. When that network exists, every ``controlPlane.address`` pin is checked
against the pool the program would carve from it, at the start of preview and ``up`` alike, and a
pin outside it fails as one line naming the key, before the first registration (it used to fail
only inside ``up``, in the apply that reads the pool, after 34 registrations). When the network
does not exist yet (the first ``up`` creates it), the pool cannot be known: the program says so
and the apply-time check (``components.lab.management.tenant_address``) still guards the pin.

``GPU_PLATFORM_KIND_NETWORK_INSPECT`` overrides the question: a path to ``docker network inspect``
output, or empty for "no facts" (what the offline tests use).
"""

from __future__ import annotations

import os
import subprocess
from collections.abc import Callable, Mapping
from pathlib import Path

import pulumi

from components.config import PlatformConfig, problem_message
from components.lab import network as lab_network

INSPECT_ENV = "GPU_PLATFORM_KIND_NETWORK_INSPECT"


def read_network_inspect(
    network: str, environ: Mapping[str, str] | None = None, timeout: float = 15.0
) -> str | None:
    """``docker network inspect <network>`` output, or None when there is no such network (or no
    Docker) to ask."""
    environ = os.environ if environ is None else environ
    if INSPECT_ENV in environ:
        path = environ[INSPECT_ENV]
        return Path(path).read_text() if path else None
    try:
        proc = subprocess.run(
            ["docker", "network", "inspect", network],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return None
    return proc.stdout if proc.returncode == 0 else None


def pins(platform: PlatformConfig) -> list[tuple[int, str, str]]:
    """Every pinned ``(index, tenant, controlPlane.address)`` of the stack."""
    return [
        (index, tenant.name, tenant.control_plane.address)
        for index, tenant in enumerate(platform.tenants)
        if tenant.control_plane.address is not None
    ]


def pins_outside_pool(platform: PlatformConfig, inspect: str) -> list[str]:
    """One line per pinned address outside the pool carved from ``inspect`` (or the pool's own
    problem); the kind network preflight (``components.lab.preflight.check_kind_network``) makes
    the same check with it."""
    return lab_network.pinned_pool_problems(
        inspect, platform.kind.metallb_pool_size, pins(platform)
    )


def check_pinned_addresses(
    platform: PlatformConfig,
    read: Callable[[str], str | None] = read_network_inspect,
    log: Callable[[str], None] = pulumi.log.info,
) -> None:
    """Raise one LabNetworkError listing every pin outside the pool, when the pool is known."""
    if all(tenant.control_plane.address is None for tenant in platform.tenants):
        return
    network = platform.kind.docker_network
    inspect = read(network)
    if inspect is None:
        log(
            f"controlPlane.address pins not checked against the MetalLB pool yet: docker "
            f"network {network!r} does not exist (kind creates it); they are checked when the "
            "pool is read"
        )
        return
    problems = pins_outside_pool(platform, inspect)
    if problems:
        raise lab_network.LabNetworkError(
            problem_message("controlPlane.address pins outside the lab's MetalLB pool", problems)
            if len(problems) > 1
            else problems[0]
        )
