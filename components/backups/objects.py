"""The Kubernetes objects of one tenant's datastore backups, as plain manifests (pure).

All of them live in the tenant's namespace in the management cluster, next to its control plane:

* ``datastore-backup`` (CronJob): on the tenant's schedule, refuses a paused or restoring tenant
  (``backup-guard.sh``, before and again after the export), reads the etcd endpoints the tenant's
  API server uses (``api-server-endpoints.sh``), exports the tenant's key prefix at one revision
  as the tenant's own etcd user (``etcd-export.sh``: Kamaji's per-tenant client certificate, whose
  role covers only ``/<schema>/``, so etcd itself refuses any other tenant's keys), then packs,
  uploads, verifies and prunes (``tenant_backup.py backup``).
* ``datastore-restore`` (CronJob, suspended for good): the template of a restore Job. Nothing
  runs it on a schedule or on ``pulumi up``; ``make restore`` creates a Job from it
  (docs/backups.md). Its steps, in order, each an init container so that a failure stops the
  rest: fetch and verify the backup (before anything is touched), stop the control plane (and
  suspend ``datastore-backup``), import, export again and compare, write the tenant's root keys
  back into Kamaji's Secrets (``tenant-pki.sh``), then start the control plane (and resume
  ``datastore-backup``).
* two ServiceAccounts with Roles: the backup may only read the control plane's Deployment and
  TenantControlPlane; the restore may also mark and pause the control plane, scale its
  Deployment and suspend and resume the backup CronJob.
* ``datastore-backup-scripts`` (ConfigMap): the scripts above, from ``scripts/backup``.
* ``datastore-backup-target`` (Secret): the S3 target and the tenant's archive key (its data is
  registered as a secret).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from components.config import Tenant
from components.k8s_objects import restricted_security
from components.labels import TENANT_LABEL
from components.scripts import read_script
from components.versions import PINNED

BACKUP = "datastore-backup"
RESTORE = "datastore-restore"
SCRIPTS = "datastore-backup-scripts"
TARGET = "datastore-backup-target"
SCRIPT_FILES = (
    "api-server-endpoints.sh",
    "backup-guard.sh",
    "control-plane.sh",
    "etcd-env.sh",
    "etcd-export.sh",
    "etcd-import.sh",
    "tenant-pki.sh",
    "tenant_backup.py",
)
# The Secret's keys: the environment tenant_backup.py reads, plus the optional CA bundle file.
TARGET_ENV = (
    "S3_ENDPOINT",
    "S3_REGION",
    "S3_BUCKET",
    "S3_PREFIX",
    "AWS_ACCESS_KEY_ID",
    "AWS_SECRET_ACCESS_KEY",
)
TARGET_CA_KEY = "ca.crt"
# The tenant's archive key (64 hex digits): every archive is encrypted with it before upload
# (AES-256-GCM, scripts/backup/tenant_backup.py) and a restore decrypts with it.
TARGET_KEY_KEY = "archive.key"
WORK_DIR = "/work"
SCRIPTS_DIR = "/scripts"
CERTS_DIR = "/etcd-certs"
TARGET_DIR = "/target"
# Kamaji's Secret with the tenant's etcd client certificate (CN: the tenant's etcd user),
# ``<tcp>-datastore-certificate`` in the TCP's namespace (clastix/kamaji 26.8.2-edge
# internal/resources/datastore/datastore_certificate.go:60-77, keys set at :100, :172-173).
DATASTORE_CERTIFICATE_SUFFIX = "-datastore-certificate"
# The tenant's root keys, Kamaji's Secrets ``<tcp>-<name>``: its CA, service-account key pair and
# front-proxy CA (internal/resources/ca_certificate.go:82-84, sa_certificate.go:78-79,
# front_proxy_ca_certificate.go:78-79; the prefix: internal/utilities/utilities.go:43-44). The
# backup archives them (encrypted with the rest) and the restore writes them back
# (docs/backups.md), so a tenant restored after losing the management cluster keeps its CA.
PKI_SECRETS = ("ca", "sa-certificate", "front-proxy-ca-certificate")
PKI_DIR = "/pki"
# The label Kamaji selects a control plane's pods by (internal/builders/controlplane/
# deployment.go:1076-1080); the Deployment is named like the TenantControlPlane.
CONTROL_PLANE_POD_LABEL = "kamaji.clastix.io/name"
# Kamaji skips a TenantControlPlane carrying this annotation (api/v1alpha1/
# tenantcontrolplane_const.go:7-9), so it does not scale the stopped Deployment back.
KAMAJI_PAUSED_ANNOTATION = "kamaji.clastix.io/paused"
# The label the Job controller puts on every pod of a Job, with the Job's name (kubernetes/api
# batch/v1/types.go JobNameLabel): the restore's stop step marks the TenantControlPlane with it.
JOB_NAME_LABEL = "batch.kubernetes.io/job-name"
_USER = 65532
_RESOURCES = {
    "requests": {"cpu": "50m", "memory": "64Mi"},
    "limits": {"memory": "512Mi"},
}


@dataclass(frozen=True)
class PauseOwner:
    """An object, named like the TenantControlPlane, whose controllers rewrite the control plane
    unless it is paused too (prod: the Cluster API Cluster, ``spec.paused``); the restore pauses it
    first and resumes it last."""

    resource: str
    """``kubectl`` resource name, e.g. ``clusters.cluster.x-k8s.io``."""
    api_group: str
    plural: str


@dataclass(frozen=True)
class BackupPlan:
    """Everything the objects of one tenant's backups depend on."""

    tenant: str
    namespace: str
    control_plane: str
    schema: str
    schedule: str
    retention: int
    pause_owner: PauseOwner | None = None

    @classmethod
    def of(cls, tenant: Tenant, namespace: str, pause_owner: PauseOwner | None) -> BackupPlan:
        """The plan of a configured tenant whose backups live in ``namespace`` (its management
        namespace); its control plane is named after it."""
        return cls(
            tenant=tenant.name,
            namespace=namespace,
            control_plane=tenant.name,
            schema=tenant.data_store.schema_name,
            schedule=tenant.backups.schedule,
            retention=tenant.backups.retention,
            pause_owner=pause_owner,
        )

    @property
    def prefix(self) -> str:
        """The tenant's etcd key prefix: ``/<schema>/``, the range Kamaji grants its user
        (internal/datastore/etcd.go:60-75, buildKey :185-187) and the API server writes under
        (``--etcd-prefix=/<schema>``, internal/builders/controlplane/deployment.go:739)."""
        return f"/{self.schema}/"


