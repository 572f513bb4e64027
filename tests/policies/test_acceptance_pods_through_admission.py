"""Issue 37: every pod the acceptance suite creates, through its tenant's admission as a live
tenant runs it: HAMi v2.10.0's mutating webhook first (what it refuses itself, what it writes),
then the tenant's ValidatingAdmissionPolicy as the program renders it
(``tests.acceptance.admission_model``), for every tenant of both stacks.

The verdict each test expects: admitted, except TC-10's memory pod (HAMi's own quota refuses it,
as TC-10 requires) and TC-17's bad cases (each refused by the rule TC-17 names for it, or by
HAMi's webhook where the table's ``hami`` column says so). TC-10's cards pod must be admitted
here: its refusal must come from the ResourceQuota plugin, which kube-apiserver runs after every
policy (not modelled: ResourceQuota is not a policy), so a policy refusal would make TC-10 fail on
a correct lab, as ``gpucores: 0`` did.

The catalogue is complete by construction: a test below fails when a module of the suite builds
a pod body (``pod_body``, ``probe_body``, ``compute_body``) outside a function this file sends.
"""

from __future__ import annotations

import ast
import copy
import functools
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pytest

from components.config import PlatformConfig, Tenant
from tests.acceptance import (
    conftest as suite_conftest,
)
from tests.acceptance import (
    gpu_live,
    test_tc00_platform_health,
    test_tc03_webhook,
    test_tc04_05_sharing,
    test_tc06_memory_limit,
    test_tc10_quotas,
    test_tc11_memory_cap,
    test_tc12_compute_share,
    test_tc13_reclamation,
    test_tc14_interference,
    test_tc15_recovery,
    test_tc16_konnectivity_down,
    test_tc17_admission_policies,
    test_tc18_chargeback,
    test_tc21_management_drill,
    test_tc22_25_dra,
)
from tests.acceptance.admission_model import expected_answer, refusal_problem
from tests.acceptance.dra_evidence import plan_dra
from tests.acceptance.gpu_live import GpuTarget
from tests.acceptance.gpu_plan import INTERFERENCE_SHARES, reclaim_sizes
from tests.acceptance.gpu_workloads import PROBE_IMAGE
from tests.acceptance.hami_evidence import RegisteredCard
from tests.acceptance.live import Target
from tests.acceptance.stack import (
    accumulation_sizes,
    load_platform,
    plan_sharing,
    shares_with_hami,
)
from tests.policies.vap_eval import WEBHOOK, TenantAnswer

SUITE = Path(__file__).resolve().parents[1] / "acceptance"
BUILDERS = ("pod_body", "probe_body", "compute_body")
RUN_ID = "r0"
NAMESPACE = "acceptance-r0"  # create_namespace / scratch_namespace: a fresh, unlabelled one
IMAGE = PROBE_IMAGE  # what probe_image() uses unless GPU_PLATFORM_PROBE_IMAGE says otherwise


@dataclass(frozen=True)
class SuitePod:
    tc: str
    builder: str
    tenant: str
    body: dict[str, Any]
    expect: str = "admitted"  # or "hami: <text>", or "tc17" (TC-17's own plan)
    quota_left: dict[str, int] | None = None


def _target(tenant: Tenant) -> GpuTarget:
    """A node of the tenant's first GPU pool with its first declared card, as TC-04 ... TC-15
    find it registered (only the card's memory and the node selector shape the pods)."""
    pool = tenant.worker_pools[0]
    card = pool.resolved_cards()[0][0]
    registered = RegisteredCard(
        "GPU-00000000-0000-0000-0000-000000000000",
        0,
        pool.slots_per_card,
        card.memory_mib,
        card.core_units,
        card.name,
        0,
        "hami-core",
        True,
    )
    where = Target(
        cluster=None, node=f"{tenant.name}-0", node_selector={"pool": pool.name}, cards=[registered]
    )  # type: ignore[arg-type]
    return GpuTarget(where=where, card=registered, image=IMAGE)


