"""Shared pytest fixtures: where the pinned upstream files live."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import pytest

from tests.support.harness import Recording, evaluate
from tests.support.upstream import upstream_dir_or_none


@pytest.fixture(scope="session")
def upstream_dir() -> Path:
    """The pinned upstream charts and CRDs; the test is skipped when they are absent."""
    found = upstream_dir_or_none()
    if found is None:
        pytest.skip(
            "pinned upstream files not found: set GPU_PLATFORM_UPSTREAM_DIR or run "
            "scripts/fetch-upstream.sh"
        )
    return found


@pytest.fixture(scope="session")
def upstream_file(upstream_dir: Path) -> Callable[[str], Path]:
    """``upstream_file("hami/fit-cases.json")``: a file of the pinned upstream folder, or skip
    with one line naming it (``.upstream/`` from ``make fetch-upstream`` lacks the workspace's
    own files: SOURCES.md, the transcribed HAMi fit vectors)."""

    def get(relative: str) -> Path:
        path = upstream_dir / relative
        if not path.is_file():
            pytest.skip(f"{relative} is not in {upstream_dir} (it comes with ../shared/upstream)")
        return path

    return get


STACKS = ("lab", "prod")


@pytest.fixture(scope="session")
def recordings() -> Callable[[str, bool], Recording]:
    """``recordings(stack, preview)``: the program evaluated under mocks, cached per session."""
    cache: dict[tuple[str, bool], Recording] = {}

    def get(stack: str, preview: bool = False) -> Recording:
        key = (stack, preview)
        if key not in cache:
            cache[key] = evaluate(stack, preview)
        return cache[key]

    return get


@pytest.fixture(scope="session")
def lab(recordings: Callable[[str, bool], Recording]) -> Recording:
    """The lab stack as ``pulumi up`` would register it."""
    return recordings("lab", False)


@pytest.fixture(scope="session")
def prod(recordings: Callable[[str, bool], Recording]) -> Recording:
    """The prod stack as ``pulumi up`` would register it."""
    return recordings("prod", False)
