"""Settings whose effect is visible only in what the pinned chart renders from the recorded
values: the Kamaji controller's limits, HAMi's one node-lock expiry and its webhook Service.
Rendered with Helm's engine from the pinned archives; skipped when they are absent."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from components.versions import HelmChart
from tests.support.charts import render, render_local
from tests.support.contracts import release_chart
from tests.support.harness import Recording, Registration

RELEASE = "kubernetes:helm.sh/v3:Release"


def _render(release: Registration) -> list[dict[str, Any]]:
    if "repositoryOpts" not in release.inputs:  # the local Kamaji chart pinned by content
        return render_local(
            Path(release.inputs["chart"]),
            release.inputs.get("values") or {},
            name=release.inputs["name"],
            namespace=release.inputs["namespace"],
        )
    chart = HelmChart(
        release.inputs["repositoryOpts"]["repo"], release.inputs["chart"], release.inputs["version"]
    )
    return render(
        chart,
        release.inputs.get("values") or {},
        name=release.inputs["name"],
        namespace=release.inputs["namespace"],
    )


def _releases(recording: Recording, chart: str) -> list[Registration]:
    found = [r for r in recording.of_type(RELEASE) if release_chart(r.inputs) == chart]
    assert found, f"{recording.stack}: no {chart} release"
    return found


def _containers(objects: list[dict[str, Any]], kind: str, name: str) -> list[dict[str, Any]]:
    (workload,) = [o for o in objects if o["kind"] == kind and o["metadata"]["name"] == name]
    containers: list[dict[str, Any]] = workload["spec"]["template"]["spec"]["containers"]
    return containers


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_kamaji_controller_is_not_at_the_charts_100mi(stack: str, recordings) -> None:
    (release,) = _releases(recordings(stack, False), "kamaji")
    (controller,) = _containers(_render(release), "Deployment", "kamaji")
    limits = controller["resources"]["limits"]
    assert limits["memory"] != "100Mi"
    assert limits["memory"] == release.inputs["values"]["resources"]["limits"]["memory"]


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_hami_states_one_node_lock_expiry(stack: str, recordings) -> None:
    """HAMi 2.10 takes the expiry from --node-lock-timeout (main.go:114 overwrites what
    HAMI_NODELOCK_EXPIRE set at init): the Deployment carries the flag and no such env."""
    for release in _releases(recordings(stack, False), "hami"):
        objects = _render(release)
        (deployment,) = [
            o
            for o in objects
            if o["kind"] == "Deployment" and o["metadata"]["name"].endswith("scheduler")
        ]
        containers = deployment["spec"]["template"]["spec"]["containers"]
        env = [e["name"] for c in containers for e in c.get("env") or []]
        assert "HAMI_NODELOCK_EXPIRE" not in env
        flags = [
            a
            for c in containers
            for a in [*(c.get("command") or []), *(c.get("args") or [])]
            if a.startswith("--node-lock-timeout=")
        ]
        assert len(flags) == 1, flags


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_hamis_webhook_service_opens_no_node_port(stack: str, recordings) -> None:
    for release in _releases(recordings(stack, False), "hami"):
        services = [o for o in _render(release) if o["kind"] == "Service"]
        (scheduler,) = [s for s in services if s["metadata"]["name"].endswith("scheduler")]
        assert scheduler["spec"]["type"] == "ClusterIP"
        assert all("nodePort" not in port for port in scheduler["spec"]["ports"])
