"""Where the runtime-isolation tests (TC-11 ... TC-15) run, and the numbers they judge by (pure).

They run only on a pool whose nodes have real NVIDIA GPUs (``deviceMode: nvidia``): HAMi-core
enforces memory and compute shares inside the container through the NVIDIA driver, which the
lab's mock device plugin cannot exercise. ``plan_gpu`` picks the first such pool from the stack
file; without one the tests skip (the lab, or a prod stack without GPU pools).

Every tolerance and bound is a named constant below with the reason for its value and the
upstream code it rests on: HAMi v2.10.0 (commit 4707fb02c91c545bc7343ce26dba4c32919f9a3e) and
HAMi-core. HAMi v2.10.0 builds HAMi-core from submodule ``libvgpu`` at commit
b216ba1be1b8e21488d1c7370ed3357b3049aad1; that commit is not in the stored mirror, so HAMi-core
lines are cited at the newest stored ``main`` (8f3a89c67b037d8fdfe6c4cd4d8c4f0cd6504811,
2026-06-30), which is later than the submodule pin of HAMi's previous release
(a26e57e0061efed98d32310a8a7986935dc9098e).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from components.catalog import CardModel
from components.config import PlatformConfig

# The ids of the runtime-isolation tests: they need real GPUs, so the lab (mock GPUs) must skip
# them, never pass them (tests/integration/test_lab_lifecycle.py checks that).
GPU_TEST_IDS = ("TC-11", "TC-12", "TC-13", "TC-14", "TC-15")

# ------------------------------------------------------------------------------ TC-11 memory

# The cap the memory probe gets (nvidia.com/gpumem), MiB: small enough for any data-centre card
# (a quarter of smaller cards), large enough that HAMi-core's own overhead is a small part of it.
MEMORY_CAP_MIB = 4096
# How far below the cap the probe's allocations may stop and still count as "stopped at the cap".
# HAMi-core refuses an allocation when usage + request > limit (src/allocator/allocator.c:36-58,
# oom_check), and its usage includes the primary context, counted at cuDevicePrimaryCtxRetain with
# the size NVML reports for the process (src/cuda/context.c:14-25, src/utils.c:163-167) - a few
# hundred MiB, more on larger cards (HAMi-core issue #79: "less than 300M during initialization")
# - plus memory it does not see (the module, driver-internal allocations). Allocations of at most
# 2 MiB (IPCSIZE) take another driver call but are still oom_check'ed and counted like the rest
# (src/allocator/allocator.c:109-142, add_chunk), so they change nothing here. 1024 MiB covers a
# context of up to ~1 GiB; the report shows the overhead actually seen (cap - allocated).
MEMORY_ACCOUNTING_OVERHEAD_MIB = 1024
# The memory probe stops by itself this far above the cap when nothing refuses it (cap exceeded),
# so a broken HAMi-core never lets it take the whole card.
MEMORY_GUARD_MIB = 2048
MEMORY_STEPS_MIB = (256, 16)  # coarse, then fine steps

# ----------------------------------------------------------------------- TC-12 / TC-14 compute

# The limited probe's nvidia.com/gpucores in TC-12 (the lab report's 30 % shares).
COMPUTE_SHARE_CORES = 30
# The unrestricted reference: 100 % makes HAMi-core's limiter return at once
# (src/multiprocess/multiprocess_utilization_watcher.c:49-51: limit >= 100 or 0 means no limit);
# its watcher thread is not even started then - only for a limit in (0, 100]
# (init_utilization_watcher, watcher.c:271-282) - so the reference prints no watcher lines.
UNRESTRICTED_CORES = 100
# HAMi-core does not partition SMs: a watcher thread samples NVML's per-process SM utilisation
# every 120 ms over the last second (multiprocess_utilization_watcher.c:174-178, 226;
# multiprocess_utilization_watcher.h:14-17) and refills a launch budget that cuLaunchKernel
# spends (src/cuda/memory.c:540-550, rate_limiter), charging each launch its grid size whatever
# the kernel's length and correcting by at least 5 points a step, a step that grows with the
# square of the SM count (delta(), watcher.c:86-107). On Hopper-class cards that loop is
# bang-bang: HAMi-core issue #274 (FORCE at CUDA_DEVICE_SM_LIMIT=50 "sits at 99-100% SM
# utilization"), #314 (a 30/70 pair under FORCE at 21.4 / 25.2 it/s), HAMi issue #2863 (a 1:6-8
# split where 1:9 was asked). No figure HAMi publishes says how close to the share a card gets.
# So until a real card calibrates it, TC-12 judges the direction only: the limited run must be
# clearly below the unrestricted one, at most 1 - COMPUTE_DIRECTION_MARGIN of its throughput
# (15 points: several times the few per cent two runs of one kernel differ by clock boost alone),
# and the report gives the ratio next to the share asked.
COMPUTE_DIRECTION_MARGIN = 0.15
# Cards with at least this many SMs are where HAMi-core's limiter is known not to throttle
# (HAMi-core #274 on a 132-SM card, #314; the fix, PR #317 "make SM limiter step linear in SM
# count", was still open when HAMi v2.10.0 took its HAMi-core, submodule b216ba1b): there TC-12
# reports "not limited" as an expected failure of the pinned HAMi-core (xfail) instead of failing,
# provided HAMi-core is loaded and its limiter ran (util_switch on, watcher lines present).
# Revisit when a HAMi-core with #317 is pinned.
KNOWN_UNTHROTTLED_SMS = 100
# TC-14 (informational): a probe is flagged as "below its share" when it got less than its share
# of the card minus this many points of the card. Recorded, never failed (see TC-14).
COMPUTE_SHARE_TOLERANCE = 0.10
# Every compute probe runs with HAMi-core's log level at 3 (INFO): HAMi's chart default
# devices.nvidia.libCudaLogLevel 1 (HAMi v2.10.0 pkg/device/nvidia/device.go:85-91, set by the
# device plugin, pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go:842-843) prints errors
# only, while the watcher's "util_switch=" and "userutil=... share=" lines are INFO and
# "SET_TASK_PID FAILED" is WARN (HAMi-core src/include/log_utils.h: WARN/MSG >= 2, INFO >= 3;
# src/libvgpu.c:913; watcher.c:233, 253). The pod's env comes after the device plugin's in the
# container, so the pod's value wins.
HAMI_CORE_LOG_ENV = {"LIBCUDA_LOG_LEVEL": "3"}
# Rate windows ignored at the start of every compute run: HAMi's vGPU monitor switches each
# container's limiter on or off every 5 s (HAMi v2.10.0 cmd/vGPUmonitor/feedback.go:143, Observe
# 103-133) and the limiter starts with an empty budget (watcher.c:221, 243-251). Two monitor
# periods.
WARMUP_SECONDS = 10.0
# How long each TC-12 run lasts (the warm-up included).
COMPUTE_SECONDS = 45.0
# The least number of one-second windows a measured phase needs to be judged at all.
MIN_WINDOW_SAMPLES = 5
# HAMi's default core policy throttles a container only while another container of the same or
# higher priority is busy on its card (feedback.go:55-72 CheckPriority, 120-131): alone, it runs
# unthrottled. TC-12 measures the cap itself, so its limited probe asks for the policy HAMi-core
# reads to always throttle (GPU_CORE_UTILIZATION_POLICY=force: HAMi-core
# src/multiprocess/multiprocess_memory_limit.c:1045-1055, 1314-1320).
CORE_POLICY_ENV = "GPU_CORE_UTILIZATION_POLICY"
FORCE_CORE_POLICY = "force"
# TC-14's two shares of one card. Not 50 / 50: two unthrottled processes also split a card about
# evenly (the driver time-slices them), so an even split cannot tell HAMi's enforcement from no
# enforcement; 70 / 30 can. Under the default policy TC-14 is informational: HAMi's vGPU monitor
# turns a container's limiter on only when, in one 5 s tick, at least two containers of its
# priority on the card advertise recent kernels (HAMi v2.10.0 cmd/vGPUmonitor/feedback.go:56-72,
# 78-102, 120-131), and HAMi-core refreshes that advertisement (set_recent_kernel(2)) only after
# rate_limiter's fast exit for a switched-off limiter (HAMi-core multiprocess_utilization_watcher.c
# 49-59; the switch starts at 1, multiprocess_memory_limit.c:1136). The first probe alone is
# switched off and stops advertising; the second is then counted alone and switched off too, so
# both may run unthrottled - a platform without a fault can show a 50/50 split. The run reports
# each probe's share of the card and HAMi-core's own switch state, and fails only when it
# measured nothing (no HAMi-core, no windows, not one card).
INTERFERENCE_SHARES = (70, 30)
# TC-14: the first probe runs alone this long before its neighbour starts, then both run together
# at least INTERFERENCE_TOGETHER_SECONDS, then the second runs alone. The second's start-up (a
# container start, CUDA's initialisation) is taken from the first's run time, so each probe runs
# for INTERFERENCE_SECONDS, with SECOND_START_ALLOWANCE for it: a second probe that starts within
# the allowance still overlaps the first that long and outlives it by INTERFERENCE_ALONE_SECONDS
# or more (reviews/acceptance.md section 5: with 80 s each and no allowance, a start of more
# than about 40 s left "firstTogether" fewer windows than MIN_WINDOW_SAMPLES).
INTERFERENCE_ALONE_SECONDS = 25.0
INTERFERENCE_TOGETHER_SECONDS = 55.0
SECOND_START_ALLOWANCE = 60.0
INTERFERENCE_SECONDS = (
    INTERFERENCE_ALONE_SECONDS + SECOND_START_ALLOWANCE + INTERFERENCE_TOGETHER_SECONDS
)


def interference_phases(second_start: float) -> dict[str, float]:
    """TC-14's planned phases, seconds, when the second probe's first window comes
    ``second_start`` seconds after the first's alone phase ended: both probes run
    INTERFERENCE_SECONDS from their own first window."""
    joined = INTERFERENCE_ALONE_SECONDS + second_start
    first_end = INTERFERENCE_SECONDS
    return {
        "firstAlone": INTERFERENCE_ALONE_SECONDS,
        "together": first_end - joined,
        "secondAlone": joined + INTERFERENCE_SECONDS - first_end,
    }


# Windows ignored after a neighbour starts or stops (the monitor's switch follows within 5 s).
SETTLE_SECONDS = 10.0
# What each compute probe asks for, MiB: its context and a small output buffer.
COMPUTE_POD_MEMORY_MIB = 1024

# --------------------------------------------------------------------- TC-13 reclamation

# The "hog" asks this fraction of the card's memory and really holds all of it but a headroom
# for its context; the waiter asks what is left plus WAITER_EXCESS_MIB, so it cannot fit while
# the hog is counted and fits once it is not.
HOG_FRACTION = 0.75
HOG_HEADROOM_MIB = 1024
WAITER_EXCESS_MIB = 1024
RECLAIM_CORES = 10
# The exit round's hog runs without a timer: it exits by itself once the suite has seen the
# waiter's refusal and written the release annotation on it (gpu_workloads.RELEASE_ANNOTATION),
# so a slow cluster cannot end it before the refusal. This long for the process to see it: the
# kubelet rewrites a downward-API volume on its next sync of the pod (its periodic resync is
# 60 s by default, kubelet --sync-frequency) plus the probe's own interval.
HOG_RELEASE_SECONDS = 180.0
# From the hog's end (process exit or deletion) to the waiter's binding. HAMi drops a pod's
# shares when it ends or is deleted (HAMi v2.10.0 pkg/scheduler/scheduler.go:173-189 onUpdatePod
# on a terminated pod, 226 onDelPod); kube-scheduler retries an unschedulable pod after a cluster
# event with a backoff of at most 10 s; HAMi's node lock (nodeLockTimeout) only matters if
# another bind is in flight.
RECLAIM_BIND_SECONDS = 120.0

# ------------------------------------------------------------------------- TC-15 recovery

# From deleting HAMi's device-plugin pod to its replacement serving again (ready, the card
# re-registered, nvidia.com/gpu allocatable back): the DaemonSet recreates the pod, the plugin
# registers with the kubelet and writes the node annotation at start-up and then every 30 s
# (pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go:312-350).
PLUGIN_RECOVERY_SECONDS = 300.0
HOLDER_MEMORY_MIB = 2048
HOLDER_HOLD_MIB = 1024
HOLD_INTERVAL_SECONDS = 2.0
# Heartbeats the holder must print after the restart (each touches its memory with a kernel).
HOLDER_BEATS_AFTER_RESTART = 3
NEWCOMER_MEMORY_MIB = 1024
SMALL_CORES = 10

# ------------------------------------------------------------------------------- all tests

# Creation -> a probe pod running: image pull on first use and HAMi's bind included.
PROBE_START_SECONDS = 300.0
# What a bounded probe may take beyond its own run time (nvidia-smi, driver start-up, logs).
PROBE_SLACK_SECONDS = 120.0


@dataclass(frozen=True)
class GpuPlan:
    """The pool TC-11 ... TC-15 run on: the first with real NVIDIA GPUs (``deviceMode: nvidia``)."""

    tenant: str
    pool: str
    card: CardModel  # as declared; the registered card's memory is what the sizes use
    cards_per_node: int
    slots_per_card: int
    replicas: int
    # The tenant's admission.wholeCards: false refuses a container a whole card (gpucores: 100,
    # rule tenant-whole-cards), so TC-12's and TC-14's unrestricted reference cannot run there.
    whole_cards: bool = True

    @property
    def slots_per_node(self) -> int:
        """nvidia.com/gpu a node must advertise: cards x slots (HAMi's deviceSplitCount)."""
        return self.cards_per_node * self.slots_per_card

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "pool": self.pool,
            "card": {
                "model": self.card.name,
                "memoryMiB": self.card.memory_mib,
                "coreUnits": self.card.core_units,
            },
            "cardsPerNode": self.cards_per_node,
            "slotsPerCard": self.slots_per_card,
            "replicas": self.replicas,
        }


