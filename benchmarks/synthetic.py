"""Synthetic stack configs: N tenants with two worker pools each, derived from a stack file.

Pure: takes the stack file's ``config:`` block, returns a new one. Every synthetic tenant is a copy
of the stack's first tenant with

* a unique name (``bench-001`` …), schema and username (``bench_001`` …);
* a pod and a service CIDR (``/20`` by default) carved from ``10.0.0.0/8``, disjoint from every
  other tenant and from the management cluster's own subnets (kind: ``podSubnet`` and
  ``serviceSubnet``, by default ``10.244.0.0/16`` and ``10.96.0.0/12``);
* when the first tenant has a fixed ``controlPlane.address`` (prod, Metal3), consecutive
  addresses from it, one per tenant, which the CIDRs above avoid (in the lab the address comes
  from the MetalLB pool);
* the first two distinct worker pools found across the stack's tenants (lab: ``a100`` and ``l4``);
* the workloads declared across the stack's tenants (so that previews review them, as in the
  stack file).

In the lab the MetalLB pool grows with the tenants (one control-plane address each, which MetalLB
assigns, on top of the stack file's own pool size), capped at the 256 addresses the config allows.
The result is validated with ``components.config.parse_platform``.
"""

from __future__ import annotations

import copy
import ipaddress
from collections.abc import Iterator, Mapping, Sequence
from typing import Any

from components.config import CONFIG_KEY
from components.stack import parse_platform

PLATFORM_KEY = f"gpu-platform:{CONFIG_KEY}"
FULL_SIZES: tuple[int, ...] = (2, 10, 50, 100)
CI_SIZES: tuple[int, ...] = (2, 20)
POOLS_PER_TENANT = 2
ADDRESS_SPACE = "10.0.0.0/8"
DEFAULT_PREFIX = 20
MAX_METALLB_POOL = 256

IPv4Net = ipaddress.IPv4Network


def tenant_name(index: int) -> str:
    """DNS-1123 name of synthetic tenant ``index`` (0-based): ``bench-001`` for index 0."""
    return f"bench-{index + 1:03d}"


def datastore_identifier(index: int) -> str:
    """Schema and username of synthetic tenant ``index``: ``bench_001`` for index 0."""
    return f"bench_{index + 1:03d}"


def carve_subnets(
    count: int,
    prefix: int = DEFAULT_PREFIX,
    space: str = ADDRESS_SPACE,
    avoid: Sequence[str] = (),
) -> list[str]:
    """The first ``count`` subnets of size ``/prefix`` in ``space`` that overlap nothing in
    ``avoid``, in address order. Raises ValueError when ``space`` has too few."""
    parent = ipaddress.IPv4Network(space, strict=True)
    if prefix < parent.prefixlen:
        raise ValueError(f"/{prefix} is larger than the address space {space}")
    blocked = [ipaddress.IPv4Network(a, strict=False) for a in avoid]
    found: list[str] = []
    candidates: Iterator[IPv4Net] = parent.subnets(new_prefix=prefix)
    for subnet in candidates:
        if len(found) == count:
            break
        if not any(subnet.overlaps(b) for b in blocked):
            found.append(str(subnet))
    if len(found) < count:
        raise ValueError(
            f"{space} holds only {len(found)} free /{prefix} subnets, {count} are needed: "
            "use a smaller prefix"
        )
    return found


def _addresses(first: str, count: int) -> list[str]:
    """``count`` consecutive IPv4 addresses from ``first`` (fixed control-plane endpoints)."""
    start = ipaddress.IPv4Address(first)
    return [str(start + offset) for offset in range(count)]


def _management_subnets(platform: Mapping[str, Any]) -> list[str]:
    kind = parse_platform(platform).management.kind
    return [kind.pod_subnet, kind.service_subnet] if kind is not None else []