def pki_secret_names(plan: BackupPlan) -> list[str]:
    """Kamaji's Secrets holding the tenant's root keys."""
    return [f"{plan.control_plane}-{name}" for name in PKI_SECRETS]


def _meta(plan: BackupPlan, name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": plan.namespace,
        "labels": {
            TENANT_LABEL: plan.tenant,
            "app.kubernetes.io/name": name,
            "app.kubernetes.io/part-of": "gpu-platform",
        },
    }


def scripts_config_map(plan: BackupPlan) -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(plan, SCRIPTS),
        "data": {name: read_script("backup", name) for name in SCRIPT_FILES},
    }


def target_secret(plan: BackupPlan) -> dict[str, Any]:
    """The target Secret's manifest; its ``stringData`` is registered as a secret output."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(plan, TARGET), "type": "Opaque"}


def _role_rules(plan: BackupPlan, restore: bool) -> list[dict[str, Any]]:
    # `kubectl rollout status` gets, then lists and watches the Deployment with a
    # metadata.name field selector (kubernetes/kubectl v0.35.0
    # pkg/cmd/rollout/rollout_status.go:161-194), which resourceNames still allows.
    deployments: dict[str, Any] = {
        "apiGroups": ["apps"],
        "resources": ["deployments"],
        "resourceNames": [plan.control_plane],
        "verbs": ["get", "list", "watch"] if restore else ["get"],
    }
    control_plane: dict[str, Any] = {
        "apiGroups": ["kamaji.clastix.io"],
        "resources": ["tenantcontrolplanes"],
        "resourceNames": [plan.control_plane],
        "verbs": ["get", "patch"] if restore else ["get"],
    }
    if not restore:
        # backup-guard.sh reads the TenantControlPlane's pause and restore marks.
        return [deployments, control_plane]
    rules = [
        deployments,
        # `kubectl scale` gets the Deployment, then patches its scale subresource
        # (pkg/cmd/scale/scale.go:218-247).
        {
            "apiGroups": ["apps"],
            "resources": ["deployments/scale"],
            "resourceNames": [plan.control_plane],
            "verbs": ["get", "patch", "update"],
        },
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]},
        control_plane,
        # control-plane.sh suspends the scheduled backup while it restores and resumes it after
        # the verified import (kubectl patch: get, then patch).
        {
            "apiGroups": ["batch"],
            "resources": ["cronjobs"],
            "resourceNames": [BACKUP],
            "verbs": ["get", "patch"],
        },
        # control-plane.sh reads whether the restore Job holding the lock still runs; restore
        # Jobs are named per run, so no resourceNames.
        {"apiGroups": ["batch"], "resources": ["jobs"], "verbs": ["get"]},
        # tenant-pki.sh writes the tenant's root keys back into Kamaji's Secrets (patch only:
        # they must exist, so create is not granted).
        {
            "apiGroups": [""],
            "resources": ["secrets"],
            "resourceNames": pki_secret_names(plan),
            "verbs": ["get", "patch"],
        },
    ]
    if plan.pause_owner is not None:
        rules.append(
            {
                "apiGroups": [plan.pause_owner.api_group],
                "resources": [plan.pause_owner.plural],
                "resourceNames": [plan.control_plane],
                "verbs": ["get", "patch"],
            }
        )
    return rules


def access(plan: BackupPlan, restore: bool) -> list[dict[str, Any]]:
    """The ServiceAccount, Role and RoleBinding of the backup (read the control plane's
    Deployment for its etcd endpoints) or of the restore (also pause and scale it)."""
    name = RESTORE if restore else BACKUP
    meta = _meta(plan, name)
    return [
        {
            "apiVersion": "v1",
            "kind": "ServiceAccount",
            "metadata": meta,
            "automountServiceAccountToken": False,
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": _role_rules(plan, restore),
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": name},
            "subjects": [{"kind": "ServiceAccount", "name": name, "namespace": plan.namespace}],
        },
    ]


# ------------------------------------------------------------------------------- containers


def _env(values: Mapping[str, str]) -> list[dict[str, Any]]:
    return [{"name": key, "value": value} for key, value in values.items()]


def _target_env() -> list[dict[str, Any]]:
    return [
        {"name": key, "valueFrom": {"secretKeyRef": {"name": TARGET, "key": key}}}
        for key in TARGET_ENV
    ]


def _common_env(plan: BackupPlan) -> dict[str, str]:
    return {
        "WORK_DIR": WORK_DIR,
        "HOME": WORK_DIR,
        "BACKUP_TENANT": plan.tenant,
        "BACKUP_PREFIX": plan.prefix,
    }


def _container(
    name: str,
    image: str,
    command: Sequence[str],
    env: list[dict[str, Any]],
    mounts: Sequence[str],
) -> dict[str, Any]:
    paths = {
        "work": WORK_DIR,
        "scripts": SCRIPTS_DIR,
        "etcd-certs": CERTS_DIR,
        "target": TARGET_DIR,
    }
    return {
        "name": name,
        "image": image,
        "imagePullPolicy": "IfNotPresent",
        "command": list(command),
        "env": env,
        "resources": {key: dict(value) for key, value in _RESOURCES.items()},
        "securityContext": restricted_security(_USER),
        "volumeMounts": [
            {
                "name": mount,
                "mountPath": paths.get(mount, f"{PKI_DIR}/{mount.removeprefix('pki-')}"),
                "readOnly": mount != "work",
            }
            for mount in mounts
        ],
    }


def _endpoints(plan: BackupPlan) -> dict[str, Any]:
    """Writes the etcd endpoints the tenant's API server uses (its ``--etcd-servers``)."""
    env = {**_common_env(plan), "CONTROL_PLANE": plan.control_plane}
    return _container(
        "endpoints",
        PINNED.backup_kubectl_image,
        ["sh", f"{SCRIPTS_DIR}/api-server-endpoints.sh"],
        _env(env),
        ("work", "scripts"),
    )


