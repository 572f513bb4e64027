"""``metrics``: one switch, strict durations and sizes, refused before anything is registered
as one line naming the key and the fix."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config import ConfigError
from components.stack import parse_platform
from tests.support.harness import load_stack_config

PLATFORM_KEY = "gpu-platform:platform"


def _raw(stack: str = "lab", **metrics: Any) -> dict[str, Any]:
    raw: dict[str, Any] = copy.deepcopy(load_stack_config(stack)[PLATFORM_KEY])
    raw["metrics"] = metrics
    return raw


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_metrics_are_on_by_default_in_both_stacks(stack: str) -> None:
    raw = copy.deepcopy(load_stack_config(stack)[PLATFORM_KEY])
    raw.pop("metrics", None)
    metrics = parse_platform(raw).metrics
    assert metrics.enabled is True
    assert (metrics.retention, metrics.scrape_interval, metrics.storage_size) == (
        "40d",
        "30s",
        "20Gi",
    )


def test_one_switch_turns_it_off() -> None:
    assert parse_platform(_raw(enabled=False)).metrics.enabled is False


@pytest.mark.parametrize(
    ("key", "value", "fragment"),
    [
        ("retention", "15 days", "metrics.retention"),
        ("retention", "1.5d", "metrics.retention"),
        ("scrapeInterval", "30", "metrics.scrapeInterval"),
        ("storageSize", "20GB", "metrics.storageSize"),
        ("enabled", "yes", "metrics.enabled"),
        ("grafana", True, "metrics.grafana"),
    ],
)
def test_a_bad_value_names_its_key(key: str, value: Any, fragment: str) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_platform(_raw(**{key: value}))
    assert fragment in str(caught.value)
