"""The scrape configurations: one Prometheus agent per tenant, and the central Prometheus.

**Per tenant** (``agent_config``): a Prometheus in agent mode (no query API, no local queries:
it only scrapes and remote-writes) runs in the tenant's namespace of the *management* cluster.
It discovers the tenant's HAMi pods (and, where the substrate adds them, the GPU Operator's DCGM
exporter pods) through the tenant's own API server — ``https://<control plane>.<namespace>.svc
:6443``, a name Kamaji puts in the API server certificate (clastix/kamaji 26.8.2-edge
internal/kubeadm/configuration.go:63-64) and dials itself (internal/utilities/tenant_client.go:63)
— and scrapes each pod through the API server's pod proxy
(``/api/v1/namespaces/<ns>/pods/<pod>:<port>/proxy/metrics``), so nothing inside the tenant is
exposed and no tenant node needs to be reachable from the management cluster. It authenticates
with a ServiceAccount token of the tenant cluster whose Roles allow only ``list``/``watch`` of
pods and ``get`` of ``pods/proxy`` in the scraped namespaces (``objects.tenant_reader``).

The ``tenant`` label is the platform's: every target gets it by relabelling, and with
``honor_labels: false`` (Prometheus' default, spelled out) a ``tenant`` label a scraped process
exposes is kept only as ``exported_tenant``; the agent also sets it as an external label, so
every sample it writes carries it. A tenant added or removed adds or removes its own agent (a
child of its GpuTenant): nothing central lists the tenants.

**Central** (``central_config``): the Prometheus server that receives the agents' remote writes
(``--web.enable-remote-write-receiver``), evaluates the recording rules (``rules``), and scrapes
Kamaji's controller metrics in ``kamaji-system`` (plain HTTP on :8080: clastix/kamaji 26.8.2-edge
charts/kamaji/values.yaml:42, templates/service_metrics.yaml; cmd/manager/cmd.go:115-117 sets no
secure serving). Kamaji's series name a control plane by ``tcp_namespace``/``tcp_name``; the
control plane is named after its tenant (lab: the TenantControlPlane; prod: the provider names
the TenantControlPlane after the KamajiControlPlane, clastix/cluster-api-control-plane-provider-
kamaji v0.20.0 controllers/kamajicontrolplane_controller_tcp.go:33, which is named after the
tenant), so ``tcp_name`` is copied into ``tenant``.
"""

from __future__ import annotations

import urllib.parse
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.metrics import dra_claims
from components.metrics.auth import client_basic_auth
from components.metrics.series import (
    DCGM_SERIES,
    DRA_SERIES,
    MONITOR_SERIES,
    SCHEDULER_SERIES,
    SHARING_LABEL,
    TENANT_LABEL,
    TRACED,
)
from components.tenant_values import HAMI_NAMESPACE

TOKEN_DIR = "/etc/gpu-metrics/tenant"
TOKEN_FILE = f"{TOKEN_DIR}/token"
CA_FILE = f"{TOKEN_DIR}/ca.crt"
CONFIG_DIR = "/etc/prometheus"
CONFIG_FILE = f"{CONFIG_DIR}/prometheus.yml"
RULES_FILE_NAME = "gpu-platform-rules.yml"
PROMETHEUS_PORT = 9090
# Each Prometheus scrapes itself (its own /metrics) under these jobs, keeping only what the
# alerts and ``make usage`` read (``self_job``).
AGENT_JOB = "gpu-metrics-agent"
CENTRAL_JOB = "prometheus"
# Kamaji's metrics Service: release "kamaji" (management_values.KAMAJI_RELEASE) -> fullname
# "kamaji" -> "<fullname>-metrics-service" (charts/kamaji/templates/_helpers.tpl:73-77), port 8080.
KAMAJI_METRICS_SERVICE = "kamaji-metrics-service"
KAMAJI_METRICS_PORT = 8080


@dataclass(frozen=True)
class TenantSource:
    """Pods inside a tenant whose metrics the tenant's agent scrapes."""

    job: str
    namespace: str
    pod_label: str
    """A label selector of the pods (``key=value``)."""
    port: int
    """The container port serving ``/metrics``."""
    series_source: str
    """Where the kept series are declared: the prefix of their ``Series.source``
    (``components.metrics.series``); every other series the pods expose is dropped at scrape."""

    def kept_names(self) -> tuple[str, ...]:
        return tuple(
            sorted(name for name, s in TRACED.items() if s.source.startswith(self.series_source))
        )


