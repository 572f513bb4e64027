"""Read and judge what HAMi 2.10, Kamaji and the Kubernetes API report (pure functions).

The acceptance suite asserts on scheduler decisions, not on ``Running``: the node annotation
HAMi reads its cards from, the allocation annotations its scheduler writes on pods, the events
it (and kube-scheduler) emit for refused pods, what each tenant's API lists, and Kamaji's
datastore status. Everything here takes plain values (strings, dicts, small dataclasses) so it
is tested offline on recorded samples (``tests/acceptance/samples``, which also name the upstream
code each format was checked against); ``tests/acceptance/kube.py`` turns live API objects into
these values.

A judge returns a ``Verdict``: the problems found (empty means the condition holds) and the
facts it saw, which the suite prints and stores as evidence.
"""

from __future__ import annotations

import json
import re
from collections.abc import Collection, Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from components.labels import HAMI_NODE_REGISTER as HAMI_NODE_REGISTER
from components.labels import TENANT_LABEL

# HAMi v2.10.0 pkg/util/types.go and pkg/device/nvidia/device.go.
HAMI_DEVICES_ALLOCATED = "hami.io/vgpu-devices-allocated"
HAMI_DEVICES_TO_ALLOCATE = "hami.io/vgpu-devices-to-allocate"
HAMI_ASSIGNED_NODE = "hami.io/vgpu-node"
HAMI_BIND_PHASE = "hami.io/bind-phase"
HAMI_BIND_TIME = "hami.io/bind-time"
HAMI_NODE_LOCK = "hami.io/mutex.lock"
HAMI_SCHEDULER_NAME = "hami-scheduler"  # charts/hami/values.yaml schedulerName
BIND_SUCCESS = "success"
# Pods HAMi no longer counts (pkg/util IsPodInTerminatedState): a kubelet admission rejection
# (OutOfnvidia.com/gpumem, UnexpectedAdmissionError) leaves the pod Failed with HAMi's
# annotations and spec.nodeName still in place.
TERMINAL_PHASES = ("Failed", "Succeeded")

NVIDIA_GPU = "nvidia.com/gpu"
NVIDIA_GPUMEM = "nvidia.com/gpumem"
NVIDIA_GPUCORES = "nvidia.com/gpucores"

_INTEGER = re.compile(r"^[+-]?\d+$")
# Before 2.8.0: "id,count,devmem,devcore,type,numa,health[,index,mode]:" per card.
_LEGACY_REGISTER = re.compile(r"^[^\[{][^,]*,\d+,\d+,\d+,")


class EvidenceError(ValueError):
    """A value is not in the format HAMi / Kamaji / Kubernetes writes."""


@dataclass
class Verdict:
    """Problems found (none = the condition holds) and the facts that were looked at."""

    problems: list[str] = field(default_factory=list)
    facts: dict[str, Any] = field(default_factory=dict)

    @property
    def ok(self) -> bool:
        return not self.problems

    def explain(self) -> str:
        """One paragraph for an assertion message."""
        return "; ".join(self.problems) if self.problems else "ok"


# ------------------------------------------------------------------------- node inventory


@dataclass(frozen=True)
class RegisteredCard:
    """One card from ``hami.io/node-nvidia-register`` (HAMi's DeviceInfo)."""

    uuid: str
    index: int
    slots: int  # "count": pods that may share the card (deviceSplitCount)
    memory_mib: int  # "devmem"
    core_units: int  # "devcore"
    type: str
    numa: int
    mode: str
    health: bool


@dataclass(frozen=True)
class Inventory:
    """GPU totals: cards, MiB, compute units and sharing slots."""

    cards: int = 0
    memory_mib: int = 0
    core_units: int = 0
    slots: int = 0

    def __add__(self, other: Inventory) -> Inventory:
        return Inventory(
            self.cards + other.cards,
            self.memory_mib + other.memory_mib,
            self.core_units + other.core_units,
            self.slots + other.slots,
        )

    def times(self, factor: int) -> Inventory:
        return Inventory(
            self.cards * factor,
            self.memory_mib * factor,
            self.core_units * factor,
            self.slots * factor,
        )

    def as_dict(self) -> dict[str, int]:
        return {
            "cards": self.cards,
            "memoryMiB": self.memory_mib,
            "coreUnits": self.core_units,
            "slots": self.slots,
        }


def _int_field(entry: Mapping[str, Any], key: str, where: str, *, required: bool) -> int:
    if key not in entry:
        if required:
            raise EvidenceError(f"{where} has no {key!r}")
        return 0  # Go's omitempty drops zero values
    value = entry[key]
    if isinstance(value, bool) or not isinstance(value, int):
        raise EvidenceError(f"{where} {key!r} is {value!r}, not an integer")
    return value


def parse_node_register(value: str) -> list[RegisteredCard]:
    """Cards from a ``hami.io/node-nvidia-register`` value (JSON array since HAMi 2.8.0).

    HAMi marshals every field with ``omitempty``: a missing index/numa/count is 0 and a missing
    health is false. ``id``, ``devmem`` and ``devcore`` are required (a card without them cannot
    be scheduled on).
    """
    text = value.strip()
    if not text:
        raise EvidenceError(f"{HAMI_NODE_REGISTER} is empty")
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        if _LEGACY_REGISTER.match(text):
            raise EvidenceError(
                f"{HAMI_NODE_REGISTER} is in the colon-separated format HAMi used before 2.8.0; "
                "HAMi 2.10's scheduler reads only the JSON array"
            ) from None
        raise EvidenceError(
            f"{HAMI_NODE_REGISTER} is not JSON ({exc.msg} at character {exc.pos})"
        ) from None
    if not isinstance(data, list):
        raise EvidenceError(f"{HAMI_NODE_REGISTER} must be a JSON array of cards")
    if not data:
        raise EvidenceError(f"{HAMI_NODE_REGISTER} lists no card")
    cards: list[RegisteredCard] = []
    for position, entry in enumerate(data):
        where = f"card {position}"
        if not isinstance(entry, dict):
            raise EvidenceError(f"{where} is {entry!r}, not an object")
        uuid = entry.get("id")
        if not isinstance(uuid, str) or not uuid:
            raise EvidenceError(f"{where} has no card id")
        card_type = entry.get("type", "")
        mode = entry.get("mode", "")
        health = entry.get("health", False)
        if not isinstance(card_type, str) or not isinstance(mode, str):
            raise EvidenceError(f"{where} type/mode must be strings")
        if not isinstance(health, bool):
            raise EvidenceError(f"{where} health is {health!r}, not true/false")
        cards.append(
            RegisteredCard(
                uuid=uuid,
                index=_int_field(entry, "index", where, required=False),
                slots=_int_field(entry, "count", where, required=False),
                memory_mib=_int_field(entry, "devmem", where, required=True),
                core_units=_int_field(entry, "devcore", where, required=True),
                type=card_type,
                numa=_int_field(entry, "numa", where, required=False),
                mode=mode,
                health=health,
            )
        )
    return cards


