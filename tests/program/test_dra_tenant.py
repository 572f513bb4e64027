"""A lab stack with tenant-a switched to ``gpuSharing: dra`` (issue 43, point 3), under mocks:
the program evaluates, registers the fake DRA driver in place of HAMi's mock device plugin for
that tenant only, the workload as a ResourceClaimTemplate and a Deployment whose pod uses it,
and the policy pack passes it."""

from __future__ import annotations

import copy
from typing import Any

import pytest
from gpu_platform_policies.admission import integral_numbers

from components.lab import dra_driver
from tests.policies.recorded import blocking, load_policy_config, run_pack
from tests.policies.vap_eval import as_admitted, evaluate_policy
from tests.support.harness import Recording, evaluate, load_stack_config
from tests.support.kube_schemas import builtin_violations
from tests.unit.test_dra_config import dra_lab

PLATFORM_KEY = "gpu-platform:platform"
VERSION = "v1.35.0"


@pytest.fixture(scope="module", params=[False, True], ids=["up", "preview"])
def recording(request: pytest.FixtureRequest) -> Recording:
    config = copy.deepcopy(load_stack_config("lab"))
    config[PLATFORM_KEY] = dra_lab()
    return evaluate("lab", request.param, config=config)


def _named(recording: Recording, suffix: str) -> list[Any]:
    return [r for r in recording.resources if r.name.endswith(suffix)]


def test_the_stack_evaluates(recording: Recording) -> None:
    assert recording.error is None, recording.error


def test_the_dra_tenant_gets_the_driver_and_not_the_mock_device_plugin(
    recording: Recording,
) -> None:
    names = {r.name for r in recording.resources}
    assert "tenant-a-dra-driver" in names
    assert "tenant-a-mock-device-plugin" not in names
    # The other tenant keeps HAMi's path.
    assert "tenant-b-mock-device-plugin" in names
    assert "tenant-b-dra-driver" not in names
    assert {"tenant-a-hami", "tenant-b-hami"} <= names


def test_the_dra_tenants_cards_are_not_also_offered_to_hami(recording: Recording) -> None:
    """HAMi's webhook and scheduler stay in a dra tenant, so its workers must not advertise
    HAMi's simulated cards (nvidia.com/gpu capacity, the register annotation, the completer
    that keeps them): hami-scheduler would hand out the cards the DRA driver publishes (an
    independent review of issue 43's first version)."""
    names = {r.name for r in recording.resources}
    tenant_a = {n for n in names if n.startswith("tenant-a-")}
    assert not {n for n in tenant_a if n.endswith("-gpu-capacity")}
    assert not {n for n in tenant_a if "completer" in n}
    inventories = [
        r
        for r in recording.resources
        if r.name.startswith("tenant-a-") and r.type == "kubernetes:core/v1:NodePatch"
    ]
    assert inventories
    for inventory in inventories:
        annotations = inventory.inputs["metadata"]["annotations"]
        assert not [key for key in annotations if key.startswith("hami.io/")]
    # The hami tenant keeps all three.
    assert {n for n in names if n.startswith("tenant-b-") and n.endswith("-gpu-capacity")}
    assert {n for n in names if n.startswith("tenant-b-") and "completer" in n}


def test_a_changed_request_replaces_the_immutable_template_and_rolls_the_pods(
    recording: Recording,
) -> None:
    """A ResourceClaimTemplate's spec cannot be updated (kubernetes v1.35.0
    pkg/apis/resource/validation/validation.go:617-624): the program replaces it, old first
    (same name), and the Deployment's pods carry the spec's digest, so a changed request rolls
    them onto claims from the new template instead of failing the update."""
    from components.tenant_specs import CLAIM_SPEC_ANNOTATION

    (template,) = _named(recording, "tenant-a-workload-default-whole-card-claims")
    assert "spec" in template.options["replace_on_changes"]
    assert template.options["delete_before_replace"] is True
    (deployment,) = _named(recording, "tenant-a-workload-default-whole-card")
    pod = deployment.inputs["spec"]["template"]
    before = pod["metadata"]["annotations"][CLAIM_SPEC_ANNOTATION]
    config = copy.deepcopy(load_stack_config("lab"))
    config[PLATFORM_KEY] = dra_lab()
    tenant = next(t for t in config[PLATFORM_KEY]["tenants"] if t["name"] == "tenant-a")
    tenant["workloads"][0]["gpu"]["memoryMiB"] = tenant["workloads"][0]["gpu"]["memoryMiB"] - 1
    changed = evaluate("lab", True, config=config)
    (moved,) = _named(changed, "tenant-a-workload-default-whole-card")
    after = moved.inputs["spec"]["template"]["metadata"]["annotations"][CLAIM_SPEC_ANNOTATION]
    assert after != before


