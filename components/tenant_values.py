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
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from types import MappingProxyType
from typing import Any

from components.config import (
    SYSTEM_NAMESPACES,
    DedicatedDataStore,
    GpuDriver,
    HamiSettings,
    Tenant,
)
from components.tenant_specs import Address, dedicated_etcd_name

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
_GO_DURATION = re.compile(r"^(\d+(\.\d+)?(ns|us|µs|ms|s|m|h))+$")

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
    if not _GO_DURATION.match(node_lock_timeout):
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
) -> dict[str, Any]:
    """Values for the HAMi chart inside one tenant."""
    unknown = modes - {"mock", "nvidia"}
    if unknown or not modes:
        raise ValueError(f"device modes must be mock and/or nvidia, got {sorted(modes)}")
    real = "nvidia" in modes
    device_plugin: dict[str, Any] = {"enabled": real}
    if real:
        device_plugin["runtimeClassName"] = NVIDIA_RUNTIME_CLASS
        # Wait for the GPU Operator's toolkit validation before registering devices.
        device_plugin["gpuOperatorToolkitReady"] = {"enabled": True}
        # Containers that ask HAMi for no GPU get NVIDIA_VISIBLE_DEVICES=none from the webhook
        # (HAMi v2.10.0 pkg/device/nvidia/device.go:380-385), so even a pod that names the nvidia
        # RuntimeClass itself sees no card HAMi has not counted (see TOOLKIT_NOT_DEFAULT_RUNTIME).
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


# ------------------------------------------------------------------------------ GPU Operator


# How HAMi's device plugin hands a container its cards: HAMi 2.10.0's chart default
# (charts/hami/values.yaml ``devicePlugin.deviceListStrategy: "envvar"``, rendered into the
# plugin's DEVICE_LIST_STRATEGY by templates/device-plugin/daemonsetnvidia.yaml:93-94), which the
# program keeps: Allocate answers NVIDIA_VISIBLE_DEVICES=GPU-<uuid>
# (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go).
HAMI_DEVICE_LIST_STRATEGY = "envvar"


def gpu_operator_cdi(hami_device_list_strategy: str = HAMI_DEVICE_LIST_STRATEGY) -> dict[str, Any]:
    """The GPU Operator's ``cdi`` values that work with HAMi's device list strategy.

    GPU Operator v26.7.0 turns CDI on by default (deployments/gpu-operator/values.yaml:15-16;
    api/nvidia/v1/clusterpolicy_types.go:2472-2477 counts an unset field as on). With CDI on it
    no longer makes ``nvidia`` the default runtime and runs that runtime in ``cdi`` mode
    (controllers/object_controls.go:1257-1270), whose generated spec holds only the device
    ``all`` (nvidia-container-toolkit v1.20.0 pkg/nvcdi/management.go); HAMi's
    ``NVIDIA_VISIBLE_DEVICES=GPU-<uuid>`` then becomes ``management.nvidia.com/gpu=GPU-<uuid>``
    and every shared-GPU container fails with "unresolvable CDI devices" while HAMi's own pods
    (``all``) look healthy (Project-HAMi/HAMi#1106). HAMi documents ``cdi.enabled=false`` for its
    envvar strategy (Project-HAMi/website#862); that is the pairing here."""
    if hami_device_list_strategy != "envvar":
        raise ValueError(
            f"HAMi deviceListStrategy {hami_device_list_strategy!r} has no GPU Operator pairing "
            "here: only envvar (with cdi.enabled=false) is supported"
        )
    return {"enabled": False}


# The ConfigMap (in the GPU Operator's namespace inside the tenant) holding the package repository
# files of a runtime-built driver; the operator mounts each key into the driver container's
# /etc/apt/sources.list.d (or yum/zypp equivalent) (v26.7.0 controllers/object_controls.go:
# 222-233 RepoConfigPathMap, 3708-3720, 3462-3470: read from the operator's namespace).
DRIVER_REPOSITORIES_CONFIGMAP = "gpu-driver-repositories"


