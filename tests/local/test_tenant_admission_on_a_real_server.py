"""Point 4 of issue 42: the tenant's admission policy on a real tenant API server.

A kube-apiserver v1.35.0 configured as Kamaji runs a tenant's (its own etcd prefix, Kamaji's
admission plugins) with kube-controller-manager's ServiceAccount, ClusterRole aggregation and
ValidatingAdmissionPolicy status controllers. On it:

* the program's ValidatingAdmissionPolicy of every tenant of both stacks, as recorded under
  Pulumi mocks, is type-checked by the real controller: ``status.typeChecking`` must name no
  expression warning (a field path or function the real CEL environment does not know);
* the admission table of ``tests/policies/test_admission_agreement.py`` is sent as real pod
  CREATE requests, with a namespace user's credentials (a RoleBinding to ``edit``), after the
  program's policy, binding and params ConfigMap of each case's settings are applied. Each pod is
  sent in the form HAMi's mutating webhook writes it (``vap_eval.tenant_answer``; the webhook
  itself does not run here), or as written where HAMi would refuse it itself. The real server's
  verdict and its error text must equal what ``vap_eval`` (the offline model of the same server,
  which the pack agrees with case by case) computes for that same pod, and where HAMi changes
  nothing, the rules the table names.

Real CREATEs, not dry-runs, although the policy plugin runs on dry-run requests as well (it never
looks at ``IsDryRun``: k8s.io/apiserver v0.35.0 pkg/admission/plugin/policy has no such check;
only webhooks with side effects are skipped on dry-run, pkg/admission/plugin/webhook/validating/
dispatcher.go:249-254): a user's ``kubectl apply`` is a CREATE. Dry-runs are used only to wait
until the server has picked up changed params (below).
"""

from __future__ import annotations

import copy
import dataclasses
import time
from collections.abc import Callable, Iterator, Mapping
from dataclasses import dataclass
from typing import Any

import pytest

from components.admission_policies import DeviceSharing
from components.config import AdmissionSettings, DeviceQuota
from components.tenant_specs import device_quota
from tests.local.conftest import TENANT_CONTROLLERS
from tests.local.kube import KAMAJI_ADMISSION_PLUGINS, APIServer, Kube, KubeError, wait_for
from tests.policies.test_admission_agreement import (
    CASES,
    Case,
    live_answer,
    namespace_of,
    pod_of,
    rendered,
)
from tests.policies.test_claim_admission_agreement import (
    ADMIN_LABEL,
    DRA,
    HAMI,
    ClaimCase,
    claim_object,
    rendered_claims,
)
from tests.policies.test_claim_admission_agreement import CASES as CLAIM_CASES
from tests.policies.vap_eval import Verdict, as_admitted, evaluate_policy, forbidden_message
from tests.support.harness import Recording

USER = "tenant-developer"
USER_GROUPS = ("tenant-developers",)
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
# The policy picks up a changed params ConfigMap or binding through informers, asynchronously.
SETTLE_TIMEOUT_S = 60.0


@dataclass(frozen=True)
class Sent:
    """One case as sent: the pod and what the offline model says the server answers."""

    case: Case
    pod: dict[str, Any]
    hami_refuses: bool
    model: Verdict
    expected_message: str


@dataclass(frozen=True)
class Answer:
    admitted: bool
    status: int
    message: str
    warnings: tuple[str, ...]


def developer_edit(namespace: str) -> dict[str, Any]:
    """The namespace user's ``edit`` in ``namespace``, as a tenant admin grants a team member."""
    return {
        "apiVersion": "rbac.authorization.k8s.io/v1",
        "kind": "RoleBinding",
        "metadata": {"name": "developer-edit", "namespace": namespace},
        "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "edit"},
        "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}],
    }