def inventory_of(cards: Iterable[RegisteredCard]) -> Inventory:
    """Totals of the registered cards."""
    total = Inventory()
    for card in cards:
        total = total + Inventory(1, card.memory_mib, card.core_units, card.slots)
    return total


def memory_matches(registered: float, declared: int, tolerance: float) -> str | None:
    """Why ``registered`` MiB does not match a declaration of ``declared`` MiB, or None.

    Never less than declared: the preview's capacity policy approves pods against the declared
    figure, and a node that registers less refuses some of them (HAMi v2.10.0 takes ``devmem``
    from NVML, register.go:120-151). At most ``tolerance`` more: a conservative catalog figure
    is fine, but a much larger card means another model than declared. The lab's declaration is
    exact (tolerance 0)."""
    if registered < declared:
        return f"less than the {declared} MiB declared"
    if registered > declared * (1.0 + tolerance):
        allowance = f" (+{tolerance:.0%} allowed)" if tolerance else ""
        return f"more than the {declared} MiB declared{allowance}"
    return None


def judge_node_inventory(
    node: str,
    cards: Sequence[RegisteredCard],
    expected: Inventory,
    *,
    memory_tolerance: float = 0.0,
) -> Verdict:
    """TC-02 for one node: the registered cards add up to the declared inventory.

    ``memory_tolerance`` (a fraction) lets discovered memory sit below the declared figure
    (real drivers report less than the nominal size); cards, compute units and slots are exact.
    In the lab the platform writes this annotation itself, so this only shows it is in the format
    HAMi reads; what running components advertise is judged by ``judge_node_resources`` and
    HAMi's own view by ``hami_metrics.judge_hami_view``.
    """
    verdict = Verdict()
    seen = inventory_of(cards)
    verdict.facts = {
        "node": node,
        "cards": [
            {
                "uuid": c.uuid,
                "type": c.type,
                "memoryMiB": c.memory_mib,
                "coreUnits": c.core_units,
                "slots": c.slots,
                "health": c.health,
            }
            for c in cards
        ],
        "registered": seen.as_dict(),
        "declared": expected.as_dict(),
    }
    problems = verdict.problems
    if seen.cards != expected.cards:
        problems.append(f"{node}: {seen.cards} cards registered, {expected.cards} declared")
    mismatch = memory_matches(seen.memory_mib, expected.memory_mib, memory_tolerance)
    if mismatch is not None:
        problems.append(f"{node}: {seen.memory_mib} MiB registered, {mismatch}")
    if seen.core_units != expected.core_units:
        problems.append(
            f"{node}: {seen.core_units} compute units registered, {expected.core_units} declared"
        )
    if seen.slots != expected.slots:
        problems.append(f"{node}: {seen.slots} sharing slots registered, {expected.slots} declared")
    duplicates = sorted({c.uuid for c in cards if sum(d.uuid == c.uuid for d in cards) > 1})
    if duplicates:
        problems.append(f"{node}: card ids registered twice: {', '.join(duplicates)}")
    for card in cards:
        # HAMi v2.10.0 pkg/scheduler/score.go:43-48 (getNodeResources) matches the lower-cased
        # type against "nvidia".
        if "nvidia" not in card.type.lower():
            problems.append(
                f"{node}: card {card.uuid} type {card.type!r} lacks 'NVIDIA' (HAMi skips it)"
            )
        if not card.health:
            problems.append(f"{node}: card {card.uuid} is not healthy")
    return verdict


def judge_node_resources(
    node: str,
    capacity: Mapping[str, int],
    allocatable: Mapping[str, int],
    expected: Mapping[str, int],
    *,
    advertised_by: Mapping[str, str],
) -> Verdict:
    """TC-02 for one node: what the kubelet reports as capacity *and* allocatable equals the
    expectation for each resource in ``expected`` (an absent key is a failure).

    ``advertised_by`` names, per resource, who must advertise it, for the message: in the lab the
    mock device plugin advertises ``nvidia.com/gpumem``/``gpucores``/``gpumem-percentage`` (only
    while it runs: the kubelet drops a stopped plugin's devices from allocatable), and
    ``nvidia.com/gpu`` must be allocatable because HAMi's scheduler keeps a node only while it is
    above zero (HAMi v2.10.0 pkg/device/nvidia/device.go:234-258 CheckHealth reads allocatable).
    """
    verdict = Verdict()
    for key, want in sorted(expected.items()):
        who = advertised_by.get(key, "the device plugin")
        for what, seen in (("capacity", capacity), ("allocatable", allocatable)):
            got = seen.get(key)
            if got is None:
                verdict.problems.append(
                    f"{node}: no {key} in status.{what} (expected {want}, from {who})"
                )
            elif got != want:
                verdict.problems.append(
                    f"{node}: status.{what} {key}={got}, expected {want} (from {who})"
                )
    verdict.facts = {
        "node": node,
        "expected": dict(expected),
        "capacity": {k: capacity.get(k) for k in sorted(expected)},
        "allocatable": {k: allocatable.get(k) for k in sorted(expected)},
    }
    return verdict


# ------------------------------------------------------------------------ pod allocations


@dataclass(frozen=True)
class DeviceShare:
    """One device entry of a container: ``<UUID>,<Type>,<MiB>,<cores>``."""

    uuid: str
    vendor: str
    memory_mib: int
    cores: int


def _annotation_int(text: str, what: str, entry: str) -> int:
    if not _INTEGER.match(text):
        raise EvidenceError(f"device entry {entry!r}: {what} {text!r} is not an integer")
    number = int(text)
    if number < 0:
        raise EvidenceError(f"device entry {entry!r}: {what} {number} is negative")
    return number


