"""The metrics stack under mocks, both stacks: the central Prometheus and Grafana in the
management cluster, one agent per tenant (a child of its GpuTenant) in the tenant's management
namespace, its reader inside the tenant, the token copied as a secret, and nothing at all with
``metrics.enabled: false``."""

from __future__ import annotations

import base64
import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components.metrics import auth, objects
from tests.support.harness import Recording, evaluate, load_stack_config, shipped

CONFIG_KEY = "gpu-platform:platform"


def _config(stack: str, **metrics: Any) -> dict[str, Any]:
    config = copy.deepcopy(load_stack_config(stack))
    if metrics:
        config[CONFIG_KEY]["metrics"] = metrics
    return config


_CACHE: dict[tuple[str, bool], Recording] = {}


def _evaluated(stack: str, enabled: bool = True) -> Recording:
    if enabled:
        recording = shipped(stack)  # _config(stack) is the stack file as shipped
        assert recording.error is None, recording.error
        return recording
    if (stack, enabled) not in _CACHE:
        config = _config(stack, enabled=False)
        recording = evaluate(stack, False, config=config)
        assert recording.error is None, recording.error
        _CACHE[(stack, enabled)] = recording
    return _CACHE[(stack, enabled)]


def _tenants(stack: str) -> list[str]:
    return [t["name"] for t in load_stack_config(stack)[CONFIG_KEY]["tenants"]]


def _metadata(reg: Any) -> dict[str, Any]:
    meta: dict[str, Any] = reg.inputs["metadata"]
    return meta


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_management_cluster_runs_the_central_prometheus_and_grafana(stack: str) -> None:
    recording = _evaluated(stack)
    for name, kind in (
        ("management-metrics-prometheus", "kubernetes:apps/v1:Deployment"),
        ("management-metrics-grafana", "kubernetes:apps/v1:Deployment"),
        ("management-metrics-prometheus-config", "kubernetes:core/v1:ConfigMap"),
        ("management-metrics-grafana-dashboards", "kubernetes:core/v1:ConfigMap"),
    ):
        reg = recording.named(name)
        assert reg.type == kind
        assert _metadata(reg)["namespace"] == objects.METRICS_NAMESPACE
        assert recording.component_of(reg, ":ManagementCluster") is not None


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_metrics_namespace_is_closed_but_to_agents_grafana_and_prometheus(stack: str) -> None:
    recording = _evaluated(stack)
    policies = {
        _metadata(r)["name"]: r
        for r in recording.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if _metadata(r)["namespace"] == objects.METRICS_NAMESPACE
    }
    assert set(policies) == {
        "default-deny-ingress",
        "allow-prometheus-clients",
        "allow-prometheus-scrapes",
    }
    assert policies["default-deny-ingress"].inputs["spec"]["podSelector"] == {}
    scrapes = policies["allow-prometheus-scrapes"].inputs["spec"]
    assert scrapes["podSelector"] == {}
    assert scrapes["ingress"] == [
        {"from": [{"podSelector": {"matchLabels": objects._labels(objects.PROMETHEUS)}}]}
    ]


