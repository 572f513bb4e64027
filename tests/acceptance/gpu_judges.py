"""Judges of the runtime-isolation tests TC-11 ... TC-15 (pure functions).

They read two kinds of evidence, both plain values: the probe's JSON lines (its pod log, parsed
by ``parse_probe_log``; non-JSON lines such as HAMi-core's own ``[HAMI-core Msg(...)]`` messages
are kept apart) and what HAMi wrote and counts (pod allocation annotations, the node's
``hami.io/node-nvidia-register``, the scheduler's per-card metrics, as ``hami_evidence`` and
``hami_metrics`` parse them). Each returns a ``Verdict`` (problems; facts for the report) and is
tested offline on recorded samples that pass and samples that fail
(``tests/acceptance/samples/gpu_probe.yaml``, ``gpu_lifecycle.yaml``).

Every verdict also says what was exercised: whether HAMi-core's ``libvgpu.so`` was in the
probe's process at all, under which C library and base image, with which limits in its
environment - so a pass says which guarantee it rests on, and a probe that ran without HAMi-core
fails instead of measuring the bare driver.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.acceptance.gpu_plan import (
    COMPUTE_DIRECTION_MARGIN,
    COMPUTE_SHARE_TOLERANCE,
    CORE_POLICY_ENV,
    FORCE_CORE_POLICY,
    HAMI_CORE_LOG_ENV,
    KNOWN_UNTHROTTLED_SMS,
    MEMORY_ACCOUNTING_OVERHEAD_MIB,
    MIN_WINDOW_SAMPLES,
    SETTLE_SECONDS,
    WARMUP_SECONDS,
)
from tests.acceptance.hami_evidence import (
    BIND_SUCCESS,
    EvidenceError,
    PodPlacement,
    RegisteredCard,
    Verdict,
    pod_shares,
)
from tests.acceptance.hami_metrics import Sample

HAMI_CORE_MARK = "HAMI-core"  # HAMi-core's log prefix (src/include/log_utils.h)
OOM_ERROR = "CUDA_ERROR_OUT_OF_MEMORY"

# What the probe cannot show, recorded with every verdict so the report never claims more.
NOT_EXERCISED = {
    "memory": (
        "only cuMemAlloc_v2 through the driver API is probed: managed memory, virtual memory "
        "management (cuMemCreate), stream-ordered pools (cuMemAllocAsync) and allocations "
        "HAMi-core does not count are not; nor a second process in the same container"
    ),
    "compute": (
        "throughput of one short fused-multiply-add kernel that fills every SM; long-running "
        "kernels (HAMi-core throttles launches and cannot preempt a running kernel), memory "
        "bandwidth, copy engines and MIG are not measured"
    ),
}


# ------------------------------------------------------------------------- probe output


@dataclass
class ProbeRun:
    """One probe pod's output: its JSON records in order, and every other line."""

    pod: str
    records: list[dict[str, Any]] = field(default_factory=list)
    other: list[str] = field(default_factory=list)

    def of(self, kind: str) -> list[dict[str, Any]]:
        return [r for r in self.records if r.get("kind") == kind]

    def first(self, kind: str) -> dict[str, Any] | None:
        found = self.of(kind)
        return found[0] if found else None

    def last(self, kind: str) -> dict[str, Any] | None:
        found = self.of(kind)
        return found[-1] if found else None

    @property
    def env(self) -> dict[str, Any]:
        return self.first("env") or {}

    @property
    def variables(self) -> dict[str, Any]:
        value = self.env.get("env")
        return value if isinstance(value, dict) else {}

    @property
    def device(self) -> dict[str, Any]:
        return self.first("device") or {}

    @property
    def hami_core_lines(self) -> list[str]:
        return [line for line in self.other if HAMI_CORE_MARK in line]

    @property
    def errors(self) -> list[dict[str, Any]]:
        return self.of("error")


def parse_probe_log(pod: str, text: str) -> ProbeRun:
    """A probe pod's log: lines that are JSON objects with a ``kind`` are records, in order;
    anything else (HAMi-core's messages, a truncated line) is kept in ``other``."""
    run = ProbeRun(pod=pod)
    for raw in text.splitlines():
        line = raw.strip()
        if not line:
            continue
        record: Any = None
        if line.startswith("{"):
            try:
                record = json.loads(line)
            except json.JSONDecodeError:
                record = None
        if isinstance(record, dict) and isinstance(record.get("kind"), str):
            run.records.append(record)
        else:
            run.other.append(line)
    return run


def exercised(run: ProbeRun) -> dict[str, Any]:
    """What the probe ran under: the facts that decide which guarantee a result rests on."""
    env = run.env
    return {
        "pod": run.pod,
        "os": env.get("os"),
        "libc": env.get("libc"),
        "python": env.get("python"),
        "libvgpuLoaded": env.get("libvgpuLoaded"),
        "preload": env.get("preload"),
        "hamiCoreMessages": len(run.hami_core_lines),
        "hamiCore": hami_core_state(run),
        "limits": {
            key: run.variables.get(key)
            for key in (
                "CUDA_DEVICE_MEMORY_LIMIT_0",
                "CUDA_DEVICE_SM_LIMIT",
                CORE_POLICY_ENV,
                "CUDA_DISABLE_CONTROL",
                "CUDA_OVERSUBSCRIBE",
            )
        },
        "device": {k: run.device.get(k) for k in ("name", "uuid", "sms", "driver")},
    }


