"""A pure-Python model of HAMi 2.10.0's NVIDIA per-card fit logic.

Why: the policy pack must answer "would this pod ever be scheduled on the cards a tenant
declared?" at ``pulumi preview`` time, and the answer has to agree with what HAMi's scheduler
does (same picks, same reason strings such as ``"1/1 CardInsufficientCore"``). The behaviour is
written from the specification in ``../shared/upstream/hami/FIT-CASES.md`` (HAMi tag
``v2.10.0``) and is checked against HAMi's own test vectors in ``fit-cases.json``.

Layers, from the inside out:

* :func:`fit` is HAMi's per-card ``Fit``: one container request against one card list.
* :func:`score_cards` / :func:`sort_cards` give the card order HAMi hands to ``Fit``.
* :func:`fit_in_devices` is the scheduler step around ``Fit`` (sort, vendor and type filter,
  ``NodeInsufficientDevice``, booking the picks).
* :func:`fit_pod_on_node` / :func:`fit_pod_on_nodes` run a whole pod (init containers on fresh
  copies, app containers booked in sequence).
* :func:`generate_resource_request` and :func:`admit_container` turn container resources into a
  request, the way HAMi's device plugin and mutating webhook do.
* :func:`declared_cards` and :func:`place_containers` are the small convenience API the policy
  pack uses.

Not modelled (no vectors for them in ``cases``; they are listed under ``skipped``):

* MIG placement (check 15, ``CardMigTopologyInfeasible``): a card whose ``mode`` is ``"mig"`` is
  checked like any other card, without its MIG templates.
* Namespace quota accounting (check 10, ``ResourceQuotaNotFit``): quotas are never consulted.
* Vendors other than NVIDIA: the only registered device type is ``"NVIDIA"``.

Everything here is pure: frozen dataclasses in, new frozen dataclasses out, no I/O.
"""

from __future__ import annotations

import itertools
import re
import struct
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field, replace
from fractions import Fraction
from typing import Any, Final

__all__ = [
    "ALLOCATED_CARDS_INSUFFICIENT_REQUEST",
    "CARD_COMPUTE_UNITS_EXHAUSTED",
    "CARD_CORDONED",
    "CARD_INSUFFICIENT_CORE",
    "CARD_INSUFFICIENT_MEMORY",
    "CARD_NOT_HEALTH",
    "CARD_TIME_SLICING_EXHAUSTED",
    "CARD_TYPE_MISMATCH",
    "CARD_UUID_MISMATCH",
    "DEVICE_CORDON",
    "DEVICE_SCORING_WEIGHTS",
    "DEVICE_TYPE_NOT_FOUND",
    "EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT",
    "GPU_SCHEDULER_POLICY",
    "MEM_PERCENTAGE_UNSET",
    "NODE_INSUFFICIENT_DEVICE",
    "NOUSE_GPUTYPE",
    "NOUSE_GPUUUID",
    "NUMA_BIND",
    "NUMA_NOT_FIT",
    "NVIDIA",
    "USE_GPUTYPE",
    "USE_GPUUUID",
    "VGPU_MODE",
    "AdmissionResult",
    "Allocation",
    "Card",
    "ContainerRequest",
    "DevicesFitResult",
    "FitResult",
    "NodeFitResult",
    "NodeSpec",
    "PlacementResult",
    "PodContainer",
    "RequestConfig",
    "RequestPlacement",
    "ResourceNames",
    "ScoringWeights",
    "admit_container",
    "card_score",
    "declared_cards",
    "fit",
    "fit_in_devices",
    "fit_pod_on_node",
    "fit_pod_on_nodes",
    "format_reason",
    "generate_resource_request",
    "node_usage_score",
    "numa_bind_enforced",
    "parse_quantity",
    "parse_scoring_weights",
    "place_containers",
    "score_cards",
    "sort_cards",
    "type_matches",
    "uuid_matches",
]

# --- Names HAMi uses -----------------------------------------------------------------------------

NVIDIA: Final = "NVIDIA"
"""The request type of the NVIDIA backend; ``Fit`` rejects every card for any other type."""

MEM_PERCENTAGE_UNSET: Final = 101
"""``mempercentagereq`` value meaning "no percentage given"."""

USE_GPUTYPE: Final = "nvidia.com/use-gputype"
NOUSE_GPUTYPE: Final = "nvidia.com/nouse-gputype"
USE_GPUUUID: Final = "nvidia.com/use-gpuuuid"
NOUSE_GPUUUID: Final = "nvidia.com/nouse-gpuuuid"
NUMA_BIND: Final = "nvidia.com/numa-bind"
VGPU_MODE: Final = "nvidia.com/vgpu-mode"
GPU_SCHEDULER_POLICY: Final = "hami.io/gpu-scheduler-policy"
DEVICE_SCORING_WEIGHTS: Final = "hami.io/device-scoring-weights"
DEVICE_CORDON: Final = "hami.io/device-cordon"
"""Node annotation: comma list of card UUIDs excluded from new allocations."""

