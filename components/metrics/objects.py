"""The metrics stack as plain Kubernetes manifests, one pure function per object.

Management cluster, namespace ``METRICS_NAMESPACE``: the central Prometheus (ConfigMap with its
configuration and the recording rules, Deployment, Service) and Grafana (ConfigMaps with the
provisioning files and the platform's dashboard, Deployment, Service). Each tenant's namespace
of the management cluster: the tenant's agent (Secret with the tenant token, ConfigMap,
Deployment). Inside each tenant: the agent's ServiceAccount, its token Secret, and one Role and
RoleBinding per scraped namespace.

No chart: the few objects are built here and validated against the Kubernetes OpenAPI schema of
the cluster's version (tests/unit/test_metrics_objects.py), like the lab's own workloads.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import yaml

from components.k8s_objects import restricted_security
from components.metrics import auth, backup_alerts, dra_claims, hami_dashboard, rules, scrape
from components.metrics.scrape import TenantSource
from components.versions import HAMI_DASHBOARD, PINNED

METRICS_NAMESPACE = "gpu-platform-metrics"
PROMETHEUS = "gpu-metrics"
GRAFANA = "gpu-metrics-grafana"
GRAFANA_PORT = 3000
AGENT = "gpu-metrics-agent"
AGENT_TOKEN_SECRET = "gpu-metrics-agent-tenant-token"
# The central Prometheus' basic auth (components.metrics.auth): the password, a Secret here (read
# by Grafana, Prometheus' own scrape and probe, ``make usage`` and TC-18) and a key of each
# agent's token Secret; the bcrypt hash and the probe's client file, a ConfigMap.
AUTH_SECRET = "gpu-metrics-auth"
WEB_CONFIG = "gpu-metrics-web"
WEB_CONFIG_FILE_NAME = "web.yml"
PROBE_CLIENT_FILE_NAME = "probe-client.yml"
AUTH_DIR = "/etc/prometheus-auth"
WEB_DIR = "/etc/prometheus-web"
AGENT_PASSWORD_KEY = "prometheus-password"
AGENT_PASSWORD_FILE = f"{scrape.TOKEN_DIR}/{AGENT_PASSWORD_KEY}"
GRAFANA_AUTH_DIR = "/etc/grafana/prometheus-auth"
# Inside the tenant: the agent's identity there.
TENANT_READER = "gpu-platform-metrics-reader"
TENANT_READER_TOKEN = "gpu-platform-metrics-reader-token"
DATASOURCE_UID = "gpu-platform-prometheus"
DASHBOARD_DIR = "/var/lib/grafana/dashboards"
HAMI_DASHBOARD_FILE = "hami-vgpu-dashboard.json"
PLATFORM_DASHBOARD_FILE = "gpu-platform.json"
# Each tenant's usage publisher (components.metrics.usage_publisher), a client of the query API.
USAGE_PUBLISHER = "gpu-usage-publisher"

LABELS = {"app.kubernetes.io/part-of": "gpu-platform-metrics"}
# On a Deployment's pod template: the digest of the ConfigMaps its pods read. Prometheus and
# Grafana read their configuration and rules only at start (no reloader runs, and
# --web.enable-lifecycle is off), so a changed ConfigMap alone would not be applied; a changed
# digest changes the pod template, and the Deployment rolls its pods on `pulumi up`.
CONFIG_DIGEST_ANNOTATION = "gpu-platform.io/config-sha256"

# Requests and limits: what the lab budget (docs/metrics.md, footprint()) is measured from.
PROMETHEUS_RESOURCES = {
    "requests": {"cpu": "100m", "memory": "256Mi"},
    "limits": {"memory": "1Gi"},
}
GRAFANA_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "128Mi"},
    "limits": {"memory": "384Mi"},
}
AGENT_RESOURCES = {
    "requests": {"cpu": "25m", "memory": "64Mi"},
    "limits": {"memory": "256Mi"},
}
FETCH_RESOURCES = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"memory": "64Mi"},
}
# The Prometheus image runs as nobody (65534); Grafana's as grafana (472).
_PROMETHEUS_USER = 65534
_GRAFANA_USER = 472


def _labels(component: str) -> dict[str, str]:
    return {**LABELS, "app.kubernetes.io/name": component}


def _meta(name: str, namespace: str, component: str) -> dict[str, Any]:
    return {"name": name, "namespace": namespace, "labels": _labels(component)}


def config_digest(config_maps: Sequence[Mapping[str, Any]]) -> str:
    """sha256 of the ConfigMaps' names and data (``CONFIG_DIGEST_ANNOTATION``)."""
    content = [(m["metadata"]["name"], m.get("data", {})) for m in config_maps]
    return hashlib.sha256(json.dumps(content, sort_keys=True).encode()).hexdigest()


