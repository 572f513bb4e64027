"""Fixtures of the rendered-chart suite: each stack as its clusters would receive it.

``rendered(stack)`` evaluates the program under mocks (update mode), renders every chart it
installs with Helm's engine and places every object on its cluster (``tests.support
.rendered_stack``). Without the pinned chart archives the tests skip with one line naming them
and ``make fetch-upstream``; they never pass without rendering.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from tests.support.cel_tally import CEL_TALLY, CelTally
from tests.support.charts import ChartUnavailableError
from tests.support.harness import Recording, load_stack_config
from tests.support.rendered_stack import RenderedStack, UpstreamUnavailableError, render_stack
from tests.support.upstream import upstream_dir_or_none


def platform_block(stack: str) -> dict[str, Any]:
    platform: dict[str, Any] = load_stack_config(stack)["gpu-platform:platform"]
    return platform


def render_or_missing(
    recordings: Callable[[str, bool], Recording], stack: str
) -> RenderedStack | str:
    """The stack's recording (update mode) rendered chart by chart, or, without the pinned
    chart archives or upstream files, what is missing (the suites skip or fail with it)."""
    try:
        return render_stack(recordings(stack, False), platform_block(stack), upstream_dir_or_none())
    except (ChartUnavailableError, UpstreamUnavailableError) as missing:
        return str(missing)


@pytest.fixture(scope="session")
def rendered(
    recordings: Callable[[str, bool], Recording],
) -> Callable[[str], RenderedStack]:
    """``rendered(stack)``: the stack's recording rendered chart by chart (cached)."""
    cache: dict[str, RenderedStack | str] = {}

    def get(stack: str) -> RenderedStack:
        if stack not in cache:
            cache[stack] = render_or_missing(recordings, stack)
        found = cache[stack]
        if isinstance(found, str):
            pytest.skip(found)
        return found

    return get


@pytest.fixture(scope="session")
def cel_tally(request: pytest.FixtureRequest) -> CelTally:
    """CEL rules met by the schema tests; the session summary reports how many were skipped
    (tests/conftest.py, which also sums the xdist workers' tallies)."""
    tally = CelTally()
    request.config.stash[CEL_TALLY] = tally
    return tally


@pytest.fixture
def upstream() -> Path | None:
    return upstream_dir_or_none()
