"""Lab networking decisions: the MetalLB pool carved from the ``kind`` docker network, and how
each tenant's control plane gets its LoadBalancer address from it.

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
one. It is **assigned by MetalLB and read back**, not computed here (issue 24 point 14: a hash of
the name into 16 addresses refused 5 tenants half the time). The decision, traced at the pins:

* Kamaji (clastix/kamaji@26.8.2-edge): a TenantControlPlane without ``networkProfile.address``
  creates its LoadBalancer Service first (``internal/resources/k8s_service_resource.go:23-24``)
  and takes the address from ``status.loadBalancer.ingress`` (``DeclaredControlPlaneAddress``,
  ``api/v1alpha1/tenantcontrolplane_funcs.go:58-82``); until there is one it requeues every
  second (``NonExposedLoadBalancerError``, ``internal/errors/utils_controllers.go:8-24``,
  ``controllers/tenantcontrolplane_controller.go:245-252``). The address becomes
  ``status.controlPlaneEndpoint`` (``k8s_service_resource.go:56-60``), and from there the
  kubeadm ``controlPlaneEndpoint``, the API server certificate's SANs and advertise address
  (``internal/resources/kubeadm_config.go:84-138``, ``internal/kubeadm/configuration.go:34-66``)
  and the kubeconfigs' server (``internal/resources/kubeconfig.go:216``). It is recomputed from
  the Service at every reconcile, so it stays put exactly as long as the Service's does.
* MetalLB (metallb/metallb@v0.16.1): a Service that names a pool with ``metallb.io/address-pool``
  gets a free address of it even when the pool has ``autoAssign: false``
  (``controller/service.go:268-295``, ``internal/allocator/allocator.go:423-473``; only the
  unannotated path skips such pools, ``allocator.go:383-390``), the lowest free one first
  (``allocator.go:709-726`` over the pool's ranges in ascending order,
  ``internal/config/config.go:1021-1055``). An address a Service holds is re-assigned to it at
  every convergence (``service.go:77-132``), and after a controller restart the Services that
  hold one are processed before any new allocation (``internal/k8s/controllers/
  service_controller_reload.go:72-76``, ``service_controller.go:70-71``). It moves only when
  the pool stops containing it (``service.go:121-132``) or the Service is deleted, i.e. when its
  TenantControlPlane is.

So each tenant's Service names the lab pool, and everything else that needs the address (the
kubeconfig, Calico's ``kubernetesServiceEndpoint``, the lab kube-proxy, the stack outputs) reads
it back from Kamaji's kubeconfig. Adding, removing or reordering tenants changes nothing the
program sets on another tenant's control plane, and any set of tenants that fits the pool gets
distinct addresses. The address is unknown until the control plane exists (the first preview),
as the pool itself is until the kind network exists.

``controlPlane.address`` stays an optional pin (``metallb.io/loadBalancerIPs``, honoured by
``service.go:270-286``): it must be in the pool and pinned by one tenant only. MetalLB refuses a
pin another Service already holds rather than moving that Service (``allocator.go:193-200``,
``:728-745``); since it fills the pool from the bottom, pin from the top. Shrinking
``metallbPoolSize`` moves the tenants that hold the dropped (lowest) addresses; growing it moves
nobody.
"""

from __future__ import annotations

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


def pinned_address_problems(tenants: Sequence[tuple[str, str | None]]) -> list[str]:
    """One line per tenant whose ``controlPlane.address`` another tenant already pins (known from
    the config alone, before the pool exists)."""
    owners: dict[str, tuple[int, str]] = {}
    problems: list[str] = []
    for index, (name, address) in enumerate(tenants):
        if address is None:
            continue
        if address in owners:
            other, other_name = owners[address]
            problems.append(
                f"tenants[{other}] ({other_name}) and tenants[{index}] ({name}) both pin "
                f"controlPlane.address {address}: give each tenant its own address, or drop the "
                f"key from tenants[{index}] to let MetalLB assign one"
            )
            continue
        owners[address] = (index, name)
    return problems


def pinned_address(pool: Sequence[str], index: int, name: str, address: str) -> str:
    """``address`` when it is one of the pool's; else the one-line error naming the key. Run when
    the pool is known (it comes from ``docker network inspect``) and before the tenant's control
    plane is registered, whose spec waits for it."""
    if not pool:
        raise LabNetworkError("the MetalLB pool is empty")
    if address not in set(pool):
        raise LabNetworkError(
            f"tenants[{index}].controlPlane.address {address} ({name}) is not in the lab's "
            f"MetalLB pool ({', '.join(address_ranges(pool))}): pick one of those addresses "
            "(preferably from the top: MetalLB hands addresses out from the bottom) or drop "
            "the key to let MetalLB assign one"
        )
    return address


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


# ------------------------------------------------- the kind network's range against the config

Network = ipaddress.IPv4Network | ipaddress.IPv6Network

