"""Registers the metrics stack: the central part in the management cluster
(``register_central``, a child of the ManagementCluster) and one tenant's collection
(``register_tenant``, children of its GpuTenant, so a tenant added or removed adds or removes its
own agent and nothing else changes). The manifests come from ``components.metrics.objects``.
"""

from __future__ import annotations

import base64
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import MetricsSettings, PrometheusOperatorSettings
from components.k8s_objects import typed_object
from components.metrics import auth, backup_alerts, objects
from components.metrics.dashboards import platform_dashboard
from components.metrics.scrape import DRA_CLAIMS_SOURCE, TenantSource
from components.metrics.usage_publisher import publisher_cron_job, scripts_config_map, tenant_reader

Opts = Callable[..., pulumi.ResourceOptions]


@dataclass(frozen=True)
class MetricsStorage:
    """Where the central Prometheus keeps its TSDB: a pod volume source, and the claims (if
    any) the program creates for it. The substrate decides (lab: emptyDir; prod: a claim)."""

    volume: Mapping[str, Any]
    claims: Sequence[Mapping[str, Any]] = field(default_factory=tuple)


# The suffixes of the ManagementCluster's children, and of a GpuTenant's (name_plan).
CENTRAL_PARTS = (
    "metrics-ns",
    "metrics-policy-default-deny-ingress",
    "metrics-policy-allow-prometheus-clients",
    "metrics-policy-allow-prometheus-scrapes",
    "metrics-prometheus-password",
    "metrics-prometheus-auth",
    "metrics-prometheus-web-config",
    "metrics-prometheus-config",
    "metrics-prometheus",
    "metrics-prometheus-service",
    "metrics-grafana-provisioning",
    "metrics-grafana-dashboards",
    "metrics-grafana",
    "metrics-grafana-service",
)


def agents_write_to(settings: MetricsSettings) -> str | None:
    """Where every tenant's agent remote-writes: the operator's Prometheus when one is
    configured, else None (the platform's own, ``objects.remote_write_url``)."""
    operator = settings.prometheus_operator
    return operator.remote_write_url if operator is not None else None


def tenant_parts(sources: Sequence[TenantSource]) -> tuple[str, ...]:
    namespaces = sorted({source.namespace for source in sources})
    return (
        "metrics-reader",
        *(f"metrics-reader-role-{ns}" for ns in namespaces),
        *(f"metrics-reader-binding-{ns}" for ns in namespaces),
        "metrics-reader-token",
        "metrics-agent-token",
        "metrics-agent-config",
        "metrics-agent",
        *(DRA_CLAIMS_PARTS if DRA_CLAIMS_SOURCE in sources else ()),
    )


DRA_CLAIMS_PARTS = tuple(
    f"metrics-dra-claims-{part}" for part in ("account", "role", "binding", "exporter")
)


def register_dra_claims(
    name: str,
    namespace: str,
    drivers: Sequence[str],
    in_tenant: Opts,
    after: Sequence[pulumi.Resource],
) -> list[pulumi.Resource]:
    """A ``dra`` tenant's claims exporter (``objects.dra_claims_exporter``), inside it, billing
    the devices of ``drivers`` (the tenant's GPU driver)."""
    registered: list[pulumi.Resource] = []
    for part, manifest in zip(
        DRA_CLAIMS_PARTS, objects.dra_claims_exporter(namespace, drivers), strict=True
    ):
        registered.append(
            typed_object(f"{name}-{part}", manifest, in_tenant(depends_on=[*after, *registered]))
        )
    return registered


@dataclass(frozen=True)
class Central:
    """What ``register_central`` registered: the Deployments, and the password every client
    of the platform's Prometheus sends (a secret; None where the operator's Prometheus is used:
    the platform has no credential for it)."""

    deployments: Sequence[pulumi.Resource]
    password: pulumi.Output[str] | None


def _secret_data(values: Mapping[str, str]) -> dict[str, str]:
    return {key: base64.b64encode(value.encode()).decode() for key, value in values.items()}


