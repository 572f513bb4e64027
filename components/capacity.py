"""What each tenant costs the management cluster, and whether the stack fits it (issue 44,
point 2): one pure model of the CPU and memory *requests* the program sets on the pods it runs
there, the management cluster's allocatable from its nodes, and the verdict a preview gives.

Counted, per tenant (from the same builders and settings the program deploys with):

* control plane: ``controlPlane.replicas`` x the requests of kube-apiserver, controller-manager
  and scheduler (``controlPlane.resources``). Kamaji adds a konnectivity-server container to
  each pod with requests only when ``addons.konnectivity.server.resources`` is set
  (clastix/kamaji 26.8.2-edge internal/builders/controlplane/konnectivity_server.go:134); the
  program sets none, so it counts nothing;
* datastore: a dedicated kamaji-etcd's members x ``management_values.ETCD_RESOURCES``; a shared
  or external datastore nothing here (the shared default etcd is platform overhead);
* metrics: its agent's Deployment's requests (``components.metrics.objects.agent_deployment``),
  when ``metrics.enabled``, and its hourly usage publisher's pod (``components.metrics.
  usage_publisher.publisher_cron_job``) where the platform runs its own Prometheus; counted as
  if always running, like the backups;
* backups: one backup Job's pod (``components.backups.objects.backup_cron_job``: its containers,
  or its largest init container, whichever asks more), when ``backups.enabled``; counted as if
  always running, since all tenants' schedules may meet.

Platform overhead: the Kamaji controllers, the default etcd and the central Prometheus and
Grafana. Not counted: what the program does not install or sets no requests for (cert-manager,
the Cluster API controllers, MetalLB, the kamaji-etcd jobs), nor other workloads of the
cluster; the headroom (``capacity.headroomPercent``) is there for them and for a blue/green
rollout of a control plane, which briefly runs twice its pods.
"""

from __future__ import annotations

import math
from collections.abc import Iterable, Mapping
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any

from components.backups.objects import BackupPlan, backup_cron_job
from components.config import PlatformConfig, Tenant
from components.config.base import RESOURCE_QUANTITY
from components.management_values import ETCD_RESOURCES, KAMAJI_RESOURCES, DefaultEtcd
from components.metrics import backup_alerts
from components.metrics import objects as metrics_objects
from components.metrics.usage_publisher import publisher_cron_job, publishes_usage

# k8s.io/apimachinery v0.35.0 pkg/api/resource/suffix.go:110-133: binary suffixes Ki..Ei, decimal
# n, u, m, (none), k, M, G, T, P, E, and decimal exponents (e3, E-2); the same grammar the config
# checks requests and limits with (components.config.base.RESOURCE_QUANTITY).
_SUFFIX_FACTORS: dict[str, Decimal] = {
    **{s: Decimal(2) ** (10 * (i + 1)) for i, s in enumerate(("Ki", "Mi", "Gi", "Ti", "Pi", "Ei"))},
    "n": Decimal("1e-9"),
    "u": Decimal("1e-6"),
    "m": Decimal("1e-3"),
    "": Decimal(1),
    "k": Decimal("1e3"),
    "M": Decimal("1e6"),
    "G": Decimal("1e9"),
    "T": Decimal("1e12"),
    "P": Decimal("1e15"),
    "E": Decimal("1e18"),
}
MIB = 2**20


def quantity_value(quantity: str) -> Decimal:
    """A Kubernetes quantity's value (``250m`` -> 0.25, ``2Gi`` -> 2147483648, ``1e3`` ->
    1000); ValueError for anything the API server would refuse."""
    text = str(quantity).strip()
    match = RESOURCE_QUANTITY.match(text)
    if not match:
        raise ValueError(f"{quantity!r} is not a Kubernetes quantity like 250m, 2 or 512Mi")
    number, suffix = Decimal(match.group(1)), match.group(3) or ""
    if suffix[:1] in ("e", "E"):
        return number * Decimal(10) ** int(suffix[1:])
    return number * _SUFFIX_FACTORS[suffix]


def cpu_millis(quantity: str) -> int:
    """A CPU quantity (``250m``, ``2``, ``1.5``, ``500000u``) in millicores, rounded up."""
    return math.ceil(quantity_value(quantity) * 1000)


def memory_bytes(quantity: str) -> int:
    """A memory quantity (``512Mi``, ``1G``, ``1048576``, ``1e9``) in bytes, rounded up."""
    return math.ceil(quantity_value(quantity))


@dataclass(frozen=True, order=True)
class Resources:
    """CPU (millicores) and memory (bytes)."""

    cpu_millis: int = 0
    memory_bytes: int = 0

    def __add__(self, other: Resources) -> Resources:
        return Resources(self.cpu_millis + other.cpu_millis, self.memory_bytes + other.memory_bytes)

    def __sub__(self, other: Resources) -> Resources:
        return Resources(self.cpu_millis - other.cpu_millis, self.memory_bytes - other.memory_bytes)

    def times(self, count: int) -> Resources:
        return Resources(self.cpu_millis * count, self.memory_bytes * count)

    def scaled(self, fraction: float) -> Resources:
        return Resources(
            math.floor(self.cpu_millis * fraction), math.floor(self.memory_bytes * fraction)
        )

    def exceeds(self, other: Resources) -> bool:
        """More CPU or more memory than ``other``."""
        return self.cpu_millis > other.cpu_millis or self.memory_bytes > other.memory_bytes

    def __str__(self) -> str:
        return f"{self.cpu_millis}m CPU, {self.memory_bytes // MIB} MiB"


