"""Small builders for policy tests: Kubernetes props, pulumi-policy argument objects, runners."""

from __future__ import annotations

import json
from collections.abc import Callable, Mapping, Sequence
from typing import Any

from pulumi_policy import (
    PolicyCustomTimeouts,
    PolicyProviderResource,
    PolicyResource,
    PolicyResourceOptions,
    ResourceValidationArgs,
    StackValidationArgs,
)
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, unknown_checking_proxy

STACK = "test"
PROJECT = "gpu-platform"
ROOT = f"urn:pulumi:{STACK}::{PROJECT}::pulumi:pulumi:Stack::{PROJECT}-{STACK}"
U = UNKNOWN_STRING_VALUE  # what the engine sends for a value unknown during preview

TENANT_LABEL = "gpu-platform.io/tenant"
GPU_TENANT = "gpu-platform:index:GpuTenant"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
POD = "kubernetes:core/v1:Pod"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RELEASE = "kubernetes:helm.sh/v3:Release"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
KCP = "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane"
DATASTORE = "kubernetes:kamaji.clastix.io/v1alpha1:DataStore"
NAMESPACE = "kubernetes:core/v1:Namespace"

A100 = {
    "model": "A100-80GB",
    "product": "NVIDIA-A100-SXM4-80GB",
    "memoryMiB": 81920,
    "coreUnits": 100,
    "count": 1,
}
L4 = {"model": "L4-24GB", "product": "NVIDIA-L4", "memoryMiB": 24576, "coreUnits": 100, "count": 2}


def urn(type_: str, name: str, parent_types: Sequence[str] = ()) -> str:
    qualified = "$".join([*parent_types, type_]) if parent_types else type_
    return f"urn:pulumi:{STACK}::{PROJECT}::{qualified}::{name}"


def options(parent: str | None = None) -> PolicyResourceOptions:
    return PolicyResourceOptions(False, [], None, [], PolicyCustomTimeouts(0, 0, 0), [], parent)


def provider(name: str | None) -> PolicyProviderResource | None:
    if name is None:
        return None
    return PolicyProviderResource(
        "pulumi:providers:kubernetes",
        unknown_checking_proxy({}),
        urn("pulumi:providers:kubernetes", name),
        name,
    )


def policy_resource(
    type_: str,
    name: str,
    props: Mapping[str, Any],
    parent: PolicyResource | None = None,
    provider_name: str | None = None,
    parent_urn: str | None = None,
) -> PolicyResource:
    parent_types = [parent.resource_type] if parent is not None else []
    own_urn = urn(type_, name, parent_types)
    return PolicyResource(
        type_,
        unknown_checking_proxy(json.loads(json.dumps(props))),
        own_urn,
        name,
        options(parent.urn if parent is not None else (parent_urn or ROOT)),
        provider(provider_name),
        parent,
        [],
        {},
    )


def resource_args(
    type_: str,
    props: Mapping[str, Any],
    name: str = "r",
    config: Mapping[str, Any] | None = None,
    provider_name: str | None = None,
    parent_urn: str | None = None,
) -> ResourceValidationArgs:
    return ResourceValidationArgs(
        type_,
        unknown_checking_proxy(json.loads(json.dumps(props))),
        urn(type_, name),
        name,
        options(parent_urn or ROOT),
        provider(provider_name),
        config,
    )


Report = list[tuple[str, str | None]]


def run_resource(
    validate: Callable[[ResourceValidationArgs, Any], None], args: ResourceValidationArgs
) -> list[str]:
    found: Report = []
    validate(args, lambda message, urn=None: found.append((message, urn)))
    return [message for message, _ in found]


def run_stack(
    validate: Callable[[StackValidationArgs, Any], None],
    resources: Sequence[PolicyResource],
    config: Mapping[str, Any] | None = None,
) -> Report:
    found: Report = []
    validate(
        StackValidationArgs(list(resources), config),
        lambda message, urn=None: found.append((message, urn)),
    )
    return found


# ---------------------------------------------------------------------------- k8s props


def container(
    limits: Mapping[str, Any] | None = None,
    requests: Mapping[str, Any] | None = None,
    name: str = "main",
    privileged: bool | None = None,
) -> dict[str, Any]:
    result: dict[str, Any] = {"name": name, "image": "busybox:1.37.0"}
    resources: dict[str, Any] = {}
    if limits is not None:
        resources["limits"] = dict(limits)
    if requests is not None:
        resources["requests"] = dict(requests)
    if resources:
        result["resources"] = resources
    if privileged is not None:
        result["securityContext"] = {"privileged": privileged}
    return result


