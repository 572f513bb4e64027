"""The whole stack: mode, Kubernetes version, management cluster, HAMi, the GPU driver,
DataStores and tenants, and the cross-field checks every stack has."""

from __future__ import annotations

import ipaddress
import re
from collections import Counter
from collections.abc import Iterable
from typing import Literal

from pydantic import (
    Field,
    ValidationInfo,
    field_validator,
    model_validator,
)

from components.config.base import (
    GO_DURATION,
    IMAGE_REFERENCE,
    ConfigError,
    _kubernetes_version,
    _matching,
    _Model,
)
from components.config.capacity import CapacitySettings
from components.config.datastores import DataStoreSpec
from components.config.management import ExistingManagement, KindManagement, Management
from components.config.metrics import MetricsSettings
from components.config.tenants import Tenant
from components.kubernetes_versions import dra_problem, fractions_problem
from components.versions import kind_node_image


class HamiSettings(_Model):
    """How HAMi runs inside every tenant."""

    webhook_failure_policy: Literal["Fail", "Ignore"] = Field(
        default="Fail", description="Fail: GPU pods are refused, never silently unscheduled by HAMi"
    )
    node_lock_timeout: str = Field(
        default="30s", description="backstop for locks the device plugin never releases"
    )
    gpu_scheduler_policy: Literal["spread", "binpack"] = Field(
        default="spread", description="card order on a node"
    )
    node_scheduler_policy: Literal["spread", "binpack"] = Field(
        default="binpack", description="node order"
    )

    @field_validator("node_lock_timeout")
    @classmethod
    def _node_lock_timeout(cls, value: str) -> str:
        return _matching(value, GO_DURATION, "a duration", "30s, 2m or 1m30s")


_DRIVER_VERSION = re.compile(r"^\d+\.\d+(\.\d+)?$")
_DRIVER_BRANCH = re.compile(r"^\d+$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")


class GpuDriver(_Model):
    """Prod: how the NVIDIA kernel driver reaches the GPU machines (the GPU Operator's
    ``driver.*``, one setting for every tenant's ClusterPolicy)."""

    source: Literal["runtime-built", "precompiled", "preinstalled"] = Field(
        default="runtime-built",
        description="runtime-built: the operator's driver container compiles the module on each "
        "node (needs the running kernel's headers, no Secure Boot, no driver in the image); "
        "precompiled: per-kernel driver images (driver.usePrecompiled); preinstalled: the "
        "machine image ships the driver (driver.enabled false)",
    )
    version: str | None = Field(
        default=None,
        description="driver.version: a full version for runtime-built (default the chart's "
        "595.91.07), the driver branch for precompiled (e.g. 595, required)",
    )
    package_repositories: dict[str, str] = Field(
        default_factory=dict,
        description="runtime-built: package repository files (file name: content, e.g. an apt "
        "mirror with the kernel headers) the driver container installs from; the program "
        "creates them as driver.repoConfig",
    )
    auto_upgrade: bool | None = Field(
        default=None,
        description="driver.upgradePolicy.autoUpgrade (chart default true: a driver change "
        "drains GPU pods node by node)",
    )

    @model_validator(mode="after")
    def _consistent(self) -> GpuDriver:
        if self.source == "preinstalled":
            given = [
                key
                for key, value in (
                    ("version", self.version),
                    ("packageRepositories", self.package_repositories or None),
                    ("autoUpgrade", self.auto_upgrade),
                )
                if value is not None
            ]
            if given:
                raise ValueError(
                    f"a preinstalled driver comes with the machine image and the GPU Operator "
                    f"does not manage it: remove {', '.join(given)}"
                )
        if self.source == "precompiled":
            if self.version is None or not _DRIVER_BRANCH.match(self.version):
                raise ValueError(
                    "precompiled driver images are tagged <branch>-<kernel>: give version as the "
                    "driver branch, e.g. 595"
                )
            if self.package_repositories:
                raise ValueError(
                    "precompiled drivers need no kernel headers (the GPU Operator ignores "
                    "repoConfig for them): remove packageRepositories"
                )
        runtime_version = self.version if self.source == "runtime-built" else None
        if runtime_version is not None and not _DRIVER_VERSION.match(runtime_version):
            raise ValueError(f"version {runtime_version!r} is not a driver version like 595.91.07")
        for name in self.package_repositories:
            if not _CONFIGMAP_KEY.match(name):
                raise ValueError(
                    f"packageRepositories: {name!r} is not a file name (letters, digits, '-', "
                    "'_', '.')"
                )
            if not name.endswith(_REPOSITORY_FILE_SUFFIXES):
                raise ValueError(
                    f"packageRepositories: {name!r} would be ignored: the operator mounts each "
                    "key as a file in the driver container's /etc/apt/sources.list.d or "
                    "/etc/yum.repos.d, and apt reads only *.list and *.sources files there, "
                    "yum/dnf/zypper only *.repo; name it e.g. mirror.list"
                )
        return self