def plan_gpu(platform: PlatformConfig) -> GpuPlan | None:
    """The first tenant pool whose nodes run HAMi's real device plugin on NVIDIA GPUs; None when
    the stack declares none (then TC-11 ... TC-15 skip)."""
    from components.stack import substrate_for

    default = substrate_for(platform).default_device_mode()
    # A tenant that allows whole cards first: TC-12 and TC-14 measure against a whole-card probe.
    tenants = sorted(platform.tenants, key=lambda t: not t.admission.whole_cards)
    for tenant in tenants:
        for pool in tenant.worker_pools:
            if (pool.device_mode or default) != "nvidia":
                continue
            cards = pool.resolved_cards()
            if not cards:
                continue
            return GpuPlan(
                tenant=tenant.name,
                pool=pool.name,
                card=cards[0][0],
                cards_per_node=sum(count for _, count in cards),
                slots_per_card=pool.slots_per_card,
                replicas=pool.replicas,
                whole_cards=tenant.admission.whole_cards,
            )
    return None


def unrestricted_reference_refused(plan: GpuPlan) -> str | None:
    """Why TC-12's and TC-14's unrestricted reference probe (``gpucores: UNRESTRICTED_CORES``)
    cannot run on ``plan``'s tenant, None when it can (reviews/acceptance.md section 5: the
    tenant-whole-cards rule refused it and the create raised a bare ApiException)."""
    if plan.whole_cards:
        return None
    return (
        f"tenant {plan.tenant} sets admission.wholeCards: false, so its admission refuses the "
        f"unrestricted reference probe (gpucores: {UNRESTRICTED_CORES}, rule tenant-whole-cards): "
        "cannot measure a share against it here; give a GPU pool to a tenant that allows whole "
        "cards to run this test"
    )


