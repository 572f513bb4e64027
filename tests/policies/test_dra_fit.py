"""The DRA allocation model on hand-worked cases (issue 43, point 4): exclusive devices, the
scheduler's backtracking, consumable capacity and its rounding, distinct devices."""

from __future__ import annotations

from gpu_platform_policies.dra_fit import (
    Capacity,
    ClaimRequest,
    Device,
    allocate,
    consumed,
    fresh_usage,
)

A100_MIB = 81_920
L4_MIB = 24_576


def card(name: str, memory: int, shareable: bool = False) -> Device:
    return Device(name, Capacity(memory), Capacity(100), shareable=shareable)


def test_a_device_that_is_not_shareable_goes_to_one_claim() -> None:
    whole = ClaimRequest(count=1)
    assert allocate([card("a", A100_MIB)], [whole]) == (("a",),)
    assert allocate([card("a", A100_MIB)], [whole, whole]) is None
    assert allocate([card("a", A100_MIB), card("b", A100_MIB)], [whole, whole]) == (("a",), ("b",))


def test_the_scheduler_backtracks_across_claims() -> None:
    # The small claim would take the first (large) card; only backtracking puts it on the L4.
    small = ClaimRequest(count=1, min_memory_mib=10_000)
    large = ClaimRequest(count=1, min_memory_mib=70_000)
    devices = [card("a100", A100_MIB), card("l4", L4_MIB)]
    assert allocate(devices, [small, large]) == (("l4",), ("a100",))


def test_a_selector_on_memory_skips_small_cards() -> None:
    assert allocate([card("l4", L4_MIB)], [ClaimRequest(count=1, min_memory_mib=30_000)]) is None


def test_shared_capacity_adds_up_to_the_card() -> None:
    devices = [card("a", A100_MIB, shareable=True)]
    share = ClaimRequest(count=1, memory_mib=20_000, compute=30)
    assert allocate(devices, [share, share, share]) == (("a",), ("a",), ("a",))
    # Four take 120 compute units of 100.
    assert allocate(devices, [share] * 4) is None


def test_a_request_naming_no_capacity_consumes_all_of_it() -> None:
    devices = [card("a", A100_MIB, shareable=True)]
    share = ClaimRequest(count=1, memory_mib=1, compute=1)
    assert allocate(devices, [ClaimRequest(count=1), share]) is None


def test_usage_already_allocated_counts() -> None:
    devices = [card("a", A100_MIB, shareable=True)]
    used = fresh_usage().book(devices[0], (70_000, 10))
    assert allocate(devices, [ClaimRequest(count=1, memory_mib=11_920, compute=90)], used)
    assert allocate(devices, [ClaimRequest(count=1, memory_mib=11_921, compute=1)], used) is None


def test_without_distinct_one_request_may_take_one_card_twice() -> None:
    devices = [card("a", A100_MIB, shareable=True)]
    two = ClaimRequest(count=2, memory_mib=1_000, compute=10)
    assert allocate(devices, [two]) == (("a", "a"),)
    assert allocate(devices, [ClaimRequest(2, 1_000, 10, distinct=True)]) is None


def test_a_range_policy_rounds_up_to_its_step() -> None:
    # dra-example-driver v0.4.0 with gpuAllowMultipleAllocations: min 1Gi, step 1Gi, default
    # and max the card (internal/profiles/gpu/gpu.go memoryCapacity).
    gib = 1024
    memory = Capacity(A100_MIB, min=gib, step=gib, max=A100_MIB, default=A100_MIB)
    assert consumed(20_000, memory) == 20_480
    assert consumed(100, memory) == gib
    assert consumed(None, memory) == A100_MIB
    assert consumed(A100_MIB + 1, memory) is None
    # Three pods of 27,000 MiB fit HAMi's 81,920 MiB but not 3 x 27 GiB.
    device = Device("a", memory, Capacity(100), shareable=True)
    share = ClaimRequest(count=1, memory_mib=27_000, compute=10)
    assert allocate([device], [share] * 3) is None
    assert allocate([card("a", A100_MIB, shareable=True)], [share] * 3) is not None
