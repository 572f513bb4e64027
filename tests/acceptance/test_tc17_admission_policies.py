"""TC-17 (issue 27): every tenant's API server enforces the GPU rules itself.

For every tenant whose ``admission.mode`` is ``Deny`` (the default), through the tenant's own API
server and with a **tenant user's** credentials (a ServiceAccount bound to the built-in ``edit``
ClusterRole in a fresh namespace, its token from the TokenRequest API; never the admin's: the
client keeps none of the admin's credentials or token hooks, and is used only once a
SelfSubjectAccessReview says the binding has reached the authorizer):

* one bad pod per rule of ``policies/gpu_platform_policies/admission_rules.json``, from the
  offline table (``tests/policies/test_admission_agreement.py``; the tenant ceilings only where
  the tenant sets them), chosen so that the rule is the first one the pod breaks *after* HAMi's
  mutating webhook (mutating webhooks run before validating policies, and the API server names
  only the first failed validation). What the tenant must answer comes from the offline model
  (``tests.acceptance.admission_model``): the rule's id and message (its computed message for a
  rule with a ``messageExpression``), or, where HAMi's webhook refuses or rewrites every case of
  the rule first (``hami-node-name``, ``hami-no-bare-card``, ``hami-card-count``), HAMi's own
  answer; and for ``nvidia-runtime-class`` where the tenant has no ``nvidia`` RuntimeClass (the
  lab), the API server's RuntimeClass plugin refuses the pod before any webhook or policy;
* one good GPU pod is admitted (with a node selector no node has, so it never takes a card).

Bad pods are sent as dry runs (admission runs, nothing is stored); the good one is created and
removed with its namespace. Skipped when no stack is deployed, as every live test is.
"""

from __future__ import annotations

import copy
import time
from dataclasses import dataclass
from typing import Any

import kubernetes.client as k8s
import pytest
from kubernetes.client.exceptions import ApiException

