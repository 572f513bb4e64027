"""The design's load-bearing facts, asserted on what Helm renders for each stack.

The values the program passes are checked elsewhere (unit and contract tests); these tests look
at the rendered objects, so a value the chart ignores, renames or overrides cannot hide. Every
judge is shown to fail on a deliberately broken render in ``test_net_can_fail.py``.
"""

from __future__ import annotations

from collections.abc import Callable

import pytest

from components.versions import PINNED
from tests.render.conftest import platform_block
from tests.support import rendered_facts
from tests.support.rendered_stack import RenderedStack

JUDGES = (
    rendered_facts.hami_webhook,
    rendered_facts.scheduler_version,
    rendered_facts.node_lock_expiry,
    rendered_facts.device_plugins,
    rendered_facts.hami_webhook_service,
    rendered_facts.calico_pool,
    rendered_facts.calico_crd_owner,
    rendered_facts.gpu_operator,
    rendered_facts.kamaji_memory,
    rendered_facts.metallb_without_frr,
)


@pytest.mark.parametrize("stack", ["lab", "prod"])
@pytest.mark.parametrize("judge", JUDGES, ids=lambda j: j.__name__)
def test_rendered_objects_hold_the_design(
    stack: str, judge: Callable[..., list[str]], rendered: Callable[[str], RenderedStack]
) -> None:
    assert judge(rendered(stack), platform_block(stack)) == []


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_kamajis_controller_runs_the_pinned_release(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    assert rendered_facts.kamaji_image(rendered(stack), PINNED.kamaji_image_tag) == []


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_management_drill_finds_kamajis_controller_by_its_labels(
    stack: str, rendered: Callable[[str], RenderedStack]
) -> None:
    """TC-21 restarts Kamaji's controller pods found by ``lookups.KAMAJI_CONTROLLER_LABELS`` in
    ``lookups.KAMAJI_NAMESPACE``: the rendered Deployment's pods carry them there."""
    from tests.acceptance import lookups

    stack_objects = rendered(stack)
    management = next(c for c in stack_objects.clusters.values() if c.name == "management")
    found = [
        obj
        for release in rendered_facts.rendered_of_chart(stack_objects, management, "kamaji")
        for obj in release.of_kind("Deployment")
        if obj["metadata"]["name"] == "kamaji"
    ]
    assert len(found) == 1
    (deployment,) = found
    assert deployment["metadata"].get("namespace") == lookups.KAMAJI_NAMESPACE
    labels = deployment["spec"]["template"]["metadata"]["labels"]
    assert lookups.KAMAJI_CONTROLLER_LABELS.items() <= labels.items()