# HAMi-core's own lines (Project-HAMi/HAMi-core 8f3a89c; log_utils.h prefixes every line with
# "[HAMI-core <Level>(pid:tid:file:line)]: "):
# * src/libvgpu.c:913 LOG_WARN "SET_TASK_PID FAILED - using container PID for accounting": no host
#   PID, pidfound = 0, so cuLaunchKernel never calls rate_limiter (src/cuda/memory.c:540-550) and
#   the watcher loop skips every tick (multiprocess_utilization_watcher.c:226-231);
# * watcher.c:233 LOG_INFO "init_utilization_watcher: util_switch=%d" every 120 ms tick: 0 means
#   the limiter is off (rate_limiter's fast exit, watcher.c:49-59);
# * watcher.c:253 LOG_INFO "device %d: userutil=%d currentcores=%ld total=%ld limit=%d share=%ld";
# * watcher.c:277 LOG_INFO "device %d: core utilization limit = %d".
_SET_TASK_PID_FAILED = "SET_TASK_PID FAILED"
_UTIL_SWITCH = re.compile(r"util_switch=(-?\d+)")
_WATCHER = re.compile(
    r"device (\d+): userutil=(-?\d+) currentcores=(-?\d+) total=(-?\d+) limit=(-?\d+) "
    r"share=(-?\d+)"
)
_CORE_LIMIT = re.compile(r"device (\d+): core utilization limit = (-?\d+)")
LOG_LEVEL_ENV = next(iter(HAMI_CORE_LOG_ENV))
HAMI_CORE_INFO_LEVEL = 3  # log_utils.h: LOG_INFO prints at g_log_level >= 3


def hami_core_state(run: ProbeRun) -> dict[str, Any]:
    """What HAMi-core itself logged about its limiter in the probe's process."""
    lines = run.hami_core_lines
    switches = [int(m.group(1)) for line in lines for m in [_UTIL_SWITCH.search(line)] if m]
    watcher = [
        tuple(int(g) for g in m.groups()) for line in lines for m in [_WATCHER.search(line)] if m
    ]
    limits = [int(m.group(2)) for line in lines for m in [_CORE_LIMIT.search(line)] if m]
    state: dict[str, Any] = {
        "logLevel": run.variables.get(LOG_LEVEL_ENV),
        "setTaskPidFailed": any(_SET_TASK_PID_FAILED in line for line in lines),
        "coreLimit": limits[-1] if limits else None,
        "utilSwitch": {
            "ticks": len(switches),
            "on": sum(1 for v in switches if v != 0),
            "off": sum(1 for v in switches if v == 0),
            "last": switches[-1] if switches else None,
        },
        "watcherLines": len(watcher),
    }
    if watcher:
        userutil = [w[1] for w in watcher]
        state["userutilMean"] = round(sum(userutil) / len(userutil), 1)
        state["lastWatcher"] = dict(
            zip(
                ("device", "userutil", "currentcores", "total", "limit", "share"),
                watcher[-1],
                strict=True,
            )
        )
    return state


def hami_core_cause(state: Mapping[str, Any]) -> str:
    """One sentence naming why HAMi-core's limiter did (not) hold the probe back, from its own
    lines (``hami_core_state``)."""
    switch = state.get("utilSwitch") or {}
    if state.get("setTaskPidFailed"):
        return (
            "HAMi-core logged SET_TASK_PID FAILED: without the host PID cuLaunchKernel never "
            "calls its limiter (HAMi-core src/libvgpu.c:913, src/cuda/memory.c:540-550)"
        )
    if switch.get("ticks") and switch.get("last") == 0:
        return (
            f"HAMi-core's util_switch was 0 in {switch['off']} of {switch['ticks']} watcher ticks, "
            "the last included: the limiter was off (rate_limiter's fast exit; HAMi's vGPU "
            "monitor sets the switch, cmd/vGPUmonitor/feedback.go:120-131, unless "
            "GPU_CORE_UTILIZATION_POLICY=force)"
        )
    if state.get("watcherLines"):
        last = state.get("lastWatcher") or {}
        return (
            f"HAMi-core's limiter ran ({state['watcherLines']} watcher lines, util_switch on in "
            f"{switch.get('on', 0)}/{switch.get('ticks', 0)} ticks, mean userutil "
            f"{state.get('userutilMean')}% against limit {last.get('limit')}, last share "
            f"{last.get('share')} of {last.get('total')} tokens)"
        )
    level = state.get("logLevel")
    try:
        quiet = level is None or int(str(level)) < HAMI_CORE_INFO_LEVEL
    except ValueError:
        quiet = True
    if quiet:
        return (
            f"HAMi-core printed no watcher line at {LOG_LEVEL_ENV}={level!r}: it logs its limiter "
            f"only at {HAMI_CORE_INFO_LEVEL} (HAMi-core src/include/log_utils.h)"
        )
    return (
        f"HAMi-core printed no watcher line at {LOG_LEVEL_ENV}={level}: its watcher thread did "
        "not run (it starts only for a core limit in (0, 100], and skips every tick while it "
        "has no host PID: multiprocess_utilization_watcher.c:226-231, 271-282)"
    )