CARD_NOT_HEALTH: Final = "CardNotHealth"
CARD_CORDONED: Final = "CardCordoned"
CARD_TYPE_MISMATCH: Final = "CardTypeMismatch"
NUMA_NOT_FIT: Final = "NumaNotFit"
CARD_UUID_MISMATCH: Final = "CardUuidMismatch"
CARD_TIME_SLICING_EXHAUSTED: Final = "CardTimeSlicingExhausted"
EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT: Final = "ExclusiveDeviceAllocateConflict"
CARD_INSUFFICIENT_MEMORY: Final = "CardInsufficientMemory"
CARD_INSUFFICIENT_CORE: Final = "CardInsufficientCore"
CARD_COMPUTE_UNITS_EXHAUSTED: Final = "CardComputeUnitsExhausted"
ALLOCATED_CARDS_INSUFFICIENT_REQUEST: Final = "AllocatedCardsInsufficientRequest"
NODE_INSUFFICIENT_DEVICE: Final = "NodeInsufficientDevice"
"""Bare scheduler reason (no count prefix): more cards asked for than the node has."""
DEVICE_TYPE_NOT_FOUND: Final = "Device type not found"
"""Bare scheduler reason: the request type is not a registered vendor."""

_REGISTERED_VENDORS: Final = frozenset({NVIDIA})
_TRUE_STRINGS: Final = frozenset({"1", "t", "T", "TRUE", "true", "True"})
_INT32_MIN: Final = -(2**31)
_INT32_MAX: Final = 2**31 - 1
_INT64_MIN: Final = -(2**63)
_INT64_MAX: Final = 2**63 - 1
_SCORE_WEIGHT: Final = 10


# --- Data ----------------------------------------------------------------------------------------


def _as_int(value: Any, name: str) -> int:
    """Coerce a JSON number to int: Pulumi props arrive as floats, so ``2.0`` must become ``2``."""
    if isinstance(value, bool):
        raise TypeError(f"{name}: expected a number, got a bool")
    if isinstance(value, int):
        return value
    if isinstance(value, float) and value.is_integer():
        return int(value)
    raise TypeError(f"{name}: expected an integer, got {value!r}")


@dataclass(frozen=True)
class Card:
    """One physical card as HAMi sees it (usage already booked on it).

    ``usedmem``/``totalmem`` are MiB, ``usedcores``/``totalcore`` percent of one GPU,
    ``used``/``count`` tasks sharing the card and its slots (``deviceSplitCount``).
    """

    id: str
    index: int
    used: int
    count: int
    usedmem: int
    totalmem: int
    usedcores: int
    totalcore: int
    type: str = NVIDIA
    numa: int = 0
    health: bool = True
    mode: str = ""

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> Card:
        """Build a card from a JSON-like mapping (vector files, Pulumi props); numbers coerced."""
        return cls(
            id=str(data["id"]),
            index=_as_int(data.get("index", 0), "index"),
            used=_as_int(data.get("used", 0), "used"),
            count=_as_int(data["count"], "count"),
            usedmem=_as_int(data.get("usedmem", 0), "usedmem"),
            totalmem=_as_int(data["totalmem"], "totalmem"),
            usedcores=_as_int(data.get("usedcores", 0), "usedcores"),
            totalcore=_as_int(data["totalcore"], "totalcore"),
            type=str(data.get("type", NVIDIA)),
            numa=_as_int(data.get("numa", 0), "numa"),
            health=bool(data.get("health", True)),
            mode=str(data.get("mode") or ""),
        )

    def book(self, allocation: Allocation) -> Card:
        """The card after one more task lands on it (what the scheduler does with a pick)."""
        return replace(
            self,
            used=self.used + 1,
            usedmem=self.usedmem + allocation.usedmem,
            usedcores=self.usedcores + allocation.usedcores,
        )


@dataclass(frozen=True)
class ContainerRequest:
    """One container's request for one vendor: ``nums`` cards, each with memory and cores.

    ``memreq`` is MiB per card (0 = not given), ``mempercentagereq`` percent of each card's
    memory (101 = not given), ``coresreq`` percent of one card's compute.
    """

    nums: int
    type: str = NVIDIA
    memreq: int = 0
    mempercentagereq: int = MEM_PERCENTAGE_UNSET
    coresreq: int = 0

    @classmethod
    def from_mapping(cls, data: Mapping[str, Any]) -> ContainerRequest:
        """Build a request from a JSON-like mapping; numbers coerced."""
        return cls(
            nums=_as_int(data["nums"], "nums"),
            type=str(data.get("type", NVIDIA)),
            memreq=_as_int(data.get("memreq", 0), "memreq"),
            mempercentagereq=_as_int(
                data.get("mempercentagereq", MEM_PERCENTAGE_UNSET), "mempercentagereq"
            ),
            coresreq=_as_int(data.get("coresreq", 0), "coresreq"),
        )


@dataclass(frozen=True)
class Allocation:
    """What ``Fit`` books on one picked card: MiB and cores, with the request's type."""

    id: str
    idx: int
    type: str
    usedmem: int
    usedcores: int


@dataclass(frozen=True)
class FitResult:
    """Outcome of :func:`fit`.

    On failure ``allocations`` holds the tentative picks still held when the scan ended (HAMi
    returns them too), ``reason`` the formatted reason string and ``reason_counts`` the raw counts.
    """

    fit: bool
    allocations: tuple[Allocation, ...]
    reason: str
    reason_counts: Mapping[str, int]

    @property
    def device_ids(self) -> tuple[str, ...]:
        """Picked card UUIDs in the order ``Fit`` returned them."""
        return tuple(a.id for a in self.allocations)


# --- Small helpers -------------------------------------------------------------------------------