# --------------------------------------------------------------------------------- platform


# apt reads /etc/apt/sources.list.d/*.list and *.sources (sources.list(5)); yum, dnf and
# zypper read *.repo from their repository directories (yum.conf(5) reposdir, zypper(8)).
_REPOSITORY_FILE_SUFFIXES = (".list", ".sources", ".repo")


class PlatformConfig(_Model):
    """The whole stack: mode, one Kubernetes version, management cluster, tenants."""

    mode: Literal["lab", "prod"] = Field(
        description="lab: kind + simulated GPUs on one host; prod: existing cluster + Cluster API"
    )
    kubernetes_version: str = Field(
        description="every tenant's version unless it sets its own (tenants[].kubernetesVersion): "
        "control plane, worker image and HAMi's kube-scheduler"
    )
    worker_image: str | None = Field(
        default=None,
        description="lab: kindest/node image (default: the tenant version, by digest when the "
        "pinned kind release published one)",
    )
    management: Management = Field(description="exactly one of kind (lab) or existing (prod)")
    hami: HamiSettings = Field(default=HamiSettings(), description="HAMi inside every tenant")
    metrics: MetricsSettings = Field(
        default=MetricsSettings(), description="per-tenant GPU metrics, chargeback, dashboards"
    )
    capacity: CapacitySettings = Field(
        default=CapacitySettings(), description="the management cluster's capacity check"
    )
    gpu_driver: GpuDriver = Field(
        default=GpuDriver(), description="prod: the NVIDIA driver on the GPU machines"
    )
    data_stores: list[DataStoreSpec] = Field(
        default_factory=list, description="extra (external) DataStores tenants may bind to by name"
    )
    tenants: list[Tenant] = Field(min_length=1, description="one entry per team")

    @field_validator("kubernetes_version")
    @classmethod
    def _version(cls, value: str, info: ValidationInfo) -> str:
        return _kubernetes_version(value, info)

    @field_validator("worker_image")
    @classmethod
    def _worker_image(cls, value: str | None) -> str | None:
        if value is not None:
            _matching(value, IMAGE_REFERENCE, "an image reference", "kindest/node:v1.35.0")
        return value

    # ----- derived views the components use

    @property
    def adopted_namespaces(self) -> list[tuple[str, str]]:
        """``(config key, namespace)`` of every tenant namespace the program adopts (reads and
        never creates): each must exist on the management cluster before ``up`` or preview."""
        return [
            (f"tenants[{index}].managementNamespace.existing", tenant.namespace)
            for index, tenant in enumerate(self.tenants)
            if tenant.management_namespace.existing
        ]

    def version_of(self, tenant: Tenant) -> str:
        """The Kubernetes version ``tenant`` runs: its own, else the platform's."""
        return tenant.kubernetes_version or self.kubernetes_version

    def datastore_driver_of(self, tenant: Tenant) -> str:
        """The driver of the DataStore ``tenant``'s state lives in: its dedicated one's, a
        declared one's, or etcd for any other name (the management cluster's kamaji-etcd
        ``default``; an unknown name is reported by ``platform_problems``)."""
        binding = tenant.data_store
        if binding.dedicated is not None:
            return binding.dedicated.driver
        declared = {d.name: d.driver for d in self.data_stores}
        return declared.get(binding.name or "", "etcd")

    def worker_image_of(self, tenant: Tenant) -> str:
        """The kindest/node image ``tenant``'s lab workers run: always the tenant version."""
        return self.worker_image or kind_node_image(self.version_of(tenant))

    @property
    def kind(self) -> KindManagement:
        """The lab's kind settings (only valid in mode lab)."""
        if self.management.kind is None:
            raise ConfigError("management.kind is only set in mode lab")
        return self.management.kind

    @property
    def existing(self) -> ExistingManagement:
        """The prod management settings (only valid in mode prod)."""
        if self.management.existing is None:
            raise ConfigError("management.existing is only set in mode prod")
        return self.management.existing