def interception_problems(run: ProbeRun, expected_env: Mapping[str, str | None]) -> list[str]:
    """Why the probe's result would not be HAMi-core's: it did not start, HAMi-core's library was
    not in its process, or HAMi's device plugin did not set the limits asked for."""
    problems: list[str] = []
    if not run.records:
        tail = " | ".join(run.other[-3:]) or "no output"
        return [f"{run.pod}: the probe printed no result ({tail})"]
    for error in run.errors:
        problems.append(
            f"{run.pod}: CUDA call {error.get('call')} failed: {error.get('error')} "
            f"({error.get('code')})"
        )
    env = run.env
    if not env:
        problems.append(f"{run.pod}: the probe printed no env line")
        return problems
    if env.get("libvgpuLoaded") is not True:
        problems.append(
            f"{run.pod}: HAMi-core's libvgpu.so is not loaded in the probe's process "
            f"(/etc/ld.so.preload: {env.get('preload')!r}; C library: {env.get('libc')}; "
            f"{env.get('os')}): HAMi's device plugin did not inject it, or the image's C library "
            "ignores /etc/ld.so.preload (musl does) - nothing below is HAMi-core's doing"
        )
    for key, want in expected_env.items():
        got = run.variables.get(key)
        if got != want:
            problems.append(f"{run.pod}: {key}={got!r} in the container, expected {want!r}")
    return problems


# ---------------------------------------------------------------------------- TC-11 memory


def judge_memory_cap(
    run: ProbeRun,
    *,
    cap_mib: int,
    overhead_mib: int = MEMORY_ACCOUNTING_OVERHEAD_MIB,
) -> Verdict:
    """TC-11: a pod with ``gpumem: cap_mib`` allocates until refused. Holds when HAMi-core is in
    the process with ``CUDA_DEVICE_MEMORY_LIMIT_0=<cap>m``, the allocations end with
    ``CUDA_ERROR_OUT_OF_MEMORY`` (not the probe's own guard, not another error), the total
    allocated is at most the cap and at least cap - overhead - the last step, and both
    ``cuMemGetInfo`` and ``nvidia-smi`` inside show the cap as the card's total."""
    verdict = Verdict()
    problems = verdict.problems
    problems.extend(interception_problems(run, {"CUDA_DEVICE_MEMORY_LIMIT_0": f"{cap_mib}m"}))
    result = run.last("memory-result")
    allocs = run.of("alloc")
    meminfo = run.last("meminfo")
    smi_after = next((s for s in reversed(run.of("smi")) if s.get("when") == "after"), None)
    facts: dict[str, Any] = {
        "capMiB": cap_mib,
        "overheadAllowedMiB": overhead_mib,
        "attempts": len(allocs),
        "exercised": exercised(run),
        "notExercised": NOT_EXERCISED["memory"],
    }
    verdict.facts = facts
    if result is None:
        problems.append(f"{run.pod}: no memory-result line (the probe did not finish)")
        return verdict
    allocated = int(result.get("allocatedMiB", 0))
    refusal = result.get("refusal") or {}
    steps = [int(s) for s in result.get("stepsMiB") or [0]]
    facts.update(
        allocatedMiB=allocated,
        overheadSeenMiB=cap_mib - allocated,
        stopped=result.get("stopped"),
        refusal=refusal,
    )
    stopped = result.get("stopped")
    if stopped == "guard":
        problems.append(
            f"cap exceeded: {allocated} MiB allocated under a {cap_mib} MiB cap and nothing "
            f"refused (the probe stopped at its own guard of {result.get('guardMiB')} MiB)"
        )
    elif stopped != "refused" or refusal.get("error") != OOM_ERROR:
        problems.append(
            f"the allocations ended with {refusal.get('error') or stopped!r}, not "
            f"{OOM_ERROR}: the process must get an out-of-memory error at the cap"
        )
    if allocated > cap_mib:
        problems.append(f"cap exceeded: {allocated} MiB allocated, the cap is {cap_mib} MiB")
    lowest = cap_mib - overhead_mib - steps[-1]
    if stopped == "refused" and allocated < lowest:
        problems.append(
            f"refused early: {allocated} MiB allocated, expected at least {lowest} MiB "
            f"(cap {cap_mib} - overhead {overhead_mib} - step {steps[-1]})"
        )
    if meminfo is None:
        problems.append(f"{run.pod}: no meminfo line")
    elif "error" in meminfo:
        problems.append(f"cuMemGetInfo inside failed: {meminfo.get('error')}")
    else:
        facts["cuMemGetInfoTotalMiB"] = meminfo.get("totalMiB")
        if meminfo.get("totalMiB") != cap_mib:
            problems.append(
                f"cuMemGetInfo inside shows {meminfo.get('totalMiB')} MiB total, not the cap "
                f"{cap_mib} MiB"
            )
    if smi_after is None or "error" in smi_after:
        why = smi_after.get("error") if smi_after else "not run"
        problems.append(f"nvidia-smi inside did not answer: {why}")
    else:
        facts["nvidiaSmiTotalMiB"] = smi_after.get("totalMiB")
        if smi_after.get("totalMiB") != cap_mib:
            problems.append(
                f"nvidia-smi inside shows {smi_after.get('totalMiB')} MiB total, not the cap "
                f"{cap_mib} MiB"
            )
    return verdict


# ------------------------------------------------------------------------- compute rates


@dataclass(frozen=True)
class RateWindow:
    """One ``rate`` line: kernels completed between wall-clock ``t0`` and ``t1``."""

    t0: float
    t1: float
    kernels: int

    @property
    def seconds(self) -> float:
        return self.t1 - self.t0


