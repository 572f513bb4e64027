"""The lab's image list derived from the rendered lab stack (``components.lab.lab_images``)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from components.lab import lab_images
from components.stack import parse_platform
from components.versions import PINNED
from tests.support.rendered_stack import RenderedStack


def derived(rendered: RenderedStack, platform: Mapping[str, Any]) -> list[lab_images.LabImage]:
    """Every image of every chart and program manifest the stack places, plus what Kamaji and
    the tigera-operator create at every tenant's version."""
    placed = [(placed.cluster.name, placed.obj) for placed in rendered.objects]
    return lab_images.derive(placed, tenant_versions(platform), PINNED.tigera_operator.version)


def tenant_versions(platform: Mapping[str, Any]) -> list[str]:
    """Each tenant's Kubernetes version (its own, else the platform's)."""
    config = parse_platform(dict(platform))
    return [config.version_of(tenant) for tenant in config.tenants]