def platform_problems(platform: PlatformConfig, *, default_datastore: bool) -> list[str]:
    """Cross-field problems every stack can have, one line each naming its key and the fix;
    ``default_datastore``: whether the environment runs its own kamaji-etcd as the DataStore
    ``default``. The environment's own checks live in ``components.lab`` and ``components.prod``;
    ``components.stack`` runs both, so one error lists every problem."""
    return [
        *_duplicates("tenants[].name", [t.name for t in platform.tenants]),
        *_duplicates("dataStores[].name", [d.name for d in platform.data_stores]),
        *_datastore_binding_problems(platform, default_datastore),
        *_cidr_problems(platform),
        *_management_namespace_problems(platform),
        *_workload_quota_problems(platform),
        *_backup_problems(platform),
        *_gpu_sharing_problems(platform),
    ]


def _gpu_sharing_problems(platform: PlatformConfig) -> list[str]:
    """What a ``gpuSharing: dra`` tenant's own version cannot do (components.kubernetes_versions
    traces the API and the feature gates): no resource.k8s.io/v1 below v1.34; no fraction of a
    card (a workload with cores below 100) while DRAConsumableCapacity is off; and its
    gpuQuotas would meter HAMi's extended resources, which a DRA pod never requests. The
    driver's own limits are the environment's checks (components.lab, components.prod)."""
    problems: list[str] = []
    for t_index, tenant in enumerate(platform.tenants):
        if tenant.gpu_sharing != "dra":
            if tenant.device_quotas:
                problems.append(
                    f"tenants[{t_index}].deviceQuotas: they count DRA devices, which a "
                    "gpuSharing: hami tenant's pods never claim (its claims are refused at "
                    "admission); use gpuQuotas, or set gpuSharing: dra"
                )
            continue
        key = f"tenants[{t_index}]"
        version = platform.version_of(tenant)
        problem = dra_problem(version)
        if problem is not None:
            problems.append(f"{key}.gpuSharing: dra: {problem}")
            continue
        for w_index, workload in enumerate(tenant.workloads):
            if workload.gpu.cores < 100:
                problems.append(
                    f"{key}.workloads[{w_index}].gpu.cores: {workload.gpu.cores} is a fraction "
                    f"of a card: {fractions_problem(version)}; ask for cores: 100 (whole cards) "
                    "or keep gpuSharing: hami"
                )
        if tenant.gpu_quotas:
            problems.append(
                f"{key}.gpuQuotas: they limit HAMi's nvidia.com/gpumem, gpucores and gpu, which "
                "a DRA pod never requests (it asks through ResourceClaims), so they would "
                "meter nothing; remove gpuQuotas (deviceQuotas count a dra tenant's devices) "
                "or keep gpuSharing: hami"
            )
        problems.extend(_device_quota_problems(tenant, key))
    return problems


def _device_quota_problems(tenant: Tenant, key: str) -> list[str]:
    """A dra tenant's declared workloads fit its deviceQuotas, as a hami tenant's fit its
    gpuQuotas: each pod's claim asks ``cards`` devices (components.dra), so a namespace needs
    replicas x cards; with quotas, no workload in a namespace none covers."""
    quotas = {q.namespace: (i, q) for i, q in enumerate(tenant.device_quotas)}
    if not quotas:
        return []
    problems: list[str] = []
    totals: dict[str, int] = {}
    for w_index, workload in enumerate(tenant.workloads):
        if workload.namespace not in quotas:
            problems.append(
                f"{key}.workloads[{w_index}].namespace: {workload.namespace!r} has no "
                "deviceQuotas entry, so its claims would not be metered; add a quota for it or "
                "move the workload to a namespace that has one"
            )
            continue
        totals[workload.namespace] = (
            totals.get(workload.namespace, 0) + workload.replicas * workload.gpu.cards
        )
    for namespace, devices in sorted(totals.items()):
        q_index, quota = quotas[namespace]
        if devices > quota.devices:
            problems.append(
                f"{key}.deviceQuotas[{q_index}].devices: the workloads this tenant declares in "
                f"{namespace!r} claim {devices} (replicas x cards) and the quota allows "
                f"{quota.devices}; raise it to at least {devices} or shrink the workloads"
            )
    return problems


