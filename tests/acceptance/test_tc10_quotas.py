"""TC-10 (beyond the report): tenant GPU quotas are enforced, by the part meant to enforce them.

For every tenant quota in the stack file (``gpuQuotas``), in its namespace inside the tenant:

* a ResourceQuota holds the configured limits (``requests.nvidia.com/gpu`` = gpus,
  ``limits.nvidia.com/gpumem`` = gpuMemoryMiB, ``limits.nvidia.com/gpucores`` = gpuCores), and
  HAMi's scheduler holds the gpumem/gpucores limits (its metrics ``hami_resource_quota_limit``)
  - when its metrics are readable (TC-02 requires them);
* **cards**: a pod asking ``gpus + 1`` cards, each with ``gpumem: 1`` and ``gpucores: 1`` so that
  only the card count is over (HAMi's webhook sums Memreq x cards and Coresreq x cards against
  its own quota, and would turn a bare ``nvidia.com/gpu: N`` into 100 cores per card; 1 core, not
  0: the tenant's own admission rule ``hami-gpucores`` refuses 0 before ResourceQuota, which
  kube-apiserver always runs last), is refused by Kubernetes' own quota admission: 403
  ``exceeded quota`` naming ``requests.nvidia.com/gpu`` with the configured limit. It is judged
  only where HAMi's quota has room for ``gpus + 1`` MiB and cores besides what is in use
  (``card_pod_fits_hamis_quota``); elsewhere TC-10 says the scenario cannot run there;
* **memory**: a pod asking ``gpuMemoryMiB + 1`` MiB (1 core) on one card is refused at creation by
  HAMi's mutating webhook, which has enforced the namespace's ``gpumem``/``gpucores`` quota
  itself since 2.9 (HAMi v2.10.0 pkg/scheduler/webhook.go:114-115, 145-190; pkg/device/quota.go
  FitQuota): 403 ``admission webhook "vgpu.hami.io" denied the request: exceeding resource
  quota``. Mutating webhooks run before the ResourceQuota plugin, and a lone pod never reaches
  the scheduler's ``ResourceQuotaNotFit``.

These pods live in the quota's namespace (the quota is what is under test), carry the suite's
run label and are deleted afterwards, also on failure. Skipped only when no tenant declares
quotas (nothing to enforce).
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
    judge_card_quota_refusal,
    judge_hami_quota_denial,
    judge_quota_hard,
)
from tests.acceptance.hami_metrics import HamiQuota, QuotaView, hami_quotas, judge_hami_quota
from tests.acceptance.kube import (
    API_ERRORS,
    CLEANUP_TIMEOUT,
    METRICS_ERRORS,
    REQUEST_TIMEOUT,
    Cluster,
    api_message,
    create_pod,
    delete_pods,
    describe_error,
    hami_samples,
    meta,
    quantity,
    retrying,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence
from tests.acceptance.workloads import gpu_limits, pod_body, random_suffix

pytestmark = [pytest.mark.live, pytest.mark.timeout(600)]

CARD_QUOTA = f"requests.{NVIDIA_GPU}"
MEMORY_QUOTA = f"limits.{NVIDIA_GPUMEM}"
CORES_QUOTA = f"limits.{NVIDIA_GPUCORES}"
# Per card of the cards pod: the smallest share HAMi's webhook and the tenant's admission rules
# accept (hami-gpumem-mib and hami-gpucores both start at 1), so HAMi's own quota check passes
# and only requests.nvidia.com/gpu is over.
CARD_POD_MEMORY_MIB = 1
CARD_POD_CORES = 1


def cards_over_quota_pod(quota: Any, run_id: str, name: str) -> dict[str, Any]:
    """One card more than the quota allows, each card the smallest share."""
    return pod_body(
        name,
        run_id,
        limits=gpu_limits(quota.gpus + 1, memory_mib=CARD_POD_MEMORY_MIB, cores=CARD_POD_CORES),
    )


def memory_over_quota_pod(quota: Any, run_id: str, name: str) -> dict[str, Any]:
    """One card with one MiB more than the namespace's HAMi memory quota."""
    return pod_body(
        name, run_id, limits=gpu_limits(1, memory_mib=quota.gpu_memory_mib + 1, cores=1)
    )


def card_pod_fits_hamis_quota(quota: Any, used_memory_mib: float, used_cores: float) -> str | None:
    """None when HAMi's own quota has room for the cards pod (Memreq x cards and Coresreq x cards,
    HAMi v2.10.0 pkg/scheduler/webhook.go:145-190, pkg/device/quota.go:62-95), else why not: then
    HAMi's webhook, not the card quota, would refuse it, and TC-10 cannot judge the card quota."""
    cards = quota.gpus + 1
    memory, cores = cards * CARD_POD_MEMORY_MIB, cards * CARD_POD_CORES
    if used_memory_mib + memory > quota.gpu_memory_mib or used_cores + cores > quota.gpu_cores:
        return (
            f"the card-quota scenario cannot run in {quota.namespace}: {cards} cards x "
            f"{CARD_POD_MEMORY_MIB} MiB / {CARD_POD_CORES} % does not fit HAMi's quota besides "
            f"what is in use ({used_memory_mib:g} of {quota.gpu_memory_mib} MiB, {used_cores:g} "
            f"of {quota.gpu_cores} %): free some, or raise gpuMemoryMiB/gpuCores"
        )
    return None