def suite_pods(
    platform: PlatformConfig, tenant: Tenant, tc17_plans: list[Any]
) -> Iterator[SuitePod]:
    """Every pod the suite creates in ``tenant``, built by the suite's own functions."""
    name = tenant.name
    yield SuitePod("TC-07/08", "marker_pod", name, suite_conftest.marker_pod(RUN_ID))
    yield SuitePod(
        "TC-00", "dns_probe_pod", name, test_tc00_platform_health.dns_probe_pod("dns", RUN_ID)
    )
    yield SuitePod("TC-21", "dry_run_pod", name, test_tc21_management_drill.dry_run_pod(RUN_ID))
    good = test_tc17_admission_policies.good_pod(tenant, RUN_ID)
    yield SuitePod("TC-17", _good_builder(tenant), name, good)
    for planned in tc17_plans:
        body = test_tc17_admission_policies.tc17_pod(planned.case, RUN_ID)
        yield SuitePod("TC-17", "tc17_pod", name, body, expect=f"tc17:{planned.rule}")
    dra = plan_dra(platform)
    if dra is not None and dra.tenant == name:
        yield SuitePod(
            "TC-22/24/25", "dra_whole_card_pod", name, test_tc22_25_dra.dra_whole_card_pod(RUN_ID)
        )
        yield SuitePod("TC-23", "dra_refused_pod", name, test_tc22_25_dra.dra_refused_pod(RUN_ID))
        holder = test_tc22_25_dra.dra_whole_card_pod(RUN_ID, test_tc18_chargeback.DRA_HOLDER)
        yield SuitePod("TC-18", "dra_whole_card_pod", name, holder)
    if not shares_with_hami(tenant):
        # The suite sends HAMi's pods to hami tenants only (tests.acceptance.stack.hami_tenants:
        # TC-03, TC-04 … TC-16, TC-18's share); a dra tenant refuses them by design.
        return
    target = _target(tenant)
    selector = target.where.node_selector
    yield SuitePod("TC-03", "webhook_probe_pod", name, test_tc03_webhook.webhook_probe_pod(RUN_ID))
    yield SuitePod(
        "TC-16",
        "unschedulable_gpu_pod",
        name,
        test_tc16_konnectivity_down.unschedulable_gpu_pod(RUN_ID, "k"),
    )
    sharing = plan_sharing(platform)
    if sharing is not None and sharing.tenant == name:
        yield SuitePod(
            "TC-04/05",
            "share_pod",
            name,
            test_tc04_05_sharing.share_pod(sharing, selector, RUN_ID, "share-1"),
        )
        yield SuitePod(
            "TC-06",
            "oversized_pod",
            name,
            test_tc06_memory_limit.oversized_pod(sharing, selector, RUN_ID, "mem-over"),
        )
        sizes = accumulation_sizes(target.card.memory_mib)
        for size, pod in ((sizes.holder_mib, "mem-holder"), (sizes.second_mib, "mem-second")):
            yield SuitePod(
                "TC-06",
                "accumulation_pod",
                name,
                test_tc06_memory_limit.accumulation_pod(size, selector, RUN_ID, pod),
            )
    for quota in tenant.gpu_quotas:
        left = {"nvidia.com/gpumem": quota.gpu_memory_mib, "nvidia.com/gpucores": quota.gpu_cores}
        yield SuitePod(
            "TC-10",
            "cards_over_quota_pod",
            name,
            test_tc10_quotas.cards_over_quota_pod(quota, RUN_ID, "c"),
            quota_left=left,
        )
        yield SuitePod(
            "TC-10",
            "memory_over_quota_pod",
            name,
            test_tc10_quotas.memory_over_quota_pod(quota, RUN_ID, "m"),
            "hami: exceeding resource quota",
            left,
        )
    gpu = [
        ("TC-11", "memory_cap_pod", test_tc11_memory_cap.memory_cap_pod(target, RUN_ID)),
        (
            "TC-12/14",
            "unrestricted_compute_pod",
            gpu_live.unrestricted_compute_pod(target, RUN_ID, "u"),
        ),
        (
            "TC-12",
            "limited_compute_pod",
            test_tc12_compute_share.limited_compute_pod(target, RUN_ID),
        ),
        ("TC-15", "holding_pod", test_tc15_recovery.holding_pod(target, RUN_ID, "holder")),
        ("TC-15", "newcomer_pod", test_tc15_recovery.newcomer_pod(target, RUN_ID)),
    ]
    gpu += [
        (
            "TC-14",
            "interference_pod",
            test_tc14_interference.interference_pod(target, RUN_ID, f"s{i}", share),
        )
        for i, share in enumerate(INTERFERENCE_SHARES)
    ]
    reclaim = reclaim_sizes(target.card.memory_mib)
    for how in ("delete", "exit"):
        gpu += [
            ("TC-13", "hog_pod", test_tc13_reclamation.hog_pod(target, RUN_ID, how, reclaim)),
            ("TC-13", "waiter_pod", test_tc13_reclamation.waiter_pod(target, RUN_ID, how, reclaim)),
        ]
    for tc, builder, body in gpu:
        yield SuitePod(tc, builder, name, body)
    yield SuitePod(
        "TC-18", "chargeback_share_pod", name, test_tc18_chargeback.chargeback_share_pod(RUN_ID)
    )


