"""The usage publisher: each tenant's own GPU usage, written into its own cluster every hour, where
every user of the tenant can read it with their own credential (docs/metrics.md, "Your own
usage, as a tenant"). Plain manifests, one pure function per object.

In the tenant's namespace of the management cluster (children of its GpuTenant, so a tenant added
or removed adds or removes its own publisher, and nothing lists tenants centrally):

* ``gpu-usage-publisher`` (ConfigMap): the publisher's files — ``scripts/metrics/
  publish_usage.py`` and ``apply-usage.sh``, the standard-library report code it runs
  (``usage_rows``, ``self_view``, laid out as ``components/metrics/`` by the volume's items) and
  ``queries.json``, this tenant's queries as ``usage.queries`` builds them for ``make usage
  TENANT=<tenant>`` (at ``self_view.TEMPLATE_SECONDS``; the publisher puts each window's length in).
* ``gpu-usage-publisher`` (CronJob, hourly): ``publish`` (the pinned stdlib Python image) asks the
  central Prometheus and writes the ConfigMap's manifest, then ``apply`` (the pinned kubectl
  image) applies it into the tenant's cluster with the tenant's admin kubeconfig.

The pod holds no management-cluster credential at all (no ServiceAccount token): the kubelet
mounts the one key it needs of two Secrets of its own namespace — Kamaji's admin kubeconfig of
this tenant, key ``admin.svc`` (server ``<tcp>.<namespace>.svc:<port>``), and the central
Prometheus' password where the platform keeps it for this tenant's agent — so it can reach no
other tenant's credential, and its queries select this tenant alone (``usage_rows.vector``
refuses another tenant's sample, ``self_view`` another tenant's row). It reaches its API server
through its namespace's ``allow-same-namespace`` policy (as the agent does), and the central
Prometheus through ``objects.network_policies``.

Inside the tenant: the namespace ``gpu-platform-usage``, and a Role allowing ``get`` of the one
ConfigMap, bound to ``system:authenticated`` — every identity of that cluster, the team members'
namespace-scoped credentials of ``make tenant-user`` included. Nothing there may write it but
the tenant's admins (cluster-admin), whose edits the next run overwrites.
"""

from __future__ import annotations

import hashlib
import json
from pathlib import Path
from typing import Any

from components.config import MetricsSettings
from components.k8s_objects import restricted_security
from components.labels import TENANT_LABEL
from components.metrics import auth, objects, self_view, usage, usage_rows
from components.scripts import read_script
from components.tenant_specs import admin_kubeconfig_secret
from components.versions import PINNED