def _etcd(plan: BackupPlan, name: str, script: str, export_file: str) -> dict[str, Any]:
    env = {
        **_common_env(plan),
        "ETCDCTL_API": "3",
        # etcdctl's --command-timeout (default 5 s, etcd v3.5.6 etcdctl/ctlv3/ctl.go:33,58) bounds
        # the one Range of a whole tenant: give a large tenant time.
        "ETCDCTL_COMMAND_TIMEOUT": "300s",
        "ETCDCTL_CACERT": f"{CERTS_DIR}/ca.crt",
        "ETCDCTL_CERT": f"{CERTS_DIR}/server.crt",
        "ETCDCTL_KEY": f"{CERTS_DIR}/server.key",
        "EXPORT_FILE": export_file,
    }
    return _container(
        name,
        PINNED.backup_etcd_image,
        ["bash", f"{SCRIPTS_DIR}/{script}"],
        _env(env),
        ("work", "scripts", "etcd-certs"),
    )


def _python(
    plan: BackupPlan,
    name: str,
    command: str,
    extra: Mapping[str, str],
    pki: bool = False,
) -> dict[str, Any]:
    env = {
        **_common_env(plan),
        "BACKUP_RETENTION": str(plan.retention),
        "S3_CA_FILE": f"{TARGET_DIR}/{TARGET_CA_KEY}",
        "BACKUP_KEY_FILE": f"{TARGET_DIR}/{TARGET_KEY_KEY}",
        **extra,
    }
    if pki:
        env |= {"BACKUP_PKI_DIR": PKI_DIR, "BACKUP_PKI_SECRETS": ",".join(PKI_SECRETS)}
    mounts = ("work", "scripts", "target", *(f"pki-{n}" for n in PKI_SECRETS if pki))
    return _container(
        name,
        PINNED.backup_python_image,
        ["python3", f"{SCRIPTS_DIR}/tenant_backup.py", command],
        [*_env(env), *_target_env()],
        mounts,
    )


