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


OPERATOR = {"remoteWriteUrl": "http://prometheus-operated.monitoring.svc:9090/api/v1/write"}


def test_a_prometheus_operator_is_configured_by_its_remote_write_url_and_selector_labels() -> None:
    settings = parse_platform(
        _raw(prometheusOperator={**OPERATOR, "labels": {"release": "kube-prometheus-stack"}})
    ).metrics.prometheus_operator
    assert settings is not None
    assert settings.remote_write_url == OPERATOR["remoteWriteUrl"]
    assert settings.labels == {"release": "kube-prometheus-stack"}
    assert parse_platform(_raw()).metrics.prometheus_operator is None


@pytest.mark.parametrize(
    ("operator", "extra", "fragment"),
    [
        ({"remoteWriteUrl": "prometheus:9090"}, {}, "metrics.prometheusOperator.remoteWriteUrl"),
        ({}, {}, "metrics.prometheusOperator.remoteWriteUrl"),
        ({**OPERATOR, "ruleSelector": {}}, {}, "metrics.prometheusOperator.ruleSelector"),
        ({**OPERATOR, "labels": {"a b": "c"}}, {}, "metrics.prometheusOperator.labels"),
        (OPERATOR, {"alertmanagers": ["http://am:9093"]}, "remove metrics.alertmanagers"),
    ],
)
def test_a_bad_operator_setting_is_one_line_naming_its_key(
    operator: dict[str, Any], extra: dict[str, Any], fragment: str
) -> None:
    with pytest.raises(ConfigError) as caught:
        parse_platform(_raw(prometheusOperator=operator, **extra))
    message = str(caught.value)
    # One problem, on one line (the missing-key form puts it below the heading and adds an
    # indented example).
    lines = [line for line in message.splitlines() if not line.startswith("    ")]
    assert len(lines) <= 2, message
    assert fragment in lines[-1]
