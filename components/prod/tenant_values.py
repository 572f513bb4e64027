"""Helm values of what prod alone installs inside and beside a tenant, as pure functions: the
NVIDIA GPU Operator (paired with HAMi's device plugin: driver, toolkit, CDI) with the ConfigMap of
a runtime-built driver's package repositories, and a tenant's dedicated kamaji-etcd.

Every key below exists in the pinned chart's default ``values.yaml`` (see ``../shared/upstream``
and the contract tests). HAMi and Calico, which every tenant runs, are in
``components.tenant_values``.
"""

from __future__ import annotations

from collections.abc import Mapping
from types import MappingProxyType
from typing import Any

from components import management_values
from components.config import DedicatedDataStore, GpuDriver
from components.tenant_specs import dedicated_etcd_name
from components.tenant_values import GPU_OPERATOR_NAMESPACE, NVIDIA_RUNTIME_CLASS

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


def gpu_operator_values(driver: GpuDriver | None = None, *, dra: bool = False) -> dict[str, Any]:
    """Values for the NVIDIA GPU Operator (prod): driver (``gpu_driver_values``) and container
    toolkit from the operator, the ``nvidia`` runtime only for pods that name it
    (``TOOLKIT_NOT_DEFAULT_RUNTIME``), its device plugin off (HAMi's takes its place), runtime
    class named as HAMi expects, CDI off so that the ``nvidia`` runtime resolves HAMi's envvar
    device list (``gpu_operator_cdi``). A ``gpuSharing: dra`` tenant gets
    ``gpu_cluster_values`` instead."""
    if dra:
        return gpu_cluster_values(driver if driver is not None else GpuDriver())
    return {
        "operator": {"runtimeClass": NVIDIA_RUNTIME_CLASS},
        "cdi": gpu_operator_cdi(),
        "driver": gpu_driver_values(driver if driver is not None else GpuDriver()),
        "toolkit": {"enabled": True, "env": [dict(TOOLKIT_NOT_DEFAULT_RUNTIME)]},
        "devicePlugin": {"enabled": False},
    }


# The NVIDIA DRA driver for GPUs that the GPU Operator's GPUCluster deploys publishes whole cards
# (and MIG devices) under this driver name and DeviceClass (gpu-operator v26.7.0
# manifests/state-dra-driver/0400_deviceclass-gpu.yaml:4-8, the class selects
# ``device.driver == 'gpu.nvidia.com' && ...type == 'gpu'``; kubernetes-sigs/dra-driver-nvidia-gpu
# main 95932046 cmd/gpu-kubelet-plugin/main.go:45). The operator creates the class, not the program.
NVIDIA_DRA_DRIVER = "gpu.nvidia.com"
NVIDIA_GPU_DEVICE_CLASS = "gpu.nvidia.com"


def gpu_cluster_problem(driver: GpuDriver) -> str | None:
    """Why the GPUCluster (DRA) stack cannot work with ``driver``, or None.

    A GPUCluster deploys only the DRA driver, DCGM, its exporter and a validator (gpu-operator
    v26.7.0 internal/state/manager.go:134-145): no driver and no container toolkit. The kubelet
    plugin's init container waits for a driver already on the host (manifests/state-dra-driver/
    0500_daemonset.yaml:85-131, nvidia-validator with ``HOST_ROOT=/``). An operator-built driver
    would need the NVIDIADriver CRD (templates/validations.yaml:5-6), which the program does not
    drive; so only a driver the machine image ships serves a DRA tenant."""
    if driver.source == "preinstalled":
        return None
    return (
        f"the GPU Operator's DRA stack (GPUCluster) installs no driver, and the {driver.source} "
        "driver would need its NVIDIADriver CRD, which this platform does not drive; set "
        "gpuDriver.source: preinstalled (a machine image with the driver and containerd's CDI "
        "on) or keep gpuSharing: hami"
    )


