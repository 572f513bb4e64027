"""Alerts on the tenants' datastore backups (docs/backups.md "Alerts", issue 38 point 4): a
backup that failed, was OOM-killed, or is older than twice its schedule, and a backup left
suspended by a restore that did not finish.

Nothing in a backup Job outlives it to be scraped, so the central Prometheus reads the Jobs'
state from the API through kube-state-metrics (kubernetes/kube-state-metrics v2.20.0), limited
to CronJobs, Jobs and Pods and to the series the alerts read, and keeps only those of the
``datastore-backup``/``datastore-restore`` objects (the scrape job's ``metric_relabel_configs``).
The series, at v2.20.0 ``internal/store``: ``kube_cronjob_status_last_successful_time``,
``kube_cronjob_status_last_schedule_time``, ``kube_cronjob_next_schedule_time`` (absent while
suspended), ``kube_cronjob_spec_suspend``, ``kube_cronjob_created`` (cronjob.go:120-260);
``kube_job_failed{condition}``, ``kube_job_status_start_time`` (job.go:314-340, labels
``namespace``, ``job_name``: job.go:42); ``kube_pod_created``,
``kube_pod_container_status_terminated_reason`` and the init containers' (pod.go:515-535,592,
1056-1075, labels ``container``, ``reason``).

Each alert carries the tenant's management ``namespace``. Failures and OOM kills count only when
no scheduled backup succeeded since (``lastSuccessfulTime``): the three failed Jobs the CronJob
keeps do not alert forever.
"""

from __future__ import annotations

from typing import Any

from components.k8s_objects import restricted_security
from components.versions import PINNED

NAME = "gpu-backup-state-metrics"
PORT = 8080
JOB = "backup-state-metrics"
# The backup CronJob's name and its Jobs' (components.backups.objects.BACKUP; a sibling layer,
# so written here and compared by a test): the CronJob names its Jobs ``<cronjob>-<unix minutes>``
# (kubernetes pkg/controller/cronjob/cronjob_controllerv2.go getJobName, getTimeHashInMinutes;
# not read at the v1.35 tag), ``make backup`` ``-manual-<time>`` (scripts/backups.py); ``-list-``
# Jobs only list and are left out.
BACKUP_CRON_JOB = "datastore-backup"
_JOBS = f'job_name=~"{BACKUP_CRON_JOB}-(manual-)?[0-9]+"'
_PODS = f'pod=~"{BACKUP_CRON_JOB}-(manual-)?[0-9]+-.+"'
_CRON = f'cronjob="{BACKUP_CRON_JOB}"'
# How long a restore may keep the backup suspended: its Job's activeDeadlineSeconds (3600 s,
# components.backups.objects.restore_cron_job) and an hour to spare.
SUSPENDED_FOR = "2h"

METRICS = (
    "kube_cronjob_status_last_successful_time",
    "kube_cronjob_status_last_schedule_time",
    "kube_cronjob_next_schedule_time",
    "kube_cronjob_spec_suspend",
    "kube_cronjob_created",
    "kube_job_failed",
    "kube_job_status_start_time",
    "kube_pod_created",
    "kube_pod_container_status_terminated_reason",
    "kube_pod_init_container_status_terminated_reason",
)

# The newest successful scheduled backup, per namespace; a CronJob that never succeeded counts
# from its creation (too old) or from 0 (any failure counts).
_LAST_SUCCESS = (
    f"max by (namespace) (kube_cronjob_status_last_successful_time{{{_CRON}}} "
    f"or kube_cronjob_created{{{_CRON}}})"
)
_LAST_SUCCESS_OR_NEVER = (
    f"max by (namespace) (kube_cronjob_status_last_successful_time{{{_CRON}}} "
    f"or kube_cronjob_created{{{_CRON}}} * 0)"
)
_PERIOD = (
    f"max by (namespace) (kube_cronjob_next_schedule_time{{{_CRON}}} "
    f"- kube_cronjob_status_last_schedule_time{{{_CRON}}})"
)