def test_the_driver_publishes_the_tenants_card_count(recording: Recording) -> None:
    (daemon_set,) = _named(recording, "tenant-a-dra-driver")
    container = daemon_set.inputs["spec"]["template"]["spec"]["containers"][0]
    env = {e["name"]: e.get("value") for e in container["env"]}
    assert env["NUM_DEVICES"] == "1"
    assert env["DRIVER_NAME"] == dra_driver.DRIVER_NAME
    assert env["GPU_ALLOW_MULTIPLE_ALLOCATIONS"] == "false"
    assert container["image"] == dra_driver.IMAGE
    (device_class,) = _named(recording, "tenant-a-dra-driver-device-class")
    assert device_class.type == "kubernetes:resource.k8s.io/v1:DeviceClass"


def test_the_workload_claims_a_whole_card_through_a_template(recording: Recording) -> None:
    (template,) = _named(recording, "tenant-a-workload-default-whole-card-claims")
    assert template.type == "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate"
    (request,) = template.inputs["spec"]["spec"]["devices"]["requests"]
    assert request["exactly"]["deviceClassName"] == dra_driver.DEVICE_CLASS
    assert request["exactly"]["count"] == 1
    (deployment,) = _named(recording, "tenant-a-workload-default-whole-card")
    pod = deployment.inputs["spec"]["template"]["spec"]
    assert pod["resourceClaims"] == [{"name": "gpu", "resourceClaimTemplateName": "whole-card-gpu"}]
    assert pod["containers"][0]["resources"] == {"claims": [{"name": "gpu"}]}
    assert template.urn in deployment.dependencies


def test_the_registered_dra_objects_validate_against_v1_35(recording: Recording) -> None:
    kinds = {
        "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate": "ResourceClaimTemplate",
        "kubernetes:resource.k8s.io/v1:DeviceClass": "DeviceClass",
        "kubernetes:apps/v1:DaemonSet": "DaemonSet",
    }
    checked = 0
    for reg in recording.resources:
        kind = kinds.get(reg.type)
        if kind is None or not reg.name.startswith("tenant-a-"):
            continue
        api = reg.type.split(":")[1]
        manifest = {"apiVersion": api, "kind": kind, **reg.inputs}
        manifest.pop("__defaults", None)
        assert builtin_violations(VERSION, manifest) == [], reg.name
        checked += 1
    assert checked >= 3


def test_the_policy_pack_passes_it(recording: Recording) -> None:
    findings = run_pack(recording.resources, load_policy_config("lab"))
    assert [f for f in findings if f.message.startswith("can't run")] == []
    assert blocking(findings) == [], "\n".join(f"{f.policy}: {f.message}" for f in findings)


def test_the_privileged_driver_runs_where_the_tenants_rules_allow_it() -> None:
    """The plugin is privileged: outside the namespaces the tenant's admission rules skip, its
    own API server (and the pack) would refuse its pods, as they did in a namespace of its own."""
    from components.tenant_values import webhook_excluded_namespaces

    assert dra_driver.NAMESPACE in webhook_excluded_namespaces()
    daemon_set = dra_driver.manifests(1, {})["daemonSet"]
    assert daemon_set["metadata"]["namespace"] == dra_driver.NAMESPACE


def _dra_findings(recording: Recording, change: Any) -> list[str]:
    """dra-claims' messages on the recorded DRA lab stack after ``change(registration)``."""
    changed = []
    for reg in recording.resources:
        reg = copy.deepcopy(reg)
        for props in (reg.inputs, reg.outputs):
            if props:
                change(reg, props)
        changed.append(reg)
    findings = run_pack(changed, load_policy_config("lab"))
    return [f.message for f in findings if f.policy == "dra-claims"]


def _exactly(props: dict[str, Any]) -> dict[str, Any]:
    exactly: dict[str, Any] = props["spec"]["spec"]["devices"]["requests"][0]["exactly"]
    return exactly


TEMPLATE = "tenant-a-workload-default-whole-card-claims"
DEPLOYMENT = "tenant-a-workload-default-whole-card"


def test_dra_claims_finds_replicas_beyond_the_cards(recording: Recording) -> None:
    def two_replicas(reg: Any, props: dict[str, Any]) -> None:
        if reg.name == DEPLOYMENT:
            props["spec"]["replicas"] = 2

    (message,) = _dra_findings(recording, two_replicas)
    assert "replica 2 of 2 would stay Pending" in message
    assert "1 whole card(s) of at least 20000 MiB" in message


