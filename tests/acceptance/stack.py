"""The deployed stack as the acceptance suite sees it: its outputs, its config, what to expect.

* Outputs come from the Pulumi CLI (``pulumi stack output --json --show-secrets --stack <s>``,
  run in the repository root, with whatever backend/passphrase environment the operator uses).
* Expectations come from the stack's config file ``Pulumi.<stack>.yaml`` validated with
  ``components.stack.parse_platform``: tenant names, declared cards (``resolved_cards()``),
  slots per card, datastore schemas, GPU quotas. Never from constants, so the same suite runs
  against a prod stack.

``StackUnavailableError`` means "no stack is deployed" - no Pulumi CLI, no such stack, no
outputs - and is the only reason the suite skips (with its one-line message). Once a stack has
outputs, anything else that stops the suite (``StackBrokenError``: the CLI failing for another
reason such as a wrong passphrase, a timeout, unreadable output, a missing stack file;
``OutputsError``: outputs that are not the program's) is a failure, so a broken lab never reports
success. Everything except ``read_outputs`` is pure and unit-tested offline.
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import yaml

from components.catalog import CardModel
from components.config import CONFIG_KEY, PlatformConfig, Tenant, WorkerPool
from components.stack import parse_platform
from tests.acceptance.hami_evidence import (
    NVIDIA_GPU,
    NVIDIA_GPUCORES,
    NVIDIA_GPUMEM,
    Inventory,
)

# HAMi chart 2.10.0 values.yaml resourceMemPercentage; the mock device plugin advertises it too.
NVIDIA_GPUMEM_PERCENTAGE = "nvidia.com/gpumem-percentage"

REPO_ROOT = Path(__file__).resolve().parents[2]
STACK_ENV = "GPU_PLATFORM_STACK"
DEFAULT_STACK = "lab"
CLI_TIMEOUT_SECONDS = 60.0

# The report's scenario (acceptance.md TC-04..TC-06).
REPORT_POD_MEMORY_MIB = 20_000
REPORT_POD_CORES = 30
REPORT_OVERSIZED_MEMORY_MIB = 90_000
# The catalog holds what NVML reports (components/catalog.py), so a real node registers at least
# the declared MiB; up to 5 % more is a conservative figure (ECC off, another driver branch: e.g.
# the A100-80GB's 81,920 against 81,252 on drivers before R510), more than that another card
# model than declared. The lab's declared inventory is exact (hami_evidence.memory_matches).
PROD_MEMORY_TOLERANCE = 0.05


class StackUnavailableError(Exception):
    """No stack is deployed (no CLI, no such stack, no outputs); the message is the one-line
    skip reason."""


class StackBrokenError(Exception):
    """The stack exists but cannot be read or checked; the message says why (a failure)."""


# The CLI's answer when the stack does not exist (pulumi pkg/cmd/pulumi: "no stack named '%s'
# found"): the one CLI error that means "nothing deployed".
NO_STACK_TEXT = "no stack named"


def device_mode(platform: PlatformConfig, pool: WorkerPool) -> str:
    """The pool's device plugin: its own ``deviceMode``, else its environment's default."""
    from components.stack import substrate_for

    return pool.device_mode or substrate_for(platform).default_device_mode()


def stack_name(environ: Mapping[str, str] | None = None) -> str:
    """The stack under test: env ``GPU_PLATFORM_STACK``, default ``lab``."""
    env = os.environ if environ is None else environ
    return env.get(STACK_ENV, "").strip() or DEFAULT_STACK


def project_name(repo_root: Path = REPO_ROOT) -> str:
    data = yaml.safe_load((repo_root / "Pulumi.yaml").read_text()) or {}
    return str(data.get("name", "gpu-platform"))


def load_platform(stack: str, repo_root: Path = REPO_ROOT) -> PlatformConfig:
    """The stack's platform config, validated exactly as the program validates it."""
    path = repo_root / f"Pulumi.{stack}.yaml"
    if not path.is_file():
        raise StackUnavailableError(
            f"no stack file {path.name}: the suite takes expectations from it"
        )
    data = yaml.safe_load(path.read_text()) or {}
    config = data.get("config") or {}
    key = f"{project_name(repo_root)}:{CONFIG_KEY}"
    return parse_platform(config.get(key, config.get(CONFIG_KEY)))


