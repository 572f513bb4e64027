"""The lab's image list derived from the rendered lab stack (``components.lab.lab_images``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.lab import lab_images
from components.versions import PINNED
from tests.support.rendered_stack import RenderedStack


def derived(rendered: RenderedStack, platform: Mapping[str, Any]) -> list[lab_images.LabImage]:
    """Every image of every chart and program manifest the stack places, plus what Kamaji and
    the tigera-operator create."""
    placed = [(placed.cluster.name, placed.obj) for placed in rendered.objects]
    return lab_images.derive(
        placed, str(platform["kubernetesVersion"]), PINNED.tigera_operator.version
    )