def parse_container_devices(segment: str) -> list[DeviceShare]:
    """The devices of one container: entries ending in ``:``.

    Stricter than HAMi's DecodeContainerDevices, which silently skips entries without a comma:
    here any non-empty entry must be a full device entry.
    """
    shares: list[DeviceShare] = []
    for entry in segment.split(":"):
        if not entry:
            continue
        if "," not in entry:
            raise EvidenceError(f"device entry {entry!r} has no fields")
        fields = entry.split(",")
        if len(fields) < 4:
            raise EvidenceError(
                f"device entry {entry!r} has {len(fields)} fields, needs 4 fields "
                "(UUID,Type,MiB,cores)"
            )
        uuid, vendor, memory, cores = fields[:4]
        if not uuid:
            raise EvidenceError(f"device entry {entry!r} has no UUID")
        shares.append(
            DeviceShare(
                uuid=uuid,
                vendor=vendor,
                memory_mib=_annotation_int(memory, "memory", entry),
                cores=_annotation_int(cores, "cores", entry),
            )
        )
    return shares


def parse_pod_devices(value: str) -> list[list[DeviceShare]]:
    """Per container, the shares in ``hami.io/vgpu-devices-allocated`` (or ``-to-allocate``).

    HAMi ends every container's part with ``;`` (EncodePodSingleDevice), so the final ``;`` is a
    terminator: ``"A:;"`` is one container, ``";"`` one container without devices.
    """
    if value == "":
        return []
    segments = value.split(";")
    if value.endswith(";"):
        segments = segments[:-1]
    return [parse_container_devices(segment) for segment in segments]


def pod_shares(value: str) -> list[DeviceShare]:
    """All shares of a pod, containers flattened."""
    return [share for container in parse_pod_devices(value) for share in container]


@dataclass
class CardUsage:
    """What the pods' allocations add up to on one card."""

    uuid: str
    memory_mib: int = 0
    cores: int = 0
    pods: list[str] = field(default_factory=list)

    def as_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "memoryMiB": self.memory_mib,
            "cores": self.cores,
            "pods": list(self.pods),
        }


def card_usage(allocations: Mapping[str, str]) -> dict[str, CardUsage]:
    """Per card UUID, the summed shares of ``{pod name: allocated annotation}``."""
    usage: dict[str, CardUsage] = {}
    for pod, value in allocations.items():
        for share in pod_shares(value):
            card = usage.setdefault(share.uuid, CardUsage(share.uuid))
            card.memory_mib += share.memory_mib
            card.cores += share.cores
            card.pods.append(pod)
    return usage


@dataclass(frozen=True)
class PodPlacement:
    """A pod as the scheduler left it: where it is bound and what HAMi wrote on it."""

    name: str
    node: str  # spec.nodeName, "" while unbound
    phase: str
    scheduler_name: str
    annotations: Mapping[str, str] = field(default_factory=dict)
    reason: str = ""  # status.reason, e.g. UnexpectedAdmissionError when the kubelet rejected it
    message: str = ""  # status.message

    @property
    def terminal(self) -> bool:
        """Failed or Succeeded: HAMi drops the pod's shares (scheduler.go:185-189 onUpdatePod)."""
        return self.phase in TERMINAL_PHASES

    def status_text(self) -> str:
        detail = ": ".join(p for p in (self.reason, self.message) if p)
        return f"{self.phase}" + (f" ({detail})" if detail else "")

    @property
    def assigned_node(self) -> str | None:
        return self.annotations.get(HAMI_ASSIGNED_NODE)

    @property
    def allocated(self) -> str | None:
        return self.annotations.get(HAMI_DEVICES_ALLOCATED)

    @property
    def bind_phase(self) -> str | None:
        return self.annotations.get(HAMI_BIND_PHASE)


def judge_sharing(
    pods: Sequence[PodPlacement],
    *,
    pod_memory_mib: int,
    pod_cores: int,
    expected_memory_mib: int,
    expected_cores: int,
    card_memory_mib: int,
    card_core_units: int,
    registered_uuids: Collection[str] = (),
    expected_node: str | None = None,
) -> Verdict:
    """TC-04: every pod bound by HAMi to one node and one card, usage adding up as expected."""
    verdict = Verdict()
    problems = verdict.problems
    per_pod: list[dict[str, Any]] = []
    allocations: dict[str, str] = {}
    if not pods:
        problems.append("no pods to judge")
    for pod in pods:
        row: dict[str, Any] = {
            "pod": pod.name,
            "node": pod.node,
            "schedulerName": pod.scheduler_name,
            "bindPhase": pod.bind_phase,
        }
        per_pod.append(row)
        if pod.reason or pod.message:
            row["status"] = pod.status_text()
        if pod.terminal:
            problems.append(
                f"{pod.name} is {pod.status_text()}: the kubelet rejected or ended it, so HAMi "
                "no longer counts its share"
            )
        if pod.scheduler_name != HAMI_SCHEDULER_NAME:
            problems.append(
                f"{pod.name} has schedulerName {pod.scheduler_name!r}, not {HAMI_SCHEDULER_NAME}"
            )
        if not pod.node:
            problems.append(f"{pod.name} is not bound to a node")
        if pod.assigned_node is None:
            problems.append(f"{pod.name} has no {HAMI_ASSIGNED_NODE}: HAMi did not place it")
        elif pod.node and pod.assigned_node != pod.node:
            problems.append(
                f"{pod.name} is bound to {pod.node} but {HAMI_ASSIGNED_NODE} says "
                f"{pod.assigned_node}"
            )
        if pod.bind_phase != BIND_SUCCESS:
            problems.append(
                f"{pod.name} {HAMI_BIND_PHASE} is {pod.bind_phase!r}, not {BIND_SUCCESS!r} "
                "(no device plugin / allocation completer finished it)"
            )
        if pod.allocated is None:
            problems.append(f"{pod.name} has no {HAMI_DEVICES_ALLOCATED}")
            continue
        try:
            shares = pod_shares(pod.allocated)
        except EvidenceError as exc:
            problems.append(f"{pod.name}: {exc}")
            continue
        row["shares"] = [
            {"uuid": s.uuid, "memoryMiB": s.memory_mib, "cores": s.cores} for s in shares
        ]
        if len(shares) != 1:
            problems.append(f"{pod.name} holds {len(shares)} device shares, expected 1")
        for share in shares:
            if share.memory_mib != pod_memory_mib or share.cores != pod_cores:
                problems.append(
                    f"{pod.name} got {share.memory_mib} MiB / {share.cores} % on {share.uuid}, "
                    f"asked {pod_memory_mib} MiB / {pod_cores} %"
                )
        allocations[pod.name] = pod.allocated
    nodes = sorted({pod.node for pod in pods if pod.node})
    if len(nodes) > 1:
        problems.append(f"pods are not all on one node: {', '.join(nodes)}")
    if expected_node is not None and nodes and nodes != [expected_node]:
        problems.append(f"pods are on {', '.join(nodes)}, expected {expected_node}")
    usage = card_usage(allocations)
    if len(usage) > 1:
        problems.append(f"pods are not all on one card: {', '.join(sorted(usage))}")
    unknown = sorted(u for u in usage if registered_uuids and u not in registered_uuids)
    if unknown:
        problems.append(f"card(s) {', '.join(unknown)} not registered on the node")
    total_memory = sum(card.memory_mib for card in usage.values())
    total_cores = sum(card.cores for card in usage.values())
    if total_memory != expected_memory_mib or total_cores != expected_cores:
        problems.append(
            f"usage adds up to {total_memory} MiB / {total_cores} %, expected "
            f"{expected_memory_mib} MiB / {expected_cores} %"
        )
    for card in usage.values():
        if card.memory_mib > card_memory_mib or card.cores > card_core_units:
            problems.append(
                f"card {card.uuid} is over capacity: {card.memory_mib}/{card_memory_mib} MiB, "
                f"{card.cores}/{card_core_units} %"
            )
    verdict.facts = {
        "node": nodes[0] if len(nodes) == 1 else nodes,
        "cards": [card.as_dict() for card in usage.values()],
        "usage": {"memoryMiB": total_memory, "cores": total_cores},
        "capacity": {"memoryMiB": card_memory_mib, "cores": card_core_units},
        "pods": per_pod,
    }
    return verdict