NAME = objects.USAGE_PUBLISHER
READER = "gpu-usage-reader"
# Kamaji keeps each tenant's admin kubeconfig in ``<tcp>-admin-kubeconfig`` (clastix/kamaji
# 26.8.2-edge controllers/resources.go:213-219, the name prefixed with the TCP's by
# internal/utilities/utilities.go:43-44 through internal/resources/kubeconfig.go:81-83), and
# beside ``admin.conf`` (the tenant's public address) an ``admin.svc`` whose server is the
# control plane's Service, ``<tcp>.<namespace>.svc:<port>`` (kubeconfig.go:228-244): the address
# a pod of the tenant's namespace reaches under its ``allow-same-namespace`` policy.
ADMIN_KUBECONFIG_KEY = "admin.svc"
# The central Prometheus' password (its whole listener asks for it: components.metrics.auth):
# where the platform keeps it for this tenant's agent (a key of the agent's token Secret, in this
# namespace), and the user.
# The mount is optional (k8s.io/api v0.35.0 core/v1/types.go:1431-1432, 1446-1448: a missing
# Secret or key mounts nothing), and the publisher sends no credential when the file is absent.
PASSWORD_SECRET = objects.AGENT_TOKEN_SECRET
PASSWORD_KEY = objects.AGENT_PASSWORD_KEY
PROMETHEUS_USERNAME = auth.USERNAME
SCRIPTS_DIR = "/scripts"
WORK_DIR = "/work"
KUBECONFIG_DIR = "/tenant-kubeconfig"
PASSWORD_DIR = "/prometheus-auth"
MANIFEST_FILE = f"{WORK_DIR}/{self_view.CONFIG_MAP}.json"
QUERIES_FILE = "queries.json"
# The files of the ConfigMap: scripts/metrics/<name>, and the modules at their package paths.
SCRIPT_FILES = ("publish_usage.py", "apply-usage.sh")
MODULES = {
    "usage_rows.py": Path(usage_rows.__file__),
    "self_view.py": Path(self_view.__file__),
}
PUBLISH_RESOURCES = {"requests": {"cpu": "10m", "memory": "32Mi"}, "limits": {"memory": "128Mi"}}
APPLY_RESOURCES = {"requests": {"cpu": "10m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}}
_USER = 65532


def publishes_usage(settings: MetricsSettings) -> bool:
    """Whether each tenant gets its usage publisher: where the platform runs its own Prometheus
    (the publisher reads its query API; an operator's Prometheus is not the platform's to read)."""
    return settings.enabled and settings.prometheus_operator is None


def _labels(tenant: str) -> dict[str, str]:
    return {**objects.LABELS, "app.kubernetes.io/name": NAME, TENANT_LABEL: tenant}


def _meta(tenant: str, namespace: str) -> dict[str, Any]:
    return {"name": NAME, "namespace": namespace, "labels": _labels(tenant)}


def schedule(tenant: str) -> str:
    """Hourly, at a minute of the tenant's own (from its name), so the tenants' runs spread over
    the hour rather than meeting at the central Prometheus."""
    minute = int(hashlib.sha256(tenant.encode()).hexdigest(), 16) % 60
    return f"{minute} * * * *"


def query_templates(tenant: str) -> dict[str, str]:
    """quantity -> ``make usage TENANT=<tenant>``'s query, at the template window."""
    return usage.queries(f"{self_view.TEMPLATE_SECONDS}s", tenant)


def scripts_config_map(tenant: str, namespace: str) -> dict[str, Any]:
    queries = {"tenant": tenant, "queries": query_templates(tenant)}
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": _meta(tenant, namespace),
        "data": {
            **{name: read_script("metrics", name) for name in SCRIPT_FILES},
            **{name: path.read_text() for name, path in MODULES.items()},
            QUERIES_FILE: json.dumps(queries, indent=2, sort_keys=True) + "\n",
        },
    }


def script_items() -> list[dict[str, str]]:
    """Where each file of the ConfigMap lands under ``SCRIPTS_DIR``: the modules at their package
    path (``components/metrics/``, namespace packages, so the script imports them as the
    repository does)."""
    return [
        *({"key": name, "path": name} for name in (*SCRIPT_FILES, QUERIES_FILE)),
        *({"key": name, "path": f"components/metrics/{name}"} for name in MODULES),
    ]


def _env(values: dict[str, str]) -> list[dict[str, str]]:
    return [{"name": key, "value": value} for key, value in values.items()]


def publisher_cron_job(tenant: str, namespace: str) -> dict[str, Any]:
    """The hourly publisher of ``tenant`` (whose control plane, named after it, lives in
    ``namespace``)."""
    work = {"name": "work", "mountPath": WORK_DIR}
    scripts = {"name": "scripts", "mountPath": SCRIPTS_DIR, "readOnly": True}
    publish = {
        "name": "publish",
        "image": PINNED.backup_python_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["python3", f"{SCRIPTS_DIR}/publish_usage.py"],
        "env": _env(
            {
                "USAGE_TENANT": tenant,
                "PROMETHEUS_URL": objects.prometheus_url(),
                "PROMETHEUS_USERNAME": PROMETHEUS_USERNAME,
                "PROMETHEUS_PASSWORD_FILE": f"{PASSWORD_DIR}/{PASSWORD_KEY}",
                "QUERIES_FILE": f"{SCRIPTS_DIR}/{QUERIES_FILE}",
                "USAGE_MANIFEST": MANIFEST_FILE,
                "PYTHONDONTWRITEBYTECODE": "1",
            }
        ),
        "resources": PUBLISH_RESOURCES,
        "securityContext": restricted_security(_USER),
        "volumeMounts": [
            work,
            scripts,
            {"name": "prometheus-auth", "mountPath": PASSWORD_DIR, "readOnly": True},
        ],
    }
    apply = {
        "name": "apply",
        "image": PINNED.backup_kubectl_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["sh", f"{SCRIPTS_DIR}/apply-usage.sh"],
        "env": _env(
            {
                "HOME": WORK_DIR,
                "TENANT_KUBECONFIG": f"{KUBECONFIG_DIR}/{ADMIN_KUBECONFIG_KEY}",
                "USAGE_MANIFEST": MANIFEST_FILE,
            }
        ),
        "resources": APPLY_RESOURCES,
        "securityContext": restricted_security(_USER),
        "volumeMounts": [
            work,
            scripts,
            {"name": "tenant-kubeconfig", "mountPath": KUBECONFIG_DIR, "readOnly": True},
        ],
    }
    pod = {
        "metadata": {"labels": _labels(tenant)},
        "spec": {
            # No management-cluster credential: the kubelet mounts the two keys below.
            "automountServiceAccountToken": False,
            "restartPolicy": "Never",
            "securityContext": {"runAsNonRoot": True, "fsGroup": _USER},
            "initContainers": [publish],
            "containers": [apply],
            "volumes": [
                {"name": "work", "emptyDir": {"sizeLimit": "16Mi"}},
                {"name": "scripts", "configMap": {"name": NAME, "items": script_items()}},
                {
                    "name": "tenant-kubeconfig",
                    "secret": {
                        "secretName": admin_kubeconfig_secret(tenant),
                        "items": [{"key": ADMIN_KUBECONFIG_KEY, "path": ADMIN_KUBECONFIG_KEY}],
                        "defaultMode": 0o440,
                    },
                },
                {
                    "name": "prometheus-auth",
                    "secret": {
                        "secretName": PASSWORD_SECRET,
                        "items": [{"key": PASSWORD_KEY, "path": PASSWORD_KEY}],
                        "defaultMode": 0o440,
                        "optional": True,
                    },
                },
            ],
        },
    }
    return {
        "apiVersion": "batch/v1",
        "kind": "CronJob",
        "metadata": _meta(tenant, namespace),
        "spec": {
            "schedule": schedule(tenant),
            "concurrencyPolicy": "Forbid",
            # A run missed by more than 10 minutes waits for the next hour.
            "startingDeadlineSeconds": 600,
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {"backoffLimit": 2, "activeDeadlineSeconds": 600, "template": pod}
            },
        },
    }


# ----------------------------------------------------------------------- inside the tenant


def tenant_reader(tenant: str) -> list[dict[str, Any]]:
    """Inside the tenant: a Role allowing ``get`` of the usage ConfigMap and nothing else, bound
    to every authenticated identity of that cluster: the API server adds
    ``system:authenticated`` to every user it authenticates, ServiceAccount tokens included
    (k8s.io/apiserver v0.35.0 pkg/authentication/group/authenticated_group_adder.go:49-56,
    pkg/authentication/user/user.go:75)."""
    meta = {
        "name": READER,
        "namespace": self_view.NAMESPACE,
        "labels": {**objects.LABELS, "app.kubernetes.io/name": READER, TENANT_LABEL: tenant},
    }
    return [
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "Role",
            "metadata": meta,
            "rules": [
                {
                    "apiGroups": [""],
                    "resources": ["configmaps"],
                    "resourceNames": [self_view.CONFIG_MAP],
                    "verbs": ["get"],
                }
            ],
        },
        {
            "apiVersion": "rbac.authorization.k8s.io/v1",
            "kind": "RoleBinding",
            "metadata": meta,
            "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "Role", "name": READER},
            "subjects": [
                {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "Group",
                    "name": "system:authenticated",
                }
            ],
        },
    ]