def gpu(memory: Any = 20000.0, cores: Any = 30.0, cards: Any = 1.0) -> dict[str, Any]:
    """HAMi limits as Pulumi hands them to a policy (numbers as floats)."""
    limits: dict[str, Any] = {"nvidia.com/gpu": cards}
    if memory is not None:
        limits["nvidia.com/gpumem"] = memory
    if cores is not None:
        limits["nvidia.com/gpucores"] = cores
    return limits


def pod_spec(
    containers: Sequence[Mapping[str, Any]],
    init: Sequence[Mapping[str, Any]] = (),
    **extra: Any,
) -> dict[str, Any]:
    spec: dict[str, Any] = {"containers": [dict(c) for c in containers], **extra}
    if init:
        spec["initContainers"] = [dict(c) for c in init]
    return spec


def deployment(
    name: str,
    spec: Any,
    replicas: Any = 1.0,
    tenant: str | None = "tenant-a",
    annotations: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": name, "namespace": "default"}
    if tenant is not None:
        metadata["labels"] = {TENANT_LABEL: tenant}
    template: dict[str, Any] = {"metadata": {"labels": {"app": name}}, "spec": spec}
    if annotations:
        template["metadata"]["annotations"] = dict(annotations)
    return {
        "apiVersion": "apps/v1",
        "kind": "Deployment",
        "metadata": metadata,
        "spec": {
            "replicas": replicas,
            "selector": {"matchLabels": {"app": name}},
            "template": template,
        },
    }


def gpu_deployment(
    name: str, replicas: Any = 1.0, memory: Any = 20000.0, cores: Any = 30.0, **kwargs: Any
) -> dict[str, Any]:
    return deployment(name, pod_spec([container(gpu(memory, cores))]), replicas, **kwargs)


def inventory(
    tenant: str,
    pool: str,
    cards: Sequence[Mapping[str, Any]],
    replicas: int = 1,
    slots: int = 10,
) -> dict[str, Any]:
    document = {
        "tenant": tenant,
        "pool": pool,
        "replicas": replicas,
        "slotsPerCard": slots,
        "cards": [dict(c) for c in cards],
    }
    return {
        "metadata": {
            "name": f"gpu-inventory-{pool}",
            "namespace": "kube-system",
            "labels": {"gpu-platform.io/declared-inventory": "true", TENANT_LABEL: tenant},
        },
        "data": {"cards.json": json.dumps(document)},
    }


def tcp(
    name: str,
    data_store: Any = "default",
    schema: Any = None,
    username: Any = None,
    version: Any = "v1.35.0",
    konnectivity: Any = True,
    admission_controllers: Any = None,
    tenant: str | None = None,
) -> dict[str, Any]:
    spec: dict[str, Any] = {
        "controlPlane": {"service": {"serviceType": "LoadBalancer"}},
        "kubernetes": {"version": version, "kubelet": {}},
    }
    if data_store is not None:
        spec["dataStore"] = data_store
    spec["dataStoreSchema"] = schema if schema is not None else name.replace("-", "_")
    spec["dataStoreUsername"] = username if username is not None else name.replace("-", "_")
    if schema is False:
        del spec["dataStoreSchema"]
    if username is False:
        del spec["dataStoreUsername"]
    if konnectivity is True:
        spec["addons"] = {
            "konnectivity": {"server": {"port": 8132}, "agent": {"mode": "DaemonSet"}}
        }
    elif konnectivity is not None:
        spec["addons"] = {"konnectivity": konnectivity}
    if admission_controllers is not None:
        spec["kubernetes"]["admissionControllers"] = admission_controllers
    metadata: dict[str, Any] = {"name": name, "namespace": name}
    if tenant is not None:
        metadata["labels"] = {TENANT_LABEL: tenant}
    return {"apiVersion": "kamaji.clastix.io/v1alpha1", "kind": "TenantControlPlane",
            "metadata": metadata, "spec": spec}  # fmt: skip


def hami_values(
    tag: Any = "v1.35.0",
    failure_policy: Any = "Fail",
    whitelist: Any = ("kube-system",),
    mock: bool = False,
) -> dict[str, Any]:
    webhook: dict[str, Any] = {}
    if failure_policy is not None:
        webhook["failurePolicy"] = failure_policy
    if whitelist is not None:
        webhook["whitelistNamespaces"] = list(whitelist)
    scheduler: dict[str, Any] = {"admissionWebhook": webhook}
    if tag is not None:
        scheduler["kubeScheduler"] = {"image": {"tag": tag}}
    return {
        "scheduler": scheduler,
        "mockDevicePlugin": {
            "enabled": mock,
            "image": {"repository": "projecthami/mock-device-plugin"},
        },
    }


def hami_release(values: Any) -> dict[str, Any]:
    return {
        # The form the program registers: the verified archive in .charts/ (chart_cache.py).
        "chart": ".charts/hami-2.10.0.tgz",
        "version": "2.10.0",
        "namespace": "kube-system",
        "values": values,
    }