# -------------------------------------------------------------------------------- events


@dataclass(frozen=True)
class EventRecord:
    """A core/v1 Event about one object, reduced to what the judges read."""

    type: str  # Normal | Warning
    reason: str
    message: str
    source: str = ""
    count: int = 1

    def describe(self) -> str:
        source = f" ({self.source})" if self.source else ""
        times = f" x{self.count}" if self.count > 1 else ""
        return f"{self.type} {self.reason}{source}{times}: {self.message}"


_COMBINED = "(combined from similar events): "
# HAMi pkg/scheduler/score.go recordFilteringFailures: "%d nodes %s(%s)".
_FILTERING_FAILED = re.compile(r"^(\d+) nodes ([A-Za-z]+)\(([^()]*)\)$")
# kube-scheduler FitError: "0/%v nodes are available: <histogram>." [+ " preemption: ..."].
_FIT_ERROR = re.compile(r"^0/(\d+) nodes are available: (.*)$", re.DOTALL)
# HAMi pkg/device/common/common.go GenReason: "%d/%d %s" (failed cards / cards, reason).
_CARD_REASON = re.compile(r"(?<![\w/])(\d+)/(\d+) ([A-Z][A-Za-z]+)\b")


def _strip_combined(message: str) -> str:
    return message[len(_COMBINED) :] if message.startswith(_COMBINED) else message


def parse_filtering_failed(message: str) -> tuple[str, int, list[str]] | None:
    """HAMi's per-reason FilteringFailed text -> (reason, node count, nodes), else None."""
    match = _FILTERING_FAILED.match(_strip_combined(message).strip())
    if not match:
        return None
    nodes = [n for n in match.group(3).split(",") if n]
    return match.group(2), int(match.group(1)), nodes


def parse_card_reasons(text: str) -> dict[str, tuple[int, int]]:
    """``"1/2 CardInsufficientCore, 1/2 CardInsufficientMemory"`` -> {reason: (cards, of)}."""
    return {m.group(3): (int(m.group(1)), int(m.group(2))) for m in _CARD_REASON.finditer(text)}


def parse_fit_error(message: str) -> tuple[int, str] | None:
    """kube-scheduler's FailedScheduling text -> (nodes considered, filter part), else None.

    The filter part stops before the PostFilter (``preemption: ...``) message.
    """
    match = _FIT_ERROR.match(_strip_combined(message).strip())
    if not match:
        return None
    detail = match.group(2)
    cut = detail.find(" preemption:")
    if cut >= 0:
        detail = detail[:cut]
    return int(match.group(1)), detail.rstrip(".")


def hami_reason_counts(event: EventRecord) -> dict[str, tuple[int, int] | None]:
    """The HAMi refusal reasons an event names, each with (cards, of the node's cards) where the
    event says (kube-scheduler's FailedScheduling carries GenReason's "%d/%d %s"), None where it
    does not (HAMi's own FilteringFailed names the reason and the nodes only)."""
    filtering = parse_filtering_failed(event.message)
    if filtering is not None:
        return {filtering[0]: None}
    fit = parse_fit_error(event.message)
    if fit is not None:
        counts: dict[str, tuple[int, int] | None] = dict(parse_card_reasons(fit[1]))
        return counts
    return {}


def hami_reasons(event: EventRecord) -> set[str]:
    """The HAMi refusal reasons an event names (empty for anything else)."""
    return set(hami_reason_counts(event))


# HAMi v2.10.0 pkg/device/common/common.go:27 (CardUUIDMismatch = "CardUuidMismatch").
CARD_UUID_MISMATCH = "CardUuidMismatch"
# What HAMi's Fit counts for a card before it reaches the UUID check, each ending that card's turn
# (HAMi v2.10.0 pkg/device/nvidia/device.go:730-748; names: pkg/device/common/common.go:26-33):
# the node's other cards may answer a pinned probe with these as well as with CardUuidMismatch.
OTHER_CARD_REASONS = frozenset(
    {CARD_UUID_MISMATCH, "CardNotHealth", "CardCordoned", "CardTypeMismatch"}
)
# HAMi v2.10.0 pkg/device/nvidia/device.go:49-50: the cards a pod may be placed on.
GPU_USE_UUID = "nvidia.com/use-gpuuuid"


