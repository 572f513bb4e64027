"""The pack as a whole: its policies, the per-stack policy config files, its entry point."""

from __future__ import annotations

import ast
import json
from pathlib import Path
from typing import Any

import jsonschema
import pytest
import yaml
from gpu_platform_policies.pack import POLICY_NAMES, build_policies
from pulumi_policy import EnforcementLevel, Policy, ResourceValidationPolicy, StackValidationPolicy

from tests.policies.recorded import load_policy_config, reconcile

POLICIES_DIR = Path(__file__).resolve().parents[2] / "policies"
STACK_POLICIES = {
    "hami-capacity-fit",
    "dra-claims",
    "hami-quota-fit",
    "hami-webhook-coverage",
    "hami-admission-rules",
    "tenant-datastore-separation",
    "tenant-webhook-path",
    "hami-scheduler-version",
}
RESOURCE_POLICIES = {"hami-gpu-requests", "lab-only-components"}
# The pack's virtualenv has pulumi and pulumi-policy only: the standard library, pulumi-policy and
# the pack's own package, never the program's ``components``.
ALLOWED_IMPORTS = {
    "__future__",
    "celpy",
    "collections",
    "dataclasses",
    "fractions",
    "functools",
    "pathlib",
    "itertools",
    "json",
    "re",
    "struct",
    "typing",
    "gpu_platform_policies",
    "pulumi_policy",
}


def by_name() -> dict[str, Policy]:
    return {p.name: p for p in build_policies()}


def test_the_pack_has_the_policies_of_issues_7_and_26() -> None:
    policies = by_name()
    assert set(policies) == STACK_POLICIES | RESOURCE_POLICIES == set(POLICY_NAMES)
    for name in STACK_POLICIES:
        assert isinstance(policies[name], StackValidationPolicy), name
    for name in RESOURCE_POLICIES:
        assert isinstance(policies[name], ResourceValidationPolicy), name


def test_every_policy_is_mandatory_by_default_and_says_how_to_fix_it() -> None:
    for policy in build_policies():
        assert policy.enforcement_level == EnforcementLevel.MANDATORY, policy.name
        assert policy.remediation_steps, policy.name
        assert policy.description, policy.name


def test_config_schemas() -> None:
    policies = by_name()
    schema = policies["tenant-datastore-separation"].config_schema
    assert schema is not None
    assert schema.properties["requireDedicatedDataStore"]["default"] is False
    for name in ("tenant-webhook-path", "lab-only-components"):
        schema = policies[name].config_schema
        assert schema is not None
        assert schema.properties["environment"]["enum"] == ["lab", "prod"]
        assert schema.properties["environment"]["default"] == "lab"


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_policy_config_files_are_valid_for_the_cli(stack: str) -> None:
    config = load_policy_config(stack)
    policies = by_name()
    levels = {level.value for level in EnforcementLevel}
    for name, value in config.items():
        assert name in policies, f"{stack}.json names unknown policy {name}"
        if isinstance(value, str):
            assert value in levels
            continue
        assert isinstance(value, dict)
        properties = {k: v for k, v in value.items() if k != "enforcementLevel"}
        assert value.get("enforcementLevel", "mandatory") in levels
        schema = policies[name].config_schema
        assert properties == {} or schema is not None, name
        if schema is not None:
            # What the CLI checks (pkg/resource/analyzer/config.go: convertSchema + gojsonschema).
            jsonschema.validate(properties, {"type": "object", "properties": schema.properties})
            assert set(properties) <= set(schema.properties), name


def settings(stack: str) -> dict[str, Any]:
    return reconcile(build_policies(), load_policy_config(stack))


def test_lab_config() -> None:
    lab = settings("lab")
    assert lab["hami-scheduler-version"].level == EnforcementLevel.ADVISORY
    assert lab["lab-only-components"].properties["environment"] == "lab"
    assert lab["tenant-webhook-path"].properties["environment"] == "lab"
    assert lab["tenant-datastore-separation"].properties["requireDedicatedDataStore"] is False
    for name in POLICY_NAMES:
        if name != "hami-scheduler-version":
            assert lab[name].level == EnforcementLevel.MANDATORY, name


