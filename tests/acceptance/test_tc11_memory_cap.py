"""TC-11 (real GPUs): HAMi-core holds a pod to its memory share.

On the GPU pool's first node and card (``gpu_plan`` / ``gpu_target`` in conftest.py; skipped when
the stack declares no ``deviceMode: nvidia`` pool), one probe pod asks ``nvidia.com/gpumem: M``
(``gpu_plan.memory_cap_mib``: 4096 MiB on any card of 16 GiB or more) and allocates device memory
with ``cuMemAlloc_v2`` in 256 MiB, then 16 MiB steps until refused. It passes when HAMi-core is
in the process with ``CUDA_DEVICE_MEMORY_LIMIT_0=<M>m``, the allocations stop with
``CUDA_ERROR_OUT_OF_MEMORY`` at no more than M and no less than M minus HAMi-core's accounting
overhead (``MEMORY_ACCOUNTING_OVERHEAD_MIB``, its reason there), and ``cuMemGetInfo`` and
``nvidia-smi`` inside both show M as the total. The probe stops by itself ``MEMORY_GUARD_MIB``
above M, so a cap that does not hold fails without taking the card.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.gpu_judges import judge_memory_cap
from tests.acceptance.gpu_live import GpuTarget, probe_body, probe_namespace, run_probe
from tests.acceptance.gpu_plan import (
    MEMORY_STEPS_MIB,
    PROBE_SLACK_SECONDS,
    SMALL_CORES,
    GpuPlan,
    memory_cap_mib,
    memory_guard_mib,
)
from tests.acceptance.gpu_workloads import memory_args
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(900)]


def memory_cap_pod(target: GpuTarget, run_id: str) -> dict[str, Any]:
    """The memory probe on a share of ``memory_cap_mib`` of the card."""
    card_mib = target.card.memory_mib
    return probe_body(
        target,
        run_id,
        "memory-cap",
        memory_args(memory_guard_mib(card_mib), MEMORY_STEPS_MIB),
        memory_mib=memory_cap_mib(card_mib),
        cores=SMALL_CORES,
    )


@pytest.mark.tc("TC-11")
def test_tc11_memory_cap_holds(
    live: LiveStack, gpu_plan: GpuPlan, gpu_target: GpuTarget, evidence: Evidence
) -> None:
    cluster = gpu_target.cluster
    cap = memory_cap_mib(gpu_target.card.memory_mib)
    evidence.record("plan", gpu_plan.as_dict())
    evidence.record("target", gpu_target.as_dict())
    with probe_namespace(cluster, live.run_id) as namespace:
        body = memory_cap_pod(gpu_target, live.run_id)
        result = run_probe(cluster, namespace, body, PROBE_SLACK_SECONDS)
    verdict = judge_memory_cap(result.run, cap_mib=cap)
    problems = result.problems + verdict.problems
    evidence.record("pod", result.as_dict())
    evidence.record("memory", verdict.facts)
    facts = verdict.facts
    seen = facts.get("exercised", {})
    evidence.summary(
        f"cap {cap} MiB on {gpu_target.card.uuid}: allocated {facts.get('allocatedMiB')} MiB, "
        f"stopped by {(facts.get('refusal') or {}).get('error') or facts.get('stopped')}; "
        f"nvidia-smi total {facts.get('nvidiaSmiTotalMiB')} MiB; "
        f"{seen.get('os')}, {seen.get('libc')}, libvgpu loaded: {seen.get('libvgpuLoaded')}"
    )
    assert not problems, "; ".join(problems)
