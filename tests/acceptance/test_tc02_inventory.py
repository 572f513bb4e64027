"""TC-02: workers joined, and running components advertise the declared GPU inventory.

Through each tenant's own API, for every tenant:

* every node is ``Ready`` and each pool has its nodes;
* each GPU node's ``hami.io/node-nvidia-register`` parses in the format HAMi 2.10 reads and adds up
  to the pool's declared per-node inventory (cards, MiB, compute units, slots). In the lab the
  platform writes this annotation itself, so it proves only the format; the evidence comes next;
* what running components produce: ``nvidia.com/gpu`` capacity and **allocatable** = cards x slots
  (HAMi's scheduler drops a node whose allocatable is 0), and on mock pools the mock device
  plugin's ``nvidia.com/gpumem`` (MiB), ``nvidia.com/gpucores`` and ``gpumem-percentage`` as
  capacity and allocatable (the kubelet lists them only while the plugin serves them);
* HAMi's own view: its scheduler's metrics (read through the tenant API's service proxy) list
  exactly the node's registered cards with their memory and cores, adding up to the inventory.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.hami_evidence import (
    HAMI_NODE_REGISTER,
    NVIDIA_GPU,
    EvidenceError,
    RegisteredCard,
    Verdict,
    inventory_of,
    judge_node_inventory,
    judge_node_resources,
    parse_node_register,
)
from tests.acceptance.hami_metrics import HamiCard, hami_cards, judge_hami_view
from tests.acceptance.kube import (
    API_ERRORS,
    METRICS_ERRORS,
    describe_error,
    hami_samples,
    list_nodes,
    pool_nodes,
)
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import (
    HAMI_METRICS_PORT_NAME,
    HAMI_NAMESPACE,
    HAMI_SCHEDULER_SERVICE,
)
from tests.acceptance.report import Evidence
from tests.acceptance.stack import (
    memory_tolerance,
    node_inventory,
    node_resources,
    shares_with_hami,
    uses_mock,
)

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]

METRICS_WHERE = f"{HAMI_NAMESPACE}/{HAMI_SCHEDULER_SERVICE}:{HAMI_METRICS_PORT_NAME}"


def advertisers(mock: bool) -> dict[str, str]:
    """Who must advertise each resource, for the failure message."""
    gpu = "the lab's nvidia.com/gpu capacity" if mock else "HAMi's device plugin"
    names = {NVIDIA_GPU: gpu}
    if mock:
        for key in ("nvidia.com/gpumem", "nvidia.com/gpucores", "nvidia.com/gpumem-percentage"):
            names[key] = "the mock device plugin (is it running?)"
    return names


@pytest.mark.tc("TC-02")
def test_workers_ready_and_inventory_advertised(live: LiveStack, evidence: Evidence) -> None:
    verdict = Verdict()
    tolerance = memory_tolerance(live.platform)
    seen: dict[str, Any] = {}
    for tenant in live.platform.tenants:
        cluster = live.tenant(tenant.name)
        nodes = list_nodes(cluster)
        tenant_facts: dict[str, Any] = {
            "nodes": {
                n.name: {
                    "ready": n.ready,
                    "capacity": dict(n.capacity),
                    "allocatable": dict(n.allocatable),
                }
                for n in nodes
            },
            "pools": {},
        }
        seen[tenant.name] = tenant_facts
        for node in nodes:
            if not node.ready:
                verdict.problems.append(f"{tenant.name}: node {node.name} is not Ready")
        if tenant.worker_pools and not nodes:
            verdict.problems.append(f"{tenant.name}: no node joined")
        hami_view: dict[str, list[HamiCard]] | None = None
        if not shares_with_hami(tenant):
            tenant_facts["gpuSharing"] = "dra: cards published as ResourceSlices, not judged here"
        if tenant.worker_pools and shares_with_hami(tenant):
            try:
                hami_view = hami_cards(hami_samples(cluster))
            except METRICS_ERRORS as exc:
                why = describe_error(exc) if isinstance(exc, API_ERRORS) else str(exc)
                verdict.problems.append(
                    f"{tenant.name}: HAMi's scheduler metrics ({METRICS_WHERE}) unreadable "
                    f"through the tenant API: {why}"
                )
            tenant_facts["hamiNodes"] = sorted(hami_view or {})
        outputs = live.outputs.tenants[tenant.name]
        for pool in tenant.worker_pools:
            found, missing = pool_nodes(pool.name, outputs.pools[pool.name].nodes, nodes)
            for name in missing:
                verdict.problems.append(f"{tenant.name}/{pool.name}: node {name} did not join")
            if len(found) != pool.replicas:
                verdict.problems.append(
                    f"{tenant.name}/{pool.name}: {len(found)} nodes, {pool.replicas} declared"
                )
            if not shares_with_hami(tenant):
                continue
            expected = node_inventory(pool)
            resources = node_resources(live.platform, pool)
            mock = uses_mock(live.platform, pool)
            pool_facts: dict[str, Any] = {
                "declaredPerNode": expected.as_dict(),
                "deviceMode": "mock" if mock else "nvidia",
                "expectedResources": resources,
                "nodes": {},
            }
            tenant_facts["pools"][pool.name] = pool_facts
            for node in found:
                facts: dict[str, Any] = {}
                pool_facts["nodes"][node.name] = facts
                cards: list[RegisteredCard] = []
                raw = node.annotations.get(HAMI_NODE_REGISTER)
                if raw is None:
                    verdict.problems.append(f"{node.name}: no {HAMI_NODE_REGISTER} annotation")
                else:
                    try:
                        cards = parse_node_register(raw)
                    except EvidenceError as exc:
                        verdict.problems.append(f"{node.name}: {exc}")
                        facts["unparseable"] = raw
                    else:
                        judged = judge_node_inventory(
                            node.name, cards, expected, memory_tolerance=tolerance
                        )
                        verdict.problems.extend(judged.problems)
                        facts["register"] = judged.facts
                advertised = judge_node_resources(
                    node.name,
                    node.capacity,
                    node.allocatable,
                    resources,
                    advertised_by=advertisers(mock),
                )
                verdict.problems.extend(advertised.problems)
                facts["resources"] = advertised.facts
                if hami_view is not None:
                    hami = judge_hami_view(
                        node.name,
                        hami_view.get(node.name, []),
                        cards,
                        expected,
                        memory_tolerance=tolerance,
                    )
                    verdict.problems.extend(hami.problems)
                    facts["hami"] = hami.facts
                    totals = hami.facts.get("totals") or {}
                    evidence.summary(
                        f"{node.name}: HAMi has {totals.get('cards', 0)} cards, "
                        f"{totals.get('memoryMiB', 0):g} MiB, "
                        f"{totals.get('coreUnits', 0):g} units; "
                        f"allocatable gpu={node.allocatable.get(NVIDIA_GPU)}"
                        + (f", gpumem={node.allocatable.get('nvidia.com/gpumem')}" if mock else "")
                    )
                else:
                    totals_registered = inventory_of(cards)
                    evidence.summary(
                        f"{node.name}: registers {totals_registered.cards} cards, "
                        f"{totals_registered.memory_mib} MiB (HAMi's view unreadable)"
                    )
    evidence.record("tenants", seen)
    assert verdict.ok, verdict.explain()