# ----------------------------------------------------------------------------- outputs


@dataclass(frozen=True)
class PoolOutputs:
    nodes: tuple[str, ...]
    inventory: Mapping[str, Any]


@dataclass(frozen=True)
class TenantOutputs:
    name: str
    namespace: str
    control_plane: str
    endpoint: str
    version: str
    pools: Mapping[str, PoolOutputs]
    kubeconfig: str = field(repr=False)

    @property
    def nodes(self) -> list[str]:
        return sorted({node for pool in self.pools.values() for node in pool.nodes})


@dataclass(frozen=True)
class StackOutputs:
    mode: str
    kubernetes_version: str
    versions: Mapping[str, Any]
    tenants: Mapping[str, TenantOutputs]
    management_kubeconfig: str = field(repr=False)


class OutputsError(ValueError):
    """The stack has outputs, but not the ones the program exports (stale or broken)."""


def _mapping(value: Any, what: str) -> Mapping[str, Any]:
    if not isinstance(value, Mapping):
        raise OutputsError(f"stack output {what} is not an object")
    return value


def _text(value: Any, what: str) -> str:
    if not isinstance(value, str) or not value:
        raise OutputsError(f"stack output {what} is missing or empty")
    return value


def parse_outputs(raw: Mapping[str, Any], stack: str) -> StackOutputs:
    """Validate ``pulumi stack output --json`` for the suite."""
    if not raw:
        raise StackUnavailableError(
            f"stack {stack!r} has no outputs: run `pulumi up -s {stack}` first"
        )
    tenants_raw = _mapping(raw.get("tenants"), "tenants")
    kubeconfigs = _mapping(raw.get("tenantKubeconfigs"), "tenantKubeconfigs")
    tenants: dict[str, TenantOutputs] = {}
    for name, summary_raw in tenants_raw.items():
        summary = _mapping(summary_raw, f"tenants.{name}")
        pools: dict[str, PoolOutputs] = {}
        for pool_name, pool_raw in _mapping(
            summary.get("pools", {}), f"tenants.{name}.pools"
        ).items():
            pool = _mapping(pool_raw, f"tenants.{name}.pools.{pool_name}")
            nodes = pool.get("nodes") or []
            if not isinstance(nodes, list) or not all(isinstance(n, str) for n in nodes):
                raise OutputsError(
                    f"stack output tenants.{name}.pools.{pool_name}.nodes is not a list"
                )
            inventory = pool.get("inventory") or {}
            pools[pool_name] = PoolOutputs(
                nodes=tuple(nodes), inventory=inventory if isinstance(inventory, Mapping) else {}
            )
        tenants[name] = TenantOutputs(
            name=name,
            namespace=_text(summary.get("namespace"), f"tenants.{name}.namespace"),
            control_plane=_text(summary.get("controlPlane"), f"tenants.{name}.controlPlane"),
            endpoint=str(summary.get("endpoint") or ""),
            version=str(summary.get("version") or ""),
            pools=pools,
            kubeconfig=_text(kubeconfigs.get(name), f"tenantKubeconfigs.{name}"),
        )
    versions = raw.get("versions")
    return StackOutputs(
        mode=str(raw.get("mode") or ""),
        kubernetes_version=str(raw.get("kubernetesVersion") or ""),
        versions=versions if isinstance(versions, Mapping) else {},
        tenants=tenants,
        management_kubeconfig=_text(raw.get("managementKubeconfig"), "managementKubeconfig"),
    )


