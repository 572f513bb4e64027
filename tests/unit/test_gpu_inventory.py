"""The declared GPU inventory: HAMi's node annotation, capacity, labels, the declared ConfigMap.

Expected numbers are the lab report's (tenant-a: one A100 80 GB = 81,920 MiB / 100 units /
10 slots; tenant-b: two L4 24 GB = 49,152 MiB / 200 units / 20 slots), written out here, never
computed by the code under test.
"""

from __future__ import annotations

import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path

import pytest
import yaml

from components.catalog import CARD_CATALOG, CardModel
from components.gpu_inventory import (
    GPU_MODEL_LABEL,
    HAMI_GPU_NODE_LABEL,
    InventoryTotals,
    card_uuid,
    declared_inventory_configmap,
    declared_inventory_payload,
    gpu_capacity,
    gpu_model_label_value,
    kubelet_node_labels_arg,
    node_labels,
    node_register_annotation,
    node_register_entries,
    node_totals,
    parse_node_register,
    pool_inventory,
    register_totals,
)

A100 = CARD_CATALOG["A100-80GB"]
# The lab report's simulated L4 (Pulumi.lab.yaml declares it explicitly; a real L4 registers
# the catalog's 23,034 MiB).
L4 = CardModel("L4-24GB", 24_576, 100, "NVIDIA-L4")
UUID_SHAPE = re.compile(r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


def test_lab_report_tenant_a_one_a100() -> None:
    value = node_register_annotation("tenant-a", "a100", "tenant-a-a100-0", [(A100, 1)], 10)
    cards = json.loads(value)
    assert isinstance(cards, list)
    assert len(cards) == 1
    card = cards[0]
    assert card["devmem"] == 81_920
    assert card["devcore"] == 100
    assert card["count"] == 10
    assert card["type"] == "NVIDIA A100-SXM4-80GB"  # NVML's name, as a real node registers it
    assert (card["index"], card["numa"], card["mode"], card["health"]) == (0, 0, "hami-core", True)
    assert register_totals(parse_node_register(value)) == InventoryTotals(1, 81_920, 100, 10)
    assert gpu_capacity([(A100, 1)], 10) == 10


def test_lab_report_tenant_b_two_l4() -> None:
    value = node_register_annotation("tenant-b", "l4", "tenant-b-l4-0", [(L4, 2)], 10)
    cards = parse_node_register(value)
    assert [c["index"] for c in cards] == [0, 1]
    assert [c["devmem"] for c in cards] == [24_576, 24_576]
    assert {c["type"] for c in cards} == {"NVIDIA-L4"}
    assert len({c["id"] for c in cards}) == 2
    assert register_totals(cards) == InventoryTotals(2, 49_152, 200, 20)
    assert gpu_capacity([(L4, 2)], 10) == 20


def test_every_entry_has_hami_device_info_fields_in_the_documented_order() -> None:
    entries = node_register_entries("t", "p", "t-p-0", [(A100, 1)], 10)
    assert list(entries[0]) == [
        "id",
        "index",
        "count",
        "devmem",
        "devcore",
        "type",
        "numa",
        "mode",
        "health",
    ]


def test_annotation_is_compact_json() -> None:
    value = node_register_annotation("t", "p", "t-p-0", [(A100, 1)], 10)
    # No separators' spaces (the card's NVML type has its own: "NVIDIA A100-SXM4-80GB").
    assert " " not in value.replace(A100.product, "")
    assert value.startswith('[{"id":"GPU-')


def test_card_ids_are_nvidia_shaped_stable_and_distinct() -> None:
    first = card_uuid("tenant-a", "a100", "tenant-a-a100-0", 0)
    assert UUID_SHAPE.match(first), first
    assert card_uuid("tenant-a", "a100", "tenant-a-a100-0", 0) == first
    others = {
        card_uuid("tenant-a", "a100", "tenant-a-a100-0", 1),
        card_uuid("tenant-a", "a100", "tenant-a-a100-1", 0),
        card_uuid("tenant-a", "h100", "tenant-a-a100-0", 0),
        card_uuid("tenant-b", "a100", "tenant-a-a100-0", 0),
    }
    assert first not in others
    assert len(others) == 4
    # HAMi strips a "-N" replica suffix from ids with exactly six dashes; real ids have five.
    assert first.count("-") == 5


def test_card_ids_do_not_change_between_releases() -> None:
    """Changing the id scheme would rewrite every node's annotation: pin it (uuid5 over a fixed
    namespace, computed here with the uuid module)."""
    namespace = uuid.uuid5(uuid.NAMESPACE_URL, "https://gpu-platform.io/mock-gpu-cards")
    expected = f"GPU-{uuid.uuid5(namespace, 'tenant-a/a100/tenant-a-a100-0/0')}"
    assert card_uuid("tenant-a", "a100", "tenant-a-a100-0", 0) == expected


def test_mixed_card_kinds_are_indexed_across_kinds() -> None:
    entries = node_register_entries("t", "p", "t-p-0", [(A100, 1), (L4, 2)], 4)
    assert [e["index"] for e in entries] == [0, 1, 2]
    assert [e["devmem"] for e in entries] == [81_920, 24_576, 24_576]
    assert all(e["count"] == 4 for e in entries)
    assert register_totals(entries) == InventoryTotals(3, 131_072, 300, 12)


def test_a_product_without_nvidia_is_refused() -> None:
    odd = CardModel("odd", 1024, 100, "AMD-MI300")
    with pytest.raises(ValueError, match="NVIDIA"):
        node_register_entries("t", "p", "n", [(odd, 1)], 10)


def test_zero_slots_or_no_cards_are_refused() -> None:
    with pytest.raises(ValueError, match="slots"):
        node_register_entries("t", "p", "n", [(A100, 1)], 0)
    with pytest.raises(ValueError, match="no cards"):
        node_register_entries("t", "p", "n", [], 10)


def test_parse_accepts_what_hami_marshals_with_omitempty() -> None:
    """Recorded shape of a real node's annotation: Go's omitempty drops index 0 and numa 0."""
    recorded = (
        '[{"id":"GPU-0fc3eda5-e98b-a25b-5b0d-cf5c855d1448","count":10,"devmem":81920,'
        '"devcore":100,"type":"NVIDIA-A100-SXM4-80GB","mode":"hami-core","health":true}]'
    )
    cards = parse_node_register(recorded)
    assert cards[0]["index"] == 0
    assert cards[0]["numa"] == 0
    assert register_totals(cards) == InventoryTotals(1, 81_920, 100, 10)


@pytest.mark.parametrize(
    ("value", "message"),
    [
        ("GPU-x,10,81920,100,NVIDIA-A100,0,true:", "not JSON"),  # the pre-2.8 colon format
        ("[]", "non-empty"),
        ('{"id": "GPU-x"}', "non-empty JSON array"),
        ("[1]", "not an object"),
        ('[{"id":"GPU-x","type":"NVIDIA-A","count":10,"devmem":1}]', "devcore"),
        ('[{"id":"GPU-x","type":"Tesla","count":10,"devmem":1,"devcore":100}]', "NVIDIA"),
    ],
)
def test_parse_refuses_what_the_mock_plugin_could_not_use(value: str, message: str) -> None:
    with pytest.raises(ValueError, match=message):
        parse_node_register(value)


def test_node_totals_and_pool_inventory() -> None:
    assert node_totals([(L4, 2)], 10) == InventoryTotals(2, 49_152, 200, 20)
    inventory = pool_inventory(3, [(A100, 1)], 10)
    assert inventory == {
        "nodes": 3,
        "cards": 3,
        "memoryMiB": 245_760,
        "coreUnits": 300,
        "slots": 30,
        "perNode": {"cards": 1, "memoryMiB": 81_920, "coreUnits": 100, "slots": 10},
    }


def test_node_labels_lab_and_prod() -> None:
    lab = node_labels("tenant-a", "a100", [(A100, 1)], lab=True)
    assert lab == {
        "gpu": "on",
        "gpu-platform.io/tenant": "tenant-a",
        "gpu-platform.io/pool": "a100",
        "gpu-platform.io/gpu-model": "A100-80GB",
        "gpu-platform.io/lab-only": "true",
    }
    prod = node_labels("team", "l4", [(L4, 1)], lab=False)
    assert "gpu-platform.io/lab-only" not in prod
    assert prod["gpu"] == "on"


def test_gpu_model_label_value_joins_distinct_models() -> None:
    assert gpu_model_label_value([(A100, 1), (L4, 2), (A100, 1)]) == "A100-80GB_L4-24GB"
    custom = CardModel("custom-81920MiB", 81_920, 100, "NVIDIA-X")
    assert gpu_model_label_value([(custom, 1)]) == "custom-81920MiB"
    assert GPU_MODEL_LABEL == "gpu-platform.io/gpu-model"


def test_kubelet_node_labels_arg_is_sorted_pairs() -> None:
    assert kubelet_node_labels_arg({"gpu": "on", "a/b": "c"}) == "a/b=c,gpu=on"


def test_gpu_node_label_is_the_hami_charts_device_plugin_selector(upstream_dir: Path) -> None:
    values = yaml.safe_load((upstream_dir / "hami" / "values.yaml").read_text())
    selector = values["devicePlugin"]["nvidiaNodeSelector"]
    assert selector == {HAMI_GPU_NODE_LABEL[0]: HAMI_GPU_NODE_LABEL[1]}


def test_the_mock_plugin_daemonset_selects_no_label(upstream_file: Callable[[str], Path]) -> None:
    """The upstream mock plugin runs on every node (no nodeSelector): our labels are for HAMi's
    real device plugin and people, the annotation is what the mock reads."""
    manifest = yaml.safe_load(upstream_file("mock-device-plugin/k8s-mock-plugin.yaml").read_text())
    assert "nodeSelector" not in manifest["spec"]["template"]["spec"]


def test_declared_inventory_payload_and_configmap() -> None:
    payload = declared_inventory_payload("tenant-b", "l4", 1, [(L4, 2)], 10)
    assert payload == {
        "tenant": "tenant-b",
        "pool": "l4",
        "replicas": 1,
        "slotsPerCard": 10,
        "cards": [
            {
                "model": "L4-24GB",
                "product": "NVIDIA-L4",
                "memoryMiB": 24_576,
                "coreUnits": 100,
                "count": 2,
            }
        ],
    }
    configmap = declared_inventory_configmap("tenant-b", "l4", 1, [(L4, 2)], 10)
    metadata = configmap["metadata"]
    assert metadata["name"] == "gpu-platform-pool-l4"
    assert metadata["namespace"] == "kube-system"
    assert metadata["labels"] == {
        "gpu-platform.io/declared-inventory": "true",
        "gpu-platform.io/tenant": "tenant-b",
        "gpu-platform.io/pool": "l4",
    }
    assert json.loads(configmap["data"]["cards.json"]) == payload
