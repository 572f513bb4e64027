"""Lab networking decisions: the MetalLB pool carved from the ``kind`` docker network, and the
fixed LoadBalancer address of each tenant.

``docker network inspect kind`` lists the network's IPAM subnets in no guaranteed order, and on
hosts with IPv6 enabled the IPv6 subnet often comes first (the lab report's pitfall: a pool taken
from the first subnet is an IPv6 range MetalLB's L2 mode cannot serve to the kind nodes). These
functions always pick the **IPv4** subnet explicitly.

The pool is carved from the **top** of that subnet: docker hands container addresses out from the
bottom (the gateway, the kind node, then every worker container), so the top is where nobody else
allocates. The broadcast address and the gateway are never part of the pool, and the pool must fit
in the subnet's upper half so docker keeps the lower half for containers.

A tenant's control-plane address must never move: its kubelets, Konnectivity agents
(``--proxy-server-host`` is fixed when the agent is created) and the tenant provider keep the old
one. So the address depends on the tenant's **name**, not its place in the list: the tenant's
position in the pool is a hash of its name (``tenant_slot``), counted from the top. Two tenants
whose names hash to one position are refused at validation (``slot_collisions``) rather than
resolved by an order, which could move one of them when a tenant is added or removed: pin one of
them with ``controlPlane.address`` instead. Changing ``metallbPoolSize`` moves every hashed
address; pin the addresses first.
"""

from __future__ import annotations

import hashlib
import ipaddress
import json
from collections.abc import Sequence
from typing import Any

from pulumi import RunError

IPv4 = ipaddress.IPv4Address


class LabNetworkError(RunError, ValueError):
    """The docker network cannot host the MetalLB pool, or a tenant has no address. A RunError:
    the CLI prints it as one message, without a traceback."""


def _networks(inspect_json: str) -> list[dict[str, Any]]:
    try:
        data = json.loads(inspect_json)
    except json.JSONDecodeError as exc:
        raise LabNetworkError(
            f"`docker network inspect` did not print JSON ({exc.msg}): run it by hand to see why"
        ) from None
    if isinstance(data, dict):
        data = [data]
    if not isinstance(data, list) or not data or not all(isinstance(n, dict) for n in data):
        raise LabNetworkError(
            "`docker network inspect` printed no network: create the kind cluster first "
            "(kind creates the docker network)"
        )
    return data


def ipv4_subnet(inspect_json: str) -> tuple[ipaddress.IPv4Network, IPv4 | None]:
    """The IPv4 subnet (and its gateway, when docker reports one) of the network described by
    ``docker network inspect`` output, whatever the order of the IPAM config entries."""
    network = _networks(inspect_json)[0]
    name = network.get("Name", "?")
    configs = (network.get("IPAM") or {}).get("Config") or []
    seen: list[str] = []
    for entry in configs:
        subnet = str((entry or {}).get("Subnet", ""))
        seen.append(subnet)
        try:
            parsed = ipaddress.ip_network(subnet, strict=False)
        except ValueError:
            continue
        if isinstance(parsed, ipaddress.IPv4Network):
            gateway_text = (entry or {}).get("Gateway")
            gateway = ipaddress.IPv4Address(gateway_text) if gateway_text else None
            return parsed, gateway
    raise LabNetworkError(
        f"docker network {name} has no IPv4 subnet (found: {', '.join(seen) or 'none'}): "
        "MetalLB's L2 pool needs one; recreate the network with an IPv4 subnet "
        "(e.g. `docker network create kind --subnet 172.18.0.0/16`) before creating the cluster"
    )


def carve_pool(subnet: ipaddress.IPv4Network, size: int, gateway: IPv4 | None = None) -> list[str]:
    """``size`` addresses from the top of ``subnet``, returned ascending: never the broadcast
    address, never the gateway, and only from the subnet's upper half. Walks down from the top
    only as far as it needs (a kind network is often a /16: 32,000 candidates)."""
    if size < 1:
        raise LabNetworkError(f"a MetalLB pool needs at least one address, not {size}")
    upper_half_start = int(subnet.network_address) + subnet.num_addresses // 2
    broadcast = int(subnet.broadcast_address)
    # /31 and /32 have no broadcast-free upper half.
    candidates = (
        range(broadcast - 1, upper_half_start - 1, -1) if subnet.num_addresses >= 4 else range(0)
    )
    skipped = int(gateway) if gateway is not None else None
    picked: list[int] = []
    for value in candidates:
        if len(picked) == size:
            break
        if value != skipped:
            picked.append(value)
    if len(picked) < size:
        room = len(candidates) - (1 if skipped in candidates else 0)
        raise LabNetworkError(
            f"the kind network's IPv4 subnet {subnet} has room for {room} MetalLB addresses "
            f"in its upper half, but management.kind.metallbPoolSize is {size}: lower "
            "metallbPoolSize, or recreate the kind network with a larger subnet (at least a /24)"
        )
    return [str(IPv4(value)) for value in sorted(picked)]


