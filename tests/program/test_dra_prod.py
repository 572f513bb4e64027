"""A prod stack with team-vision switched to ``gpuSharing: dra`` (issue 43, point 3), under
mocks: the program evaluates; that tenant's GPU Operator runs the GPUCluster (NVIDIA's DRA
driver) and not the ClusterPolicy, HAMi's device plugin is off there only, its workload is a
ResourceClaimTemplate of NVIDIA's DeviceClass and a Deployment using it, and the policy pack
passes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.policies.recorded import blocking, load_policy_config, run_pack
from tests.support.harness import Recording, evaluate, load_stack_config
from tests.support.kube_schemas import builtin_violations
from tests.unit.test_dra_config import dra_prod

PLATFORM_KEY = "gpu-platform:platform"
VERSION = "v1.35.0"
TEMPLATE = "team-vision-workload-default-whole-card-claims"


@pytest.fixture(scope="module")
def recording() -> Recording:
    config = copy.deepcopy(load_stack_config("prod"))
    config[PLATFORM_KEY] = dra_prod()
    return evaluate("prod", False, config=config)


def _values(recording: Recording, name: str) -> dict[str, Any]:
    (release,) = [r for r in recording.resources if r.name == name]
    values: dict[str, Any] = release.inputs["values"]
    return values


def test_the_stack_evaluates(recording: Recording) -> None:
    assert recording.error is None, recording.error


def test_the_dra_tenants_operator_runs_the_gpu_cluster_only(recording: Recording) -> None:
    dra = _values(recording, "team-vision-gpu-operator")
    assert dra["gpuCluster"] == {"deployCR": True}
    assert dra["clusterPolicy"] == {"deployCR": False}
    for other in ("team-llm-gpu-operator", "team-speech-gpu-operator"):
        values = _values(recording, other)
        assert "gpuCluster" not in values, other
        assert values["toolkit"]["enabled"] is True, other


def test_hamis_device_plugin_is_off_in_the_dra_tenant_only(recording: Recording) -> None:
    assert _values(recording, "team-vision-hami")["devicePlugin"]["enabled"] is False
    assert _values(recording, "team-llm-hami")["devicePlugin"]["enabled"] is True


def test_the_workload_claims_a_whole_nvidia_card(recording: Recording) -> None:
    (template,) = [r for r in recording.resources if r.name == TEMPLATE]
    assert template.type == "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
    (request,) = template.inputs["spec"]["spec"]["devices"]["requests"]
    exactly = request["exactly"]
    assert exactly["deviceClassName"] == "gpu.nvidia.com"
    assert exactly["count"] == 1
    (selector,) = exactly["selectors"]
    assert selector["cel"]["expression"] == (
        "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('20000Mi')) >= 0"
    )
    manifest = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        **{k: v for k, v in template.inputs.items() if k != "__defaults"},
    }
    assert builtin_violations(VERSION, manifest) == []
    # The program registers no DeviceClass in prod: the operator's GPUCluster creates it.
    assert not [
        r
        for r in recording.resources
        if r.type == "kubernetes:resource.k8s.io/v1:DeviceClass" and r.name.startswith("team-")
    ]


def test_the_policy_pack_passes_it(recording: Recording) -> None:
    findings = run_pack(recording.resources, load_policy_config("prod"))
    assert [f for f in findings if f.message.startswith("can't run")] == []
    assert blocking(findings) == [], "\n".join(f"{f.policy}: {f.message}" for f in findings)


def test_dra_claims_counts_the_class_only_where_the_gpu_cluster_runs(
    recording: Recording,
) -> None:
    """The operator, not the program, creates gpu.nvidia.com: the pack takes it as the tenant's
    only from a GPU Operator release that deploys the GPUCluster, so the same claim under a
    ClusterPolicy (no DRA driver) would stay Pending and is refused."""
    changed = []
    for reg in recording.resources:
        reg = copy.deepcopy(reg)
        if reg.name == "team-vision-gpu-operator":
            for props in (reg.inputs, reg.outputs):
                if props and "values" in props:
                    props["values"]["gpuCluster"] = {"deployCR": False}
        changed.append(reg)
    findings = run_pack(changed, load_policy_config("prod"))
    (message,) = [f.message for f in findings if f.policy == "dra-claims"]
    assert "names DeviceClass 'gpu.nvidia.com', which the tenant does not register" in message


def _inputs(recording: Recording, name: str) -> dict[str, Any]:
    return dict(next(r for r in recording.resources if r.name == name).inputs)


def test_the_tenants_claim_policy_admits_its_template_and_the_operators_validator(
    recording: Recording,
) -> None:
    """Where prod's DRA driver meets the claim policy: the tenant's params name NVIDIA's class,
    so its own template is admitted; the GPU Operator's validator claims a card with
    ``adminAccess`` in ``gpu-operator`` (gpu-operator v26.7.0 manifests/state-dra-validation/
    0400_resourceclaimtemplate.yaml), which dra-admin-access refuses anywhere the binding
    reaches, so the binding leaves that namespace out; the same template elsewhere is refused."""
    from tests.policies.vap_eval import evaluate_policy

    params = _inputs(recording, "team-vision-admission-limits")
    assert params["data"]["deviceClass.gpu.nvidia.com"] == "true"
    policy = _inputs(recording, "team-vision-claim-admission-policy")
    binding = _inputs(recording, "team-vision-claim-admission-binding")
    template = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"}
    template.update(_inputs(recording, TEMPLATE))
    namespace = {"metadata": {"name": template["metadata"].get("namespace", "default")}}
    verdict = evaluate_policy(policy, binding, template, namespace, [params])
    assert verdict.judged
    assert verdict.admitted, verdict.messages
    validator = {
        "apiVersion": "resource.k8s.io/v1",
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": "nvidia-dra-validator-gpu", "namespace": "gpu-operator"},
        "spec": {
            "spec": {
                "devices": {
                    "requests": [
                        {
                            "name": "gpu",
                            "exactly": {
                                "deviceClassName": "gpu.nvidia.com",
                                "allocationMode": "ExactCount",
                                "count": 1,
                                "adminAccess": True,
                            },
                        }
                    ]
                }
            }
        },
    }
    operator = {"metadata": {"name": "gpu-operator"}}
    assert not evaluate_policy(policy, binding, validator, operator, [params]).judged
    elsewhere = {"metadata": {"name": "default"}}
    refused = evaluate_policy(policy, binding, validator, elsewhere, [params])
    assert any(m.startswith("dra-admin-access") for m in refused.messages), refused.messages


def test_the_claims_exporter_bills_nvidias_gpu_driver_only(recording: Recording) -> None:
    """The GPU Operator also runs NVIDIA's compute-domain.nvidia.com driver: the exporter bills
    the substrate's GPU driver (gpu.nvidia.com) only, not every allocated device."""
    (exporter,) = [
        r for r in recording.resources if r.name == "team-vision-metrics-dra-claims-exporter"
    ]
    (container,) = exporter.inputs["spec"]["template"]["spec"]["containers"]
    assert container["env"] == [{"name": "DRA_CLAIMS_DRIVERS", "value": "gpu.nvidia.com"}]