def _f32(value: float) -> float:
    """Round to IEEE-754 binary32, as Go's float32 arithmetic does after every operation."""
    result: float = struct.unpack("f", struct.pack("f", value))[0]
    return result


def _div_trunc(numerator: int, denominator: int) -> int:
    """Go integer division (truncates toward zero, unlike Python's ``//``)."""
    quotient = abs(numerator) // abs(denominator)
    return quotient if (numerator >= 0) == (denominator >= 0) else -quotient


def _wrap_int32(value: int) -> int:
    """Go's ``int32(x)`` conversion of an int64 (wraps around)."""
    return (value - _INT32_MIN) % 2**32 + _INT32_MIN


def _comma_entries(value: str) -> list[str]:
    """Trimmed, non-empty entries of a comma list."""
    return [entry.strip() for entry in value.split(",") if entry.strip()]


def _non_blank(value: str | None) -> bool:
    return value is not None and value.strip() != ""


def format_reason(counts: Mapping[str, int], total: int) -> str:
    """HAMi's ``GenReason``: ``"<n>/<total> <Reason>"`` entries sorted as strings, ``", "``-joined.

    Sorting as strings (not by count) is why ``"10/12 ..."`` comes before ``"2/12 ..."``.
    """
    return ", ".join(sorted(f"{n}/{total} {name}" for name, n in counts.items()))


# --- Annotation matchers -------------------------------------------------------------------------


def _type_entry_hits(entry: str, card_type: str) -> bool:
    cleaned = entry.strip()
    return cleaned != "" and cleaned.upper() in card_type.upper()


def type_matches(card_type: str, card_mode: str, annotations: Mapping[str, str]) -> bool:
    """Whether the pod's card-type and vGPU-mode annotations allow this card.

    ``use-gputype``: some entry must be a case-insensitive substring of the card type;
    ``nouse-gputype``: no entry may be; a blank annotation is no constraint and blank entries
    never match. ``vgpu-mode``, when present, must contain the card's mode (an empty mode is a
    substring of anything).
    """
    use = annotations.get(USE_GPUTYPE)
    if (
        use is not None
        and _non_blank(use)
        and not any(_type_entry_hits(entry, card_type) for entry in use.split(","))
    ):
        return False
    nouse = annotations.get(NOUSE_GPUTYPE)
    if (
        nouse is not None
        and _non_blank(nouse)
        and any(_type_entry_hits(entry, card_type) for entry in nouse.split(","))
    ):
        return False
    mode = annotations.get(VGPU_MODE)
    return mode is None or card_mode in mode


def uuid_matches(device_id: str, annotations: Mapping[str, str]) -> bool:
    """Whether the pod's ``use-gpuuuid``/``nouse-gpuuuid`` lists allow this card (exact match)."""
    use = annotations.get(USE_GPUUUID)
    if use is not None and _non_blank(use) and device_id not in _comma_entries(use):
        return False
    nouse = annotations.get(NOUSE_GPUUUID)
    return not (nouse is not None and _non_blank(nouse) and device_id in _comma_entries(nouse))


def numa_bind_enforced(annotations: Mapping[str, str]) -> bool:
    """Whether ``nvidia.com/numa-bind`` parses as true (Go ``strconv.ParseBool``); else off."""
    return annotations.get(NUMA_BIND) in _TRUE_STRINGS


def _cordoned(node_annotations: Mapping[str, str] | None) -> frozenset[str]:
    if not node_annotations:
        return frozenset()
    return frozenset(_comma_entries(node_annotations.get(DEVICE_CORDON, "")))


def _policy_has(policy: str, name: str) -> bool:
    """The GPU policy *contains* ``name`` (substring, as the spec words it for Fit)."""
    return name in policy


# --- Fit -----------------------------------------------------------------------------------------


def _resolve_memory(request: ContainerRequest, totalmem: int) -> int:
    """Check 9: explicit MiB wins; else a percentage of this card's memory, truncated."""
    if request.memreq > 0:
        return request.memreq
    if request.mempercentagereq != MEM_PERCENTAGE_UNSET:
        return _div_trunc(totalmem * request.mempercentagereq, 100)
    return request.memreq


def _pair_score(pair_scores: Mapping[str, Mapping[str, float]], a: str, b: str) -> float:
    return pair_scores.get(a, {}).get(b, 0)


def _topology_choice(
    held: list[tuple[int, Allocation]],
    nums: int,
    pair_scores: Mapping[str, Mapping[str, float]],
) -> list[tuple[int, Allocation]]:
    """Pick ``nums`` of the held cards by topology: one card -> worst connected to the rest;
    several -> the combination with the highest pair-score sum (first best wins)."""
    if nums == 1:
        best: tuple[int, Allocation] | None = None
        best_sum = 0.0
        for candidate in held:
            total = sum(
                _pair_score(pair_scores, candidate[1].id, other[1].id)
                for other in held
                if other is not candidate
            )
            if best is None or total < best_sum:
                best, best_sum = candidate, total
        return [] if best is None else [best]
    best_combo: tuple[tuple[int, Allocation], ...] | None = None
    best_total = 0.0
    for combo in itertools.combinations(held, nums):
        total = sum(
            _pair_score(pair_scores, first[1].id, second[1].id)
            for first, second in itertools.combinations(combo, 2)
        )
        if best_combo is None or total > best_total:
            best_combo, best_total = combo, total
    return [] if best_combo is None else list(best_combo)