def quota_hard(cluster: Cluster, namespace: str) -> dict[str, dict[str, int]]:
    quotas = retrying(
        lambda: (
            cluster.core.list_namespaced_resource_quota(
                namespace, _request_timeout=REQUEST_TIMEOUT
            ).items
        )
    )
    return {
        str(meta(q).name): {
            key: quantity(value)
            for key, value in ((q.spec.hard if q.spec else None) or {}).items()
            if key in (CARD_QUOTA, MEMORY_QUOTA, CORES_QUOTA)
        }
        for q in quotas
    }


def refusal(cluster: Cluster, namespace: str, body: dict[str, Any]) -> tuple[int | None, str]:
    """Create the pod: (None, "") when admitted, else the API's status code and message."""
    try:
        create_pod(cluster, namespace, body)
    except ApiException as exc:
        return int(exc.status or 0), api_message(exc) or describe_error(exc)
    return None, ""


def hami_quota_view(cluster: Cluster) -> tuple[dict[tuple[str, str], HamiQuota] | None, str]:
    try:
        return hami_quotas(hami_samples(cluster)), ""
    except METRICS_ERRORS as exc:
        return None, describe_error(exc) if isinstance(exc, API_ERRORS) else str(exc)


@pytest.mark.tc("TC-10")
def test_gpu_quotas_enforced(live: LiveStack, evidence: Evidence) -> None:
    with_quotas = [t for t in live.platform.tenants if t.gpu_quotas]
    if not with_quotas:
        pytest.skip("no tenant declares gpuQuotas in the stack file")
    verdict = Verdict()
    seen: dict[str, Any] = {}
    for tenant in with_quotas:
        cluster = live.tenant(tenant.name)
        hami, hami_error = hami_quota_view(cluster)
        for quota in tenant.gpu_quotas:
            namespace = quota.namespace
            where = f"{tenant.name}/{namespace}"
            row: dict[str, Any] = {}
            seen[where] = row
            expected = {
                CARD_QUOTA: quota.gpus,
                MEMORY_QUOTA: quota.gpu_memory_mib,
                CORES_QUOTA: quota.gpu_cores,
            }
            hard = judge_quota_hard(namespace, quota_hard(cluster, namespace), expected)
            verdict.problems.extend(f"{tenant.name}: {p}" for p in hard.problems)
            row["resourceQuotas"] = hard.facts["quotas"]
            if hami is None:
                row["hamiQuota"] = f"unreadable: {hami_error}"
            else:
                held = judge_hami_quota(
                    QuotaView(namespace, hami),
                    {NVIDIA_GPUMEM: quota.gpu_memory_mib, NVIDIA_GPUCORES: quota.gpu_cores},
                )
                verdict.problems.extend(f"{where}: {p}" for p in held.problems)
                row["hamiQuota"] = held.facts["hami"]
            suffix = random_suffix(5)
            cards_pod = f"quota-cards-{suffix}"
            memory_pod = f"quota-mem-{suffix}"
            over = quota.gpus + 1
            memory_over = quota.gpu_memory_mib + 1
            in_use = {
                r: (hami or {}).get((namespace, r), HamiQuota(namespace, r, 0.0, None)).used
                for r in (NVIDIA_GPUMEM, NVIDIA_GPUCORES)
            }
            cannot_run = card_pod_fits_hamis_quota(
                quota, in_use[NVIDIA_GPUMEM], in_use[NVIDIA_GPUCORES]
            )
            try:
                row["cardsOverQuota"] = {
                    "request": f"{over} cards x {CARD_POD_MEMORY_MIB} MiB / {CARD_POD_CORES} %"
                }
                if cannot_run is not None:
                    verdict.problems.append(f"{tenant.name}: {cannot_run}")
                    row["cardsOverQuota"]["message"] = cannot_run
                else:
                    status, message = refusal(
                        cluster, namespace, cards_over_quota_pod(quota, live.run_id, cards_pod)
                    )
                    cards = judge_card_quota_refusal(
                        status, message, resource=CARD_QUOTA, requested=over, limit=quota.gpus
                    )
                    verdict.problems.extend(f"{where}: {p}" for p in cards.problems)
                    row["cardsOverQuota"].update(cards.facts)
                status, message = refusal(
                    cluster, namespace, memory_over_quota_pod(quota, live.run_id, memory_pod)
                )
                memory = judge_hami_quota_denial(
                    status, message, what=f"a pod asking {memory_over} MiB"
                )
                verdict.problems.extend(f"{where}: {p}" for p in memory.problems)
                row["memoryOverQuota"] = {
                    "request": f"1 card x {memory_over} MiB > quota {quota.gpu_memory_mib}",
                    **memory.facts,
                }
            finally:
                left = delete_pods(cluster, namespace, [cards_pod, memory_pod], CLEANUP_TIMEOUT)
                if left:
                    verdict.problems.append(f"{where}: could not delete {left}")
            evidence.summary(
                f"{where}: {over} cards -> {row['cardsOverQuota'].get('message') or 'ADMITTED'}"
                f"; {memory_over} MiB -> "
                f"{row['memoryOverQuota'].get('message') or 'ADMITTED'}"
            )
    evidence.record("quotas", seen)
    evidence.record("withoutQuotas", [t.name for t in live.platform.tenants if not t.gpu_quotas])
    assert verdict.ok, verdict.explain()