def agent_config(
    tenant: str,
    api_server: str,
    remote_write_url: str,
    sources: Sequence[TenantSource],
    scrape_interval: str,
    password_file: str | None = None,
) -> dict[str, Any]:
    """prometheus.yml of one tenant's agent; with ``password_file``, its remote write carries
    the central Prometheus' basic auth (``auth``), the password read from that file."""
    auth = {"authorization": {"credentials_file": TOKEN_FILE}, "tls_config": {"ca_file": CA_FILE}}
    host = api_server.removeprefix("https://")

    def job(source: TenantSource) -> dict[str, Any]:
        return {
            "job_name": source.job,
            "honor_labels": False,
            "scheme": "https",
            **auth,
            "kubernetes_sd_configs": [
                {
                    "role": "pod",
                    "api_server": api_server,
                    **auth,
                    "namespaces": {"names": [source.namespace]},
                    "selectors": [{"role": "pod", "label": source.pod_label}],
                }
            ],
            "relabel_configs": [
                {
                    "source_labels": ["__meta_kubernetes_pod_container_port_number"],
                    "regex": str(source.port),
                    "action": "keep",
                },
                {
                    "source_labels": ["__meta_kubernetes_pod_phase"],
                    "regex": "Running",
                    "action": "keep",
                },
                {
                    "source_labels": [
                        "__meta_kubernetes_namespace",
                        "__meta_kubernetes_pod_name",
                        "__meta_kubernetes_pod_container_port_number",
                    ],
                    "regex": "(.+);(.+);(.+)",
                    "target_label": "__metrics_path__",
                    "replacement": "/api/v1/namespaces/${1}/pods/${2}:${3}/proxy/metrics",
                },
                {"target_label": "__address__", "replacement": host},
                {
                    "source_labels": ["__meta_kubernetes_pod_name"],
                    "target_label": "instance",
                },
                {"target_label": "source", "replacement": source.job},
                {"target_label": TENANT_LABEL, "replacement": tenant},
            ],
            # Only the series this source is traced to export (series.TRACED) reach the central
            # server: a pod matching the selector cannot add a series named like a recorded rule
            # (``tenant:…``) or another source's (``kamaji_…``). Prometheus anchors the regex at
            # both ends, ``^(?s:…)$`` (prometheus/prometheus v3.5.0
            # model/relabel/relabel.go:183-186).
            "metric_relabel_configs": [
                {
                    "source_labels": ["__name__"],
                    "regex": "|".join(source.kept_names()),
                    "action": "keep",
                }
            ],
        }

    return {
        "global": {
            "scrape_interval": scrape_interval,
            "external_labels": {TENANT_LABEL: tenant},
        },
        "scrape_configs": [
            *(job(source) for source in sources),
            # Its own remote write: an ``up`` per tenant the central server sees as long as the
            # agent runs and its writes arrive, and the samples the central server refused;
            # a dra tenant's (one with the claims exporter's job) carries ``gpu_sharing="dra"``
            # so GpuDraClaimsNotScraped knows whose exporter must be up (rules.py).
            self_job(
                AGENT_JOB,
                ("prometheus_remote_storage_samples_failed_total",),
                tenant,
                extra_labels={SHARING_LABEL: "dra"} if DRA_CLAIMS_SOURCE in sources else {},
            ),
        ],
        "remote_write": [
            {
                "url": remote_write_url,
                **(client_basic_auth(password_file) if password_file else {}),
            }
        ],
    }