def requests(resources: Mapping[str, Any] | None) -> Resources:
    """The ``requests`` of a container's ``resources``; a resource with a limit and no request
    requests its limit, as the API server defaults it (kubernetes v1.35.0
    pkg/apis/core/v1/defaults.go:170-177)."""
    given = resources or {}
    asked = {**(given.get("limits") or {}), **(given.get("requests") or {})}
    return Resources(
        cpu_millis(asked["cpu"]) if "cpu" in asked else 0,
        memory_bytes(asked["memory"]) if "memory" in asked else 0,
    )


def _total(items: Iterable[Resources]) -> Resources:
    out = Resources()
    for item in items:
        out = out + item
    return out


def pod_requests(pod_spec: Mapping[str, Any]) -> Resources:
    """What the scheduler reserves for a pod: its containers' requests summed, or its largest
    init container's where that asks more (init containers run one at a time, before them)."""
    containers = _total(requests(c.get("resources")) for c in pod_spec.get("containers", []))
    inits = [requests(c.get("resources")) for c in pod_spec.get("initContainers", [])]
    return Resources(
        max([containers.cpu_millis, *(i.cpu_millis for i in inits)]),
        max([containers.memory_bytes, *(i.memory_bytes for i in inits)]),
    )


@dataclass(frozen=True)
class TenantCost:
    """One tenant's requests on the management cluster, by part."""

    tenant: str
    control_plane: Resources
    datastore: Resources
    metrics_agent: Resources
    backups: Resources

    @property
    def total(self) -> Resources:
        return self.control_plane + self.datastore + self.metrics_agent + self.backups


def _control_plane(tenant: Tenant) -> Resources:
    parts = tenant.control_plane.resources
    per_pod = _total(
        requests(
            {"requests": dict(component.requests or {}), "limits": dict(component.limits or {})}
        )
        for component in (parts.api_server, parts.controller_manager, parts.scheduler)
    )
    return per_pod.times(tenant.control_plane.replicas)


def etcd_member() -> Resources:
    """One kamaji-etcd member's requests."""
    return requests(ETCD_RESOURCES)


def _datastore(tenant: Tenant) -> Resources:
    dedicated = tenant.data_store.dedicated
    if dedicated is None or not dedicated.deploys_kamaji_etcd:
        return Resources()
    return etcd_member().times(dedicated.replicas)


def _metrics(platform: PlatformConfig, tenant: Tenant) -> Resources:
    if not platform.metrics.enabled:
        return Resources()
    # The ConfigMap only feeds the pod template's digest annotation, not its requests.
    deployment = metrics_objects.agent_deployment("capacity", {"metadata": {"name": "agent"}})
    agent = pod_requests(deployment["spec"]["template"]["spec"]).times(
        deployment["spec"]["replicas"]
    )
    if not publishes_usage(platform.metrics):
        return agent
    publisher = publisher_cron_job(tenant.name, tenant.namespace)
    return agent + pod_requests(publisher["spec"]["jobTemplate"]["spec"]["template"]["spec"])


def _backup_job(tenant: Tenant) -> Resources:
    plan = BackupPlan.of(tenant, tenant.namespace, pause_owner=None)
    job = backup_cron_job(plan)
    return pod_requests(job["spec"]["jobTemplate"]["spec"]["template"]["spec"])


def tenant_cost(platform: PlatformConfig, tenant: Tenant) -> TenantCost:
    """What ``tenant`` asks of the management cluster."""
    return TenantCost(
        tenant=tenant.name,
        control_plane=_control_plane(tenant),
        datastore=_datastore(tenant),
        metrics_agent=_metrics(platform, tenant),
        backups=_backup_job(tenant) if tenant.backups.enabled else Resources(),
    )


def platform_overhead(
    platform: PlatformConfig, kamaji_replicas: int, default_etcd: DefaultEtcd | None
) -> Resources:
    """What the platform itself asks, whatever its tenants: Kamaji, the default etcd, the
    central metrics."""
    overhead = requests(KAMAJI_RESOURCES).times(kamaji_replicas)
    if default_etcd is not None:
        overhead = overhead + etcd_member().times(default_etcd.members)
    if platform.metrics.enabled and platform.metrics.prometheus_operator is None:
        # The platform's own central stack (none with the Prometheus Operator's): Prometheus,
        # Grafana and the backup alerts' kube-state-metrics.
        state_metrics = next(
            m
            for m in backup_alerts.manifests(metrics_objects.METRICS_NAMESPACE)
            if m["kind"] == "Deployment"
        )
        overhead = (
            overhead
            + requests(metrics_objects.PROMETHEUS_RESOURCES)
            + requests(metrics_objects.GRAFANA_RESOURCES)
            + pod_requests(state_metrics["spec"]["template"]["spec"])
        )
    return overhead