def _backup_problems(platform: PlatformConfig) -> list[str]:
    """Backups export an etcd key prefix (docs/backups.md): a tenant on a SQL or NATS DataStore
    (kine) has none, and its database has backup tools of its own."""
    return [
        f"tenants[{index}].backups: {tenant.name}'s DataStore is "
        f"{platform.datastore_driver_of(tenant)}, and backups export etcd prefixes only: set "
        "backups.enabled: false and back the database up with its own tools"
        for index, tenant in enumerate(platform.tenants)
        if tenant.backups.enabled and platform.datastore_driver_of(tenant) != "etcd"
    ]


def _datastore_binding_problems(platform: PlatformConfig, default_datastore: bool) -> list[str]:
    problems: list[str] = []
    bindings = [t.data_store for t in platform.tenants]
    for key, values in (
        ("schema", [b.schema_name for b in bindings]),
        ("username", [b.username for b in bindings]),
    ):
        for dupe in _repeated(values):
            problems.append(
                f"tenants[].dataStore.{key}: {dupe!r} is used by more than one tenant; "
                f"give every tenant its own {key} (Kamaji does not enforce it)"
            )
    declared = {d.name: d for d in platform.data_stores}
    known = set(declared)
    if default_datastore:
        known.add("default")
    users: dict[str, list[str]] = {}
    for index, tenant in enumerate(platform.tenants):
        binding = tenant.data_store
        if binding.name is None:
            continue
        if binding.name not in known:
            problems.append(
                f"tenants[{index}].dataStore.name: {binding.name!r} is not a DataStore this "
                f"stack has (known: {', '.join(sorted(known)) or 'none'}); declare it under "
                "dataStores or use dedicated"
            )
        users.setdefault(binding.name, []).append(tenant.name)
    for name, tenants in users.items():
        spec = declared.get(name)
        if spec is not None and spec.driver == "NATS" and len(tenants) > 1:
            problems.append(
                f"dataStores {name!r} is NATS and serves {', '.join(tenants)}: a NATS "
                "DataStore serves one tenant only; give the others their own DataStore"
            )
    return problems


def _cidr_problems(platform: PlatformConfig) -> list[str]:
    problems: list[str] = []
    networks: list[tuple[str, ipaddress.IPv4Network | ipaddress.IPv6Network]] = []
    for index, tenant in enumerate(platform.tenants):
        networks.append((f"tenants[{index}].network.podCidr", _net(tenant.network.pod_cidr)))
        networks.append(
            (f"tenants[{index}].network.serviceCidr", _net(tenant.network.service_cidr))
        )
    if platform.management.kind is not None:
        networks.append(("management.kind.podSubnet", _net(platform.management.kind.pod_subnet)))
        networks.append(
            ("management.kind.serviceSubnet", _net(platform.management.kind.service_subnet))
        )
    for i, (key_a, net_a) in enumerate(networks):
        for key_b, net_b in networks[i + 1 :]:
            same_tenant = key_a.split(".network")[0] == key_b.split(".network")[0]
            if net_a.overlaps(net_b) and not same_tenant:
                problems.append(
                    f"{key_b} {net_b} overlaps {key_a} {net_a}: give every tenant and the "
                    "management cluster disjoint ranges"
                )
    return problems


def _management_namespace_problems(platform: PlatformConfig) -> list[str]:
    """One namespace per tenant: a tenant's NetworkPolicies admit all of its namespace."""
    return [
        f"tenants[].managementNamespace.name: {dupe!r} is the namespace of more than one "
        "tenant; give each its own (a tenant's NetworkPolicies admit all of its namespace)"
        for dupe in _repeated(t.namespace for t in platform.tenants)
    ]