def _fit(
    cards: Sequence[Card],
    request: ContainerRequest,
    annotations: Mapping[str, str],
    node_annotations: Mapping[str, str] | None,
    pair_scores: Mapping[str, Mapping[str, float]] | None,
) -> tuple[FitResult, tuple[int, ...]]:
    """:func:`fit`, also returning the positions (in ``cards``) of the allocations."""
    total = len(cards)
    counts: dict[str, int] = {}

    def bump(name: str, by: int = 1) -> None:
        counts[name] = counts.get(name, 0) + by

    policy = annotations.get(GPU_SCHEDULER_POLICY, "")
    mutex = _policy_has(policy, "mutex")
    topology = _policy_has(policy, "topology-aware")
    numa_bind = numa_bind_enforced(annotations)
    cordoned = _cordoned(node_annotations)

    needed = request.nums
    coresreq = request.coresreq
    held: list[tuple[int, Allocation]] = []
    run_numa: int | None = None

    def done(ok: bool, picks: list[tuple[int, Allocation]]) -> tuple[FitResult, tuple[int, ...]]:
        reason = "" if ok else format_reason(counts, total)
        result = FitResult(
            fit=ok,
            allocations=tuple(a for _, a in picks),
            reason=reason,
            reason_counts={} if ok else dict(counts),
        )
        return result, tuple(p for p, _ in picks)

    for position in range(len(cards) - 1, -1, -1):  # HAMi scans from the last card
        card = cards[position]
        if not card.health:
            bump(CARD_NOT_HEALTH)
            continue
        if card.id in cordoned:
            bump(CARD_CORDONED)
            continue
        if request.type != NVIDIA or not type_matches(card.type, card.mode, annotations):
            bump(CARD_TYPE_MISMATCH)
            continue
        if numa_bind and card.numa != run_numa:
            # A new NUMA run starts: whatever the previous run held cannot be used together.
            if held:
                bump(NUMA_NOT_FIT, len(held))
            held = []
            needed = request.nums
            run_numa = card.numa
        if not uuid_matches(card.id, annotations):
            bump(CARD_UUID_MISMATCH)
            continue
        if card.count <= card.used:
            bump(CARD_TIME_SLICING_EXHAUSTED)
            continue
        if mutex and card.used > 0:
            bump(EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT)
            continue
        coresreq = min(coresreq, 100)  # sticky: later cards see the clamped value too
        memreq = _resolve_memory(request, card.totalmem)
        if card.totalmem - card.usedmem < memreq:
            bump(CARD_INSUFFICIENT_MEMORY)
            continue
        if card.totalcore - card.usedcores < coresreq:
            bump(CARD_INSUFFICIENT_CORE)
            continue
        if card.totalcore == 100 and coresreq == 100 and card.used > 0:
            bump(EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT)
            continue
        if card.totalcore != 0 and card.usedcores == card.totalcore and coresreq == 0:
            bump(CARD_COMPUTE_UNITS_EXHAUSTED)
            continue
        held.append((position, Allocation(card.id, card.index, request.type, memreq, coresreq)))
        if not topology:
            needed -= 1
            if needed == 0:
                return done(True, held)

    if topology:
        if len(held) == request.nums:
            return done(True, held)
        if len(held) > request.nums:
            return done(True, _topology_choice(held, request.nums, pair_scores or {}))
    if held:
        counts[ALLOCATED_CARDS_INSUFFICIENT_REQUEST] = len(held)  # cards held, not the shortfall
    return done(False, held)


def fit(
    cards: Sequence[Card],
    request: ContainerRequest,
    annotations: Mapping[str, str],
    node_annotations: Mapping[str, str] | None = None,
    pair_scores: Mapping[str, Mapping[str, float]] | None = None,
) -> FitResult:
    """HAMi's NVIDIA ``Fit``: can ``request`` be placed on ``cards``, listed in HAMi's order?

    Cards are scanned from the last to the first; each card is charged with the first check it
    fails (health, cordon, type/mode, NUMA run, UUID, slots, mutex, memory, cores, exclusivity,
    exhausted compute units). ``node_annotations`` is ``None`` when there is no node object;
    ``pair_scores`` (``{uuid: {uuid: score}}``) is only read under ``topology-aware``. MIG
    placement and namespace quotas are not modelled (see the module docstring).
    """
    return _fit(cards, request, annotations, node_annotations, pair_scores)[0]


# --- Card scoring and order ----------------------------------------------------------------------


@dataclass(frozen=True)
class ScoringWeights:
    """Weights of the slot, core and memory terms of a card's score (pod annotation)."""

    slot: float = 1.0
    core: float = 1.0
    memory: float = 1.0


def parse_scoring_weights(annotations: Mapping[str, str]) -> ScoringWeights:
    """Read ``hami.io/device-scoring-weights: "slot=a,core=b,memory=c"``; keys not named stay 1.

    Raises ``ValueError`` on an unknown key, a malformed entry or a number that does not parse
    (HAMi rejects the pod then; that error path has no vectors).
    """
    raw = annotations.get(DEVICE_SCORING_WEIGHTS)
    if raw is None or not raw.strip():
        return ScoringWeights()
    values = {"slot": 1.0, "core": 1.0, "memory": 1.0}
    for entry in _comma_entries(raw):
        key, sep, number = entry.partition("=")
        key = key.strip()
        if not sep or key not in values:
            raise ValueError(f"{DEVICE_SCORING_WEIGHTS}: bad entry {entry!r}")
        try:
            values[key] = _f32(float(number.strip()))
        except ValueError as exc:
            raise ValueError(f"{DEVICE_SCORING_WEIGHTS}: bad number in {entry!r}") from exc
    return ScoringWeights(slot=values["slot"], core=values["core"], memory=values["memory"])


