"""A pool's declared GPU inventory: what HAMi sees on each node, and what the pool declares.

Pure functions only (no Pulumi): the GpuWorkerPool component wires them to resources, the tests
call them directly.

Formats relied on (HAMi v2.10.0, platform.md §3):

* Node annotation ``hami.io/node-nvidia-register``: a JSON array since HAMi 2.8.0, one object per
  card, the fields of HAMi's ``device.DeviceInfo`` (``pkg/device/devices.go``: ``id``,
  ``index``, ``count``, ``devmem``, ``devcore``, ``type``, ``numa``, ``mode``, ``health``).
  ``count`` is the card's sharing slots (``deviceSplitCount``), ``devmem`` MiB, ``devcore``
  compute units (100 = one card), ``type`` the product string, which must contain ``NVIDIA``
  for HAMi's scheduler to consider the card. In the lab, HAMi's mock device plugin
  (``projecthami/mock-device-plugin`` v1.0.1, run by ``components.lab.mock_device_plugin``) reads
  this annotation and advertises ``nvidia.com/gpumem`` (the cards' MiB), ``gpucores`` (their
  units) and ``gpumem-percentage`` (100 per card) from it (``internal/pkg/api/device/nvidia/
  device.go`` ``GetResource``); it does not advertise ``nvidia.com/gpu``.
* Node status capacity ``nvidia.com/gpu`` > 0 is the mock plugin's health gate
  (``device.CheckHealthy``) and HAMi's scheduler keeps the node healthy while allocatable
  ``nvidia.com/gpu`` > 0 (``device.CheckHealth``): cards x slots.
* ``gpu=on`` is the HAMi chart's ``devicePlugin.nvidiaNodeSelector`` (values.yaml of chart
  2.10.0): it places the real device plugin on prod's GPU nodes. Nothing in the lab selects on it
  (the mock's DaemonSet has no node selector); lab nodes carry it to look like prod's.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from types import MappingProxyType
from typing import Any

from components.catalog import CardModel
from components.labels import (
    DECLARED_INVENTORY_LABEL,
    INVENTORY_KEY,
    LAB_ONLY_LABEL,
    POOL_LABEL,
    TENANT_LABEL,
)

# The HAMi chart's devicePlugin.nvidiaNodeSelector (chart 2.10.0 values.yaml): {gpu: "on"}.
HAMI_GPU_NODE_LABEL = ("gpu", "on")
# The card models of a node, for people and node selectors (our own key: NVIDIA's GPU feature
# discovery owns nvidia.com/gpu.product on real nodes and would overwrite it).
GPU_MODEL_LABEL = "gpu-platform.io/gpu-model"
# HAMi's extended resource counting sharing slots (the mock plugin's health gate).
GPU_COUNT_RESOURCE = "nvidia.com/gpu"
# HAMi's default device mode for NVIDIA cards.
HAMI_CORE_MODE = "hami-core"
# Where the declared-inventory ConfigMap lives inside each tenant.
DECLARED_INVENTORY_NAMESPACE = "kube-system"

# Fixed namespace for the deterministic card UUIDs (uuid5 of "<tenant>/<pool>/<node>/<index>").
_MOCK_CARD_NAMESPACE = uuid.uuid5(uuid.NAMESPACE_URL, "https://gpu-platform.io/mock-gpu-cards")
_LABEL_VALUE = re.compile(r"^(([A-Za-z0-9][-A-Za-z0-9_.]*)?[A-Za-z0-9])?$")
_REQUIRED_REGISTER_FIELDS = ("id", "type", "count", "devmem", "devcore")
_REGISTER_ZERO_VALUES: MappingProxyType[str, Any] = MappingProxyType(
    {"index": 0, "numa": 0, "mode": "", "health": False}
)

Cards = Sequence[tuple[CardModel, int]]


@dataclass(frozen=True)
class InventoryTotals:
    """GPU totals of one node or of a whole pool."""

    cards: int
    memory_mib: int
    core_units: int
    slots: int

    def as_dict(self) -> dict[str, int]:
        """camelCase keys, as in stack outputs and the acceptance suite."""
        return {
            "cards": self.cards,
            "memoryMiB": self.memory_mib,
            "coreUnits": self.core_units,
            "slots": self.slots,
        }

    def times(self, factor: int) -> InventoryTotals:
        return InventoryTotals(
            cards=self.cards * factor,
            memory_mib=self.memory_mib * factor,
            core_units=self.core_units * factor,
            slots=self.slots * factor,
        )


# ------------------------------------------------------------------------ per-node inventory


def card_uuid(tenant: str, pool: str, node: str, index: int) -> str:
    """A stable card id shaped like NVIDIA's (``GPU-8-4-4-4-12`` hex): the same tenant, pool,
    node and index always give the same id, different ones never collide in practice."""
    return f"GPU-{uuid.uuid5(_MOCK_CARD_NAMESPACE, f'{tenant}/{pool}/{node}/{index}')}"


def node_register_entries(
    tenant: str, pool: str, node: str, cards: Cards, slots_per_card: int
) -> list[dict[str, Any]]:
    """The node's cards as HAMi ``DeviceInfo`` objects, indexed 0.. across all card kinds."""
    if slots_per_card < 1:
        raise ValueError(f"slots_per_card must be at least 1, got {slots_per_card}")
    entries: list[dict[str, Any]] = []
    for model, count in cards:
        if "NVIDIA" not in model.product:
            raise ValueError(
                f"card product {model.product!r} must contain 'NVIDIA': HAMi ignores other types"
            )
        for _ in range(count):
            index = len(entries)
            entries.append(
                {
                    "id": card_uuid(tenant, pool, node, index),
                    "index": index,
                    "count": slots_per_card,
                    "devmem": model.memory_mib,
                    "devcore": model.core_units,
                    "type": model.product,
                    "numa": 0,
                    "mode": HAMI_CORE_MODE,
                    "health": True,
                }
            )
    if not entries:
        raise ValueError(f"node {node} declares no cards")
    return entries