def metallb_pool(inspect_json: str, size: int) -> list[str]:
    """The lab's MetalLB addresses, ascending, from ``docker network inspect <network>`` output."""
    subnet, gateway = ipv4_subnet(inspect_json)
    return carve_pool(subnet, size, gateway)


def address_ranges(pool: Sequence[str]) -> list[str]:
    """The pool as MetalLB ``IPAddressPool.spec.addresses`` entries: one ``first-last`` range
    per run of consecutive addresses."""
    if not pool:
        raise LabNetworkError("the MetalLB pool is empty")
    values = sorted(int(IPv4(address)) for address in pool)
    ranges: list[str] = []
    start = previous = values[0]
    for value in [*values[1:], None]:
        if value is not None and value == previous + 1:
            previous = value
            continue
        ranges.append(f"{IPv4(start)}-{IPv4(previous)}")
        if value is not None:
            start = previous = value
    return ranges


def tenant_slot(name: str, pool_size: int) -> int:
    """The tenant's position in the pool, counted from the top (0 = the highest address): a hash
    of its name, so no other tenant's presence or order changes it."""
    if pool_size < 1:
        raise LabNetworkError(f"a MetalLB pool needs at least one address, not {pool_size}")
    digest = hashlib.sha256(name.encode()).digest()
    return int.from_bytes(digest[:8], "big") % pool_size


def slot_collisions(tenants: Sequence[tuple[str, str | None]], pool_size: int) -> list[str]:
    """One line per pair of tenants without ``controlPlane.address`` whose names hash to the same
    position of a ``pool_size`` pool (known from the config alone, before the pool exists)."""
    owners: dict[int, tuple[int, str]] = {}
    problems: list[str] = []
    for index, (name, address) in enumerate(tenants):
        if address is not None:
            continue
        slot = tenant_slot(name, pool_size)
        if slot in owners:
            other, other_name = owners[slot]
            problems.append(
                f"tenants[{other}] ({other_name}) and tenants[{index}] ({name}) get the same lab "
                f"address from their names (position {slot} from the top of the "
                f"{pool_size}-address MetalLB pool): set tenants[{index}].controlPlane.address "
                "to a free address of the pool (`pulumi stack output lbPool`), or rename it"
            )
            continue
        owners[slot] = (index, name)
    return problems


def assign_tenant_addresses(
    pool: Sequence[str], tenants: Sequence[tuple[str, str | None]]
) -> dict[str, str]:
    """Each tenant's address by name: the one it requests (``controlPlane.address``, which must
    be in the pool), else the pool's address at ``tenant_slot`` from the top. The same for any
    order of ``tenants``; two tenants never share an address (a clash raises, naming both)."""
    if not pool:
        raise LabNetworkError("the MetalLB pool is empty")
    members = set(pool)
    top_down = sorted(pool, key=lambda address: int(IPv4(address)), reverse=True)
    requested: dict[str, tuple[int, str]] = {}
    for index, (name, address) in enumerate(tenants):
        if address is None:
            continue
        if address not in members:
            raise LabNetworkError(
                f"tenants[{index}].controlPlane.address {address} ({name}) is not in the lab's "
                f"MetalLB pool ({', '.join(address_ranges(pool))}): pick one of those addresses "
                "or drop the key to get one from the tenant's name"
            )
        if address in requested:
            other, other_name = requested[address]
            raise LabNetworkError(
                f"tenants[{other}] ({other_name}) and tenants[{index}] ({name}) both request "
                f"{address}: give every tenant its own controlPlane.address"
            )
        requested[address] = (index, name)
    assigned: dict[str, str] = {}
    hashed: dict[str, tuple[int, str]] = {}
    for index, (name, address) in enumerate(tenants):
        if address is not None:
            assigned[name] = address
            continue
        own = top_down[tenant_slot(name, len(pool))]
        clash = requested.get(own) or hashed.get(own)
        if clash is not None:
            other, other_name = clash
            raise LabNetworkError(
                f"tenants[{index}] ({name}) gets {own} from its name, which tenants[{other}] "
                f"({other_name}) already has: set tenants[{index}].controlPlane.address to a "
                "free address of the pool (`pulumi stack output lbPool`)"
            )
        hashed[own] = (index, name)
        assigned[name] = own
    return assigned


def pool_size_problem(pool_size: int, tenant_count: int) -> str | None:
    """The problem when the configured pool cannot give every tenant an address, else None."""
    if tenant_count > pool_size:
        return (
            f"{tenant_count} tenants need {tenant_count} LoadBalancer addresses but "
            f"management.kind.metallbPoolSize is {pool_size}: raise it to at least {tenant_count}"
        )
    return None


def check_pool_size(pool_size: int, tenant_count: int) -> None:
    """Fail before anything is created when the configured pool cannot give every tenant an
    address (the pool itself is only known once the kind network exists)."""
    problem = pool_size_problem(pool_size, tenant_count)
    if problem is not None:
        raise LabNetworkError(problem)
