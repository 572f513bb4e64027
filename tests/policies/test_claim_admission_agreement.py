"""Issue 43 point 5: ResourceClaims and ResourceClaimTemplates judged at admission, on both
enforcers, from the shared rule definitions (``claimPolicy`` in admission_rules.json).

One table of claims, each judged by

* the **pack**: ``hami-admission-rules`` (cel-python on the rules file) on a stack that registers
  the claim, the tenant's params ConfigMap and the claim policy's binding as the program builds
  them (``components.admission_policies``);
* the **tenant API server**: the rendered claim ValidatingAdmissionPolicy and Binding, evaluated
  by ``vap_eval`` on the object as the API server hands it to the policy (CREATE; an UPDATE,
  which carries the same immutable spec, is not judged).

Both must name the rules the table names, and each rule is shown able to fail. The same table
runs on a real kube-apiserver in tests/local/test_tenant_admission_on_a_real_server.py.
"""

from __future__ import annotations

import copy
import dataclasses
from dataclasses import dataclass, field
from typing import Any

import pytest
from gpu_platform_policies.admission import Rule, check_admission, load_claim_rules
from gpu_platform_policies.model import Stack, from_policy_resource

from components import dra
from components.admission_policies import (
    DeviceSharing,
    admission_binding,
    admission_params,
    admission_policy,
    claim_rule_definitions,
    rule_definitions,
)
from components.config import AdmissionSettings
from tests.policies.builders import NAMESPACE, policy_resource
from tests.policies.test_admission_agreement import DRA, HAMI, LABELS
from tests.policies.vap_eval import Verdict, evaluate_policy

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
VAP = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicy"
BINDING = "kubernetes:admissionregistration.k8s.io/v1:ValidatingAdmissionPolicyBinding"
TYPES = {
    "ResourceClaim": "kubernetes:resource.k8s.io/v1:ResourceClaim",
    "ResourceClaimTemplate": "kubernetes:resource.k8s.io/v1:ResourceClaimTemplate",
}
CLASS = "gpu.example.com"  # the lab's dra-example-driver v0.4.0 DeviceClass (components.lab)
ADMIN_LABEL = "resource.kubernetes.io/admin-access"


@dataclass(frozen=True)
class ClaimCase:
    name: str
    kind: str  # ResourceClaim or ResourceClaimTemplate
    spec: dict[str, Any]  # the ResourceClaimSpec
    expected: frozenset[str] = frozenset()
    sharing: DeviceSharing = DRA
    namespace: str = "default"
    namespace_labels: dict[str, str] = field(default_factory=dict)


def exactly(**fields: Any) -> dict[str, Any]:
    """A claim spec of one request ``gpu``: exactly one card of the lab's class, changed."""
    request = {"deviceClassName": CLASS, "allocationMode": "ExactCount", "count": 1, **fields}
    return {"devices": {"requests": [{"name": "gpu", "exactly": request}]}}


def program_spec(cards: int = 1, memory_mib: int | None = 20480) -> dict[str, Any]:
    """What components.dra writes for a declared whole-card workload."""
    return dra.claim_spec(dra.CardRequest(cards, memory_mib, 100), CLASS, CLASS)


def bad(*rules: str) -> frozenset[str]:
    return frozenset(rules)


FIRST_AVAILABLE = {
    "devices": {
        "requests": [
            {
                "name": "gpu",
                "firstAvailable": [{"name": "big", "deviceClassName": CLASS, "count": 2}],
            }
        ]
    }
}

