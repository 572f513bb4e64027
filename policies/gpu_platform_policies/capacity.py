"""hami-capacity-fit: GPU workloads fit the cards their tenant declares, alone and together.

Why: a pod whose request fits no card stays Pending forever at runtime, and the scheduler's reason
only shows up as an event (the lab report's ``CardInsufficientMemory`` and
``CardInsufficientCore``). With the cards each tenant declares (one ConfigMap per worker pool,
labelled ``gpu-platform.io/declared-inventory: "true"``, key ``cards.json``) and the faithful model
of HAMi's fit in :mod:`gpu_platform_policies.hami_fit`, the same verdict is reached at preview.

Two checks per tenant:

* **alone**: every GPU pod shape fits at least one declared node while all cards are free;
* **together**: all replicas of all the tenant's GPU workloads, placed one after another the way
  HAMi does (card order by the GPU policy, node choice by the node policy, each pick booked before
  the next pod), all find cards. Only workloads that fit alone are reported here.

Init containers are checked on their own copy of the node and app containers one after another (as
HAMi's ``scoreNode`` does); a placed pod books the picks of all its containers, init containers
included (HAMi counts every container's devices of a scheduled pod). DaemonSets get one pod per
declared node; workload patches (``...Patch``) are not counted (they modify
workloads declared elsewhere). A pod whose ``nodeSelector`` names a pool (``gpu-platform.io/pool``)
is only placed on that pool's nodes.

Unknowns (preview): a tenant whose inventory, or one of whose GPU workloads, is not known yet is not
judged where that could change the verdict.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, Final

from gpu_platform_policies.common import Violation
from gpu_platform_policies.hami_fit import (
    CARD_COMPUTE_UNITS_EXHAUSTED,
    CARD_CORDONED,
    CARD_INSUFFICIENT_CORE,
    CARD_INSUFFICIENT_MEMORY,
    CARD_NOT_HEALTH,
    CARD_TIME_SLICING_EXHAUSTED,
    CARD_TYPE_MISMATCH,
    CARD_UUID_MISMATCH,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    GPU_SCHEDULER_POLICY,
    MEM_PERCENTAGE_UNSET,
    NODE_INSUFFICIENT_DEVICE,
    NUMA_NOT_FIT,
    Card,
    ContainerRequest,
    NodeFitResult,
    NodeSpec,
    PodContainer,
    admit_container,
    declared_cards,
    fit_pod_on_node,
    generate_resource_request,
)
from gpu_platform_policies.kube import (
    WORKLOAD_TYPES,
    PodSpecRef,
    containers,
    is_hami_release,
    may_hold_pod_specs,
    pod_specs,
    release_values,
)
from gpu_platform_policies.labels import DECLARED_INVENTORY_LABEL, INVENTORY_KEY, POOL_LABEL
from gpu_platform_policies.model import Resource, Stack, Tenant
from gpu_platform_policies.props import (
    UNKNOWN,
    Unknown,
    contains_unknown,
    get,
    is_unknown,
    quantity_text,
)

CONFIG_MAP_TYPE: Final = "kubernetes:core/v1:ConfigMap"
NODE_SCHEDULER_POLICY: Final = "hami.io/node-scheduler-policy"
DEFAULT_GPU_POLICY: Final = "spread"  # HAMi chart scheduler.defaultSchedulerPolicy
DEFAULT_NODE_POLICY: Final = "binpack"
_REASON_ENTRY: Final = re.compile(r"(\d+)/(\d+) ([A-Za-z]+)")
# HAMi's card checks in the order Fit runs them (platform.md §3): a tie between reasons goes to
# the earlier one.
_CHECK_ORDER: Final = (
    CARD_NOT_HEALTH,
    CARD_CORDONED,
    CARD_TYPE_MISMATCH,
    NUMA_NOT_FIT,
    CARD_UUID_MISMATCH,
    CARD_TIME_SLICING_EXHAUSTED,
    EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT,
    CARD_INSUFFICIENT_MEMORY,
    CARD_INSUFFICIENT_CORE,
    CARD_COMPUTE_UNITS_EXHAUSTED,
    NODE_INSUFFICIENT_DEVICE,
)


# ----------------------------------------------------------------------------- declared cards


@dataclass(frozen=True)
class CardKind:
    """Cards of one model on each node of a pool."""

    model: str
    product: str
    memory_mib: int
    core_units: int
    count: int


@dataclass(frozen=True)
class PoolInventory:
    """One worker pool's declared cards: ``replicas`` nodes, each with ``cards``."""

    tenant: str
    pool: str
    replicas: int
    slots_per_card: int
    cards: tuple[CardKind, ...]
    urn: str = ""


