"""Each tenant's usage publisher under mocks, both stacks (docs/metrics.md, "Your own usage, as a
tenant"): per tenant, a CronJob in its own management namespace that mounts that tenant's admin
kubeconfig and no other credential, its scripts, and inside the tenant (on its own provider) the
namespace and a Role that lets every authenticated user get the one ConfigMap; the metrics
namespace admits the publisher to Prometheus; none of it with the operator's Prometheus."""

from __future__ import annotations

import copy
import json
from typing import Any

import pytest

from components.metrics import objects, self_view, usage, usage_publisher
from components.tenant_specs import admin_kubeconfig_secret
from tests.support.harness import Recording, evaluate, load_stack_config, shipped

CONFIG_KEY = "gpu-platform:platform"


def _evaluated(stack: str) -> Recording:
    recording = shipped(stack)
    assert recording.error is None, recording.error
    return recording


def _tenants(stack: str) -> dict[str, str]:
    """tenant -> its management namespace."""
    return {
        t["name"]: (t.get("managementNamespace") or {}).get("name") or t["name"]
        for t in load_stack_config(stack)[CONFIG_KEY]["tenants"]
    }


def _pod(cron_job: Any) -> dict[str, Any]:
    pod: dict[str, Any] = cron_job.inputs["spec"]["jobTemplate"]["spec"]["template"]
    return pod


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_tenant_publishes_into_its_own_cluster_with_its_own_credential(stack: str) -> None:
    recording = _evaluated(stack)
    tenants = _tenants(stack)
    assert len(tenants) >= 2
    for tenant, namespace in tenants.items():
        cron = recording.named(f"{tenant}-metrics-usage-publisher")
        assert cron.type == "kubernetes:batch/v1:CronJob"
        assert cron.provider_urn.endswith("::management-provider")
        assert recording.component_of(cron, ":GpuTenant").name == tenant  # type: ignore[union-attr]
        assert cron.inputs["metadata"]["namespace"] == namespace
        pod = _pod(cron)
        assert pod["spec"]["automountServiceAccountToken"] is False
        secrets = {
            v["secret"]["secretName"]: v["secret"] for v in pod["spec"]["volumes"] if "secret" in v
        }
        # This tenant's admin kubeconfig (its in-cluster key) and the Prometheus password kept
        # for its agent: nothing of another tenant.
        assert set(secrets) == {admin_kubeconfig_secret(tenant), objects.AGENT_TOKEN_SECRET}
        assert secrets[admin_kubeconfig_secret(tenant)]["items"] == [
            {"key": "admin.svc", "path": "admin.svc"}
        ]
        assert secrets[objects.AGENT_TOKEN_SECRET]["optional"] is True
        others = [t for t in tenants if t != tenant]
        text = json.dumps(cron.inputs) + json.dumps(
            recording.named(f"{tenant}-metrics-usage-publisher-scripts").inputs["data"]
        )
        for other in others:
            assert f'"{other}' not in text, other
            assert f"{other}-admin" not in text, other
        env = {e["name"]: e["value"] for e in pod["spec"]["initContainers"][0]["env"]}
        assert env["USAGE_TENANT"] == tenant
        assert env["PROMETHEUS_URL"] == objects.prometheus_url()
        # After the Role inside the tenant, so the first run finds its namespace.
        binding = recording.named(f"{tenant}-metrics-usage-reader-binding")
        assert binding.urn in recording.dependency_closure(cron)


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_scripts_carry_this_tenants_make_usage_queries(stack: str) -> None:
    recording = _evaluated(stack)
    for tenant in _tenants(stack):
        data = recording.named(f"{tenant}-metrics-usage-publisher-scripts").inputs["data"]
        plan = json.loads(data[usage_publisher.QUERIES_FILE])
        assert plan["tenant"] == tenant
        day = {q: self_view.query_for(t, 86400) for q, t in plan["queries"].items()}
        assert day == usage.queries("24h", tenant)
        assert set(data) >= {"publish_usage.py", "apply-usage.sh", "usage_rows.py", "self_view.py"}


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_inside_each_tenant_every_user_may_get_the_usage_config_map_and_nothing_more(
    stack: str,
) -> None:
    recording = _evaluated(stack)
    for tenant in _tenants(stack):
        own = f"::{tenant}-provider"
        namespace = recording.named(f"{tenant}-ns-{self_view.NAMESPACE}")
        assert namespace.provider_urn.endswith(own)
        role = recording.named(f"{tenant}-metrics-usage-reader-role")
        binding = recording.named(f"{tenant}-metrics-usage-reader-binding")
        for reg in (role, binding):
            assert reg.provider_urn.endswith(own)
            assert reg.inputs["metadata"]["namespace"] == self_view.NAMESPACE
        assert role.inputs["rules"] == [
            {
                "apiGroups": [""],
                "resources": ["configmaps"],
                "resourceNames": [self_view.CONFIG_MAP],
                "verbs": ["get"],
            }
        ]
        assert binding.inputs["subjects"] == [
            {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "Group",
                "name": "system:authenticated",
            }
        ]


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_metrics_namespace_admits_the_publishers_to_prometheus(stack: str) -> None:
    recording = _evaluated(stack)
    clients = next(
        r
        for r in recording.of_type("kubernetes:networking.k8s.io/v1:NetworkPolicy")
        if r.inputs["metadata"]["name"] == "allow-prometheus-clients"
    )
    peers = clients.inputs["spec"]["ingress"][0]["from"]
    labels = _pod(recording.named(f"{next(iter(_tenants(stack)))}-metrics-usage-publisher"))[
        "metadata"
    ]["labels"]
    assert any(
        "namespaceSelector" in peer
        and peer["podSelector"]["matchLabels"].items() <= labels.items()
        and peer["podSelector"]["matchLabels"]["app.kubernetes.io/name"] == objects.USAGE_PUBLISHER
        for peer in peers
    )


def test_with_the_operators_prometheus_no_publisher_is_registered() -> None:
    config = copy.deepcopy(load_stack_config("lab"))
    config[CONFIG_KEY]["metrics"] = {
        "prometheusOperator": {"remoteWriteUrl": "http://p.monitoring.svc:9090/api/v1/write"}
    }
    recording = evaluate("lab", False, config=config)
    assert recording.error is None, recording.error
    assert not [r.name for r in recording.resources if "usage" in r.name]