def rate_windows(run: ProbeRun) -> list[RateWindow]:
    windows = []
    for record in run.of("rate"):
        try:
            windows.append(
                RateWindow(float(record["t0"]), float(record["t1"]), int(record["kernels"]))
            )
        except (KeyError, TypeError, ValueError):
            raise EvidenceError(f"{run.pod}: rate line without t0/t1/kernels: {record}") from None
    return windows


def throughput(windows: Iterable[RateWindow]) -> tuple[float | None, int]:
    """Kernels per second over the windows (None without time), and how many windows."""
    chosen = list(windows)
    seconds = sum(w.seconds for w in chosen)
    if seconds <= 0:
        return None, len(chosen)
    return sum(w.kernels for w in chosen) / seconds, len(chosen)


def between(windows: Sequence[RateWindow], start: float, end: float) -> list[RateWindow]:
    """The windows lying entirely within [start, end]."""
    return [w for w in windows if w.t0 >= start and w.t1 <= end]


def steady(windows: Sequence[RateWindow], warmup: float) -> list[RateWindow]:
    """The windows after the first ``warmup`` seconds of a run."""
    if not windows:
        return []
    return between(windows, windows[0].t0 + warmup, windows[-1].t1)


def _rate(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def judge_compute_share(
    limited: ProbeRun,
    unrestricted: ProbeRun,
    *,
    cores: int,
    margin: float = COMPUTE_DIRECTION_MARGIN,
    warmup: float = WARMUP_SECONDS,
    min_samples: int = MIN_WINDOW_SAMPLES,
) -> Verdict:
    """TC-12: the same kernel for the same time, limited (``gpucores: cores``, policy ``force``)
    and unrestricted on the same card. Judged by direction until a real card calibrates it
    (``gpu_plan.COMPUTE_DIRECTION_MARGIN``): holds when the limited/unrestricted throughput ratio
    is at most ``1 - margin``; the ratio and its distance from ``cores`` / 100 are reported, and a
    probe that was not held back names HAMi-core's own state as the cause."""
    verdict = Verdict()
    problems = verdict.problems
    problems.extend(
        interception_problems(
            limited, {"CUDA_DEVICE_SM_LIMIT": str(cores), CORE_POLICY_ENV: FORCE_CORE_POLICY}
        )
    )
    problems.extend(interception_problems(unrestricted, {"CUDA_DEVICE_SM_LIMIT": "100"}))
    limited_state = hami_core_state(limited)
    facts: dict[str, Any] = {
        "cores": cores,
        "shareAsked": cores / 100,
        "directionMargin": margin,
        "ratioAtMost": round(1 - margin, 3),
        "warmupSeconds": warmup,
        "hamiCore": limited_state,
        "hamiCoreCause": hami_core_cause(limited_state),
        "exercised": [exercised(limited), exercised(unrestricted)],
        "notExercised": NOT_EXERCISED["compute"],
    }
    verdict.facts = facts
    same_card = _same_card([limited, unrestricted])
    if same_card is not None:
        problems.append(same_card)
    try:
        limited_rate, limited_n = throughput(steady(rate_windows(limited), warmup))
        full_rate, full_n = throughput(steady(rate_windows(unrestricted), warmup))
    except EvidenceError as exc:
        problems.append(str(exc))
        return verdict
    facts.update(
        limitedKernelsPerSecond=_rate(limited_rate),
        unrestrictedKernelsPerSecond=_rate(full_rate),
        windows={"limited": limited_n, "unrestricted": full_n},
    )
    for name, count in (("limited", limited_n), ("unrestricted", full_n)):
        if count < min_samples:
            problems.append(
                f"the {name} probe measured {count} steady windows, fewer than {min_samples}"
            )
    if limited_rate is None or not full_rate:
        problems.append("no throughput to compare (a probe completed no kernel)")
        return verdict
    ratio = limited_rate / full_rate
    facts["ratio"] = round(ratio, 3)
    facts["distanceFromShare"] = round(ratio - cores / 100, 3)
    if ratio > 1 - margin:
        text = (
            f"not limited: the limited probe ({cores}%, {FORCE_CORE_POLICY}) ran at {ratio:.0%} "
            f"of the unrestricted one, not clearly below it (at most {1 - margin:.0%}); "
            f"{facts['hamiCoreCause']}"
        )
        known = known_unthrottled(limited, limited_state)
        if known is not None and not problems:
            facts["knownUpstreamLimit"] = f"{text}; {known}"
        else:
            problems.append(text)
    return verdict


def known_unthrottled(run: ProbeRun, state: Mapping[str, Any]) -> str | None:
    """Why a "not limited" TC-12 is the pinned HAMi-core's known defect and not this platform's
    (``gpu_plan.KNOWN_UNTHROTTLED_SMS``), or None: a card of fewer SMs, or a limiter that did not
    run (then the platform is at fault, and TC-12 fails)."""
    try:
        sms = int(run.device.get("sms") or 0)
    except (TypeError, ValueError):
        return None
    switch = state.get("utilSwitch") or {}
    ran = bool(switch.get("on")) and int(state.get("watcherLines") or 0) > 0
    if sms < KNOWN_UNTHROTTLED_SMS or not ran or state.get("setTaskPidFailed"):
        return None
    return (
        f"a {sms}-SM card, where HAMi-core's limiter is known not to throttle although it ran "
        "(HAMi-core issues #274 and #314; fix PR #317 not in HAMi v2.10.0's HAMi-core)"
    )


def _same_card(runs: Sequence[ProbeRun]) -> str | None:
    uuids = {run.pod: run.device.get("uuid") for run in runs}
    if len(set(uuids.values())) != 1 or None in uuids.values():
        return f"the probes did not all run on one card: {uuids}"
    return None


# -------------------------------------------------------------------- TC-14 interference


def judge_interference(
    first: ProbeRun,
    second: ProbeRun,
    unrestricted: ProbeRun,
    *,
    shares: tuple[int, int],
    tolerance: float = COMPUTE_SHARE_TOLERANCE,
    warmup: float = WARMUP_SECONDS,
    settle: float = SETTLE_SECONDS,
    min_samples: int = MIN_WINDOW_SAMPLES,
) -> Verdict:
    """TC-14: two probes on one card, ``shares`` (gpucores) each, HAMi's default policy. The first
    starts alone, the second joins and outlives it. Their rate windows are split by wall-clock
    time into: first alone, both (from ``settle`` after the second started to the first's end),
    second alone (from ``settle`` after the first ended). Informational (gpu_plan.py says why the
    default policy may leave both unthrottled): reports each probe's fraction of the unrestricted
    card's throughput together and alone, its interference (1 - together / alone), whether it got
    less than its share minus ``tolerance`` (``belowShare``) and HAMi-core's own limiter state;
    fails only when there was nothing to measure (HAMi-core absent, not one card, too few
    windows)."""
    verdict = Verdict()
    problems = verdict.problems
    for run, share in ((first, shares[0]), (second, shares[1])):
        problems.extend(interception_problems(run, {"CUDA_DEVICE_SM_LIMIT": str(share)}))
    problems.extend(interception_problems(unrestricted, {"CUDA_DEVICE_SM_LIMIT": "100"}))
    facts: dict[str, Any] = {
        "shares": list(shares),
        "tolerance": tolerance,
        "informational": (
            "shares under HAMi's default policy are reported, not judged: HAMi-core's limiter "
            "may stay off for both probes (gpu_plan.INTERFERENCE_SHARES)"
        ),
        "exercised": [exercised(first), exercised(second), exercised(unrestricted)],
        "notExercised": NOT_EXERCISED["compute"],
    }
    verdict.facts = facts
    same_card = _same_card([first, second, unrestricted])
    if same_card is not None:
        problems.append(same_card)
    try:
        a, b = rate_windows(first), rate_windows(second)
        full_rate, full_n = throughput(steady(rate_windows(unrestricted), warmup))
    except EvidenceError as exc:
        problems.append(str(exc))
        return verdict
    if not a or not b:
        problems.append("a probe printed no rate window")
        return verdict
    phases = {
        "firstAlone": between(a, a[0].t0 + warmup, b[0].t0),
        "firstTogether": between(a, b[0].t0 + settle, min(a[-1].t1, b[-1].t1)),
        "secondTogether": between(b, b[0].t0 + settle, min(a[-1].t1, b[-1].t1)),
        "secondAlone": between(b, a[-1].t1 + settle, b[-1].t1),
    }
    rates = {name: throughput(windows) for name, windows in phases.items()}
    facts["unrestrictedKernelsPerSecond"] = _rate(full_rate)
    facts["phases"] = {
        name: {"kernelsPerSecond": _rate(rate), "windows": count}
        for name, (rate, count) in rates.items()
    }
    if full_n < min_samples or not full_rate:
        problems.append(f"the unrestricted probe measured {full_n} steady windows")
        return verdict
    for name, (_, count) in rates.items():
        if count < min_samples:
            problems.append(f"phase {name} has {count} windows, fewer than {min_samples}")
    interference: dict[str, Any] = {}
    findings: list[str] = []
    for label, run, share, alone_key, together_key in (
        ("first", first, shares[0], "firstAlone", "firstTogether"),
        ("second", second, shares[1], "secondAlone", "secondTogether"),
    ):
        together, _ = rates[together_key]
        alone, _ = rates[alone_key]
        if together is None:
            continue
        fraction = together / full_rate
        interference[label] = {
            "cardFractionTogether": round(fraction, 3),
            "cardFractionAlone": None if alone is None else round(alone / full_rate, 3),
            "interference": None if not alone else round(1 - together / alone, 3),
        }
        floor = share / 100 - tolerance
        interference[label]["belowShare"] = fraction < floor
        state = hami_core_state(run)
        interference[label]["hamiCore"] = state
        if fraction < floor:
            findings.append(
                f"with its neighbour busy, the {label} probe ({share}%) got {fraction:.0%} of "
                f"the card, below {share}% - {tolerance:.0%}: {hami_core_cause(state)}"
            )
    facts["interference"] = interference
    facts["findings"] = findings  # informational: never a problem (gpu_plan.py, TC-14)
    return verdict


# ---------------------------------------------------------------------- card usage views


@dataclass(frozen=True)
class CardLoad:
    """What HAMi counts on one card: MiB and cores allocated, and by whom (pods from the
    annotation view; containers from the scheduler's metrics, where pods are not named)."""

    memory_mib: float
    cores: float
    holders: int
    pods: tuple[str, ...] = ()

    def plus(self, memory_mib: float, cores: float, pod: str = "") -> CardLoad:
        pods = (*self.pods, pod) if pod else self.pods
        return CardLoad(self.memory_mib + memory_mib, self.cores + cores, self.holders + 1, pods)

    def same_amounts(self, other: CardLoad) -> bool:
        return (self.memory_mib, self.cores, self.holders) == (
            other.memory_mib,
            other.cores,
            other.holders,
        )

    def as_dict(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "memoryMiB": self.memory_mib,
            "cores": self.cores,
            "holders": self.holders,
        }
        if self.pods:
            out["pods"] = list(self.pods)
        return out


EMPTY = CardLoad(0, 0, 0)

# HAMi v2.10.0 cmd/scheduler/metrics.go:117-131, 250-258: per card, the MiB and cores allocated
# and the number of containers sharing it.
MEMORY_ALLOCATED = "hami_gpu_memory_allocated_bytes"
CORE_ALLOCATED = "hami_gpu_core_allocated_ratio"
SHARED_COUNT = "hami_gpu_shared_count"
_MIB = 1024 * 1024


def metrics_load(samples: Iterable[Sample], node: str, uuid: str) -> CardLoad | None:
    """The scheduler's count for one card (None when its metrics do not list the card)."""
    values: dict[str, float] = {}
    for sample in samples:
        if sample.name not in (MEMORY_ALLOCATED, CORE_ALLOCATED, SHARED_COUNT):
            continue
        if sample.labels.get("node") != node or sample.labels.get("device_uuid") != uuid:
            continue
        values[sample.name] = sample.value
    if MEMORY_ALLOCATED not in values or SHARED_COUNT not in values:
        return None
    return CardLoad(
        memory_mib=values[MEMORY_ALLOCATED] / _MIB,
        cores=values.get(CORE_ALLOCATED, 0.0),
        holders=int(values[SHARED_COUNT]),
    )


def annotation_load(allocations: Mapping[str, str], uuid: str) -> CardLoad:
    """The load on card ``uuid`` from ``{pod: hami.io/vgpu-devices-allocated}`` of the live pods
    HAMi counts on the node."""
    load = EMPTY
    for pod, value in sorted(allocations.items()):
        for share in pod_shares(value):
            if share.uuid == uuid:
                load = load.plus(share.memory_mib, share.cores, pod)
    return load


@dataclass
class LoadView:
    """One moment's load on the card, seen both ways."""

    annotations: CardLoad
    metrics: CardLoad | None  # None: metrics unreadable or the card missing from them

    def as_dict(self) -> dict[str, Any]:
        return {
            "annotations": self.annotations.as_dict(),
            "metrics": None if self.metrics is None else self.metrics.as_dict(),
        }


def load_problems(what: str, seen: LoadView, expected: CardLoad) -> list[str]:
    """Problems when either view differs from the expected amounts (an allocation leaked, or
    one missing)."""
    problems = []
    if not seen.annotations.same_amounts(expected):
        problems.append(
            f"{what}: HAMi's annotations count {seen.annotations.as_dict()} on the card, "
            f"expected {expected.as_dict()}"
        )
    if seen.metrics is None:
        problems.append(f"{what}: HAMi's scheduler metrics do not list the card")
    elif not seen.metrics.same_amounts(expected):
        problems.append(
            f"{what}: HAMi's scheduler counts {seen.metrics.as_dict()} on the card, "
            f"expected {expected.as_dict()}"
        )
    return problems


# --------------------------------------------------------------------- TC-13 reclamation


@dataclass
class ReclaimRound:
    """One TC-13 round: a hog holds most of the card, a waiter that does not fit waits; the hog
    ends (``how``: its process exits, or the pod is deleted); the waiter must bind."""

    how: str  # "exit" | "delete"
    hog: str
    hog_share: tuple[int, int]  # MiB, cores
    waiter: str
    waiter_share: tuple[int, int]
    baseline: LoadView
    with_hog: LoadView
    waiter_refusal: Verdict  # hami_evidence.judge_rejection while the hog is counted
    hog_run: ProbeRun
    hog_hold_mib: int
    hog_end: str  # the hog's phase after it ended ("Succeeded") or "deleted"
    bind_seconds: float | None  # hog end -> waiter bound; None: never within the bound
    with_waiter: LoadView | None
    after: LoadView | None  # once the waiter is deleted too

    def as_dict(self) -> dict[str, Any]:
        return {
            "how": self.how,
            "hog": {"pod": self.hog, "memoryMiB": self.hog_share[0], "cores": self.hog_share[1]},
            "waiter": {
                "pod": self.waiter,
                "memoryMiB": self.waiter_share[0],
                "cores": self.waiter_share[1],
            },
            "baseline": self.baseline.as_dict(),
            "withHog": self.with_hog.as_dict(),
            "hogEnd": self.hog_end,
            "bindSeconds": None if self.bind_seconds is None else round(self.bind_seconds, 1),
            "withWaiter": None if self.with_waiter is None else self.with_waiter.as_dict(),
            "after": None if self.after is None else self.after.as_dict(),
        }


def judge_reclamation(round_: ReclaimRound, *, bound_seconds: float) -> Verdict:
    """TC-13, one round. Holds when: the hog was counted (baseline + its share) and really held
    its memory; the waiter was refused for memory while it was; the hog ended as meant (round
    ``exit``: by itself on the suite's release, which comes only after the refusal); the
    waiter bound within ``bound_seconds`` of that; then HAMi counted baseline + the waiter only
    (the hog's share released, in the annotations and in the scheduler), and baseline once the
    waiter was gone too."""
    verdict = Verdict(facts=round_.as_dict())
    problems = verdict.problems
    tag = f"[{round_.how}]"
    base = round_.baseline.annotations
    hog_expected = base.plus(*round_.hog_share)
    problems.extend(f"{tag} {p}" for p in load_problems("hog bound", round_.with_hog, hog_expected))
    held = [h for h in round_.hog_run.of("hold") if int(h.get("heldMiB", 0)) >= round_.hog_hold_mib]
    problems.extend(f"{tag} {p}" for p in interception_problems(round_.hog_run, {}))
    if not held:
        problems.append(
            f"{tag} the hog {round_.hog} never reported holding {round_.hog_hold_mib} MiB"
        )
    problems.extend(
        f"{tag} waiter while the hog holds: {p}" for p in round_.waiter_refusal.problems
    )
    wanted_end = "Succeeded" if round_.how == "exit" else "deleted"
    if round_.hog_end != wanted_end:
        problems.append(f"{tag} the hog ended as {round_.hog_end!r}, expected {wanted_end!r}")
    if round_.how == "exit" and not round_.hog_run.of("released"):
        problems.append(
            f"{tag} the hog {round_.hog} ended without the suite's release (no 'released' line): "
            "its end was not the one staged after the waiter's refusal (a timer or a crash)"
        )
    if round_.bind_seconds is None:
        problems.append(
            f"{tag} the waiter {round_.waiter} did not bind within {bound_seconds:.0f} s of the "
            "hog's end: its memory was not reclaimed"
        )
    elif round_.bind_seconds > bound_seconds:
        problems.append(
            f"{tag} the waiter bound {round_.bind_seconds:.0f} s after the hog's end, over the "
            f"bound of {bound_seconds:.0f} s"
        )
    if round_.with_waiter is None:
        problems.append(f"{tag} no load seen with the waiter bound")
    else:
        problems.extend(
            f"{tag} {p} (allocation leaked?)"
            for p in load_problems(
                "with the waiter", round_.with_waiter, base.plus(*round_.waiter_share)
            )
        )
    if round_.after is None:
        problems.append(f"{tag} no load seen after the waiter was deleted")
    else:
        problems.extend(
            f"{tag} {p} (allocation leaked?)"
            for p in load_problems("after both ended", round_.after, base)
        )
    return verdict


# ----------------------------------------------------------------------- TC-15 recovery


@dataclass
class RecoveryObservation:
    """TC-15: what was seen before and after HAMi's device-plugin pod on the node was deleted."""

    node: str
    plugin_before: str  # pod UID
    plugin_after: str | None
    plugin_ready_after: bool
    holder_beats_before: int  # the holder's last heartbeat number before the plugin pod went
    recovered_seconds: float | None  # deletion -> serving again; None: not within the bound
    cards_before: Sequence[RegisteredCard]
    cards_after: Sequence[RegisteredCard] | None  # None: the annotation was unreadable
    allocatable_before: int | None
    allocatable_after: int | None
    expected_allocatable: int
    holder_before: PodPlacement
    holder_after: PodPlacement
    holder_restarts: int
    holder_run: ProbeRun
    newcomer: PodPlacement | None
    newcomer_run: ProbeRun | None
    # The new plugin pod's device-plugin container log: the only state written after the deletion
    # (see plugin_fresh_problems); None when unread.
    plugin_log_after: str | None = None

    def as_dict(self) -> dict[str, Any]:
        def cards(found: Sequence[RegisteredCard] | None) -> Any:
            if found is None:
                return None
            return [_card_key(c) for c in found]

        return {
            "node": self.node,
            "pluginPod": {"before": self.plugin_before, "after": self.plugin_after},
            "recoveredSeconds": None
            if self.recovered_seconds is None
            else round(self.recovered_seconds, 1),
            "cardsBefore": cards(self.cards_before),
            "cardsAfter": cards(self.cards_after),
            "allocatable": {
                "before": self.allocatable_before,
                "after": self.allocatable_after,
                "expected": self.expected_allocatable,
            },
            "holder": {
                "pod": self.holder_after.name,
                "phase": self.holder_after.phase,
                "restarts": self.holder_restarts,
                "allocatedBefore": self.holder_before.allocated,
                "allocatedAfter": self.holder_after.allocated,
            },
            "newcomer": None
            if self.newcomer is None
            else {
                "pod": self.newcomer.name,
                "phase": self.newcomer.phase,
                "node": self.newcomer.node,
                "allocated": self.newcomer.allocated,
            },
        }


# What only a device-plugin process that started after the deletion writes (HAMi v2.10.0): its
# registration with the kubelet (pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go:329
# "Registered device plugin for '%s' with Kubelet") and its first annotation write - a fresh
# process has an empty device cache, so its first RegisterInAnnotation patches the node and logs
# (plugin/register.go:273-276, 302, 344). Neither the node's annotation nor its allocatable can
# show this: the new process writes the same annotation value again (a no-op the API server does
# not record), and the kubelet posts node status only every 10 s, so a fast restart may never
# show allocatable 0 and a stale value passes for a fresh one.
PLUGIN_REGISTERED = "Registered device plugin for '{resource}' with Kubelet"
PLUGIN_ANNOTATED = "Updating node annotations with"


def plugin_fresh_problems(log: str | None, resource: str = "nvidia.com/gpu") -> list[str]:
    """Why the new plugin pod's log does not show it serving (empty when it does)."""
    if log is None:
        return ["the new device-plugin pod's log could not be read"]
    missing = [
        line
        for line in (PLUGIN_REGISTERED.format(resource=resource), PLUGIN_ANNOTATED)
        if line not in log
    ]
    if not missing:
        return []
    return [
        "the new device-plugin pod's log lacks "
        + " and ".join(repr(m) for m in missing)
        + ": the cards and allocatable seen may still be the old pod's (HAMi v2.10.0 "
        "plugin/server.go:329, register.go:302)"
    ]


def _card_key(card: RegisteredCard) -> dict[str, Any]:
    return {
        "uuid": card.uuid,
        "memoryMiB": card.memory_mib,
        "coreUnits": card.core_units,
        "slots": card.slots,
        "type": card.type,
        "health": card.health,
    }


def judge_recovery(seen: RecoveryObservation, *, bound_seconds: float, beats_after: int) -> Verdict:
    """TC-15. Holds when the device-plugin pod was replaced and serves again within the bound;
    the node re-registers the same cards with the same totals, healthy; ``nvidia.com/gpu``
    allocatable is back; the pod that held a share before keeps running with the same allocation
    and keeps using its memory after the restart; and a new pod binds to a registered card and
    runs on it."""
    verdict = Verdict(facts=seen.as_dict())
    problems = verdict.problems
    if seen.plugin_after is None or seen.plugin_after == seen.plugin_before:
        problems.append(f"{seen.node}: HAMi's device-plugin pod was not replaced")
    elif not seen.plugin_ready_after:
        problems.append(f"{seen.node}: the new device-plugin pod is not ready")
    if seen.recovered_seconds is None:
        problems.append(
            f"{seen.node}: the device plugin did not serve again within {bound_seconds:.0f} s"
        )
    if seen.plugin_after is not None and seen.plugin_after != seen.plugin_before:
        problems.extend(f"{seen.node}: {p}" for p in plugin_fresh_problems(seen.plugin_log_after))
    if seen.cards_after is None:
        problems.append(f"{seen.node}: hami.io/node-nvidia-register unreadable after the restart")
    else:
        before = sorted((_card_key(c) for c in seen.cards_before), key=lambda c: c["uuid"])
        after = sorted((_card_key(c) for c in seen.cards_after), key=lambda c: c["uuid"])
        if before != after:
            problems.append(
                f"{seen.node}: the cards re-registered with other totals: before {before}, "
                f"after {after}"
            )
        unhealthy = [c["uuid"] for c in after if not c["health"]]
        if unhealthy:
            problems.append(f"{seen.node}: cards unhealthy after the restart: {unhealthy}")
    for when, value in (("before", seen.allocatable_before), ("after", seen.allocatable_after)):
        if value != seen.expected_allocatable:
            problems.append(
                f"{seen.node}: nvidia.com/gpu allocatable {when} the restart is {value}, "
                f"expected {seen.expected_allocatable}"
            )
    holder = seen.holder_after
    if holder.phase != "Running" or seen.holder_restarts:
        problems.append(
            f"{holder.name} is {holder.status_text()} with {seen.holder_restarts} restarts after "
            "the device plugin restarted"
        )
    if holder.allocated != seen.holder_before.allocated or not holder.allocated:
        problems.append(
            f"{holder.name}'s allocation changed: {seen.holder_before.allocated!r} -> "
            f"{holder.allocated!r}"
        )
    problems.extend(interception_problems(seen.holder_run, {}))
    # Heartbeats counted by number, not by time: the probe's clock is the node's, not the suite's.
    last_before = seen.holder_beats_before
    beats = [b for b in seen.holder_run.of("hold") if int(b.get("beat", 0)) > last_before]
    if len(beats) < beats_after:
        problems.append(
            f"{holder.name} touched its memory {len(beats)} times after the restart, expected "
            f"at least {beats_after}"
        )
    verdict.facts["holderBeatsAfterRestart"] = len(beats)
    problems.extend(_newcomer_problems(seen))
    return verdict


def _newcomer_problems(seen: RecoveryObservation) -> list[str]:
    pod, run = seen.newcomer, seen.newcomer_run
    if pod is None:
        return ["no new pod was created after the restart"]
    problems = []
    registered = {c.uuid for c in (seen.cards_after or seen.cards_before)}
    if pod.node != seen.node:
        problems.append(f"the new pod {pod.name} is not bound to {seen.node} ({pod.node!r})")
    if pod.bind_phase != BIND_SUCCESS:
        problems.append(f"the new pod's hami.io/bind-phase is {pod.bind_phase!r}")
    try:
        shares = pod_shares(pod.allocated or "")
    except EvidenceError as exc:
        shares = []
        problems.append(f"the new pod: {exc}")
    if not shares or any(s.uuid not in registered for s in shares):
        problems.append(f"the new pod holds {pod.allocated!r}, not a share of a registered card")
    if pod.phase != "Succeeded":
        problems.append(f"the new pod is {pod.status_text()}, not Succeeded")
    if run is not None:
        problems.extend(interception_problems(run, {}))
        uuid = run.device.get("uuid")
        if shares and uuid != shares[0].uuid:
            problems.append(f"the new pod ran on {uuid}, HAMi allocated {shares[0].uuid}")
    return problems