def _deployment(
    name: str,
    namespace: str,
    containers: list[dict[str, Any]],
    volumes: list[dict[str, Any]],
    user: int,
    config_maps: Sequence[Mapping[str, Any]],
    init_containers: Sequence[dict[str, Any]] = (),
    recreate: bool = False,
) -> dict[str, Any]:
    pod_spec: dict[str, Any] = {
        "automountServiceAccountToken": False,
        "securityContext": {"runAsNonRoot": True, "fsGroup": user},
        "containers": containers,
        "volumes": volumes,
    }
    if init_containers:
        pod_spec["initContainers"] = list(init_containers)
    spec: dict[str, Any] = {
        "replicas": 1,
        "selector": {"matchLabels": _labels(name)},
        "template": {
            "metadata": {
                "labels": _labels(name),
                "annotations": {CONFIG_DIGEST_ANNOTATION: config_digest(config_maps)},
            },
            "spec": pod_spec,
        },
    }
    if recreate:
        spec["strategy"] = {"type": "Recreate"}
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(name, namespace, name),
        "spec": spec,
    }


def _service(name: str, namespace: str, port: int) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(name, namespace, name),
        "spec": {
            "type": "ClusterIP",
            "selector": _labels(name),
            "ports": [{"name": "http", "port": port, "targetPort": port, "protocol": "TCP"}],
        },
    }


def _config_map(
    name: str, namespace: str, component: str, data: Mapping[str, str]
) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(name, namespace, component),
        "data": dict(data),
    }


def _yaml(document: Mapping[str, Any]) -> str:
    return yaml.safe_dump(dict(document), sort_keys=False)


def remote_write_url() -> str:
    return f"http://{PROMETHEUS}.{METRICS_NAMESPACE}.svc:{scrape.PROMETHEUS_PORT}/api/v1/write"


def prometheus_url() -> str:
    return f"http://{PROMETHEUS}.{METRICS_NAMESPACE}.svc:{scrape.PROMETHEUS_PORT}"


# ------------------------------------------------------------------ central (management)


def namespace() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Namespace",
        "metadata": {"name": METRICS_NAMESPACE, "labels": dict(LABELS)},
    }


def network_policies() -> list[dict[str, Any]]:
    """Ingress of the metrics namespace: nothing but what the stack itself needs.

    * ``default-deny-ingress``: every pod here (Grafana's 3000 included: it is reached with
      ``kubectl port-forward``, which enters the pod's own network namespace and is not subject
      to NetworkPolicy);
    * ``allow-prometheus-clients``: the central Prometheus' port from the tenants' agents and
      usage publishers (any namespace: a tenant's management namespace may be adopted, and
      unlabelled) and from Grafana;
    * ``allow-prometheus-scrapes``: any pod here from the central Prometheus, on any port, so
      an exporter beside it (the backups' kube-state-metrics) can be scraped.

    Nothing from outside the pod network: ``make usage`` and TC-18 read the query API through a
    port-forward, not the API server's service proxy. The proxy's packets come from a node
    address, which only an ``ipBlock`` admits, and no ``ipBlock`` here can tell the management
    API server's node from a tenant-controlled host on the same network (a lab worker on the
    kind network, a prod tenant's machines): it let them read and write every tenant's bill.
    Readiness probes come from the pod's own node, which a NetworkPolicy always allows
    (k8s.io/api v0.35.0 networking/v1/types.go:62-79, kubernetes.io "Network Policies");
    the server's self-scrape goes to localhost."""
    prometheus = {"matchLabels": _labels(PROMETHEUS)}
    port = [{"protocol": "TCP", "port": scrape.PROMETHEUS_PORT}]

    def policy(name: str, spec: dict[str, Any]) -> dict[str, Any]:
        return {
            "apiVersion": "networking.k8s.io/v1",
            "kind": "NetworkPolicy",
            "metadata": _meta(name, METRICS_NAMESPACE, PROMETHEUS),
            "spec": {**spec, "policyTypes": ["Ingress"]},
        }

    return [
        policy("default-deny-ingress", {"podSelector": {}}),
        policy(
            "allow-prometheus-clients",
            {
                "podSelector": prometheus,
                "ingress": [
                    {
                        "from": [
                            {
                                "namespaceSelector": {},
                                "podSelector": {"matchLabels": _labels(AGENT)},
                            },
                            # Each tenant's usage publisher, from the tenant's namespace.
                            {
                                "namespaceSelector": {},
                                "podSelector": {"matchLabels": _labels(USAGE_PUBLISHER)},
                            },
                            {"podSelector": {"matchLabels": _labels(GRAFANA)}},
                        ],
                        "ports": port,
                    }
                ],
            },
        ),
        policy(
            "allow-prometheus-scrapes",
            {"podSelector": {}, "ingress": [{"from": [{"podSelector": prometheus}]}]},
        ),
    ]