def card_score(
    card: Card, requests: Sequence[ContainerRequest], weights: ScoringWeights | None = None
) -> float:
    """HAMi's device score for a container's requests, in float32 arithmetic.

    ``10 * (slot*(n+used)/count + core*(cores+usedcores)/totalcore``
    ``+ memory*(mem+usedmem)/totalmem)`` where only requests whose type equals the card type
    *exactly* count (so a card registered as ``NVIDIA A100-...`` is scored on its current usage
    only). Higher means busier.
    """
    if card.count == 0 or card.totalcore == 0 or card.totalmem == 0:
        return 0.0
    w = weights or ScoringWeights()
    n = cores = mem = 0
    for request in requests:
        if request.type != card.type:
            continue
        n += 1
        cores += request.coresreq
        if request.mempercentagereq not in (0, MEM_PERCENTAGE_UNSET):
            mem += _div_trunc(card.totalmem * request.mempercentagereq, 100)
        else:
            mem += request.memreq
    slot_term = _f32(_f32(n + card.used) / _f32(card.count))
    core_term = _f32(_f32(cores + card.usedcores) / _f32(card.totalcore))
    mem_term = _f32(_f32(mem + card.usedmem) / _f32(card.totalmem))
    weighted = _f32(_f32(_f32(w.slot) * slot_term) + _f32(_f32(w.core) * core_term))
    weighted = _f32(weighted + _f32(_f32(w.memory) * mem_term))
    return _f32(_SCORE_WEIGHT * weighted)


def score_cards(
    cards: Sequence[Card],
    requests: Sequence[ContainerRequest],
    weights: ScoringWeights | None = None,
) -> list[float]:
    """:func:`card_score` for every card, in the same order."""
    return [card_score(card, requests, weights) for card in cards]


_SCORE_DIRECTIONS: Final = ("binpack", "spread")


def _sort_keys(policy: str, numa_grouping: bool) -> list[str]:
    """The sort keys, most significant first, for a GPU policy string."""
    value = policy.strip()
    if "," in value or value == "numa":
        names: list[str] = []
        for entry in _comma_entries(value):
            if entry in ("binpack", "spread", "numa") and entry not in names:
                names.append(entry)
        if not any(name in _SCORE_DIRECTIONS for name in names):
            names.append("spread")
        if numa_grouping:
            names = ["numa", *[name for name in names if name != "numa"]]
        return [*names, "index"]
    if value == "binpack":
        return ["numa", "binpack"] if numa_grouping else ["binpack", "numa-asc"]
    if value == "mutex":
        return ["numa-asc", "used"] if numa_grouping else ["used", "numa-asc"]
    return ["numa", "spread"] if numa_grouping else ["spread", "numa-asc"]


def _sort_order(
    cards: Sequence[Card], scores: Sequence[float], policy: str, numa_grouping: bool
) -> list[int]:
    keys = _sort_keys(policy, numa_grouping)
    # A bare "numa" key follows the score direction: ascending for spread, descending for binpack.
    numa_sign = -1 if "binpack" in keys else 1

    def key(i: int) -> tuple[float, ...]:
        card = cards[i]
        parts: list[float] = []
        for name in keys:
            if name == "spread":
                parts.append(-scores[i])
            elif name == "binpack":
                parts.append(scores[i])
            elif name == "numa":
                parts.append(numa_sign * card.numa)
            elif name == "numa-asc":
                parts.append(card.numa)
            elif name == "used":
                parts.append(-card.used)
            else:  # "index"
                parts.append(card.index)
        return tuple(parts)

    return sorted(range(len(cards)), key=key)  # stable, like Go's sort on these short lists


def sort_cards(
    cards: Sequence[Card],
    scores: Sequence[float],
    policy: str = "spread",
    numa_grouping: bool = False,
) -> list[Card]:
    """Order cards the way HAMi's device policy does before ``Fit``; ``scores[i]`` is per card.

    ``spread`` (and any other single value except ``binpack``/``mutex``, so also ``""`` and
    ``topology-aware``): higher score first, then lower NUMA. ``binpack``: lower score first, then
    lower NUMA. ``mutex``: more tasks first, then lower NUMA. With NUMA grouping (numa-bind) spread
    orders by NUMA ascending then score descending, binpack by NUMA descending then score
    ascending. Comma lists apply the named keys in order, then the card index. Since ``Fit`` scans
    from the end, spread picks the least-loaded card and binpack the busiest one.
    """
    if len(scores) != len(cards):
        raise ValueError("one score per card is required")
    return [cards[i] for i in _sort_order(cards, scores, policy, numa_grouping)]


# --- The scheduler step --------------------------------------------------------------------------


@dataclass(frozen=True)
class DevicesFitResult:
    """Outcome of :func:`fit_in_devices`.

    On success ``cards`` is the node's card list after booking, in the scheduler's (sorted)
    order, which the next container starts from; on failure it is the input unchanged.
    """

    fit: bool
    reason: str
    allocations: tuple[Allocation, ...]
    cards: tuple[Card, ...]