def check_outputs_match_config(outputs: StackOutputs, platform: PlatformConfig) -> list[str]:
    """Problems when the deployed outputs do not belong to this config (stale stack)."""
    problems: list[str] = []
    declared = [t.name for t in platform.tenants]
    if sorted(outputs.tenants) != sorted(declared):
        problems.append(
            f"stack outputs list tenants {sorted(outputs.tenants)} but the stack file declares "
            f"{sorted(declared)}: run `pulumi up` to bring the stack in line"
        )
    for tenant in platform.tenants:
        out = outputs.tenants.get(tenant.name)
        if out is None:
            continue
        missing = sorted({p.name for p in tenant.worker_pools} - set(out.pools))
        if missing:
            problems.append(f"stack outputs for {tenant.name} lack pools {', '.join(missing)}")
    return problems


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def read_outputs(
    stack: str,
    *,
    cwd: Path = REPO_ROOT,
    which: Callable[[str], str | None] = shutil.which,
    run: Runner = subprocess.run,
    timeout: float = CLI_TIMEOUT_SECONDS,
) -> dict[str, Any]:
    """``pulumi stack output --json --show-secrets --stack <stack>``.

    StackUnavailableError (skip) when there is no CLI or no such stack; StackBrokenError
    (failure) when the CLI fails otherwise (wrong passphrase or backend, a timeout) or prints no
    JSON object - the CLI's own first error line says why."""
    cli = which("pulumi")
    if cli is None:
        raise StackUnavailableError(
            f"no Pulumi CLI on PATH: install it, run `pulumi up -s {stack}`, then this suite"
        )
    command = [cli, "stack", "output", "--json", "--show-secrets", "--stack", stack]
    try:
        done = run(command, cwd=cwd, capture_output=True, text=True, timeout=timeout, check=False)
    except subprocess.TimeoutExpired:
        raise StackBrokenError(
            f"`pulumi stack output --stack {stack}` took over {timeout:.0f} s"
        ) from None
    except OSError as exc:
        raise StackBrokenError(f"cannot run the Pulumi CLI: {exc}") from None
    if done.returncode != 0:
        lines = [line.strip() for line in (done.stderr or "").splitlines() if line.strip()]
        why = lines[0] if lines else f"exit code {done.returncode}"
        if NO_STACK_TEXT in why:
            raise StackUnavailableError(f"no stack {stack!r} is deployed here: {why}")
        raise StackBrokenError(f"`pulumi stack output --stack {stack}` failed: {why}")
    try:
        data = json.loads(done.stdout or "{}")
    except json.JSONDecodeError:
        raise StackBrokenError(
            f"`pulumi stack output --json --stack {stack}` did not print JSON"
        ) from None
    if not isinstance(data, dict):
        raise StackBrokenError(
            f"`pulumi stack output --json --stack {stack}` did not print an object"
        )
    return data


def deployed_stack(
    stack: str,
    *,
    read: Callable[[str], Mapping[str, Any]] = read_outputs,
    load: Callable[[str], PlatformConfig] = load_platform,
) -> tuple[StackOutputs, PlatformConfig]:
    """The deployed stack's outputs and config.

    Raises StackUnavailableError (skip) only when nothing is deployed: no CLI, no such stack, no
    outputs. Once outputs exist, StackBrokenError or OutputsError (failures): the CLI failing
    otherwise, a missing stack file, outputs that do not belong to the stack file."""
    outputs = parse_outputs(read(stack), stack)
    try:
        platform = load(stack)
    except StackUnavailableError as exc:
        raise StackBrokenError(f"stack {stack!r} has outputs but {exc}") from None
    problems = check_outputs_match_config(outputs, platform)
    if problems:
        raise OutputsError("; ".join(problems))
    return outputs, platform


def unreachable_failure(stack: str, unreachable: Mapping[str, str], clusters: int) -> str | None:
    """The failure message when no API server of a deployed stack answers (else None): the
    stack is deployed, so this is a broken lab (kind stopped, MetalLB route lost), never a skip."""
    if clusters and len(unreachable) == clusters:
        return f"stack {stack!r} is deployed but no API server answers from here: " + "; ".join(
            unreachable.values()
        )
    return None


# ------------------------------------------------------------------------- expectations


def node_inventory(pool: WorkerPool) -> Inventory:
    """What one node of the pool declares: its cards, MiB, compute units and sharing slots."""
    total = Inventory()
    for card, count in pool.resolved_cards():
        total = total + Inventory(
            cards=count,
            memory_mib=card.memory_mib * count,
            core_units=card.core_units * count,
            slots=pool.slots_per_card * count,
        )
    return total