def prometheus_config(
    scrape_interval: str, kamaji_namespace: str, alertmanagers: Sequence[str] = ()
) -> dict[str, Any]:
    """The central Prometheus' configuration and rules; its scrape of itself carries the
    password (``auth``: its own listener asks for it too)."""
    config = scrape.central_config(
        scrape_interval,
        kamaji_namespace,
        alertmanagers,
        password_file=f"{AUTH_DIR}/{auth.PASSWORD_KEY}",
    )
    # The backup alerts' source (components.metrics.backup_alerts).
    config["scrape_configs"].append(backup_alerts.scrape_job(METRICS_NAMESPACE))
    return _config_map(
        PROMETHEUS,
        METRICS_NAMESPACE,
        PROMETHEUS,
        {
            "prometheus.yml": _yaml(config),
            scrape.RULES_FILE_NAME: _yaml(rules.rule_groups()),
        },
    )


def _prometheus_container(
    name: str,
    args: list[str],
    resources: Mapping[str, Any],
    mounts: list[dict[str, Any]],
    readiness: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    """A Prometheus container (the central server or a tenant's agent): the pinned image, its
    configuration from the ``config`` volume, readiness on ``/-/ready`` (``readiness``: another
    probe), restricted."""
    return {
        "name": name,
        "image": PINNED.prometheus_image,
        "args": args,
        "ports": [{"name": "http", "containerPort": scrape.PROMETHEUS_PORT}],
        "readinessProbe": dict(
            readiness or {"httpGet": {"path": "/-/ready", "port": scrape.PROMETHEUS_PORT}}
        ),
        "resources": resources,
        "securityContext": restricted_security(_PROMETHEUS_USER),
        "volumeMounts": [
            {"name": "config", "mountPath": scrape.CONFIG_DIR, "readOnly": True},
            *mounts,
        ],
    }


def auth_secret() -> dict[str, Any]:
    """The password's Secret (``data`` filled at deploy time, a Pulumi secret)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(AUTH_SECRET, METRICS_NAMESPACE, PROMETHEUS),
        "type": "Opaque",
    }


def web_config(password_hash: str) -> dict[str, Any]:
    """The central Prometheus' ``--web.config.file`` (``auth.web_config``: the bcrypt hash, no
    password) and the client file its readiness probe runs promtool with (the password read
    from the mounted Secret)."""
    probe_client = auth.client_basic_auth(f"{AUTH_DIR}/{auth.PASSWORD_KEY}")
    return _config_map(
        WEB_CONFIG,
        METRICS_NAMESPACE,
        PROMETHEUS,
        {
            WEB_CONFIG_FILE_NAME: _yaml(auth.web_config(password_hash)),
            PROBE_CLIENT_FILE_NAME: _yaml(probe_client),
        },
    )


def _authenticated_readiness() -> dict[str, Any]:
    """``promtool check ready`` inside the container (the image has it, prometheus v3.5.0
    Dockerfile:10), with the probe client file: GET /-/ready on localhost:9090 with the basic-auth
    pair, 200 or fail (cmd/promtool/main.go:144-146, 323-336, 540-575). An httpGet probe would
    need the password in the pod spec; the web config exempts no path (``auth``)."""
    return {
        "exec": {
            "command": [
                "promtool",
                "check",
                "ready",
                f"--http.config.file={WEB_DIR}/{PROBE_CLIENT_FILE_NAME}",
                f"--url=http://localhost:{scrape.PROMETHEUS_PORT}",
            ]
        },
        "timeoutSeconds": 5,
    }


def prometheus_deployment(
    retention: str,
    data_volume: Mapping[str, Any],
    config: Mapping[str, Any],
    web: Mapping[str, Any],
) -> dict[str, Any]:
    """The central Prometheus: remote-write receiver, rule evaluation, Kamaji scrape, behind
    basic auth (``auth``). ``data_volume`` is the volume source of its TSDB (the substrate's:
    emptyDir or a claim); ``config`` the ConfigMap of ``prometheus_config``, ``web`` that of
    ``web_config`` (a new password changes it, and so restarts the pod)."""
    container = _prometheus_container(
        "prometheus",
        [
            f"--config.file={scrape.CONFIG_FILE}",
            "--storage.tsdb.path=/prometheus",
            f"--storage.tsdb.retention.time={retention}",
            "--web.enable-remote-write-receiver",
            f"--web.config.file={WEB_DIR}/{WEB_CONFIG_FILE_NAME}",
        ],
        PROMETHEUS_RESOURCES,
        [
            {"name": "data", "mountPath": "/prometheus"},
            {"name": "web", "mountPath": WEB_DIR, "readOnly": True},
            {"name": "auth", "mountPath": AUTH_DIR, "readOnly": True},
        ],
        readiness=_authenticated_readiness(),
    )
    volumes = [
        {"name": "config", "configMap": {"name": PROMETHEUS}},
        {"name": "web", "configMap": {"name": WEB_CONFIG}},
        {"name": "auth", "secret": {"secretName": AUTH_SECRET}},
        {"name": "data", **dict(data_volume)},
    ]
    return _deployment(
        PROMETHEUS,
        METRICS_NAMESPACE,
        [container],
        volumes,
        _PROMETHEUS_USER,
        [config, web],
        recreate=True,
    )


def prometheus_service() -> dict[str, Any]:
    return _service(PROMETHEUS, METRICS_NAMESPACE, scrape.PROMETHEUS_PORT)


def grafana_provisioning() -> dict[str, Any]:
    datasources = {
        "apiVersion": 1,
        "datasources": [
            {
                "name": "Prometheus",
                "uid": DATASOURCE_UID,
                "type": "prometheus",
                "access": "proxy",
                "url": prometheus_url(),
                "isDefault": True,
                "editable": False,
                # The central Prometheus' basic auth (``auth``): the password is read from the
                # mounted Secret when Grafana provisions the datasource, through its file
                # expander (provisioning values go through setting.ExpandVar, whose
                # ``$__file{path}`` reads and trims the file: grafana/grafana
                # pkg/services/provisioning/values/values.go interpolateValue,
                # pkg/setting/expanders.go fileExpander), and stored encrypted in Grafana's
                # database (``secureJsonData``): never in this ConfigMap.
                "basicAuth": True,
                "basicAuthUser": auth.USERNAME,
                "secureJsonData": {
                    "basicAuthPassword": f"$__file{{{GRAFANA_AUTH_DIR}/{auth.PASSWORD_KEY}}}"
                },
            }
        ],
    }
    providers = {
        "apiVersion": 1,
        "providers": [
            {
                "name": "gpu-platform",
                "type": "file",
                "disableDeletion": True,
                "allowUiUpdates": False,
                "options": {"path": DASHBOARD_DIR, "foldersFromFilesStructure": False},
            }
        ],
    }
    return _config_map(
        f"{GRAFANA}-provisioning",
        METRICS_NAMESPACE,
        GRAFANA,
        {"datasources.yaml": _yaml(datasources), "dashboards.yaml": _yaml(providers)},
    )


def grafana_dashboards(platform_dashboard: Mapping[str, Any]) -> dict[str, Any]:
    return _config_map(
        f"{GRAFANA}-dashboards",
        METRICS_NAMESPACE,
        GRAFANA,
        {PLATFORM_DASHBOARD_FILE: json.dumps(platform_dashboard, indent=1, sort_keys=True)},
    )


# Downloads HAMi's dashboard at the pinned tag, refuses any other content, and scopes it to one
# tenant at a time (``hami_dashboard``, whose source — standard library only — precedes this).
# Without a route to it (an offline lab, docs/lab.md) Grafana starts without that one dashboard,
# saying so in this container's log, rather than hold `pulumi up` on the Deployment until it
# times out.
_FETCH_MAIN = """
import hashlib, json, os, sys, urllib.error, urllib.request
url, want, dest = os.environ["URL"], os.environ["SHA256"], os.environ["DEST"]
try:
    data = urllib.request.urlopen(url, timeout=20).read()