from components import dra
from components.admission_policies import rule_definitions
from components.config import PlatformConfig, Tenant
from components.tenant_values import webhook_excluded_namespaces
from tests.acceptance.admission_model import expected_answer, refusal_problem
from tests.acceptance.kube import (
    REQUEST_TIMEOUT,
    Cluster,
    api_message,
    cleanup_namespace,
    create_namespace,
    create_pod,
    describe_error,
    poll_until,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence
from tests.acceptance.workloads import (
    RUN_LABEL,
    UNSCHEDULABLE_SELECTOR,
    pod_body,
    random_suffix,
)
from tests.policies.test_admission_agreement import CASES, Case
from tests.policies.vap_eval import TenantAnswer

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

USER = "acceptance-tenant-user"
# The RBAC authorizer reads an informer cache: a new RoleBinding takes effect after a moment,
# on each API server replica on its own.
RBAC_WAIT_SECONDS = 30.0


def user_client(admin: Cluster, token: str) -> Cluster:
    """A client on the admin's API server with ``token`` and nothing else of the admin's: no
    client certificate, no ``api_key_prefix`` and no ``refresh_api_key_hook`` (which the
    kubeconfig loader installs for token and exec credentials, and which would write the admin's
    token back on every request)."""
    configuration = copy.copy(admin.api.configuration)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.api_key_prefix = {}
    configuration.refresh_api_key_hook = None
    configuration.cert_file = None
    configuration.key_file = None
    configuration.username = ""
    configuration.password = ""
    return Cluster(name=f"{admin.name} ({USER})", api=k8s.ApiClient(configuration))


def may_create_pods(user: Cluster, namespace: str) -> bool:
    review = k8s.AuthorizationV1Api(user.api).create_self_subject_access_review(
        {
            "spec": {
                "resourceAttributes": {"namespace": namespace, "verb": "create", "resource": "pods"}
            }
        },
        _request_timeout=REQUEST_TIMEOUT,
    )
    return bool(review.status and review.status.allowed)


def _tenant_user(admin: Cluster, namespace: str) -> Cluster:
    """A client with a namespace-scoped ``edit`` ServiceAccount token on the same API server,
    returned once the API server lets it create pods."""
    core = admin.core
    core.create_namespaced_service_account(
        namespace, {"metadata": {"name": USER}}, _request_timeout=REQUEST_TIMEOUT
    )
    k8s.RbacAuthorizationV1Api(admin.api).create_namespaced_role_binding(
        namespace,
        {
            "metadata": {"name": USER},
            "roleRef": {
                "apiGroup": "rbac.authorization.k8s.io",
                "kind": "ClusterRole",
                "name": "edit",
            },
            "subjects": [{"kind": "ServiceAccount", "name": USER, "namespace": namespace}],
        },
        _request_timeout=REQUEST_TIMEOUT,
    )
    token = core.create_namespaced_service_account_token(
        USER, namespace, {"spec": {"expirationSeconds": 600}}, _request_timeout=REQUEST_TIMEOUT
    ).status.token
    user = user_client(admin, token)
    if (
        poll_until(
            lambda: True if may_create_pods(user, namespace) else None,
            timeout=RBAC_WAIT_SECONDS,
            interval=1.0,
        )
        is None
    ):
        pytest.fail(
            f"{admin.name}: the edit RoleBinding in {namespace} did not take effect within "
            f"{RBAC_WAIT_SECONDS:.0f} s (SelfSubjectAccessReview: may not create pods)",
            pytrace=False,
        )
    return user


def tc17_pod(case: Case, run_id: str) -> dict[str, Any]:
    """The pod TC-17 sends for one case of the offline table."""
    body = pod_body(f"tc17-{random_suffix(5)}", run_id)
    body["metadata"]["labels"].update(case.pod_labels)
    body["spec"] = {**body["spec"], **copy.deepcopy(case.spec)}
    return body


def good_gpu_pod(run_id: str) -> dict[str, Any]:
    return pod_body(
        f"tc17-good-{random_suffix(5)}",
        run_id,
        limits={"nvidia.com/gpu": "1", "nvidia.com/gpumem": "1024", "nvidia.com/gpucores": "10"},
        node_selector=UNSCHEDULABLE_SELECTOR,
    )


def good_dra_pod(run_id: str) -> dict[str, Any]:
    """A dra tenant's good GPU pod: one card through a ResourceClaimTemplate (the platform's
    pod fields, components.dra.pod_claim_fields); admission needs no template to exist."""
    body = pod_body(f"tc17-good-{random_suffix(5)}", run_id, node_selector=UNSCHEDULABLE_SELECTOR)
    claims, resources = dra.pod_claim_fields("tc17-good-gpu")
    body["spec"]["resourceClaims"] = claims
    body["spec"]["containers"][0]["resources"] = resources
    return body


def good_pod(tenant: Tenant, run_id: str) -> dict[str, Any]:
    """The GPU pod TC-17 expects the tenant to admit, in the tenant's own way of taking cards
    (a HAMi pod on a dra tenant is refused by dra-tenant-no-hami-resources)."""
    return good_dra_pod(run_id) if tenant.gpu_sharing == "dra" else good_gpu_pod(run_id)


def ceiling_case(ceiling: int) -> Case:
    over = ceiling + 1
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": str(over), "nvidia.com/gpucores": "10"}
    return Case(
        "over-this-tenants-ceiling",
        {
            "containers": [
                {"name": "main", "image": "busybox:1.37.0", "resources": {"limits": limits}}
            ]
        },
        frozenset({"tenant-max-gpumem"}),
    )


@dataclass(frozen=True)
class Planned:
    """One bad case TC-17 sends for a rule, where, and what the tenant must answer."""

    rule: str
    case: Case
    labelled_namespace: bool
    expected: TenantAnswer


def plan_cases(platform: PlatformConfig, tenant: Tenant, run_id: str) -> list[Planned]:
    """Per rule, the first case of the table that the tenant's policy refuses naming that rule
    first, after HAMi's webhook and under the tenant's own settings; for a rule no case reaches
    that way, its first case with the answer that comes first: HAMi's webhook refuses or
    rewrites its cases (the table's ``hami`` column), or, for ``nvidia-runtime-class`` in a
    tenant without that RuntimeClass (the lab's mock pools), the API server's RuntimeClass
    plugin refuses them before any webhook or policy."""
    cases = list(CASES)
    if tenant.admission.max_gpu_memory_mib is not None:
        cases.append(ceiling_case(tenant.admission.max_gpu_memory_mib))
    chosen: dict[str, Planned] = {}
    by_other: dict[str, Planned] = {}
    for case in cases:
        if case.namespace in webhook_excluded_namespaces():
            continue  # a case about a namespace the policy never judges
        labelled = bool(case.namespace_labels)
        answer = expected_answer(
            platform,
            tenant,
            tc17_pod(case, run_id),
            "tc17-labelled" if labelled else "tc17",
            namespace_labels=case.namespace_labels,
        )
        if answer.refused_by == "policy":
            rule = answer.rule_ids[0]
            chosen.setdefault(rule, Planned(rule, case, labelled, answer))
        elif case.hami or answer.refused_by == "runtimeclass":
            for rule in sorted(case.expected):
                by_other.setdefault(rule, Planned(rule, case, labelled, answer))
    return [chosen.get(rule) or by_other[rule] for rule in sorted({*chosen, *by_other})]


def rules_to_show(tenant: Tenant) -> set[str]:
    """Every rule, but the tenant's ceilings where it sets none, and the rule that refuses the
    other gpuSharing's pods (a hami tenant cannot show HAMi's resources refused)."""
    rules = {rule["id"] for rule in rule_definitions().rules}
    rules.discard(
        "dra-tenant-no-hami-resources" if tenant.gpu_sharing == "hami" else "hami-tenant-no-claims"
    )
    if tenant.gpu_sharing == "dra":
        # HAMi's webhook rewrites a bare card into an exclusive one before any policy runs
        # (hence HAMi's answer shows the rule on a hami tenant); on a dra tenant the rewritten
        # pod is then refused by dra-tenant-no-hami-resources, never by this rule.
        rules.discard("hami-no-bare-card")
    if tenant.admission.max_gpu_memory_mib is None:
        rules.discard("tenant-max-gpumem")
    if tenant.admission.whole_cards:
        rules.discard("tenant-whole-cards")
    return rules


def not_yet_authorized(status: int | None, message: str) -> bool:
    """The RBAC authorizer's refusal of the user itself (``User ... cannot create resource
    "pods"``), not an admission answer: the RoleBinding has not reached the replica that served
    the request. A SelfSubjectAccessReview that said yes was served by one replica; prod's
    control planes run three, each with its own informer cache."""
    return status == 403 and 'cannot create resource "pods"' in message


def _refusal(cluster: Cluster, namespace: str, body: dict[str, Any]) -> str | None:
    """None when admitted (dry run), else the API's message; an RBAC refusal of the user is
    retried until ``RBAC_WAIT_SECONDS`` have passed."""
    deadline = time.monotonic() + RBAC_WAIT_SECONDS
    while True:
        try:
            cluster.core.create_namespaced_pod(
                namespace, body, dry_run="All", _request_timeout=REQUEST_TIMEOUT
            )
        except ApiException as exc:
            message = api_message(exc) or describe_error(exc)
            if not_yet_authorized(exc.status, message) and time.monotonic() < deadline:
                time.sleep(1.0)
                continue
            return message
        return None


@pytest.mark.tc("TC-17")
def test_tenant_api_servers_refuse_bad_gpu_pods(live: LiveStack, evidence: Evidence) -> None:
    tenants = [t for t in live.platform.tenants if t.admission.mode == "Deny"]
    if not tenants:
        pytest.skip("no tenant runs its admission rules in Deny mode (tenants[].admission.mode)")
    problems: list[str] = []
    seen: dict[str, Any] = {}
    for tenant in tenants:
        admin = live.tenant(tenant.name)
        namespaces: list[str] = []
        row: dict[str, Any] = {}
        seen[tenant.name] = row
        planned = plan_cases(live.platform, tenant, live.run_id)
        missing = rules_to_show(tenant) - {p.rule for p in planned}
        if missing:
            problems.append(f"{tenant.name}: no case for {sorted(missing)}")
        try:
            namespace = create_namespace(admin, live.run_id)
            namespaces.append(namespace)
            labelled = create_namespace(admin, live.run_id)
            namespaces.append(labelled)
            admin.core.patch_namespace(
                labelled,
                {"metadata": {"labels": {"hami.io/webhook": "ignore"}}},
                _request_timeout=REQUEST_TIMEOUT,
            )
            user = _tenant_user(admin, namespace)
            labelled_user = _tenant_user(admin, labelled)
            for item in planned:
                where, client = (
                    (labelled, labelled_user) if item.labelled_namespace else (namespace, user)
                )
                message = _refusal(client, where, tc17_pod(item.case, live.run_id))
                row[item.rule] = message or "ADMITTED"
                problem = refusal_problem(item.expected, message)
                if problem is not None:
                    problems.append(f"{tenant.name}: {item.case.name} ({item.rule}): {problem}")
            try:
                create_pod(user, namespace, good_pod(tenant, live.run_id))
                row["good"] = "admitted"
            except ApiException as exc:
                row["good"] = api_message(exc)
                problems.append(f"{tenant.name}: the good GPU pod was refused: {row['good']}")
        finally:
            for created in namespaces:
                cleanup_namespace(admin, created)
        evidence.summary(f"{tenant.name}: {len(row) - 1} bad pods judged; good: {row.get('good')}")
    evidence.record("admission", seen)
    evidence.record("runLabel", RUN_LABEL)
    assert not problems, "; ".join(problems)