def node_register_annotation(
    tenant: str, pool: str, node: str, cards: Cards, slots_per_card: int
) -> str:
    """The value of ``hami.io/node-nvidia-register`` for one node (compact JSON array)."""
    entries = node_register_entries(tenant, pool, node, cards, slots_per_card)
    return json.dumps(entries, separators=(",", ":"))


def parse_node_register(value: str) -> list[dict[str, Any]]:
    """Parse a ``hami.io/node-nvidia-register`` value in the JSON format into one dict per card
    with every field present. HAMi marshals with ``omitempty``, so zero values (index 0, numa 0,
    health false) may be absent and default to Go's zero values; ``id``, ``type``, ``count``,
    ``devmem`` and ``devcore`` are required. Raises ValueError on anything else."""
    try:
        data = json.loads(value)
    except json.JSONDecodeError as exc:
        raise ValueError(f"not JSON: {exc}") from exc
    if not isinstance(data, list) or not data:
        raise ValueError("expected a non-empty JSON array of cards")
    cards: list[dict[str, Any]] = []
    for position, entry in enumerate(data):
        if not isinstance(entry, dict):
            raise ValueError(f"card {position} is not an object")
        missing = [key for key in _REQUIRED_REGISTER_FIELDS if key not in entry]
        if missing:
            raise ValueError(f"card {position} lacks {', '.join(missing)}")
        if "NVIDIA" not in str(entry["type"]):
            raise ValueError(f"card {position} type {entry['type']!r} lacks 'NVIDIA'")
        cards.append({**_REGISTER_ZERO_VALUES, **entry})
    return cards


def register_totals(entries: Sequence[Mapping[str, Any]]) -> InventoryTotals:
    """What the mock plugin would advertise from parsed register entries."""
    return InventoryTotals(
        cards=len(entries),
        memory_mib=sum(int(e["devmem"]) for e in entries),
        core_units=sum(int(e["devcore"]) for e in entries),
        slots=sum(int(e["count"]) for e in entries),
    )