def sent_form(case: Case, name: str | None = None) -> Sent:
    """The pod as it reaches the policy on a live prod tenant (after HAMi's webhook), or as
    written where HAMi refuses it itself; and the model's verdict on exactly that pod. The pod
    is named ``name`` (default: the case's name: each case is created once)."""
    name = name or case.name
    policy, binding, params = rendered(case.settings, sharing=case.sharing)
    answer = live_answer(case)
    written = pod_of(case)
    written["metadata"]["name"] = name
    if answer.pod is not None:
        pod = copy.deepcopy(answer.pod)
        pod["metadata"]["name"] = name
    else:
        pod = as_admitted(written)
    model = evaluate_policy(policy, binding, as_admitted(pod), namespace_of(case), [params])
    message = (
        forbidden_message(
            name,
            str(policy["metadata"]["name"]),
            str(binding["metadata"]["name"]),
            model.messages[0],
        )
        if not model.admitted
        else ""
    )
    return Sent(case, pod, answer.pod is None, model, message)


# What a settings group shares: the tenant's ceilings and its gpuSharing (the params ConfigMap).
Settings = tuple[AdmissionSettings, DeviceSharing]


def _settings_key(case: Case) -> str:
    return case.settings.model_dump_json() + repr(case.sharing)


def _send(kube: Kube, pod: Mapping[str, Any], *, dry_run: bool) -> Answer:
    try:
        kube.create(pod, dry_run=dry_run)
    except KubeError as error:
        return Answer(False, error.status, error.message, tuple(kube.last_warnings))
    return Answer(True, 201, "", tuple(kube.last_warnings))


def _agrees(answer: Answer, sent: Sent) -> bool:
    if sent.model.admitted:
        return answer.admitted
    return (not answer.admitted) and answer.message == sent.expected_message


def _prepare(server: APIServer) -> Kube:
    """Namespaces, the GPU Operator's RuntimeClass, the namespace user and its RoleBindings;
    returns the user's client once the controllers have done their part."""
    admin = server.admin
    namespaces: dict[str, dict[str, str]] = {}
    for case in CASES:
        labels = namespaces.setdefault(case.namespace, {})
        for key, value in case.namespace_labels.items():
            assert labels.get(key, value) == value, f"{case.namespace}: conflicting labels"
            labels[key] = value
    for name, labels in namespaces.items():
        if name in ("default", "kube-system"):
            continue
        admin.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )
    # HAMi writes runtimeClassName: nvidia (prod's devicePlugin runtimeClassName); the GPU
    # Operator creates that RuntimeClass on a real tenant, and the RuntimeClass admission plugin
    # refuses a pod naming one that is not there (k8s.io/kubernetes v1.35.0
    # plugin/pkg/admission/runtimeclass/admission.go:154-158).
    admin.create(
        {
            "apiVersion": "node.k8s.io/v1",
            "kind": "RuntimeClass",
            "metadata": {"name": "nvidia"},
            "handler": "nvidia",
        }
    )
    for name in namespaces:
        admin.create(developer_edit(name))

    def aggregated() -> bool:
        rules = admin.get("rbac.authorization.k8s.io/v1", "ClusterRole", "edit").get("rules") or []
        return any(
            "pods" in (r.get("resources") or []) and "create" in (r.get("verbs") or [])
            for r in rules
        )

    wait_for(
        "ClusterRole edit aggregated (clusterrole-aggregation-controller)",
        aggregated,
        log=server.log,
    )
    for name in namespaces:

        def has_default(n: str = name) -> bool:
            try:
                admin.get("v1", "ServiceAccount", "default", n)
            except KubeError:
                return False
            return True

        wait_for(
            f"ServiceAccount {name}/default (serviceaccount-controller)",
            has_default,
            log=server.log,
        )
    return server.client(USER, USER_GROUPS)


def _apply_settings(admin: Kube, settings: Settings) -> None:
    policy, binding, params = rendered(settings[0], sharing=settings[1])
    admin.apply(policy)
    admin.apply(params)
    admin.apply(binding)


