"""A pure-Python model of how kube-scheduler's DRA plugin allocates a pod's GPU claims.

Why: a tenant with ``gpuSharing: dra`` must get the same fit / no-fit answers as one on HAMi
(``hami_fit``), or the difference must be one of the documented differences of the two
schedulers (docs/dra.md). This model is what the property test compares with HAMi's.

Traced at k8s.io/dynamic-resource-allocation v0.35.0 (kubernetes v1.35.0), the "experimental"
allocator, the one in use when DRAConsumableCapacity is on
(structured/internal/experimental/allocator_experimental.go):

* **Search.** ``allocateOne`` (:867-1116) walks the pod's claims, their requests and each
  request's ``count`` devices in order, trying every device of every pool in slice order and
  backtracking (``deallocate``) when a later device or claim cannot be placed. The first
  complete allocation wins. So the answer is "is there any assignment", not a greedy one.
* **In use.** A device is skipped when it is in use (``deviceInUse``, :1040-1043, 1533-1535): it
  was allocated before, or to another device slot of this allocation, and does not allow
  multiple allocations (only such devices are recorded, :1327-1329). A shareable device
  (``allowMultipleAllocations``) is never "in use"; only its capacity runs out.
* **Capacity.** With the gate on, every device's capacity is compared with the request
  (``CmpRequestOverCapacity``, consumable_capacity.go:29-63): for each capacity of the device,
  the consumed amount is the request's, rounded up by the capacity's request policy (a range's
  ``min`` and ``step``, :83-134), or, when the request names none, the policy's default, or the
  whole capacity (``fillEmptyRequest``, :102-112); a request above the policy's ``max`` is
  refused unless it is the default (``violatesPolicy``, :167-203). The consumed amounts already
  allocated (``AggregatedCapacity``, allocator_experimental.go:1173-1182) plus this one must not
  exceed the capacity's value.
* **Selectors.** CEL selectors are checked per device (``isSelectable``); here: the device has at
  least ``min_memory_mib`` MiB.
* **Distinct devices.** Nothing stops one request of ``count`` > 1 from taking the same
  shareable device twice unless a ``distinctAttribute`` constraint names an attribute whose
  values must differ (constraint.go); ``components.dra`` sets it on the card's uuid.

Not modelled: admin access, device taints, partitionable devices (counters), prioritized lists
(``firstAvailable``), ``All`` allocation mode, several pools or nodes. Everything here is pure.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

__all__ = [
    "Capacity",
    "ClaimRequest",
    "Device",
    "Usage",
    "allocate",
    "consumed",
    "fresh_usage",
]


@dataclass(frozen=True)
class Capacity:
    """One capacity of a device, with its request policy's range (``min``/``step``/``max``;
    ``min`` None: no policy) and ``default`` (None: the whole value)."""

    value: int
    min: int | None = None
    step: int | None = None
    max: int | None = None
    default: int | None = None


@dataclass(frozen=True)
class Device:
    """One published card: ``memory`` in MiB, ``compute`` in units (100 = the card)."""

    name: str
    memory: Capacity
    compute: Capacity
    shareable: bool = False


@dataclass(frozen=True)
class ClaimRequest:
    """One claim's one request: ``count`` devices; ``memory_mib``/``compute`` the capacity each
    device gives it (None: not named, so the policy's default or the whole capacity);
    ``min_memory_mib`` a selector; ``distinct``: the devices must be different ones."""

    count: int
    memory_mib: int | None = None
    compute: int | None = None
    min_memory_mib: int | None = None
    distinct: bool = False


@dataclass(frozen=True)
class Usage:
    """What is allocated already: devices taken whole (not shareable) and the capacity consumed
    on each shareable device (memory, compute)."""

    taken: frozenset[str]
    consumed: Mapping[str, tuple[int, int]]

    def book(self, device: Device, amount: tuple[int, int]) -> Usage:
        """The usage after ``device`` is allocated once more, consuming ``amount``."""
        if not device.shareable:
            return Usage(self.taken | {device.name}, self.consumed)
        memory, compute = self.consumed.get(device.name, (0, 0))
        merged = dict(self.consumed)
        merged[device.name] = (memory + amount[0], compute + amount[1])
        return Usage(self.taken, merged)  # a new dict: the old usage is left as it was


def fresh_usage() -> Usage:
    """Nothing allocated."""
    return Usage(frozenset(), {})


def consumed(requested: int | None, capacity: Capacity) -> int | None:
    """What one allocation of a request consumes of ``capacity``; None when the request is
    outside the policy (above ``max``): ``calculateConsumedCapacity`` and ``violatesPolicy``."""
    if requested is None:
        amount = capacity.default if capacity.default is not None else capacity.value
    elif capacity.min is None:
        amount = requested
    elif requested < capacity.min:
        amount = capacity.min
    elif capacity.step is None:
        amount = requested
    else:
        steps = -(-(requested - capacity.min) // capacity.step)  # ceiling division
        amount = capacity.min + capacity.step * steps
    if capacity.max is not None and amount > capacity.max and amount != capacity.default:
        return None
    return amount


def _fits(device: Device, request: ClaimRequest, usage: Usage) -> tuple[int, int] | None:
    """The amount ``request`` would consume on ``device`` now, or None when it cannot have it."""
    if device.name in usage.taken:
        return None
    if request.min_memory_mib is not None and device.memory.value < request.min_memory_mib:
        return None
    memory = consumed(request.memory_mib, device.memory)
    compute = consumed(request.compute, device.compute)
    if memory is None or compute is None:
        return None
    used_memory, used_compute = usage.consumed.get(device.name, (0, 0))
    if used_memory + memory > device.memory.value or used_compute + compute > device.compute.value:
        return None
    return memory, compute


def allocate(
    devices: Sequence[Device],
    claims: Iterable[ClaimRequest],
    usage: Usage | None = None,
) -> tuple[tuple[str, ...], ...] | None:
    """The first allocation of ``claims`` (in order) on ``devices`` given what ``usage`` holds
    already, as the device names per claim, or None when there is none (the scheduler's
    "cannot allocate all claims")."""
    names = [d.name for d in devices]
    if len(set(names)) != len(names):
        raise ValueError("device names must be unique")
    todo = list(claims)
    for claim in todo:
        if claim.count < 1:
            raise ValueError(f"count must be at least 1, got {claim.count}")
    slots = [(c, i) for c, claim in enumerate(todo) for i in range(claim.count)]
    picks: list[str] = []

    def search(position: int, current: Usage) -> bool:
        if position == len(slots):
            return True
        claim_index, _ = slots[position]
        claim = todo[claim_index]
        same_request = {
            picks[p] for p in range(position) if slots[p][0] == claim_index and claim.distinct
        }
        for device in devices:
            if device.name in same_request:
                continue
            amount = _fits(device, claim, current)
            if amount is None:
                continue
            picks.append(device.name)
            if search(position + 1, current.book(device, amount)):
                return True
            picks.pop()
        return False

    if not search(0, usage or fresh_usage()):
        return None
    result: list[tuple[str, ...]] = []
    for claim_index in range(len(todo)):
        result.append(tuple(picks[p] for p, (c, _) in enumerate(slots) if c == claim_index))
    return tuple(result)