def no_gpu_pool_reason(stack: str) -> str:
    """The one-line skip reason when the stack declares no real GPU pool."""
    return (
        f"stack {stack!r} declares no worker pool with deviceMode: nvidia: runtime GPU isolation "
        "(TC-11 ... TC-15) needs real NVIDIA GPUs; the lab's mock devices run no CUDA"
    )


# --------------------------------------------------------------------------------- sizes


def memory_cap_mib(card_memory_mib: int) -> int:
    """TC-11's cap: MEMORY_CAP_MIB, or a quarter of a card smaller than four times that."""
    return min(MEMORY_CAP_MIB, card_memory_mib // 4)


def memory_guard_mib(card_memory_mib: int) -> int:
    """Where the memory probe stops by itself: MEMORY_GUARD_MIB above the cap, within the card."""
    cap = memory_cap_mib(card_memory_mib)
    return min(cap + MEMORY_GUARD_MIB, card_memory_mib)


@dataclass(frozen=True)
class ReclaimSizes:
    """TC-13 on one card: the hog's request and what it holds, and the waiter's request."""

    hog_mib: int
    hog_hold_mib: int
    waiter_mib: int

    def as_dict(self) -> dict[str, int]:
        return {
            "hogMiB": self.hog_mib,
            "hogHoldsMiB": self.hog_hold_mib,
            "waiterMiB": self.waiter_mib,
        }


def reclaim_sizes(card_memory_mib: int) -> ReclaimSizes:
    """The hog takes HOG_FRACTION of the card; the waiter asks one WAITER_EXCESS_MIB more than the
    rest, so hog + waiter > card >= waiter (a card of 81920 MiB: 61440 + 21504)."""
    hog = int(card_memory_mib * HOG_FRACTION)
    waiter = card_memory_mib - hog + WAITER_EXCESS_MIB
    return ReclaimSizes(hog_mib=hog, hog_hold_mib=max(hog - HOG_HEADROOM_MIB, 0), waiter_mib=waiter)


def sharing_problem(slots_per_card: int, needed: int, what: str) -> str | None:
    """Why a scenario needing ``needed`` pods on one card cannot run (None when it can)."""
    if slots_per_card >= needed:
        return None
    return f"{what} needs {needed} pods on one card but the pool's slotsPerCard is {slots_per_card}"