def _wait_until_in_force(
    user: Kube,
    settings: Settings,
    previous: Settings | None,
) -> str:
    """Until the server answers with ``settings``: the first case of the table whose model
    verdict under them differs from its verdict under the ``previous`` settings (or under no
    policy at all) is sent, so changed, as a dry-run until the server's answer is the new one.
    Returns "" or, after ``SETTLE_TIMEOUT_S``, what the server answered instead (a
    disagreement with the model, which ``test_every_settings_change_took_effect`` reports)."""

    def under(case: Case, chosen: Settings) -> Sent:
        changed = dataclasses.replace(case, settings=chosen[0], sharing=chosen[1])
        return sent_form(changed, name=f"settled-{case.name}")

    for case in CASES:
        sent = under(case, settings)
        old = (True, "")
        if previous is not None:
            before = under(case, previous)
            old = (before.model.admitted, before.expected_message)
        if old == (sent.model.admitted, sent.expected_message):
            continue
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        answer = _send(user, sent.pod, dry_run=True)
        while not _agrees(answer, sent):
            if time.monotonic() > deadline:
                return (
                    f"{case.name} under {settings}: model "
                    f"{sent.expected_message or 'admitted'}; server {answer.status} "
                    f"{answer.message or 'admitted'}"
                )
            time.sleep(0.3)
            answer = _send(user, sent.pod, dry_run=True)
        return ""
    return ""


@pytest.fixture(scope="module")
def tenant(start_apiserver: Callable[..., APIServer]) -> Iterator[APIServer]:
    server = start_apiserver(
        "admission-tenant",
        # The resourcequota controller fills a ResourceQuota's status.hard, without which the
        # quota admission plugin refuses nothing (test_a_dra_namespaces_device_quota_...).
        controllers=(*TENANT_CONTROLLERS, "resourcequota-controller"),
        admission_plugins=KAMAJI_ADMISSION_PLUGINS,
    )
    yield server
    server.stop()


@dataclass
class Run:
    answers: dict[str, tuple[Sent, Answer]]
    unsettled: list[str]


@pytest.fixture(scope="module")
def run(tenant: APIServer, local_summary: list[str]) -> Run:
    """Every case of the table sent once, settings group by settings group."""
    started = time.monotonic()
    user = _prepare(tenant)
    prepared = time.monotonic() - started
    groups: dict[str, list[Case]] = {}
    for case in CASES:
        groups.setdefault(_settings_key(case), []).append(case)
    results: dict[str, tuple[Sent, Answer]] = {}
    unsettled: list[str] = []
    previous: Settings | None = None
    for cases in groups.values():
        settings = (cases[0].settings, cases[0].sharing)
        _apply_settings(tenant.admin, settings)
        unsettled.append(_wait_until_in_force(user, settings, previous))
        for case in cases:
            sent = sent_form(case)
            results[case.name] = (sent, _send(user, sent.pod, dry_run=False))
        previous = settings
    local_summary.append(
        f"admission tenant: {len(results)} pods created in {len(groups)} settings groups, "
        f"{time.monotonic() - started:.0f} s (namespaces, user and controllers ready in "
        f"{prepared:.0f} s)"
    )
    return Run(results, [u for u in unsettled if u])


@pytest.fixture(scope="module")
def answers(run: Run) -> dict[str, tuple[Sent, Answer]]:
    return run.answers


def test_every_settings_change_took_effect(run: Run) -> None:
    """Each settings group's params and binding were in force before its cases were sent (a
    case whose verdict they change was answered the new way within the bound)."""
    assert run.unsettled == []


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_the_real_tenant_server_answers_as_the_model_and_the_table(
    case: Case, answers: dict[str, tuple[Sent, Answer]]
) -> None:
    sent, answer = answers[case.name]
    if sent.model.admitted:
        assert (answer.status, answer.message) == (201, "")
    else:
        # 422: every rule's reason is Invalid (components/admission_policies.py), which the
        # server answers with that code (k8s.io/apiserver v0.35.0 pkg/admission/plugin/policy/
        # validating/dispatcher.go:299-304, policy_decision.go:73-82), and the text is the
        # first denied validation's, word for word as the model writes it.
        assert (answer.status, answer.message) == (422, sent.expected_message)
    if not (case.hami or case.hami_adds):
        # HAMi changes nothing the policy judges: the table's (and so the pack's) verdict.
        assert sent.model.rule_ids == set(case.expected)
        assert answer.admitted == (not case.expected)


