"""TC-17 (issue 27): every tenant's API server enforces the GPU rules itself.

For every tenant whose ``admission.mode`` is ``Deny`` (the default), through the tenant's own API
server and with a **tenant user's** credentials (a ServiceAccount bound to the built-in ``edit``
ClusterRole in a fresh namespace, its token from the TokenRequest API; never the admin's):

* one bad pod per rule of ``policies/gpu_platform_policies/admission_rules.json`` (the first bad
  case of the offline table, ``tests/policies/test_admission_agreement.py``; the tenant ceilings
  only where the tenant sets them) is refused, and the refusal names the rule and carries its
  message — except ``hami-device-access`` (privileged) and ``hami-node-name``, which HAMi's own
  mutating webhook may refuse first ("container ... is privileged", "pod has node assigned":
  HAMi v2.10.0 pkg/scheduler/webhook.go:99-101, 107-111): mutating webhooks run before
  validating policies; and ``hami-no-bare-card`` / ``hami-card-count``, whose pods HAMi's webhook
  rewrites into allowed ones (``HAMI_REWRITES``): either refused or admitted as rewritten;
* one good GPU pod is admitted (with a node selector no node has, so it never takes a card).

Bad pods are sent as dry runs (admission runs, nothing is stored); the good one is created and
removed with its namespace. Skipped when no stack is deployed, as every live test is.
"""

from __future__ import annotations

import copy
from typing import Any

import kubernetes.client as k8s
import pytest
from kubernetes.client.exceptions import ApiException

from components.admission_policies import rule_definitions
from tests.acceptance.kube import (
    REQUEST_TIMEOUT,
    Cluster,
    api_message,
    cleanup_namespace,
    create_namespace,
    create_pod,
    describe_error,
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

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

# Rules HAMi's mutating webhook refuses before any validating policy runs, and what it says.
HAMI_FIRST = {
    "hami-device-access": "is privileged",
    "hami-node-name": "pod has node assigned",
}
# Rules whose bad case HAMi's mutating webhook rewrites into a pod the rules allow (so, with the
# webhook up, the pod is admitted as rewritten; the policy refuses it only when the webhook did
# not run): a bare card becomes exclusive (gpucores: 100, HAMi v2.10.0
# pkg/device/nvidia/device.go:417-450) and gpumem/gpucores without a card count get
# nvidia.com/gpu: 1 (device.go:398-415, defaultGPUNum 1 in the chart's device config).
HAMI_REWRITES = {"hami-no-bare-card", "hami-card-count"}
USER = "acceptance-tenant-user"


def _tenant_user(admin: Cluster, namespace: str) -> Cluster:
    """A client with a namespace-scoped ``edit`` ServiceAccount token on the same API server."""
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
    configuration = copy.copy(admin.api.configuration)
    configuration.api_key = {"authorization": f"Bearer {token}"}
    configuration.cert_file = None
    configuration.key_file = None
    return Cluster(name=f"{admin.name} ({USER})", api=k8s.ApiClient(configuration))


def _bad_cases(tenant: Any) -> dict[str, Case]:
    chosen: dict[str, Case] = {}
    settings = tenant.admission
    for case in CASES:
        for rule in sorted(case.expected):
            if rule in chosen:
                continue
            if rule == "tenant-max-gpumem" and settings.max_gpu_memory_mib is None:
                continue
            if rule == "tenant-whole-cards" and settings.whole_cards:
                continue
            chosen[rule] = case
    if settings.max_gpu_memory_mib is not None:
        over = settings.max_gpu_memory_mib + 1
        chosen["tenant-max-gpumem"] = Case(
            "over-this-tenants-ceiling",
            {
                "containers": [
                    {
                        "name": "main",
                        "image": "busybox:1.37.0",
                        "resources": {
                            "limits": {
                                "nvidia.com/gpu": "1",
                                "nvidia.com/gpumem": str(over),
                                "nvidia.com/gpucores": "10",
                            }
                        },
                    }
                ]
            },
            frozenset({"tenant-max-gpumem"}),
        )
    return chosen


def _pod(case: Case, run_id: str) -> dict[str, Any]:
    body = pod_body(f"tc17-{random_suffix(5)}", run_id)
    body["metadata"]["labels"].update(case.pod_labels)
    body["spec"] = {**body["spec"], **copy.deepcopy(case.spec)}
    return body


def _refusal(cluster: Cluster, namespace: str, body: dict[str, Any]) -> str | None:
    """None when admitted (dry run), else the API's message."""
    try:
        cluster.core.create_namespaced_pod(
            namespace, body, dry_run="All", _request_timeout=REQUEST_TIMEOUT
        )
    except ApiException as exc:
        return api_message(exc) or describe_error(exc)
    return None


@pytest.mark.tc("TC-17")
def test_tenant_api_servers_refuse_bad_gpu_pods(live: LiveStack, evidence: Evidence) -> None:
    tenants = [t for t in live.platform.tenants if t.admission.mode == "Deny"]
    if not tenants:
        pytest.skip("no tenant runs its admission rules in Deny mode (tenants[].admission.mode)")
    messages = {rule["id"]: rule["message"] for rule in rule_definitions().rules}
    problems: list[str] = []
    seen: dict[str, Any] = {}
    for tenant in tenants:
        admin = live.tenant(tenant.name)
        namespaces: list[str] = []
        row: dict[str, Any] = {}
        seen[tenant.name] = row
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
            _tenant_user(admin, labelled)
            for rule, case in sorted(_bad_cases(tenant).items()):
                where = labelled if case.namespace_labels else namespace
                message = _refusal(user, where, _pod(case, live.run_id))
                row[rule] = message or "ADMITTED"
                if message is None and rule in HAMI_REWRITES:
                    row[rule] = "admitted as rewritten by HAMi's webhook"
                elif message is None:
                    problems.append(f"{tenant.name}: {case.name} ({rule}) was admitted")
                elif not (rule in message and messages[rule] in message) and not (
                    rule in HAMI_FIRST and HAMI_FIRST[rule] in message
                ):
                    problems.append(
                        f"{tenant.name}: {case.name} refused without {rule}'s message: {message}"
                    )
            good = pod_body(
                f"tc17-good-{random_suffix(5)}",
                live.run_id,
                limits={
                    "nvidia.com/gpu": "1",
                    "nvidia.com/gpumem": "1024",
                    "nvidia.com/gpucores": "10",
                },
                node_selector=UNSCHEDULABLE_SELECTOR,
            )
            try:
                create_pod(user, namespace, good)
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
