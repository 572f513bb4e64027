"""hami-capacity-fit: the lab report's scheduling outcomes, found at preview.

Inventory numbers come from the lab report (tenant-a: one A100 80 GB = 81,920 MiB, 100 units,
10 slots; tenant-b: two L4 24 GB = 24,576 MiB each); the expected outcomes are worked out by hand
from HAMi's rules, never computed by the code under test.
"""

from __future__ import annotations

import json
from typing import Any

import pytest
from gpu_platform_policies.capacity import parse_inventory
from gpu_platform_policies.pack import validate_capacity
from pulumi_policy import PolicyResource

from tests.policies.builders import (
    A100,
    CONFIG_MAP,
    DEPLOYMENT,
    GPU_TENANT,
    L4,
    RELEASE,
    U,
    container,
    deployment,
    gpu,
    gpu_deployment,
    hami_release,
    hami_values,
    inventory,
    pod_spec,
    policy_resource,
    run_stack,
    urn,
)


def a100_inventory() -> PolicyResource:
    return policy_resource(
        CONFIG_MAP, "tenant-a-a100-inventory", inventory("tenant-a", "a100", [A100])
    )


def l4_inventory(replicas: int = 1) -> PolicyResource:
    return policy_resource(
        CONFIG_MAP, "tenant-b-l4-inventory", inventory("tenant-b", "l4", [L4], replicas=replicas)
    )


def workload(name: str, props: dict[str, Any], **kwargs: Any) -> PolicyResource:
    return policy_resource(DEPLOYMENT, name, props, **kwargs)


def check(*resources: PolicyResource) -> list[tuple[str, str | None]]:
    return run_stack(validate_capacity, resources)


# ------------------------------------------------------------------------- the lab report


def test_three_pods_of_20000_mib_and_30_percent_share_one_a100() -> None:
    assert check(a100_inventory(), workload("sample", gpu_deployment("sample", replicas=3.0))) == []


def test_a_fourth_pod_stays_pending_with_card_insufficient_core() -> None:
    pods = workload("sample", gpu_deployment("sample", replicas=4.0))
    found = check(a100_inventory(), pods)
    assert len(found) == 1
    message, where = found[0]
    assert where == pods.urn
    assert "replica 4 of 4 would stay Pending: CardInsufficientCore" in message
    # 3 x 30 % booked: 10 % of the card's compute is left for a 30 % request.
    assert "30 % cores requested, at most 10 % left on a card" in message
    assert '"1/1 CardInsufficientCore"' in message


def test_the_fourth_of_four_separate_pods_is_the_one_reported() -> None:
    resources = [workload(f"p{i}", gpu_deployment(f"p{i}")) for i in range(4)]
    found = check(a100_inventory(), *resources)
    assert [where for _m, where in found] == [resources[3].urn]
    assert "CardInsufficientCore" in found[0][0]


def test_90000_mib_never_fits_an_a100() -> None:
    big = workload("big", gpu_deployment("big", memory=90000.0))
    found = check(a100_inventory(), big)
    assert len(found) == 1
    message, where = found[0]
    assert where == big.urn
    assert (
        "would stay Pending: CardInsufficientMemory — 90000 MiB requested, largest card 81920 MiB"
        in message
    )
    assert "A100-80GB" in message  # names the tenant's cards in the remedy


def test_memory_still_fitting_does_not_hide_the_core_shortage() -> None:
    # 4 x 20,000 MiB = 80,000 <= 81,920 MiB: memory fits, so HAMi's reason is the cores.
    found = check(a100_inventory(), workload("sample", gpu_deployment("sample", replicas=4.0)))
    assert "CardInsufficientMemory" not in found[0][0]


# ---------------------------------------------------------------------- tenant-b, two L4s


def tenant_b(name: str, **kwargs: Any) -> PolicyResource:
    return workload(name, gpu_deployment(name, tenant="tenant-b", **kwargs))


def test_tenant_b_fits_one_pod_per_l4_by_memory() -> None:
    assert check(l4_inventory(), tenant_b("s", replicas=2.0)) == []
    found = check(l4_inventory(), tenant_b("s", replicas=3.0))
    assert len(found) == 1
    # Each L4 holds 24,576 MiB: after one 20,000 MiB pod per card, 4,576 MiB are left.
    assert "replica 3 of 3 would stay Pending: CardInsufficientMemory" in found[0][0]
    assert "at most 4576 MiB left on a card" in found[0][0]