def tenant_inventory(tenant: Tenant) -> Inventory:
    """All the tenant's pools: per-node inventory times replicas."""
    total = Inventory()
    for pool in tenant.worker_pools:
        total = total + node_inventory(pool).times(pool.replicas)
    return total


def shares_with_hami(tenant: Tenant) -> bool:
    """The tenant's cards are HAMi's (``gpuSharing: hami``, the default). A ``dra`` tenant's
    are published by its DRA driver as ResourceSlices (docs/dra.md): no HAMi inventory, mock
    device plugin, allocation or series to judge there; the HAMi tests leave it out and say so."""
    return tenant.gpu_sharing == "hami"


def hami_tenants(platform: PlatformConfig) -> list[Tenant]:
    return [t for t in platform.tenants if shares_with_hami(t)]


def uses_mock(platform: PlatformConfig, pool: WorkerPool) -> bool:
    """The pool's nodes run HAMi's mock device plugin (lab default) instead of the real one."""
    return device_mode(platform, pool) == "mock"


# What HAMi's mock device plugin v1.0.1 advertises for a node, computed here from the declared
# inventory (not from the platform's code). internal/pkg/api/device/nvidia/device.go:164-200
# GetResource: per card of the node's hami.io/node-nvidia-register, gpumem += devmem (MiB),
# gpucores += devcore, gpumem-percentage += 100; gpumem divided by memoryFactor when > 1 (the
# device config it reads sets 1, as HAMi chart 2.10.0 templates/scheduler/device-configmap.yaml
# does, so the kubelet counts gpumem in the scheduler's unit). It advertises nothing
# while the node's nvidia.com/gpu capacity is absent or 0 (device.go:173, CheckHealthy). The
# kubelet lists each advertised unit as one device: capacity = allocatable = that number.
MOCK_MEMORY_FACTOR = 1


def mock_plugin_resources(per_node: Inventory) -> dict[str, int]:
    """The mock device plugin's resources on one node with this inventory."""
    return {
        NVIDIA_GPUMEM: per_node.memory_mib // MOCK_MEMORY_FACTOR,
        NVIDIA_GPUCORES: per_node.core_units,
        NVIDIA_GPUMEM_PERCENTAGE: 100 * per_node.cards,
    }


def node_resources(platform: PlatformConfig, pool: WorkerPool) -> dict[str, int]:
    """What each node of the pool must show as capacity and allocatable: nvidia.com/gpu = cards x
    slots (HAMi's device plugin, or in the lab the platform's patch the mock plugin and HAMi's
    health gate need) and, for mock pools, the mock device plugin's resources."""
    per_node = node_inventory(pool)
    wanted = {NVIDIA_GPU: per_node.slots}
    if uses_mock(platform, pool):
        wanted.update(mock_plugin_resources(per_node))
    return wanted


def expected_capacity(platform: PlatformConfig, tenant: Tenant) -> dict[str, int]:
    """The GPU capacity the tenant's nodes must advertise in total (TC-07/08): nvidia.com/gpu =
    slots of every pool; nvidia.com/gpumem (MiB) and gpucores (units) from the mock device plugin
    of the pools that use it (the real plugin does not advertise them). Every key is required."""
    if not tenant.worker_pools or not shares_with_hami(tenant):
        return {}
    total: dict[str, int] = {NVIDIA_GPU: tenant_inventory(tenant).slots}
    for pool in tenant.worker_pools:
        if not uses_mock(platform, pool):
            continue
        per_node = mock_plugin_resources(node_inventory(pool))
        for key in (NVIDIA_GPUMEM, NVIDIA_GPUCORES):
            total[key] = total.get(key, 0) + per_node[key] * pool.replicas
    return total


def memory_tolerance(platform: PlatformConfig) -> float:
    return 0.0 if platform.mode == "lab" else PROD_MEMORY_TOLERANCE


