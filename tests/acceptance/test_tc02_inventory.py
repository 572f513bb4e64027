"""TC-02: workers joined and the GPU inventory is advertised.

Through each tenant's own API: every node is ``Ready``; each pool has its nodes; each GPU node
carries a parseable ``hami.io/node-nvidia-register`` whose totals equal the pool's declared
per-node inventory (cards, MiB, compute units, slots), and advertises ``nvidia.com/gpu`` equal
to its slots.
"""

from __future__ import annotations

from typing import Any

import pytest

from tests.acceptance.hami_evidence import (
    HAMI_NODE_REGISTER,
    NVIDIA_GPU,
    EvidenceError,
    Verdict,
    inventory_of,
    judge_node_inventory,
    parse_node_register,
)
from tests.acceptance.kube import list_nodes, pool_nodes
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence
from tests.acceptance.stack import memory_tolerance, node_inventory

pytestmark = [pytest.mark.live, pytest.mark.timeout(300)]


@pytest.mark.tc("TC-02")
def test_workers_ready_and_inventory_advertised(live: LiveStack, evidence: Evidence) -> None:
    verdict = Verdict()
    tolerance = memory_tolerance(live.platform)
    seen: dict[str, Any] = {}
    for tenant in live.platform.tenants:
        nodes = list_nodes(live.tenant(tenant.name))
        tenant_facts: dict[str, Any] = {
            "nodes": {n.name: {"ready": n.ready, "capacity": dict(n.capacity)} for n in nodes},
            "pools": {},
        }
        seen[tenant.name] = tenant_facts
        for node in nodes:
            if not node.ready:
                verdict.problems.append(f"{tenant.name}: node {node.name} is not Ready")
        if tenant.worker_pools and not nodes:
            verdict.problems.append(f"{tenant.name}: no node joined")
        outputs = live.outputs.tenants[tenant.name]
        for pool in tenant.worker_pools:
            found, missing = pool_nodes(pool.name, outputs.pools[pool.name].nodes, nodes)
            for name in missing:
                verdict.problems.append(f"{tenant.name}/{pool.name}: node {name} did not join")
            if len(found) != pool.replicas:
                verdict.problems.append(
                    f"{tenant.name}/{pool.name}: {len(found)} nodes, {pool.replicas} declared"
                )
            expected = node_inventory(pool)
            pool_facts: dict[str, Any] = {"declaredPerNode": expected.as_dict(), "nodes": {}}
            tenant_facts["pools"][pool.name] = pool_facts
            for node in found:
                raw = node.annotations.get(HAMI_NODE_REGISTER)
                if raw is None:
                    verdict.problems.append(f"{node.name}: no {HAMI_NODE_REGISTER} annotation")
                    continue
                try:
                    cards = parse_node_register(raw)
                except EvidenceError as exc:
                    verdict.problems.append(f"{node.name}: {exc}")
                    pool_facts["nodes"][node.name] = {"unparseable": raw}
                    continue
                judged = judge_node_inventory(
                    node.name,
                    cards,
                    expected,
                    memory_tolerance=tolerance,
                    gpu_capacity=node.capacity.get(NVIDIA_GPU),
                )
                verdict.problems.extend(judged.problems)
                pool_facts["nodes"][node.name] = judged.facts
                totals = inventory_of(cards)
                evidence.summary(
                    f"{node.name}: {totals.cards} cards, {totals.memory_mib} MiB, "
                    f"{totals.core_units} units, {totals.slots} slots"
                )
    evidence.record("tenants", seen)
    assert verdict.ok, verdict.explain()