except urllib.error.HTTPError as error:
    sys.exit(f"{url}: {error}")
except OSError as error:
    print(f"warning: {url} unreachable ({error}): Grafana starts without HAMi's dashboard",
          file=sys.stderr)
    sys.exit(0)
got = hashlib.sha256(data).hexdigest()
if got != want:
    sys.exit(f"{url}: sha256 {got}, pinned {want}")
with open(dest, "w") as out:
    json.dump(scope_to_tenant(json.loads(data)), out)
"""
FETCH_SCRIPT = Path(hami_dashboard.__file__).read_text() + _FETCH_MAIN


def grafana_deployment(
    provisioning: Mapping[str, Any],
    dashboards: Mapping[str, Any],
    web: Mapping[str, Any],
) -> dict[str, Any]:
    """Grafana with anonymous read-only access (no login form, no admin password to leak), the
    provisioned datasource and dashboards; an init container fetches HAMi's published
    dashboard at the pinned tag and checks its sha256 (nothing of HAMi's is in this repository;
    offline it is left out, ``FETCH_SCRIPT``). Its datasource reads the Prometheus password at
    start: ``web`` (``web_config``, changed with the password) is in its config digest, so a new
    password restarts it."""
    hami_dir = f"{DASHBOARD_DIR}/hami"
    fetch = {
        "name": "fetch-hami-dashboard",
        "image": PINNED.completer_image,
        "command": ["python3", "-c", FETCH_SCRIPT],
        "env": [
            {"name": "URL", "value": HAMI_DASHBOARD.url},
            {"name": "SHA256", "value": HAMI_DASHBOARD.sha256},
            {"name": "DEST", "value": f"{hami_dir}/{HAMI_DASHBOARD_FILE}"},
        ],
        "resources": FETCH_RESOURCES,
        "securityContext": restricted_security(_GRAFANA_USER),
        "volumeMounts": [{"name": "hami-dashboard", "mountPath": hami_dir}],
    }
    env = {
        "GF_AUTH_ANONYMOUS_ENABLED": "true",
        "GF_AUTH_ANONYMOUS_ORG_ROLE": "Viewer",
        "GF_AUTH_DISABLE_LOGIN_FORM": "true",
        "GF_AUTH_BASIC_ENABLED": "false",
        # No admin/admin account at all (Grafana creates one at first start otherwise, usable
        # the day someone turns the login form or basic auth back on): [security]
        # disable_initial_admin_creation, conf/defaults.ini. The main org is still created, so
        # anonymous Viewers and the provisioned datasource and dashboards work as before.
        "GF_SECURITY_DISABLE_INITIAL_ADMIN_CREATION": "true",
        "GF_ANALYTICS_REPORTING_ENABLED": "false",
        "GF_ANALYTICS_CHECK_FOR_UPDATES": "false",
        "GF_PLUGINS_PREINSTALL_DISABLED": "true",
        # Logs to stdout only: the root filesystem is read-only (no /var/log/grafana file).
        "GF_LOG_MODE": "console",
    }
    container = {
        "name": "grafana",
        "image": PINNED.grafana_image,
        "env": [{"name": key, "value": value} for key, value in env.items()],
        "ports": [{"name": "http", "containerPort": GRAFANA_PORT}],
        "readinessProbe": {"httpGet": {"path": "/api/health", "port": GRAFANA_PORT}},
        "resources": GRAFANA_RESOURCES,
        "securityContext": restricted_security(_GRAFANA_USER),
        "volumeMounts": [
            {
                "name": "provisioning",
                "mountPath": "/etc/grafana/provisioning/datasources/datasources.yaml",
                "subPath": "datasources.yaml",
                "readOnly": True,
            },
            {
                "name": "provisioning",
                "mountPath": "/etc/grafana/provisioning/dashboards/dashboards.yaml",
                "subPath": "dashboards.yaml",
                "readOnly": True,
            },
            {
                "name": "platform-dashboard",
                "mountPath": f"{DASHBOARD_DIR}/platform",
                "readOnly": True,
            },
            {"name": "hami-dashboard", "mountPath": hami_dir, "readOnly": True},
            {"name": "prometheus-auth", "mountPath": GRAFANA_AUTH_DIR, "readOnly": True},
            {"name": "grafana-data", "mountPath": "/var/lib/grafana"},
            {"name": "tmp", "mountPath": "/tmp"},
        ],
    }
    volumes = [
        {"name": "provisioning", "configMap": {"name": f"{GRAFANA}-provisioning"}},
        {"name": "platform-dashboard", "configMap": {"name": f"{GRAFANA}-dashboards"}},
        {"name": "hami-dashboard", "emptyDir": {"sizeLimit": "8Mi"}},
        {"name": "prometheus-auth", "secret": {"secretName": AUTH_SECRET}},
        {"name": "grafana-data", "emptyDir": {"sizeLimit": "512Mi"}},
        {"name": "tmp", "emptyDir": {"sizeLimit": "64Mi"}},
    ]
    return _deployment(
        GRAFANA,
        METRICS_NAMESPACE,
        [container],
        volumes,
        _GRAFANA_USER,
        [provisioning, dashboards, web],
        init_containers=[fetch],
    )


def grafana_service() -> dict[str, Any]:
    return _service(GRAFANA, METRICS_NAMESPACE, GRAFANA_PORT)


# ----------------------------------------------------------------------- per tenant


def tenant_api_server(tenant: str, namespace: str, port: int) -> str:
    """The tenant's API server as the management cluster's pods reach it (scrape docstring)."""
    return f"https://{tenant}.{namespace}.svc:{port}"


def agent_config_map(
    tenant: str,
    namespace: str,
    api_server: str,
    sources: Sequence[TenantSource],
    scrape_interval: str,
    write_to: str | None = None,
) -> dict[str, Any]:
    """The agent's prometheus.yml; it remote-writes to ``write_to`` (a Prometheus the
    Prometheus Operator runs: no credential of the platform's) or, by default, to the
    platform's own (``remote_write_url``) with its basic auth, the password read from the
    agent's token Secret (``AGENT_PASSWORD_FILE``)."""
    config = scrape.agent_config(
        tenant,
        api_server,
        write_to or remote_write_url(),
        sources,
        scrape_interval,
        password_file=None if write_to else AGENT_PASSWORD_FILE,
    )
    return _config_map(AGENT, namespace, AGENT, {"prometheus.yml": _yaml(config)})


