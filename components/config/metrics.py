"""``metrics``: per-tenant GPU metrics, chargeback rules and dashboards (docs/metrics.md)."""

from __future__ import annotations

import re

from pydantic import Field, field_validator, model_validator

from components.config.base import STORAGE_QUANTITY, _labels, _matching, _Model

# A Prometheus duration (prometheus/common model.ParseDuration): whole units, largest first.
PROMETHEUS_DURATION = re.compile(r"^(?=\d)(\d+y)?(\d+w)?(\d+d)?(\d+h)?(\d+m)?(\d+s)?(\d+ms)?$")


# An Alertmanager's base URL: scheme, host[:port], an optional path prefix; no query, no user.
ALERTMANAGER_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?(/[A-Za-z0-9._~/-]*)?$")


# A Prometheus remote-write receiver's URL: scheme, host[:port], a path; no query, no user.
REMOTE_WRITE_URL = re.compile(r"^https?://[A-Za-z0-9.-]+(:\d{1,5})?/[A-Za-z0-9._~/-]*$")


class PrometheusOperatorSettings(_Model):
    """A Prometheus the Prometheus Operator already runs in the management cluster receives the
    tenants' samples and evaluates the platform's rules, instead of the platform's own server."""

    remote_write_url: str = Field(
        description="where every tenant's agent remote-writes: the operator's Prometheus with "
        "enableRemoteWriteReceiver, at one replica's own address (prometheus-operated is a "
        "headless Service over every replica), e.g. "
        "http://prometheus-k8s-0.prometheus-operated.monitoring.svc:9090/api/v1/write"
    )
    labels: dict[str, str] = Field(
        default_factory=dict,
        description="labels on the PrometheusRule and ScrapeConfig, so that the Prometheus' "
        "ruleSelector and scrapeConfigSelector pick them (e.g. release: kube-prometheus-stack)",
    )

    @field_validator("remote_write_url")
    @classmethod
    def _url(cls, value: str) -> str:
        return _matching(
            value,
            REMOTE_WRITE_URL,
            "a remote-write URL",
            "http://prometheus-k8s-0.prometheus-operated.monitoring.svc:9090/api/v1/write",
        )

    @field_validator("labels")
    @classmethod
    def _label_map(cls, value: dict[str, str]) -> dict[str, str]:
        return _labels(value)


class MetricsSettings(_Model):
    """The metrics stack in the management cluster and one collecting agent per tenant."""

    enabled: bool = Field(
        default=True,
        description="deploy the central Prometheus, Grafana and one agent per tenant",
    )
    retention: str = Field(
        default="40d",
        description="how long the central Prometheus keeps samples: a monthly bill's 31 days "
        "and margin (make usage warns when a window reaches past what it holds)",
    )
    scrape_interval: str = Field(
        default="30s", description="how often every agent scrapes HAMi (and DCGM, prod)"
    )
    alertmanagers: list[str] = Field(
        default_factory=list,
        description="base URLs (http(s)://host:port[/prefix]) of Alertmanagers the central "
        "Prometheus sends its metering alerts to; none: they show on its /alerts page only",
    )
    storage_size: str = Field(
        default="20Gi",
        description="prod: the central Prometheus' PersistentVolumeClaim (the lab uses emptyDir)",
    )
    prometheus_operator: PrometheusOperatorSettings | None = Field(
        default=None,
        description="use a Prometheus the Prometheus Operator runs: emit a PrometheusRule and a "
        "ScrapeConfig for it instead of the platform's Prometheus and Grafana",
    )

    @model_validator(mode="after")
    def _operator_owns_alerting(self) -> MetricsSettings:
        if self.prometheus_operator is not None and self.alertmanagers:
            raise ValueError(
                "alertmanagers: with prometheusOperator the operator's Prometheus sends the "
                "alerts to its own Alertmanagers; remove metrics.alertmanagers"
            )
        return self

    @field_validator("retention", "scrape_interval")
    @classmethod
    def _duration(cls, value: str) -> str:
        return _matching(value, PROMETHEUS_DURATION, "a Prometheus duration", "30s, 15d or 1h30m")

    @field_validator("alertmanagers")
    @classmethod
    def _alertmanagers(cls, value: list[str]) -> list[str]:
        for url in value:
            _matching(url, ALERTMANAGER_URL, "an Alertmanager base URL", "http://alertmanager:9093")
        return value

    @field_validator("storage_size")
    @classmethod
    def _size(cls, value: str) -> str:
        return _matching(value, STORAGE_QUANTITY, "a storage size", "20Gi")