def _pki_restore(plan: BackupPlan) -> dict[str, Any]:
    """Writes the backup's root keys into Kamaji's Secrets (the control plane still stopped)."""
    env = {**_common_env(plan), "CONTROL_PLANE": plan.control_plane}
    return _container(
        "pki",
        PINNED.backup_kubectl_image,
        ["sh", f"{SCRIPTS_DIR}/tenant-pki.sh"],
        _env(env),
        ("work", "scripts"),
    )


def _control_plane(plan: BackupPlan, name: str, action: str) -> dict[str, Any]:
    env = {
        **_common_env(plan),
        "CONTROL_PLANE": plan.control_plane,
        "CONTROL_PLANE_POD_LABEL": CONTROL_PLANE_POD_LABEL,
        "KAMAJI_PAUSED_ANNOTATION": KAMAJI_PAUSED_ANNOTATION,
        "BACKUP_CRON_JOB": BACKUP,
    }
    if plan.pause_owner is not None:
        env["PAUSE_OWNER"] = plan.pause_owner.resource
    job_name = {
        "name": "JOB_NAME",
        "valueFrom": {"fieldRef": {"fieldPath": f"metadata.labels['{JOB_NAME_LABEL}']"}},
    }
    return _container(
        name,
        PINNED.backup_kubectl_image,
        ["sh", f"{SCRIPTS_DIR}/control-plane.sh", action],
        [*_env(env), job_name],
        ("work", "scripts"),
    )


def _guard(plan: BackupPlan, name: str, when: str) -> dict[str, Any]:
    """Refuses the backup of a paused or restoring tenant, before and after the export."""
    env = {
        **_common_env(plan),
        "CONTROL_PLANE": plan.control_plane,
        "KAMAJI_PAUSED_ANNOTATION": KAMAJI_PAUSED_ANNOTATION,
    }
    return _container(
        name,
        PINNED.backup_kubectl_image,
        ["sh", f"{SCRIPTS_DIR}/backup-guard.sh", when],
        _env(env),
        ("work", "scripts"),
    )


