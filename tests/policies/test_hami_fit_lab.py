"""The lab report's scheduling outcomes, replayed on the policy pack's convenience API.

Inventory from the lab report: tenant-a has one A100 80 GB (81,920 MiB, 100 compute units,
10 slots); tenant-b has two L4 24 GB (24,576 MiB each). Every expected value below is worked out
from those numbers and HAMi's rules, never produced by the code under test.
"""

from __future__ import annotations

import pytest
from gpu_platform_policies.hami_fit import (
    Card,
    ContainerRequest,
    declared_cards,
    generate_resource_request,
    place_containers,
)

A100_MIB = 81_920
L4_MIB = 24_576
CORES = 100
SLOTS = 10
A100 = "NVIDIA A100-SXM4-80GB"
L4 = "NVIDIA L4"

# The lab pods: 1 card, 20,000 MiB, 30 % of the card's compute.
LAB_MIB = 20_000
LAB_CORES = 30
LAB_REQUEST = ContainerRequest(nums=1, memreq=LAB_MIB, coresreq=LAB_CORES)


def a100() -> list[Card]:
    return declared_cards(A100_MIB, CORES, SLOTS, 1, A100, "a100")


def two_l4() -> list[Card]:
    return declared_cards(L4_MIB, CORES, SLOTS, 2, L4, "l4")


def test_declared_cards_are_fresh_and_named_from_the_prefix() -> None:
    cards = two_l4()
    assert [c.id for c in cards] == ["l4-0", "l4-1"]
    assert [c.index for c in cards] == [0, 1]
    for card in cards:
        assert (card.totalmem, card.totalcore, card.count, card.type) == (L4_MIB, CORES, SLOTS, L4)
        assert (card.used, card.usedmem, card.usedcores) == (0, 0, 0)
        assert card.health


def test_declared_cards_accept_json_floats() -> None:
    """Pulumi props arrive as JSON numbers (floats)."""
    cards = declared_cards(81_920.0, 100.0, 10.0, 1.0, A100, "a100")  # type: ignore[arg-type]
    assert cards[0].totalmem == A100_MIB
    assert cards[0].count == SLOTS


def test_lab_pod_resources_become_the_lab_request() -> None:
    limits = {"nvidia.com/gpu": "1", "nvidia.com/gpumem": "20000", "nvidia.com/gpucores": "30"}
    assert generate_resource_request(limits, {}) == LAB_REQUEST


def test_three_lab_pods_share_the_a100_and_the_fourth_runs_out_of_cores() -> None:
    result = place_containers(a100(), [LAB_REQUEST] * 4)
    first_three, fourth = result.placements[:3], result.placements[3]

    for placement in first_three:
        assert placement.fit
        assert placement.reason == ""
        assert placement.card_ids == ("a100-0",)

    # After three pods: 90 of 100 cores are booked, so 10 < 30 cores are left ...
    assert CORES - 3 * LAB_CORES < LAB_CORES
    # ... while memory would still fit: 81,920 - 60,000 = 21,920 >= 20,000 MiB.
    assert A100_MIB - 3 * LAB_MIB >= LAB_MIB
    assert not fourth.fit
    assert fourth.reason == "1/1 CardInsufficientCore"
    assert fourth.card_ids == ()

    card = result.cards[0]
    assert (card.used, card.usedmem, card.usedcores) == (3, 3 * LAB_MIB, 3 * LAB_CORES)
    assert not result.all_fit
    assert result.failures == (fourth,)


def test_request_larger_than_the_a100_fails_on_memory() -> None:
    result = place_containers(a100(), [ContainerRequest(nums=1, memreq=90_000, coresreq=30)])
    assert not result.placements[0].fit
    assert result.placements[0].reason == "1/1 CardInsufficientMemory"


def test_request_larger_than_an_l4_fails_on_memory_on_both_cards() -> None:
    """Two L4 add up to 49,152 MiB, but a request is per card: 30,000 > 24,576 on each."""
    result = place_containers(two_l4(), [ContainerRequest(nums=1, memreq=30_000, coresreq=10)])
    assert not result.placements[0].fit
    assert result.placements[0].reason == "2/2 CardInsufficientMemory"


def test_slots_run_out_after_ten_tiny_pods() -> None:
    tiny = ContainerRequest(nums=1, memreq=1_024, coresreq=5)
    # Ten tiny pods use 10 x 1,024 MiB and 10 x 5 cores: memory and cores are not the limit.
    assert SLOTS * 1_024 <= A100_MIB
    assert SLOTS * 5 <= CORES

    result = place_containers(a100(), [tiny] * (SLOTS + 1))

    assert all(p.fit for p in result.placements[:SLOTS])
    eleventh = result.placements[SLOTS]
    assert not eleventh.fit
    assert eleventh.reason == "1/1 CardTimeSlicingExhausted"
    assert result.cards[0].used == SLOTS


def test_two_cards_asked_for_on_a_one_card_node() -> None:
    result = place_containers(a100(), [ContainerRequest(nums=2, memreq=1_000, coresreq=10)])
    assert result.placements[0].reason == "NodeInsufficientDevice"


def test_whole_card_request_on_a_shared_card() -> None:
    """100 cores on a card with cores in use is a core shortage; on a card that only has a task
    with 0 cores it is an exclusivity conflict."""
    whole = ContainerRequest(nums=1, memreq=1_000, coresreq=100)
    busy = place_containers(a100(), [LAB_REQUEST, whole])
    assert busy.placements[1].reason == "1/1 CardInsufficientCore"

    no_cores = ContainerRequest(nums=1, memreq=1_000, coresreq=0)
    shared = place_containers(a100(), [no_cores, whole])
    assert shared.placements[1].reason == "1/1 ExclusiveDeviceAllocateConflict"


def test_spread_uses_both_l4_and_binpack_fills_one() -> None:
    small = ContainerRequest(nums=1, memreq=4_000, coresreq=10)

    spread = place_containers(two_l4(), [small, small], policy="spread")
    assert [p.card_ids for p in spread.placements] == [("l4-1",), ("l4-0",)]

    binpack = place_containers(two_l4(), [small, small], policy="binpack")
    assert [p.card_ids for p in binpack.placements] == [("l4-1",), ("l4-1",)]
    assert [c.used for c in binpack.cards] == [0, 2]


def test_a_failed_request_books_nothing_and_the_input_is_untouched() -> None:
    cards = a100()
    result = place_containers(cards, [ContainerRequest(nums=1, memreq=90_000), LAB_REQUEST])
    assert [p.fit for p in result.placements] == [False, True]
    assert result.cards[0].usedmem == LAB_MIB
    assert cards[0].usedmem == 0


def test_card_ids_must_be_unique() -> None:
    card = a100()[0]
    with pytest.raises(ValueError, match="unique"):
        place_containers([card, card], [LAB_REQUEST])