def _good_builder(tenant: Tenant) -> str:
    return "good_dra_pod" if tenant.gpu_sharing == "dra" else "good_gpu_pod"


# The lab with tenant-a on DRA (tests/unit/test_dra_config.py): the stack files' tenants are all
# HAMi's, and the DRA cases (TC-22 ... TC-25) build their pods only for a dra tenant.
LAB_DRA = "lab-dra"


def _platform(stack: str) -> PlatformConfig:
    if stack == LAB_DRA:
        from components.stack import parse_platform
        from tests.unit.test_dra_config import dra_lab

        return parse_platform(dra_lab())
    return load_platform(stack)


def _cases() -> list[tuple[str, PlatformConfig, Tenant]]:
    found = []
    for stack in ("lab", "prod", LAB_DRA):
        platform = _platform(stack)
        found += [(stack, platform, tenant) for tenant in platform.tenants]
    return found


CASES = _cases()


@functools.cache
def tc17_plans(stack: str, tenant_name: str) -> list[Any]:
    """TC-17's plan for one tenant (cached: each case is evaluated with cel-python, ~40 ms)."""
    platform = _platform(stack)
    tenant = next(t for t in platform.tenants if t.name == tenant_name)
    return test_tc17_admission_policies.plan_cases(platform, tenant, RUN_ID)


@pytest.mark.parametrize(
    ("stack", "platform", "tenant"), CASES, ids=[f"{s}-{t.name}" for s, _, t in CASES]
)
def test_every_suite_pod_gets_the_verdict_its_test_expects(
    stack: str, platform: PlatformConfig, tenant: Tenant
) -> None:
    problems: list[str] = []
    planned_cases = tc17_plans(stack, tenant.name)
    plans = {p.rule: p for p in planned_cases}
    for pod in suite_pods(platform, tenant, planned_cases):
        labels: dict[str, str] = {}
        if pod.expect.startswith("tc17:"):
            planned = plans[pod.expect.split(":", 1)[1]]
            labels = dict(planned.case.namespace_labels)
        answer = expected_answer(
            platform,
            tenant,
            pod.body,
            NAMESPACE,
            namespace_labels=labels,
            quota_left=pod.quota_left,
        )
        what = f"{pod.tc} {pod.builder} ({pod.body['metadata']['name']})"
        if pod.expect == "admitted":
            if not answer.admitted:
                problems.append(f"{what} refused by {answer.refused_by}: {answer.message}")
        elif pod.expect.startswith("hami: "):
            if answer.refused_by != "hami" or pod.expect[6:] not in answer.message:
                problems.append(
                    f"{what}: expected HAMi to refuse it ({pod.expect[6:]}), got {answer}"
                )
        else:
            planned = plans[pod.expect.split(":", 1)[1]]
            if (
                answer.admitted != planned.expected.admitted
                or answer.rule_ids[:1] != planned.expected.rule_ids[:1]
            ):
                wanted = planned.expected.message or "admitted"
                problems.append(f"{what}: {answer.message or 'admitted'}, TC-17 expects {wanted}")
            if (
                not answer.admitted
                and answer.refused_by == "policy"
                and answer.rule_ids[0] != planned.rule
            ):
                problems.append(
                    f"{what}: refused first by {answer.rule_ids[0]}, TC-17 shows {planned.rule}"
                )
    assert problems == [], f"{stack}/{tenant.name}: " + "; ".join(problems)