CASES = [
    ClaimCase("good-template-as-the-program-writes", "ResourceClaimTemplate", program_spec()),
    ClaimCase("good-claim-as-the-program-writes", "ResourceClaim", program_spec()),
    ClaimCase("good-template-four-cards", "ResourceClaimTemplate", program_spec(cards=4)),
    ClaimCase("good-claim-count-defaulted", "ResourceClaim", exactly(count=None)),
    ClaimCase("good-admin-access-false", "ResourceClaim", exactly(adminAccess=False)),
    ClaimCase(
        "bad-admin-access-template",
        "ResourceClaimTemplate",
        exactly(adminAccess=True),
        bad("dra-admin-access"),
    ),
    ClaimCase(
        "bad-admin-access-claim",
        "ResourceClaim",
        exactly(adminAccess=True),
        bad("dra-admin-access"),
    ),
    ClaimCase(
        # The API server's own rule lets this one through (the label grants admin access,
        # kubernetes v1.35.0 pkg/registry/resource/utils.go:31-67); the platform does not.
        "bad-admin-access-in-labelled-namespace",
        "ResourceClaim",
        exactly(adminAccess=True),
        bad("dra-admin-access"),
        namespace="monitoring",
        namespace_labels={ADMIN_LABEL: "true"},
    ),
    ClaimCase(
        "bad-unknown-class",
        "ResourceClaimTemplate",
        exactly(deviceClassName="gpu.nvidia.com"),
        bad("dra-device-class"),
    ),
    ClaimCase(
        "bad-allocation-mode-all",
        "ResourceClaim",
        exactly(allocationMode="All", count=None),
        bad("dra-exact-count"),
    ),
    ClaimCase(
        "bad-more-cards-than-a-node",
        "ResourceClaimTemplate",
        program_spec(cards=5),
        bad("dra-card-count"),
    ),
    ClaimCase("bad-first-available", "ResourceClaim", FIRST_AVAILABLE, bad("dra-exactly")),
    ClaimCase(
        "bad-claim-on-hami-tenant",
        "ResourceClaimTemplate",
        program_spec(),
        # No DeviceClass is the platform's on a hami tenant either.
        bad("dra-claims-need-dra", "dra-device-class"),
        sharing=HAMI,
    ),
    ClaimCase(
        "bad-everything",
        "ResourceClaim",
        exactly(deviceClassName="other", allocationMode="All", count=None, adminAccess=True),
        bad("dra-device-class", "dra-exact-count", "dra-admin-access"),
    ),
]


def _without_none(spec: dict[str, Any]) -> dict[str, Any]:
    out = copy.deepcopy(spec)
    for request in out["devices"]["requests"]:
        if "exactly" in request:
            request["exactly"] = {k: v for k, v in request["exactly"].items() if v is not None}
    return out


def claim_object(case: ClaimCase, name: str | None = None) -> dict[str, Any]:
    """The object as a user sends it (and as the API server stores it: count defaults to 1 for
    ExactCount at admission, which the rules read as absent-or-1 alike)."""
    spec = _without_none(case.spec)
    metadata = {"name": name or case.name, "namespace": case.namespace}
    body = {"spec": spec} if case.kind == "ResourceClaimTemplate" else spec
    return {
        "apiVersion": "resource.k8s.io/v1",
        "kind": case.kind,
        "metadata": metadata,
        "spec": body,
    }


def rendered_claims(
    sharing: DeviceSharing, mode: str = "Deny", policy_spec: dict[str, Any] | None = None
) -> tuple[dict[str, Any], dict[str, Any], dict[str, Any]]:
    rules = claim_rule_definitions()
    policy = admission_policy(rules, LABELS)
    if policy_spec is not None:
        policy["spec"] = policy_spec
    binding = admission_binding(rules, mode, [], LABELS)
    settings = AdmissionSettings(mode=mode)  # type: ignore[arg-type]
    params = admission_params(rule_definitions(), settings, LABELS, sharing)
    return policy, binding, params


def api_server(
    case: ClaimCase, operation: str = "CREATE", policy_spec: dict[str, Any] | None = None
) -> Verdict:
    policy, binding, params = rendered_claims(case.sharing, policy_spec=policy_spec)
    namespace = {"metadata": {"name": case.namespace, "labels": dict(case.namespace_labels)}}
    return evaluate_policy(policy, binding, claim_object(case), namespace, [params], operation)


