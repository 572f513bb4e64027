"""HAMi's own view of the cards and quotas: its scheduler's Prometheus metrics (pure functions).

In the lab the program itself writes ``hami.io/node-nvidia-register`` and the node's
``nvidia.com/gpu``, so comparing those with the config proves nothing about HAMi. What HAMi's
scheduler has registered shows in the metrics it serves (HAMi v2.10.0 ``cmd/scheduler/metrics.go``),
read through the tenant API's service proxy
(``/api/v1/namespaces/hami-system/services/hami-scheduler:monitor/proxy/metrics``):

* per card of every node the scheduler registered (``InspectAllNodesUsage``, built from the
  nodes that passed its health check, ``pkg/scheduler/scheduler.go`` buildNodeUsage):
  ``hami_gpu_memory_limit_bytes`` (Devmem MiB x 1024 x 1024), ``hami_gpu_core_limit_ratio``
  (Devcore), ``hami_gpu_shared_count`` (containers on the card), labelled ``node``,
  ``device_uuid``, ``device_index``, ``device_type`` (metrics.go:107-130, 244-261);
* per namespace quota HAMi tracks: ``hami_resource_quota_used{namespace, quota_name, limit}`` and,
  when a ResourceQuota sets it, ``hami_resource_quota_limit{namespace, quota_name}``
  (metrics.go:285-319; quota_name is the resource, e.g. ``nvidia.com/gpumem``).

Every series also carries ``zone="vGPU"`` (NewClusterManager wraps the registry with it).
client_golang's text format sorts labels by name and writes values with Go's ``%g``
(``8.589934592e+10``).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any

from tests.acceptance.hami_evidence import (
    EvidenceError,
    Inventory,
    RegisteredCard,
    Verdict,
    memory_matches,
)

MEMORY_LIMIT = "hami_gpu_memory_limit_bytes"
CORE_LIMIT = "hami_gpu_core_limit_ratio"
SHARED_COUNT = "hami_gpu_shared_count"
CARD_SERIES = (MEMORY_LIMIT, CORE_LIMIT, SHARED_COUNT)
QUOTA_USED = "hami_resource_quota_used"
QUOTA_LIMIT = "hami_resource_quota_limit"
MIB = 1024 * 1024

_SAMPLE = re.compile(
    r"^(?P<name>[a-zA-Z_:][a-zA-Z0-9_:]*)(?:\{(?P<labels>.*)\})?\s+(?P<value>\S+)(?:\s+-?\d+)?$"
)
_LABEL = re.compile(r'\s*([a-zA-Z_][a-zA-Z0-9_]*)\s*=\s*"((?:[^"\\]|\\.)*)"\s*(,|$)')
_UNESCAPE = {"\\\\": "\\", '\\"': '"', "\\n": "\n"}


@dataclass(frozen=True)
class Sample:
    """One line of the text exposition format: name, labels, value."""

    name: str
    labels: Mapping[str, str]
    value: float


def _labels(text: str, line_no: int) -> dict[str, str]:
    labels: dict[str, str] = {}
    position = 0
    text = text.strip()
    while position < len(text):
        match = _LABEL.match(text, position)
        if not match:
            raise EvidenceError(f"metrics line {line_no}: bad labels {text!r}")
        raw = match.group(2)
        labels[match.group(1)] = re.sub(r"\\[\\\"n]", lambda m: _UNESCAPE[m.group(0)], raw)
        position = match.end()
    return labels


def parse_exposition(text: str) -> list[Sample]:
    """The samples of a Prometheus text-format page (``# HELP`` / ``# TYPE`` lines skipped)."""
    samples: list[Sample] = []
    for line_no, raw in enumerate(text.splitlines(), start=1):
        line = raw.strip()
        if not line or line.startswith("#"):
            continue
        match = _SAMPLE.match(line)
        if not match:
            raise EvidenceError(f"metrics line {line_no} is not a sample: {line[:120]!r}")
        try:
            value = float(match.group("value"))
        except ValueError:
            raise EvidenceError(
                f"metrics line {line_no}: value {match.group('value')!r} is not a number"
            ) from None
        samples.append(
            Sample(match.group("name"), _labels(match.group("labels") or "", line_no), value)
        )
    return samples


@dataclass
class HamiCard:
    """One card as HAMi's scheduler has registered it."""

    node: str
    uuid: str
    index: str = ""
    type: str = ""
    memory_mib: float | None = None
    cores: float | None = None
    shared: float | None = None

    @property
    def missing(self) -> list[str]:
        present = {MEMORY_LIMIT: self.memory_mib, CORE_LIMIT: self.cores, SHARED_COUNT: self.shared}
        return [name for name, value in present.items() if value is None]

    def as_dict(self) -> dict[str, Any]:
        return {
            "uuid": self.uuid,
            "index": self.index,
            "type": self.type,
            "memoryMiB": self.memory_mib,
            "cores": self.cores,
            "sharedContainers": self.shared,
        }


def hami_cards(samples: Iterable[Sample]) -> dict[str, list[HamiCard]]:
    """Per node name, the cards HAMi's scheduler reports (from the three per-card series)."""
    cards: dict[tuple[str, str], HamiCard] = {}
    for sample in samples:
        if sample.name not in CARD_SERIES:
            continue
        node = sample.labels.get("node", "")
        uuid = sample.labels.get("device_uuid", "")
        if not node or not uuid:
            raise EvidenceError(
                f"{sample.name} sample without node/device_uuid: {dict(sample.labels)}"
            )
        card = cards.setdefault((node, uuid), HamiCard(node=node, uuid=uuid))
        card.index = sample.labels.get("device_index", card.index)
        card.type = sample.labels.get("device_type", card.type)
        if sample.name == MEMORY_LIMIT:
            card.memory_mib = sample.value / MIB
        elif sample.name == CORE_LIMIT:
            card.cores = sample.value
        else:
            card.shared = sample.value
    by_node: dict[str, list[HamiCard]] = {}
    for card in cards.values():
        by_node.setdefault(card.node, []).append(card)
    for node_cards in by_node.values():
        node_cards.sort(key=lambda c: (c.index, c.uuid))
    return by_node


@dataclass(frozen=True)
class HamiQuota:
    """One namespace quota as HAMi tracks it (used always; limit only when a quota sets it)."""

    namespace: str
    resource: str
    used: float
    limit: float | None


def hami_quotas(samples: Iterable[Sample]) -> dict[tuple[str, str], HamiQuota]:
    """Per (namespace, resource), HAMi's quota usage and limit."""
    used: dict[tuple[str, str], float] = {}
    limits: dict[tuple[str, str], float] = {}
    for sample in samples:
        if sample.name not in (QUOTA_USED, QUOTA_LIMIT):
            continue
        key = (sample.labels.get("namespace", ""), sample.labels.get("quota_name", ""))
        (used if sample.name == QUOTA_USED else limits)[key] = sample.value
    return {
        key: HamiQuota(key[0], key[1], used.get(key, 0.0), limits.get(key))
        for key in sorted({*used, *limits})
    }


def _whole(value: float) -> bool:
    return math.isfinite(value) and value == int(value)


def judge_hami_view(
    node: str,
    cards: Sequence[HamiCard],
    registered: Sequence[RegisteredCard],
    expected: Inventory,
    *,
    memory_tolerance: float = 0.0,
) -> Verdict:
    """TC-02 for one node, from HAMi's side: its scheduler registered exactly the node's cards
    (the UUIDs of the register annotation), each with the memory and cores registered for it, and
    the cards add up to the declared inventory (memory: ``memory_matches``)."""
    verdict = Verdict()
    problems = verdict.problems
    verdict.facts = {"node": node, "hamiCards": [c.as_dict() for c in cards]}
    if not cards:
        problems.append(
            f"{node}: HAMi's scheduler reports no card on this node (not registered: unhealthy "
            "or missing nvidia.com/gpu allocatable, or an unreadable register annotation)"
        )
        return verdict
    seen = {c.uuid for c in cards}
    wanted = {c.uuid for c in registered}
    if seen != wanted:
        problems.append(
            f"{node}: HAMi's scheduler has cards {sorted(seen)}, "
            f"the node registers {sorted(wanted)}"
        )
    by_uuid = {c.uuid: c for c in registered}
    for card in cards:
        if card.missing:
            problems.append(
                f"{node}: HAMi reports card {card.uuid} without {', '.join(card.missing)}"
            )
            continue
        if "nvidia" not in card.type.lower():
            problems.append(f"{node}: HAMi's card {card.uuid} has type {card.type!r}, not NVIDIA")
        own = by_uuid.get(card.uuid)
        if own is not None and (card.memory_mib != own.memory_mib or card.cores != own.core_units):
            problems.append(
                f"{node}: HAMi holds {card.uuid} as {card.memory_mib:g} MiB / {card.cores:g} "
                f"units, the node registers {own.memory_mib} MiB / {own.core_units}"
            )
    complete = [c for c in cards if not c.missing]
    memory = sum(c.memory_mib or 0.0 for c in complete)
    cores = sum(c.cores or 0.0 for c in complete)
    verdict.facts["totals"] = {"cards": len(cards), "memoryMiB": memory, "coreUnits": cores}
    if len(cards) != expected.cards:
        problems.append(
            f"{node}: HAMi's scheduler has {len(cards)} cards, {expected.cards} declared"
        )
    mismatch = memory_matches(memory, expected.memory_mib, memory_tolerance)
    if not _whole(memory) or mismatch is not None:
        problems.append(
            f"{node}: HAMi's scheduler holds {memory:g} MiB, {mismatch or 'not whole MiB'}"
        )
    if cores != expected.core_units:
        problems.append(
            f"{node}: HAMi's scheduler holds {cores:g} compute units, "
            f"{expected.core_units} declared"
        )
    return verdict


@dataclass
class QuotaView:
    """What HAMi holds for one namespace's gpumem / gpucores quota."""

    namespace: str
    quotas: Mapping[tuple[str, str], HamiQuota] = field(default_factory=dict)

    def get(self, resource: str) -> HamiQuota | None:
        return self.quotas.get((self.namespace, resource))


def judge_hami_quota(view: QuotaView, expected_limits: Mapping[str, int]) -> Verdict:
    """TC-10 precondition: HAMi's scheduler (whose webhook enforces the quota) holds the
    configured limits for the namespace (``expected_limits``: resource -> limit)."""
    verdict = Verdict()
    held: dict[str, Any] = {}
    for resource, want in sorted(expected_limits.items()):
        quota = view.get(resource)
        held[resource] = None if quota is None else {"used": quota.used, "limit": quota.limit}
        if quota is None or quota.limit is None:
            verdict.problems.append(
                f"HAMi's scheduler holds no {resource} quota limit for namespace {view.namespace} "
                f"(configured {want}): its webhook would not enforce it"
            )
        elif quota.limit != want:
            verdict.problems.append(
                f"HAMi's scheduler holds {resource} limit {quota.limit:g} for {view.namespace}, "
                f"configured {want}"
            )
    verdict.facts = {"namespace": view.namespace, "hami": held}
    return verdict