def _larger_than_every_card(tenant: Tenant, memory_mib: int | None) -> str | None:
    """Why a per-card ``gpumem`` request can never be granted on this tenant's cards (HAMi
    grants a container's memory on one card: Project-HAMi/HAMi v2.10.0
    pkg/device/nvidia/device.go:789-791 skips a card whose ``Totalmem - Usedmem`` is below the
    request, CardInsufficientMemory), or None when one card can."""
    cards = [card for pool in tenant.worker_pools for card, _count in pool.resolved_cards()]
    if memory_mib is None or not cards:
        return None
    largest = max(cards, key=lambda card: card.memory_mib)
    if memory_mib <= largest.memory_mib:
        return None
    return (
        f"{memory_mib} MiB per card is more than this tenant's largest card holds "
        f"({largest.memory_mib} MiB, {largest.name}), so no quota would let it run: ask at most "
        f"{largest.memory_mib} or add a pool with larger cards"
    )


def _workload_quota_problems(platform: PlatformConfig) -> list[str]:
    """Declared workloads must fit the GPU quotas the same tenant declares, and a tenant with
    quotas must not declare a workload in a namespace none covers (it would run unmetered).

    What a pod counts against a quota is what HAMi counts: every card of every container adds
    its ``gpumem`` and ``gpucores`` (HAMi v2.10.0 pkg/device/nvidia/device.go:673-691 sums
    ``Usedmem``/``Usedcores`` over the allocated devices, pkg/device/quota.go:62-95 FitQuota
    compares ``Used + request`` with the ``limits.`` quota), and Kubernetes counts
    ``requests.nvidia.com/gpu``: the cards. A request by ``memoryPercentage`` is sized only on the
    node, so its memory is not summed here."""
    problems: list[str] = []
    for t_index, tenant in enumerate(platform.tenants):
        quotas = {
            quota.namespace: (q_index, quota) for q_index, quota in enumerate(tenant.gpu_quotas)
        }
        totals: dict[str, list[int]] = {}
        for w_index, workload in enumerate(tenant.workloads):
            if quotas and workload.namespace not in quotas:
                problems.append(
                    f"tenants[{t_index}].workloads[{w_index}].namespace: {workload.namespace!r} "
                    "has no gpuQuotas entry, so its GPU use would not be metered; add a quota for "
                    "it or move the workload to a namespace that has one"
                )
                continue
            never_fits = _larger_than_every_card(tenant, workload.gpu.memory_mib)
            if never_fits is not None:
                # Checked before the quota: raising a quota for a request no card can hold is
                # a dead end (the pack's capacity fit then says it never schedules).
                problems.append(
                    f"tenants[{t_index}].workloads[{w_index}].gpu.memoryMiB: {never_fits}"
                )
                continue
            cards = workload.replicas * workload.gpu.cards
            total = totals.setdefault(workload.namespace, [0, 0, 0])
            total[0] += cards * (workload.gpu.memory_mib or 0)
            total[1] += cards * workload.gpu.cores
            total[2] += cards
        for namespace, (memory, cores, cards) in totals.items():
            if namespace not in quotas:
                continue
            q_index, quota = quotas[namespace]
            key = f"tenants[{t_index}].gpuQuotas[{q_index}]"
            for field, declared, limit in (
                ("gpuMemoryMiB", memory, quota.gpu_memory_mib),
                ("gpuCores", cores, quota.gpu_cores),
                ("gpus", cards, quota.gpus),
            ):
                if declared > limit:
                    problems.append(
                        f"{key}.{field}: the workloads this tenant declares in {namespace!r} need "
                        f"{declared} (replicas x cards x request) and the quota allows {limit}; "
                        f"raise it to at least {declared} or shrink the workloads"
                    )
    return problems


def _net(cidr: str) -> ipaddress.IPv4Network | ipaddress.IPv6Network:
    return ipaddress.ip_network(cidr)


def _repeated(values: Iterable[str]) -> list[str]:
    return sorted(value for value, n in Counter(values).items() if n > 1)


def _duplicates(key: str, values: list[str]) -> list[str]:
    return [
        f"{key}: {dupe!r} is declared twice; names must be unique" for dupe in _repeated(values)
    ]
