"""Issue 27 under mocks: every tenant of both stacks registers the GPU rules' ValidatingAdmission-
Policy, its Binding and its params through its own provider, before HAMi's release and before the
stack's own workloads; the binding leaves out exactly the namespaces HAMi's webhook skips; mode
and ceilings come from the tenant's config."""

from __future__ import annotations

import copy
from collections.abc import Callable
from typing import Any

import pytest

from tests.support.harness import Recording, Registration, evaluate, load_stack_config

TENANT = "gpu-platform:index:GpuTenant"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
RELEASE = "kubernetes:helm.sh/v3:Release"
NAME_LABEL = "kubernetes.io/metadata.name"

Evaluated = Callable[[str, bool], Recording]


@pytest.fixture(scope="module")
def evaluated(recordings: Evaluated) -> Evaluated:
    """The stack files as shipped: the session's evaluations (tests/conftest.py), not four more."""

    def get(stack: str, preview: bool) -> Recording:
        recording = recordings(stack, preview)
        assert recording.error is None, recording.error
        return recording

    return get


@pytest.fixture(params=[("lab", False), ("lab", True), ("prod", False), ("prod", True)],
                ids=["lab-update", "lab-preview", "prod-update", "prod-preview"])  # fmt: skip
def recording(request: pytest.FixtureRequest, evaluated: Evaluated) -> Recording:
    stack, preview = request.param
    return evaluated(stack, preview)


def _tenants(rec: Recording) -> list[str]:
    return [r.name for r in rec.of_type(TENANT)]


def _named(rec: Recording, name: str) -> Registration:
    return rec.named(name)


def _hami(rec: Recording, tenant: str) -> Registration:
    return next(
        r
        for r in rec.of_type(RELEASE)
        if r.name == f"{tenant}-hami" and rec.component_of(r, ":GpuTenant") is not None
    )


def test_every_tenant_registers_the_policy_binding_and_params(recording: Recording) -> None:
    assert _tenants(recording)
    for tenant in _tenants(recording):
        provider = _named(recording, f"{tenant}-provider")
        for suffix, type_ in (
            ("admission-policy", VAP),
            ("admission-binding", BINDING),
            ("admission-limits", CONFIG_MAP),
        ):
            reg = _named(recording, f"{tenant}-{suffix}")
            assert reg.type == type_
            assert reg.provider_urn == provider.urn, (tenant, suffix)
            component = recording.component_of(reg, ":GpuTenant")
            assert component is not None
            assert component.name == tenant
        policy = _named(recording, f"{tenant}-admission-policy").inputs
        binding = _named(recording, f"{tenant}-admission-binding").inputs
        assert binding["spec"]["policyName"] == policy["metadata"]["name"]
        assert len(policy["spec"]["validations"]) >= 10
        assert (
            binding["spec"]["paramRef"]["name"]
            == (_named(recording, f"{tenant}-admission-limits").inputs["metadata"]["name"])
        )


def test_ordered_before_hami_and_before_every_workload(recording: Recording) -> None:
    for tenant in _tenants(recording):
        hami = _hami(recording, tenant)
        before_hami = recording.dependency_closure(hami)
        names = [f"{tenant}-admission-{s}" for s in ("policy", "binding", "limits")]
        parts = [_named(recording, n) for n in names]
        for part in parts:
            assert part.urn in before_hami, (tenant, part.name)
        binding = parts[1]
        assert parts[0].urn in binding.dependencies
        assert parts[2].urn in binding.dependencies


def test_the_declared_workloads_wait_for_the_binding(recording: Recording) -> None:
    found = 0
    for tenant in _tenants(recording):
        binding = _named(recording, f"{tenant}-admission-binding")
        for reg in recording.resources:
            if reg.name.startswith(f"{tenant}-workload-"):
                found += 1
                assert binding.urn in recording.dependency_closure(reg), reg.name
    if recording.stack == "lab":
        assert found >= 1  # the lab declares a sample workload


def test_binding_excludes_what_hamis_webhook_skips(recording: Recording) -> None:
    for tenant in _tenants(recording):
        hami = _hami(recording, tenant)
        whitelist = hami.inputs["values"]["scheduler"]["admissionWebhook"]["whitelistNamespaces"]
        binding = _named(recording, f"{tenant}-admission-binding").inputs
        (expression,) = binding["spec"]["matchResources"]["namespaceSelector"]["matchExpressions"]
        assert expression["key"] == NAME_LABEL
        assert expression["operator"] == "NotIn"
        assert set(expression["values"]) == set(whitelist)
        assert "kube-system" in expression["values"]
        assert "default" not in expression["values"]


def test_mode_and_ceilings_come_from_the_tenant_config(evaluated: Evaluated) -> None:
    lab = evaluated("lab", False)
    for tenant in _tenants(lab):
        binding = _named(lab, f"{tenant}-admission-binding").inputs
        assert binding["spec"]["validationActions"] == ["Deny"]  # the default
    config = copy.deepcopy(load_stack_config("lab"))
    platform: dict[str, Any] = config["gpu-platform:platform"]
    tenant = platform["tenants"][0]
    tenant["admission"] = {
        "mode": "Warn",
        "maxGpuMemoryMiB": 40960,
        "wholeCards": False,
        "privilegedNamespaces": ["node-agents"],
    }
    changed = evaluate("lab", False, config=config)
    assert changed.error is None, changed.error
    name = tenant["name"]
    binding = _named(changed, f"{name}-admission-binding").inputs
    assert binding["spec"]["validationActions"] == ["Warn"]
    params = _named(changed, f"{name}-admission-limits").inputs["data"]
    assert params == {
        "maxGpuMemoryMiB": "40960",
        "wholeCards": "false",
        "privilegedNamespace.node-agents": "true",
        "gpuSharing": "hami",
    }
    others = [t["name"] for t in platform["tenants"][1:]]
    for other in others:
        assert _named(changed, f"{other}-admission-binding").inputs["spec"][
            "validationActions"
        ] == ["Deny"]


@pytest.mark.parametrize(
    ("admission", "key"),
    [
        ({"mode": "deny"}, "mode"),
        ({"mode": "Enforce"}, "mode"),
        ({"mode": "Audit"}, "mode"),
        ({"privilegedNamespaces": ["Node_Agents"]}, "privilegedNamespaces"),
        ({"privilegedNamespaces": ["a", "a"]}, "privilegedNamespaces"),
        ({"maxGpuMemoryMiB": 0}, "maxGpuMemoryMiB"),
        ({"maxGpuMemoryMiB": "20480"}, "maxGpuMemoryMiB"),
        ({"maxGpuMemoryMiB": True}, "maxGpuMemoryMiB"),
        ({"wholeCards": "no"}, "wholeCards"),
        ({"mood": "Deny"}, "mood"),
        ({"maxGpuMemoryMiB": 1}, "memoryMiB"),  # below the lab's declared workload
    ],
)
def test_bad_admission_settings_register_nothing(admission: dict[str, Any], key: str) -> None:
    config = copy.deepcopy(load_stack_config("lab"))
    tenants = config["gpu-platform:platform"]["tenants"]
    index = next(i for i, t in enumerate(tenants) if t.get("workloads"))
    tenants[index]["admission"] = admission
    rec = evaluate("lab", True, config=config)
    assert rec.error is not None
    assert rec.run_error, rec.error
    assert rec.resources == [], "registered before the refusal"
    assert key in rec.error
    assert "admission" in rec.error
