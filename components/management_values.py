"""What the ManagementCluster installs in both environments, as plain data: Helm values for
cert-manager, Kamaji and kamaji-etcd (the default etcd, and prod's dedicated ones), the DataStore
``default``, the readiness gates' parameters and probes, and the versions output.

The lab's kind and MetalLB builders live in ``components.lab.management_values``; prod's Cluster
API provider objects in ``components.prod.capi_providers`` and the cluster-api-operator values,
config Secret and gate in ``components.prod.cluster_api_values``.

Pure functions only: the component wires them to resources, the unit tests read them directly and
the contract tests check every values key and custom resource against the pinned upstream copies.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from components import availability
from components.config import PlatformConfig
from components.config.base import storage_bytes
from components.versions import PINNED

# Namespaces and release names. Kamaji's CRDs hard-code the namespace ``kamaji-system`` and the
# webhook service ``kamaji-webhook-service`` (release ``kamaji`` -> fullname ``kamaji``). MetalLB's
# and the cluster-api-operator's namespaces are named here too: the versions output and the
# reserved tenant names (``config.PLATFORM_NAMESPACES``) cover both environments.
METALLB_NAMESPACE = "metallb-system"
CERT_MANAGER_NAMESPACE = "cert-manager"
CERT_MANAGER_RELEASE = "cert-manager"
KAMAJI_NAMESPACE = "kamaji-system"
KAMAJI_RELEASE = "kamaji"
KAMAJI_ETCD_NAME = "kamaji-etcd"
DEFAULT_DATASTORE = "default"
CAPI_OPERATOR_NAMESPACE = "capi-operator-system"

KAMAJI_API = "kamaji.clastix.io/v1alpha1"

# What the readiness gate's server-side dry run creates (never persisted).
PROBE_NAME = "gpu-platform-readiness-probe"
PROBE_NAMESPACE = "default"

# cert-manager's CRDs the charts installed after it use (Kamaji's and the cluster-api-operator's
# Certificate and Issuer; kamaji-etcd's, HAMi's too when enabled), by their names at v1.21.1
# (deploy/charts/cert-manager/templates/crd-cert-manager.io_*.yaml).
CERT_MANAGER_GROUP = "cert-manager.io"
CERT_MANAGER_API = f"{CERT_MANAGER_GROUP}/v1"
CERT_MANAGER_CRDS = (
    "certificates.cert-manager.io",
    "issuers.cert-manager.io",
    "clusterissuers.cert-manager.io",
    "certificaterequests.cert-manager.io",
)

Values = dict[str, Any]


# ------------------------------------------------------------------------------- Helm values


def cert_manager_values() -> Values:
    """cert-manager with its CRDs (v1.21 key ``crds.enabled``; ``installCRDs`` is deprecated)."""
    return {"crds": {"enabled": True}}


# The Kamaji controller's resources. The chart's defaults (limits cpu 200m / memory 100Mi,
# values.yaml at 26.8.2-edge) are what Kamaji's own guides remove (`--set resources=null` in
# docs/content/getting-started/kamaji-kind.md, cluster-api/external-cluster.md and the Makefile's
# install target): one process runs the TCP and DataStore reconcilers, a manager with caches per
# tenant and the `failurePolicy: Fail` webhooks, so an OOM kill blocks every TCP change. Kamaji's
# benchmark (docs/content/reference/benchmark.md) saw ~600 MiB for 100 control planes. Explicit
# values rather than null, which the Python SDK drops from Helm values (pulumi/pulumi#12178).
KAMAJI_RESOURCES: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType(
    {
        "requests": MappingProxyType({"cpu": "100m", "memory": "128Mi"}),
        "limits": MappingProxyType({"cpu": "1", "memory": "1Gi"}),
    }
)


@dataclass(frozen=True)
class DefaultEtcd:
    """How the management cluster runs its own etcd for the DataStore ``default`` (the seam's
    answer: ``Substrate.default_etcd``).

    ``own_release``: a kamaji-etcd release of its own, started at once beside cert-manager, with
    the DataStore created by the program (``default_etcd_values``, ``default_etcd_datastore``);
    its certificates come from the chart's cfssl job and are valid one year
    (charts/kamaji-etcd/templates/etcd_cm.yaml:31-47, ``8760h``), never renewed: fine for a lab
    torn down daily. Otherwise Kamaji's bundled subchart, after cert-manager, whose certificates
    cert-manager issues and renews through Kamaji's Issuer (charts/kamaji/values.yaml:102-117 at
    26.8.2-edge): for a cluster that runs for years."""

    members: int
    cluster_domain: str
    own_release: bool


# The Kamaji controller's pods, by the chart's selector labels (charts/kamaji/templates/
# _helpers.tpl:48-51 at 26.8.2-edge: the chart's name, the release, ``controller-manager``).
KAMAJI_SELECTOR: MappingProxyType[str, str] = MappingProxyType(
    {
        "app.kubernetes.io/name": "kamaji",
        "app.kubernetes.io/instance": KAMAJI_RELEASE,
        "app.kubernetes.io/component": "controller-manager",
    }
)


def kamaji_values(image_tag: str, default_etcd: DefaultEtcd | None, replicas: int = 1) -> Values:
    """Kamaji's image of the pinned release (the chart is that release's, pinned by content in
    ``chart_cache``), with room to run (``KAMAJI_RESOURCES``), and the DataStore ``default`` for
    tenants that name none where the environment runs one (``default_etcd``; without it no
    default is set: every tenant names its own). The chart's bundled kamaji-etcd runs only for a
    default etcd that is not a release of its own (``DefaultEtcd.own_release``), its members
    spread across nodes.

    ``replicas`` controllers (the substrate's ``kamaji_replicas``): the chart always passes
    ``--leader-elect`` (templates/controller.yaml:29), so one reconciles and the others stand by
    on the lease; more than one are preferred on different nodes and zones (the chart takes
    ``affinity`` only, :97-100) and get a disruption budget (``kamaji_budget``)."""
    values: Values = {
        "image": {"tag": image_tag, "pullPolicy": "IfNotPresent"},
        "resources": {key: dict(value) for key, value in KAMAJI_RESOURCES.items()},
        "defaultDatastoreName": DEFAULT_DATASTORE if default_etcd is not None else "",
        "telemetry": {"disabled": True},
        "kamaji-etcd": {"deploy": False},
    }
    if replicas > 1:
        values["replicaCount"] = replicas
        values["affinity"] = availability.preferred_anti_affinity(KAMAJI_SELECTOR)
    if default_etcd is not None and not default_etcd.own_release:
        values["kamaji-etcd"] = {
            "deploy": True,
            "fullnameOverride": KAMAJI_ETCD_NAME,
            "replicas": default_etcd.members,
            "resources": etcd_resources(),
            # The chart's "must match your management cluster's clusterDomain"
            # (charts/kamaji/values.yaml:105-106).
            "clusterDomain": default_etcd.cluster_domain,
            "datastore": {"enabled": True, "name": DEFAULT_DATASTORE},
            # Its space quota below its 8 GiB volume, as the lab's own release's.
            "quotaBackendBytes": str(DEFAULT_ETCD_QUOTA_BYTES),
            # A subchart's pods carry the parent's release name.
            **availability.etcd_placement(KAMAJI_RELEASE, default_etcd.members),
        }
    return values


def kamaji_budget(replicas: int) -> Values | None:
    """The Kamaji controllers' PodDisruptionBudget (the chart ships none), where more than one
    runs: a drain takes one at a time, the other holds the lease and serves the webhooks."""
    return availability.disruption_budget(
        KAMAJI_RELEASE, KAMAJI_NAMESPACE, KAMAJI_SELECTOR, replicas
    )


def default_etcd_release(default_etcd: DefaultEtcd) -> str:
    """The Helm release the default etcd's pods are labelled with: its own, or Kamaji's (the
    bundled subchart)."""
    return KAMAJI_ETCD_NAME if default_etcd.own_release else KAMAJI_RELEASE


def default_etcd_budget(default_etcd: DefaultEtcd) -> Values | None:
    """The default etcd's PodDisruptionBudget (kamaji-etcd ships none): its quorum kept."""
    return availability.etcd_budget(
        KAMAJI_ETCD_NAME,
        KAMAJI_NAMESPACE,
        default_etcd_release(default_etcd),
        default_etcd.members,
    )


# ------------------------------------------------------------------------------ kamaji-etcd

# What every kamaji-etcd member requests. The chart requests nothing (values.yaml:99-101,
# ``resources: {limits: {}, requests: {}}``, into the container at templates/etcd_sts.yaml:
# 115-116), which makes a member a BestEffort pod: the first the kubelet evicts under memory
# pressure, and one the scheduler may put on a node with no room for it. Requests only: a memory
# limit would let the kernel kill a quorum member at a spike. The figures are the program's
# reservation for a tenant-sized etcd, not a measurement; the capacity model
# (components.capacity) counts them.
ETCD_RESOURCES: MappingProxyType[str, MappingProxyType[str, str]] = MappingProxyType(
    {"requests": MappingProxyType({"cpu": "100m", "memory": "256Mi"})}
)


def etcd_resources() -> Values:
    """``ETCD_RESOURCES`` as the chart's ``resources`` value."""
    return {key: dict(value) for key, value in ETCD_RESOURCES.items()}


# kamaji-etcd v0.17.0's defaults (charts/kamaji-etcd/values.yaml:6 replicas, :31 clientPort) and
# the names its helpers derive from ``fullnameOverride``
# (templates/_helpers.tpl: etcd.stsName and etcd.serviceName 41-43, 86-88, the CA Secret
# ``<name>-certs`` 93-95, the root client Secret ``<name>-root-client-certs`` 165-167).
KAMAJI_ETCD_REPLICAS = 3
KAMAJI_ETCD_CLIENT_PORT = 2379


def kamaji_etcd_values(
    name: str,
    *,
    cluster_domain: str,
    replicas: int = KAMAJI_ETCD_REPLICAS,
    claim: Mapping[str, str] | None = None,
    datastore: bool = True,
    issuer: str | None = None,
    quota_backend_bytes: int | None = None,
) -> Values:
    """Values of a kamaji-etcd release called ``name`` (its workloads, Secrets and DataStore are
    named so too): the management cluster's default etcd, or a tenant's dedicated one (prod).

    Certificates come either from cert-manager, through the Issuer called ``issuer`` in the
    release's namespace (a CA the chart makes from it, and server, peer and root-client
    certificates of 90 days that cert-manager renews 7 days ahead, ``renewBefore: 168h``: templates/
    etcd_cert-manager_*.yaml), or without ``issuer`` from the chart's own cfssl and kubectl jobs
    (its defaults, ``selfSignedCertificates.enabled``), valid one year and never renewed
    (templates/etcd_cm.yaml:31-47), so the release needs nothing but the cluster, not even
    cert-manager; their cfssl image is pinned (``PINNED.kamaji_etcd_cfssl_tag``) where the chart
    would take ``latest``.

    kamaji-etcd builds its peer, certificate and DataStore endpoint names as
    ``<member>.<service>.<namespace>.svc.<clusterDomain>`` (templates/_helpers.tpl:183-214), so
    ``clusterDomain`` is the management cluster's own, always given. ``datastore``: whether the
    chart creates the DataStore ``name`` (it needs Kamaji's CRD installed first).
    ``quota_backend_bytes``: etcd's space quota (the chart's default is 8 GiB whatever the
    volume, values.yaml:64-65, passed as --quota-backend-bytes, templates/etcd_sts.yaml:102).

    The jobs' kubectl and etcd images are pinned to the ones the backups already run
    (``PINNED.backup_kubectl_image``, ``backup_etcd_image``): the chart would take kubectl
    tagged with whatever minor the cluster runs (templates/_helpers.tpl:172-174), an image no
    offline mirror was told about."""
    values: Values = {
        "fullnameOverride": name,
        "replicas": replicas,
        "resources": etcd_resources(),
        "clusterDomain": cluster_domain,
        "datastore": {"enabled": datastore, **({"name": name} if datastore else {})},
    }
    kubectl, kubectl_tag = PINNED.backup_kubectl_image.rsplit(":", 1)
    etcd, etcd_tag = PINNED.backup_etcd_image.rsplit(":", 1)
    jobs: Values = {
        "kubectl": {"image": kubectl, "tag": kubectl_tag},
        "etcd": {"image": etcd, "tag": etcd_tag},
    }
    values["jobs"] = jobs
    if quota_backend_bytes is not None:
        values["quotaBackendBytes"] = str(quota_backend_bytes)
    if issuer is None:
        jobs["cfssl"] = {"tag": PINNED.kamaji_etcd_cfssl_tag}
    else:
        # The chart fails its render with both on (templates/_helpers.tpl:220-222).
        values["selfSignedCertificates"] = {"enabled": False}
        values["certManager"] = {
            "enabled": True,
            "issuerRef": {"name": issuer, "kind": "Issuer", "group": CERT_MANAGER_GROUP},
        }
    if claim is not None:
        values["persistentVolumeClaim"] = dict(claim)
    # Every caller names the release as the workloads (``fullnameOverride``), so ``name`` is the
    # release its pods are labelled with.
    values.update(availability.etcd_placement(name, replicas))
    return values


GIB = 2**30
# etcd's own suggested ceiling for a space quota ("a larger quota may lead to degraded
# performance": etcd-io/etcd v3.6.5 server/storage/quota.go:31-33, MaxQuotaBytes; the same
# constant in v3.5), also kamaji-etcd's default (values.yaml:64-65 at v0.17.0).
ETCD_QUOTA_CEILING = 8 * GIB


def etcd_quota_backend_bytes(storage_size: str) -> int:
    """The space quota of an etcd on a volume of ``storage_size``: half of what is left after
    1 GiB for the WAL and snapshots (a defragmentation writes a second copy of the database
    before dropping the first), at most 8 GiB. With kamaji-etcd's fixed 8 GiB quota on its 8 GiB
    volume (values.yaml:64-69 at v0.17.0), the volume filled up before etcd raised its NOSPACE
    alarm; with this the alarm comes first."""
    return min(ETCD_QUOTA_CEILING, (storage_bytes(storage_size) - GIB) // 2)


# The default etcd's volume: kamaji-etcd's own claim size (values.yaml:67-69 at v0.17.0), which
# the program keeps for both the lab's release and Kamaji's bundled subchart; its quota follows.
DEFAULT_ETCD_VOLUME = "8Gi"
DEFAULT_ETCD_QUOTA_BYTES = etcd_quota_backend_bytes(DEFAULT_ETCD_VOLUME)
# Scheduled defragmentation (``etcd_defrag_cron_job``): nightly, off the hour; a member is worth it
# with 200 MiB free in its file or a file at 80 % of the quota (kamaji-etcd v0.17.0
# scripts/defrag.sh:58-59, etcd-defrag's --defrag-rule).
ETCD_DEFRAG_SCHEDULE = "37 3 * * *"
ETCD_DEFRAG_FREEABLE_BYTES = 200 * 2**20
ETCD_DEFRAG_QUOTA_PERCENT = 80
# The user the chart's etcd-setup Job runs as (templates/etcd_job_preinstall_2.yaml:65-68).
_ETCD_JOB_USER = 1000


def etcd_defrag_cron_job(
    name: str,
    namespace: str,
    *,
    replicas: int,
    cluster_domain: str,
    cert_manager: bool,
    quota_backend_bytes: int,
    script: str,
    labels: Mapping[str, str] | None = None,
) -> Values:
    """A CronJob ``<name>-defrag`` beside the kamaji-etcd release ``name`` that defragments it
    member by member (``scripts/etcd/defrag.sh``, passed as ``script``), the way the chart's
    docs ask and its ``scripts/defrag.sh`` does by hand: kamaji-etcd v0.17.0 ships no
    defragmentation of its own (no CronJob template or value: docs/defragmentation.md,
    scripts/defrag.sh), while its history compaction (values.yaml:55-59) only frees pages inside
    the file, and a file at the quota raises etcd's NOSPACE alarm (read and delete only).

    It talks to etcd as the chart's own post-install Job does (templates/etcd_job_preinstall_2.
    yaml:31-87): the root client certificate (Defragment needs an admin) and the CA, from
    ``<name>-client-certs`` and ``<name>-server-certs`` with cert-manager, else from the chart's
    jobs' ``<name>-root-client-certs`` and ``<name>-certs`` (templates/_helpers.tpl:93-95,
    111-140, 165-167), mounted at the same paths, with the etcd image those jobs run
    (``PINNED.backup_etcd_image``). ``quota_backend_bytes``: the release's quota (what its
    etcd runs with as --quota-backend-bytes)."""
    endpoints = [
        f"https://{name}-{member}.{name}.{namespace}.svc.{cluster_domain}:{KAMAJI_ETCD_CLIENT_PORT}"
        for member in range(replicas)
    ]
    root, ca = (
        (f"{name}-client-certs", f"{name}-server-certs")
        if cert_manager
        else (f"{name}-root-client-certs", f"{name}-certs")
    )
    env = {
        "ETCD_ENDPOINTS": " ".join(endpoints),
        "QUOTA_BACKEND_BYTES": str(quota_backend_bytes),
        "DEFRAG_FREEABLE_BYTES": str(ETCD_DEFRAG_FREEABLE_BYTES),
        "DEFRAG_QUOTA_PERCENT": str(ETCD_DEFRAG_QUOTA_PERCENT),
        "ETCDCTL_CACERT": "/opt/certs/ca/ca.crt",
        "ETCDCTL_CERT": "/opt/certs/root-certs/tls.crt",
        "ETCDCTL_KEY": "/opt/certs/root-certs/tls.key",
    }
    container: Values = {
        "name": "defrag",
        "image": PINNED.backup_etcd_image,
        "imagePullPolicy": "IfNotPresent",
        "command": ["bash", "-c", script, "etcd-defrag"],
        "env": [{"name": key, "value": value} for key, value in env.items()],
        "resources": {"requests": {"cpu": "50m", "memory": "64Mi"}, "limits": {"memory": "256Mi"}},
        "securityContext": {
            "runAsNonRoot": True,
            "runAsUser": _ETCD_JOB_USER,
            "runAsGroup": _ETCD_JOB_USER,
            "allowPrivilegeEscalation": False,
            "readOnlyRootFilesystem": True,
            "capabilities": {"drop": ["ALL"]},
            "seccompProfile": {"type": "RuntimeDefault"},
        },
        "volumeMounts": [
            {"name": "root-certs", "mountPath": "/opt/certs/root-certs", "readOnly": True},
            {"name": "ca", "mountPath": "/opt/certs/ca", "readOnly": True},
        ],
    }
    pod: Values = {
        "metadata": {"labels": dict(labels or {})},
        "spec": {
            "restartPolicy": "Never",
            "automountServiceAccountToken": False,
            "securityContext": {"runAsNonRoot": True, "fsGroup": _ETCD_JOB_USER},
            "containers": [container],
            "volumes": [
                {"name": "root-certs", "secret": {"secretName": root}},
                {"name": "ca", "secret": {"secretName": ca}},
            ],
        },
    }
    manifest = api_object(
        "batch/v1",
        "CronJob",
        f"{name}-defrag",
        namespace,
        {
            "schedule": ETCD_DEFRAG_SCHEDULE,
            "concurrencyPolicy": "Forbid",
            "successfulJobsHistoryLimit": 1,
            "failedJobsHistoryLimit": 3,
            "jobTemplate": {
                "spec": {"backoffLimit": 1, "activeDeadlineSeconds": 3600, "template": pod}
            },
        },
    )
    if labels:
        manifest["metadata"]["labels"] = dict(labels)
    return manifest


def default_etcd_values(cluster_domain: str, members: int) -> Values:
    """The management cluster's default etcd (``KAMAJI_ETCD_NAME``, Kamaji's own name for it)
    of ``members`` members, installed beside cert-manager: without its DataStore, which needs
    Kamaji's CRD and is the program's (``default_etcd_datastore``)."""
    return kamaji_etcd_values(
        KAMAJI_ETCD_NAME,
        cluster_domain=cluster_domain,
        replicas=members,
        datastore=False,
        quota_backend_bytes=DEFAULT_ETCD_QUOTA_BYTES,
    )


def default_etcd_datastore(cluster_domain: str, members: int) -> Values:
    """The DataStore ``default`` over the default etcd: what kamaji-etcd v0.17.0 renders for it
    with ``datastore.enabled`` and self-signed certificates (templates/etcd_datastore.yaml: the
    headless endpoints of its ``members``, the CA and the root client certificate its jobs
    store), so Kamaji reaches the etcd as the chart would have it
    (tests/contract/test_default_datastore.py renders the chart and compares)."""
    name, namespace = KAMAJI_ETCD_NAME, KAMAJI_NAMESPACE

    def secret(secret_name: str, key: str) -> Values:
        return {"secretReference": {"keyPath": key, "name": secret_name, "namespace": namespace}}

    return {
        "apiVersion": KAMAJI_API,
        "kind": "DataStore",
        "metadata": {"name": DEFAULT_DATASTORE},
        "spec": {
            "driver": "etcd",
            "endpoints": [
                f"{name}-{member}.{name}.{namespace}.svc.{cluster_domain}:{KAMAJI_ETCD_CLIENT_PORT}"
                for member in range(members)
            ],
            "tlsConfig": {
                "certificateAuthority": {
                    "certificate": secret(f"{name}-certs", "ca.crt"),
                    "privateKey": secret(f"{name}-certs", "ca.key"),
                },
                "clientCertificate": {
                    "certificate": secret(f"{name}-root-client-certs", "tls.crt"),
                    "privateKey": secret(f"{name}-root-client-certs", "tls.key"),
                },
            },
        },
    }


# ------------------------------------------------------------------------------ objects


def api_object(
    api_version: str, kind: str, name: str, namespace: str | None, spec: Values
) -> Values:
    """A Kubernetes object with ``spec`` (namespaced when ``namespace`` is given)."""
    metadata: Values = {"name": name}
    if namespace is not None:
        metadata["namespace"] = namespace
    return {"apiVersion": api_version, "kind": kind, "metadata": metadata, "spec": spec}


# ------------------------------------------------------------------------- readiness gates


def readiness_probe_tcp(kubernetes_version: str) -> Values:
    """The smallest TenantControlPlane Kamaji's webhooks will look at; the gate submits it with
    ``kubectl create --dry-run=server`` (nothing is persisted) to prove the webhooks answer."""
    return api_object(
        KAMAJI_API,
        "TenantControlPlane",
        PROBE_NAME,
        PROBE_NAMESPACE,
        {
            "controlPlane": {"service": {"serviceType": "ClusterIP"}},
            "kubernetes": {"version": kubernetes_version, "kubelet": {}},
        },
    )


def gate_env(
    *,
    crds: Sequence[str] = (),
    rollouts: Sequence[str] = (),
    conditions: Sequence[str] = (),
    dry_run_manifest: Values | None = None,
    timeout_seconds: int = 900,
) -> dict[str, str]:
    """The environment of ``scripts/management/wait-ready.sh`` (the management kubeconfig is
    added by the component, as a secret). Lists are space-separated tokens:

    * ``WAIT_CRDS``: CRD names that must exist and be ``Established``;
    * ``WAIT_ROLLOUTS``: ``<namespace>/<kind>/<name>`` that must finish rolling out;
    * ``WAIT_CONDITIONS``: ``<namespace or ->/<resource>/<name>/<kubectl wait --for value>``;
    * ``DRY_RUN_MANIFEST``: an object, or a v1 ``List`` of objects (JSON), that a server-side dry
      run must get through the admission webhooks with (accepted, or denied by the webhook
      itself: either way it answers; a webhook that cannot be called fails the gate).
    """
    for token in [*rollouts, *conditions, *crds]:
        if not token or any(ch.isspace() for ch in token):
            raise ValueError(f"gate token {token!r} must be non-empty without whitespace")
    return {
        "WAIT_TIMEOUT_SECONDS": str(timeout_seconds),
        "WAIT_CRDS": " ".join(crds),
        "WAIT_ROLLOUTS": " ".join(rollouts),
        "WAIT_CONDITIONS": " ".join(conditions),
        "DRY_RUN_MANIFEST": json.dumps(dry_run_manifest, sort_keys=True)
        if dry_run_manifest is not None
        else "",
    }


def kamaji_gate_env(kubernetes_version: str, with_etcd: bool) -> dict[str, str]:
    """Kamaji serving: its CRDs established, its controller (which serves the webhooks) rolled
    out, the default etcd and DataStore ``default`` ready when deployed, and a TenantControlPlane
    through the admission webhooks by a server-side dry run."""
    rollouts = [f"{KAMAJI_NAMESPACE}/deployment/{KAMAJI_RELEASE}"]
    conditions: list[str] = []
    if with_etcd:
        rollouts.append(f"{KAMAJI_NAMESPACE}/statefulset/{KAMAJI_ETCD_NAME}")
        conditions.append(
            f"-/datastores.kamaji.clastix.io/{DEFAULT_DATASTORE}/jsonpath={{.status.ready}}=true"
        )
    env = gate_env(
        crds=["tenantcontrolplanes.kamaji.clastix.io", "datastores.kamaji.clastix.io"],
        rollouts=rollouts,
        conditions=conditions,
        dry_run_manifest=readiness_probe_tcp(kubernetes_version),
    )
    # Re-run the gate when Kamaji itself changes.
    env["KAMAJI_IMAGE_TAG"] = PINNED.kamaji_image_tag
    return env


def readiness_probe_issuer() -> Values:
    """The smallest cert-manager Issuer (self-signed); the adopted cert-manager's gate submits it
    with a server-side dry run (nothing is persisted)."""
    return api_object(CERT_MANAGER_API, "Issuer", PROBE_NAME, PROBE_NAMESPACE, {"selfSigned": {}})


def cert_manager_gate_env() -> dict[str, str]:
    """An adopted cert-manager serving (``scripts/management/cert-manager-ready.sh``): its CRDs
    present (absent: cert-manager is not installed, and the gate says so at once) and
    Established, and an Issuer through its admission webhook by a server-side dry run.

    cert-manager's ValidatingWebhookConfiguration covers every ``cert-manager.io`` resource on
    CREATE with ``failurePolicy: Fail``, and its CA bundle is injected by cert-manager's own
    cainjector (``cert-manager.io/inject-ca-from-secret``; cert-manager v1.21.1
    deploy/charts/cert-manager/templates/webhook-validating-webhook.yaml:12, 22-39): an Issuer
    accepted through it proves the webhook answers with a trusted certificate, so the
    Certificates and Issuers of the charts after it will be admitted. The probe's namespace
    ``default`` carries no ``cert-manager.io/disable-validation`` label, which the chart's
    default namespaceSelector would skip (values.yaml:891-898)."""
    return {
        "WAIT_TIMEOUT_SECONDS": "600",
        "CERT_MANAGER_CRDS": " ".join(CERT_MANAGER_CRDS),
        "PROBE_MANIFEST": json.dumps(readiness_probe_issuer(), sort_keys=True),
    }


# ----------------------------------------------------------------------------- versions


def management_versions(platform: PlatformConfig) -> dict[str, object]:
    """Every pinned version, with the ones this stack's config chose in place of the defaults."""
    versions = PINNED.as_dict()
    if platform.management.kind is not None:
        versions["kind_node_image"] = platform.management.kind.node_image
    if platform.management.existing is not None:
        if not platform.management.existing.installs_cert_manager:
            versions["cert_manager"] = "existing (the cluster's own)"
        capi = platform.management.existing.cluster_api
        versions["cluster_api"] = capi.core
        versions["cluster_api_bootstrap_kubeadm"] = capi.bootstrap_kubeadm
        versions["kamaji_control_plane_provider"] = capi.control_plane_kamaji
        versions["infrastructure_provider"] = {
            "name": capi.infrastructure.name,
            "version": capi.infrastructure.version,
        }
    return versions
