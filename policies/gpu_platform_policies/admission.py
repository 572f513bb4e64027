"""hami-admission-rules: the GPU workload rules every tenant's API server also enforces.

Each rule is defined once, as a CEL expression in ``admission_rules.json`` next to this file. The
program (``components/admission_policies.py``) turns the file into a ValidatingAdmissionPolicy and
Binding per tenant; this module evaluates the same expressions with cel-python on every pod spec
the stack registers (found by shape, ``kube.pod_specs``), so ``pulumi preview`` and the tenant's
API server give the same verdict. Why a data file: the pack runs from its own virtualenv and
cannot import ``components``, and the program must not depend on the pack; a JSON file both read is
the one place neither has to import (docs/policies.md).

What each rule sees, as in the API server (``object``, ``namespaceObject``, ``params``,
``variables``):

* ``object``: the pod (the template's metadata and spec), quantities in Kubernetes' canonical
  form (``cel.canonical_quantity``) and extended resources in ``limits`` as the API server's
  defaulting leaves them (requests given alone are limits too);
* ``namespaceObject``: the Namespace the stack registers for the tenant (labels included), else
  one with only ``kubernetes.io/metadata.name``;
* ``params``: the tenant's ceilings ConfigMap (``paramsConfigMap`` in the file) when the stack
  registers it, else null (no ceilings);
* a pod in a namespace the tenant's binding excludes is not judged, as the API server does not
  send it to the policy.

ResourceClaims and ResourceClaimTemplates the stack declares are judged the same way by the
file's ``claimPolicy`` rules (the tenant's second ValidatingAdmissionPolicy), ``object`` being
the claim as the API server stores it (whole numbers as int64: ``admitted_claim``).

Unknown values (preview) leave a pod spec unjudged. An expression that fails to evaluate is a
violation (the policy's ``failurePolicy`` is Fail).
"""

from __future__ import annotations

import functools
import json
from dataclasses import dataclass
from pathlib import Path
from typing import Any, Final

from gpu_platform_policies.cel import (
    EvaluationError,
    canonical_quantity,
    cel_map,
    compile_expression,
    evaluate,
    to_cel,
)
from gpu_platform_policies.common import Violation
from gpu_platform_policies.kube import is_workload, may_hold_pod_specs, pod_specs
from gpu_platform_policies.model import Resource, Stack
from gpu_platform_policies.props import UNKNOWN, contains_unknown, get
from gpu_platform_policies.quota import namespace_of

RULES_FILE: Final = Path(__file__).with_name("admission_rules.json")
CONFIG_MAP_TYPE: Final = "kubernetes:core/v1:ConfigMap"
NAMESPACE_TYPE: Final = "kubernetes:core/v1:Namespace"
BINDING_TYPE: Final = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
NAME_LABEL: Final = "kubernetes.io/metadata.name"
CLAIM_SECTION: Final = "claimPolicy"
CLAIM_TYPES: Final = {
    "kubernetes:resource.k8s.io/v1:ResourceClaim": "ResourceClaim",
    "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate": "ResourceClaimTemplate",
}


@dataclass(frozen=True)
class Rule:
    id: str
    expression: str
    message: str
    message_expression: str | None = None


@dataclass(frozen=True)
class RuleSet:
    policy_name: str
    params_name: str
    params_namespace: str
    variables: tuple[tuple[str, str], ...]
    rules: tuple[Rule, ...]


def parse_rules(document: dict[str, Any], section: str | None = None) -> RuleSet:
    """The pod policy of the rules file, or with ``section`` (``claimPolicy``) that policy."""
    params = document["paramsConfigMap"]
    policy = document if section is None else document[section]
    return RuleSet(
        policy_name=policy["policyName"],
        params_name=params["name"],
        params_namespace=params["namespace"],
        variables=tuple((v["name"], v["expression"]) for v in policy["variables"]),
        rules=tuple(
            Rule(r["id"], r["expression"], r["message"], r.get("messageExpression"))
            for r in policy["rules"]
        ),
    )


@functools.cache
def load_rules() -> RuleSet:
    """The pod rules (``admission_rules.json``)."""
    return parse_rules(json.loads(RULES_FILE.read_text(encoding="utf-8")))


@functools.cache
def load_claim_rules() -> RuleSet:
    """The ResourceClaim and ResourceClaimTemplate rules (``claimPolicy`` of the same file)."""
    return parse_rules(json.loads(RULES_FILE.read_text(encoding="utf-8")), CLAIM_SECTION)


@functools.lru_cache(maxsize=512)
def _program(text: str) -> Any:
    return compile_expression(text)


