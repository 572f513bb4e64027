"""The lab's object store for tenant backups: one SeaweedFS server with its S3 gateway in the
management cluster, on a PersistentVolumeClaim (kind's default StorageClass), one bucket and one
credential per tenant.

Why SeaweedFS (seaweedfs/seaweedfs 4.44, Apache-2.0): a maintained S3-compatible server in one
container, with per-bucket permissions for static identities (``"Read:<bucket>"`` and the like,
``weed/s3api/auth_credentials.go:1831-1887``; any other bucket is refused, :2643-2646).

Credentials: one random root secret per stack (a ``local.Command`` that runs once; its output is
a secret in the state), and from it, by HMAC, one key per tenant. A tenant's backup Secret holds
only its own key, which may read, write and list only its own bucket. There is no admin key:
buckets are created inside the store's pod with ``weed shell`` (``backup-buckets.sh``).

Archive keys: one random key per tenant (a ``local.Command`` per tenant that runs once,
``new-secret.sh``; its output is a secret in the state), not derived from anything: every archive
is encrypted with it before it reaches the store (docs/backups.md).
"""

from __future__ import annotations

import hashlib
import hmac
import json
from collections.abc import Mapping, Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.backups.objects import BACKUP, RESTORE
from components.backups.target import environment
from components.config import Tenant
from components.k8s_objects import restricted_security, typed_object
from components.substrate import ManagementSite, secret_made_once

NAMESPACE = "gpu-platform-backups"
STORE = "object-store"
STORE_CONFIG = "object-store-identities"
STORE_CLAIM = "object-store-data"
S3_PORT = 8333
FILER_PORT = 8888
IMAGE = "chrislusf/seaweedfs:4.44"
# The image's user (seaweedfs 4.44 docker/Dockerfile.go_build:91-97 owns /data as 1000:1000).
_USER = 1000
REGION = "us-east-1"
ENDPOINT = f"http://{STORE}.{NAMESPACE}.svc:{S3_PORT}"


def bucket_name(tenant: str) -> str:
    """The tenant's bucket: ``<tenant>-backups`` (S3 allows 63 characters; a longer tenant
    name keeps its first 46 and a hash of the whole)."""
    name = f"{tenant}-backups"
    if len(name) <= 63:
        return name
    digest = hashlib.sha256(tenant.encode()).hexdigest()[:8]
    return f"{tenant[:46].rstrip('-')}-{digest}-backups"


def derived_secret(root: str, purpose: str) -> str:
    """A key derived from the stack's root secret, one per purpose (``tenant:<name>``)."""
    return hmac.new(root.encode(), purpose.encode(), hashlib.sha256).hexdigest()


def access_key_id(tenant: str) -> str:
    return f"backup-{hashlib.sha256(tenant.encode()).hexdigest()[:16]}"


def identity_name(tenant: str) -> str:
    return f"tenant-{tenant}"


def identities(root: str, tenants: Sequence[str]) -> dict[str, Any]:
    """SeaweedFS's ``-s3.config``: one identity per tenant that may only read, write and list
    its own bucket (s3_constants/s3_actions.go:4-11; Write covers PUT and DELETE of objects, List
    ListObjectsV2, s3api_server.go:867-968)."""
    entries: list[dict[str, Any]] = []
    for tenant in tenants:
        bucket = bucket_name(tenant)
        entries.append(
            {
                "name": identity_name(tenant),
                "credentials": [
                    {
                        "accessKey": access_key_id(tenant),
                        "secretKey": derived_secret(root, f"tenant:{tenant}"),
                    }
                ],
                "actions": [f"Read:{bucket}", f"Write:{bucket}", f"List:{bucket}"],
            }
        )
    return {"identities": entries}


def tenant_target(root: str, tenant: str, archive_key: str) -> dict[str, str]:
    """The tenant's backup Secret data: its bucket, its own credential and its archive key."""
    return environment(
        endpoint=ENDPOINT,
        bucket=bucket_name(tenant),
        access_key_id=access_key_id(tenant),
        secret_access_key=derived_secret(root, f"tenant:{tenant}"),
        archive_key=archive_key,
        region=REGION,
    )


def archive_key_resource(site_name: str, tenant: str) -> str:
    """The name of the command that generates a tenant's archive key once."""
    return f"{site_name}-{tenant}-backup-archive-key"


# ------------------------------------------------------------------------------- manifests


def _meta(name: str) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": NAMESPACE,
        "labels": {"app.kubernetes.io/name": STORE, "app.kubernetes.io/part-of": "gpu-platform"},
    }