def _positive(data: Mapping[str, Any], key: str, where: str, minimum: int = 1) -> int:
    value = data.get(key)
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise ValueError(f"{where}{key} must be a number, got {value!r}")
    if float(value) != int(value) or int(value) < minimum:
        raise ValueError(f"{where}{key} must be a whole number >= {minimum}, got {value!r}")
    return int(value)


def parse_inventory(text: str, urn: str = "") -> PoolInventory:
    """Parse a ``cards.json`` document; ValueError names the bad field."""
    try:
        data = json.loads(text)
    except json.JSONDecodeError as exc:
        raise ValueError(f"{INVENTORY_KEY} is not JSON ({exc})") from None
    if not isinstance(data, dict):
        raise ValueError(f"{INVENTORY_KEY} must be a JSON object")
    tenant, pool = data.get("tenant"), data.get("pool")
    if not isinstance(tenant, str) or not tenant:
        raise ValueError(f"{INVENTORY_KEY}: tenant must be a non-empty string")
    if not isinstance(pool, str) or not pool:
        raise ValueError(f"{INVENTORY_KEY}: pool must be a non-empty string")
    cards = data.get("cards")
    if not isinstance(cards, list) or not cards:
        raise ValueError(f"{INVENTORY_KEY}: cards must be a non-empty list")
    kinds: list[CardKind] = []
    for index, card in enumerate(cards):
        where = f"{INVENTORY_KEY}: cards[{index}]."
        if not isinstance(card, dict):
            raise ValueError(f"{where[:-1]} must be an object")
        model = card.get("model")
        product = card.get("product") or model
        if not isinstance(product, str) or not product:
            raise ValueError(f"{where}model or product must be a string")
        if "NVIDIA" not in product.upper():
            raise ValueError(
                f"{where}product {product!r} does not contain NVIDIA; HAMi only schedules "
                "cards whose registered type contains NVIDIA"
            )
        kinds.append(
            CardKind(
                model=model if isinstance(model, str) and model else product,
                product=product,
                memory_mib=_positive(card, "memoryMiB", where),
                core_units=_positive(card, "coreUnits", where),
                count=_positive(card, "count", where),
            )
        )
    return PoolInventory(
        tenant=tenant,
        pool=pool,
        replicas=_positive(data, "replicas", f"{INVENTORY_KEY}: ", minimum=0),
        slots_per_card=_positive(data, "slotsPerCard", f"{INVENTORY_KEY}: "),
        cards=tuple(kinds),
        urn=urn,
    )


@dataclass(frozen=True)
class Node:
    """One declared node: its pool and its cards (usage booked on them)."""

    name: str
    pool: str
    cards: tuple[Card, ...]


def build_nodes(pools: Sequence[PoolInventory]) -> list[Node]:
    """Every node the pools declare, cards fresh, ids unique within the tenant."""
    nodes: list[Node] = []
    for pool in pools:
        for replica in range(pool.replicas):
            node_name = f"{pool.pool}-{replica}"
            cards: list[Card] = []
            for kind_index, kind in enumerate(pool.cards):
                made = declared_cards(
                    kind.memory_mib,
                    kind.core_units,
                    pool.slots_per_card,
                    kind.count,
                    kind.product,
                    f"{pool.tenant}/{node_name}/{kind_index}",
                )
                cards.extend(replace(card, index=len(cards) + i) for i, card in enumerate(made))
            nodes.append(Node(node_name, pool.pool, tuple(cards)))
    return nodes


def is_inventory(resource: Resource) -> bool:
    if resource.type != CONFIG_MAP_TYPE:
        return False
    value = resource.labels.get(DECLARED_INVENTORY_LABEL)
    return value is UNKNOWN or value == "true"


# ---------------------------------------------------------------------------------- GPU pods