def test_the_tc10_card_pod_of_before_would_have_been_refused_by_the_policy() -> None:
    # The check can fail: the card pod as TC-10 built it before (gpucores: 0) is refused by the
    # tenant's own hami-gpucores rule, so TC-10 judged "refused for another reason".
    platform = load_platform("lab")
    tenant = next(t for t in platform.tenants if t.gpu_quotas)
    body = test_tc10_quotas.cards_over_quota_pod(tenant.gpu_quotas[0], RUN_ID, "c")
    limits = body["spec"]["containers"][0]["resources"]["limits"]
    limits["nvidia.com/gpucores"] = "0"
    answer = expected_answer(platform, tenant, body, NAMESPACE)
    assert answer.refused_by == "policy"
    assert answer.rule_ids[0] == "hami-gpucores"


def test_the_tc10_card_pod_is_judged_only_where_hamis_quota_has_room() -> None:
    platform = load_platform("lab")
    tenant = next(t for t in platform.tenants if t.gpu_quotas)
    quota = tenant.gpu_quotas[0]
    assert test_tc10_quotas.card_pod_fits_hamis_quota(quota, 0, 0) is None
    full = test_tc10_quotas.card_pod_fits_hamis_quota(quota, 0, quota.gpu_cores - quota.gpus)
    assert full is not None
    assert "cannot run" in full


def _bodies_built_outside_functions(path: Path) -> list[str]:
    """``module:function`` (or ``module:<module>``) of every call to a pod builder, except inside
    the functions this file sends (and the builders' own definitions)."""
    tree = ast.parse(path.read_text(encoding="utf-8"))
    found: list[str] = []

    def visit(node: ast.AST, function: str) -> None:
        for child in ast.iter_child_nodes(node):
            name = function
            if isinstance(child, ast.FunctionDef | ast.AsyncFunctionDef):
                name = child.name
            if (
                isinstance(child, ast.Call)
                and isinstance(child.func, ast.Name)
                and child.func.id in BUILDERS
            ):
                found.append(f"{path.stem}:{function}")
            visit(child, name)

    visit(tree, "<module>")
    return found


SENT = {
    "marker_pod", "dns_probe_pod", "webhook_probe_pod", "unschedulable_gpu_pod", "share_pod",
    "oversized_pod", "accumulation_pod", "cards_over_quota_pod", "memory_over_quota_pod",
    "memory_cap_pod", "unrestricted_compute_pod", "limited_compute_pod", "holding_pod",
    "newcomer_pod", "interference_pod", "hog_pod", "waiter_pod", "good_gpu_pod", "good_dra_pod",
    "tc17_pod",
    "chargeback_share_pod", "dry_run_pod", "dra_whole_card_pod", "dra_refused_pod",
    # the builders themselves, one calling another
    "probe_pod", "compute_pod", "probe_body", "compute_body",
}  # fmt: skip


def test_the_catalogue_holds_every_pod_the_suite_builds() -> None:
    outside = [
        where
        for path in sorted(SUITE.glob("*.py"))
        for where in _bodies_built_outside_functions(path)
        if where.split(":", 1)[1] not in SENT
    ]
    assert outside == [], "pods built outside a function the cross-check sends: " + ", ".join(
        outside
    )
    built = {
        pod.builder
        for stack, platform, tenant in CASES
        for pod in suite_pods(platform, tenant, tc17_plans(stack, tenant.name))
    }
    assert built == SENT - {"probe_pod", "compute_pod", "probe_body", "compute_body"}


def test_the_guard_sees_a_new_pod_built_inline(tmp_path: Path) -> None:
    sample = tmp_path / "test_tc99_new.py"
    sample.write_text("def test_x():\n    body = pod_body('x', 'r')\n", encoding="utf-8")
    assert _bodies_built_outside_functions(sample) == ["test_tc99_new:test_x"]


def test_a_rule_that_refused_a_suite_pod_would_be_caught() -> None:
    # Were a rule to refuse what TC-12 sends (GPU_CORE_UTILIZATION_POLICY=force), the check
    # above would name it: here the same pod with 'disable' is refused by hami-core-controls.
    platform = load_platform("prod")
    tenant = platform.tenants[0]
    body = copy.deepcopy(test_tc12_compute_share.limited_compute_pod(_target(tenant), RUN_ID))
    for variable in body["spec"]["containers"][0]["env"]:
        if variable["name"] == "GPU_CORE_UTILIZATION_POLICY":
            variable["value"] = "disable"
    answer = expected_answer(platform, tenant, body, NAMESPACE)
    assert answer.rule_ids[:1] == ("hami-core-controls",)


