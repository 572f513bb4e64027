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

from components.config import AdmissionSettings
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


def sent_form(case: Case, name: str | None = None) -> Sent:
    """The pod as it reaches the policy on a live prod tenant (after HAMi's webhook), or as
    written where HAMi refuses it itself; and the model's verdict on exactly that pod. The pod
    is named ``name`` (default: the case's name: each case is created once)."""
    name = name or case.name
    policy, binding, params = rendered(case.settings)
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


def _settings_key(settings: AdmissionSettings) -> str:
    return settings.model_dump_json()


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
        admin.create(
            {
                "apiVersion": "rbac.authorization.k8s.io/v1",
                "kind": "RoleBinding",
                "metadata": {"name": "developer-edit", "namespace": name},
                "roleRef": {
                    "apiGroup": "rbac.authorization.k8s.io",
                    "kind": "ClusterRole",
                    "name": "edit",
                },
                "subjects": [
                    {"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": USER}
                ],
            }
        )

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


def _apply_settings(admin: Kube, settings: AdmissionSettings) -> None:
    policy, binding, params = rendered(settings)
    admin.apply(policy)
    admin.apply(params)
    admin.apply(binding)


def _wait_until_in_force(user: Kube, sents: list[Sent], previous: dict[str, Sent] | None) -> None:
    """Until the server answers with the new settings: a case whose model verdict differs from
    the previous settings' (or from no policy at all) is sent as a dry-run until the server's
    answer is the new one (bounded; a server that never agrees fails that case's test)."""
    for sent in sents:
        before = previous.get(sent.case.name) if previous is not None else None
        old = (True, "") if before is None else (before.model.admitted, before.expected_message)
        if old == (sent.model.admitted, sent.expected_message):
            continue
        deadline = time.monotonic() + SETTLE_TIMEOUT_S
        while time.monotonic() < deadline:
            if _agrees(_send(user, sent.pod, dry_run=True), sent):
                return
            time.sleep(0.3)
        return


@pytest.fixture(scope="module")
def tenant(start_apiserver: Callable[..., APIServer]) -> Iterator[APIServer]:
    server = start_apiserver(
        "admission-tenant",
        controllers=TENANT_CONTROLLERS,
        admission_plugins=KAMAJI_ADMISSION_PLUGINS,
    )
    yield server
    server.stop()


@pytest.fixture(scope="module")
def answers(tenant: APIServer) -> dict[str, tuple[Sent, Answer]]:
    """Every case of the table sent once, settings group by settings group."""
    user = _prepare(tenant)
    groups: dict[str, list[Case]] = {}
    for case in CASES:
        groups.setdefault(_settings_key(case.settings), []).append(case)
    results: dict[str, tuple[Sent, Answer]] = {}
    previous: dict[str, Sent] | None = None
    for cases in groups.values():
        settings = cases[0].settings
        _apply_settings(tenant.admin, settings)
        # Every case of the table under these settings, to find one that tells old from new.
        probe = [
            sent_form(dataclasses.replace(c, settings=settings), name=f"settled-{c.name}")
            for c in CASES
        ]
        _wait_until_in_force(user, probe, previous)
        for case in cases:
            sent = sent_form(case)
            results[case.name] = (sent, _send(user, sent.pod, dry_run=False))
        previous = {s.case.name: s for s in probe}
    return results


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


def test_a_rule_switched_off_in_the_policy_lets_its_bad_pod_through(tenant: APIServer) -> None:
    """The comparison above can fail: with hami-gpumem-mib's expression replaced by ``true`` the
    real server admits the pod the table refuses for it (last in this module: it changes the
    tenant's policy)."""
    case = next(c for c in CASES if c.name == "bad-gpumem-gi")
    policy, binding, params = rendered(case.settings)
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
