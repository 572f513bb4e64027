"""Prod's Cluster API installation as plain data: the cluster-api-operator's Helm values, the
name of the providers' config Secret, and the parameters and probe of the Cluster API readiness
gate. The provider objects themselves are ``components.prod.capi_providers``.

Pure functions only: ``components.prod.management`` wires them to resources, the unit tests read
them directly and the contract tests check the probe objects against the pinned CRDs.
"""

from __future__ import annotations

import hashlib
from collections.abc import Sequence
from types import MappingProxyType

from components.management_values import (
    PROBE_NAME,
    PROBE_NAMESPACE,
    Values,
    api_object,
    gate_env,
)
from components.prod.capi_providers import CapiProvider

CAPI_OPERATOR_RELEASE = "capi-operator"

# The Secret (one per provider namespace: the operator reads ``configSecret`` there) holding the
# operator's GitHub token under clusterctl's variable name ``github-token`` (cluster-api v1.13.5
# cmd/clusterctl/client/config/variables_client.go:21; the operator loads every key of the Secret
# as a variable, cluster-api-operator v0.28.0 internal/controller/phase_initialize.go:36-60).
CAPI_GITHUB_TOKEN_KEY = "github-token"
CAPI_CONFIG_SECRET_PREFIX = "gpu-platform-capi-config"


# ------------------------------------------------------------------------------- Helm values


def capi_operator_values() -> Values:
    """The operator alone: providers are declared as separate objects (reviewable, validated
    against their CRDs) instead of through the chart's ``core``/``bootstrap``/... values."""
    return {}


def capi_config_secret_name(token: str) -> str:
    """The name of the providers' config Secret for ``token``. The operator treats the Secret's
    content as immutable ("If changes need to be made, a new object can be created and the name
    should be updated", ``spec.configSecret`` in the v0.28.0 CRDs): a new token gets a new name,
    which updates every provider object. The name carries 40 bits of the token's SHA-256, which
    tells nothing usable about a token."""
    digest = hashlib.sha256(token.encode()).hexdigest()[:10]
    return f"{CAPI_CONFIG_SECRET_PREFIX}-{digest}"


# ------------------------------------------------------------------------- readiness gate


# Infrastructure cluster kinds by provider, and what their webhooks accept: CAPM3's Metal3Cluster
# webhook requires spec.controlPlaneEndpoint.host (CAPM3 v1.13.2
# internal/webhooks/v1beta2/metal3cluster_webhook.go, validate). The address is TEST-NET-1 (RFC
# 5737): the object is never persisted.
_PROBE_INFRASTRUCTURE: MappingProxyType[str, tuple[str, Values]] = MappingProxyType(
    {
        "metal3": ("Metal3Cluster", {"controlPlaneEndpoint": {"host": "192.0.2.1", "port": 6443}}),
        "docker": ("DockerCluster", {}),
    }
)


def readiness_probe_capi(infrastructure: str) -> Values:
    """What the Cluster API gate submits with a server-side dry run (nothing is persisted): a
    ``List`` of a Cluster (core webhooks), a KubeadmConfigTemplate (bootstrap webhooks) and the
    infrastructure cluster (CAPM3's or CAPD's webhooks), the kinds tenants and pools create.
    Provider Ready only means the Deployment is available; cert-manager's CA injection can lag
    behind, and pulumi-kubernetes retries a create only on NotFound/NoMatch (v4.32.0
    provider/pkg/await/await.go:274), so the first tenant object would fail on a webhook."""
    infra_kind, infra_spec = _PROBE_INFRASTRUCTURE[infrastructure]
    infra_group = "infrastructure.cluster.x-k8s.io"
    items = [
        api_object(
            "cluster.x-k8s.io/v1beta2",
            "Cluster",
            PROBE_NAME,
            PROBE_NAMESPACE,
            {
                "controlPlaneRef": {
                    "apiGroup": "controlplane.cluster.x-k8s.io",
                    "kind": "KamajiControlPlane",
                    "name": PROBE_NAME,
                },
                "infrastructureRef": {
                    "apiGroup": infra_group,
                    "kind": infra_kind,
                    "name": PROBE_NAME,
                },
            },
        ),
        api_object(
            "bootstrap.cluster.x-k8s.io/v1beta2",
            "KubeadmConfigTemplate",
            PROBE_NAME,
            PROBE_NAMESPACE,
            {
                "template": {
                    "spec": {
                        "joinConfiguration": {
                            "nodeRegistration": {
                                "kubeletExtraArgs": [{"name": "node-labels", "value": "gpu=on"}]
                            }
                        }
                    }
                }
            },
        ),
        api_object(
            f"{infra_group}/v1beta2", infra_kind, PROBE_NAME, PROBE_NAMESPACE, dict(infra_spec)
        ),
    ]
    return {"apiVersion": "v1", "kind": "List", "items": items}


def capi_operator_gate_env(providers: Sequence[CapiProvider]) -> dict[str, str]:
    """The cluster-api-operator's webhooks serving, before any provider object is created: the
    provider CRDs established, and the provider objects themselves (without their config Secret,
    which may not exist yet) through a server-side dry run.

    The operator's mutating and validating webhooks for every provider kind have
    ``failurePolicy: Fail`` and get their CA from cert-manager's cainjector
    (``cert-manager.io/inject-ca-from``, the v0.28.0 chart's templates/operator-components.yaml),
    and its readiness probe is a plain ping (cluster-api-operator v0.28.0 cmd/main.go:221-224),
    so the Helm release is ready before a webhook can be called. pulumi-kubernetes retries a
    create only on NotFound or NoMatch (v4.32.0 provider/pkg/await/await.go:274,
    provider/pkg/retry/retry.go:61-80): a late CA injection ("failed calling webhook ... x509")
    failed the first ``up``. ``wait-ready.sh`` retries exactly that answer until the webhooks
    answer (accept, or deny: then the create fails with the webhook's reason)."""
    return gate_env(
        crds=sorted({p.resource for p in providers}),
        dry_run_manifest={
            "apiVersion": "v1",
            "kind": "List",
            "items": [p.manifest() for p in providers],
        },
        timeout_seconds=900,
    )


def capi_gate_env(providers: Sequence[CapiProvider]) -> dict[str, str]:
    """Cluster API serving: every provider object Ready (the operator installed it and its
    deployment is available), the CRDs tenants and worker pools create (Cluster,
    MachineDeployment, KamajiControlPlane, KubeadmConfigTemplate, machine templates)
    established, and the core, bootstrap and infrastructure webhooks answering a server-side dry
    run (``readiness_probe_capi``), as the Kamaji gate proves Kamaji's."""
    infrastructure = next(p.name for p in providers if p.kind == "InfrastructureProvider")
    env = gate_env(
        crds=[crd for provider in providers for crd in provider.crds],
        conditions=[f"{p.namespace}/{p.resource}/{p.name}/condition=Ready" for p in providers],
        dry_run_manifest=readiness_probe_capi(infrastructure),
        timeout_seconds=1200,
    )
    # Re-run the gate when a provider version changes.
    env["PROVIDER_VERSIONS"] = " ".join(f"{p.name}={p.version}" for p in providers)
    return env