def _answer(
    message: str, rule_ids: tuple[str, ...] = ("hami-gpucores",), by: str = "policy"
) -> TenantAnswer:
    return TenantAnswer(False, by, message, rule_ids, True, None)


def test_tc17s_judge_matches_the_api_servers_words() -> None:
    platform = load_platform("lab")
    tenant = platform.tenants[0]
    plans = tc17_plans("lab", tenant.name)
    assert {p.rule for p in plans} == test_tc17_admission_policies.rules_to_show(tenant)
    for planned in plans:
        expected = planned.expected
        if expected.admitted:
            assert refusal_problem(expected, None) is None
            assert refusal_problem(expected, "refused") is not None
            continue
        assert refusal_problem(expected, expected.message) is None, planned.rule
        assert refusal_problem(expected, None) == "admitted"
        said_by = {"policy": f"{(expected.rule_ids or ('',))[0]}: ", "hami": "vgpu.hami.io"}
        other = expected.message.replace(said_by.get(expected.refused_by, "RuntimeClass"), "x: ")
        assert other != expected.message
        assert refusal_problem(expected, other) is not None, planned.rule


def test_tc17_expects_the_runtimeclass_plugin_where_the_tenant_has_no_nvidia_class() -> None:
    """The lab's tenants (mock pools) have no RuntimeClass ``nvidia``: the API server's built-in
    RuntimeClass plugin refuses TC-17's ``nvidia-runtime-class`` pod before any webhook or policy
    (kubernetes v1.35.0 plugin/pkg/admission/runtimeclass/admission.go:142-159), so TC-17 must
    expect that answer there; prod's tenants have the class and the policy's rule answers."""
    lab = {p.rule: p for p in tc17_plans("lab", "tenant-a")}["nvidia-runtime-class"]
    assert lab.expected.refused_by == "runtimeclass"
    live = f'pods "{lab.case.name}" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
    assert refusal_problem(lab.expected, live) is None
    policy_words = "ValidatingAdmissionPolicy ... denied request: nvidia-runtime-class: ..."
    assert refusal_problem(lab.expected, policy_words) is not None
    prod_tenant = load_platform("prod").tenants[0].name
    prod = {p.rule: p for p in tc17_plans("prod", prod_tenant)}["nvidia-runtime-class"]
    assert prod.expected.refused_by == "policy"
    assert prod.expected.rule_ids[0] == "nvidia-runtime-class"


def test_tc17_matches_a_computed_message_by_its_prefix() -> None:
    # tenant-max-gpumem has a messageExpression: the API server says the computed text, never
    # the static message, so matching the static one was a certain false alarm.
    platform = load_platform("lab")
    tenant = platform.tenants[0]
    admission = tenant.admission.model_copy(update={"max_gpu_memory_mib": 4096})
    tenant = tenant.model_copy(update={"admission": admission})
    plans = {p.rule: p for p in test_tc17_admission_policies.plan_cases(platform, tenant, RUN_ID)}
    planned = plans["tenant-max-gpumem"]
    message = planned.expected.message
    assert "denied request: tenant-max-gpumem: a container asks for more than 4096 MiB" in message
    assert refusal_problem(planned.expected, message) is None
    static = (
        message.split("denied request: ")[0]
        + "denied request: tenant-max-gpumem: a container asks for more nvidia.com/gpumem "
        "than this tenant allows per container"
    )
    assert refusal_problem(planned.expected, static) is not None


def test_hamis_own_refusals_are_matched_by_their_text() -> None:
    expected = _answer(f"{WEBHOOK}: pod has node assigned", (), "hami")
    assert refusal_problem(expected, f"{WEBHOOK}: pod has node assigned") is None
    assert (
        refusal_problem(
            expected, 'pods "x" is forbidden: ValidatingAdmissionPolicy ... hami-node-name: ...'
        )
        is not None
    )