# What the Docker daemon allocates a network's IPv4 subnet from when the network is created with
# none: the first free /16 of 172.17.0.0/16 … 172.31.0.0/16, then /20s of 192.168.0.0/16
# (moby/moby v28.5.2 libnetwork/ipamutils/utils.go:13-21, localScopeDefaultNetworks; a
# daemon.json `default-address-pools` replaces them). kind creates its network with an IPv6 ULA
# `--subnet` only and leaves IPv4 to that allocation (kubernetes-sigs/kind v0.31.0
# pkg/cluster/internal/providers/docker/network.go:64-82 ensureNetwork, :149-161 createNetwork,
# :326-342 generateULASubnetFromName: fc00::/8 + sha1 of the name, a /64). The default bridge
# usually holds 172.17.0.0/16, so kind's network is usually 172.18.0.0/16.
DOCKER_DEFAULT_POOLS: tuple[Network, ...] = tuple(
    ipaddress.ip_network(base)
    for base in (
        "172.17.0.0/16",
        "172.18.0.0/16",
        "172.19.0.0/16",
        "172.20.0.0/14",
        "172.24.0.0/14",
        "172.28.0.0/14",
        "192.168.0.0/16",
    )
)


def network_subnets(inspect_json: str) -> list[Network]:
    """Every IPAM subnet (IPv4 and IPv6) of the network ``docker network inspect`` printed."""
    network = _networks(inspect_json)[0]
    found: list[Network] = []
    for entry in (network.get("IPAM") or {}).get("Config") or []:
        try:
            found.append(ipaddress.ip_network(str((entry or {}).get("Subnet", "")), strict=False))
        except ValueError:
            continue
    return found


def _outside(prefixlen: int, taken: Sequence[Network]) -> str | None:
    """The first /prefixlen of 10.0.0.0/8 that overlaps nothing in ``taken`` (a suggestion)."""
    if not 8 <= prefixlen <= 28:
        return None
    for candidate in ipaddress.ip_network("10.0.0.0/8").subnets(new_prefix=prefixlen):
        if not any(candidate.overlaps(net) for net in taken if net.version == 4):
            return str(candidate)
    return None


def kind_network_problems(
    network: str, subnets: Sequence[Network], ranges: Sequence[tuple[str, str]]
) -> list[str]:
    """One line per configured range (``(config key, CIDR)``) that overlaps a subnet of the kind
    docker network: its addresses belong to the kind node, the tenants' worker containers and the
    MetalLB pool, so pods or Services there would shadow them. Pure."""
    configured = [(key, ipaddress.ip_network(cidr, strict=False)) for key, cidr in ranges]
    taken = [*subnets, *(net for _, net in configured)]
    problems: list[str] = []
    for key, net in configured:
        for subnet in subnets:
            if subnet.version != net.version or not subnet.overlaps(net):
                continue
            free = _outside(net.prefixlen, taken) if net.version == 4 else None
            example = f" (e.g. {free}, which overlaps no other configured range)" if free else ""
            problems.append(
                f"{key} {net} overlaps the kind docker network {network!r} ({subnet}), where the "
                "kind node, the tenants' worker containers and the MetalLB pool get their "
                f"addresses: set {key} to a range outside {subnet}{example}"
            )
    return problems


def absent_network_notes(network: str, ranges: Sequence[tuple[str, str]]) -> list[str]:
    """What to say when the kind network does not exist yet (nothing to check against): what kind
    will create, then one line per configured range Docker's default pools could hand it. Pure."""
    notes = [
        f"docker network {network!r} does not exist yet, so no range is checked against it: "
        "kind creates it at the first `up` with an IPv6 ULA /64 and Docker's IPv4 subnet, the "
        "first free /16 of 172.17.0.0-172.31.255.255 (usually 172.18.0.0/16) or a /20 of "
        "192.168.0.0/16 on a default daemon; the next preview or up checks it"
    ]
    for key, cidr in ranges:
        net = ipaddress.ip_network(cidr, strict=False)
        pools = [str(pool) for pool in DOCKER_DEFAULT_POOLS if pool.overlaps(net)]
        if pools:
            notes.append(
                f"{key} {net} overlaps Docker's default address pools ({', '.join(pools)}), "
                f"from which the kind network {network!r} will get its IPv4 subnet: prefer a "
                "range in 10.0.0.0/8"
            )
    return notes


def pinned_pool_problems(
    inspect_json: str, pool_size: int, pins: Sequence[tuple[int, str, str]]
) -> list[str]:
    """The pool's own problems (no IPv4 subnet, too small) or one line per pinned
    ``(index, tenant, controlPlane.address)`` outside the pool carved from the existing network:
    known on the host before anything is registered, instead of at the control plane's turn."""
    try:
        pool = metallb_pool(inspect_json, pool_size)
    except LabNetworkError as error:
        return [str(error)]
    problems: list[str] = []
    for index, name, address in pins:
        try:
            pinned_address(pool, index, name, address)
        except LabNetworkError as error:
            problems.append(str(error))
    return problems