def test_a_pod_larger_than_an_l4_names_the_largest_card() -> None:
    found = check(l4_inventory(), tenant_b("s", memory=30000.0))
    assert "CardInsufficientMemory — 30000 MiB requested, largest card 24576 MiB" in found[0][0]


def test_more_cards_per_container_than_a_node_has() -> None:
    props = deployment(
        "wide", pod_spec([container(gpu(cards=3.0, memory=1000.0))]), tenant="tenant-b"
    )
    found = check(l4_inventory(), workload("wide", props))
    assert len(found) == 1
    assert (
        "NodeInsufficientDevice — 3 cards requested per container, largest node has 2"
        in found[0][0]
    )
    two = deployment("two", pod_spec([container(gpu(cards=2.0, memory=1000.0))]), tenant="tenant-b")
    assert check(l4_inventory(), workload("two", two)) == []


def test_a_second_node_in_the_pool_takes_the_next_pods() -> None:
    # Two nodes, two L4 each: four 20,000 MiB pods fit, a fifth does not.
    assert check(l4_inventory(replicas=2), tenant_b("s", replicas=4.0)) == []
    assert len(check(l4_inventory(replicas=2), tenant_b("s", replicas=5.0))) == 1


def test_tenants_do_not_share_cards() -> None:
    # tenant-a's A100 is full of tenant-a pods; tenant-b still has its own L4s.
    resources = [
        a100_inventory(),
        l4_inventory(),
        workload("a", gpu_deployment("a", replicas=3.0)),
        tenant_b("b", replicas=2.0),
    ]
    assert check(*resources) == []


def test_memory_percentage_requests_are_placed() -> None:
    limits = {
        "nvidia.com/gpu": 1.0,
        "nvidia.com/gpumem-percentage": 60.0,
        "nvidia.com/gpucores": 10.0,
    }
    props = deployment("pct", pod_spec([container(limits)]), replicas=2.0)
    found = check(a100_inventory(), workload("pct", props))
    # 60 % of 81,920 = 49,152 MiB; twice that is more than one card holds.
    assert len(found) == 1
    assert "replica 2 of 2 would stay Pending: CardInsufficientMemory" in found[0][0]


def init_pod(replicas: float) -> PolicyResource:
    spec = pod_spec(
        [container(gpu(memory=20000.0, cores=30.0))],
        init=[container(gpu(memory=20000.0, cores=30.0), name="warm")],
    )
    return workload("w", deployment("w", spec, replicas=replicas))


def test_init_containers_are_fitted_on_their_own_and_booked_with_the_pod() -> None:
    # Pod 1 books init + app: 40,000 MiB and 60 % of the A100. Pod 2: its init container and
    # its app container each fit next to that (HAMi checks them on separate copies), then
    # 80,000 MiB are booked, so pod 3 (memory is checked before cores) finds 1,920 MiB.
    # Were init containers not booked, pod 3 would fit (60,000 MiB, 90 %).
    assert check(a100_inventory(), init_pod(2.0)) == []
    found = check(a100_inventory(), init_pod(3.0))
    assert len(found) == 1
    assert "replica 3 of 3 would stay Pending: CardInsufficientMemory" in found[0][0]
    assert "at most 1920 MiB left on a card" in found[0][0]


def test_an_init_container_larger_than_every_card_is_reported() -> None:
    spec = pod_spec(
        [container(gpu(memory=1000.0, cores=10.0))],
        init=[container(gpu(memory=90000.0, cores=10.0), name="warm")],
    )
    found = check(a100_inventory(), workload("w", deployment("w", spec)))
    assert len(found) == 1
    assert "CardInsufficientMemory — 90000 MiB requested, largest card 81920 MiB" in found[0][0]


