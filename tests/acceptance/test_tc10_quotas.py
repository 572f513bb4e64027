"""TC-10 (beyond the report): tenant GPU quotas are enforced.

For every tenant quota in the stack file (``gpuQuotas``), in its namespace inside the tenant:

* a ResourceQuota holds the configured limits (``requests.nvidia.com/gpu`` = gpus,
  ``limits.nvidia.com/gpumem`` = gpuMemoryMiB, ``limits.nvidia.com/gpucores`` = gpuCores);
* a pod asking one card more than ``gpus`` is refused at admission (403 "exceeded quota" naming
  ``requests.nvidia.com/gpu``: Kubernetes' own quota);
* a pod asking ``gpuMemoryMiB + 1`` MiB on one card stays Pending and HAMi's scheduler reports
  ``ResourceQuotaNotFit`` (HAMi tracks the ``limits.nvidia.com/gpumem`` quota itself; it checks
  it before the card's memory, so the reason tells the quota apart from the card's size).

These pods live in the quota's namespace (the quota is what is under test), carry the suite's
run label and are deleted afterwards, also on failure. Skipped when no tenant declares quotas.
"""

from __future__ import annotations

from typing import Any

import pytest
from kubernetes.client.exceptions import ApiException

from tests.acceptance.hami_evidence import (
    NVIDIA_GPU,
    NVIDIA_GPUCORES,
    NVIDIA_GPUMEM,
    Verdict,
    judge_quota_hard,
    judge_rejection,
    parse_quota_exceeded,
)
from tests.acceptance.kube import (
    CLEANUP_TIMEOUT,
    REQUEST_TIMEOUT,
    Cluster,
    api_message,
    create_pod,
    delete_pods,
    describe_error,
    meta,
    placement,
    quantity,
    scheduling_message,
    wait_for_refusal,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence
from tests.acceptance.workloads import gpu_limits, pod_body, random_suffix

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

CARD_QUOTA = f"requests.{NVIDIA_GPU}"
MEMORY_QUOTA = f"limits.{NVIDIA_GPUMEM}"
CORES_QUOTA = f"limits.{NVIDIA_GPUCORES}"


def quota_hard(cluster: Cluster, namespace: str) -> dict[str, dict[str, int]]:
    quotas = cluster.core.list_namespaced_resource_quota(
        namespace, _request_timeout=REQUEST_TIMEOUT
    ).items
    return {
        str(meta(q).name): {
            key: quantity(value)
            for key, value in ((q.spec.hard if q.spec else None) or {}).items()
            if key in (CARD_QUOTA, MEMORY_QUOTA, CORES_QUOTA)
        }
        for q in quotas
    }


@pytest.mark.tc("TC-10")
def test_gpu_quotas_enforced(live: LiveStack, evidence: Evidence) -> None:
    with_quotas = [t for t in live.platform.tenants if t.gpu_quotas]
    if not with_quotas:
        pytest.skip("no tenant declares gpuQuotas in the stack file")
    verdict = Verdict()
    seen: dict[str, Any] = {}
    for tenant in with_quotas:
        cluster = live.tenant(tenant.name)
        for quota in tenant.gpu_quotas:
            namespace = quota.namespace
            row: dict[str, Any] = {}
            seen[f"{tenant.name}/{namespace}"] = row
            expected = {
                CARD_QUOTA: quota.gpus,
                MEMORY_QUOTA: quota.gpu_memory_mib,
                CORES_QUOTA: quota.gpu_cores,
            }
            hard = judge_quota_hard(namespace, quota_hard(cluster, namespace), expected)
            verdict.problems.extend(f"{tenant.name}: {p}" for p in hard.problems)
            row["resourceQuotas"] = hard.facts["quotas"]
            suffix = random_suffix(5)
            cards_pod = f"quota-cards-{suffix}"
            memory_pod = f"quota-mem-{suffix}"
            try:
                # Over the card count: refused by the API server's quota admission.
                try:
                    create_pod(
                        cluster,
                        namespace,
                        pod_body(cards_pod, live.run_id, limits=gpu_limits(quota.gpus + 1)),
                    )
                except ApiException as exc:
                    refusal = parse_quota_exceeded(api_message(exc))
                    row["cardsOverQuota"] = {"status": exc.status, "message": api_message(exc)}
                    if exc.status != 403 or refusal is None or CARD_QUOTA not in refusal.requested:
                        verdict.problems.append(
                            f"{tenant.name}/{namespace}: {quota.gpus + 1} cards refused for "
                            f"another reason: {describe_error(exc)}"
                        )
                else:
                    row["cardsOverQuota"] = "admitted"
                    verdict.problems.append(
                        f"{tenant.name}/{namespace}: a pod asking {quota.gpus + 1} cards was "
                        f"admitted (quota {quota.gpus})"
                    )
                # Over the memory quota: HAMi refuses to place it.
                create_pod(
                    cluster,
                    namespace,
                    pod_body(
                        memory_pod,
                        live.run_id,
                        limits=gpu_limits(1, memory_mib=quota.gpu_memory_mib + 1, cores=1),
                    ),
                )
                pod, events = wait_for_refusal(
                    cluster, namespace, memory_pod, "ResourceQuotaNotFit"
                )
                judged = judge_rejection(placement(pod), events, "ResourceQuotaNotFit")
                verdict.problems.extend(f"{tenant.name}/{namespace}: {p}" for p in judged.problems)
                row["memoryOverQuota"] = {
                    **judged.facts,
                    "request": f"{quota.gpu_memory_mib + 1} MiB > quota {quota.gpu_memory_mib}",
                    "podScheduledCondition": scheduling_message(pod),
                }
            finally:
                left = delete_pods(cluster, namespace, [cards_pod, memory_pod], CLEANUP_TIMEOUT)
                if left:
                    verdict.problems.append(f"{tenant.name}/{namespace}: could not delete {left}")
            memory_events = row.get("memoryOverQuota", {}).get("matching") or ["no event"]
            evidence.summary(
                f"{tenant.name}/{namespace}: {quota.gpus + 1} cards "
                f"{'refused' if row.get('cardsOverQuota') != 'admitted' else 'ADMITTED'}, "
                f"{quota.gpu_memory_mib + 1} MiB: {memory_events[0]}"
            )
    evidence.record("quotas", seen)
    evidence.record("withoutQuotas", [t.name for t in live.platform.tenants if not t.gpu_quotas])
    assert verdict.ok, verdict.explain()
