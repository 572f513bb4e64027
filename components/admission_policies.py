"""The tenant's in-cluster GPU rules: a ValidatingAdmissionPolicy, its Binding and its params.

The rules are the policy pack's (``policies/gpu_platform_policies/admission_rules.json``: one CEL
expression per rule, which the pack's ``hami-admission-rules`` policy evaluates at preview). Here
they become objects the tenant's API server evaluates itself on every pod it admits
(admissionregistration.k8s.io/v1, GA since Kubernetes 1.30): no webhook, nothing on the workers,
so the rules hold while workers or Konnectivity are down (unlike HAMi's own webhook).

* **Policy** (cluster-scoped): matches pod CREATE; ``variables`` and ``validations`` as defined
  in the rules file; ``paramKind`` v1 ConfigMap for the tenant's ceilings; ``failurePolicy: Fail``
  (an expression that cannot be evaluated refuses the pod rather than letting it through).
* **Binding**: the tenant's mode as ``validationActions`` (``Deny`` or ``Warn``), the params
  ConfigMap (``parameterNotFoundAction: Deny``), and the namespaces HAMi's webhook skips left
  out, so system pods (the CNI, HAMi itself, the GPU Operator's validators, which ask for
  ``nvidia.com/gpu``) are never gated. A missing params ConfigMap is a configuration error, not
  a rule failure: the API server then refuses **every** pod of every bound namespace, in either
  mode (k8s.io/apiserver v0.35.7 pkg/admission/plugin/policy/generic/policy_dispatcher.go:337-343
  and :377-378 add it to the denied decisions; validating/dispatcher.go:232-252 applies
  ``validationActions`` only to CEL decisions). Chosen on purpose: deleting the ConfigMap (only
  the tenant's admin can, it lives in ``kube-system``) must not switch the rules off, and
  ``pulumi up`` re-creates it; ``Allow`` would skip the whole policy instead. The pods' own
  ``hami.io/webhook=ignore`` label is not an exclusion here: a GPU pod so labelled is refused
  (rule ``hami-webhook-not-skipped``).
* **Params** (``kube-system``): ``maxGpuMemoryMiB`` and ``wholeCards`` from ``tenants[].admission``
  (a key left out means no ceiling), and ``privilegedNamespace.<name>: "true"`` for each of its
  ``privilegedNamespaces`` (one key per namespace: the rules need no string splitting, which
  cel-python, the pack's evaluator, lacks); the tenant's ``gpuSharing`` and, for ``dra``,
  ``deviceClass.<name>: "true"`` for each DeviceClass the platform gives it and
  ``maxDevicesPerRequest`` (the most cards one of its nodes has: a claim's cards come from one
  node).
* **Claim policy and binding** (``claimPolicy`` in the rules file): ResourceClaims and
  ResourceClaimTemplates (resource.k8s.io/v1) on CREATE and UPDATE, with the same params.
  A policy of its own because the pod policy's variables read ``object.spec.containers``, which
  a claim lacks, and because its binding leaves no namespace out: no system component of a
  tenant creates claims, and an ``adminAccess`` claim in ``kube-system`` would reach every card
  as well as one anywhere else (docs/dra.md, admission).

Pure builders: no Pulumi here, one small function per object, unit-tested.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from components.config import AdmissionSettings, Tenant

RULES_FILE: Final = (
    Path(__file__).resolve().parents[1]
    / "policies"
    / "gpu_platform_policies"
    / "admission_rules.json"
)
API_VERSION: Final = "admissionregistration.k8s.io/v1"
NAME_LABEL: Final = "kubernetes.io/metadata.name"
MODES: Final = ("Deny", "Warn")
PRIVILEGED_NAMESPACE_KEY: Final = "privilegedNamespace."


DEVICE_CLASS_KEY: Final = "deviceClass."
SHARING_MODES: Final = ("hami", "dra")
# The resources each policy judges (resource.k8s.io/v1 is the API a dra tenant serves:
# components.kubernetes_versions.dra_problem).
POD_RULES: Final = ({"apiGroups": [""], "apiVersions": ["v1"], "resources": ["pods"]},)
CLAIM_RULES: Final = (
    {
        "apiGroups": ["resource.k8s.io"],
        "apiVersions": ["v1"],
        "resources": ["resourceclaims", "resourceclaimtemplates"],
    },
)


@dataclass(frozen=True)
class RuleDefinitions:
    """The shared rules file, as read: one policy (pods, or claims and their templates)."""

    policy_name: str
    params_name: str
    params_namespace: str
    variables: tuple[Mapping[str, str], ...]
    rules: tuple[Mapping[str, str], ...]
    resource_rules: tuple[Mapping[str, Any], ...] = POD_RULES
    operations: tuple[str, ...] = ("CREATE",)


@dataclass(frozen=True)
class DeviceSharing:
    """What the params say about how the tenant shares its GPUs: ``mode`` (``gpuSharing``),
    the DeviceClasses its claims may name and the most cards one request may ask (dra only)."""

    mode: str = "hami"
    device_classes: tuple[str, ...] = ()
    max_devices_per_request: int | None = None

    def __post_init__(self) -> None:
        if self.mode not in SHARING_MODES:
            raise ValueError(f"gpuSharing must be one of {', '.join(SHARING_MODES)}")
        if self.mode == "hami" and (self.device_classes or self.max_devices_per_request):
            raise ValueError("a hami tenant has no DeviceClasses")


@functools.cache
def rule_definitions(path: Path = RULES_FILE) -> RuleDefinitions:
    """The pod policy of the shared rules file."""
    document = json.loads(path.read_text(encoding="utf-8"))
    return RuleDefinitions(
        policy_name=document["policyName"],
        params_name=document["paramsConfigMap"]["name"],
        params_namespace=document["paramsConfigMap"]["namespace"],
        variables=tuple(document["variables"]),
        rules=tuple(document["rules"]),
    )


@functools.cache
def claim_rule_definitions(path: Path = RULES_FILE) -> RuleDefinitions:
    """The claim policy of the shared rules file (``claimPolicy``): same params ConfigMap."""
    document = json.loads(path.read_text(encoding="utf-8"))
    claims = document["claimPolicy"]
    return RuleDefinitions(
        policy_name=claims["policyName"],
        params_name=document["paramsConfigMap"]["name"],
        params_namespace=document["paramsConfigMap"]["namespace"],
        variables=tuple(claims["variables"]),
        rules=tuple(claims["rules"]),
        resource_rules=CLAIM_RULES,
        # CREATE only. A claim's spec is immutable (kubernetes v1.35.0 pkg/apis/resource/
        # validation/validation.go:617-624), so an UPDATE brings no new request to judge, while
        # Kubernetes itself updates every allocated claim: the scheduler adds the
        # delete-protection finalizer (pkg/scheduler/framework/plugins/dynamicresources/
        # dynamicresources.go:1194-1196) and the resourceclaim controller removes it
        # (pkg/controller/resourceclaim/controller.go:882-885, 903-904). Judged against params
        # that changed since (gpuSharing dra -> hami, Warn -> Deny, fewer cards per node), those
        # updates would be refused and the claims never finish deleting.
        operations=("CREATE",),
    )


def _validation(rule: Mapping[str, str]) -> dict[str, Any]:
    validation: dict[str, Any] = {
        "expression": rule["expression"],
        "message": f"{rule['id']}: {rule['message']}",
        "reason": "Invalid",
    }
    if rule.get("messageExpression"):
        validation["messageExpression"] = f"'{rule['id']}: ' + ({rule['messageExpression']})"
    return validation


def admission_policy(definitions: RuleDefinitions, labels: Mapping[str, str]) -> dict[str, Any]:
    """The ValidatingAdmissionPolicy with every rule of one policy of the shared file."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicy",
        "metadata": {"name": definitions.policy_name, "labels": dict(labels)},
        "spec": {
            "failurePolicy": "Fail",
            "paramKind": {"apiVersion": "v1", "kind": "ConfigMap"},
            "matchConstraints": {
                "resourceRules": [
                    {
                        "apiGroups": list(rule["apiGroups"]),
                        "apiVersions": list(rule["apiVersions"]),
                        "operations": list(definitions.operations),
                        "resources": list(rule["resources"]),
                    }
                    for rule in definitions.resource_rules
                ]
            },
            "variables": [
                {"name": v["name"], "expression": v["expression"]} for v in definitions.variables
            ],
            "validations": [_validation(rule) for rule in definitions.rules],
        },
    }