# (name, expression, for, summary): alerting rules of the central Prometheus
# (components.metrics.rules adds them as their own group).
ALERTS: tuple[tuple[str, str, str, str], ...] = (
    (
        "TenantBackupFailed",
        f"max by (namespace) (kube_job_status_start_time{{{_JOBS}}} and on (namespace, job_name) "
        f'(kube_job_failed{{{_JOBS}, condition="true"}} == 1)) > on (namespace) '
        f"{_LAST_SUCCESS_OR_NEVER}",
        "0m",
        "{{ $labels.namespace }}: a datastore backup failed and none succeeded since (kubectl "
        "-n {{ $labels.namespace }} logs job/<the failed datastore-backup job> --all-containers)",
    ),
    (
        "TenantBackupOOMKilled",
        "max by (namespace, pod, container) ("
        f'(kube_pod_container_status_terminated_reason{{{_PODS}, reason="OOMKilled"}} '
        f'or kube_pod_init_container_status_terminated_reason{{{_PODS}, reason="OOMKilled"}}) '
        f"* on (namespace, pod) group_left () kube_pod_created{{{_PODS}}}"
        f") > on (namespace) group_left () {_LAST_SUCCESS_OR_NEVER}",
        "0m",
        "{{ $labels.namespace }}: the {{ $labels.container }} step of backup pod "
        "{{ $labels.pod }} was OOM-killed and no backup succeeded since (the tenant outgrew "
        "the Job's memory limit: docs/backups.md, How large a tenant)",
    ),
    (
        "TenantBackupTooOld",
        f"time() - {_LAST_SUCCESS} > on (namespace) 2 * {_PERIOD}",
        "10m",
        "{{ $labels.namespace }}: the newest successful backup is older than twice the "
        "tenant's backup schedule",
    ),
    (
        "TenantBackupSuspended",
        f"max by (namespace) (kube_cronjob_spec_suspend{{{_CRON}}}) == 1",
        SUSPENDED_FOR,
        "{{ $labels.namespace }}: the tenant's scheduled backup has been suspended for "
        f"{SUSPENDED_FOR}: a restore stopped before its start step (docs/backups.md, If a step "
        "fails)",
    ),
)


def scrape_job(namespace: str) -> dict[str, Any]:
    """The central Prometheus' job for kube-state-metrics: only the backup and restore objects'
    series are kept (``pod``, ``job_name`` or ``cronjob`` starting ``datastore-``)."""
    return {
        "job_name": JOB,
        # The series' own namespace/job_name/pod labels clash with none the target adds.
        "honor_labels": False,
        "static_configs": [{"targets": [f"{NAME}.{namespace}.svc:{PORT}"]}],
        "metric_relabel_configs": [
            {
                "source_labels": ["pod", "job_name", "cronjob"],
                "separator": ";",
                "regex": "(.*;)?datastore-.*",
                "action": "keep",
            }
        ],
    }


def _labels() -> dict[str, str]:
    return {"app.kubernetes.io/name": NAME, "app.kubernetes.io/part-of": "gpu-platform-metrics"}


def _meta(namespace: str | None) -> dict[str, Any]:
    meta: dict[str, Any] = {"name": NAME, "labels": _labels()}
    if namespace is not None:
        meta["namespace"] = namespace
    return meta


def manifests(namespace: str) -> list[dict[str, Any]]:
    """kube-state-metrics in ``namespace`` (the central Prometheus'): its ServiceAccount, a
    ClusterRole to list and watch CronJobs, Jobs and Pods (the verbs of v2.20.0
    examples/standard/cluster-role.yaml), its binding, the Deployment and the Service. The image
    runs as nobody (v2.20.0 Dockerfile: distroless, ``USER nobody``)."""
    container = {
        "name": "kube-state-metrics",
        "image": PINNED.kube_state_metrics_image,
        "imagePullPolicy": "IfNotPresent",
        "args": [
            f"--port={PORT}",
            "--telemetry-port=8081",
            "--resources=cronjobs,jobs,pods",
            f"--metric-allowlist={','.join(METRICS)}",
        ],
        "ports": [{"name": "http", "containerPort": PORT}],
        "readinessProbe": {"httpGet": {"path": "/readyz", "port": 8081}},
        "livenessProbe": {"httpGet": {"path": "/livez", "port": PORT}},
        "resources": {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}},
        "securityContext": restricted_security(65534),
    }
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": _meta(namespace),
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRole",
            "metadata": _meta(None),
            "rules": [
                {
                    "apiGroups": ["batch"],
                    "resources": ["cronjobs", "jobs"],
                    "verbs": ["list", "watch"],
                },
                {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "watch"]},
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "ClusterRoleBinding",
            "metadata": _meta(None),
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": NAME,
            },
            "subjects": [{"kind": "ServiceAccount", "name": NAME, "namespace": namespace}],
        },
        {
            "apiVersion": "apps/v1",
            "kind": "Deployment",
            "metadata": _meta(namespace),
            "spec": {
                "replicas": 1,
                "selector": {"matchLabels": _labels()},
                "template": {
                    "metadata": {"labels": _labels()},
                    "spec": {
                        "serviceAccountName": NAME,
                        "automountServiceAccountToken": True,
                        "securityContext": {"runAsNonRoot": True},
                        "containers": [container],
                    },
                },
            },
        },
        {
            "apiVersion": "v1",
            "kind": "Service",
            "metadata": _meta(namespace),
            "spec": {
                "type": "ClusterIP",
                "selector": _labels(),
                "ports": [{"name": "http", "port": PORT, "targetPort": PORT, "protocol": "TCP"}],
            },
        },
    ]