def agent_token_secret(namespace: str) -> dict[str, Any]:
    """The tenant token's copy in the management cluster (``data`` filled at deploy time), and
    the central Prometheus' password (``AGENT_PASSWORD_KEY``) where the agent writes there."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": _meta(AGENT_TOKEN_SECRET, namespace, AGENT),
        "type": "Opaque",
    }


def agent_deployment(namespace: str, config: Mapping[str, Any]) -> dict[str, Any]:
    """A tenant's agent; ``config`` is its ConfigMap (``agent_config_map``)."""
    container = _prometheus_container(
        "prometheus-agent",
        ["--agent", f"--config.file={scrape.CONFIG_FILE}", "--storage.agent.path=/prometheus"],
        AGENT_RESOURCES,
        [
            {"name": "tenant-token", "mountPath": scrape.TOKEN_DIR, "readOnly": True},
            {"name": "wal", "mountPath": "/prometheus"},
        ],
    )
    volumes = [
        {"name": "config", "configMap": {"name": AGENT}},
        {"name": "tenant-token", "secret": {"secretName": AGENT_TOKEN_SECRET}},
        {"name": "wal", "emptyDir": {"sizeLimit": "1Gi"}},
    ]
    return _deployment(AGENT, namespace, [container], volumes, _PROMETHEUS_USER, [config])