@dataclass(frozen=True)
class SharingPlan:
    """TC-04..TC-06 on one card: ``fitting_pods`` pods of ``pod_memory_mib`` / ``pod_cores``
    fit; one more fails on cores while its memory still fits; ``oversized_memory_mib`` fails on
    memory. For the lab's A100 80GB: 3 x (20000 MiB, 30 %), the 4th refused at 120 %
    (80000 <= 81920 MiB), 90000 MiB refused."""

    tenant: str
    pool: str
    card: CardModel
    slots_per_card: int
    replicas: int
    pod_memory_mib: int
    pod_cores: int
    fitting_pods: int
    oversized_memory_mib: int

    @property
    def expected_memory_mib(self) -> int:
        return self.fitting_pods * self.pod_memory_mib

    @property
    def expected_cores(self) -> int:
        return self.fitting_pods * self.pod_cores

    @property
    def memory_with_one_more(self) -> int:
        return (self.fitting_pods + 1) * self.pod_memory_mib

    def as_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "pool": self.pool,
            "card": {
                "model": self.card.name,
                "memoryMiB": self.card.memory_mib,
                "coreUnits": self.card.core_units,
            },
            "podMemoryMiB": self.pod_memory_mib,
            "podCores": self.pod_cores,
            "fittingPods": self.fitting_pods,
            "oversizedMemoryMiB": self.oversized_memory_mib,
        }


def plan_sharing(
    platform: PlatformConfig,
    *,
    pod_memory_mib: int = REPORT_POD_MEMORY_MIB,
    pod_cores: int = REPORT_POD_CORES,
) -> SharingPlan | None:
    """The first tenant pool whose nodes carry exactly one card on which the report's scenario
    works: cores run out before memory and slots (a single card of >= 4 x 20000 MiB and 100
    compute units, >= 4 slots). None when no tenant declares such a pool."""
    for tenant in hami_tenants(platform):
        for pool in tenant.worker_pools:
            cards = pool.resolved_cards()
            if len(cards) != 1 or cards[0][1] != 1:
                continue
            card = cards[0][0]
            if card.core_units != 100:
                continue
            fitting = card.core_units // pod_cores
            if fitting < 1:
                continue
            if (fitting + 1) * pod_memory_mib > card.memory_mib:
                continue
            if pool.slots_per_card < fitting + 1:
                continue
            return SharingPlan(
                tenant=tenant.name,
                pool=pool.name,
                card=card,
                slots_per_card=pool.slots_per_card,
                replicas=pool.replicas,
                pod_memory_mib=pod_memory_mib,
                pod_cores=pod_cores,
                fitting_pods=fitting,
                oversized_memory_mib=max(REPORT_OVERSIZED_MEMORY_MIB, card.memory_mib + 1),
            )
    return None


@dataclass(frozen=True)
class AccumulationSizes:
    """TC-06's accumulation case on one card: a holder takes half the card; a second pod asks one
    MiB more than what is left - it fits the card alone, not beside the holder."""

    card_mib: int
    holder_mib: int
    second_mib: int

    def as_dict(self) -> dict[str, int]:
        return {
            "cardMiB": self.card_mib,
            "holderMiB": self.holder_mib,
            "secondMiB": self.second_mib,
        }


def accumulation_sizes(card_memory_mib: int) -> AccumulationSizes:
    """Half the card (rounded down) for the holder, the rest + 1 MiB for the second pod: HAMi's
    Fit refuses memory when ``Totalmem - Usedmem < memreq`` (HAMi v2.10.0
    pkg/device/nvidia/device.go:789-791), so 81920 MiB gives 40960 + 40961: refused by one MiB,
    while 40961 alone fits."""
    holder = card_memory_mib // 2
    return AccumulationSizes(card_memory_mib, holder, card_memory_mib - holder + 1)


def visibility_test_id(index: int) -> str:
    """TC-07 for the first tenant, TC-08 for the second, TC-08.1, TC-08.2 ... for more."""
    if index == 0:
        return "TC-07"
    if index == 1:
        return "TC-08"
    return f"TC-08.{index - 1}"