def _pod(
    plan: BackupPlan,
    account: str,
    init_containers: list[dict[str, Any]],
    container: dict[str, Any],
    pki: bool = False,
) -> dict[str, Any]:
    pki_volumes = [
        {
            "name": f"pki-{name}",
            "secret": {"secretName": f"{plan.control_plane}-{name}", "defaultMode": 0o440},
        }
        for name in PKI_SECRETS
        if pki
    ]
    return {
        "metadata": {"labels": _meta(plan, account)["labels"]},
        "spec": {
            "serviceAccountName": account,
            "automountServiceAccountToken": True,
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "fsGroup": _USER},
            "initContainers": init_containers,
            "containers": [container],
            "volumes": [
                {"name": "work", "emptyDir": {"sizeLimit": "4Gi"}},
                {"name": "scripts", "configMap": {"name": SCRIPTS}},
                {
                    "name": "etcd-certs",
                    "secret": {
                        "secretName": f"{plan.control_plane}{DATASTORE_CERTIFICATE_SUFFIX}",
                        "defaultMode": 0o440,
                    },
                },
                {"name": "target", "secret": {"secretName": TARGET, "defaultMode": 0o440}},
                *pki_volumes,
            ],
        },
    }


def backup_cron_job(plan: BackupPlan) -> dict[str, Any]:
    """The scheduled backup: refuse a paused or restoring tenant, endpoints, export, the same
    refusal again (a restore may have begun during the export), then pack/upload/verify/prune.

    ``spec.suspend`` is left out on purpose: the restore suspends the CronJob while it runs, and
    pulumi-kubernetes applies server-side by default (pulumi/pulumi-kubernetes 94977969d
    provider/pkg/provider/provider.go:651-665), sending only the fields the program sets, so a
    ``pulumi up`` during a restore does not resume the backups. The in-Job guard protects the
    tenant either way."""
    pod = _pod(
        plan,
        BACKUP,
        [
            _guard(plan, "guard", "before"),
            _endpoints(plan),
            _etcd(plan, "export", "etcd-export.sh", "export.json"),
            _guard(plan, "recheck", "after"),
        ],
        _python(
            plan,
            "upload",
            "backup",
            {"EXPORT_FILE": "export.json", "BACKUP_ACCEPT_SUSPECT": ""},
            pki=True,
        ),
        pki=True,
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(plan, BACKUP),
        "spec": {
            "schedule": plan.schedule,
            # One backup at a time; a missed run is skipped after an hour rather than piling up.
            "concurrencyPolicy": "Forbid",
            "startingDeadlineSeconds": 3600,
            "successfulJobsHistoryLimit": 3,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {
                    "backoffLimit": 2,
                    "activeDeadlineSeconds": 1800,
                    "template": pod,
                }
            },
        },
    }


def restore_cron_job(plan: BackupPlan) -> dict[str, Any]:
    """The restore Job's template, suspended: it never runs on a schedule (docs/backups.md)."""
    pod = _pod(
        plan,
        RESTORE,
        [
            _endpoints(plan),
            _python(plan, "fetch", "fetch", {"BACKUP_NAME": "latest"}),
            _control_plane(plan, "stop", "stop"),
            _etcd(plan, "import", "etcd-import.sh", "export.json"),
            _etcd(plan, "export", "etcd-export.sh", "restored.json"),
            _python(plan, "check", "check-restored", {"EXPORT_FILE": "restored.json"}),
            _pki_restore(plan),
        ],
        _control_plane(plan, "start", "start"),
    )
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(plan, RESTORE),
        "spec": {
            # Suspended for good, so the schedule (a valid one) never fires: only `make restore`
            # creates a Job from this template.
            "schedule": "0 0 1 1 *",
            "suspend": True,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 5,
            "failedJobsHistoryLimit": 5,
            "jobTemplate": {
                "spec": {
                    # A failed restore is never retried by itself: it leaves the control plane
                    # stopped and says which step failed (docs/backups.md).
                    "backoffLimit": 0,
                    "activeDeadlineSeconds": 3600,
                    "template": pod,
                }
            },
        },
    }