def test_prod_keeps_samples_on_a_claim_and_the_lab_in_an_empty_dir() -> None:
    def data_volume(recording: Recording) -> dict[str, Any]:
        spec = recording.named("management-metrics-prometheus").inputs["spec"]
        volumes = spec["template"]["spec"]["volumes"]
        volume: dict[str, Any] = next(v for v in volumes if v["name"] == "data")
        return volume

    assert "emptyDir" in data_volume(_evaluated("lab"))
    assert data_volume(_evaluated("prod"))["persistentVolumeClaim"] == {
        "claimName": objects.PROMETHEUS_CLAIM
    }
    prod = _evaluated("prod")
    claim = prod.named(f"management-metrics-{objects.PROMETHEUS_CLAIM}")
    assert claim.type == "kubernetes:core/v1:PersistentVolumeClaim"
    # The lab's samples have no claim (the backup store's is its only one: docs/backups.md).
    lab_claims = [
        r.name for r in _evaluated("lab").of_type("kubernetes:core/v1:PersistentVolumeClaim")
    ]
    assert lab_claims == ["management-backup-store-claim"]


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_tenant_has_its_own_agent_labelling_its_series(stack: str) -> None:
    recording = _evaluated(stack)
    for tenant in _tenants(stack):
        agent = recording.named(f"{tenant}-metrics-agent")
        owner = recording.component_of(agent, ":GpuTenant")
        assert owner is not None
        assert owner.name == tenant
        config = recording.named(f"{tenant}-metrics-agent-config")
        prometheus_yml = yaml.safe_load(config.inputs["data"]["prometheus.yml"])
        assert prometheus_yml["global"]["external_labels"] == {"tenant": tenant}
        jobs = {job["job_name"] for job in prometheus_yml["scrape_configs"]}
        expected = {"hami-scheduler", "hami-device-plugin", "gpu-metrics-agent"}  # and itself
        if stack == "prod":
            expected.add("dcgm-exporter")  # the GPU Operator's, in prod only
        assert jobs == expected


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_tenant_token_reaches_the_management_cluster_only_as_a_secret(stack: str) -> None:
    recording = _evaluated(stack)
    for tenant in _tenants(stack):
        reader_token = recording.named(f"{tenant}-metrics-reader-token")
        assert reader_token.inputs["type"] == "kubernetes.io/service-account-token"
        assert reader_token.provider_urn.endswith(f"::{tenant}-provider")
        copy_ = recording.named(f"{tenant}-metrics-agent-token")
        assert copy_.provider_urn.endswith("::management-provider")
        assert "data" in copy_.options.get("additionalSecretOutputs", []) or copy_.input_is_secret(
            "data"
        )


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_metrics_disabled_registers_none_of_it(stack: str) -> None:
    recording = _evaluated(stack, enabled=False)

    def metrics(name: str) -> bool:  # the usage publisher's tenant namespace included
        return "metrics" in name or name.endswith("-ns-gpu-platform-usage")

    assert not [r for r in recording.resources if metrics(r.name)]
    # ...and everything else is as with it on.
    enabled = {r.name for r in _evaluated(stack).resources if not metrics(r.name)}
    assert {r.name for r in recording.resources} == enabled