def pinned_cards(pod: PodPlacement) -> list[str]:
    """The card UUIDs the pod is pinned to with ``nvidia.com/use-gpuuuid`` (HAMi's CheckUUID
    splits the annotation on commas, pkg/device/devices.go:693-717)."""
    value = pod.annotations.get(GPU_USE_UUID, "")
    return [u.strip() for u in value.split(",") if u.strip()]


def _other_card_noise(
    reason: str, counts: Mapping[str, tuple[int, int] | None], pinned: int
) -> bool:
    """Whether ``reason`` (in an event giving ``counts``) is the expected answer of the node's
    other cards to a UUID pin.

    HAMi's Fit checks the pin on every card of the node and counts ``CardUuidMismatch`` for each
    card not named (HAMi v2.10.0 pkg/device/nvidia/device.go:755-758), and GenReason reports the
    count over all the node's cards (pkg/device/common/common.go:46-53): a pinned probe on an
    8-card node is refused with "1/8 CardInsufficientMemory, 7/8 CardUuidMismatch", and HAMi's
    scheduler writes one FilteringFailed event per reason type (pkg/scheduler/score.go:348-353),
    "1 nodes CardUuidMismatch(<node>)" among them. A card that is unhealthy, cordoned or of
    another type stops before the UUID check (device.go:730-748), so it answers with that reason
    instead. Noise as long as no more cards gave these answers together than the node has minus
    the pinned ones: "8/8 CardUuidMismatch" means the pinned card is not on the node at all, and
    "1/8 CardNotHealth" beside "7/8 CardUuidMismatch" that the pinned card itself is unhealthy."""
    if not pinned or reason not in OTHER_CARD_REASONS:
        return False
    own = counts.get(reason)
    if own is None:
        return True
    others = [c for r, c in counts.items() if r in OTHER_CARD_REASONS and c is not None]
    return sum(cards for cards, _of in others) <= own[1] - pinned


def judge_rejection(
    pod: PodPlacement,
    events: Sequence[EventRecord],
    expected_reason: str,
    *,
    contradicting: Collection[str] = (),
    exclusive: bool = False,
) -> Verdict:
    """TC-05 / TC-06 / TC-13: the pod stays unbound under HAMi and a Warning event gives the
    expected reason, and none of the reasons that would mean the scenario is not the one meant:
    those in ``contradicting`` or, with ``exclusive``, any other HAMi reason. On a single card
    HAMi's Fit stops at the first failing check and gives one reason per card and attempt (HAMi
    v2.10.0 pkg/device/nvidia/device.go:727-838), so another reason means another scenario -
    except ``CardUuidMismatch`` from the node's other cards when the pod is pinned to a card with
    ``nvidia.com/use-gpuuuid`` (``_other_card_noise``: also an unhealthy, cordoned or other-type
    card), which is recorded as expected noise."""
    verdict = Verdict()
    problems = verdict.problems
    warnings = [e for e in events if e.type == "Warning"]
    matching = [e for e in warnings if expected_reason in hami_reasons(e)]
    pinned = len(pinned_cards(pod))
    contradictions: set[str] = set()
    noise: set[str] = set()
    for event in warnings:
        counts = hami_reason_counts(event)
        for reason, count in counts.items():
            if reason == expected_reason:
                continue
            if _other_card_noise(reason, counts, pinned):
                noise.add(event.describe())
            elif reason in contradicting or exclusive:
                if reason == CARD_UUID_MISMATCH and pinned and count is not None:
                    reason = f"{reason} on {count[0]}/{count[1]} cards (the pinned card too)"
                contradictions.add(reason)
    if pod.node:
        problems.append(f"{pod.name} was bound to {pod.node}")
    if pod.phase != "Pending":
        problems.append(f"{pod.name} is {pod.phase}, not Pending")
    if pod.scheduler_name != HAMI_SCHEDULER_NAME:
        problems.append(
            f"{pod.name} has schedulerName {pod.scheduler_name!r}: HAMi never judged it"
        )
    if not matching:
        seen = "; ".join(e.describe() for e in warnings) or "none"
        problems.append(
            f"no Warning event for {pod.name} names {expected_reason} (warnings: {seen})"
        )
    if contradictions:
        problems.append(
            f"{pod.name} was also refused for {', '.join(sorted(contradictions))}, which this "
            "scenario must not trigger"
        )
    verdict.facts = {
        "pod": pod.name,
        "node": pod.node,
        "phase": pod.phase,
        "schedulerName": pod.scheduler_name,
        "pinnedCards": pinned_cards(pod),
        "matching": [e.describe() for e in matching],
        "expectedNoise": sorted(noise),
        "events": [e.describe() for e in events],
    }
    return verdict


def judge_accumulation(
    holder: PodPlacement,
    second: Verdict,
    *,
    card_uuid: str,
    card_mib: int,
    holder_mib: int,
    second_mib: int,
) -> Verdict:
    """TC-06's accumulation case: HAMi counts what is already allocated on a card. Holds when the
    holder is bound with exactly its share on the card, the second pod would fit the card alone
    (``second_mib`` <= ``card_mib``) but not beside the holder, and it was refused with
    ``CardInsufficientMemory`` and nothing else (``second``, from ``judge_rejection``)."""
    verdict = Verdict()
    problems = verdict.problems
    if second_mib > card_mib:
        problems.append(
            f"the second pod asks {second_mib} MiB, more than the card's {card_mib} MiB: that is "
            "the single-pod case, not accumulation"
        )
    if holder_mib + second_mib <= card_mib:
        problems.append(
            f"{holder_mib} + {second_mib} MiB fit the card's {card_mib} MiB: nothing to refuse"
        )
    try:
        shares = pod_shares(holder.allocated or "")
    except EvidenceError as exc:
        shares = []
        problems.append(f"{holder.name}: {exc}")
    on_card = [s for s in shares if s.uuid == card_uuid]
    if not holder.node or holder.bind_phase != BIND_SUCCESS:
        problems.append(
            f"the holder {holder.name} is not bound (node {holder.node!r}, bind-phase "
            f"{holder.bind_phase!r})"
        )
    if [s.memory_mib for s in on_card] != [holder_mib]:
        problems.append(
            f"the holder {holder.name} holds {holder.allocated!r}, not {holder_mib} MiB of "
            f"{card_uuid}"
        )
    problems.extend(f"the second pod: {p}" for p in second.problems)
    verdict.facts = {
        "cardMiB": card_mib,
        "holder": {"pod": holder.name, "node": holder.node, "allocated": holder.allocated},
        "holderMiB": holder_mib,
        "secondMiB": second_mib,
        "second": second.facts,
    }
    return verdict