def register_central(
    name: str,
    *,
    retention: str,
    scrape_interval: str,
    alertmanagers: Sequence[str],
    kamaji_namespace: str,
    storage: MetricsStorage,
    opts: Callable[[Sequence[pulumi.Resource]], pulumi.ResourceOptions],
    password: Callable[[], pulumi.Output[str]],
    operator: PrometheusOperatorSettings | None = None,
) -> Central:
    """The central Prometheus and Grafana, behind the namespace's NetworkPolicies
    (``objects.network_policies``) and basic auth (``auth``, the password from ``password()``,
    called once, a secret made once per stack). With ``operator``, only the rules and the
    Kamaji scrape, as objects for the operator's Prometheus, and no password."""
    ns = typed_object(f"{name}-metrics-ns", objects.namespace(), opts([]))
    if operator is not None:
        for suffix, manifest in (
            ("rule", objects.operator_rule(operator.labels)),
            (
                "kamaji-scrape",
                objects.operator_kamaji_scrape(scrape_interval, kamaji_namespace, operator.labels),
            ),
        ):
            k8s.apiextensions.CustomResource(
                f"{name}-metrics-operator-{suffix}",
                api_version=manifest["apiVersion"],
                kind=manifest["kind"],
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=opts([ns]),
            )
        return Central(deployments=(), password=None)
    for policy in objects.network_policies():
        typed_object(f"{name}-metrics-policy-{policy['metadata']['name']}", policy, opts([ns]))
    claims = [
        typed_object(f"{name}-metrics-{claim['metadata']['name']}", claim, opts([ns]))
        for claim in storage.claims
    ]
    secret = password()
    auth_secret = typed_object(
        f"{name}-metrics-prometheus-auth",
        objects.auth_secret(),
        opts([ns]).merge(pulumi.ResourceOptions(additional_secret_outputs=["data"])),
        data=pulumi.Output.secret(
            secret.apply(lambda value: _secret_data({auth.PASSWORD_KEY: value}))
        ),
    )
    # The bcrypt hash is not kept secret (``auth``: bcrypt of 256 random bits), so the web
    # config, the Deployments' digests and their diffs stay readable in the state and preview.
    hashed: pulumi.Output[str] = pulumi.Output.unsecret(secret.apply(auth.password_hash))
    web_map = hashed.apply(objects.web_config)
    web = typed_object(
        f"{name}-metrics-prometheus-web-config",
        objects.web_config("<hash>"),
        opts([ns]),
        data=web_map.apply(lambda manifest: manifest["data"]),
    )
    config_map = objects.prometheus_config(scrape_interval, kamaji_namespace, alertmanagers)
    config = typed_object(f"{name}-metrics-prometheus-config", config_map, opts([ns]))
    prometheus = typed_object(
        f"{name}-metrics-prometheus",
        objects.prometheus_deployment(
            retention, storage.volume, config_map, objects.web_config("<hash>")
        ),
        opts([ns, config, web, auth_secret, *claims]),
        spec=web_map.apply(
            lambda w: objects.prometheus_deployment(retention, storage.volume, config_map, w)[
                "spec"
            ]
        ),
    )
    typed_object(f"{name}-metrics-prometheus-service", objects.prometheus_service(), opts([ns]))
    provisioning_map = objects.grafana_provisioning()
    dashboards_map = objects.grafana_dashboards(platform_dashboard())
    provisioning = typed_object(
        f"{name}-metrics-grafana-provisioning", provisioning_map, opts([ns])
    )
    dashboards = typed_object(f"{name}-metrics-grafana-dashboards", dashboards_map, opts([ns]))
    grafana = typed_object(
        f"{name}-metrics-grafana",
        objects.grafana_deployment(provisioning_map, dashboards_map, objects.web_config("<hash>")),
        opts([ns, provisioning, dashboards, web, auth_secret]),
        spec=web_map.apply(
            lambda w: objects.grafana_deployment(provisioning_map, dashboards_map, w)["spec"]
        ),
    )
    typed_object(f"{name}-metrics-grafana-service", objects.grafana_service(), opts([ns]))
    # kube-state-metrics for the backup alerts (components.metrics.backup_alerts).
    state_account: list[pulumi.Resource] = []
    for manifest in backup_alerts.manifests(objects.METRICS_NAMESPACE):
        kind = manifest["kind"]
        state_account.append(
            typed_object(
                f"{name}-metrics-backup-state-{kind.lower()}",
                manifest,
                opts([ns, *state_account[:1]]),
            )
        )
    return Central(deployments=(prometheus, grafana), password=secret)


