"""Every Helm release the program declares uses keys its pinned chart has, at the pinned version."""

from __future__ import annotations

from pathlib import Path

import pytest

from components.chart_cache import chart_input, kamaji_chart_input, release_chart_name
from components.versions import PINNED, HelmChart
from tests.support.contracts import (
    CHART_DIRS,
    VALUELESS_CHARTS,
    missing_values_keys,
    release_chart,
)
from tests.support.harness import Recording

RELEASE = "kubernetes:helm.sh/v3:Release"
PINNED_CHARTS = {
    value.chart: value for value in vars(PINNED).values() if isinstance(value, HelmChart)
}


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_release_values_keys_exist_in_pinned_charts(
    stack: str, recordings, upstream_dir: Path
) -> None:
    recording: Recording = recordings(stack, False)
    releases = recording.of_type(RELEASE)
    assert releases, f"{stack}: no Helm releases registered"
    problems = []
    for release in releases:
        chart = release_chart(release.inputs)
        if chart not in CHART_DIRS and chart not in VALUELESS_CHARTS:
            problems.append(f"{release.name}: chart {chart!r} has no pinned upstream copy")
            continue
        for key in missing_values_keys(upstream_dir, chart, release.inputs.get("values") or {}):
            problems.append(f"{release.name} ({chart}): unknown values key {key}")
    assert problems == []


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_releases_use_the_pinned_chart_versions(stack: str, recordings) -> None:
    recording: Recording = recordings(stack, False)
    problems = []
    for release in recording.of_type(RELEASE):
        chart = release.inputs.get("chart")
        if chart == kamaji_chart_input():
            # Pinned by content, not by version: no repository, no version (chart_cache.py).
            if release.inputs.get("version") or release.inputs.get("repositoryOpts"):
                problems.append(f"{release.name}: the local Kamaji chart takes no version/repo")
            continue
        pinned = PINNED_CHARTS.get(release_chart_name(str(chart)))
        if pinned is None:
            problems.append(f"{release.name}: chart {chart!r} is not a pinned archive")
            continue
        if chart != chart_input(pinned):
            problems.append(f"{release.name}: chart {chart!r} is not {chart_input(pinned)!r}")
        if release.inputs.get("version") != pinned.version:
            problems.append(
                f"{release.name}: version {release.inputs.get('version')} != {pinned.version}"
            )
        # Installed from the verified archive: a repository would be asked at every install.
        if release.inputs.get("repositoryOpts"):
            problems.append(f"{release.name}: names a repository")
    assert problems == []


def test_the_checker_flags_an_unknown_key(upstream_dir: Path) -> None:
    """The contract check itself can fail: the old HAMi key `imageTag` no longer exists."""
    assert missing_values_keys(
        upstream_dir, "hami", {"scheduler": {"kubeScheduler": {"imageTag": "v1.35.0"}}}
    ) == ["scheduler.kubeScheduler.imageTag"]
    assert missing_values_keys(upstream_dir, "kamaji", {"etcd": {"deploy": False}}) == [
        "etcd.deploy"
    ]
    assert (
        missing_values_keys(
            upstream_dir, "kamaji", {"kamaji-etcd": {"datastore": {"name": "default"}}}
        )
        == []
    )
    # A chart without values takes none (its empty defaults are not a free-form map).
    assert missing_values_keys(upstream_dir, "crd.projectcalico.org.v1", {"a": {"b": 1}}) == ["a.b"]