def test_pool_node_selector_limits_the_nodes() -> None:
    small = policy_resource(
        CONFIG_MAP,
        "tenant-a-t4",
        inventory("tenant-a", "t4", [{"model": "T4", "product": "NVIDIA-Tesla-T4",
                                      "memoryMiB": 16384, "coreUnits": 100, "count": 1}]),
    )  # fmt: skip
    spec = pod_spec([container(gpu(memory=20000.0))], nodeSelector={"gpu-platform.io/pool": "t4"})
    found = check(a100_inventory(), small, workload("w", deployment("w", spec)))
    assert len(found) == 1
    assert "largest card 16384 MiB" in found[0][0]
    spec["nodeSelector"] = {"gpu-platform.io/pool": "a100"}
    assert check(a100_inventory(), small, workload("w", deployment("w", spec))) == []
    spec["nodeSelector"] = {"gpu-platform.io/pool": "h100"}
    found = check(a100_inventory(), small, workload("w", deployment("w", spec)))
    assert len(found) == 1
    assert "asks for pool h100" in found[0][0]


def test_daemonsets_get_one_pod_per_node() -> None:
    spec = pod_spec([container(gpu(memory=20000.0, cores=30.0))])
    daemon = policy_resource(
        "kubernetes:apps/v1:DaemonSet",
        "d",
        {"metadata": {"name": "d", "labels": {"gpu-platform.io/tenant": "tenant-b"}},
         "spec": {"template": {"spec": spec}}},
    )  # fmt: skip
    # Two nodes with two L4 each (24,576 MiB): the DaemonSet puts a 20,000 MiB pod on one card
    # of each node; a Deployment's first two replicas take the other card of each node, and a
    # third finds no card with 20,000 MiB left.
    assert check(l4_inventory(replicas=2), daemon) == []
    assert check(l4_inventory(replicas=2), daemon, tenant_b("s", replicas=2.0)) == []
    found = check(l4_inventory(replicas=2), daemon, tenant_b("s", replicas=3.0))
    assert len(found) == 1
    assert "replica 3 of 3" in found[0][0]


def test_the_releases_gpu_policy_is_used() -> None:
    # binpack puts both 10,000 MiB pods on one L4, leaving the other free for a 24,000 MiB pod;
    # spread (the default) would put them on different cards and the big one would not fit.
    release = policy_resource(
        RELEASE,
        "tenant-b-hami",
        hami_release({"scheduler": {"defaultSchedulerPolicy": {"gpuSchedulerPolicy": "binpack"}}}),
        provider_name="tenant-b-provider",
    )
    pods = [
        tenant_b("small", replicas=2.0, memory=10000.0, cores=10.0),
        tenant_b("big", memory=24000.0),
    ]
    assert len(check(l4_inventory(), *pods)) == 1
    assert check(l4_inventory(), release, *pods) == []


# ------------------------------------------------------------------------- tenant grouping


def test_tenant_from_the_gpu_tenant_ancestor() -> None:
    tenant = policy_resource(GPU_TENANT, "tenant-a", {})
    pool = policy_resource("gpu-platform:index:GpuWorkerPool", "tenant-a-a100", {}, parent=tenant)
    unlabelled = inventory("tenant-a", "a100", [A100])
    del unlabelled["metadata"]["labels"]["gpu-platform.io/tenant"]
    cm = policy_resource(CONFIG_MAP, "inv", unlabelled, parent=pool)
    pods = workload("w", gpu_deployment("w", replicas=4.0, tenant=None), parent=tenant)
    found = check(tenant, pool, cm, pods)
    assert len(found) == 1
    assert "(tenant tenant-a)" in found[0][0]


def test_tenant_from_a_parent_urn_when_the_component_is_not_in_the_list() -> None:
    parent = urn(GPU_TENANT, "tenant-a")
    pods = workload("w", gpu_deployment("w", memory=90000.0, tenant=None), parent_urn=parent)
    found = check(a100_inventory(), pods)
    assert len(found) == 1
    assert "(tenant tenant-a)" in found[0][0]


def test_tenant_from_the_provider_name() -> None:
    pods = workload(
        "w", gpu_deployment("w", memory=90000.0, tenant=None), provider_name="tenant-a-provider"
    )
    found = check(a100_inventory(), pods)
    assert len(found) == 1
    assert "CardInsufficientMemory" in found[0][0]


def test_gpu_workload_of_no_known_tenant_is_a_violation() -> None:
    found = check(a100_inventory(), workload("w", gpu_deployment("w", tenant=None)))
    assert len(found) == 1
    assert "belongs to no tenant" in found[0][0]