def _token_data(data: Any, password: str | None = None) -> dict[str, str]:
    """``token`` and ``ca.crt`` of the tenant's token Secret (base64, as the API returns them);
    empty until the tenant's token controller has filled it (a preview); and the central
    Prometheus' ``password``, where the agent writes there."""
    copied = (
        {key: data[key] for key in ("token", "ca.crt") if key in data}
        if isinstance(data, Mapping)
        else {}
    )
    if password is not None:
        copied.update(_secret_data({objects.AGENT_PASSWORD_KEY: password}))
    return copied


def register_tenant(
    name: str,
    *,
    tenant: str,
    management_namespace: str,
    api_server: str,
    reader_namespace: str,
    sources: Sequence[TenantSource],
    scrape_interval: str,
    write_to: str | None,
    password: pulumi.Output[str] | None,
    in_tenant: Opts,
    on_management: Opts,
    after: Sequence[pulumi.Resource],
    management_after: Sequence[pulumi.Resource],
) -> pulumi.Resource:
    """One tenant's reader (inside it) and agent (in its management namespace); ``password``:
    the platform's Prometheus' (``Central.password``), None when it writes to ``write_to``."""
    reader = objects.tenant_reader(reader_namespace, sources)
    account = typed_object(f"{name}-metrics-reader", reader[0], in_tenant(depends_on=list(after)))
    for manifest in reader[1:]:
        part = "role" if manifest["kind"] == "Role" else "binding"
        typed_object(
            f"{name}-metrics-reader-{part}-{manifest['metadata']['namespace']}",
            manifest,
            in_tenant(depends_on=[*after, account]),
        )
    # pulumi-kubernetes waits until the token controller has filled a service-account-token
    # Secret (provider/pkg/await/awaiters.go:431-462 at v4.32.0, untilCoreV1SecretInitialized).
    token = typed_object(
        f"{name}-metrics-reader-token",
        objects.tenant_reader_token(reader_namespace),
        in_tenant(depends_on=[account]),
    )
    token_data: pulumi.Output[Any] = token.data
    copy = typed_object(
        f"{name}-metrics-agent-token",
        objects.agent_token_secret(management_namespace),
        on_management(depends_on=list(management_after), additional_secret_outputs=["data"]),
        data=pulumi.Output.secret(
            pulumi.Output.all(token_data, password).apply(lambda parts: _token_data(*parts))
        ),
    )
    config_map = objects.agent_config_map(
        tenant, management_namespace, api_server, sources, scrape_interval, write_to
    )
    config = typed_object(
        f"{name}-metrics-agent-config", config_map, on_management(depends_on=list(management_after))
    )
    agent: pulumi.Resource = typed_object(
        f"{name}-metrics-agent",
        objects.agent_deployment(management_namespace, config_map),
        on_management(depends_on=[*management_after, copy, config]),
    )
    return agent


# The suffixes of a GpuTenant's usage-publisher children (name_plan); its in-tenant namespace is
# named like the tenant's other namespaces (resource_names.tenant_namespace).
USAGE_PARTS = (
    "metrics-usage-reader-role",
    "metrics-usage-reader-binding",
    "metrics-usage-publisher-scripts",
    "metrics-usage-publisher",
)


def register_usage_publisher(
    name: str,
    *,
    tenant: str,
    management_namespace: str,
    usage_namespace: pulumi.Resource,
    in_tenant: Opts,
    on_management: Opts,
    management_after: Sequence[pulumi.Resource],
) -> pulumi.Resource:
    """One tenant's usage publisher (``usage_publisher``): the reader Role inside the tenant (in
    ``usage_namespace``), the scripts and the CronJob in its management namespace, the CronJob
    after the Role, so its first run finds the namespace."""
    role, binding = tenant_reader(tenant)
    reader_role = typed_object(
        f"{name}-metrics-usage-reader-role", role, in_tenant(depends_on=[usage_namespace])
    )
    reader_binding = typed_object(
        f"{name}-metrics-usage-reader-binding",
        binding,
        in_tenant(depends_on=[usage_namespace, reader_role]),
    )
    scripts = typed_object(
        f"{name}-metrics-usage-publisher-scripts",
        scripts_config_map(tenant, management_namespace),
        on_management(depends_on=list(management_after)),
    )
    publisher: pulumi.Resource = typed_object(
        f"{name}-metrics-usage-publisher",
        publisher_cron_job(tenant, management_namespace),
        on_management(depends_on=[*management_after, scripts, reader_binding]),
    )
    return publisher
