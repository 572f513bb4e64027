"""Helm values for what runs inside (and beside) each tenant, as pure functions.

Every key below exists in the pinned chart's default ``values.yaml`` (see ``../shared/upstream``
and the contract tests), except ``installation.calicoNetwork`` of tigera-operator, which the
chart documents commented out and passes through verbatim as the ``Installation`` spec
(``templates/crs/custom-resources.yaml``: ``omit .Values.installation "enabled"``).

Decisions made here (platform.md §3, pitfalls 2, 3, 5):

* **Version pairing** — HAMi's bundled kube-scheduler runs ``registry.k8s.io/kube-scheduler`` at
  exactly the tenant's Kubernetes version (the chart's default registry is a mirror and its tag
  is empty).
* **Webhook exclusions** — HAMi's mutating webhook never sees the namespaces that the webhook
  path itself needs (kube-system with the Konnectivity agent, the CNI's, HAMi's own, the GPU
  Operator's), so ``failurePolicy: Fail`` cannot deadlock the tenant.
* **Node-lock timeout** — one expiry, the scheduler's ``--node-lock-timeout`` flag. HAMi 2.10.0
  reads ``HAMI_NODELOCK_EXPIRE`` at package init (``pkg/util/nodelock/nodelock.go:111-127``), then
  ``cmd/scheduler/main.go:114`` overwrites it with the flag's value (default 5m), so the env the
  chart renders from ``scheduler.nodeLockExpire`` (``templates/scheduler/deployment.yaml:91-94``)
  never counts; it is blanked so the Deployment does not state a second, contradicting expiry.
* **Webhook Service** — ``ClusterIP``: the API server reaches the webhook through Konnectivity
  and the Service's cluster IP, and kube-scheduler reaches the extender on 127.0.0.1
  (``templates/scheduler/configmap.yaml``); the chart's default ``NodePort`` would only open the
  extender's port 31998 and the metrics port on every node.
* **Device plugin** — the real one is off in the lab (kindest/node has no NVML), and so is the
  chart's mock (``components.lab.mock_device_plugin`` says why and runs it instead); prod runs the
  real one under the GPU Operator's ``nvidia`` runtime class and lets the GPU Operator provide
  driver and toolkit (its own device plugin off).

The GPU Operator's values and the tenant's dedicated kamaji-etcd, which only prod installs, are
in ``components.prod.tenant_values``.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from typing import Any

from components.config import GO_DURATION, SYSTEM_NAMESPACES, HamiSettings, Tenant
from components.tenant_specs import Address

# Namespaces of what the platform installs inside a tenant.
TIGERA_OPERATOR_NAMESPACE = "tigera-operator"
# The release of Calico's CRD chart (the name upstream's README uses), in the operator's namespace.
CALICO_CRDS_RELEASE = "calico-crds"
# Namespaces the tigera operator creates for Calico itself (calico-node/typha/kube-controllers,
# goldmane and whisker live in calico-system; the Calico API server in calico-apiserver).
CALICO_NAMESPACES = ("calico-system", "calico-apiserver")
HAMI_NAMESPACE = "hami-system"
GPU_OPERATOR_NAMESPACE = "gpu-operator"

# The runtime class the GPU Operator creates and HAMi's device plugin runs under (prod).
NVIDIA_RUNTIME_CLASS = "nvidia"

# HAMi chart defaults for the extender's arguments (values.yaml 2.10.0); overriding the list
# replaces it, so they are repeated here.
HAMI_EXTENDER_DEFAULT_ARGS = ("--debug", "-v=4")
KUBE_SCHEDULER_REGISTRY = "registry.k8s.io"
KUBE_SCHEDULER_REPOSITORY = "kube-scheduler"

# A Go time.Duration as ``time.ParseDuration`` accepts it (what HAMi's flag parser uses).

# ------------------------------------------------------------------------------------- HAMi


def webhook_excluded_namespaces(environment_namespaces: Iterable[str] = ()) -> list[str]:
    """Namespaces HAMi's webhook must never gate: the system ones, the CNI's, HAMi's own and the
    environment's own system namespaces (prod: the GPU Operator's). With ``failurePolicy: Fail``
    a pod in any of them would otherwise wait for HAMi, and HAMi's own pods (and the
    Konnectivity agent the webhook call travels through) could never start."""
    return [
        *SYSTEM_NAMESPACES,
        TIGERA_OPERATOR_NAMESPACE,
        *CALICO_NAMESPACES,
        HAMI_NAMESPACE,
        *environment_namespaces,
    ]


def kube_scheduler_image(kubernetes_version: str) -> dict[str, str]:
    """HAMi's kube-scheduler image at the tenant's version (pitfall 5)."""
    if not re.match(r"^v1\.\d+\.\d+$", kubernetes_version):
        raise ValueError(f"{kubernetes_version!r} is not a Kubernetes version like v1.35.0")
    return {
        "registry": KUBE_SCHEDULER_REGISTRY,
        "repository": KUBE_SCHEDULER_REPOSITORY,
        "tag": kubernetes_version,
    }


def extender_args(node_lock_timeout: str) -> list[str]:
    """The scheduler extender's arguments: the chart's defaults plus the node-lock timeout."""
    if not GO_DURATION.match(node_lock_timeout):
        raise ValueError(
            f"hami.nodeLockTimeout {node_lock_timeout!r} is not a duration like 30s, 2m or 1m30s"
        )
    return [*HAMI_EXTENDER_DEFAULT_ARGS, f"--node-lock-timeout={node_lock_timeout}"]


def device_split_count(slots_per_card: Iterable[int]) -> int | None:
    """HAMi's chart-wide ``deviceSplitCount`` when every pool of the tenant agrees, else None
    (the chart keeps its default; nodes carry their own count in their registration)."""
    values = set(slots_per_card)
    return values.pop() if len(values) == 1 else None


def device_modes(tenant: Tenant, default: str) -> set[str]:
    """``mock`` and/or ``nvidia``: what the tenant's pools need from HAMi's device plugins
    (``default`` for a pool that names none, and for a tenant without pools)."""
    modes: set[str] = {pool.device_mode or default for pool in tenant.worker_pools}
    return modes or {default}


def hami_values(
    *,
    kubernetes_version: str,
    hami: HamiSettings,
    modes: set[str],
    excluded_namespaces: Sequence[str],
    split_count: int | None = None,
    hami_cards: bool = True,
) -> dict[str, Any]:
    """Values for the HAMi chart inside one tenant. ``hami_cards`` False (a ``gpuSharing: dra``
    tenant): a DRA driver publishes the cards, so HAMi's device plugin stays off (else
    hami-scheduler would hand out the same cards) and so does ``overwriteEnv``, which would set
    NVIDIA_VISIBLE_DEVICES=none on every pod that asks HAMi for nothing, the DRA pods too."""
    unknown = modes - {"mock", "nvidia"}
    if unknown or not modes:
        raise ValueError(f"device modes must be mock and/or nvidia, got {sorted(modes)}")
    real = "nvidia" in modes and hami_cards
    device_plugin: dict[str, Any] = {"enabled": real}
    if real:
        device_plugin["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
        # Wait for the GPU Operator's toolkit validation before registering devices.
        device_plugin["gpuOperatorToolkitReady"] = {"enabled": True}
        # Containers that ask HAMi for no GPU get NVIDIA_VISIBLE_DEVICES=none from the webhook
        # (HAMi v2.10.0 pkg/device/nvidia/device.go:380-385), so even a pod that names the nvidia
        # RuntimeClass itself sees no card HAMi has not counted (see TOOLKIT_NOT_DEFAULT_RUNTIME in
        # components.prod.tenant_values).
        scheduler_extra = {"overwriteEnv": "true"}
    else:
        scheduler_extra = {}
    if split_count is not None:
        device_plugin["deviceSplitCount"] = split_count
    values: dict[str, Any] = {
        "scheduler": {
            "kubeScheduler": {"image": kube_scheduler_image(kubernetes_version)},
            "extender": {"extraArgs": extender_args(hami.node_lock_timeout)},
            "nodeLockExpire": "",
            "service": {"type": "ClusterIP"},
            "defaultSchedulerPolicy": {
                "nodeSchedulerPolicy": hami.node_scheduler_policy,
                "gpuSchedulerPolicy": hami.gpu_scheduler_policy,
            },
            "admissionWebhook": {
                "failurePolicy": hami.webhook_failure_policy,
                "whitelistNamespaces": list(excluded_namespaces),
            },
            **scheduler_extra,
        },
        "devicePlugin": device_plugin,
    }
    # The chart's mock device plugin stays off (its default) even for mock pools: it mounts the
    # scheduler's device config, which mock 1.0.1 cannot decode. The lab runs the mock itself
    # (components.lab.mock_device_plugin).
    return values


# ----------------------------------------------------------------------------------- Calico


def calico_crds_values() -> dict[str, Any]:
    """Values for the ``crd.projectcalico.org.v1`` chart: none. Its ``values.yaml`` is empty and
    its templates are plain CRDs (projectcalico/calico v3.32.1 ``charts/crd.projectcalico.org.v1``),
    so every Calico and operator.tigera.io CRD is installed whatever is passed."""
    return {}


def calico_values(pod_cidr: str, api_server_host: Address = None) -> dict[str, Any]:
    """Values for the tigera-operator chart: one IPv4 pool equal to the tenant's pod CIDR (it must
    match the control plane's ``podCidrs``), VXLAN so it works on any L2/L3 between workers.
    Calico's API server, Goldmane and Whisker are left out: the tenant does not need them and an
    unavailable aggregated API breaks discovery. With a known API address, calico-node talks to
    it directly instead of through the ``kubernetes`` Service.

    The CRDs have one owner, the ``crd.projectcalico.org.v1`` release installed just before:
    ``manageCRDs: false`` renders the operator with ``-manage-crds=false``
    (projectcalico/calico v3.32.1 charts/tigera-operator/values.yaml:112-114,
    templates/tigera-operator/02-tigera-operator.yaml:62-64). With the chart default ``true`` the
    operator writes its own embedded copy of every CRD at start and reconciles them whenever they
    change (tigera/operator v1.42.3, the chart's operator: cmd/main.go:302-326 ``crds.Ensure``;
    pkg/controller/installation/core_controller.go:257-267 CRD watches, :2253-2266
    ``updateCRDs``), so during a Calico upgrade it and Helm would take turns. The values say "If
    disabled, you must manage these resources out-of-band": the CRD release is that. Calico's own
    kind CI installs the same way (hack/test/kind/infra/values.yaml:53-54). The operator alone
    cannot own them here: the chart renders the Installation, whose kind Helm must map before the
    operator runs. (The chart's ``bootstrap-crds`` init container only renders for
    ``kubernetesProvider: openshift``, 02-tigera-operator.yaml:95-111.)"""
    values: dict[str, Any] = {
        "installation": {
            "calicoNetwork": {
                "ipPools": [
                    {
                        "cidr": pod_cidr,
                        "encapsulation": "VXLAN",
                        "natOutgoing": "Enabled",
                        "nodeSelector": "all()",
                    }
                ]
            }
        },
        "manageCRDs": False,
        "apiServer": {"enabled": False},
        "goldmane": {"enabled": False},
        "whisker": {"enabled": False},
    }
    if api_server_host is not None:
        values["kubernetesServiceEndpoint"] = {"host": api_server_host, "port": "6443"}
    return values
