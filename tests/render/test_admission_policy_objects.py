"""Issue 27: the tenant's ValidatingAdmissionPolicy, Binding and params ConfigMap, as both stacks
build them, validate against the OpenAPI schema of the tenant's Kubernetes version
(kubernetes-validate, strict: an unknown or misspelt field is an error), and every CEL expression
in them parses with cel-python."""

from __future__ import annotations

import copy
from typing import Any

import celpy
import pytest

from components.admission_policies import (
    admission_binding,
    admission_params,
    admission_policy,
    rule_definitions,
)
from components.config import validate_models
from components.tenant_specs import tenant_labels
from tests.support.harness import load_stack_config
from tests.support.kube_schemas import builtin_violations, minor


def _objects(stack: str) -> list[tuple[str, dict[str, Any]]]:
    platform = validate_models(load_stack_config(stack)["gpu-platform:platform"])
    rules = rule_definitions()
    found: list[tuple[str, dict[str, Any]]] = []
    for tenant in platform.tenants:
        labels = tenant_labels(tenant.name)
        found += [
            (platform.kubernetes_version, admission_policy(rules, labels)),
            (
                platform.kubernetes_version,
                admission_binding(rules, tenant.admission.mode, ["kube-system"], labels),
            ),
            (platform.kubernetes_version, admission_params(rules, tenant.admission, labels)),
        ]
    return found


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_the_objects_validate_against_the_tenants_kubernetes_schema(stack: str) -> None:
    objects = _objects(stack)
    assert {obj["kind"] for _v, obj in objects} == {
        "ValidatingAdmissionPolicy",
        "ValidatingAdmissionPolicyBinding",
        "ConfigMap",
    }
    for version, obj in objects:
        # admissionregistration.k8s.io/v1 policies are GA (and on) from Kubernetes 1.30.
        assert minor(version) >= (1, 30)
        assert builtin_violations(version, obj) == [], obj["kind"]


def test_the_schema_check_can_fail() -> None:
    version, policy = _objects("lab")[0]
    broken = copy.deepcopy(policy)
    broken["spec"]["validations"][0]["expresion"] = broken["spec"]["validations"][0].pop(
        "expression"
    )
    assert builtin_violations(version, broken)
    broken = copy.deepcopy(policy)
    broken["spec"]["matchConstraints"]["resourceRules"] = "pods"  # a list belongs there
    assert builtin_violations(version, broken)


def test_every_expression_parses() -> None:
    _version, policy = _objects("lab")[0]
    env = celpy.Environment()
    texts = [v["expression"] for v in policy["spec"]["variables"]]
    for validation in policy["spec"]["validations"]:
        texts.append(validation["expression"])
        if "messageExpression" in validation:
            texts.append(validation["messageExpression"])
    assert len(texts) >= 20
    for text in texts:
        env.compile(text)