def fit_in_devices(
    cards: Sequence[Card],
    requests: Sequence[ContainerRequest],
    annotations: Mapping[str, str],
    gpu_policy: str | None = None,
    node_annotations: Mapping[str, str] | None = None,
    pair_scores: Mapping[str, Mapping[str, float]] | None = None,
) -> DevicesFitResult:
    """HAMi's ``fitInDevices`` for one container: for each request sort, filter, ``Fit``, book.

    ``gpu_policy`` orders the cards (default: the pod's ``hami.io/gpu-scheduler-policy``, else
    spread); NUMA grouping is on when the pod's numa-bind is true. A request type that is not a
    registered vendor fails with ``Device type not found``; more cards than the node has of that
    type fails with ``NodeInsufficientDevice``; both reasons carry no count prefix. Reasons from
    ``Fit`` count against the cards of that type only.
    """
    policy = annotations.get(GPU_SCHEDULER_POLICY, "") if gpu_policy is None else gpu_policy
    weights = parse_scoring_weights(annotations)
    grouping = numa_bind_enforced(annotations)
    current = list(cards)
    picked: list[Allocation] = []

    def failed(reason: str) -> DevicesFitResult:
        return DevicesFitResult(fit=False, reason=reason, allocations=(), cards=tuple(cards))

    for request in requests:
        scores = score_cards(current, requests, weights)
        current = [current[i] for i in _sort_order(current, scores, policy, grouping)]
        if request.type not in _REGISTERED_VENDORS:
            return failed(DEVICE_TYPE_NOT_FOUND)
        wanted = request.type.lower()
        positions = [i for i, card in enumerate(current) if wanted in card.type.lower()]
        if request.nums > len(positions):
            return failed(NODE_INSUFFICIENT_DEVICE)
        result, chosen = _fit(
            [current[i] for i in positions], request, annotations, node_annotations, pair_scores
        )
        if not result.fit:
            return failed(result.reason)
        for allocation, sub_position in zip(result.allocations, chosen, strict=True):
            node_position = positions[sub_position]
            current[node_position] = current[node_position].book(allocation)
        picked.extend(result.allocations)
    return DevicesFitResult(fit=True, reason="", allocations=tuple(picked), cards=tuple(current))


# --- Whole pods ----------------------------------------------------------------------------------


@dataclass(frozen=True)
class NodeSpec:
    """One node: its cards in registration order, its GPU sort policy and topology data."""

    cards: tuple[Card, ...]
    gpu_policy: str = ""
    pair_scores: Mapping[str, Mapping[str, float]] | None = None
    node_annotations: Mapping[str, str] | None = None


@dataclass(frozen=True)
class PodContainer:
    """One container of a pod: its device requests (empty = no GPU); init or app container."""

    requests: tuple[ContainerRequest, ...] = ()
    init: bool = False


@dataclass(frozen=True)
class NodeFitResult:
    """A pod on one node: the picks per container (in pod order) or the first failing reason.

    ``node_score`` is the node's usage score before the pod (see :func:`node_usage_score`).
    """

    fit: bool
    reason: str
    containers: tuple[tuple[Allocation, ...], ...]
    node_score: float


def node_usage_score(cards: Sequence[Card]) -> float:
    """Node score HAMi's ``binpack`` node policy ranks by: ``10*(used/slots + cores + memory)``.

    Ratios are node totals, computed on usage *before* the pod, in float32; a zero total adds 0.
    Not part of card fit; the formula is taken from what the upstream ``calcScore`` vectors
    assert (0, 7.5 and 15 for empty, quarter- and half-used nodes).
    """

    def ratio(used: int, total: int) -> float:
        return 0.0 if total == 0 else _f32(_f32(used) / _f32(total))

    used = ratio(sum(c.used for c in cards), sum(c.count for c in cards))
    cores = ratio(sum(c.usedcores for c in cards), sum(c.totalcore for c in cards))
    memory = ratio(sum(c.usedmem for c in cards), sum(c.totalmem for c in cards))
    return _f32(_SCORE_WEIGHT * _f32(_f32(used + cores) + memory))


def fit_pod_on_node(
    node: NodeSpec, containers: Sequence[PodContainer], annotations: Mapping[str, str]
) -> NodeFitResult:
    """HAMi's ``calcScore`` for one node: every init container on a fresh copy of the node, app
    containers one after another on one copy with each pick booked; the first container that does
    not fit fails the node with its reason."""
    score = node_usage_score(node.cards)
    app_cards: tuple[Card, ...] = node.cards
    picks: list[tuple[Allocation, ...]] = []
    for container in containers:
        if not container.requests:
            picks.append(())
            continue
        result = fit_in_devices(
            node.cards if container.init else app_cards,
            container.requests,
            annotations,
            gpu_policy=node.gpu_policy,
            node_annotations=node.node_annotations,
            pair_scores=node.pair_scores,
        )
        if not result.fit:
            return NodeFitResult(False, result.reason, tuple(picks), score)
        picks.append(result.allocations)
        if not container.init:
            app_cards = result.cards
    return NodeFitResult(True, "", tuple(picks), score)


