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
from tests.support.lab_images import derived
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
        placed, str(platform_block("lab")["kubernetesVersion"]), PINNED.tigera_operator.version
    )
    assert lab_images.to_json(images) != lab_images.PINS_FILE.read_text()
    assert set(lab_images.registries(images)) - set(lab_images.registries(lab_images.pinned())) == {
        "ghcr.io"
    }
