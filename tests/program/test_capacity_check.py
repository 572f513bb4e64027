"""Issue 44, point 2, under mocks: a stack whose tenants do not fit the management cluster's
allocatable is refused at preview with the figures, before anything is registered; one that
reaches into the headroom is warned; the nodes come from a recorded ``kubectl get nodes -o json``
(``GPU_PLATFORM_MANAGEMENT_NODES``) in place of the live read."""

from __future__ import annotations

import copy
import json
from pathlib import Path

import pytest

from tests.support.harness import Recording, evaluate, load_stack_config


def _nodes(tmp_path: Path, cpu: str, memory: str, count: int = 1) -> dict[str, str]:
    path = tmp_path / "nodes.json"
    item = {
        "metadata": {"name": "n"},
        "spec": {},
        "status": {"allocatable": {"cpu": cpu, "memory": memory}},
    }
    path.write_text(json.dumps({"items": [item] * count}))
    return {"GPU_PLATFORM_MANAGEMENT_NODES": str(path)}


@pytest.mark.parametrize("preview", [True, False])
def test_prod_that_does_not_fit_is_refused_before_anything_is_registered(
    tmp_path: Path, preview: bool
) -> None:
    """Prod requests 5165m CPU and 9888 MiB (tests/unit/test_capacity.py): three 1-CPU nodes
    are too few."""
    recording = evaluate("prod", preview, environment=_nodes(tmp_path, "1", "16Gi", count=3))
    assert recording.resources == []
    assert recording.run_error
    assert recording.error is not None
    assert "the stack requests 5165m CPU, 9888 MiB" in recording.error
    assert "3000m CPU, 49152 MiB allocatable" in recording.error


def test_prod_within_the_headroom_passes_quietly(tmp_path: Path) -> None:
    recording = evaluate("prod", True, environment=_nodes(tmp_path, "8", "32Gi", count=3))
    assert recording.error is None
    assert not [line for line in recording.logs if "headroomPercent" in line]
    assert any(
        "capacity: the stack requests 5165m CPU, 9888 MiB" in line for line in recording.logs
    )


def test_prod_reaching_into_the_headroom_is_warned(tmp_path: Path) -> None:
    """6000m allocatable: 5165m is under it but over the 80 % the default headroom leaves;
    with headroomPercent 10 (5400m) it still warns, with 0 it does not."""
    environment = _nodes(tmp_path, "6", "64Gi")
    warned = evaluate("prod", True, environment=environment)
    assert warned.error is None
    assert [line for line in warned.logs if "capacity.headroomPercent (20)" in line]
    config = copy.deepcopy(load_stack_config("prod"))
    config["gpu-platform:platform"]["capacity"] = {"headroomPercent": 0}
    quiet: Recording = evaluate("prod", True, config=config, environment=environment)
    assert quiet.error is None
    assert not [line for line in quiet.logs if "headroomPercent" in line]


def test_the_lab_is_checked_against_its_kind_node(tmp_path: Path) -> None:
    """The lab's 1530m / 2976 MiB do not fit a 1-CPU kind node."""
    recording = evaluate("lab", True, environment=_nodes(tmp_path, "1", "8Gi"))
    assert recording.resources == []
    assert recording.error is not None
    assert "the stack requests 1530m CPU, 2976 MiB" in recording.error
