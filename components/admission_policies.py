"""The tenant's in-cluster GPU rules: a ValidatingAdmissionPolicy, its Binding and its params.

The rules are the policy pack's (``policies/gpu_platform_policies/admission_rules.json``: one CEL
expression per rule, which the pack's ``hami-admission-rules`` policy evaluates at preview). Here
they become objects the tenant's API server evaluates itself on every pod it admits
(admissionregistration.k8s.io/v1, GA since Kubernetes 1.30): no webhook, nothing on the workers,
so the rules hold while workers or Konnectivity are down (unlike HAMi's own webhook).

* **Policy** (cluster-scoped): matches pod CREATE; ``variables`` and ``validations`` as defined
  in the rules file; ``paramKind`` v1 ConfigMap for the tenant's ceilings; ``failurePolicy: Fail``
  (an expression that cannot be evaluated refuses the pod rather than letting it through).
* **Binding**: the tenant's mode as ``validationActions`` (``Deny``, ``Warn`` or ``Audit``), the
  params ConfigMap (``parameterNotFoundAction: Deny``: a deleted ConfigMap refuses GPU rule
  checks instead of skipping them), and the namespaces HAMi's webhook skips left out, so system
  pods (the CNI, HAMi itself, the GPU Operator's validators, which ask for ``nvidia.com/gpu``)
  are never gated. The pods' own ``hami.io/webhook=ignore`` label is not an exclusion here: a GPU
  pod so labelled is refused (rule ``hami-webhook-not-skipped``).
* **Params** (``kube-system``): ``maxGpuMemoryMiB`` and ``wholeCards`` from ``tenants[].admission``
  (a key left out means no ceiling).

Pure builders: no Pulumi here, one small function per object, unit-tested.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from components.config import AdmissionSettings

RULES_FILE: Final = (
    Path(__file__).resolve().parents[1]
    / "policies"
    / "gpu_platform_policies"
    / "admission_rules.json"
)
API_VERSION: Final = "admissionregistration.k8s.io/v1"
NAME_LABEL: Final = "kubernetes.io/metadata.name"
MODES: Final = ("Deny", "Warn", "Audit")


@dataclass(frozen=True)
class RuleDefinitions:
    """The shared rules file, as read."""

    policy_name: str
    params_name: str
    params_namespace: str
    variables: tuple[Mapping[str, str], ...]
    rules: tuple[Mapping[str, str], ...]


@functools.cache
def rule_definitions(path: Path = RULES_FILE) -> RuleDefinitions:
    document = json.loads(path.read_text(encoding="utf-8"))
    return RuleDefinitions(
        policy_name=document["policyName"],
        params_name=document["paramsConfigMap"]["name"],
        params_namespace=document["paramsConfigMap"]["namespace"],
        variables=tuple(document["variables"]),
        rules=tuple(document["rules"]),
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
    """The ValidatingAdmissionPolicy with every rule of the shared file."""
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
                        "apiGroups": [""],
                        "apiVersions": ["v1"],
                        "operations": ["CREATE"],
                        "resources": ["pods"],
                    }
                ]
            },
            "variables": [
                {"name": v["name"], "expression": v["expression"]} for v in definitions.variables
            ],
            "validations": [_validation(rule) for rule in definitions.rules],
        },
    }


def validation_actions(mode: str) -> list[str]:
    """``Deny`` refuses, ``Warn`` admits with a warning to the client, ``Audit`` admits and
    records the failure in the audit log (``validationActions``; Deny and Warn never together)."""
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
            "matchResources": {
                "namespaceSelector": {
                    "matchExpressions": [
                        {
                            "key": NAME_LABEL,
                            "operator": "NotIn",
                            "values": sorted(set(excluded_namespaces)),
                        }
                    ]
                }
            },
        },
    }


def admission_params(
    definitions: RuleDefinitions, settings: AdmissionSettings, labels: Mapping[str, str]
) -> dict[str, Any]:
    """The tenant's ceilings as the policy's params ConfigMap."""
    data: dict[str, str] = {"wholeCards": "true" if settings.whole_cards else "false"}
    if settings.max_gpu_memory_mib is not None:
        data["maxGpuMemoryMiB"] = str(settings.max_gpu_memory_mib)
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
