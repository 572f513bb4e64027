"""The typed floor: the program's resource tree registered with the program's own resource types.

The bare-SDK floor (``benchmarks.floor``) prices every resource like the cheapest possible one.
Real provider types cost more in the Python SDK before a program adds anything: every declared
output property becomes an Output with four futures, some Kubernetes types carry aliases for
older API versions (each one resolved to a URN), a ``docker`` Container declares 78 properties.
The typed floor measures that price: the same tree (same parents, same reads) where each custom
resource is an instance of the type the program registered, built with the fewest inputs the type
accepts — no real inputs, no dependencies, no explicit providers, no Outputs from the program.

So ``typed floor / floor`` is what the chosen resource types cost (the program can change it only
by choosing other types) and ``program / typed floor`` is what the program itself adds on top:
its inputs, the Outputs it wires between resources, its secrets and its own Python.

``MINIMAL`` names the class and minimal inputs of every non-CRD type the program uses; any other
``kubernetes:<group>/<version>:<Kind>`` token is built as ``apiextensions.CustomResource``, which
is how the program registers custom resources. A type the table does not cover is an error
(``unsupported_types``), and a test keeps the table covering both stacks and checks that the
typed floor registers exactly the program's types.
"""

from __future__ import annotations

import importlib
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

import pulumi

from benchmarks import floor
from benchmarks.floor import FloorNode


@dataclass(frozen=True)
class Minimal:
    """How to build the cheapest valid instance of one resource type."""

    module: str
    cls: str
    inputs: Mapping[str, Any] = field(default_factory=dict)


