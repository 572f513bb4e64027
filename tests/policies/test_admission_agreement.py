"""Issue 27: one definition per GPU rule, two enforcers that agree.

One table of workloads, each judged by

* the **pack**: ``hami-admission-rules`` (cel-python on the rules file, every pod spec of the
  registered Deployment), on a stack that also registers the tenant's params ConfigMap and binding
  exactly as the program builds them (``components.admission_policies``);
* the **tenant API server**: the rendered ValidatingAdmissionPolicy + Binding, evaluated by
  ``vap_eval`` (which reads only the rendered objects) on the pod as the API server hands it to
  the policy.

Both must name the same failed rules as the table does; the number of cases where they disagree is
printed and must be 0. Each rule is shown able to fail: with its expression replaced by ``true``
(in the rendered policy, and in the pack's rule set) a bad case of the table passes, so the table
assertions would fail.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest
from gpu_platform_policies.admission import Rule, check_admission, load_rules
from gpu_platform_policies.cel import canonical_quantity
from gpu_platform_policies.model import Stack, from_policy_resource
from gpu_platform_policies.pack import validate_gpu_requests

from components.admission_policies import (
    DeviceSharing,
    admission_binding,
    admission_params,
    admission_policy,
    rule_definitions,
)
from components.config import AdmissionSettings
from components.tenant_values import webhook_excluded_namespaces
from tests.policies.builders import (
    DEPLOYMENT,
    NAMESPACE,
    TENANT_LABEL,
    container,
    deployment,
    gpu,
    pod_spec,
    policy_resource,
    resource_args,
    run_resource,
)
from tests.policies.vap_eval import (
    TenantAnswer,
    Verdict,
    as_admitted,
    evaluate_policy,
    hami_mutation,
    tenant_answer,
)

TENANT = "tenant-a"
LABELS = {TENANT_LABEL: TENANT}
EXCLUDED = webhook_excluded_namespaces(("gpu-operator",))
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
HAMI = DeviceSharing()
# A gpuSharing: dra tenant of the lab: dra-example-driver's DeviceClass, 4 cards per node.
DRA = DeviceSharing("dra", ("gpu.example.com",), 4)
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"


@dataclass(frozen=True)
class Case:
    name: str
    spec: dict[str, Any]
    expected: frozenset[str] = frozenset()  # the rules that fail; empty: admitted
    namespace: str = "default"
    pod_labels: dict[str, str] = field(default_factory=dict)
    namespace_labels: dict[str, str] = field(default_factory=dict)
    settings: AdmissionSettings = field(default_factory=AdmissionSettings)
    sharing: DeviceSharing = HAMI  # the tenant's gpuSharing, as its params say
    # hami-gpu-requests (the pack's detailed preview check) judges the quantity forms too: where
    # True, its verdict must be the table's as well.
    python: bool = True
    # What a live tenant answers, HAMi v2.10.0's mutating webhook first (``vap_eval.hami_webhook``):
    # "" the policy's verdict on the pod as HAMi writes it is the table's; REWRITTEN HAMi turns
    # the pod into an allowed one; any other text: HAMi refuses the pod itself with that text.
    hami: str = ""
    # Rules the pod also fails once HAMi's webhook wrote NVIDIA_VISIBLE_DEVICES=none into a
    # container it does not count as a GPU container (prod's overwriteEnv).
    hami_adds: frozenset[str] = frozenset()


def one(limits: dict[str, Any] | None = None, **extra: Any) -> dict[str, Any]:
    return pod_spec([container(limits)], **extra)


def with_env(limits: dict[str, Any] | None, env: list[dict[str, Any]]) -> dict[str, Any]:
    c = container(limits)
    c["env"] = env
    return pod_spec([c])


def with_caps(*caps: str, limits: dict[str, Any] | None = None) -> dict[str, Any]:
    c = container(gpu() if limits is None else limits)
    c["securityContext"] = {"capabilities": {"add": list(caps)}}
    return pod_spec([c])


def with_env_from(limits: dict[str, Any] | None, *sources: dict[str, Any]) -> dict[str, Any]:
    c = container(limits)
    c["envFrom"] = list(sources)
    return pod_spec([c])


REWRITTEN = "rewritten"
PRIVILEGED_BY_HAMI = "is privileged"


def bad(*rules: str) -> frozenset[str]:
    return frozenset(rules)


def dra(privileged: bool | None = None, **extra: Any) -> dict[str, Any]:
    """A pod of a gpuSharing: dra tenant: its container uses a claim from a template
    (components.dra.pod_claim_fields), no nvidia.com/ resource."""
    c = container(None, privileged=privileged)
    c["resources"] = {"claims": [{"name": "gpu"}]}
    claims = [{"name": "gpu", "resourceClaimTemplateName": "infer-gpu"}]
    return pod_spec([c], resourceClaims=claims, **extra)


NVD = "NVIDIA_VISIBLE_DEVICES"
CASES = [
    Case("good-floats-as-pulumi-sends", one(gpu(20000.0, 30.0))),
    Case("good-quantity-strings", one(gpu("20000", "30", "1"))),
    Case("good-decimal-suffix-as-stored", one(gpu("20k", "30"))),
    Case(
        "good-percentage",
        one(
            {
                "nvidia.com/gpu": 2.0,
                "nvidia.com/gpumem-percentage": 50.0,
                "nvidia.com/gpucores": 100.0,
            }
        ),
    ),
    Case("good-memory-alone", one({"nvidia.com/gpu": 1, "nvidia.com/gpumem": 4096})),
    Case("good-priority", one({**gpu(), "nvidia.com/priority": 1.0})),
    Case("good-hami-scheduler", one(gpu(), schedulerName="hami-scheduler")),
    Case("good-cpu-pod-anything-goes", one({"cpu": "1"}, nodeName="n1", hostPID=True)),
    Case("good-cpu-env-none", with_env({"cpu": "1"}, [{"name": NVD, "value": "none"}])),
    Case("good-gpu-pod-nvidia-runtime", one(gpu(), runtimeClassName="nvidia")),
    Case("good-harmless-capability", with_caps("NET_BIND_SERVICE")),
    Case(
        "good-system-namespace-not-judged", one(gpu("20Gi")), namespace="kube-system", python=False
    ),
    Case(
        "good-under-ceiling",
        one(gpu(20000.0)),
        settings=AdmissionSettings(max_gpu_memory_mib=20000),
    ),
    Case("good-whole-card-allowed", one(gpu(cores=100.0))),
    Case("bad-gpumem-gi", one(gpu("20Gi")), bad("hami-gpumem-mib")),
    Case("bad-gpumem-mi", one(gpu("20000Mi")), bad("hami-gpumem-mib")),
    Case("bad-gpumem-zero", one(gpu(0.0)), bad("hami-gpumem-mib")),
    Case("bad-gpumem-over-int32", one(gpu("3G")), bad("hami-gpumem-mib")),
    Case("bad-gpucores-150", one(gpu(cores=150.0)), bad("hami-gpucores")),
    Case("bad-gpucores-zero", one(gpu(cores=0.0)), bad("hami-gpucores")),
    Case(
        "bad-percentage-zero",
        one({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 0, "nvidia.com/gpucores": 20}),
        bad("hami-gpumem-percentage"),
    ),
    Case(
        "bad-percentage-101",
        one({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 101, "nvidia.com/gpucores": 20}),
        bad("hami-gpumem-percentage"),
        # HAMi v2.10.0 pkg/device/nvidia/device.go:349-351, 389-395 (its validateMemoryPercentage)
        hami="must be an integer between 0 and 100",
    ),
    Case(
        "bad-both-memory-forms",
        one({**gpu(), "nvidia.com/gpumem-percentage": 50.0}),
        bad("hami-one-memory-form"),
    ),
    Case("bad-bare-card", one({"nvidia.com/gpu": 1.0}), bad("hami-no-bare-card"), hami=REWRITTEN),
    Case(
        "bad-no-card-count",
        one({"nvidia.com/gpumem": 20000, "nvidia.com/gpucores": 30}),
        bad("hami-card-count"),
        hami=REWRITTEN,
    ),
    Case("bad-zero-cards", one(gpu(cards=0.0)), bad("hami-card-count")),
    Case("bad-priority-binary", one({**gpu(), "nvidia.com/priority": "1Ki"}), bad("hami-priority")),
    Case(
        "bad-mig-resource",
        one({"nvidia.com/mig-1g.10gb": 1}),
        bad("hami-resource-names"),
        hami_adds=bad("nvidia-visible-devices"),
    ),
    Case(
        "bad-init-container",
        pod_spec([container({"cpu": "1"})], init=[container(gpu("8Gi"), name="warm")]),
        bad("hami-gpumem-mib"),
    ),
    Case("bad-scheduler", one(gpu(), schedulerName="volcano"), bad("hami-scheduler")),
    Case(
        "bad-node-name",
        one(gpu(), nodeName="gpu-1"),
        bad("hami-node-name"),
        hami="has node assigned",
    ),
    Case(
        "bad-privileged",
        pod_spec([container(gpu(), privileged=True)]),
        bad("hami-device-access"),
        hami=PRIVILEGED_BY_HAMI,
    ),
    Case(
        "bad-privileged-sidecar",
        pod_spec([container(gpu()), container({"cpu": "1"}, name="s", privileged=True)]),
        bad("hami-device-access"),
        hami=PRIVILEGED_BY_HAMI,
    ),
    Case(
        "bad-cpu-pod-privileged",
        pod_spec([container({"cpu": "1"}, privileged=True)]),
        bad("node-device-access"),
        python=False,
    ),
    Case(
        "bad-cpu-pod-sys-admin",
        with_caps("SYS_ADMIN", limits={"cpu": "1"}),
        bad("node-device-access"),
        python=False,
    ),
    Case(
        "good-cpu-pod-privileged-where-allowed",
        pod_spec([container({"cpu": "1"}, privileged=True)]),
        namespace="node-agents",
        settings=AdmissionSettings(privilegedNamespaces=["node-agents"]),  # type: ignore[call-arg]
        python=False,
    ),
    Case(
        "bad-gpu-pod-privileged-even-where-allowed",
        pod_spec([container(gpu(), privileged=True)]),
        bad("hami-device-access"),
        namespace="node-agents",
        settings=AdmissionSettings(privilegedNamespaces=["node-agents"]),  # type: ignore[call-arg]
        hami=PRIVILEGED_BY_HAMI,
    ),
    Case("bad-sys-admin", with_caps("SYS_ADMIN"), bad("hami-device-access")),
    Case("bad-cap-all-lowercase", with_caps("all"), bad("hami-device-access")),
    Case("bad-host-ipc", one(gpu(), hostIPC=True), bad("hami-host-namespaces")),
    Case("bad-host-pid", one(gpu(), hostPID=True), bad("hami-host-namespaces")),
    # Pods that take cards through ResourceClaims (gpuSharing: dra) are GPU pods for the
    # device-access rules too; HAMi's own rules leave them alone.
    Case("good-dra-claim-pod", dra(), sharing=DRA),
    Case(
        "good-dra-pod-in-hami-ignored-namespace",
        dra(),
        namespace_labels={"hami.io/webhook": "ignore"},
        sharing=DRA,
    ),
    Case("bad-dra-privileged", dra(privileged=True), bad("hami-device-access"), sharing=DRA),
    Case(
        "bad-dra-privileged-in-privileged-namespace",
        dra(privileged=True),
        bad("hami-device-access"),
        namespace="tools",
        settings=AdmissionSettings(privilegedNamespaces=["tools"]),  # type: ignore[call-arg]
        sharing=DRA,
    ),
    Case("bad-dra-host-pid", dra(hostPID=True), bad("hami-host-namespaces"), sharing=DRA),
    Case("bad-dra-node-name", dra(nodeName="n1"), bad("hami-node-name"), sharing=DRA),
    # Each tenant takes cards one way (gpuSharing): HAMi's resources on a dra tenant, claims on
    # a hami tenant, would stay Pending.
    Case(
        "bad-hami-pod-on-dra-tenant",
        one(gpu()),
        bad("dra-tenant-no-hami-resources"),
        sharing=DRA,
        python=False,
    ),
    Case("bad-dra-pod-on-hami-tenant", dra(), bad("hami-tenant-no-claims"), python=False),
    Case("good-cpu-pod-on-dra-tenant", one(None), sharing=DRA),
    Case(
        "bad-pod-skips-webhook",
        one(gpu()),
        bad("hami-webhook-not-skipped"),
        pod_labels={"hami.io/webhook": "ignore"},
        python=False,
    ),
    Case(
        "bad-namespace-skips-webhook",
        one(gpu()),
        bad("hami-webhook-not-skipped"),
        namespace="batch",
        namespace_labels={"hami.io/webhook": "ignore"},
        python=False,
    ),
    Case(
        "bad-cpu-visible-devices",
        with_env({"cpu": "1"}, [{"name": NVD, "value": "all"}]),
        bad("nvidia-visible-devices"),
        python=False,
    ),
    Case(
        "bad-gpu-visible-devices",
        with_env(gpu(), [{"name": NVD, "value": "0,1"}]),
        bad("nvidia-visible-devices"),
        python=False,
    ),
    Case(
        "bad-visible-devices-from",
        with_env(
            None, [{"name": NVD, "valueFrom": {"configMapKeyRef": {"name": "x", "key": "y"}}}]
        ),
        bad("nvidia-visible-devices"),
        python=False,
    ),
    Case(
        "bad-gpu-env-from-without-prefix",
        with_env_from(gpu(), {"configMapRef": {"name": "settings"}}),
        bad("gpu-env-from"),
        python=False,
    ),
    Case(
        "bad-gpu-env-from-prefix-nvidia",
        with_env_from(gpu(), {"prefix": "NVIDIA_", "secretRef": {"name": "settings"}}),
        bad("gpu-env-from"),
        python=False,
    ),
    Case(
        "bad-gpu-env-from-prefix-cuda-device",
        with_env_from(gpu(), {"prefix": "CUDA_DEVICE_MEMORY_", "configMapRef": {"name": "s"}}),
        bad("gpu-env-from"),
        python=False,
    ),
    Case(
        "good-gpu-env-from-with-prefix",
        with_env_from(gpu(), {"prefix": "APP_", "configMapRef": {"name": "settings"}}),
    ),
    # A container that asks for no card gets NVIDIA_VISIBLE_DEVICES=none from HAMi's webhook, and
    # env wins over envFrom (kubelet makeEnvironmentVariables: envFrom first, then env).
    Case("good-cpu-env-from", with_env_from({"cpu": "1"}, {"configMapRef": {"name": "s"}})),
    Case(
        "bad-hami-core-switched-off",
        with_env(gpu(), [{"name": "CUDA_DISABLE_CONTROL", "value": "true"}]),
        bad("hami-core-controls"),
        python=False,
    ),
    Case(
        "bad-hami-core-memory-limit",
        with_env(gpu(), [{"name": "CUDA_DEVICE_MEMORY_LIMIT_0", "value": "80g"}]),
        bad("hami-core-controls"),
        python=False,
    ),
    Case(
        "bad-core-policy-disable",
        with_env(gpu(), [{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "disable"}]),
        bad("hami-core-controls"),
        python=False,
    ),
    # HAMi-core reads CUDA_TASK_PRIORITY (HAMi v2.10.0 pkg/util/types.go:39); HAMi's webhook
    # writes it only for a container that asks for nvidia.com/priority (device.go:352-358,
    # appended after the pod's own env, so its value wins there).
    Case(
        "bad-task-priority-by-hand",
        with_env(gpu(), [{"name": "CUDA_TASK_PRIORITY", "value": "0"}]),
        bad("hami-core-controls"),
        python=False,
    ),
    Case(
        "good-task-priority-beside-the-resource",
        with_env(
            {**gpu(), "nvidia.com/priority": 1.0}, [{"name": "CUDA_TASK_PRIORITY", "value": "1"}]
        ),
    ),
    Case(
        "bad-gpu-env-from-prefix-cuda-task",
        with_env_from(gpu(), {"prefix": "CUDA_TASK_", "configMapRef": {"name": "s"}}),
        bad("gpu-env-from"),
        python=False,
    ),
    Case(
        "good-core-policy-force",
        with_env(gpu(), [{"name": "GPU_CORE_UTILIZATION_POLICY", "value": "force"}]),
    ),
    Case(
        "bad-cpu-nvidia-runtime",
        one({"cpu": "1"}, runtimeClassName="nvidia"),
        bad("nvidia-runtime-class"),
        python=False,
    ),
    Case(
        "bad-over-ceiling",
        one(gpu(20000.0)),
        bad("tenant-max-gpumem"),
        settings=AdmissionSettings(max_gpu_memory_mib=10000),
        python=False,
    ),
    Case(
        "bad-whole-card-forbidden",
        one(gpu(cores=100.0)),
        bad("tenant-whole-cards"),
        settings=AdmissionSettings(whole_cards=False),
        python=False,
    ),
    Case(
        "bad-whole-card-by-percentage",
        one({"nvidia.com/gpu": 1, "nvidia.com/gpumem-percentage": 100, "nvidia.com/gpucores": 30}),
        bad("tenant-whole-cards"),
        settings=AdmissionSettings(whole_cards=False),
        python=False,
    ),
]


# ------------------------------------------------------------------------------ the enforcers


def rendered(
    settings: AdmissionSettings,
    policy_spec: dict[str, Any] | None = None,
    sharing: DeviceSharing = HAMI,
) -> Any:
    rules = rule_definitions()
    policy = admission_policy(rules, LABELS)
    if policy_spec is not None:
        policy["spec"] = policy_spec
    binding = admission_binding(rules, settings.mode, EXCLUDED, LABELS)
    params = admission_params(rules, settings, LABELS, sharing)
    return policy, binding, params


def pod_of(case: Case) -> dict[str, Any]:
    metadata: dict[str, Any] = {"name": "w", "namespace": case.namespace}
    metadata["labels"] = {"app": "w", **case.pod_labels}
    return {
        "apiVersion": "v1",
        "kind": "Pod",
        "metadata": metadata,
        "spec": copy.deepcopy(case.spec),
    }


def namespace_of(case: Case) -> dict[str, Any]:
    return {"metadata": {"name": case.namespace, "labels": dict(case.namespace_labels)}}


def api_server(
    case: Case, policy_spec: dict[str, Any] | None = None, mutated: bool = False
) -> Verdict:
    policy, binding, params = rendered(case.settings, policy_spec, case.sharing)
    pod = as_admitted(pod_of(case))
    if mutated:
        pod = hami_mutation(pod, overwrite_env=True, runtime_class="nvidia")
    return evaluate_policy(policy, binding, pod, namespace_of(case), [params])


def pack_stack(case: Case) -> Stack:
    policy, binding, params = rendered(case.settings, sharing=case.sharing)
    workload = deployment("w", copy.deepcopy(case.spec), tenant=TENANT)
    workload["metadata"]["namespace"] = case.namespace
    workload["spec"]["template"]["metadata"]["labels"].update(case.pod_labels)
    resources = [
        policy_resource(CONFIG_MAP, "limits", params),
        policy_resource(VAP, "policy", policy),
        policy_resource(BINDING, "binding", binding),
        policy_resource(DEPLOYMENT, "w", workload),
    ]
    if case.namespace_labels:
        ns = {"metadata": {"name": case.namespace, "labels": {**LABELS, **case.namespace_labels}}}
        resources.append(policy_resource(NAMESPACE, "ns", ns))
    return Stack(from_policy_resource(r) for r in resources)


def pack_rule_ids(case: Case, rules: Any = None) -> set[str]:
    violations = check_admission(pack_stack(case), rules)
    return {v.message.split(": ", 2)[1] for v in violations}


def python_check(case: Case) -> list[str]:
    workload = deployment("w", copy.deepcopy(case.spec), tenant=TENANT)
    return run_resource(validate_gpu_requests, resource_args(DEPLOYMENT, workload))


# ---------------------------------------------------------------------------------- the table


def test_the_table_is_large_enough_and_covers_every_rule() -> None:
    assert len(CASES) >= 20
    assert len({c.name for c in CASES}) == len(CASES)
    covered = set().union(*(c.expected for c in CASES))
    assert covered == {rule.id for rule in load_rules().rules}
    assert sum(1 for c in CASES if not c.expected) >= 10


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_enforcers_give_the_tables_verdict(case: Case) -> None:
    vap = api_server(case)
    pack = pack_rule_ids(case)
    assert vap.rule_ids == set(case.expected), vap.messages
    assert pack == set(case.expected)
    assert vap.admitted == (not case.expected)


def test_the_two_enforcers_disagree_on_no_case(capsys: pytest.CaptureFixture[str]) -> None:
    # Two counts, because they measure different things: the pack against the policy on the pod
    # as written (one rule definition, two drivers), and how many verdicts HAMi's webhook changes
    # before the policy runs on a live tenant (each such case says so in its ``hami`` column).
    disagreements = [
        case.name for case in CASES if api_server(case).rule_ids != pack_rule_ids(case)
    ]
    changed = [
        case.name
        for case in CASES
        if live_answer(case).admitted != api_server(case).admitted
        or set(live_answer(case).rule_ids) != api_server(case).rule_ids
    ]
    with capsys.disabled():
        print(
            f"\nadmission rules: {len(CASES)} cases; pack vs the tenant's policy on the pod as "
            f"written: {len(disagreements)} disagreements; verdicts HAMi's webhook changes first "
            f"on a live tenant: {len(changed)} ({', '.join(changed)})"
        )
    assert disagreements == []
    assert set(changed) == {c.name for c in CASES if c.hami or c.hami_adds}


@pytest.mark.parametrize("case", [c for c in CASES if c.python], ids=lambda c: c.name)
def test_the_packs_detailed_check_gives_the_same_verdict(case: Case) -> None:
    # hami-gpu-requests says more (the MiB to write) but must refuse exactly what the shared
    # rules refuse, on every case it judges.
    assert bool(python_check(case)) == bool(case.expected), python_check(case)


def live_answer(case: Case) -> TenantAnswer:
    """What a live prod tenant answers: HAMi's webhook (overwriteEnv, the nvidia RuntimeClass),
    then the rendered policy."""
    policy, binding, params = rendered(case.settings, sharing=case.sharing)
    return tenant_answer(
        policy,
        binding,
        [params],
        pod_of(case),
        namespace_of(case),
        overwrite_env=True,
        runtime_class="nvidia",
        runtime_classes={"nvidia"},
        excluded_namespaces=EXCLUDED,
    )


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_a_live_tenant_answers_as_the_hami_column_says(case: Case) -> None:
    # Validating policies run after mutating webhooks: HAMi refuses some bad pods itself (with
    # its own text, naming no rule) and rewrites two bad forms into allowed ones (a bare card
    # gets gpucores: 100, device.go:417-450; gpumem/gpucores without a card count get
    # nvidia.com/gpu: 1, device.go:398-415, defaultGPUNum 1). Every good pod stays admitted.
    answer = live_answer(case)
    if case.hami == REWRITTEN:
        assert answer.admitted, answer.message
    elif case.hami:
        assert answer.refused_by == "hami"
        assert case.hami in answer.message
    else:
        assert answer.refused_by == ("policy" if case.expected else "")
        assert set(answer.rule_ids) == case.expected | case.hami_adds, answer.message


def test_the_api_error_names_the_first_failed_rule_only() -> None:
    # The API server reports the first denied validation alone (dispatcher.go:289-306).
    case = Case("two", one(gpu("20Gi", 150.0)), bad("hami-gpumem-mib", "hami-gpucores"))
    answer = live_answer(case)
    assert answer.rule_ids == ("hami-gpumem-mib", "hami-gpucores")
    assert "denied request: hami-gpumem-mib: " in answer.message
    assert "hami-gpucores" not in answer.message


def test_hami_writes_what_the_rules_allow() -> None:
    # A CPU container next to a GPU one gets NVIDIA_VISIBLE_DEVICES=none (HAMi v2.10.0
    # pkg/device/nvidia/device.go:380-385): allowed; the same value written by hand too.
    case = Case("mixed", pod_spec([container(gpu()), container({"cpu": "1"}, name="side")]))
    pod = hami_mutation(as_admitted(pod_of(case)), overwrite_env=True, runtime_class="nvidia")
    assert pod["spec"]["containers"][1]["env"] == [{"name": NVD, "value": "none"}]
    assert pod["spec"]["schedulerName"] == "hami-scheduler"
    assert api_server(case, mutated=True).admitted


def test_warn_admits_with_the_message() -> None:
    case = dataclasses.replace(
        CASES[-1], settings=AdmissionSettings(whole_cards=False, mode="Warn")
    )
    verdict = api_server(case)
    assert verdict.admitted
    assert verdict.rule_ids == {"tenant-whole-cards"}


@pytest.mark.parametrize("mode", ["Deny", "Warn"])
@pytest.mark.parametrize("case", [CASES[0], CASES[7]], ids=["gpu-pod", "cpu-pod"])
def test_a_missing_params_config_map_refuses_every_pod_in_every_mode(mode: str, case: Case) -> None:
    # parameterNotFoundAction: Deny is a configuration error, not a validation: the API server
    # refuses every pod the binding matches, GPU or not, Warn included (policy_dispatcher.go
    # :337-343, :377-378; dispatcher.go:232-252 applies validationActions to CEL decisions only).
    assert case.name in ("good-floats-as-pulumi-sends", "good-cpu-pod-anything-goes")
    policy, binding, _params = rendered(AdmissionSettings(mode=mode))  # type: ignore[arg-type]
    pod = as_admitted(pod_of(case))
    assert not evaluate_policy(policy, binding, pod, namespace_of(case), []).admitted


def test_audit_is_refused_with_the_fix() -> None:
    # Audit only annotates audit events (dispatcher.go:243-245), and no tenant API server has an
    # audit backend: it would record nothing, so the mode is not offered.
    with pytest.raises(ValueError, match="Deny"):
        AdmissionSettings(mode="Audit")  # type: ignore[arg-type]


def test_a_computed_key_is_found_in_a_map() -> None:
    # cel-python returns a plain str from 'a' + b; the pack's equality shim must still find the
    # key (node-device-access looks up 'privilegedNamespace.' + the namespace's name).
    case = CASES[[c.name for c in CASES].index("good-cpu-pod-privileged-where-allowed")]
    assert api_server(case).admitted
    assert pack_rule_ids(case) == set()


# ---------------------------------------------------------------------------- each rule can fail


@pytest.mark.parametrize("rule", [r.id for r in load_rules().rules])
def test_each_rule_can_fail(rule: str) -> None:
    """With the rule's expression replaced by ``true``, a bad case of the table passes both
    enforcers: the table's assertions above would then fail."""
    cases = [c for c in CASES if rule in c.expected]
    assert cases
    policy, _binding, _params = rendered(AdmissionSettings())
    spec = copy.deepcopy(policy["spec"])
    index = [r.id for r in load_rules().rules].index(rule)
    spec["validations"][index]["expression"] = "true"
    rules = load_rules()
    mutated_rules = dataclasses.replace(
        rules,
        rules=tuple(
            Rule(r.id, "true", r.message, r.message_expression) if r.id == rule else r
            for r in rules.rules
        ),
    )
    for case in cases:
        assert rule in api_server(case).rule_ids
        assert rule not in api_server(case, policy_spec=spec).rule_ids
        assert rule in pack_rule_ids(case)
        assert rule not in pack_rule_ids(case, mutated_rules)


# ------------------------------------------------------------------------- the quantity forms


@pytest.mark.parametrize(
    ("written", "stored"),
    # apimachinery v0.35.7 pkg/api/resource/quantity_test.go:700-745 (TestQuantityString: the
    # "alternate" spelling parses to the canonical one).
    [("1024Mi", "1Gi"), ("307200Ki", "300Mi"), ("1025024Mi", "1001Gi"), ("1024Gi", "1Ti"),
     ("5000m", "5"), ("0.5", "500m"), ("1000M", "1G"), ("0.001T", "1G"), ("1000u", "1m"),
     ("1.08", "1080m"), ("1080000000n", "1080m"), (".001e12", "1e9"), ("0.001e0", "1e-3"),
     ("1000e-12", "1e-9"), ("1025", "1025"), ("0", "0"), ("20000", "20k"), ("20480", "20480")],
)  # fmt: skip
def test_quantities_are_judged_in_the_form_the_api_server_stores(written: str, stored: str) -> None:
    assert canonical_quantity(written) == stored