def pack_stack(case: ClaimCase, with_params: bool = True) -> Stack:
    policy, binding, params = rendered_claims(case.sharing)
    obj = claim_object(case)
    obj["metadata"]["labels"] = dict(LABELS)
    resources = [policy_resource(TYPES[case.kind], case.name, obj)]
    if with_params:
        resources += [
            policy_resource(CONFIG_MAP, "limits", params),
            policy_resource(VAP, "claim-policy", policy),
            policy_resource(BINDING, "claim-binding", binding),
        ]
    if case.namespace_labels:
        ns = {"metadata": {"name": case.namespace, "labels": {**LABELS, **case.namespace_labels}}}
        resources.append(policy_resource(NAMESPACE, "ns", ns))
    return Stack(from_policy_resource(r) for r in resources)


def pack_rule_ids(case: ClaimCase, claim_rules: Any = None, with_params: bool = True) -> set[str]:
    violations = check_admission(pack_stack(case, with_params), claim_rules=claim_rules)
    return {v.message.split(": ", 2)[1] for v in violations}


def test_the_table_covers_every_claim_rule() -> None:
    assert len({c.name for c in CASES}) == len(CASES)
    covered = set().union(*(c.expected for c in CASES))
    assert covered == {rule.id for rule in load_claim_rules().rules}
    assert sum(1 for c in CASES if not c.expected) >= 5


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_both_enforcers_give_the_tables_verdict(case: ClaimCase) -> None:
    vap = api_server(case, "CREATE")
    assert vap.judged
    assert vap.rule_ids == set(case.expected), vap.messages
    assert vap.admitted == (not case.expected)
    assert pack_rule_ids(case) == set(case.expected)


def test_a_claim_policy_judges_no_pod_and_the_pod_policy_no_claim() -> None:
    policy, binding, params = rendered_claims(DRA)
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "p"}, "spec": {}}
    namespace = {"metadata": {"name": "default"}}
    assert not evaluate_policy(policy, binding, pod, namespace, [params]).judged
    pod_policy = admission_policy(rule_definitions(), LABELS)
    claim = claim_object(CASES[0])
    assert not evaluate_policy(pod_policy, binding, claim, namespace, [params]).judged


def test_the_claim_binding_leaves_no_namespace_out() -> None:
    """kube-system too: an adminAccess claim there reaches every card as well."""
    _policy, binding, _params = rendered_claims(DRA)
    assert binding["spec"]["matchResources"] == {"namespaceSelector": {}}
    case = next(c for c in CASES if c.name == "bad-admin-access-claim")
    assert not api_server(dataclasses.replace(case, namespace="kube-system")).admitted


def test_a_user_program_without_the_tenants_params_is_judged_by_the_rules_that_need_none() -> None:
    """A stack that declares claims but not the tenant's params (a user's program): the shape
    rules still refuse; the class and count rules, which need the params, cannot judge."""
    by_name = {c.name: c for c in CASES}
    assert pack_rule_ids(by_name["bad-admin-access-claim"], with_params=False) == {
        "dra-admin-access"
    }
    assert pack_rule_ids(by_name["bad-unknown-class"], with_params=False) == set()


@pytest.mark.parametrize("rule", [r.id for r in load_claim_rules().rules])
def test_each_claim_rule_can_fail(rule: str) -> None:
    """With the rule's expression replaced by ``true`` in both enforcers, a case the table
    refuses for it gets through (or loses that rule), so the table's assertions would fail."""
    case = next(c for c in CASES if rule in c.expected)
    policy, _binding, _params = rendered_claims(case.sharing)
    index = [v["message"].split(":", 1)[0] for v in policy["spec"]["validations"]].index(rule)
    spec = copy.deepcopy(policy["spec"])
    spec["validations"][index]["expression"] = "true"
    assert rule not in api_server(case, policy_spec=spec).rule_ids
    rules = load_claim_rules()
    switched = dataclasses.replace(
        rules,
        rules=tuple(Rule(r.id, "true", r.message) if r.id == rule else r for r in rules.rules),
    )
    assert rule not in pack_rule_ids(case, claim_rules=switched)


@pytest.mark.parametrize("case", CASES, ids=[c.name for c in CASES])
def test_an_update_is_never_judged(case: ClaimCase) -> None:
    """Kubernetes updates every allocated claim (the scheduler's delete-protection finalizer,
    and the resourceclaim controller removing it): judged against params that changed since
    the claim was created, those updates would be refused and the claim never deleted."""
    assert not api_server(case, "UPDATE").judged