@dataclass(frozen=True)
class GpuPod:
    """A workload's pod as HAMi sees it after its webhook."""

    resource: Resource
    containers: tuple[PodContainer, ...]
    annotations: Mapping[str, str]
    pool: str | None  # nodeSelector on gpu-platform.io/pool
    count: Any  # replicas running at once; None = one per node (DaemonSet); UNKNOWN
    where: str = ""  # the pod spec's path in the resource

    def describe(self) -> str:
        """The resource, and where in it the pod spec is when that is not the kind's only one."""
        text = self.resource.describe()
        if self.resource.type in WORKLOAD_TYPES or not self.where:
            return text
        return f"{text} ({self.where})"

    def gpu_containers(self) -> list[PodContainer]:
        return [c for c in self.containers if c.requests]


class _UnknownPodError(Exception):
    """The pod's GPU requests depend on values unknown during preview."""


def _string_map(value: Any) -> dict[str, str]:
    if value is UNKNOWN or contains_unknown(value):
        raise _UnknownPodError
    result: dict[str, str] = {}
    if isinstance(value, dict):
        for key, item in value.items():
            text = quantity_text(item)
            if text is not None:
                result[key] = text
    return result


def gpu_pod(resource: Resource, ref: PodSpecRef | None = None) -> GpuPod | Unknown | None:
    """One pod spec of a registered object (``ref``; default: its first) with its HAMi requests;
    None when it asks HAMi for nothing (or HAMi would reject or ignore it: hami-gpu-requests
    reports those), :data:`UNKNOWN` when unknown."""
    if ref is None:
        refs = pod_specs(resource)
        if not refs:
            return None
        ref = refs[0]
    spec = ref.spec
    if is_unknown(spec):
        return UNKNOWN
    if not isinstance(spec, dict):
        return None
    built: list[PodContainer] = []
    try:
        for container_ref in containers(spec):
            if container_ref.container is UNKNOWN:
                raise _UnknownPodError
            resources = get(container_ref.container, "resources")
            if resources is UNKNOWN:
                raise _UnknownPodError
            limits = _string_map(get(resources, "limits"))
            requests = _string_map(get(resources, "requests"))
            admitted = admit_container(limits, requests)
            if admitted.rejected:
                return None
            request = generate_resource_request(admitted.limits, admitted.requests)
            built.append(
                PodContainer(requests=(request,) if request else (), init=container_ref.init)
            )
        annotations = get(ref.metadata, "annotations")
        if contains_unknown(annotations):
            raise _UnknownPodError
        selector = get(spec, "nodeSelector")
        if contains_unknown(selector):
            raise _UnknownPodError
    except _UnknownPodError:
        return UNKNOWN
    if not any(c.requests for c in built):
        return None
    pool = get(selector, POOL_LABEL)
    return GpuPod(
        resource=resource,
        containers=tuple(built),
        annotations={k: str(v) for k, v in (annotations or {}).items()},
        pool=pool if isinstance(pool, str) else None,
        count=ref.count,
        where=ref.where,
    )


def gpu_pods(stack: Stack) -> list[tuple[Resource, GpuPod | Unknown]]:
    """Every GPU pod spec of every registered object but patches (they modify objects declared
    elsewhere), with its resource; :data:`UNKNOWN` for one not known yet."""
    found: list[tuple[Resource, GpuPod | Unknown]] = []
    for resource in stack:
        if not may_hold_pod_specs(resource.type, include_patches=False):
            continue
        for ref in pod_specs(resource):
            pod = gpu_pod(resource, ref)
            if pod is not None:
                found.append((resource, pod))
    return found


# ------------------------------------------------------------------------------------ placing


@dataclass(frozen=True)
class Policies:
    """HAMi's scheduling policies for one tenant (chart defaults unless its release says so)."""

    gpu: str = DEFAULT_GPU_POLICY
    node: str = DEFAULT_NODE_POLICY

    def for_pod(self, pod: GpuPod) -> Policies:
        return Policies(
            gpu=pod.annotations.get(GPU_SCHEDULER_POLICY, self.gpu),
            node=pod.annotations.get(NODE_SCHEDULER_POLICY, self.node),
        )


@dataclass(frozen=True)
class Attempt:
    """A pod tried on some nodes: the chosen node (index) or, on failure, each node's result."""

    node: int | None
    results: tuple[tuple[Node, NodeFitResult], ...]