def evaluate_rules(
    rules: RuleSet, pod: dict[str, Any], namespace: dict[str, Any], params: dict[str, Any] | None
) -> list[tuple[str, str]]:
    """``(rule id, message)`` of every rule the pod breaks, the way the API server evaluates a
    ValidatingAdmissionPolicy: variables in order (each may use the ones before), then every
    validation; an expression that fails to evaluate is reported as a violation."""
    activation: dict[str, Any] = {
        "object": to_cel(pod),
        "namespaceObject": to_cel(namespace),
        "params": to_cel(params),
    }
    variables: dict[str, Any] = {}
    failures: list[tuple[str, str]] = []
    for name, expression in rules.variables:
        try:
            variables[name] = evaluate(
                _program(expression), {**activation, "variables": cel_map(variables)}
            )
        except EvaluationError as error:
            return [(f"variable {name}", f"variable {name} does not evaluate: {error}")]
    activation["variables"] = cel_map(variables)
    for rule in rules.rules:
        try:
            passed = bool(evaluate(_program(rule.expression), activation))
        except EvaluationError as error:
            failures.append((rule.id, f"{rule.message} (the rule did not evaluate: {error})"))
            continue
        if passed:
            continue
        message = rule.message
        if rule.message_expression:
            try:
                message = str(evaluate(_program(rule.message_expression), activation))
            except EvaluationError:
                message = rule.message
        failures.append((rule.id, message))
    return failures


# ------------------------------------------------------------------------- the pod as admitted


def _canonical(value: Any) -> Any:
    if isinstance(value, bool):
        return value
    if isinstance(value, float) and value.is_integer():
        value = int(value)
    text = str(value)
    try:
        return canonical_quantity(text)
    except ValueError:
        return text  # not a quantity: the API server refuses the pod; the rules see it as is


def _admitted_container(container: Any) -> Any:
    if not isinstance(container, dict):
        return container
    resources = container.get("resources")
    if not isinstance(resources, dict):
        return container
    raw_limits, raw_requests = resources.get("limits"), resources.get("requests")
    limits: dict[str, Any] = raw_limits if isinstance(raw_limits, dict) else {}
    requests: dict[str, Any] = raw_requests if isinstance(raw_requests, dict) else {}
    # Extended resources given only as requests count as limits (the API server requires them
    # equal, and defaults requests from limits).
    merged = {
        **{k: v for k, v in requests.items() if "/" in k and not k.startswith("kubernetes.io/")},
        **limits,
    }
    admitted = dict(resources)
    admitted["limits"] = {k: _canonical(v) for k, v in merged.items()}
    admitted["requests"] = {k: _canonical(v) for k, v in {**requests, **merged}.items()}
    return {**container, "resources": admitted}


def admitted_pod(spec: dict[str, Any], metadata: Any, namespace: str) -> dict[str, Any]:
    """The pod as a ValidatingAdmissionPolicy sees it, from a pod spec the stack declares."""
    pod_spec = dict(spec)
    for key in ("containers", "initContainers"):
        items = spec.get(key)
        if isinstance(items, list):
            pod_spec[key] = [_admitted_container(c) for c in items]
    meta: dict[str, Any] = {"namespace": namespace}
    if isinstance(metadata, dict):
        for key in ("labels", "annotations", "name"):
            if isinstance(metadata.get(key), dict | str):
                meta[key] = metadata[key]
    return {"apiVersion": "v1", "kind": "Pod", "metadata": meta, "spec": pod_spec}


# ------------------------------------------------------------------------------------ the stack


def _tenant_params(stack: Stack, rules: RuleSet) -> dict[Any, dict[str, Any] | None]:
    found: dict[Any, dict[str, Any] | None] = {}
    for resource in stack.of_type(CONFIG_MAP_TYPE):
        if resource.k8s_name != rules.params_name:
            continue
        if resource.namespace != rules.params_namespace:
            continue
        data = get(resource.props, "data")
        found[stack.tenant_of(resource)] = (
            None if contains_unknown(data) else {"data": data if isinstance(data, dict) else {}}
        )
    return found


def _tenant_exclusions(stack: Stack, rules: RuleSet) -> dict[Any, set[str] | None]:
    """Namespaces each tenant's binding leaves out (``NotIn`` on the namespace name)."""
    found: dict[Any, set[str] | None] = {}
    for resource in stack.of_type(BINDING_TYPE):
        if get(resource.props, "spec", "policyName") != rules.policy_name:
            continue
        expressions = get(
            resource.props, "spec", "matchResources", "namespaceSelector", "matchExpressions"
        )
        if contains_unknown(expressions):
            found[stack.tenant_of(resource)] = None
            continue
        excluded: set[str] = set()
        for expression in expressions if isinstance(expressions, list) else []:
            if (
                isinstance(expression, dict)
                and expression.get("key") == NAME_LABEL
                and expression.get("operator") == "NotIn"
                and isinstance(expression.get("values"), list)
            ):
                excluded.update(v for v in expression["values"] if isinstance(v, str))
        found[stack.tenant_of(resource)] = excluded
    return found


