"""TC-15 (real GPUs): HAMi's device plugin restarts on a node without losing the node's cards or
the running pods' shares.

On the GPU pool's node and card:

* a "holder" probe holds ``HOLDER_HOLD_MIB`` of its ``HOLDER_MEMORY_MIB`` share and touches it
  with a kernel every ``HOLD_INTERVAL_SECONDS`` (numbered heartbeats);
* before: HAMi's device-plugin pod on the node (``lookups.HAMI_DEVICE_PLUGIN_SELECTOR``), the
  node's ``hami.io/node-nvidia-register`` cards and ``nvidia.com/gpu`` allocatable, the holder's
  ``hami.io/vgpu-devices-allocated``;
* the plugin pod is deleted (its DaemonSet recreates it); the suite waits, bounded by
  ``PLUGIN_RECOVERY_SECONDS``, for a new ready plugin pod whose own log shows it registered with
  the kubelet and wrote the node's annotation - state written after the deletion; the annotation
  and allocatable alone may still be the old pod's - with the card registered and allocatable
  back to cards x slots;
* after: the same cards with the same totals, healthy; the holder still Running, not restarted,
  with the same allocation and ``HOLDER_BEATS_AFTER_RESTART`` more heartbeats (it kept using its
  memory); a new probe pod binds to a registered card and runs on it.
"""

from __future__ import annotations

import time
from typing import Any

import pytest

from tests.acceptance.gpu_judges import (
    ProbeRun,
    RecoveryObservation,
    judge_recovery,
    plugin_fresh_problems,
)
from tests.acceptance.gpu_live import (
    GpuTarget,
    PluginPod,
    delete_plugin_pod,
    output,
    plugin_pod,
    probe_body,
    probe_namespace,
    read_node,
    restarts_of,
    run_probe,
    wait_output,
)
from tests.acceptance.gpu_plan import (
    HOLD_INTERVAL_SECONDS,
    HOLDER_BEATS_AFTER_RESTART,
    HOLDER_HOLD_MIB,
    HOLDER_MEMORY_MIB,
    NEWCOMER_MEMORY_MIB,
    PLUGIN_RECOVERY_SECONDS,
    PROBE_SLACK_SECONDS,
    PROBE_START_SECONDS,
    SMALL_CORES,
    GpuPlan,
)
from tests.acceptance.gpu_workloads import hold_args, info_args
from tests.acceptance.hami_evidence import (
    HAMI_NODE_REGISTER,
    NVIDIA_GPU,
    EvidenceError,
    RegisteredCard,
    parse_node_register,
)
from tests.acceptance.kube import (
    API_ERRORS,
    Cluster,
    create_pod,
    placement,
    pod_log,
    poll_until,
    read_pod,
    retrying,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import HAMI_NAMESPACE, HAMI_PLUGIN_CONTAINER
from tests.acceptance.report import Evidence

pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]


def last_beat(run: ProbeRun) -> int:
    return max((int(b.get("beat", 0)) for b in run.of("hold")), default=0)


def registered(cluster: Cluster, node: str) -> tuple[list[RegisteredCard] | None, int | None]:
    """The node's registered cards (None when unreadable) and its nvidia.com/gpu allocatable."""
    facts = read_node(cluster, node)
    raw = facts.annotations.get(HAMI_NODE_REGISTER)
    try:
        cards = parse_node_register(raw) if raw is not None else None
    except EvidenceError:
        cards = None
    return cards, facts.allocatable.get(NVIDIA_GPU)


def plugin_log(cluster: Cluster, pod: PluginPod | None) -> str | None:
    """The device-plugin container's log of ``pod`` (None when unreadable or no pod)."""
    if pod is None:
        return None
    try:
        return pod_log(cluster, HAMI_NAMESPACE, pod.name, container=HAMI_PLUGIN_CONTAINER)
    except API_ERRORS:
        return None


def wait_recovered(
    cluster: Cluster, node: str, before: PluginPod, expected: int
) -> PluginPod | None:
    """A new, ready plugin pod on the node whose own log shows it registered with the kubelet and
    wrote the node's annotation (state written after the deletion:
    ``gpu_judges.plugin_fresh_problems``), with the cards registered and allocatable back."""

    def check() -> PluginPod | None:
        now = plugin_pod(cluster, node)
        if now is None or now.uid == before.uid or not now.ready:
            return None
        if plugin_fresh_problems(plugin_log(cluster, now)):
            return None
        cards, allocatable = registered(cluster, node)
        return now if cards and allocatable == expected else None

    return poll_until(check, timeout=PLUGIN_RECOVERY_SECONDS, interval=2.0)