def try_place(nodes: Sequence[Node], pod: GpuPod, policies: Policies) -> Attempt:
    """Where HAMi would put ``pod`` among ``nodes`` (None: nowhere) - no booking."""
    results: list[tuple[Node, NodeFitResult]] = []
    best: int | None = None
    best_score = 0.0
    for index, node in enumerate(nodes):
        if pod.pool is not None and node.pool != pod.pool:
            continue
        spec = NodeSpec(cards=node.cards, gpu_policy=policies.gpu)
        result = fit_pod_on_node(spec, pod.containers, pod.annotations)
        results.append((node, result))
        if not result.fit:
            continue
        if best is None:
            best = index
            best_score = result.node_score
        elif (policies.node == "spread" and result.node_score < best_score) or (
            policies.node != "spread" and result.node_score > best_score
        ):
            best, best_score = index, result.node_score
    return Attempt(best, tuple(results))


def book(node: Node, result: NodeFitResult) -> Node:
    """``node`` after a pod placed on it: the picks of every container booked (HAMi's usage of a
    scheduled pod counts all devices in its allocation annotation, init containers included)."""
    cards = {card.id: card for card in node.cards}
    for picks in result.containers:
        for allocation in picks:
            cards[allocation.id] = cards[allocation.id].book(allocation)
    return replace(node, cards=tuple(cards[card.id] for card in node.cards))


# ---------------------------------------------------------------------------------- messages


def _reason_names(reason: str) -> Counter[str]:
    counts: Counter[str] = Counter()
    entries = _REASON_ENTRY.findall(reason)
    for count, _total, name in entries:
        counts[name] += int(count)
    if not entries and reason:
        counts[reason.strip()] += 1
    return counts


def _primary_reason(results: Sequence[tuple[Node, NodeFitResult]]) -> str:
    counts: Counter[str] = Counter()
    for _node, result in results:
        counts.update(_reason_names(result.reason))
    if not counts:
        return "no declared node"

    def rank(item: tuple[str, int]) -> tuple[int, int]:
        name, count = item
        order = _CHECK_ORDER.index(name) if name in _CHECK_ORDER else len(_CHECK_ORDER)
        return (-count, order)

    return sorted(counts.items(), key=rank)[0][0]


def _failing_request(pod: GpuPod, result: NodeFitResult | None) -> ContainerRequest | None:
    """The request of the container HAMi stopped at (the first without picks)."""
    if result is not None and len(result.containers) < len(pod.containers):
        requests = pod.containers[len(result.containers)].requests
        if requests:
            return requests[0]
    gpu = pod.gpu_containers()
    return gpu[0].requests[0] if gpu else None


def _memory_text(request: ContainerRequest) -> str:
    if request.memreq > 0:
        return f"{request.memreq} MiB requested"
    if request.mempercentagereq != MEM_PERCENTAGE_UNSET:
        return f"{request.mempercentagereq} % of a card's memory requested"
    return "memory requested"