def _namespace_object(stack: Stack, tenant: Any, name: str) -> dict[str, Any]:
    for resource in stack.of_type(NAMESPACE_TYPE):
        if resource.k8s_name == name and stack.tenant_of(resource) == tenant:
            labels = resource.labels
            return {"metadata": {"name": name, "labels": {NAME_LABEL: name, **labels}}}
    return {"metadata": {"name": name, "labels": {NAME_LABEL: name}}}


def check_admission(
    stack: Stack, rules: RuleSet | None = None, claim_rules: RuleSet | None = None
) -> list[Violation]:
    """All hami-admission-rules violations of a stack: its pod specs by the pod rules, its
    ResourceClaims and ResourceClaimTemplates by the claim rules."""
    rules = rules or load_rules()
    claim_rules = claim_rules or load_claim_rules()
    params = _tenant_params(stack, rules)
    exclusions = _tenant_exclusions(stack, rules)
    claim_exclusions = _tenant_exclusions(stack, claim_rules)
    violations: list[Violation] = []
    for resource in stack:
        if resource.type in CLAIM_TYPES:
            violations.extend(_check_claim(stack, resource, claim_rules, params, claim_exclusions))
        if not may_hold_pod_specs(resource.type):
            continue
        violations.extend(_check_resource(stack, resource, rules, params, exclusions))
    return violations


def integral_numbers(value: Any) -> Any:
    """JSON numbers as the API server stores them: a count of ``2.0`` (Pulumi sends floats) is
    the int64 2."""
    if isinstance(value, dict):
        return {k: integral_numbers(v) for k, v in value.items()}
    if isinstance(value, list):
        return [integral_numbers(v) for v in value]
    if isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def admitted_claim(resource_type: str, props: Any, namespace: str) -> dict[str, Any]:
    """A ResourceClaim or ResourceClaimTemplate as a ValidatingAdmissionPolicy sees it."""
    spec = get(props, "spec")
    metadata = get(props, "metadata")
    meta: dict[str, Any] = {"namespace": namespace}
    if isinstance(metadata, dict) and isinstance(metadata.get("name"), str):
        meta["name"] = metadata["name"]
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": CLAIM_TYPES[resource_type],
        "metadata": meta,
        "spec": integral_numbers(spec if isinstance(spec, dict) else {}),
    }


def _check_claim(
    stack: Stack,
    resource: Resource,
    rules: RuleSet,
    params: dict[Any, dict[str, Any] | None],
    exclusions: dict[Any, set[str] | None],
) -> list[Violation]:
    tenant = stack.tenant_of(resource)
    namespace = resource.namespace if resource.namespace is not None else "default"
    if tenant is UNKNOWN or not isinstance(namespace, str):
        return []
    if contains_unknown(get(resource.props, "spec")):
        return []  # preview: judged once the values are known
    excluded = exclusions.get(tenant, set())
    if excluded is None or namespace in excluded:
        return []
    if tenant in params and params[tenant] is None:
        return []
    claim = admitted_claim(resource.type, resource.props, namespace)
    return [
        Violation(f"{resource.describe()}: {rule_id}: {message}", resource.urn)
        for rule_id, message in evaluate_rules(
            rules, claim, _namespace_object(stack, tenant, namespace), params.get(tenant)
        )
    ]


def _check_resource(
    stack: Stack,
    resource: Resource,
    rules: RuleSet,
    params: dict[Any, dict[str, Any] | None],
    exclusions: dict[Any, set[str] | None],
) -> list[Violation]:
    found: list[Violation] = []
    refs = pod_specs(resource)
    if not refs:
        return found
    tenant = stack.tenant_of(resource)
    namespace = namespace_of(resource)
    if tenant is UNKNOWN or not isinstance(namespace, str):
        return found
    excluded = exclusions.get(tenant, set())
    if excluded is None or namespace in excluded:
        return found
    if tenant in params and params[tenant] is None:
        return found  # ceilings unknown during preview
    tenant_params = params.get(tenant)
    for ref in refs:
        if not isinstance(ref.spec, dict) or contains_unknown(ref.spec):
            continue
        if contains_unknown(get(ref.metadata, "labels")):
            continue
        pod = admitted_pod(ref.spec, ref.metadata, namespace)
        where = resource.describe() + (
            f" ({ref.where})" if ref.where and not is_workload(resource.type) else ""
        )
        for rule_id, message in evaluate_rules(
            rules, pod, _namespace_object(stack, tenant, namespace), tenant_params
        ):
            found.append(Violation(f"{where}: {rule_id}: {message}", resource.urn))
    return found
