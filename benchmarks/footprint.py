"""Control-plane footprint: what a hosted control plane requests, next to a dedicated one.

Pure. A tenant's hosted control plane is ``controlPlane.replicas`` pods in the management cluster,
each running an API server, a controller manager and a scheduler with the requests from
``controlPlane.resources`` (the config's defaults when the stack file gives none). Not counted:
the Konnectivity server sidecar Kamaji adds (its requests are not in the stack config) and the
DataStore — shared by all tenants in the lab (one kamaji-etcd), one per tenant in prod (its
members are listed beside the numbers).

The dedicated alternative is an estimate, not a measurement: ``DEDICATED`` below — three
control-plane machines (the usual HA quorum for stacked etcd) of 2 vCPU and 4 GiB each. 2 vCPU and
2 GB per control-plane machine is kubeadm's documented minimum; 4 GiB leaves room for the stacked
etcd member, the API server's caches and the OS. A dedicated machine is counted whole: nothing else
runs on it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from dataclasses import dataclass
from decimal import Decimal, InvalidOperation

from components.config import ComponentResources, PlatformConfig, Tenant

GIB = 1024**3
MIB = 1024**2

_BINARY = {"Ki": 1024, "Mi": 1024**2, "Gi": 1024**3, "Ti": 1024**4, "Pi": 1024**5, "Ei": 1024**6}
_DECIMAL = {"n": Decimal("1e-9"), "u": Decimal("1e-6"), "m": Decimal("1e-3"), "": Decimal(1)}
_DECIMAL |= {"k": Decimal(10**3), "M": Decimal(10**6), "G": Decimal(10**9)}
_DECIMAL |= {"T": Decimal(10**12), "P": Decimal(10**15), "E": Decimal(10**18)}
_QUANTITY = re.compile(r"^([+]?[0-9]*\.?[0-9]+(?:[eE][-+]?[0-9]+)?)([a-zA-Z]{0,2})$")


def parse_quantity(text: str) -> Decimal:
    """A Kubernetes resource quantity (``250m``, ``0.5``, ``512Mi``, ``1G``, ``1e3``) as a number
    of base units (cores or bytes). Raises ValueError on anything else."""
    match = _QUANTITY.match(str(text).strip())
    if not match:
        raise ValueError(f"{text!r} is not a Kubernetes quantity (e.g. 250m, 0.5, 512Mi, 1G)")
    number, suffix = match.groups()
    try:
        value = Decimal(number)
    except InvalidOperation as exc:  # pragma: no cover - the regex admits only numbers
        raise ValueError(f"{text!r}: bad number") from exc
    if suffix in _BINARY:
        return value * _BINARY[suffix]
    if suffix in _DECIMAL:
        return value * _DECIMAL[suffix]
    raise ValueError(f"{text!r}: unknown suffix {suffix!r}")


def cpu_cores(text: str) -> float:
    return float(parse_quantity(text))


def memory_bytes(text: str) -> int:
    return int(parse_quantity(text))


@dataclass(frozen=True)
class DedicatedEstimate:
    machines: int
    vcpu: float
    memory_gib: float
    basis: str

    @property
    def cpu_cores(self) -> float:
        return self.machines * self.vcpu

    @property
    def memory(self) -> float:
        """GiB in total."""
        return self.machines * self.memory_gib


DEDICATED = DedicatedEstimate(
    machines=3,
    vcpu=2.0,
    memory_gib=4.0,
    basis=(
        "3 control-plane machines (HA quorum, stacked etcd) x 2 vCPU x 4 GiB; kubeadm's "
        "minimum is 2 CPUs and 2 GB per control-plane machine"
    ),
)

COMPONENTS = ("apiServer", "controllerManager", "scheduler")


@dataclass(frozen=True)
class TenantFootprint:
    tenant: str
    replicas: int
    cpu_cores: float  # requested, all replicas
    memory_gib: float  # requested, all replicas
    per_replica: Mapping[str, tuple[float, float]]  # component -> (cores, GiB) of one pod
    missing: tuple[str, ...]  # components with no cpu/memory request (counted as 0)
    datastore: str

    def share_of(self, dedicated: DedicatedEstimate) -> tuple[float, float]:
        """(cpu, memory) requested as a fraction of the dedicated estimate."""
        return self.cpu_cores / dedicated.cpu_cores, self.memory_gib / dedicated.memory


def _requests(resources: ComponentResources) -> tuple[float | None, float | None]:
    cpu = resources.requests.get("cpu")
    memory = resources.requests.get("memory")
    return (
        cpu_cores(cpu) if cpu is not None else None,
        memory_bytes(memory) / GIB if memory is not None else None,
    )


def _datastore(tenant: Tenant) -> str:
    binding = tenant.data_store
    if binding.name is not None:
        return f"shared '{binding.name}'"
    dedicated = binding.dedicated
    assert dedicated is not None  # the config guarantees exactly one of name/dedicated
    if dedicated.deploys_kamaji_etcd:
        return f"dedicated etcd x{dedicated.replicas}"
    return f"external {dedicated.driver}"


def tenant_footprint(tenant: Tenant) -> TenantFootprint:
    """What one tenant's hosted control plane requests in the management cluster."""
    control_plane = tenant.control_plane
    resources = control_plane.resources
    per_replica: dict[str, tuple[float, float]] = {}
    missing: list[str] = []
    for key, component in zip(
        COMPONENTS,
        (resources.api_server, resources.controller_manager, resources.scheduler),
        strict=True,
    ):
        cpu, memory = _requests(component)
        if cpu is None or memory is None:
            missing.append(key)
        per_replica[key] = (cpu or 0.0, memory or 0.0)
    replicas = control_plane.replicas
    return TenantFootprint(
        tenant=tenant.name,
        replicas=replicas,
        cpu_cores=replicas * sum(c for c, _ in per_replica.values()),
        memory_gib=replicas * sum(m for _, m in per_replica.values()),
        per_replica=per_replica,
        missing=tuple(missing),
        datastore=_datastore(tenant),
    )


@dataclass(frozen=True)
class StackFootprint:
    stack: str
    tenants: tuple[TenantFootprint, ...]
    dedicated: DedicatedEstimate

    @property
    def cpu_cores(self) -> float:
        return sum(t.cpu_cores for t in self.tenants)

    @property
    def memory_gib(self) -> float:
        return sum(t.memory_gib for t in self.tenants)


def stack_footprint(
    stack: str, platform: PlatformConfig, dedicated: DedicatedEstimate = DEDICATED
) -> StackFootprint:
    return StackFootprint(
        stack=stack,
        tenants=tuple(tenant_footprint(t) for t in platform.tenants),
        dedicated=dedicated,
    )