def test_a_changed_scrape_interval_on_a_running_stack_rolls_every_prometheus(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """Issue 40 (config changes reach Prometheus): on a deployed lab, ``metrics.scrapeInterval``
    changed is planned as an update of each ConfigMap *and* of the Deployment that reads it (its
    pod template's config digest), so the pods restart with it; Grafana, whose files did not
    change, stays as it is."""
    deployed = recordings("lab", False)
    config = _config("lab")
    config[CONFIG_KEY].setdefault("metrics", {})["scrapeInterval"] = "15s"
    preview = evaluate("lab", True, config=config, prior=deployed)
    assert preview.error is None, preview.error
    steps = {r.name: r.step for r in preview.resources}
    rolled = ["management-metrics-prometheus", *(f"{t}-metrics-agent" for t in _tenants("lab"))]
    for name in rolled:
        assert steps[name] == "update", (name, steps[name])
        assert steps[f"{name}-config"] == "update", name
    assert steps["management-metrics-grafana"] == "same"
    assert [name for name, step in steps.items() if step == "replace"] == []


OPERATOR_URL = "http://prometheus-operated.monitoring.svc:9090/api/v1/write"


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_with_a_prometheus_operator_only_its_objects_are_registered(stack: str) -> None:
    config = _config(
        stack, prometheusOperator={"remoteWriteUrl": OPERATOR_URL, "labels": {"release": "kps"}}
    )
    recording = evaluate(stack, False, config=config)
    assert recording.error is None, recording.error
    central = {
        r.name
        for r in recording.resources
        if r.name.startswith("management-metrics") and not r.name.endswith("-ns")
    }
    assert central == {
        "management-metrics-operator-rule",
        "management-metrics-operator-kamaji-scrape",
    }
    rule = recording.named("management-metrics-operator-rule")
    assert (rule.inputs["apiVersion"], rule.inputs["kind"]) == (
        "monitoring.coreos.com/v1",
        "PrometheusRule",
    )
    assert _metadata(rule)["labels"]["release"] == "kps"
    scrape = recording.named("management-metrics-operator-kamaji-scrape")
    assert scrape.inputs["kind"] == "ScrapeConfig"
    for tenant in _tenants(stack):
        agent_config = recording.named(f"{tenant}-metrics-agent-config")
        prometheus_yml = yaml.safe_load(agent_config.inputs["data"]["prometheus.yml"])
        assert [w["url"] for w in prometheus_yml["remote_write"]] == [OPERATOR_URL]


FAKE_PASSWORD = "5e" * 32  # what the fake new-secret.sh prints (tests/support/fakes_management.py)


def _decoded(data: dict[str, str], key: str) -> str:
    return base64.b64decode(data[key]).decode()


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_central_prometheus_password_is_made_once_and_kept_secret(stack: str) -> None:
    """Issue 40 point 7: one random password per stack (a command that runs on create only, its
    output a secret in the state), in a Secret of the metrics namespace and in every agent's
    token Secret, both registered as secrets; the web config holds its bcrypt hash only."""
    recording = _evaluated(stack)
    command = recording.named("management-metrics-prometheus-password")
    assert command.type == "command:local:Command"
    assert "new-secret.sh" in command.inputs["create"] or "urandom" in command.inputs["create"]
    assert "stdout" in command.options["additional_secret_outputs"]
    assert recording.component_of(command, ":ManagementCluster") is not None
    secret = recording.named("management-metrics-prometheus-auth")
    assert _metadata(secret)["name"] == objects.AUTH_SECRET
    assert secret.input_is_secret("data")
    assert _decoded(secret.inputs["data"], auth.PASSWORD_KEY) == FAKE_PASSWORD
    web = recording.named("management-metrics-prometheus-web-config")
    users = yaml.safe_load(web.inputs["data"][objects.WEB_CONFIG_FILE_NAME])["basic_auth_users"]
    assert users == {auth.USERNAME: auth.password_hash(FAKE_PASSWORD)}
    assert not web.input_is_secret("data")  # the hash, readable in diffs (auth's docstring)
    for tenant in _tenants(stack):
        copy_ = recording.named(f"{tenant}-metrics-agent-token")
        assert copy_.input_is_secret("data")
        assert _decoded(copy_.inputs["data"], objects.AGENT_PASSWORD_KEY) == FAKE_PASSWORD
    # Nowhere in clear: no registered input that is not secret carries it.
    for reg in recording.resources:
        public = {k: v for k, v in reg.inputs.items() if not reg.input_is_secret(k)}
        text = json.dumps(public, default=str)
        assert FAKE_PASSWORD not in text, reg.name
        assert base64.b64encode(FAKE_PASSWORD.encode()).decode() not in text, reg.name


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_central_prometheus_and_grafana_read_the_web_config_and_the_password(
    stack: str,
) -> None:
    recording = _evaluated(stack)
    prometheus = recording.named("management-metrics-prometheus").inputs["spec"]
    pod = prometheus["template"]["spec"]
    assert (
        f"--web.config.file={objects.WEB_DIR}/{objects.WEB_CONFIG_FILE_NAME}"
        in (pod["containers"][0]["args"])
    )
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["web"]["configMap"]["name"] == objects.WEB_CONFIG
    assert volumes["auth"]["secret"]["secretName"] == objects.AUTH_SECRET
    grafana = recording.named("management-metrics-grafana").inputs["spec"]["template"]["spec"]
    assert {"name": "prometheus-auth", "secret": {"secretName": objects.AUTH_SECRET}} in (
        grafana["volumes"]
    )


def test_the_password_is_the_same_on_a_second_run_so_nothing_restarts(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """The web config's hash is salted from the password (auth.bcrypt_salt): a preview of an
    unchanged, deployed lab plans no update of Prometheus, Grafana or their configuration."""
    deployed = recordings("lab", False)
    preview = evaluate("lab", True, config=_config("lab"), prior=deployed)
    assert preview.error is None, preview.error
    steps = {r.name: r.step for r in preview.resources}
    for name in (
        "management-metrics-prometheus-password",
        "management-metrics-prometheus-auth",
        "management-metrics-prometheus-web-config",
        "management-metrics-prometheus",
        "management-metrics-grafana",
    ):
        assert steps[name] == "same", (name, steps[name])


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_with_a_prometheus_operator_no_password_is_made_or_sent(stack: str) -> None:
    config = _config(stack, prometheusOperator={"remoteWriteUrl": OPERATOR_URL})
    recording = evaluate(stack, False, config=config)
    assert recording.error is None, recording.error
    assert not [r for r in recording.resources if r.name.endswith("-prometheus-password")]
    for tenant in _tenants(stack):
        copy_ = recording.named(f"{tenant}-metrics-agent-token")
        assert objects.AGENT_PASSWORD_KEY not in (copy_.inputs.get("data") or {})
