"""One typed Pulumi resource from one built-in Kubernetes manifest.

The lab's own workloads (kube-proxy, the mock device plugin, the allocation completer) are built
as plain manifests by pure functions (``components/lab``, ``components/lab/completer``) and
registered as the typed pulumi-kubernetes resources of their kinds, so previews show their fields
and the policy pack sees them as what they are. This maps a manifest's kind and fields onto its
class.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

# kind -> (class, the manifest fields it takes, as (manifest key, keyword argument)).
_KINDS: Mapping[str, tuple[Callable[..., Any], tuple[tuple[str, str], ...]]] = MappingProxyType(
    {
        "Namespace": (k8s.core.v1.Namespace, ()),
        "ServiceAccount": (
            k8s.core.v1.ServiceAccount,
            (("automountServiceAccountToken", "automount_service_account_token"),),
        ),
        "ConfigMap": (k8s.core.v1.ConfigMap, (("data", "data"),)),
        "Secret": (k8s.core.v1.Secret, (("type", "type"), ("data", "data"))),
        "Service": (k8s.core.v1.Service, (("spec", "spec"),)),
        "PersistentVolumeClaim": (k8s.core.v1.PersistentVolumeClaim, (("spec", "spec"),)),
        "NetworkPolicy": (k8s.networking.v1.NetworkPolicy, (("spec", "spec"),)),
        "ClusterRole": (k8s.rbac.v1.ClusterRole, (("rules", "rules"),)),
        "Role": (k8s.rbac.v1.Role, (("rules", "rules"),)),
        "ClusterRoleBinding": (
            k8s.rbac.v1.ClusterRoleBinding,
            (("roleRef", "role_ref"), ("subjects", "subjects")),
        ),
        "RoleBinding": (
            k8s.rbac.v1.RoleBinding,
            (("roleRef", "role_ref"), ("subjects", "subjects")),
        ),
        "DaemonSet": (k8s.apps.v1.DaemonSet, (("spec", "spec"),)),
        "Deployment": (k8s.apps.v1.Deployment, (("spec", "spec"),)),
        "CronJob": (k8s.batch.v1.CronJob, (("spec", "spec"),)),
        "DeviceClass": (k8s.resource.v1.DeviceClass, (("spec", "spec"),)),
        "ResourceClaimTemplate": (k8s.resource.v1.ResourceClaimTemplate, (("spec", "spec"),)),
    }
)


def typed_object(
    name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions, **inputs: Any
) -> Any:
    """``manifest`` registered as its kind's typed resource named ``name``; ``inputs`` replace
    manifest fields that are only known at deploy time (e.g. a ConfigMap's ``data``)."""
    kind = str(manifest["kind"])
    if kind not in _KINDS:
        raise KeyError(f"no typed resource for kind {kind!r}: add it to k8s_objects._KINDS")
    cls, fields = _KINDS[kind]
    arguments = {keyword: manifest[key] for key, keyword in fields if key in manifest}
    arguments.update(inputs)
    return cls(name, metadata=manifest["metadata"], opts=opts, **arguments)


def restricted_security(
    user: int, *, read_only_root: bool = True, group: int | None = None
) -> dict[str, Any]:
    """A container's securityContext within the restricted Pod Security Standard: not root (as
    ``user``, and ``group`` when given), no privilege escalation, no capabilities, the runtime's
    seccomp profile, and (unless the image must write outside its volumes) a read-only root."""
    context: dict[str, Any] = {"runAsNonRoot": True, "runAsUser": user}
    if group is not None:
        context["runAsGroup"] = group
    context["allowPrivilegeEscalation"] = False
    if read_only_root:
        context["readOnlyRootFilesystem"] = True
    context["capabilities"] = {"drop": ["ALL"]}
    context["seccompProfile"] = {"type": "RuntimeDefault"}
    return context