# ---------------------------------------------------------------------------- visibility


@dataclass(frozen=True)
class ObjectRef:
    """A listed object: name, namespace ("" for cluster-scoped), uid, and for nodes the
    platform's tenant label and the GPU capacity."""

    name: str
    uid: str
    namespace: str = ""
    tenant: str = ""
    capacity: Mapping[str, int] = field(default_factory=dict)

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}" if self.namespace else self.name


@dataclass(frozen=True)
class ClusterView:
    """What one tenant's API server lists, plus the markers the suite created there."""

    tenant: str
    nodes: tuple[ObjectRef, ...]
    namespaces: tuple[ObjectRef, ...]
    pods: tuple[ObjectRef, ...]
    marker_namespaces: tuple[str, ...] = ()
    marker_pods: tuple[str, ...] = ()  # "namespace/name"

    def capacity(self) -> dict[str, int]:
        total: dict[str, int] = {}
        for node in self.nodes:
            for key, value in node.capacity.items():
                total[key] = total.get(key, 0) + value
        return total

    def summary(self) -> dict[str, Any]:
        return {
            "nodes": sorted(n.name for n in self.nodes),
            "namespaces": sorted(n.name for n in self.namespaces),
            "pods": sorted(p.key for p in self.pods),
            "capacity": self.capacity(),
        }


def judge_visibility(
    view: ClusterView,
    *,
    expected_nodes: Collection[str] | None,
    expected_capacity: Mapping[str, int],
    expected_node_count: int | None = None,
    required_capacity: Collection[str] = (NVIDIA_GPU,),
    others: Sequence[ClusterView] = (),
) -> Verdict:
    """TC-07 / TC-08: through one tenant's API, only that tenant's objects.

    Leakage is judged on what is unique to the other tenants: node names and UIDs, namespace and
    pod UIDs (namespaces like ``default`` exist everywhere under the same name, with another UID),
    and the markers the suite created in the other tenants under unique names. The tenant's own
    markers must be visible (positive control: the listing works). Capacity keys in
    ``required_capacity`` must be advertised; the others are compared when advertised (the mock
    device plugin advertises gpumem/gpucores, the real one does not). ``expected_nodes`` is the
    exact node set when the stack outputs name the nodes; otherwise ``expected_node_count``
    (the pools' replicas) is checked.
    """
    verdict = Verdict()
    problems = verdict.problems
    tenant = view.tenant
    node_names = {n.name for n in view.nodes}
    namespace_names = {n.name for n in view.namespaces}
    pod_keys = {p.key for p in view.pods}
    for marker in view.marker_namespaces:
        if marker not in namespace_names:
            problems.append(f"{tenant}'s own marker namespace {marker} is not listed")
    for marker in view.marker_pods:
        if marker not in pod_keys:
            problems.append(f"{tenant}'s own marker pod {marker} is not listed")
    leaks: list[str] = []
    for other in others:
        foreign_node_names = {n.name for n in other.nodes}
        foreign_node_uids = {n.uid for n in other.nodes}
        foreign_ns_uids = {n.uid for n in other.namespaces}
        foreign_pod_uids = {p.uid for p in other.pods}
        for node in view.nodes:
            if node.name in foreign_node_names or node.uid in foreign_node_uids:
                leaks.append(f"node {node.name} of {other.tenant}")
        for namespace in view.namespaces:
            if namespace.uid in foreign_ns_uids or namespace.name in other.marker_namespaces:
                leaks.append(f"namespace {namespace.name} of {other.tenant}")
        for pod in view.pods:
            if pod.uid in foreign_pod_uids or pod.key in other.marker_pods:
                leaks.append(f"pod {pod.key} of {other.tenant}")
    for node in view.nodes:
        if node.tenant and node.tenant != tenant:
            leaks.append(f"node {node.name} labelled {TENANT_LABEL}={node.tenant}")
    if leaks:
        problems.append(f"{tenant}'s API shows other tenants' objects: {', '.join(leaks)}")
    expected = set(expected_nodes) if expected_nodes is not None else None
    if expected is not None:
        missing = sorted(expected - node_names)
        unexpected = sorted(node_names - expected)
        if missing:
            problems.append(f"{tenant}'s nodes missing from its API: {', '.join(missing)}")
        if unexpected:
            problems.append(f"{tenant}'s API lists nodes it does not own: {', '.join(unexpected)}")
    if expected_node_count is not None and len(node_names) != expected_node_count:
        problems.append(
            f"{tenant}'s API lists {len(node_names)} nodes, its pools declare {expected_node_count}"
        )
    seen_capacity = view.capacity()
    for key, value in sorted(expected_capacity.items()):
        if key not in seen_capacity:
            if key in required_capacity:
                problems.append(f"{tenant}'s nodes advertise no {key} (expected {value})")
            continue
        if seen_capacity[key] != value:
            problems.append(
                f"{tenant}'s nodes advertise {key}={seen_capacity[key]}, its inventory is {value}"
            )
    verdict.facts = {
        "tenant": tenant,
        **view.summary(),
        "expectedNodes": sorted(expected) if expected is not None else expected_node_count,
        "expectedCapacity": dict(expected_capacity),
        "comparedWith": [other.tenant for other in others],
    }
    return verdict


# ------------------------------------------------------------------------ control planes


def version_matches(git_version: str, configured: str) -> bool:
    """``/version`` gitVersion against the configured ``v1.35.0`` (build metadata ignored)."""
    return git_version.split("+", 1)[0] == configured


def tcp_status(obj: Mapping[str, Any]) -> tuple[str, str]:
    """A TenantControlPlane's (status, installed version) from ``status.kubernetesResources``."""
    version = (obj.get("status") or {}).get("kubernetesResources", {}).get("version", {}) or {}
    return str(version.get("status", "")), str(version.get("version", ""))