def test_gpu_workload_of_a_tenant_without_cards_is_a_violation() -> None:
    found = check(a100_inventory(), workload("w", gpu_deployment("w", tenant="tenant-c")))
    assert len(found) == 1
    assert "tenant tenant-c declares no GPU cards" in found[0][0]


def test_no_declared_inventory_anywhere_means_nothing_to_check() -> None:
    assert check(workload("w", gpu_deployment("w", memory=90000.0))) == []


def test_workloads_without_gpus_are_ignored() -> None:
    plain = deployment("web", pod_spec([container({"cpu": "1"})]), replicas=50.0)
    assert check(a100_inventory(), workload("web", plain)) == []


# ------------------------------------------------------------------------------ inventories


def test_invalid_inventory_is_a_violation_on_the_config_map() -> None:
    bad = inventory("tenant-a", "a100", [A100])
    bad["data"]["cards.json"] = "{not json"
    cm = policy_resource(CONFIG_MAP, "inv", bad)
    found = check(cm)
    assert len(found) == 1
    assert found[0][1] == cm.urn
    assert "not JSON" in found[0][0]


def test_inventory_card_without_nvidia_type_is_a_violation() -> None:
    card = {**A100, "product": "A100-SXM4"}
    found = check(policy_resource(CONFIG_MAP, "inv", inventory("tenant-a", "a100", [card])))
    assert len(found) == 1
    assert "does not contain NVIDIA" in found[0][0]


def test_inventory_numbers_may_be_floats() -> None:
    document = {"tenant": "t", "pool": "p", "replicas": 2.0, "slotsPerCard": 10.0,
                "cards": [{**A100, "memoryMiB": 81920.0, "count": 1.0}]}  # fmt: skip
    pool = parse_inventory(json.dumps(document))
    assert (pool.replicas, pool.slots_per_card, pool.cards[0].memory_mib) == (2, 10, 81920)


@pytest.mark.parametrize(
    ("field", "value"),
    [("replicas", -1), ("slotsPerCard", 0), ("cards", []), ("tenant", ""), ("pool", 3)],
)
def test_inventory_fields_are_validated(field: str, value: Any) -> None:
    document = {"tenant": "t", "pool": "p", "replicas": 1, "slotsPerCard": 10, "cards": [A100]}
    document[field] = value
    with pytest.raises(ValueError, match=field):
        parse_inventory(json.dumps(document))


# -------------------------------------------------------------------------------- unknowns


def test_unknown_inventory_is_not_judged() -> None:
    unknown = inventory("tenant-a", "a100", [A100])
    unknown["data"]["cards.json"] = U
    cm = policy_resource(CONFIG_MAP, "inv", unknown)
    assert check(cm, workload("big", gpu_deployment("big", memory=90000.0))) == []


def test_unknown_request_is_not_judged() -> None:
    assert check(a100_inventory(), workload("w", gpu_deployment("w", memory=U))) == []


def test_unknown_replicas_skip_only_the_together_check() -> None:
    assert check(a100_inventory(), workload("w", gpu_deployment("w", replicas=U))) == []
    found = check(a100_inventory(), workload("w", gpu_deployment("w", replicas=U, memory=90000.0)))
    assert len(found) == 1
    assert "CardInsufficientMemory" in found[0][0]


def test_unknown_tenant_label_is_not_judged() -> None:
    props = gpu_deployment("w", memory=90000.0)
    props["metadata"]["labels"]["gpu-platform.io/tenant"] = U
    assert check(a100_inventory(), workload("w", props)) == []


def test_hami_values_of_the_release_do_not_need_to_be_known() -> None:
    release = policy_resource(
        RELEASE, "h", hami_release({"scheduler": U}), provider_name="tenant-a-provider"
    )
    found = check(a100_inventory(), release, workload("w", gpu_deployment("w", replicas=4.0)))
    assert len(found) == 1


def test_a_hami_release_with_default_values_changes_nothing() -> None:
    release = policy_resource(
        RELEASE, "h", hami_release(hami_values()), provider_name="tenant-a-provider"
    )
    assert check(a100_inventory(), release, workload("w", gpu_deployment("w", replicas=3.0))) == []