def test_prod_config() -> None:
    prod = settings("prod")
    assert all(prod[name].level == EnforcementLevel.MANDATORY for name in POLICY_NAMES)
    assert prod["lab-only-components"].properties["environment"] == "prod"
    assert prod["tenant-webhook-path"].properties["environment"] == "prod"
    assert prod["tenant-datastore-separation"].properties["requireDedicatedDataStore"] is True
    # platform.md §3: with failurePolicy Fail the system namespaces, the CNI's and HAMi's own
    # stay ungated, or a down webhook keeps Calico (and so HAMi itself) from coming back.
    assert set(prod["tenant-webhook-path"].properties["systemNamespaces"]) >= {
        "kube-system",
        "tigera-operator",
        "calico-system",
        "hami-system",
    }


def test_prod_config_requires_every_namespace_the_program_keeps_from_hamis_webhook() -> None:
    """The pack checks the namespaces its config lists: one the program whitelists but the
    config leaves out (the GPU Operator's, whose driver and toolkit pods HAMi's webhook would
    otherwise hold while HAMi waits for the toolkit) could be dropped from the values unseen."""
    from components.prod.substrate import ProdSubstrate
    from components.tenant_values import (
        GPU_OPERATOR_NAMESPACE,
        TIGERA_OPERATOR_NAMESPACE,
        webhook_excluded_namespaces,
    )

    required = set(settings("prod")["tenant-webhook-path"].properties["systemNamespaces"])
    whitelisted = set(webhook_excluded_namespaces(ProdSubstrate().tenant_system_namespaces))
    assert required <= whitelisted
    assert {GPU_OPERATOR_NAMESPACE, TIGERA_OPERATOR_NAMESPACE, "hami-system"} <= required


def test_main_only_builds_the_policy_pack() -> None:
    tree = ast.parse((POLICIES_DIR / "__main__.py").read_text())
    body = [node for node in tree.body if not isinstance(node, ast.Import | ast.ImportFrom)]
    docstring, call = body
    assert isinstance(docstring, ast.Expr)
    assert isinstance(docstring.value, ast.Constant)
    assert isinstance(call, ast.Expr)
    assert isinstance(call.value, ast.Call)
    assert isinstance(call.value.func, ast.Name)
    assert call.value.func.id == "PolicyPack"
    imports = [n for n in tree.body if isinstance(n, ast.ImportFrom)]
    assert {n.module for n in imports} == {"pulumi_policy", "gpu_platform_policies.pack"}


def test_the_pack_never_imports_the_program() -> None:
    for path in [
        POLICIES_DIR / "__main__.py",
        *(POLICIES_DIR / "gpu_platform_policies").glob("*.py"),
    ]:
        for node in ast.walk(ast.parse(path.read_text())):
            if isinstance(node, ast.Import):
                names = [alias.name for alias in node.names]
            elif isinstance(node, ast.ImportFrom):
                names = [node.module or ""]
            else:
                continue
            for name in names:
                root = name.split(".")[0]
                assert root in ALLOWED_IMPORTS, f"{path.name} imports {name}"


def test_policy_project_file() -> None:
    project = yaml.safe_load((POLICIES_DIR / "PulumiPolicy.yaml").read_text())
    assert project["runtime"]["name"] == "python"
    assert project["runtime"]["options"]["virtualenv"] == ".venv"
    assert project["version"]
    requirements = (POLICIES_DIR / "requirements.txt").read_text()
    assert "pulumi-policy==1.21.0" in requirements


def test_policy_config_files_are_json_objects() -> None:
    for stack in ("lab", "prod"):
        assert isinstance(json.loads((POLICIES_DIR / "config" / f"{stack}.json").read_text()), dict)