@dataclass(frozen=True)
class TcpStorage:
    """A TenantControlPlane's ``status.storage`` as the management cluster reports it."""

    tenant: str
    namespace: str
    name: str
    datastore: str
    driver: str
    schema: str
    user: str

    @property
    def key(self) -> str:
        return f"{self.namespace}/{self.name}"


def tcp_storage(tenant: str, obj: Mapping[str, Any]) -> TcpStorage:
    """Read ``status.storage`` of a TenantControlPlane object."""
    metadata = obj.get("metadata") or {}
    storage = (obj.get("status") or {}).get("storage") or {}
    setup = storage.get("setup") or {}
    return TcpStorage(
        tenant=tenant,
        namespace=str(metadata.get("namespace", "")),
        name=str(metadata.get("name", "")),
        datastore=str(storage.get("dataStoreName", "")),
        driver=str(storage.get("driver", "")),
        schema=str(setup.get("schema", "")),
        user=str(setup.get("user", "")),
    )


def judge_datastores(
    storages: Sequence[TcpStorage],
    used_by: Mapping[str, Sequence[str]],
    *,
    expected: Mapping[str, tuple[str, str]],
) -> Verdict:
    """TC-09: each tenant's schema (and user) is its own and as configured; each DataStore
    lists in ``status.usedBy`` every TenantControlPlane that uses it.

    ``expected`` maps tenant -> (schema, user) from the stack config; ``used_by`` maps DataStore
    name -> its ``status.usedBy`` (``namespace/name`` entries).
    """
    verdict = Verdict()
    problems = verdict.problems
    for storage in storages:
        want_schema, want_user = expected.get(storage.tenant, ("", ""))
        if not storage.datastore:
            problems.append(f"{storage.tenant}: status.storage.dataStoreName is empty")
        if not storage.schema:
            problems.append(f"{storage.tenant}: status.storage.setup.schema is empty")
        elif want_schema and storage.schema != want_schema:
            problems.append(
                f"{storage.tenant}: schema {storage.schema!r}, configured {want_schema!r}"
            )
        if want_user and storage.user != want_user:
            problems.append(f"{storage.tenant}: user {storage.user!r}, configured {want_user!r}")
        listed = used_by.get(storage.datastore)
        if storage.datastore and listed is None:
            problems.append(f"{storage.tenant}: DataStore {storage.datastore!r} not found")
        elif storage.datastore and storage.key not in (listed or ()):
            problems.append(
                f"DataStore {storage.datastore!r} status.usedBy does not list {storage.key} "
                f"(it lists: {', '.join(listed or ()) or 'nothing'})"
            )
    for what, values in (
        ("schema", [s.schema for s in storages if s.schema]),
        ("user", [s.user for s in storages if s.user]),
    ):
        shared = sorted({v for v in values if values.count(v) > 1})
        if shared:
            owners = {v: [s.tenant for s in storages if getattr(s, what) == v] for v in shared}
            problems.append(
                "tenants share a datastore "
                + what
                + ": "
                + "; ".join(f"{v!r} ({', '.join(owners[v])})" for v in shared)
            )
    verdict.facts = {
        "tenantControlPlanes": [
            {
                "tenant": s.tenant,
                "tcp": s.key,
                "dataStore": s.datastore,
                "driver": s.driver,
                "schema": s.schema,
                "user": s.user,
            }
            for s in storages
        ],
        "usedBy": {name: list(entries) for name, entries in used_by.items()},
    }
    return verdict


# -------------------------------------------------------------------------------- quotas

_QUOTA_EXCEEDED = re.compile(
    r"exceeded quota: (?P<quota>[^,]+), requested: (?P<requested>.*?), "
    r"used: (?P<used>.*?), limited: (?P<limited>.*)$"
)


@dataclass(frozen=True)
class QuotaRefusal:
    """The parts of a ResourceQuota admission refusal."""

    quota: str
    requested: dict[str, str]
    used: dict[str, str]
    limited: dict[str, str]


def _resource_list(text: str) -> dict[str, str]:
    pairs: dict[str, str] = {}
    for part in text.split(","):
        name, sep, value = part.partition("=")
        if not sep:
            raise EvidenceError(f"quota resource {part!r} is not name=value")
        pairs[name.strip()] = value.strip()
    return pairs


def parse_quota_exceeded(message: str) -> QuotaRefusal | None:
    """Parse ``... is forbidden: exceeded quota: <q>, requested: a=1, used: a=0, limited: a=1``."""
    match = _QUOTA_EXCEEDED.search(message.strip())
    if not match:
        return None
    return QuotaRefusal(
        quota=match.group("quota"),
        requested=_resource_list(match.group("requested")),
        used=_resource_list(match.group("used")),
        limited=_resource_list(match.group("limited")),
    )


# HAMi v2.10.0: charts/hami/templates/scheduler/webhook.yaml names the mutating webhook
# "vgpu.hami.io"; pkg/scheduler/webhook.go:114-115 answers admission.Denied("exceeding resource
# quota") when fitResourceQuota fails (since v2.9.0, PR #1605). controller-runtime's Denied is a
# 403, and the API server wraps the message (apiserver pkg/admission/plugin/webhook/errors
# ToStatusErr): `admission webhook "<name>" denied the request: <message>`.
HAMI_WEBHOOK = "vgpu.hami.io"
HAMI_QUOTA_DENIAL = "exceeding resource quota"
_WEBHOOK_DENIED = re.compile(
    r'admission webhook "(?P<webhook>[^"]+)" denied the request: (?P<why>.*)$'
)


def parse_webhook_denial(message: str) -> tuple[str, str] | None:
    """``admission webhook "w" denied the request: why`` -> (w, why), else None."""
    match = _WEBHOOK_DENIED.search(message.strip())
    return (match.group("webhook"), match.group("why").strip()) if match else None


def _quantity_int(text: str) -> int | None:
    return int(text) if _INTEGER.match(text.strip()) else None


