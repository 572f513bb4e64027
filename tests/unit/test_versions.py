"""The pins that are not checked against ../shared/upstream: kind and its node images."""

from __future__ import annotations

from pathlib import Path

from components.versions import KIND_NODE_DIGESTS, PINNED, kind_node_image

REPO = Path(__file__).resolve().parents[2]


def test_kind_node_images_are_pinned_by_the_digest_kind_published() -> None:
    # kind v0.31.0, pkg/apis/config/defaults/image.go and its release notes.
    assert kind_node_image("v1.35.0") == (
        "kindest/node:v1.35.0@sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
    )
    assert PINNED.kind_node_image == kind_node_image("v1.35.0")


def test_a_version_without_a_known_digest_falls_back_to_its_tag() -> None:
    assert "v1.34.2" not in KIND_NODE_DIGESTS
    assert kind_node_image("v1.34.2") == "kindest/node:v1.34.2"


def test_the_nightly_lab_and_the_readme_use_the_pinned_kind_release() -> None:
    workflow = (REPO / ".github" / "workflows" / "lab-e2e.yml").read_text()
    assert f"https://kind.sigs.k8s.io/dl/{PINNED.kind}/" in workflow
    assert f"kind](https://kind.sigs.k8s.io) {PINNED.kind}" in (REPO / "README.md").read_text()