def test_tc17_user_keeps_nothing_of_the_admins() -> None:
    import kubernetes.client as k8s

    from tests.acceptance.kube import Cluster

    configuration = k8s.Configuration()
    configuration.api_key = {"authorization": "admin-token"}
    configuration.api_key_prefix = {"authorization": "Bearer"}
    configuration.refresh_api_key_hook = lambda c: c.api_key.update(authorization="admin-token")
    configuration.cert_file = "/admin.crt"
    configuration.key_file = "/admin.key"
    admin = Cluster(name="t", api=k8s.ApiClient(configuration))
    user = test_tc17_admission_policies.user_client(admin, "user-token")
    c = user.api.configuration
    assert c.refresh_api_key_hook is None
    assert c.api_key_prefix == {}
    assert c.api_key == {"authorization": "Bearer user-token"}
    assert c.cert_file is None
    assert c.key_file is None
    assert c.get_api_key_with_prefix("authorization") == "Bearer user-token"
    assert configuration.api_key == {"authorization": "admin-token"}  # the admin's is untouched


def test_tc17_retries_only_the_authorizers_refusal_of_the_user() -> None:
    """A replica whose RBAC cache lags refuses the user, not the pod: retried; an admission
    answer never is."""
    rbac = (
        'pods "tc17-x" is forbidden: User "system:serviceaccount:acceptance-r0:'
        'acceptance-tenant-user" cannot create resource "pods" in API group "" in the '
        'namespace "acceptance-r0"'
    )
    assert test_tc17_admission_policies.not_yet_authorized(403, rbac)
    assert not test_tc17_admission_policies.not_yet_authorized(
        403, 'pods "tc17-x" is forbidden: pod rejected: RuntimeClass "nvidia" not found'
    )
    assert not test_tc17_admission_policies.not_yet_authorized(
        422, "ValidatingAdmissionPolicy ... denied request: hami-gpucores: ..."
    )


@pytest.mark.parametrize(
    ("stack", "platform", "tenant"), CASES, ids=[f"{s}-{t.name}" for s, _, t in CASES]
)
def test_tc17_has_a_case_for_every_rule_it_must_show(
    stack: str, platform: PlatformConfig, tenant: Tenant
) -> None:
    """TC-17 fails live on a tenant where a rule it must show has no case (``rules_to_show``):
    on a dra tenant HAMi's webhook rewrites the bare card before the policy, which then refuses
    it by dra-tenant-no-hami-resources, so hami-no-bare-card has no case there."""
    planned = {p.rule for p in tc17_plans(stack, tenant.name)}
    assert test_tc17_admission_policies.rules_to_show(tenant) - planned == set()


def test_the_dra_cases_templates_pass_the_tenants_claim_policy() -> None:
    """TC-22's and TC-23's ResourceClaimTemplates, created by the suite before their pods, go
    through the tenant's claim policy (``claimPolicy``): TC-23 must reach the scheduler, so its
    refusal cannot be a count the policy refuses (``dra-card-count``) but a card no node has."""
    from components.admission_policies import (
        admission_binding,
        admission_params,
        admission_policy,
        claim_rule_definitions,
        device_sharing,
    )
    from components.tenant_specs import tenant_labels
    from tests.acceptance.admission_model import DRA_CLASSES
    from tests.policies.vap_eval import evaluate_policy

    platform = _platform(LAB_DRA)
    plan = plan_dra(platform)
    assert plan is not None
    tenant = next(t for t in platform.tenants if t.name == plan.tenant)
    rules, labels = claim_rule_definitions(), tenant_labels(tenant.name)
    policy = admission_policy(rules, labels)
    binding = admission_binding(rules, "Deny", [], labels)
    params = admission_params(rules, tenant.admission, labels, device_sharing(tenant, DRA_CLASSES))
    namespace = {"metadata": {"name": NAMESPACE}}
    templates = {
        "TC-22": test_tc22_25_dra.claim_template("dra-whole-gpu", NAMESPACE, RUN_ID, 1),
        "TC-23": test_tc22_25_dra.refused_template(NAMESPACE, RUN_ID, plan.refused_memory_mib),
    }
    for tc, template in templates.items():
        verdict = evaluate_policy(policy, binding, template, namespace, [params])
        assert verdict.judged, tc
        assert verdict.admitted, (tc, verdict.messages)
    # It can fail: TC-23's request as it was (one card more than a node has) is refused.
    too_many = test_tc22_25_dra.claim_template("x", NAMESPACE, RUN_ID, plan.cards_per_node + 1)
    refused = evaluate_policy(policy, binding, too_many, namespace, [params])
    assert any(m.startswith("dra-card-count") for m in refused.messages), refused.messages