def holding_pod(target: GpuTarget, run_id: str, name: str) -> dict[str, Any]:
    """A share holding memory across the device plugin's restart."""
    return probe_body(
        target,
        run_id,
        name,
        hold_args(HOLDER_HOLD_MIB, 0, HOLD_INTERVAL_SECONDS),
        memory_mib=HOLDER_MEMORY_MIB,
        cores=SMALL_CORES,
    )


def newcomer_pod(target: GpuTarget, run_id: str) -> dict[str, Any]:
    """A share created after the restart."""
    return probe_body(
        target, run_id, "newcomer", info_args(), memory_mib=NEWCOMER_MEMORY_MIB, cores=SMALL_CORES
    )


@pytest.mark.tc("TC-15")
def test_tc15_device_plugin_restart_keeps_cards_and_shares(
    live: LiveStack, gpu_plan: GpuPlan, gpu_target: GpuTarget, evidence: Evidence
) -> None:
    cluster, node = gpu_target.cluster, gpu_target.node
    evidence.record("target", gpu_target.as_dict())
    before_plugin = plugin_pod(cluster, node)
    if before_plugin is None or not before_plugin.ready:
        pytest.fail(f"{node}: no ready HAMi device-plugin pod before the restart", pytrace=False)
    with probe_namespace(cluster, live.run_id) as namespace:
        holder = "holder"
        create_pod(
            cluster,
            namespace,
            holding_pod(gpu_target, live.run_id, holder),
        )
        first = wait_output(
            cluster, namespace, holder, lambda r: last_beat(r) > 0, PROBE_START_SECONDS
        )
        if first is None:
            pytest.fail(
                f"the holder never held its memory: {output(cluster, namespace, holder).other[-3:]}"
            )
        holder_before = placement(retrying(lambda: read_pod(cluster, namespace, holder)))
        cards_before, allocatable_before = registered(cluster, node)
        beats_before = last_beat(output(cluster, namespace, holder))
        started = time.monotonic()
        delete_plugin_pod(cluster, before_plugin)
        after_plugin = wait_recovered(cluster, node, before_plugin, gpu_plan.slots_per_node)
        recovered = time.monotonic() - started if after_plugin is not None else None
        current = after_plugin or plugin_pod(cluster, node)
        cards_after, allocatable_after = registered(cluster, node)
        holder_run = wait_output(
            cluster,
            namespace,
            holder,
            lambda r: last_beat(r) >= beats_before + HOLDER_BEATS_AFTER_RESTART,
            HOLD_INTERVAL_SECONDS * HOLDER_BEATS_AFTER_RESTART + PROBE_SLACK_SECONDS,
        ) or output(cluster, namespace, holder)
        holder_pod = retrying(lambda: read_pod(cluster, namespace, holder))
        newcomer = run_probe(
            cluster,
            namespace,
            newcomer_pod(gpu_target, live.run_id),
            PROBE_SLACK_SECONDS,
        )
    seen = RecoveryObservation(
        node=node,
        plugin_before=before_plugin.uid,
        plugin_after=None if current is None else current.uid,
        plugin_ready_after=bool(current and current.ready),
        holder_beats_before=beats_before,
        recovered_seconds=recovered,
        cards_before=cards_before or [],
        cards_after=cards_after,
        allocatable_before=allocatable_before,
        allocatable_after=allocatable_after,
        expected_allocatable=gpu_plan.slots_per_node,
        holder_before=holder_before,
        holder_after=placement(holder_pod),
        holder_restarts=restarts_of(holder_pod),
        holder_run=holder_run,
        newcomer=newcomer.pod,
        newcomer_run=newcomer.run,
        plugin_log_after=plugin_log(cluster, current),
    )
    verdict = judge_recovery(
        seen, bound_seconds=PLUGIN_RECOVERY_SECONDS, beats_after=HOLDER_BEATS_AFTER_RESTART
    )
    problems = newcomer.problems + verdict.problems
    evidence.record("recovery", verdict.facts)
    evidence.record("newcomer", newcomer.as_dict())
    evidence.summary(
        f"{node}: plugin {before_plugin.name} replaced"
        + (f" and serving in {recovered:.0f} s" if recovered is not None else ", not serving")
        + f"; cards {len(cards_before or [])} -> {len(cards_after or [])}, allocatable "
        f"{allocatable_before} -> {allocatable_after}; holder "
        f"{verdict.facts.get('holderBeatsAfterRestart')} beats after; newcomer "
        f"{newcomer.pod.phase} on {newcomer.pod.allocated}"
    )
    assert not problems, "; ".join(problems)
