"""TC-19's parts: which tenant to upgrade to which version, and what to sample while it runs.

Pure planning (``choose_upgrade``, ``phases``) is unit-tested offline; ``Sampler`` polls live
clusters from a thread while ``pulumi up`` runs.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.config import PlatformConfig
from components.kubernetes_versions import Version, upgrade_problem


@dataclass(frozen=True)
class UpgradePlan:
    tenant: str
    previous: str
    target: str
    watched: str
    """The tenant that must not notice: its API answers and its GPU pods keep running."""


def next_version(previous: str, allowed: Sequence[str]) -> str | None:
    """One minor up (its newest allowed patch) where one is allowed, else the newest later patch
    of the same minor; None when nothing later is allowed."""
    old = Version.parse(previous)
    later = sorted(
        (v for v in allowed if upgrade_problem(previous, v, allowed) is None and v != previous),
        key=Version.parse,
    )
    minor_up = [v for v in later if Version.parse(v).minor == old.minor + 1]
    if minor_up:
        return minor_up[-1]
    return later[-1] if later else None


def choose_upgrade(
    platform: PlatformConfig, allowed: Sequence[str], preferred: str | None
) -> UpgradePlan | None:
    """The tenant to upgrade — ``preferred`` (the one TC-04 runs on) when it can move, else the
    first that can — and another tenant to watch; None when no tenant can move or there is no
    second tenant."""
    names = [t.name for t in platform.tenants]
    if len(names) < 2:
        return None
    order = sorted(platform.tenants, key=lambda t: t.name != preferred)
    for tenant in order:
        previous = platform.version_of(tenant)
        target = next_version(previous, allowed)
        if target is not None:
            watched = next(name for name in names if name != tenant.name)
            return UpgradePlan(tenant.name, previous, target, watched)
    return None


class NoUpgradeToDrillError(AssertionError):
    """The deployed stack gives the drill nothing to do: a failure, not a skip, since the lab
    stack file ships a tenant one minor behind for it."""


def plan_or_fail(
    platform: PlatformConfig, allowed: Sequence[str], preferred: str | None
) -> UpgradePlan:
    """``choose_upgrade``, or a failure saying why there is nothing to upgrade and how to get a
    stack that has: ``Pulumi.lab.yaml`` ships tenant-a at v1.34.3, one minor below kind v0.31.0's
    newest image, and a drill that ran leaves it at v1.35.0 (``pulumi config set``)."""
    plan = choose_upgrade(platform, allowed, preferred)
    if plan is not None:
        return plan
    versions = ", ".join(f"{t.name} {platform.version_of(t)}" for t in platform.tenants)
    raise NoUpgradeToDrillError(
        f"no tenant can move to a later version of {', '.join(allowed)} ({versions}), or there "
        "is no second tenant to watch: deploy the lab as Pulumi.lab.yaml ships it (tenant-a one "
        "minor behind; after a drill, `git checkout Pulumi.lab.yaml`, make destroy, make lab)"
    )


@dataclass
class Sample:
    at: float
    watched_version: str | None
    watched_pods: dict[str, tuple[str, int]] | None
    """uid -> (phase, restarts) of the watched tenant's GPU pods; None when unreadable."""
    target_version: str | None
    target_kubelets: list[str] | None
    error: str = ""


def gpu_pods(items: list[dict[str, Any]]) -> dict[str, tuple[str, int]]:
    """uid -> (phase, total restarts) of the pods that ask for ``nvidia.com/gpu``."""
    found: dict[str, tuple[str, int]] = {}
    for pod in items:
        containers = (pod.get("spec") or {}).get("containers") or []
        if not any(
            "nvidia.com/gpu" in ((c.get("resources") or {}).get("limits") or {}) for c in containers
        ):
            continue
        statuses = (pod.get("status") or {}).get("containerStatuses") or []
        restarts = sum(int(s.get("restartCount") or 0) for s in statuses)
        uid = str((pod.get("metadata") or {}).get("uid"))
        found[uid] = (str((pod.get("status") or {}).get("phase")), restarts)
    return found


@dataclass
class Phases:
    control_plane_seconds: float | None
    workers_seconds: float | None
    api_gaps: int
    pod_problems: list[str] = field(default_factory=list)


def phases(
    samples: Sequence[Sample], started: float, target: str, before: dict[str, tuple[str, int]]
) -> Phases:
    """When the upgraded API first served ``target`` (control-plane phase), when every kubelet of
    the tenant ran it too (worker phase, counted from the control plane's end), how many samples
    of the watched API failed, and every watched GPU pod that stopped running, restarted or
    went away."""
    served_at = next(
        (s.at for s in samples if s.target_version and s.target_version.startswith(target)), None
    )
    workers_at = next(
        (
            s.at
            for s in samples
            if served_at is not None
            and s.at >= served_at
            and s.target_kubelets
            and all(v.startswith(target) for v in s.target_kubelets)
        ),
        None,
    )
    problems: list[str] = []
    for sample in samples:
        if sample.watched_pods is None:
            continue
        for uid, (_phase, restarts) in before.items():
            seen = sample.watched_pods.get(uid)
            if seen is None:
                problems.append(f"pod {uid} gone at +{sample.at - started:.0f} s")
            elif seen[0] != "Running" or seen[1] > restarts:
                problems.append(
                    f"pod {uid} {seen[0]}, {seen[1]} restarts at +{sample.at - started:.0f} s"
                )
    return Phases(
        control_plane_seconds=None if served_at is None else served_at - started,
        workers_seconds=None if workers_at is None or served_at is None else workers_at - served_at,
        api_gaps=sum(1 for s in samples if s.watched_version is None),
        pod_problems=sorted(set(problems))[:10],
    )


class Sampler(threading.Thread):
    """Calls ``read`` every ``interval`` seconds until stopped, keeping each Sample."""

    def __init__(self, read: Callable[[], Sample], interval: float = 2.0) -> None:
        super().__init__(daemon=True)
        self.read = read
        self.interval = interval
        self.samples: list[Sample] = []
        self._stop_event = threading.Event()

    def run(self) -> None:
        while not self._stop_event.is_set():
            self.samples.append(self.read())
            self._stop_event.wait(self.interval)

    def stop(self) -> list[Sample]:
        self._stop_event.set()
        self.join(timeout=60)
        return self.samples


def now() -> float:
    return time.monotonic()