def self_job(
    job: str,
    kept: Sequence[str],
    tenant: str | None = None,
    password_file: str | None = None,
    extra_labels: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Prometheus scraping its own /metrics, keeping only ``kept`` (its ``up`` is kept
    whatever the filter: scrape/scrape.go:721-735 at prometheus v3.5.0); with
    ``password_file``, with its own listener's basic auth (``auth``); ``extra_labels`` on the
    target (so on its ``up``)."""
    labels = {
        "source": job,
        **({TENANT_LABEL: tenant} if tenant else {}),
        **(extra_labels or {}),
    }
    return {
        "job_name": job,
        "honor_labels": False,
        **(client_basic_auth(password_file) if password_file else {}),
        "static_configs": [{"targets": [f"localhost:{PROMETHEUS_PORT}"], "labels": labels}],
        "metric_relabel_configs": [
            {"source_labels": ["__name__"], "regex": "|".join(kept), "action": "keep"}
        ],
    }


def central_config(
    scrape_interval: str,
    kamaji_namespace: str,
    alertmanagers: Sequence[str] = (),
    password_file: str | None = None,
) -> dict[str, Any]:
    """prometheus.yml of the central Prometheus: the rules and alerts, Kamaji, itself (with
    ``password_file``: through its own basic auth), and where alerts go (``alertmanagers``,
    base URLs; none: only its own /alerts page)."""
    config: dict[str, Any] = {
        "global": {"scrape_interval": scrape_interval},
        "rule_files": [f"{CONFIG_DIR}/{RULES_FILE_NAME}"],
        "scrape_configs": [
            {
                "job_name": "kamaji",
                "honor_labels": False,
                "static_configs": [
                    {
                        "targets": [
                            f"{KAMAJI_METRICS_SERVICE}.{kamaji_namespace}.svc:{KAMAJI_METRICS_PORT}"
                        ],
                        "labels": {"source": "kamaji"},
                    }
                ],
                "metric_relabel_configs": [
                    {
                        "source_labels": ["tcp_name"],
                        "regex": "(.+)",
                        "target_label": TENANT_LABEL,
                        "replacement": "${1}",
                    }
                ],
            },
            self_job(
                CENTRAL_JOB,
                (
                    "prometheus_rule_evaluation_failures_total",
                    "prometheus_tsdb_lowest_timestamp_seconds",
                    "prometheus_tsdb_retention_limit_seconds",
                ),
                password_file=password_file,
            ),
        ],
    }
    if alertmanagers:
        config["alerting"] = {"alertmanagers": [alertmanager(url) for url in alertmanagers]}
    return config


def alertmanager(url: str) -> dict[str, Any]:
    """One ``alerting.alertmanagers`` entry for an Alertmanager's base URL
    (``http(s)://host:port[/prefix]``; prometheus v3.5.0 config/config.go AlertmanagerConfig:
    scheme, path_prefix, static_configs)."""
    parsed = urllib.parse.urlsplit(url)
    entry: dict[str, Any] = {
        "scheme": parsed.scheme,
        "static_configs": [{"targets": [parsed.netloc]}],
    }
    if parsed.path.strip("/"):
        entry["path_prefix"] = parsed.path
    return entry


# HAMi inside every tenant (release "hami" in HAMI_NAMESPACE, components.tenant_values): the
# scheduler's extender serves :9395 (charts/hami/values.yaml:79 metricsBindAddress,
# templates/scheduler/deployment.yaml:149-150), the device plugin's vgpu-monitor container :9394
# (templates/device-plugin/daemonsetnvidia.yaml:157-190; cmd/vGPUmonitor/main.go:61); the pods
# carry app.kubernetes.io/component hami-scheduler / hami-device-plugin (deployment.yaml:28,
# daemonsetnvidia.yaml:28). Project-HAMi/HAMi v2.10.0.
HAMI_SOURCES = (
    TenantSource(
        "hami-scheduler",
        HAMI_NAMESPACE,
        "app.kubernetes.io/component=hami-scheduler",
        9395,
        SCHEDULER_SERIES,
    ),
    TenantSource(
        "hami-device-plugin",
        HAMI_NAMESPACE,
        "app.kubernetes.io/component=hami-device-plugin",
        9394,
        MONITOR_SERIES,
    ),
)


# The GPU Operator's DCGM exporter pods, by the stack that deploys them (NVIDIA/gpu-operator
# v26.7.0): the ClusterPolicy's (a hami tenant: assets/state-dcgm-exporter/0800_daemonset.yaml,
# app=nvidia-dcgm-exporter) and the GPUCluster's (a dra tenant: manifests/state-dcgm-exporter/
# 0700_daemonset.yaml:4-27, app=nvidia-dcgm-exporter-dra); both on port 9400.
DCGM_EXPORTER_APPS = ("nvidia-dcgm-exporter", "nvidia-dcgm-exporter-dra")


def dcgm_source(namespace: str) -> TenantSource:
    """The GPU Operator's DCGM exporter, whichever of its two stacks runs it (on by default,
    deployments/gpu-operator/values.yaml:299-300), port 9400: a set-based selector, which
    Prometheus accepts (prometheus v3.5.0 discovery/kubernetes/kubernetes.go:220, apimachinery's
    labels.Parse) and passes as the pod list's labelSelector."""
    selector = f"app in ({','.join(DCGM_EXPORTER_APPS)})"
    return TenantSource("dcgm-exporter", namespace, selector, 9400, DCGM_SERIES)


# A gpuSharing: dra tenant's claims exporter (components.metrics.dra_claims): the platform's own
# pod in HAMi's namespace, where the agent's reader may already list pods and use their proxy.
DRA_CLAIMS_COMPONENT = "gpu-platform-dra-claims"
DRA_CLAIMS_SOURCE = TenantSource(
    "dra-claims",
    HAMI_NAMESPACE,
    f"app.kubernetes.io/component={DRA_CLAIMS_COMPONENT}",
    dra_claims.PORT,
    DRA_SERIES,
)


def tenant_sources(gpu_sharing: str, substrate: Sequence[TenantSource]) -> tuple[TenantSource, ...]:
    """What a tenant's agent scrapes: HAMi, the substrate's sources, and a ``dra`` tenant's
    claims exporter."""
    dra = (DRA_CLAIMS_SOURCE,) if gpu_sharing == "dra" else ()
    return (*HAMI_SOURCES, *substrate, *dra)