def fit_pod_on_nodes(
    nodes: Mapping[str, NodeSpec],
    containers: Sequence[PodContainer],
    annotations: Mapping[str, str],
) -> dict[str, NodeFitResult]:
    """:func:`fit_pod_on_node` for every node (nodes are independent)."""
    return {name: fit_pod_on_node(node, containers, annotations) for name, node in nodes.items()}


# --- Container resources -> request --------------------------------------------------------------

_QUANTITY_RE: Final = re.compile(
    r"^(?P<sign>[+-]?)(?P<number>[0-9]+(?:\.[0-9]*)?|\.[0-9]+)"
    r"(?P<suffix>Ki|Mi|Gi|Ti|Pi|Ei|[eE][+-]?[0-9]+|[numkMGTPE]?)$"
)
_BINARY_SUFFIXES: Final = {"Ki": 10, "Mi": 20, "Gi": 30, "Ti": 40, "Pi": 50, "Ei": 60}
_DECIMAL_SUFFIXES: Final = {
    "n": -9, "u": -6, "m": -3, "": 0, "k": 3, "M": 6, "G": 9, "T": 12, "P": 15, "E": 18,
}  # fmt: skip


def parse_quantity(text: str) -> Fraction:
    """Exact value of a Kubernetes quantity string (``"4096"``, ``"16Gi"``, ``"1.5"``, ``"2e3"``).

    Raises ``ValueError`` when the string is not a quantity.
    """
    match = _QUANTITY_RE.match(text.strip())
    if match is None:
        raise ValueError(f"not a Kubernetes quantity: {text!r}")
    value = Fraction(match["number"])
    if match["sign"] == "-":
        value = -value
    suffix = match["suffix"]
    if suffix in _BINARY_SUFFIXES:
        return value * (1 << _BINARY_SUFFIXES[suffix])
    exponent = _DECIMAL_SUFFIXES[suffix] if suffix in _DECIMAL_SUFFIXES else int(suffix[1:])
    return value * Fraction(10) ** exponent


def _as_int64(text: str) -> int | None:
    """``Quantity.AsInt64``: the value when it is a whole number within int64, else None."""
    try:
        value = parse_quantity(text)
    except ValueError:
        return None
    if value.denominator != 1 or not _INT64_MIN <= value.numerator <= _INT64_MAX:
        return None
    return value.numerator


@dataclass(frozen=True)
class ResourceNames:
    """The configured extended-resource names of the NVIDIA backend."""

    count: str = "nvidia.com/gpu"
    memory: str = "nvidia.com/gpumem"
    memory_percentage: str = "nvidia.com/gpumem-percentage"
    cores: str = "nvidia.com/gpucores"


@dataclass(frozen=True)
class RequestConfig:
    """Device-plugin settings that shape a request: default MiB/cores and the memory factor."""

    default_memory: int = 0
    default_cores: int = 0
    memory_factor: int = 1
    resource_names: ResourceNames = field(default_factory=ResourceNames)


def _lookup(limits: Mapping[str, str], requests: Mapping[str, str], name: str) -> str | None:
    """A resource's quantity string: limits win over requests; an empty name is never set."""
    if not name:
        return None
    if name in limits:
        return limits[name]
    return requests.get(name)


def generate_resource_request(
    limits: Mapping[str, str],
    requests: Mapping[str, str],
    config: RequestConfig | None = None,
) -> ContainerRequest | None:
    """HAMi's ``GenerateResourceRequests``: container resources -> request, or None for none.

    None when no card count is asked for (or it is not a positive whole number), or when the
    memory is not a whole number within int32 after the factor (``"10Gi"`` silently drops the
    whole GPU request in HAMi). A percentage above 100 is clamped to 100, one of 0 or below means
    "not set"; with neither memory nor percentage the request is 100 % of each card, or
    ``default_memory`` MiB when configured.
    """
    cfg = config or RequestConfig()
    names = cfg.resource_names
    count_text = _lookup(limits, requests, names.count)
    if count_text is None:
        return None
    nums = _as_int64(count_text)
    if nums is None or nums <= 0:
        return None

    memreq = 0
    memory_text = _lookup(limits, requests, names.memory)
    if memory_text is not None:
        memory = _as_int64(memory_text)
        if memory is None:
            return None
        memory *= cfg.memory_factor
        if not _INT32_MIN <= memory <= _INT32_MAX:
            return None
        memreq = memory

    percentage = MEM_PERCENTAGE_UNSET
    percentage_text = _lookup(limits, requests, names.memory_percentage)
    if percentage_text is not None:
        value = _as_int64(percentage_text)
        if value is not None and value > 0:
            percentage = min(value, 100)

    if percentage == MEM_PERCENTAGE_UNSET and memreq == 0:
        if cfg.default_memory != 0:
            memreq = cfg.default_memory
        else:
            percentage = 100

    cores = cfg.default_cores
    cores_text = _lookup(limits, requests, names.cores)
    if cores_text is not None:
        value = _as_int64(cores_text)
        if value is not None:
            cores = _wrap_int32(value)

    return ContainerRequest(
        nums=_wrap_int32(nums),
        type=NVIDIA,
        memreq=memreq,
        mempercentagereq=percentage,
        coresreq=cores,
    )


@dataclass(frozen=True)
class AdmissionResult:
    """The container after HAMi's mutating webhook, or the rejection and why."""

    rejected: bool
    reason: str
    limits: Mapping[str, str]
    requests: Mapping[str, str]