def node_totals(cards: Cards, slots_per_card: int) -> InventoryTotals:
    """One node's declared totals, straight from the pool config."""
    count = sum(n for _, n in cards)
    return InventoryTotals(
        cards=count,
        memory_mib=sum(model.memory_mib * n for model, n in cards),
        core_units=sum(model.core_units * n for model, n in cards),
        slots=count * slots_per_card,
    )


def gpu_capacity(cards: Cards, slots_per_card: int) -> int:
    """The node status capacity ``nvidia.com/gpu``: cards x slots (the health gate, > 0)."""
    return node_totals(cards, slots_per_card).slots


def pool_inventory(replicas: int, cards: Cards, slots_per_card: int) -> dict[str, Any]:
    """The pool's stack output: totals over all nodes plus ``perNode`` (every node is alike)."""
    per_node = node_totals(cards, slots_per_card)
    return {"nodes": replicas, **per_node.times(replicas).as_dict(), "perNode": per_node.as_dict()}


# ----------------------------------------------------------------------------------- labels


def gpu_model_label_value(cards: Cards) -> str:
    """The card models of a node as one label value (distinct models joined by ``_``)."""
    names: list[str] = []
    for model, _ in cards:
        if model.name not in names:
            names.append(model.name)
    value = "_".join(names)
    value = re.sub(r"[^-A-Za-z0-9_.]", "-", value)[:63].strip("-_.")
    if not _LABEL_VALUE.match(value):
        raise ValueError(f"cannot turn card models {names} into a label value")
    return value


def node_labels(tenant: str, pool: str, cards: Cards, lab: bool) -> dict[str, str]:
    """Labels every GPU node of the pool carries: HAMi's device-plugin selector, tenant, pool,
    card model; lab nodes (simulated cards) are also marked lab-only."""
    labels = {
        HAMI_GPU_NODE_LABEL[0]: HAMI_GPU_NODE_LABEL[1],
        TENANT_LABEL: tenant,
        POOL_LABEL: pool,
        GPU_MODEL_LABEL: gpu_model_label_value(cards),
    }
    if lab:
        labels[LAB_ONLY_LABEL] = "true"
    return labels


def kubelet_node_labels_arg(labels: Mapping[str, str]) -> str:
    """The kubelet ``--node-labels`` value: ``k=v`` pairs joined by commas, sorted."""
    return ",".join(f"{key}={value}" for key, value in sorted(labels.items()))


# -------------------------------------------------------------------- declared inventory


def declared_inventory_name(pool: str) -> str:
    """The ConfigMap name of a pool's declared inventory."""
    return f"gpu-platform-pool-{pool}"


def declared_inventory_payload(
    tenant: str, pool: str, replicas: int, cards: Cards, slots_per_card: int
) -> dict[str, Any]:
    """What the policy pack reads to check capacity fit at preview."""
    return {
        "tenant": tenant,
        "pool": pool,
        "replicas": replicas,
        "slotsPerCard": slots_per_card,
        "cards": [
            {
                "model": model.name,
                "product": model.product,
                "memoryMiB": model.memory_mib,
                "coreUnits": model.core_units,
                "count": count,
            }
            for model, count in cards
        ],
    }


def declared_inventory_configmap(
    tenant: str, pool: str, replicas: int, cards: Cards, slots_per_card: int
) -> dict[str, Any]:
    """The declared-inventory ConfigMap (metadata + data) for the tenant's kube-system."""
    payload = declared_inventory_payload(tenant, pool, replicas, cards, slots_per_card)
    return {
        "metadata": {
            "name": declared_inventory_name(pool),
            "namespace": DECLARED_INVENTORY_NAMESPACE,
            "labels": {
                DECLARED_INVENTORY_LABEL: "true",
                TENANT_LABEL: tenant,
                POOL_LABEL: pool,
            },
        },
        "data": {INVENTORY_KEY: json.dumps(payload, sort_keys=True)},
    }