MINIMAL: Mapping[str, Minimal] = {
    "command:local:Command": Minimal("pulumi_command.local", "Command"),
    "docker:index/container:Container": Minimal(
        "pulumi_docker", "Container", {"image": "kindest/node"}
    ),
    "docker:index/remoteImage:RemoteImage": Minimal(
        "pulumi_docker", "RemoteImage", {"name": "kindest/node"}
    ),
    "docker:index/volume:Volume": Minimal("pulumi_docker", "Volume"),
    "pulumi:providers:kubernetes": Minimal("pulumi_kubernetes", "Provider"),
    "kubernetes:helm.sh/v3:Release": Minimal(
        "pulumi_kubernetes.helm.v3", "Release", {"chart": "chart"}
    ),
    "kubernetes:apps/v1:DaemonSet": Minimal(
        "pulumi_kubernetes.apps.v1", "DaemonSet", {"spec": {"selector": {}, "template": {}}}
    ),
    "kubernetes:apps/v1:Deployment": Minimal(
        "pulumi_kubernetes.apps.v1", "Deployment", {"spec": {"selector": {}, "template": {}}}
    ),
    "kubernetes:batch/v1:CronJob": Minimal(
        "pulumi_kubernetes.batch.v1",
        "CronJob",
        {"spec": {"schedule": "0 0 1 1 *", "job_template": {}}},
    ),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy": Minimal(
        "pulumi_kubernetes.admissionregistration.v1", "ValidatingAdmissionPolicy", {"spec": {}}
    ),
    "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding": Minimal(
        "pulumi_kubernetes.admissionregistration.v1",
        "ValidatingAdmissionPolicyBinding",
        {"spec": {}},
    ),
    "kubernetes:core/v1:ConfigMap": Minimal("pulumi_kubernetes.core.v1", "ConfigMap"),
    "kubernetes:core/v1:Namespace": Minimal("pulumi_kubernetes.core.v1", "Namespace"),
    "kubernetes:core/v1:NodePatch": Minimal("pulumi_kubernetes.core.v1", "NodePatch"),
    "kubernetes:core/v1:ResourceQuota": Minimal("pulumi_kubernetes.core.v1", "ResourceQuota"),
    "kubernetes:core/v1:Secret": Minimal("pulumi_kubernetes.core.v1", "Secret"),
    "kubernetes:core/v1:Service": Minimal("pulumi_kubernetes.core.v1", "Service"),
    "kubernetes:core/v1:PersistentVolumeClaim": Minimal(
        "pulumi_kubernetes.core.v1", "PersistentVolumeClaim", {"spec": {}}
    ),
    "kubernetes:core/v1:ServiceAccount": Minimal("pulumi_kubernetes.core.v1", "ServiceAccount"),
    "kubernetes:networking.k8s.io/v1:NetworkPolicy": Minimal(
        "pulumi_kubernetes.networking.v1", "NetworkPolicy"
    ),
    "kubernetes:policy/v1:PodDisruptionBudget": Minimal(
        "pulumi_kubernetes.policy.v1", "PodDisruptionBudget", {"spec": {}}
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole": Minimal(
        "pulumi_kubernetes.rbac.v1", "ClusterRole"
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:ClusterRoleBinding": Minimal(
        "pulumi_kubernetes.rbac.v1",
        "ClusterRoleBinding",
        {"role_ref": {"api_group": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": ""}},
    ),
    "kubernetes:rbac.authorization.k8s.io/v1:Role": Minimal("pulumi_kubernetes.rbac.v1", "Role"),
    "kubernetes:rbac.authorization.k8s.io/v1:RoleBinding": Minimal(
        "pulumi_kubernetes.rbac.v1",
        "RoleBinding",
        {"role_ref": {"api_group": "rbac.authorization.k8s.io", "kind": "Role", "name": ""}},
    ),
}


def modules() -> list[str]:
    """Every module the typed floor takes classes from (imported before the clock starts)."""
    found = [m.module for m in MINIMAL.values()] + ["pulumi_kubernetes.apiextensions"]
    return list(dict.fromkeys(found))


def custom_resource_kind(type_token: str) -> tuple[str, str] | None:
    """``(apiVersion, kind)`` of a Kubernetes custom resource token
    (``kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane``), None for anything else —
    built-in API groups (no dot, or ``*.k8s.io``) have typed classes and belong in ``MINIMAL``."""
    parts = type_token.split(":")
    if len(parts) != 3 or parts[0] != "kubernetes" or type_token in MINIMAL:
        return None
    api_version, kind = parts[1], parts[2]
    group, _, version = api_version.rpartition("/")
    if "." not in group or group.endswith(".k8s.io") or not version or not kind:
        return None
    return api_version, kind


def unsupported_types(nodes: Iterable[FloorNode]) -> list[str]:
    """Type tokens of custom resources (or reads) the typed floor cannot build, sorted."""
    missing: set[str] = set()
    for node in nodes:
        if not node.custom or node.type in MINIMAL:
            continue
        if custom_resource_kind(node.type) is None:
            missing.add(node.type)
    return sorted(missing)


def typed_resource(node: FloorNode, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """The cheapest valid instance of ``node``'s type (a read when the program read it)."""
    name = f"typed-{node.index}"
    minimal = MINIMAL.get(node.type)
    if minimal is not None:
        cls = getattr(importlib.import_module(minimal.module), minimal.cls)
        if node.read:
            return cls.get(name, f"default/{name}", opts=opts)  # type: ignore[no-any-return]
        return cls(name, opts=opts, **minimal.inputs)  # type: ignore[no-any-return]
    kind = custom_resource_kind(node.type)
    if kind is None:
        raise ValueError(f"the typed floor cannot build {node.type}")
    from pulumi_kubernetes.apiextensions import CustomResource

    if node.read:  # the program reads control planes back for their uid (gpu_tenant.py)
        return CustomResource.get(name, kind[0], kind[1], f"default/{name}", opts=opts)
    return CustomResource(name, api_version=kind[0], kind=kind[1], opts=opts)


def check_supported(shape: Sequence[FloorNode]) -> None:
    """Raise ValueError naming every type in ``shape`` the typed floor cannot build."""
    missing = unsupported_types(shape)
    if missing:
        raise ValueError(
            f"the typed floor cannot build {', '.join(missing)}: add each to "
            "benchmarks.typed_floor.MINIMAL (its class and fewest required inputs)"
        )


def build(shape: Sequence[FloorNode]) -> None:
    """Register the typed floor (call inside a Pulumi program); fails before registering
    anything when a type is not covered."""
    check_supported(shape)
    floor.build(shape, typed_resource)