def validation_actions(mode: str) -> list[str]:
    """``Deny`` refuses, ``Warn`` admits with a warning to the client (``validationActions``).
    ``Audit`` is not offered: it only annotates audit events, and no tenant API server here has
    an audit backend (apiserver v0.35.7 validating/dispatcher.go:243-245, :311-329)."""
    if mode not in MODES:
        raise ValueError(f"admission mode must be one of {', '.join(MODES)}, got {mode!r}")
    return [mode]


def admission_binding(
    definitions: RuleDefinitions,
    mode: str,
    excluded_namespaces: Sequence[str],
    labels: Mapping[str, str],
) -> dict[str, Any]:
    """The binding: the tenant's mode, its params, every namespace but the excluded ones."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ValidatingAdmissionPolicyBinding",
        "metadata": {"name": definitions.policy_name, "labels": dict(labels)},
        "spec": {
            "policyName": definitions.policy_name,
            "validationActions": validation_actions(mode),
            "paramRef": {
                "name": definitions.params_name,
                "namespace": definitions.params_namespace,
                "parameterNotFoundAction": "Deny",
            },
            "matchResources": {"namespaceSelector": _namespaces_but(excluded_namespaces)},
        },
    }


def _namespaces_but(excluded: Sequence[str]) -> dict[str, Any]:
    """Every namespace but ``excluded`` (none left out: ``{}``, as ``NotIn`` needs values)."""
    if not excluded:
        return {}
    return {
        "matchExpressions": [
            {"key": NAME_LABEL, "operator": "NotIn", "values": sorted(set(excluded))}
        ]
    }


def admission_params(
    definitions: RuleDefinitions,
    settings: AdmissionSettings,
    labels: Mapping[str, str],
    sharing: DeviceSharing = DeviceSharing(),
) -> dict[str, Any]:
    """The tenant's ceilings and GPU sharing as the policies' params ConfigMap."""
    data: dict[str, str] = {"wholeCards": "true" if settings.whole_cards else "false"}
    if settings.max_gpu_memory_mib is not None:
        data["maxGpuMemoryMiB"] = str(settings.max_gpu_memory_mib)
    for namespace in settings.privileged_namespaces:
        data[PRIVILEGED_NAMESPACE_KEY + namespace] = "true"
    data["gpuSharing"] = sharing.mode
    for device_class in sharing.device_classes:
        data[DEVICE_CLASS_KEY + device_class] = "true"
    if sharing.max_devices_per_request is not None:
        data["maxDevicesPerRequest"] = str(sharing.max_devices_per_request)
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": definitions.params_name,
            "namespace": definitions.params_namespace,
            "labels": dict(labels),
        },
        "data": data,
    }


def device_sharing(tenant: Tenant, device_classes: Sequence[str]) -> DeviceSharing:
    """What the tenant's params say about its GPU sharing: for ``dra``, the DeviceClasses the
    environment's driver registers (``Substrate.dra_device_classes``) and the most cards one of
    its nodes has (all devices of a claim are allocated on the pod's one node, so a request for
    more could never be allocated)."""
    if tenant.gpu_sharing != "dra":
        return DeviceSharing()
    most = max(sum(count for _, count in pool.resolved_cards()) for pool in tenant.worker_pools)
    return DeviceSharing("dra", tuple(sorted(set(device_classes))), most)