def _template_pools(tenants: Sequence[Mapping[str, Any]], count: int) -> list[dict[str, Any]]:
    """The first ``count`` distinct pools across the stack's tenants (cloned with a numbered
    name when the stack has fewer)."""
    pools: list[dict[str, Any]] = []
    for tenant in tenants:
        for pool in tenant.get("workerPools", []):
            if pool["name"] not in {p["name"] for p in pools}:
                pools.append(copy.deepcopy(dict(pool)))
    if not pools:
        raise ValueError("the stack file declares no worker pool to copy")
    base = len(pools)
    while len(pools) < count:
        clone = copy.deepcopy(pools[len(pools) % base])
        clone["name"] = f"{clone['name']}-{len(pools) + 1}"
        pools.append(clone)
    # One split count per tenant (the config requires it in prod: HAMi's device plugin splits
    # every card of a tenant the same way).
    slots = pools[0].get("slotsPerCard", 10)
    for pool in pools:
        pool["slotsPerCard"] = slots
    return pools[:count]


def _template_workloads(tenants: Sequence[Mapping[str, Any]]) -> list[dict[str, Any]]:
    workloads: list[dict[str, Any]] = []
    seen: set[tuple[str, str]] = set()
    for tenant in tenants:
        for workload in tenant.get("workloads", []):
            key = (workload.get("namespace", "default"), workload["name"])
            if key not in seen:
                seen.add(key)
                workloads.append(copy.deepcopy(dict(workload)))
    return workloads


def synthetic_platform(
    platform: Mapping[str, Any],
    tenants: int,
    pools_per_tenant: int = POOLS_PER_TENANT,
    prefix: int = DEFAULT_PREFIX,
) -> dict[str, Any]:
    """The ``platform`` block with ``tenants`` synthetic tenants (see the module docstring)."""
    if tenants < 1:
        raise ValueError("at least one tenant")
    base_tenants: list[Mapping[str, Any]] = list(platform["tenants"])
    template = copy.deepcopy(dict(base_tenants[0]))
    for key in ("workerPools", "workloads"):
        template.pop(key, None)
    first_address = (template.get("controlPlane") or {}).get("address")
    addresses = _addresses(first_address, tenants) if first_address else []
    pools = _template_pools(base_tenants, pools_per_tenant)
    workloads = _template_workloads(base_tenants)
    avoid = _management_subnets(platform) + [f"{a}/32" for a in addresses]
    subnets = carve_subnets(2 * tenants, prefix=prefix, avoid=avoid)

    result = copy.deepcopy(dict(platform))
    kind = (result.get("management") or {}).get("kind")
    if kind is not None:
        base_size = int(kind.get("metallbPoolSize", 16))
        kind["metallbPoolSize"] = min(MAX_METALLB_POOL, base_size + tenants)
    result["tenants"] = []
    for index in range(tenants):
        tenant = copy.deepcopy(template)
        tenant["name"] = tenant_name(index)
        data_store = dict(tenant["dataStore"])
        data_store["schema"] = datastore_identifier(index)
        data_store["username"] = datastore_identifier(index)
        tenant["dataStore"] = data_store
        tenant["network"] = {"podCidr": subnets[2 * index], "serviceCidr": subnets[2 * index + 1]}
        if addresses:
            tenant["controlPlane"] = {**tenant["controlPlane"], "address": addresses[index]}
        tenant["workerPools"] = copy.deepcopy(pools)
        if workloads:
            tenant["workloads"] = copy.deepcopy(workloads)
        result["tenants"].append(tenant)
    parse_platform(result)  # raises ConfigError naming the key if the synthetic config is invalid
    return result


def synthetic_config(
    stack_config: Mapping[str, Any],
    tenants: int,
    pools_per_tenant: int = POOLS_PER_TENANT,
    prefix: int = DEFAULT_PREFIX,
) -> dict[str, Any]:
    """A stack file's whole ``config:`` block with its platform replaced by a synthetic one."""
    config = copy.deepcopy(dict(stack_config))
    config[PLATFORM_KEY] = synthetic_platform(
        stack_config[PLATFORM_KEY], tenants, pools_per_tenant, prefix
    )
    return config