@dataclass
class TunnelCut:
    """TC-16: what a GPU pod's creation met while the tenant's Konnectivity agents were cut off,
    and after they were let through again."""

    tenant: str
    agents_replaced: bool  # the agents were restarted behind the deny-egress policy
    api_answered: bool  # the API server itself answered a plain request meanwhile
    create_status: int | None  # HTTP status of the refused creation; None: the pod was created
    create_message: str
    created_scheduler: str | None  # schedulerName of a pod admitted while cut off
    restored_scheduler: str | None  # schedulerName of a pod created after the restore
    recovered_seconds: float | None

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "agentsReplaced": self.agents_replaced,
            "apiAnswered": self.api_answered,
            "createStatus": self.create_status,
            "createMessage": self.create_message,
            "createdSchedulerName": self.created_scheduler,
            "restoredSchedulerName": self.restored_scheduler,
            "recoveredSeconds": None
            if self.recovered_seconds is None
            else round(self.recovered_seconds, 1),
        }


# k8s.io/apiserver pkg/util/webhook/error.go:34-39 ErrCallingWebhook: "failed calling webhook
# %q: %v" when the call itself fails (no answer), which a Fail policy turns into the refusal.
WEBHOOK_CALL_FAILED = f'failed calling webhook "{HAMI_WEBHOOK}"'


def judge_tunnel_cut(cut: TunnelCut) -> Verdict:
    """TC-16 (Konnectivity down): with the tenant's Konnectivity agents unable to reach their
    server, the hosted API server cannot call HAMi's webhook on the workers, and the webhook's
    ``failurePolicy: Fail`` refuses the GPU pod with "failed calling webhook" while the API server
    itself answers; once the agents are let through, a GPU pod is mutated by HAMi again."""
    verdict = Verdict(facts=cut.as_dict())
    problems = verdict.problems
    tag = f"{cut.tenant}:"
    if not cut.agents_replaced:
        problems.append(
            f"{tag} the konnectivity-agent pods were not restarted behind the deny-egress policy: "
            "the tunnel was never cut, nothing below is evidence"
        )
    if not cut.api_answered:
        problems.append(
            f"{tag} the API server itself did not answer while the tunnel was cut: a refusal "
            "then says nothing about the tunnel"
        )
    if cut.create_status is None:
        if cut.created_scheduler == HAMI_SCHEDULER_NAME:
            problems.append(
                f"{tag} a GPU pod was admitted and mutated by HAMi's webhook with the "
                "Konnectivity agents cut off: the API server reached the webhook another way "
                "(TC-03's premise does not hold) or the cut did not take (agents on the host "
                "network ignore NetworkPolicy)"
            )
        else:
            problems.append(
                f"{tag} a GPU pod was admitted without HAMi's mutation (schedulerName "
                f"{cut.created_scheduler!r}): HAMi's webhook does not fail closed"
            )
    elif WEBHOOK_CALL_FAILED not in cut.create_message:
        problems.append(
            f"{tag} the GPU pod was refused with {cut.create_status}: {cut.create_message!r}, "
            f"not by the webhook call failing ({WEBHOOK_CALL_FAILED})"
        )
    if cut.restored_scheduler != HAMI_SCHEDULER_NAME:
        problems.append(
            f"{tag} after the agents were let through again a GPU pod came back with "
            f"schedulerName {cut.restored_scheduler!r}, not {HAMI_SCHEDULER_NAME}: the webhook "
            "path did not recover"
        )
    return verdict


def judge_card_quota_refusal(
    status: int | None, message: str, *, resource: str, requested: int, limit: int
) -> Verdict:
    """TC-10, cards: the pod asking ``requested`` cards is refused by Kubernetes' own quota
    admission on ``resource`` (``requests.nvidia.com/gpu``) with the configured ``limit`` - not
    by HAMi's webhook, a failing webhook call or anything else (``status`` None: admitted)."""
    verdict = Verdict(facts={"status": status, "message": message})
    problems = verdict.problems
    if status is None:
        problems.append(f"a pod asking {requested} cards was admitted (quota {limit})")
        return verdict
    denial = parse_webhook_denial(message)
    if denial is not None:
        problems.append(
            f"{requested} cards refused by webhook {denial[0]} ({denial[1]}), not by the card "
            f"quota: the request must be over {resource} only"
        )
        return verdict
    refusal = parse_quota_exceeded(message)
    if status != 403 or refusal is None:
        problems.append(f"{requested} cards refused for another reason: HTTP {status}: {message}")
        return verdict
    verdict.facts["quota"] = refusal.quota
    asked = _quantity_int(refusal.requested.get(resource, ""))
    used = _quantity_int(refusal.used.get(resource, "0")) or 0
    hard = _quantity_int(refusal.limited.get(resource, ""))
    if asked is None or hard is None:
        problems.append(f"quota {refusal.quota} refused, but not over {resource}: {message}")
    elif asked != requested or hard != limit or asked + used <= hard:
        problems.append(
            f"quota {refusal.quota} refused {resource}: requested {asked}, used {used}, limited "
            f"{hard}; expected requested {requested} over limit {limit}"
        )
    return verdict


def judge_hami_quota_denial(status: int | None, message: str, *, what: str) -> Verdict:
    """TC-10, memory: HAMi's webhook refuses the pod at creation because it exceeds the
    namespace's HAMi-managed quota (``status`` None: the pod was admitted)."""
    verdict = Verdict(facts={"status": status, "message": message})
    if status is None:
        verdict.problems.append(
            f"{what} was admitted: HAMi 2.9+'s webhook {HAMI_WEBHOOK} must refuse it "
            f"({HAMI_QUOTA_DENIAL!r}); is the quota known to HAMi's scheduler?"
        )
        return verdict
    denial = parse_webhook_denial(message)
    if status != 403 or denial != (HAMI_WEBHOOK, HAMI_QUOTA_DENIAL):
        verdict.problems.append(
            f"{what} refused, but not by {HAMI_WEBHOOK}'s quota check: HTTP {status}: {message}"
        )
    return verdict


def judge_quota_hard(
    namespace: str, hard_by_quota: Mapping[str, Mapping[str, int]], expected: Mapping[str, int]
) -> Verdict:
    """TC-10 precondition: some ResourceQuota in the namespace holds the configured limits."""
    verdict = Verdict(facts={"namespace": namespace, "quotas": dict(hard_by_quota)})
    for hard in hard_by_quota.values():
        if all(hard.get(key) == value for key, value in expected.items()):
            return verdict
    verdict.problems.append(
        f"no ResourceQuota in {namespace} holds {dict(expected)} "
        f"(found: {dict(hard_by_quota) or 'none'})"
    )
    return verdict
