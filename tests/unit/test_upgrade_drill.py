"""TC-17's pure parts: which tenant moves to which version, and how the samples are judged."""

from __future__ import annotations

from typing import Any

import pytest

from components.kubernetes_versions import kind_versions, released_versions
from components.stack import parse_platform
from tests.acceptance.upgrade_drill import (
    NoUpgradeToDrillError,
    Sample,
    choose_upgrade,
    gpu_pods,
    next_version,
    phases,
    plan_or_fail,
)
from tests.support.harness import load_stack_config


def test_next_version_prefers_one_minor_then_a_patch() -> None:
    assert next_version("v1.34.3", kind_versions()) == "v1.35.0"
    assert next_version("v1.35.0", kind_versions()) is None  # kind v0.31.0's newest image
    assert next_version("v1.35.0", released_versions()) == "v1.36.3"
    assert next_version("v1.36.0", released_versions()) == "v1.36.3"


def test_the_tc04_tenant_is_upgraded_and_another_watched() -> None:
    raw = dict(load_stack_config("lab")["gpu-platform:platform"])
    raw["tenants"] = [dict(t) for t in raw["tenants"]]
    raw["tenants"][0]["kubernetesVersion"] = "v1.34.3"
    plan = choose_upgrade(parse_platform(raw), kind_versions(), preferred="tenant-a")
    assert plan is not None
    assert (plan.tenant, plan.previous, plan.target, plan.watched) == (
        "tenant-a",
        "v1.34.3",
        "v1.35.0",
        "tenant-b",
    )


def test_the_shipped_lab_gives_the_drill_an_upgrade() -> None:
    """TC-19 runs on the lab as Pulumi.lab.yaml ships it: tenant-a (the one TC-04 runs on) one
    minor behind, at a version kind v0.31.0 publishes, moves to the next while tenant-b is
    watched."""
    platform = parse_platform(load_stack_config("lab")["gpu-platform:platform"])
    plan = plan_or_fail(platform, kind_versions(), preferred="tenant-a")
    assert (plan.tenant, plan.previous, plan.target, plan.watched) == (
        "tenant-a",
        "v1.34.3",
        "v1.35.0",
        "tenant-b",
    )
    assert plan.previous in kind_versions()


def test_a_lab_with_nothing_to_upgrade_fails_the_drill() -> None:
    """After a drill (or with every tenant at kind's newest image) TC-19 fails, not skips."""
    raw = dict(load_stack_config("lab")["gpu-platform:platform"])
    raw["tenants"] = [{**t, "kubernetesVersion": "v1.35.0"} for t in raw["tenants"]]
    with pytest.raises(NoUpgradeToDrillError, match=r"tenant-a v1\.35\.0, tenant-b v1\.35\.0"):
        plan_or_fail(parse_platform(raw), kind_versions(), "tenant-a")


def _pod(uid: str, phase: str, restarts: int, gpu: bool = True) -> dict[str, Any]:
    limits = {"nvidia.com/gpu": "1"} if gpu else {}
    return {
        "metadata": {"uid": uid},
        "spec": {"containers": [{"resources": {"limits": limits}}]},
        "status": {"phase": phase, "containerStatuses": [{"restartCount": restarts}]},
    }


def test_phases_time_the_control_plane_and_workers_and_catch_a_restart() -> None:
    before = gpu_pods([_pod("a", "Running", 0), _pod("cpu", "Running", 0, gpu=False)])
    assert before == {"a": ("Running", 0)}
    samples = [
        Sample(100.0, "v1.35.0", before, "v1.34.3", ["v1.34.3"]),
        Sample(110.0, None, None, None, None),
        Sample(130.0, "v1.35.0", before, "v1.35.0", ["v1.34.3"]),
        Sample(190.0, "v1.35.0", gpu_pods([_pod("a", "Running", 1)]), "v1.35.0", ["v1.35.0"]),
    ]
    result = phases(samples, 100.0, "v1.35.0", before)
    assert result.control_plane_seconds == 30.0
    assert result.workers_seconds == 60.0
    assert result.api_gaps == 1
    assert result.pod_problems == ["pod a Running, 1 restarts at +90 s"]