def namespace() -> dict[str, Any]:
    return {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": NAMESPACE}}


def claim(size: str = "10Gi") -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "PersistentVolumeClaim",
        "metadata": _meta(STORE_CLAIM),
        "spec": {"accessModes": ["ReadWriteOnce"], "resources": {"requests": {"storage": size}}},
    }


def config_secret() -> dict[str, Any]:
    """The identities Secret's manifest (its data is registered as a secret)."""
    return {"apiVersion": "v1", "kind": "Secret", "metadata": _meta(STORE_CONFIG), "type": "Opaque"}


def deployment(config_digest: str) -> dict[str, Any]:
    """``weed server`` with the filer and S3 (seaweedfs 4.44 weed/command/server.go:247-248)
    bypassing the image's entrypoint defaults (docker/entrypoint.sh:93-100). Small volumes and a
    bounded count so that several tenants' buckets (one collection each, seven volumes grown per
    collection, weed/command/scaffold/master.toml:39) fit a lab disk: seaweedfs#4419 and #10294
    run out of volume slots otherwise; growth one volume at a time
    (``WEED_MASTER_VOLUME_GROWTH_COPY_1``, weed/util/config.go:119-122). Readiness is the
    filer's health, which checks its metadata store (weed/server/filer_server_handlers.go:
    360-368); the S3 port's /healthz always answers 200 (s3api_server.go:757-759)."""
    container = {
        "name": "seaweedfs",
        "image": IMAGE,
        "imagePullPolicy": "IfNotPresent",
        "command": ["weed"],
        "args": [
            "server",
            "-dir=/data",
            "-ip.bind=0.0.0.0",
            "-master.volumeSizeLimitMB=256",
            "-volume.max=32",
            "-master.defaultReplication=000",
            "-s3",
            f"-s3.port={S3_PORT}",
            "-s3.config=/etc/seaweedfs/s3/identities.json",
        ],
        "env": [{"name": "WEED_MASTER_VOLUME_GROWTH_COPY_1", "value": "1"}],
        "ports": [{"name": "s3", "containerPort": S3_PORT}],
        # Probes run inside the container (the image has curl, docker/Dockerfile.go_build:69):
        # the NetworkPolicy below admits the S3 port from the backup Jobs only, so a probe from
        # the node would depend on how the CNI treats node traffic.
        "readinessProbe": {"exec": {"command": _local_health(FILER_PORT)}},
        "livenessProbe": {
            "exec": {"command": _local_health(S3_PORT)},
            "initialDelaySeconds": 30,
        },
        "resources": {"requests": {"cpu": "50m", "memory": "128Mi"}, "limits": {"memory": "1Gi"}},
        "securityContext": restricted_security(_USER, read_only_root=False, group=_USER),
        "volumeMounts": [
            {"name": "data", "mountPath": "/data"},
            {"name": "identities", "mountPath": "/etc/seaweedfs/s3", "readOnly": True},
        ],
    }
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": _meta(STORE),
        "spec": {
            "replicas": 1,
            # One pod owns the volume at a time.
            "strategy": {"type": "Recreate"},
            "selector": {"matchLabels": {"app.kubernetes.io/name": STORE}},
            "template": {
                "metadata": {
                    "labels": {"app.kubernetes.io/name": STORE},
                    # A new identity (a tenant added) restarts the server, which reads the file
                    # at start.
                    "annotations": {"gpu-platform.io/identities-sha256": config_digest},
                },
                "spec": {
                    "automountServiceAccountToken": False,
                    "securityContext": {"runAsNonRoot": True, "fsGroup": _USER},
                    "containers": [container],
                    "volumes": [
                        {"name": "data", "persistentVolumeClaim": {"claimName": STORE_CLAIM}},
                        {"name": "identities", "secret": {"secretName": STORE_CONFIG}},
                    ],
                },
            },
        },
    }


def _local_health(port: int) -> list[str]:
    return ["curl", "-fsS", "-o", "/dev/null", f"http://127.0.0.1:{port}/healthz"]


# The pods that may reach the store: the tenants' backup and restore Jobs (and `make backups`,
# a Job of the backup CronJob), by the name label their pod templates carry
# (components.backups.objects._pod).
CLIENT_NAMES = (BACKUP, RESTORE)


