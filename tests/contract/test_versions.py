"""The pins in components/versions.py are the releases the upstream copies were taken from, and
scripts/fetch-upstream.sh downloads those same releases."""

from __future__ import annotations

import re
from collections.abc import Callable
from pathlib import Path

import pytest

from components.versions import PINNED
from tests.support.harness import REPO_ROOT

# upstream folder -> the pinned version it must come from.
EXPECTED_TAGS = {
    "hami": PINNED.hami.version,
    "kamaji": PINNED.kamaji_image_tag,
    "kamaji-etcd": PINNED.kamaji_etcd.version,
    "metallb": PINNED.metallb.version,
    "cert-manager": PINNED.cert_manager.version,
    "tigera-operator": PINNED.tigera_operator.version,
    # The Installation CRD, from the crd.projectcalico.org.v1 chart.
    "calico": PINNED.calico_crds.version,
    "gpu-operator": PINNED.gpu_operator.version,
    "cluster-api-operator": PINNED.cluster_api_operator.version,
    "cluster-api": PINNED.cluster_api,
    "capm3": PINNED.metal3_provider,
}


def _normal(tag: str) -> str:
    return tag.removeprefix("v")


def _source_tags(sources: Path) -> dict[str, set[str]]:
    """Folder -> tags named in SOURCES.md's table."""
    tags: dict[str, set[str]] = {}
    for line in sources.read_text().splitlines():
        cells = [c.strip().strip("`") for c in line.split("|")]
        if len(cells) > 6 and "/" in cells[1] and re.match(r"^v?\d|^\d", cells[5] or ""):
            tags.setdefault(cells[1].split("/")[0], set()).add(cells[5])
    return tags


@pytest.mark.parametrize("folder", sorted(EXPECTED_TAGS))
def test_pins_match_the_upstream_copies(folder: str, upstream_file: Callable[[str], Path]) -> None:
    tags = _source_tags(upstream_file("SOURCES.md")).get(folder)
    assert tags, f"SOURCES.md lists no files for {folder}"
    assert {_normal(t) for t in tags} == {_normal(EXPECTED_TAGS[folder])}


def test_hami_chart_version_is_the_pinned_one(upstream_dir: Path) -> None:
    chart = (upstream_dir / "hami" / "Chart.yaml").read_text()
    assert re.search(rf"^version:\s*{re.escape(PINNED.hami.version)}\s*$", chart, re.M)


def test_fetch_script_downloads_the_pinned_releases() -> None:
    script = (REPO_ROOT / "scripts" / "fetch-upstream.sh").read_text()
    fetched = {
        (repo, tag)
        for repo, tag in re.findall(r"fetch\s+([\w.-]+/[\w.-]+)\s+([\w.+-]+)\s", script)
        if repo != "<repo>"
    }
    expected = {
        ("Project-HAMi/HAMi", "v" + _normal(PINNED.hami.version)),
        ("clastix/kamaji", PINNED.kamaji_image_tag),
        ("clastix/kamaji-etcd", "v" + _normal(PINNED.kamaji_etcd.version)),
        ("metallb/metallb", "v" + _normal(PINNED.metallb.version)),
        ("cert-manager/cert-manager", PINNED.cert_manager.version),
        ("projectcalico/calico", PINNED.tigera_operator.version),
        ("NVIDIA/gpu-operator", PINNED.gpu_operator.version),
        (
            "kubernetes-sigs/cluster-api-operator",
            "v" + _normal(PINNED.cluster_api_operator.version),
        ),
        ("kubernetes-sigs/cluster-api", PINNED.cluster_api),
        ("metal3-io/cluster-api-provider-metal3", PINNED.metal3_provider),
        ("clastix/cluster-api-control-plane-provider-kamaji", PINNED.kamaji_control_plane_provider),
        ("Project-HAMi/mock-device-plugin", "v" + PINNED.hami_mock_device_plugin_tag),
    }
    assert fetched == expected