def tenant_reader(reader_namespace: str, sources: Sequence[TenantSource]) -> list[dict[str, Any]]:
    """Inside the tenant: the agent's ServiceAccount and, per scraped namespace, a Role allowing
    only what the pod discovery (list/watch pods) and the pod proxy (get pods/proxy) need, bound
    to it. No ClusterRole: the discovery is restricted to those namespaces."""
    objects: list[dict[str, Any]] = [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(TENANT_READER, reader_namespace, AGENT),
            "automountServiceAccountToken": False,
        }
    ]
    for ns in sorted({source.namespace for source in sources}):
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "Role",
                "metadata": _meta(TENANT_READER, ns, AGENT),
                "rules": [
                    {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
                    {"apiGroups": [""], "resources": ["pods/proxy"], "verbs": ["get"]},
                ],
            }
        )
        objects.append(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": _meta(TENANT_READER, ns, AGENT),
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Role",
                    "name": TENANT_READER,
                },
                "subjects": [
                    {"kind": "ServiceAccount", "name": TENANT_READER, "namespace": reader_namespace}
                ],
            }
        )
    return objects


def tenant_reader_token(reader_namespace: str) -> dict[str, Any]:
    """A long-lived token of the reader ServiceAccount, filled by the tenant's token controller
    (its ``data`` holds ``token`` and the tenant's ``ca.crt``: Kamaji runs the tenant's
    controller-manager with ``--root-ca-file`` the cluster CA, clastix/kamaji 26.8.2-edge
    internal/builders/controlplane/deployment.go:487)."""
    return {
        "apiVersion": "v1",
        "kind": "Secret",
        "metadata": {
            **_meta(TENANT_READER_TOKEN, reader_namespace, AGENT),
            "annotations": {"kubernetes.io/service-account.name": TENANT_READER},
        },
        "type": "kubernetes.io/service-account-token",
    }


