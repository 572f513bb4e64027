"""The lab's committed image list is what the rendered lab stack runs: every image of every
rendered chart and program manifest (and what Kamaji and the tigera-operator create), with the
table in docs/lab.md; a chart that adds an image, or one from a registry without a cache, fails
here until `make docs` regenerates the list (and then the program's cache test checks it)."""

from __future__ import annotations

import copy
from collections.abc import Callable

from components.lab import lab_images
from components.versions import PINNED
from tests.render.conftest import platform_block
from tests.support.harness import REPO_ROOT
from tests.support.lab_images import derived, tenant_versions
from tests.support.rendered_stack import RenderedStack


def test_the_committed_list_is_the_rendered_stacks(
    rendered: Callable[[str], RenderedStack],
) -> None:
    images = derived(rendered("lab"), platform_block("lab"))
    assert lab_images.PINS_FILE.read_text() == lab_images.to_json(images), (
        "components/pins/lab-images.json is stale: run `make docs`"
    )


def test_docs_show_the_committed_list() -> None:
    doc = (REPO_ROOT / "docs" / "lab.md").read_text()
    block = lab_images.markdown(lab_images.pinned())
    assert block in doc, "docs/lab.md's image table is stale: run `make docs`"


def test_every_rendered_workload_image_is_listed(
    rendered: Callable[[str], RenderedStack],
) -> None:
    stack = rendered("lab")
    listed = {e.image for e in lab_images.pinned()}
    found = {image for placed in stack.objects for image in lab_images.pod_images(placed.obj)}
    assert found, "no workload images rendered"
    assert found - listed == set()


def test_an_image_from_a_new_registry_is_caught(
    rendered: Callable[[str], RenderedStack],
) -> None:
    stack = rendered("lab")
    workload = next(
        p for p in stack.objects if p.cluster.name != "management" and p.kind == "Deployment"
    )
    changed = copy.deepcopy(workload.obj)
    changed["spec"]["template"]["spec"]["containers"][0]["image"] = "ghcr.io/example/new:1.0"
    placed = [(p.cluster.name, p.obj) for p in stack.objects] + [(workload.cluster.name, changed)]
    images = lab_images.derive(
        placed, tenant_versions(platform_block("lab")), PINNED.tigera_operator.version
    )
    assert lab_images.to_json(images) != lab_images.PINS_FILE.read_text()
    assert set(lab_images.registries(images)) - set(lab_images.registries(lab_images.pinned())) == {
        "ghcr.io"
    }


def test_every_tenant_version_has_its_control_plane_images_listed() -> None:
    """A tenant at its own version (Pulumi.lab.yaml ships tenant-a one minor behind for the
    upgrade drill) needs Kamaji's control-plane and Konnectivity images at that version in the
    caches too, not only the platform version's."""
    versions = set(tenant_versions(platform_block("lab")))
    assert len(versions) > 1, "the lab ships no tenant at another version (TC-19 cannot run)"
    listed = {e.image for e in lab_images.pinned()}
    for version in versions:
        minor = version.split(".")[1]
        for name in (*lab_images.CONTROL_PLANE_IMAGES, "kube-proxy"):
            assert f"registry.k8s.io/{name}:{version}" in listed
        assert f"registry.k8s.io/kas-network-proxy/proxy-agent:v0.{minor}.0" in listed