def test_dra_claims_finds_a_card_too_small(recording: Recording) -> None:
    def larger(reg: Any, props: dict[str, Any]) -> None:
        if reg.name == TEMPLATE:
            selector = _exactly(props)["selectors"][0]["cel"]
            selector["expression"] = selector["expression"].replace("20000Mi", "90000Mi")

    (message,) = _dra_findings(recording, larger)
    assert "replica 1 of 1 would stay Pending" in message


def test_dra_claims_refuses_a_share_the_api_server_would_drop(recording: Recording) -> None:
    def share(reg: Any, props: dict[str, Any]) -> None:
        if reg.name == TEMPLATE:
            _exactly(props)["capacity"] = {"requests": {"memory": "20000Mi", "compute": "30"}}

    (message,) = _dra_findings(recording, share)
    assert "DRAConsumableCapacity" in message
    assert "take a whole card" in message


def test_dra_claims_refuses_a_device_class_the_tenant_lacks(recording: Recording) -> None:
    def other_class(reg: Any, props: dict[str, Any]) -> None:
        if reg.name == TEMPLATE:
            _exactly(props)["deviceClassName"] = "gpu.nvidia.com"

    (message,) = _dra_findings(recording, other_class)
    assert "'gpu.nvidia.com', which the tenant does not register (gpu.example.com)" in message


def test_dra_claims_has_nothing_to_say_on_the_dra_lab(
    recording: Recording,
) -> None:
    assert _dra_findings(recording, lambda reg, props: None) == []


def test_the_dra_tenant_gets_its_claims_exporter_and_its_agent_scrapes_it(
    recording: Recording,
) -> None:
    """Chargeback from claims (issue 43): only the dra tenant runs the claims exporter, and only
    its agent has the ``dra-claims`` job, keeping the exporter's two series."""
    import yaml

    from components.metrics import dra_claims

    names = {r.name for r in recording.resources}
    parts = ("account", "role", "binding", "exporter")
    assert {f"tenant-a-metrics-dra-claims-{p}" for p in parts} <= names
    assert not {n for n in names if n.startswith("tenant-b-metrics-dra-claims")}
    jobs = {}
    for resource in _named(recording, "-metrics-agent-config"):
        config = yaml.safe_load(next(iter(resource.inputs["data"].values())))
        jobs[resource.name] = {j["job_name"]: j for j in config["scrape_configs"]}
    assert "dra-claims" not in jobs["tenant-b-metrics-agent-config"]
    # Only the dra tenant's agent marks its own ``up`` (GpuDraClaimsNotScraped selects on it).
    own = {
        name: by_job["gpu-metrics-agent"]["static_configs"][0]["labels"]
        for name, by_job in jobs.items()
    }
    assert own["tenant-a-metrics-agent-config"].get("gpu_sharing") == "dra"
    assert "gpu_sharing" not in own["tenant-b-metrics-agent-config"]
    job = jobs["tenant-a-metrics-agent-config"]["dra-claims"]
    kept = job["metric_relabel_configs"][0]["regex"]
    assert kept == "|".join(sorted((dra_claims.CARDS, dra_claims.MEMORY)))
    (exporter,) = _named(recording, "tenant-a-metrics-dra-claims-exporter")
    pod = exporter.inputs["spec"]["template"]
    assert pod["metadata"]["labels"]["app.kubernetes.io/component"] == "gpu-platform-dra-claims"
    assert pod["spec"]["serviceAccountName"] == "gpu-platform-dra-claims"
    # It bills the lab driver's devices only (the substrate's dra_driver answer).
    (container,) = pod["spec"]["containers"]
    assert container["env"] == [{"name": "DRA_CLAIMS_DRIVERS", "value": dra_driver.DRIVER_NAME}]
    (role,) = _named(recording, "tenant-a-metrics-dra-claims-role")
    assert role.inputs["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims", "resourceslices"],
            "verbs": ["list"],
        }
    ]


def _data(recording: Recording, name: str) -> dict[str, str]:
    return dict(next(r for r in recording.resources if r.name == name).inputs["data"])


def test_each_tenants_admission_params_say_how_it_shares_its_gpus(recording: Recording) -> None:
    """Issue 43 point 5: the dra tenant's params name the lab driver's DeviceClass (the only one
    its claims may name) and the most cards one node has (one A100-80GB); the hami tenant's say
    hami, so its claims and its pods that reference them are refused."""
    dra = _data(recording, "tenant-a-admission-limits")
    assert dra["gpuSharing"] == "dra"
    assert dra[f"deviceClass.{dra_driver.DEVICE_CLASS}"] == "true"
    assert dra["maxDevicesPerRequest"] == "1"
    hami = _data(recording, "tenant-b-admission-limits")
    assert hami["gpuSharing"] == "hami"
    assert not any(k.startswith("deviceClass.") or k == "maxDevicesPerRequest" for k in hami)