def gpu_cluster_values(driver: GpuDriver) -> dict[str, Any]:
    """Values for the GPU Operator of a ``gpuSharing: dra`` tenant: the GPUCluster CR (DRA)
    instead of the ClusterPolicy; both CRs at once are refused by the chart
    (gpu-operator v26.7.0 deployments/gpu-operator/templates/validations.yaml:1-3) and by the
    operator (controllers/gpucluster_controller.go:158-170). The GPUCluster deploys NVIDIA's DRA
    driver (``draDriver``: nvcr.io/nvidia/dra-driver-nvidia-gpu v0.5.0, values.yaml:578-590),
    DCGM and its exporter; the driver is the host's (``gpu_cluster_problem``), so the chart's
    ``driver`` is off (else validations.yaml:5-6 demands the NVIDIADriver CRD). ComputeDomains
    (Multi-Node NVLink, a controller Deployment and a second kubelet-plugin container,
    values.yaml:600-612) are off: the platform asks for no ComputeDomain. The ClusterPolicy's
    toolkit, CDI and device-plugin values are not given: nothing reads them without it."""
    problem = gpu_cluster_problem(driver)
    if problem is not None:
        raise ValueError(problem)
    return {
        "clusterPolicy": {"deployCR": False},
        "gpuCluster": {"deployCR": True},
        "driver": {"enabled": False},
        "draDriver": {"computeDomains": {"enabled": False}},
    }


# ------------------------------------------------------------------------------ kamaji-etcd


def dedicated_etcd_issuer_name(tenant_name: str) -> str:
    """The self-signed cert-manager Issuer a tenant's dedicated kamaji-etcd roots its CA in."""
    return f"{dedicated_etcd_name(tenant_name)}-issuer"


def dedicated_etcd_issuer(
    tenant_name: str, namespace: str, labels: Mapping[str, str]
) -> dict[str, Any]:
    """That Issuer, in the tenant's namespace (an Issuer serves only its own namespace): the
    chart signs its CA with it (templates/etcd_cert-manager_ca.yaml), as Kamaji's own
    ``kamaji-selfsigned-issuer`` does for its bundled etcd (clastix/kamaji 26.8.2-edge
    charts/kamaji/templates/certmanager_issuer.yaml)."""
    return {
        "apiVersion": management_values.CERT_MANAGER_API,
        "kind": "Issuer",
        "metadata": {
            "name": dedicated_etcd_issuer_name(tenant_name),
            "namespace": namespace,
            "labels": dict(labels),
        },
        "spec": {"selfSigned": {}},
    }


def kamaji_etcd_values(
    tenant_name: str, dedicated: DedicatedDataStore, cluster_domain: str = "cluster.local"
) -> dict[str, Any]:
    """Values for a kamaji-etcd release that serves one tenant only (prod), with its DataStore
    (``management_values.kamaji_etcd_values`` says what every kamaji-etcd release here sets),
    its certificates from cert-manager (``dedicated_etcd_issuer``), which renews them: the
    chart's own jobs would make certificates of one year that nothing renews. A PVC
    ``storageClassName`` of "" (the chart's default, values.yaml:71) means the cluster's default
    StorageClass; a configured one is passed through."""
    if not dedicated.deploys_kamaji_etcd:
        raise ValueError("only a dedicated etcd without endpoints is deployed with kamaji-etcd")
    claim: dict[str, str] = {"size": dedicated.storage_size}
    if dedicated.storage_class_name is not None:
        claim["storageClassName"] = dedicated.storage_class_name
    return management_values.kamaji_etcd_values(
        dedicated_etcd_name(tenant_name),
        cluster_domain=cluster_domain,
        replicas=dedicated.replicas,
        claim=claim,
        issuer=dedicated_etcd_issuer_name(tenant_name),
        quota_backend_bytes=management_values.etcd_quota_backend_bytes(dedicated.storage_size),
    )