# --------------------------------------------------------- a gpuSharing: dra tenant's claims

DRA_CLAIMS = scrape.DRA_CLAIMS_COMPONENT
DRA_CLAIMS_RESOURCES = {
    "requests": {"cpu": "10m", "memory": "32Mi"},
    "limits": {"memory": "64Mi"},
}
# components.metrics.dra_claims is the program: standard library only, run by the same pinned
# stdlib Python image as Grafana's fetch (``python3 -c``, as FETCH_SCRIPT), so no ConfigMap and
# no image of the platform's own. Its source is in the pod template: a changed exporter rolls.
DRA_CLAIMS_SCRIPT = Path(dra_claims.__file__).read_text()
_NOBODY = 65534


def dra_claims_exporter(namespace: str, drivers: Sequence[str]) -> list[dict[str, Any]]:
    """Inside a ``gpuSharing: dra`` tenant: the claims exporter (``dra_claims``) with a
    ServiceAccount that may only list ResourceClaims and ResourceSlices (resource.k8s.io), the
    two kinds it reads, billing only the devices of ``drivers`` (the tenant's GPU driver, the
    substrate's ``dra_driver(...).driver``, in ``DRA_CLAIMS_DRIVERS``); the tenant's agent
    scrapes it through the pod proxy (``scrape.DRA_CLAIMS_SOURCE``)."""
    if not drivers:
        raise ValueError("the DRA claims exporter needs the tenant's GPU driver(s) to bill")
    account = {
        "apiVersion": "v1",
        "kind": "ServiceAccount",
        "metadata": _meta(DRA_CLAIMS, namespace, DRA_CLAIMS),
    }
    role = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRole",
        "metadata": {"name": DRA_CLAIMS, "labels": _labels(DRA_CLAIMS)},
        "rules": [
            {
                "apiGroups": ["resource.k8s.io"],
                "resources": ["resourceclaims", "resourceslices"],
                "verbs": ["list"],
            }
        ],
    }
    binding = {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "ClusterRoleBinding",
        "metadata": {"name": DRA_CLAIMS, "labels": _labels(DRA_CLAIMS)},
        "roleRef": {
            "apiGroup": "rbac.authorization.k8s.io",
            "kind": "ClusterRole",
            "name": DRA_CLAIMS,
        },
        "subjects": [{"kind": "ServiceAccount", "name": DRA_CLAIMS, "namespace": namespace}],
    }
    container = {
        "name": "exporter",
        "image": PINNED.completer_image,
        "command": ["python3", "-c", DRA_CLAIMS_SCRIPT],
        "env": [{"name": "DRA_CLAIMS_DRIVERS", "value": ",".join(sorted(set(drivers)))}],
        "ports": [{"name": "metrics", "containerPort": dra_claims.PORT}],
        "readinessProbe": {"tcpSocket": {"port": dra_claims.PORT}},
        "resources": DRA_CLAIMS_RESOURCES,
        "securityContext": restricted_security(_NOBODY),
    }
    deployment = _deployment(DRA_CLAIMS, namespace, [container], [], _NOBODY, [])
    template = deployment["spec"]["template"]
    template["metadata"]["labels"]["app.kubernetes.io/component"] = DRA_CLAIMS
    template["spec"]["serviceAccountName"] = DRA_CLAIMS
    template["spec"]["automountServiceAccountToken"] = True  # it lists through the API server
    return [account, role, binding, deployment]


# ------------------------------------------------------------------------- footprint


_UNITS = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}


def _cpu_millis(value: str) -> int:
    return int(value[:-1]) if value.endswith("m") else int(float(value) * 1000)


def _bytes(value: str) -> int:
    for suffix, factor in _UNITS.items():
        if value.endswith(suffix):
            return int(value[: -len(suffix)]) * factor
    return int(value)