def admit_container(
    limits: Mapping[str, str],
    requests: Mapping[str, str],
    resource_names: ResourceNames | None = None,
) -> AdmissionResult:
    """What HAMi's webhook does to one container's resources.

    Only containers asking for cards are touched. A ``gpumem-percentage`` outside 0..100 is
    rejected. A container that sets no cores (limits or requests) gets a cores *limit* of 100
    (exclusive card) when it asks for ``gpumem-percentage: 100``, or gives neither a memory size
    (or the memory resource name is empty) nor a positive percentage.
    """
    names = resource_names or ResourceNames()
    new_limits = dict(limits)
    new_requests = dict(requests)
    if _lookup(new_limits, new_requests, names.count) is None:
        return AdmissionResult(False, "", new_limits, new_requests)

    percentage: Fraction | None = None
    percentage_text = _lookup(new_limits, new_requests, names.memory_percentage)
    if percentage_text is not None:
        try:
            percentage = parse_quantity(percentage_text)
        except ValueError:
            percentage = None
        if percentage is None or not 0 <= percentage <= 100:
            reason = f"{names.memory_percentage} must be within 0..100, got {percentage_text!r}"
            return AdmissionResult(True, reason, dict(limits), dict(requests))

    if names.cores and _lookup(new_limits, new_requests, names.cores) is None:
        memory_given = _lookup(new_limits, new_requests, names.memory) is not None
        percentage_given = percentage is not None and percentage > 0
        if percentage == 100 or not (memory_given or percentage_given):
            new_limits[names.cores] = "100"
    return AdmissionResult(False, "", new_limits, new_requests)


# --- Convenience API for the policy pack ---------------------------------------------------------


def declared_cards(
    memory_mib: int,
    core_units: int,
    slots: int,
    count: int,
    model: str,
    id_prefix: str,
) -> list[Card]:
    """Fresh (unused) cards a tenant declares: ``count`` cards of ``model``, each with
    ``memory_mib`` MiB, ``core_units`` compute (100 = one whole GPU) and ``slots`` sharing slots.

    Card ids are ``f"{id_prefix}-{i}"`` and indexes ``i``; all on NUMA 0, healthy, ``hami-core``
    mode. ``model`` is the registered type (e.g. ``NVIDIA A100-SXM4-80GB``); it must contain
    ``NVIDIA`` for the scheduler to consider the cards. JSON floats are accepted for the numbers.
    """
    memory = _as_int(memory_mib, "memory_mib")
    cores = _as_int(core_units, "core_units")
    slot_count = _as_int(slots, "slots")
    cards = _as_int(count, "count")
    if memory <= 0 or cores <= 0 or slot_count <= 0 or cards < 0:
        raise ValueError("memory_mib, core_units and slots must be positive, count >= 0")
    return [
        Card(
            id=f"{id_prefix}-{i}",
            index=i,
            used=0,
            count=slot_count,
            usedmem=0,
            totalmem=memory,
            usedcores=0,
            totalcore=cores,
            type=model,
            numa=0,
            health=True,
            mode="hami-core",
        )
        for i in range(cards)
    ]


@dataclass(frozen=True)
class RequestPlacement:
    """Where one request landed: picked card ids, or HAMi's reason why it did not fit."""

    request: ContainerRequest
    fit: bool
    reason: str
    card_ids: tuple[str, ...]
    allocations: tuple[Allocation, ...]


@dataclass(frozen=True)
class PlacementResult:
    """Outcome of :func:`place_containers`; ``cards`` are the input cards after all bookings."""

    placements: tuple[RequestPlacement, ...]
    cards: tuple[Card, ...]

    @property
    def all_fit(self) -> bool:
        """Whether every request found cards."""
        return all(p.fit for p in self.placements)

    @property
    def failures(self) -> tuple[RequestPlacement, ...]:
        """The requests that did not fit, in order."""
        return tuple(p for p in self.placements if not p.fit)


def place_containers(
    cards: Iterable[Card],
    requests: Iterable[ContainerRequest],
    policy: str = "spread",
) -> PlacementResult:
    """Place requests one after another on one node's cards, as the scheduler would.

    Why: "do the declared workloads of a tenant fit its cards?" is answered by running each
    request through :func:`fit_in_devices` (sorted by ``policy``, which is also the pod's GPU
    policy) and booking each success (``used+1``, memory, cores) before the next request. A
    request that does not fit books nothing and the next one is still tried, so every request
    gets a verdict with HAMi's exact reason (e.g. ``"1/1 CardInsufficientCore"``).
    Card ids must be unique.
    """
    original = list(cards)
    ids = [card.id for card in original]
    if len(set(ids)) != len(ids):
        raise ValueError("card ids must be unique")
    annotations = {GPU_SCHEDULER_POLICY: policy}
    current: tuple[Card, ...] = tuple(original)
    placements: list[RequestPlacement] = []
    for request in requests:
        result = fit_in_devices(current, (request,), annotations, gpu_policy=policy)
        if result.fit:
            current = result.cards
        placements.append(
            RequestPlacement(
                request=request,
                fit=result.fit,
                reason=result.reason,
                card_ids=tuple(a.id for a in result.allocations),
                allocations=result.allocations,
            )
        )
    by_id = {card.id: card for card in current}
    return PlacementResult(placements=tuple(placements), cards=tuple(by_id[i] for i in ids))