def _recorded_policies(recording: Recording) -> list[tuple[str, dict[str, Any]]]:
    found = []
    for reg in recording.of_type(VAP):
        found.append((reg.name, dict(reg.inputs)))
    return found


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_tenants_policy_type_checks_clean_on_the_real_server(
    stack: str, tenant: APIServer, recordings: Callable[[str, bool], Recording]
) -> None:
    """The program's policy of each tenant, as recorded, type-checked by the real controller
    (renamed per tenant so they coexist; nothing else changed, no binding: type checking does not
    need one)."""
    policies = _recorded_policies(recordings(stack, False))
    assert policies, f"{stack}: no ValidatingAdmissionPolicy recorded"
    admin = tenant.admin
    names = []
    for index, (resource, policy) in enumerate(policies):
        obj = copy.deepcopy(policy)
        obj["metadata"] = {"name": f"{obj['metadata']['name']}-{stack}-{index}"}
        created = admin.create(obj)
        names.append((resource, created["metadata"]["name"], created["metadata"]["generation"]))
    for resource, name, generation in names:
        status = wait_for(
            f"{resource}: status.typeChecking", _checked(admin, name, generation), log=tenant.log
        )
        assert (status["typeChecking"] or {}).get("expressionWarnings", []) == [], resource


def _checked(admin: Kube, name: str, generation: int) -> Callable[[], dict[str, Any] | None]:
    def probe() -> dict[str, Any] | None:
        policy = admin.get("admissionregistration.k8s.io/v1", "ValidatingAdmissionPolicy", name)
        status = policy.get("status") or {}
        if status.get("observedGeneration") == generation and "typeChecking" in status:
            return dict(status)
        return None

    return probe


def test_type_checking_names_a_field_pods_do_not_have(tenant: APIServer) -> None:
    """The check above can fail: the same policy with one expression reading a field a Pod does
    not have gets a warning from the real type checker."""
    policy, _binding, _params = rendered(AdmissionSettings())
    broken = copy.deepcopy(policy)
    broken["metadata"] = {"name": "type-check-must-warn"}
    broken["spec"]["validations"][0]["expression"] = "object.spec.containerz.size() > 0"
    created = tenant.admin.create(broken)
    status = wait_for(
        "status.typeChecking of the broken policy",
        _checked(tenant.admin, "type-check-must-warn", created["metadata"]["generation"]),
        log=tenant.log,
    )
    warnings = (status["typeChecking"] or {}).get("expressionWarnings") or []
    assert any("containerz" in w.get("warning", "") for w in warnings), warnings


CLAIM_RESOURCES = {
    "ResourceClaim": "resourceclaims.resource.k8s.io",
    "ResourceClaimTemplate": "resourceclaimtemplates.resource.k8s.io",
}