def network_policy() -> dict[str, Any]:
    """Only the S3 port, only from the backup and restore Jobs. ``weed server`` also listens on
    every address with the filer (:8888), master (:9333), volume (:8080), their gRPC ports, the
    S3 gRPC port (:18333, whose SeaweedS3IamCache service has PutIdentity), Iceberg (:8181) and
    Lance (:9101) (seaweedfs 4.44 weed/command/server.go:60,115,163-167,293-309,
    weed/command/s3.go:432-440, weed/pb/s3.proto:15-22): none of them checks the per-bucket
    credentials (no JWT keys: weed/command/scaffold/security.toml), so each would read or
    change every tenant's archives. kind's kindnetd enforces NetworkPolicies (kind v0.31.0
    images/kindnetd/cmd/kindnetd/main.go:220-242, sigs.k8s.io/kube-network-policies)."""
    return {
        "apiVersion": "networking.k8s.io/v1",
        "kind": "NetworkPolicy",
        "metadata": _meta(STORE),
        "spec": {
            "podSelector": {"matchLabels": {"app.kubernetes.io/name": STORE}},
            "policyTypes": ["Ingress"],
            "ingress": [
                {
                    "from": [
                        {
                            "namespaceSelector": {},
                            "podSelector": {
                                "matchExpressions": [
                                    {
                                        "key": "app.kubernetes.io/name",
                                        "operator": "In",
                                        "values": list(CLIENT_NAMES),
                                    }
                                ]
                            },
                        }
                    ],
                    "ports": [{"protocol": "TCP", "port": S3_PORT}],
                }
            ],
        },
    }


def service() -> dict[str, Any]:
    return {
        "apiVersion": "v1",
        "kind": "Service",
        "metadata": _meta(STORE),
        "spec": {
            "selector": {"app.kubernetes.io/name": STORE},
            "ports": [{"name": "s3", "port": S3_PORT, "targetPort": S3_PORT}],
        },
    }


# ------------------------------------------------------------------------------ registration


def register(
    site: ManagementSite, tenants: Sequence[Tenant]
) -> Mapping[str, pulumi.Output[dict[str, str]]]:
    """The store and one bucket per tenant; returns each tenant's target (secret)."""
    name = site.name
    names = [tenant.name for tenant in tenants]
    root = secret_made_once(f"{name}-backup-store-root-secret", site.component)
    config_text = root.apply(lambda r: json.dumps(identities(r, names), indent=1))
    ns = typed_object(f"{name}-backup-store-ns", namespace(), site.k8s_opts())
    data = typed_object(f"{name}-backup-store-claim", claim(), site.k8s_opts([ns]))
    identities_secret = typed_object(
        f"{name}-backup-store-identities",
        config_secret(),
        site.k8s_opts([ns]).merge(
            pulumi.ResourceOptions(additional_secret_outputs=["stringData", "data"])
        ),
        string_data=pulumi.Output.secret(config_text.apply(lambda t: {"identities.json": t})),
    )
    digest = config_text.apply(lambda t: hashlib.sha256(t.encode()).hexdigest())
    store = typed_object(
        f"{name}-backup-store",
        deployment("<digest>"),
        site.k8s_opts([data, identities_secret]),
        spec=digest.apply(lambda d: deployment(d)["spec"]),
    )
    typed_object(f"{name}-backup-store-service", service(), site.k8s_opts([ns]))
    policy = network_policy()
    k8s.networking.v1.NetworkPolicy(
        f"{name}-backup-store-policy",
        metadata=policy["metadata"],
        spec=policy["spec"],
        opts=site.k8s_opts([ns]),
    )
    buckets = site.gate(
        "backup-store-buckets",
        {
            "NAMESPACE": NAMESPACE,
            "STORE": STORE,
            "BUCKETS": " ".join(f"{bucket_name(t)}={identity_name(t)}" for t in names),
        },
        [store],
        script="backup-buckets.sh",
    )
    # A tenant's backups wait for its bucket: the target is known once the buckets exist.
    ready_root = pulumi.Output.all(root, buckets.id).apply(lambda parts: str(parts[0]))
    return {tenant: _target_of(site, ready_root, tenant) for tenant in names}


def _target_of(
    site: ManagementSite, root: pulumi.Output[str], tenant: str
) -> pulumi.Output[dict[str, str]]:
    # Random, made once (secret_made_once: nothing re-runs it), so the key stays what the
    # tenant's stored archives were encrypted with for as long as the stack lives.
    key = secret_made_once(archive_key_resource(site.name, tenant), site.component)
    return pulumi.Output.secret(
        pulumi.Output.all(root, key).apply(lambda parts: tenant_target(parts[0], tenant, parts[1]))
    )