def requests_of(manifests: Sequence[Mapping[str, Any]]) -> tuple[int, int]:
    """(CPU millicores, memory bytes) requested by the long-running containers of the
    Deployments among ``manifests`` (init containers run before and are not added)."""
    cpu = memory = 0
    for manifest in manifests:
        if manifest.get("kind") != "Deployment":
            continue
        spec = manifest["spec"]
        for container in spec["template"]["spec"]["containers"]:
            requests = container.get("resources", {}).get("requests", {})
            cpu += spec["replicas"] * _cpu_millis(requests.get("cpu", "0m"))
            memory += spec["replicas"] * _bytes(requests.get("memory", "0"))
    return cpu, memory


PROMETHEUS_CLAIM = "gpu-metrics-data"


def prometheus_claim(size: str) -> dict[str, Any]:
    """A claim on the cluster's default StorageClass for the central Prometheus' TSDB."""
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(PROMETHEUS_CLAIM, METRICS_NAMESPACE, PROMETHEUS),
        "spec": {
            "accessModes": ["ReadWriteOnce"],
            "resources": {"requests": {"storage": size}},
        },
    }


# ------------------------------------------------- a Prometheus the Prometheus Operator runs

# prometheus-operator/prometheus-operator v0.93.0: the CRDs the objects below are validated
# against (example/prometheus-operator-crd/monitoring.coreos.com_{prometheusrules,
# scrapeconfigs}.yaml; tests/contract/test_prometheus_operator_objects.py).
PROMETHEUS_OPERATOR_TAG = "v0.93.0"
OPERATOR_RULE = "gpu-platform-metering"
OPERATOR_KAMAJI_SCRAPE = "gpu-platform-kamaji"

# prometheus.yml's relabelling keys -> the operator's RelabelConfig fields.
_RELABEL_FIELDS = {
    "source_labels": "sourceLabels",
    "separator": "separator",
    "target_label": "targetLabel",
    "regex": "regex",
    "modulus": "modulus",
    "replacement": "replacement",
    "action": "action",
}


def _operator_meta(name: str, labels: Mapping[str, str]) -> dict[str, Any]:
    meta = _meta(name, METRICS_NAMESPACE, PROMETHEUS)
    meta["labels"] = {**meta["labels"], **labels}
    return meta


def operator_rule(labels: Mapping[str, str]) -> dict[str, Any]:
    """The platform's rule groups (``rules.rule_groups``: the chargeback gauges, the hourly
    integrals, the metering alerts) as one PrometheusRule; ``labels`` are what the Prometheus'
    ``ruleSelector`` matches. The operator writes its groups verbatim into a rule file
    (v0.93.0 pkg/prometheus/server/rules.go) unless the Prometheus enforces a namespace label
    (``enforcedNamespaceLabel``, rules.go:54): that would add ``namespace="<this namespace>"``
    to every selector and select nothing, so the docs ask for this object in
    ``excludedFromEnforcement``."""
    return {
        "apiVersion": "monitoring.coreos.com/v1",
        "kind": "PrometheusRule",
        "metadata": _operator_meta(OPERATOR_RULE, labels),
        "spec": {"groups": rules.rule_groups()["groups"]},
    }


def operator_kamaji_scrape(
    scrape_interval: str, kamaji_namespace: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """The central server's Kamaji job (``scrape.central_config``) as a ScrapeConfig, with the
    same job name (``jobName``: the operator relabels ``job`` to it, v0.93.0
    pkg/prometheus/promcfg.go:3453-3474; otherwise it would be ``scrapeConfig/<ns>/<name>``),
    targets, labels and metric relabelling (``tcp_name`` -> ``tenant``)."""
    config = scrape.central_config(scrape_interval, kamaji_namespace)
    job = next(j for j in config["scrape_configs"] if j["job_name"] == "kamaji")
    static = job["static_configs"][0]
    return {
        "apiVersion": "monitoring.coreos.com/v1alpha1",
        "kind": "ScrapeConfig",
        "metadata": _operator_meta(OPERATOR_KAMAJI_SCRAPE, labels),
        "spec": {
            "jobName": job["job_name"],
            "honorLabels": job["honor_labels"],
            "scrapeInterval": scrape_interval,
            "staticConfigs": [{"targets": static["targets"], "labels": static["labels"]}],
            "metricRelabelings": [
                {_RELABEL_FIELDS[key]: value for key, value in relabel.items()}
                for relabel in job["metric_relabel_configs"]
            ],
        },
    }