@pytest.fixture(scope="module")
def claim_answers(
    tenant: APIServer, run: Run, local_summary: list[str]
) -> dict[str, tuple[Verdict, str, Answer]]:
    """Every claim of tests/policies/test_claim_admission_agreement.py created once by the
    namespace user, under the claim policy, its binding and a dra tenant's params (after the pod
    table: ``run`` is done with the params ConfigMap). resource.k8s.io/v1 is served by default
    at v1.35.0 (DynamicResourceAllocation GA and on, kubernetes v1.35.0
    pkg/features/kube_features.go:1292-1296), and DRAAdminAccess is beta and on from 1.34
    (:1227-1230), so adminAccess reaches the policy rather than being dropped."""
    started = time.monotonic()
    admin = tenant.admin
    user = tenant.client(USER, USER_GROUPS)
    for name, labels in claim_namespaces().items():
        if name == "default":
            continue
        admin.create(
            {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": name, "labels": labels}}
        )
        admin.create(developer_edit(name))
    policy, binding, params = rendered_claims(DRA)
    for obj in (policy, params, binding):
        admin.apply(obj)
    # A claim only the policy refuses (Kubernetes itself refuses adminAccess here, see below).
    probe = next(c for c in CLAIM_CASES if c.name == "bad-unknown-class")
    wait_for(
        "the claim policy in force",
        lambda: not _send(user, claim_object(probe, "settled"), dry_run=True).admitted,
        timeout=SETTLE_TIMEOUT_S,
        log=tenant.log,
    )
    found: dict[str, tuple[Verdict, str, Answer]] = {}
    for case in CLAIM_CASES:
        sent = claim_object(case)
        namespace = {"metadata": {"name": case.namespace, "labels": dict(case.namespace_labels)}}
        model = evaluate_policy(
            policy, binding, sent, namespace, [rendered_claims(case.sharing)[2]]
        )
        expected = (
            forbidden_message(
                case.name,
                str(policy["metadata"]["name"]),
                str(binding["metadata"]["name"]),
                model.messages[0],
                CLAIM_RESOURCES[case.kind],
            )
            if not model.admitted
            else ""
        )
        if case.sharing != DRA:
            continue  # the params in force are a dra tenant's
        found[case.name] = (model, expected, _send(user, sent, dry_run=False))
    local_summary.append(
        f"admission tenant: {len(found)} claims created, {time.monotonic() - started:.0f} s"
    )
    return found


def asks_admin_access(case: ClaimCase) -> bool:
    return any(
        (r.get("exactly") or {}).get("adminAccess") is True
        for r in case.spec["devices"]["requests"]
    )


def claim_namespaces() -> dict[str, dict[str, str]]:
    found: dict[str, dict[str, str]] = {}
    for case in CLAIM_CASES:
        found.setdefault(case.namespace, {}).update(case.namespace_labels)
    return found


@pytest.mark.parametrize("case", [c for c in CLAIM_CASES if c.sharing == DRA], ids=lambda c: c.name)
def test_the_real_tenant_server_judges_claims_as_the_model_and_the_table(
    case: ClaimCase, claim_answers: dict[str, tuple[Verdict, str, Answer]]
) -> None:
    """Allowed claims (as the program writes them) are created; adminAccess (even in a namespace
    labelled resource.kubernetes.io/admin-access=true, which the server's own check accepts),
    an unknown DeviceClass, allocationMode All, too many cards and firstAvailable are refused
    with the model's text."""
    model, expected, answer = claim_answers[case.name]
    assert model.rule_ids == set(case.expected)
    if asks_admin_access(case) and case.namespace_labels.get(ADMIN_LABEL) != "true":
        # Kubernetes refuses it itself, in the registry's validation before any admission
        # policy runs (kubernetes v1.35.0 pkg/registry/resource/utils.go:31-67, called from
        # resourceclaim/strategy.go:102 and resourceclaimtemplate/strategy.go:64): the policy
        # matters where the namespace carries the label, which a tenant admin can set.
        assert answer.status == 422
        assert f"{ADMIN_LABEL}: true` label on the containing namespace" in answer.message
        return
    if case.expected:
        assert (answer.status, answer.message) == (422, expected)
    else:
        assert (answer.status, answer.message) == (201, "")


def test_a_dra_namespaces_device_quota_bounds_its_claims_on_the_real_server(
    tenant: APIServer, claim_answers: dict[str, tuple[Verdict, str, Answer]]
) -> None:
    """Issue 43 point 3: the program's deviceQuotas ResourceQuota (components.tenant_specs
    .device_quota) under the key Kubernetes' ResourceClaim evaluator charges: two claims of one
    card each fit a quota of 2, a third is refused by the quota plugin (after the claim policy,
    which admits it). A wrong key would let the third through."""
    del claim_answers  # the claim policy and a dra tenant's params are in force
    admin = tenant.admin
    namespace = "quota-check"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    quota = device_quota(
        DeviceQuota(namespace=namespace, devices=2), "tenant-a", DRA.device_classes
    )
    admin.create({"apiVersion": "v1", "kind": "ResourceQuota", **quota})

    def counted() -> bool:
        status = admin.get("v1", "ResourceQuota", "gpu-quota", namespace).get("status") or {}
        return bool(status.get("hard")) and "used" in status

    wait_for("the device quota's status (resourcequota-controller)", counted, log=tenant.log)
    one_card = next(c for c in CLAIM_CASES if c.name == "good-claim-as-the-program-writes")
    answers = []
    for index in range(3):
        claim = claim_object(dataclasses.replace(one_card, namespace=namespace), f"card-{index}")
        answers.append(_send(admin, claim, dry_run=False))
    assert [a.status for a in answers[:2]] == [201, 201], answers
    assert answers[2].status == 403, answers[2]
    assert "exceeded quota: gpu-quota" in answers[2].message
    assert f"{DRA.device_classes[0]}.deviceclass.resource.k8s.io/devices=1" in answers[2].message


def test_a_rule_switched_off_in_the_policy_lets_its_bad_pod_through(tenant: APIServer) -> None:
    """The comparison above can fail: with hami-gpumem-mib's expression replaced by ``true`` the
    real server admits the pod the table refuses for it (last in this module: it changes the
    tenant's policy)."""
    case = next(c for c in CASES if c.name == "bad-gpumem-gi")
    policy, binding, params = rendered(case.settings, sharing=case.sharing)
    index = [v["message"].split(":", 1)[0] for v in policy["spec"]["validations"]].index(
        "hami-gpumem-mib"
    )
    policy["spec"]["validations"][index]["expression"] = "true"
    for obj in (policy, params, binding):
        tenant.admin.apply(obj)
    user = tenant.client(USER, USER_GROUPS)
    sent = sent_form(case, name="switched-off")
    wait_for(
        "the bad pod admitted once the rule is switched off",
        lambda: _send(user, sent.pod, dry_run=True).admitted,
        timeout=SETTLE_TIMEOUT_S,
        log=tenant.log,
    )


def test_a_claim_made_before_the_params_changed_can_still_lose_its_finalizer(
    tenant: APIServer, claim_answers: dict[str, tuple[Verdict, str, Answer]]
) -> None:
    """The claim policy judges CREATE only. Kubernetes updates every allocated claim with plain
    UPDATEs: the scheduler adds the delete-protection finalizer (kubernetes v1.35.0
    pkg/scheduler/framework/plugins/dynamicresources/dynamicresources.go:1194-1196), the
    resourceclaim controller removes it (pkg/controller/resourceclaim/controller.go:882-885).
    After the tenant's params change (here gpuSharing dra -> hami, a supported day-2 change),
    an UPDATE judged against them would be refused by dra-claims-need-dra and the claim would
    never finish deleting. Here both updates go through while a new claim is refused."""
    del claim_answers  # the claim policy and its binding are in force
    admin = tenant.admin
    namespace = "params-flip"
    admin.create({"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": namespace}})
    good = dataclasses.replace(
        next(c for c in CLAIM_CASES if c.name == "good-claim-as-the-program-writes"),
        namespace=namespace,
    )
    _policy, _binding, dra_params = rendered_claims(DRA)
    _policy, _binding, hami_params = rendered_claims(HAMI)
    # Whatever an earlier test left in the params ConfigMap, a dra tenant's first.
    admin.apply(dra_params)
    wait_for(
        "the dra params in force",
        lambda: _send(admin, claim_object(good, "probe"), dry_run=True).admitted,
        timeout=SETTLE_TIMEOUT_S,
        log=tenant.log,
    )
    assert _send(admin, claim_object(good, "held"), dry_run=False).status == 201
    path = admin.resource("resource.k8s.io/v1", "ResourceClaim").path(namespace, "held")
    try:
        admin.apply(hami_params)
        wait_for(
            "the hami params in force",
            lambda: not _send(admin, claim_object(good, "probe"), dry_run=True).admitted,
            timeout=SETTLE_TIMEOUT_S,
            log=tenant.log,
        )
        stored = admin.call("GET", path)
        stored["metadata"]["finalizers"] = ["resource.kubernetes.io/delete-protection"]
        protected = admin.call("PUT", path, stored)
        assert protected["metadata"]["finalizers"] == ["resource.kubernetes.io/delete-protection"]
        protected["metadata"]["finalizers"] = []
        released = admin.call("PUT", path, protected)
        assert not released["metadata"].get("finalizers")
    finally:
        admin.apply(dra_params)
        wait_for(
            "the dra params in force again",
            lambda: _send(admin, claim_object(good, "probe"), dry_run=True).admitted,
            timeout=SETTLE_TIMEOUT_S,
            log=tenant.log,
        )