def explain(pod: GpuPod, results: Sequence[tuple[Node, NodeFitResult]]) -> str:
    """``CardInsufficientMemory — 90000 MiB requested, largest card 81920 MiB (HAMi: "...")``,
    from the nodes HAMi tried (``results``)."""
    if not results:
        return (
            f"its nodeSelector asks for pool {pod.pool}, and the tenant declares no cards in a "
            "pool of that name"
        )
    nodes = [node for node, _result in results]
    name = _primary_reason(results)
    failing = next((r for _n, r in results if name in r.reason), None)
    request = _failing_request(pod, failing)
    cards = [card for node in nodes for card in node.cards]
    used = any(card.used for card in cards)
    detail = ""
    if request is not None and cards:
        if name == CARD_INSUFFICIENT_MEMORY:
            if used:
                free = max(card.totalmem - card.usedmem for card in cards)
                detail = f"{_memory_text(request)}, at most {free} MiB left on a card"
            else:
                largest = max(c.totalmem for c in cards)
                detail = f"{_memory_text(request)}, largest card {largest} MiB"
        elif name == CARD_INSUFFICIENT_CORE:
            if used:
                free = max(card.totalcore - card.usedcores for card in cards)
                detail = f"{request.coresreq} % cores requested, at most {free} % left on a card"
            else:
                detail = (
                    f"{request.coresreq} % cores requested, largest card "
                    f"{max(c.totalcore for c in cards)} %"
                )
        elif name == CARD_TIME_SLICING_EXHAUSTED:
            detail = f"every card's {max(c.count for c in cards)} sharing slots are taken"
        elif name == NODE_INSUFFICIENT_DEVICE:
            widest = max(len(node.cards) for node in nodes)
            detail = f"{request.nums} cards requested per container, largest node has {widest}"
        elif name == CARD_TYPE_MISMATCH:
            detail = "no declared card has the type the pod asks for (nvidia.com/use-gputype)"
        elif name == CARD_UUID_MISMATCH:
            detail = "no declared card has the UUID the pod asks for (nvidia.com/use-gpuuuid)"
        elif name == EXCLUSIVE_DEVICE_ALLOCATE_CONFLICT:
            detail = "an exclusive card (100 % cores) is asked for but every card is shared"
        elif name == CARD_COMPUTE_UNITS_EXHAUSTED:
            detail = "every card's compute units are booked"
    raw = "; ".join(
        f"{node.name}: {result.reason}" if len(results) > 1 else result.reason
        for node, result in results[:3]
    )
    if len(results) > 3:
        raw += f"; ... {len(results) - 3} more nodes"
    text = f"{name} — {detail}" if detail else name
    return f'{text} (HAMi: "{raw}")' if raw else text


def _models(pools: Sequence[PoolInventory]) -> str:
    seen: list[str] = []
    for pool in pools:
        for kind in pool.cards:
            text = f"{kind.model} {kind.memory_mib} MiB/{kind.core_units} %"
            if text not in seen:
                seen.append(text)
    return ", ".join(seen)


# ------------------------------------------------------------------------------------- check


def _tenant_policies(stack: Stack, tenant: str) -> Policies:
    for resource in stack:
        if is_hami_release(resource) and stack.tenant_of(resource) == tenant:
            values = release_values(resource)
            gpu = get(values, "scheduler", "defaultSchedulerPolicy", "gpuSchedulerPolicy")
            node = get(values, "scheduler", "defaultSchedulerPolicy", "nodeSchedulerPolicy")
            return Policies(
                gpu=gpu if isinstance(gpu, str) and gpu else DEFAULT_GPU_POLICY,
                node=node if isinstance(node, str) and node else DEFAULT_NODE_POLICY,
            )
    return Policies()


@dataclass
class _Inventories:
    pools: dict[str, list[PoolInventory]]
    unknown_tenants: set[str]
    unknown_anywhere: bool
    violations: list[Violation]


def _inventories(stack: Stack) -> _Inventories:
    found = _Inventories({}, set(), False, [])
    for resource in stack:
        if not is_inventory(resource):
            continue
        if resource.labels.get(DECLARED_INVENTORY_LABEL) is UNKNOWN:
            found.unknown_anywhere = True
            continue
        text = get(resource.props, "data", INVENTORY_KEY)
        owner = stack.tenant_of(resource)
        if text is UNKNOWN or get(resource.props, "data") is UNKNOWN:
            if isinstance(owner, str):
                found.unknown_tenants.add(owner)
            else:
                found.unknown_anywhere = True
            continue
        if not isinstance(text, str):
            found.violations.append(
                Violation(
                    f"{resource.describe()} is labelled {DECLARED_INVENTORY_LABEL}=true but has no "
                    f"data key {INVENTORY_KEY}; put the pool's declared cards there",
                    resource.urn,
                )
            )
            continue
        try:
            pool = parse_inventory(text, resource.urn)
        except ValueError as exc:
            found.violations.append(
                Violation(f"{resource.describe()}: {exc}; fix the declared inventory", resource.urn)
            )
            continue
        found.pools.setdefault(pool.tenant, []).append(pool)
    return found