def gpu_driver_values(driver: GpuDriver) -> dict[str, Any]:
    """The GPU Operator's ``driver`` values for how the machines get their driver.

    * runtime-built (the chart's way): the driver container compiles the module for the running
      kernel at start, so the image must let it install that kernel's headers (internet, or a
      mirror through ``repoConfig``), must not enforce Secure Boot (the module is unsigned) and
      must not ship a driver or load nouveau;
    * precompiled: ``usePrecompiled`` with the driver *branch* as version — the image tag is
      ``<version>-<kernel>`` (controllers/object_controls.go:3374-3395 resolveDriverTag); NVIDIA
      publishes these for some Ubuntu kernels only (values.yaml: "tech-preview on ubuntu22.04");
    * preinstalled: the machine image has the driver; the operator's driver is off and its
      toolkit and validator use the host's."""
    if driver.source == "preinstalled":
        return {"enabled": False}
    values: dict[str, Any] = {"enabled": True}
    if driver.source == "precompiled":
        values["usePrecompiled"] = True
    if driver.version is not None:
        values["version"] = driver.version
    if driver.package_repositories:
        values["repoConfig"] = {"configMapName": DRIVER_REPOSITORIES_CONFIGMAP}
    if driver.auto_upgrade is not None:
        values["upgradePolicy"] = {"autoUpgrade": driver.auto_upgrade}
    return values


def driver_repositories_configmap(driver: GpuDriver) -> dict[str, Any] | None:
    """The ConfigMap ``gpu_driver_values`` points ``repoConfig`` at, or None without one."""
    if not driver.package_repositories:
        return None
    return {
        "metadata": {"name": DRIVER_REPOSITORIES_CONFIGMAP, "namespace": GPU_OPERATOR_NAMESPACE},
        "data": dict(driver.package_repositories),
    }


# With CDI off the operator no longer tells the toolkit installer to leave ``nvidia`` out of the
# default runtime (gpu-operator v26.7.0 controllers/object_controls.go:1264-1270 sets
# NVIDIA_RUNTIME_SET_AS_DEFAULT=false only when CDI is on), and the installer's default is to
# make it the default (nvidia-container-toolkit v1.20.0 cmd/nvidia-ctk-installer/container/
# runtime/runtime.go:33, 112-117); the runtime honours NVIDIA_VISIBLE_DEVICES from unprivileged
# containers (api/config/v1/config.go:105), so any pod of an image that sets it to ``all`` (every
# CUDA base image) would get every GPU of the node, uncapped and uncounted by HAMi. Kept off: the
# runtime then serves only pods with ``runtimeClassName: nvidia`` — the operator's own operands on
# containerd (object_controls.go setRuntimeClassName), HAMi's device plugin, and the GPU pods
# HAMi's webhook gives that class (HAMi v2.10.0 pkg/device/nvidia/device.go:373-377). User env is
# applied after the operator's (object_controls.go:1359-1363).
TOOLKIT_NOT_DEFAULT_RUNTIME = MappingProxyType(
    {"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": "false"}
)


def gpu_operator_values(driver: GpuDriver | None = None) -> dict[str, Any]:
    """Values for the NVIDIA GPU Operator (prod): driver (``gpu_driver_values``) and container
    toolkit from the operator, the ``nvidia`` runtime only for pods that name it
    (``TOOLKIT_NOT_DEFAULT_RUNTIME``), its device plugin off (HAMi's takes its place), runtime
    class named as HAMi expects, CDI off so that the ``nvidia`` runtime resolves HAMi's envvar
    device list (``gpu_operator_cdi``)."""
    return {
        "operator": {"runtimeClass": NVIDIA_RUNTIME_CLASS},
        "cdi": gpu_operator_cdi(),
        "driver": gpu_driver_values(driver if driver is not None else GpuDriver()),
        "toolkit": {"enabled": True, "env": [dict(TOOLKIT_NOT_DEFAULT_RUNTIME)]},
        "devicePlugin": {"enabled": False},
    }


# ------------------------------------------------------------------------------ kamaji-etcd


def kamaji_etcd_values(
    tenant_name: str, dedicated: DedicatedDataStore, cluster_domain: str = "cluster.local"
) -> dict[str, Any]:
    """Values for a kamaji-etcd release that serves one tenant only (prod).

    kamaji-etcd v0.17.0 builds its peer, certificate and DataStore endpoint names as
    ``<member>.<service>.<namespace>.svc.<clusterDomain>`` (charts/kamaji-etcd/templates/
    _helpers.tpl:183-214), so ``clusterDomain`` is the management cluster's own, always given. A
    PVC ``storageClassName`` of "" (the chart's default, values.yaml:71) means the cluster's
    default StorageClass; a configured one is passed through."""
    if not dedicated.deploys_kamaji_etcd:
        raise ValueError("only a dedicated etcd without endpoints is deployed with kamaji-etcd")
    name = dedicated_etcd_name(tenant_name)
    claim: dict[str, Any] = {"size": dedicated.storage_size}
    if dedicated.storage_class_name is not None:
        claim["storageClassName"] = dedicated.storage_class_name
    return {
        "fullnameOverride": name,
        "replicas": dedicated.replicas,
        "clusterDomain": cluster_domain,
        "persistentVolumeClaim": claim,
        "datastore": {"enabled": True, "name": name},
    }