def test_every_tenant_judges_claims_in_every_namespace(recording: Recording) -> None:
    for tenant in ("tenant-a", "tenant-b"):
        policy = next(
            r for r in recording.resources if r.name == f"{tenant}-claim-admission-policy"
        )
        binding = next(
            r for r in recording.resources if r.name == f"{tenant}-claim-admission-binding"
        )
        rules = policy.inputs["spec"]["matchConstraints"]["resourceRules"]
        assert rules == [
            {
                "apiGroups": ["resource.k8s.io"],
                "apiVersions": ["v1"],
                "operations": ["CREATE"],
                "resources": ["resourceclaims", "resourceclaimtemplates"],
            }
        ]
        assert binding.inputs["spec"]["policyName"] == policy.inputs["metadata"]["name"]
        assert binding.inputs["spec"]["matchResources"] == {"namespaceSelector": {}}
        assert policy.urn in binding.dependencies


def test_the_dra_tenants_device_quota_counts_its_driver_class(recording: Recording) -> None:
    """deviceQuotas (issue 43 point 3): the namespace's ResourceQuota bounds the devices of the
    lab driver's DeviceClass that its ResourceClaims ask together; no HAMi keys."""
    (quota,) = [
        r
        for r in recording.resources
        if r.type == "kubernetes:core/v1:ResourceQuota" and r.name.startswith("tenant-a-")
    ]
    assert quota.inputs["metadata"]["namespace"] == "default"
    assert quota.inputs["spec"]["hard"] == {
        f"{dra_driver.DEVICE_CLASS}.deviceclass.resource.k8s.io/devices": "1"
    }


def _one(recording: Recording, name: str) -> dict[str, Any]:
    return dict(next(r for r in recording.resources if r.name == name).inputs)


def test_what_the_program_registers_passes_the_tenants_own_policies(
    recording: Recording,
) -> None:
    """Where the features meet: the dra tenant's registered ResourceClaimTemplates and the pods of
    the Deployments that use them, judged by its recorded policies, bindings and params (the
    API server's model, vap_eval; the pack judges the same stack in test_the_stack_passes...)."""
    if recording.preview:
        pytest.skip("the template's spec is known in update mode")
    params = _one(recording, "tenant-a-admission-limits")
    templates = [r for r in recording.resources if r.type.endswith(":ResourceClaimTemplate")]
    assert templates
    claim_policy = _one(recording, "tenant-a-claim-admission-policy")
    claim_binding = _one(recording, "tenant-a-claim-admission-binding")
    for template in templates:
        obj = {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate"}
        obj.update(integral_numbers(template.inputs))
        namespace = {"metadata": {"name": obj["metadata"].get("namespace", "default")}}
        verdict = evaluate_policy(claim_policy, claim_binding, obj, namespace, [params])
        assert verdict.judged, template.name
        assert verdict.admitted, (template.name, verdict.messages)
        # It can fail: under the hami tenant's params the same template is refused.
        hami = _one(recording, "tenant-b-admission-limits")
        refused = evaluate_policy(claim_policy, claim_binding, obj, namespace, [hami])
        assert "dra-claims-need-dra" in refused.rule_ids
    pod_policy = _one(recording, "tenant-a-admission-policy")
    pod_binding = _one(recording, "tenant-a-admission-binding")
    deployments = [
        r
        for r in recording.resources
        if r.type == "kubernetes:apps/v1:Deployment"
        and r.name.startswith("tenant-a-")
        and (r.inputs["spec"]["template"]["spec"].get("resourceClaims"))
    ]
    assert deployments
    for deployment in deployments:
        template = deployment.inputs["spec"]["template"]
        pod = as_admitted(
            {
                "apiVersion": "v1",
                "kind": "Pod",
                "metadata": {"name": "p", **template.get("metadata", {})},
                "spec": template["spec"],
            }
        )
        namespace = {
            "metadata": {"name": deployment.inputs["metadata"].get("namespace", "default")}
        }
        verdict = evaluate_policy(pod_policy, pod_binding, pod, namespace, [params])
        assert verdict.judged, deployment.name
        assert verdict.admitted, (deployment.name, verdict.messages)
        hami = _one(recording, "tenant-b-admission-limits")
        refused = evaluate_policy(pod_policy, pod_binding, pod, namespace, [hami])
        assert "hami-tenant-no-claims" in refused.rule_ids