def check_capacity(stack: Stack) -> list[Violation] | None:
    """All hami-capacity-fit violations; None when the stack declares no cards at all (the
    policy does not apply)."""
    inventories = _inventories(stack)
    if not (
        inventories.pools
        or inventories.unknown_tenants
        or inventories.unknown_anywhere
        or inventories.violations
    ):
        return None
    violations = list(inventories.violations)
    by_tenant: dict[Tenant, list[GpuPod]] = {}
    unknown_pod_tenants: set[Tenant] = set()
    for resource, pod in gpu_pods(stack):
        tenant = stack.tenant_of(resource)
        if pod is UNKNOWN:
            unknown_pod_tenants.add(tenant)
            continue
        assert isinstance(pod, GpuPod)
        if tenant is None:
            violations.append(
                Violation(
                    f"{resource.describe()} asks HAMi for GPUs but belongs to no tenant the pack "
                    "can tell: label it gpu-platform.io/tenant=<tenant> (or create it under the "
                    "tenant's GpuTenant component with the tenant's provider)",
                    resource.urn,
                )
            )
            continue
        if tenant is UNKNOWN:
            continue
        by_tenant.setdefault(tenant, []).append(pod)

    for tenant, pods in by_tenant.items():
        assert isinstance(tenant, str)
        if tenant in inventories.unknown_tenants or inventories.unknown_anywhere:
            continue
        pools = inventories.pools.get(tenant, [])
        nodes = build_nodes(pools)
        if not nodes:
            for pod in pods:
                violations.append(
                    Violation(
                        f"{pod.describe()} would stay Pending: tenant {tenant} declares "
                        "no GPU cards (no worker pool with cards, i.e. no ConfigMap labelled "
                        f"{DECLARED_INVENTORY_LABEL}=true for it). Add a worker pool with cards "
                        "to the tenant or remove the GPU request",
                        pod.resource.urn,
                    )
                )
            continue
        violations.extend(_check_tenant(stack, tenant, pools, nodes, pods, unknown_pod_tenants))
    return violations


def _check_tenant(
    stack: Stack,
    tenant: str,
    pools: Sequence[PoolInventory],
    nodes: list[Node],
    pods: Sequence[GpuPod],
    unknown_pod_tenants: set[Tenant],
) -> list[Violation]:
    violations: list[Violation] = []
    base = _tenant_policies(stack, tenant)
    fits_alone: list[GpuPod] = []
    for pod in pods:
        policies = base.for_pod(pod)
        attempt = try_place(nodes, pod, policies)
        if attempt.node is not None:
            fits_alone.append(pod)
            continue
        violations.append(
            Violation(
                f"{pod.describe()} (tenant {tenant}) would stay Pending: "
                f"{explain(pod, attempt.results)}. Lower the request to fit one of "
                f"{tenant}'s cards ({_models(pools)}), or add a worker pool with larger cards",
                pod.resource.urn,
            )
        )
    if tenant in unknown_pod_tenants or UNKNOWN in unknown_pod_tenants:
        return violations
    if any(pod.count is UNKNOWN for pod in fits_alone):
        return violations
    state = list(nodes)
    placed = 0
    for pod in fits_alone:
        policies = base.for_pod(pod)
        if pod.count is None:  # DaemonSet: one pod on every node it may run on
            for index, node in enumerate(state):
                if pod.pool is not None and node.pool != pod.pool:
                    continue
                attempt = try_place([node], pod, policies)
                if attempt.node is None:
                    violations.append(
                        Violation(
                            f"{pod.describe()} (tenant {tenant}): its pod on node "
                            f"{node.name} would stay Pending once the {placed} GPU pods before "
                            f"it are placed: {explain(pod, attempt.results)}. Lower its "
                            "request, or add cards",
                            pod.resource.urn,
                        )
                    )
                    break
                state[index] = book(node, attempt.results[0][1])
                placed += 1
            continue
        total = int(pod.count)
        for replica in range(1, total + 1):
            attempt = try_place(state, pod, policies)
            if attempt.node is None:
                violations.append(
                    Violation(
                        f"{pod.describe()} (tenant {tenant}): replica {replica} of "
                        f"{total} would stay Pending: {explain(pod, attempt.results)}, "
                        f"with the {placed} GPU pods placed before it on {tenant}'s cards. "
                        "Lower replicas or requests, or add cards to the tenant's worker pools",
                        pod.resource.urn,
                    )
                )
                break
            chosen = attempt.node
            result = next(r for n, r in attempt.results if n is state[chosen])
            state[chosen] = book(state[chosen], result)
            placed += 1
    return violations