@dataclass(frozen=True)
class StackCost:
    overhead: Resources
    tenants: tuple[TenantCost, ...] = field(default=())

    @property
    def total(self) -> Resources:
        return self.overhead + _total(cost.total for cost in self.tenants)


def stack_cost(
    platform: PlatformConfig, kamaji_replicas: int, default_etcd: DefaultEtcd | None
) -> StackCost:
    return StackCost(
        overhead=platform_overhead(platform, kamaji_replicas, default_etcd),
        tenants=tuple(tenant_cost(platform, tenant) for tenant in platform.tenants),
    )


# ---------------------------------------------------------------------- the cluster's side

_NO_SCHEDULE = {"NoSchedule", "NoExecute"}


def allocatable(nodes: Mapping[str, Any]) -> Resources:
    """The allocatable CPU and memory of the nodes that take ordinary pods, from ``kubectl get
    nodes -o json``: cordoned nodes and nodes with a NoSchedule or NoExecute taint (a
    control-plane node's) are left out, since the pods counted here tolerate none."""
    total = Resources()
    for node in nodes.get("items", []):
        spec = node.get("spec") or {}
        if spec.get("unschedulable"):
            continue
        if any(taint.get("effect") in _NO_SCHEDULE for taint in spec.get("taints") or []):
            continue
        alloc = (node.get("status") or {}).get("allocatable") or {}
        total = total + Resources(
            cpu_millis(alloc.get("cpu", "0")), memory_bytes(alloc.get("memory", "0"))
        )
    return total


@dataclass(frozen=True)
class Verdict:
    refusal: str | None
    warning: str | None


def verdict(total: Resources, available: Resources, headroom_percent: int) -> Verdict:
    """Refused above the allocatable, warned above ``100 - headroom_percent`` % of it; each
    a line with the figures."""
    if total.exceeds(available):
        return Verdict(
            refusal=(
                f"the stack requests {total} of the management cluster, which has {available} "
                "allocatable on its schedulable nodes: remove or shrink tenants (make capacity "
                "shows each one's cost) or add nodes"
            ),
            warning=None,
        )
    limit = available.scaled((100 - headroom_percent) / 100)
    if total.exceeds(limit):
        return Verdict(
            refusal=None,
            warning=(
                f"the stack requests {total} of the management cluster's {available} "
                f"allocatable, more than the {100 - headroom_percent}% that "
                f"capacity.headroomPercent ({headroom_percent}) allows"
            ),
        )
    return Verdict(refusal=None, warning=None)


def how_many_more(cost: Resources, total: Resources, available: Resources) -> int | None:
    """How many more tenants of ``cost`` fit beside ``total`` in ``available``; None when
    the tenant asks nothing countable."""
    free = available - total
    counts = [
        free_part // part
        for free_part, part in (
            (free.cpu_millis, cost.cpu_millis),
            (free.memory_bytes, cost.memory_bytes),
        )
        if part > 0
    ]
    if not counts:
        return None
    return max(0, min(counts))


def report(cost: StackCost, available: Resources | None, headroom_percent: int) -> list[str]:
    """``make capacity``'s table: per-tenant cost by part, the overhead, the total, and, where
    the allocatable is known, how many more tenants of each one's shape fit (within the
    headroom, and at all)."""

    def cells(resources: Resources) -> str:
        return f"{resources.cpu_millis:>7}m {resources.memory_bytes // MIB:>7}Mi"

    width = len(f" {cells(Resources())}")
    pad = " " * (4 * width)
    lines = [
        f"{'':<22}"
        + "".join(
            f"{title:>{width}}"
            for title in ("control plane", "datastore", "metrics", "backups", "total")
        )
    ]
    for tenant in cost.tenants:
        lines.append(
            f"{tenant.tenant:<22}"
            + "".join(
                f" {cells(part)}"
                for part in (
                    tenant.control_plane,
                    tenant.datastore,
                    tenant.metrics_agent,
                    tenant.backups,
                    tenant.total,
                )
            )
        )
    lines.append(f"{'platform overhead':<22}{pad} {cells(cost.overhead)}")
    lines.append(f"{'stack total':<22}{pad} {cells(cost.total)}")
    if available is None:
        lines.append("management cluster: allocatable not known (no nodes read)")
        return lines
    within = available.scaled((100 - headroom_percent) / 100)
    lines.append(f"{'allocatable':<22}{pad} {cells(available)}")
    lines.append(f"{f'within {100 - headroom_percent}% (headroom)':<22}{pad} {cells(within)}")
    for tenant in cost.tenants:
        more = how_many_more(tenant.total, cost.total, within)
        at_all = how_many_more(tenant.total, cost.total, available)
        lines.append(
            f"more tenants shaped like {tenant.tenant}: {more} within the headroom, "
            f"{at_all} at most"
        )
    return lines
