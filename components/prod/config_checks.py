"""What a prod stack's configuration must also satisfy: an existing cluster, Cluster API
machines, real GPUs, a dedicated datastore per tenant and, with Metal3, adopted namespaces.

Called by ``components.stack`` after the models validated, together with the checks every
stack has, so one error lists every problem. Each line names the key and the fix.
"""

from __future__ import annotations

from collections.abc import Iterable

from components.config import PlatformConfig
from components.kubernetes_versions import fractions_problem
from components.prod.tenant_values import gpu_cluster_problem


def problems(platform: PlatformConfig) -> list[str]:
    found = _management(platform)
    if found:  # the checks below read management.existing
        return found
    return [
        *_worker_image(platform),
        *_shared_datastores(platform),
        *_pools(platform),
        *_management_namespaces(platform),
        *_pool_providers(platform),
        *_shared_addresses(platform),
        *_backup_targets(platform),
        *_dra(platform),
    ]


def _dra(platform: PlatformConfig) -> list[str]:
    """What NVIDIA's DRA driver, run by each dra tenant's GPU Operator through its GPUCluster
    (``components.prod.tenant_values.gpu_cluster_values``), cannot serve: a driver the GPUCluster
    does not install (``gpu_cluster_problem``), and a fraction of a card. The driver publishes a
    card's ``memory`` capacity but no ``compute`` (kubernetes-sigs/dra-driver-nvidia-gpu main
    95932046 cmd/gpu-kubelet-plugin/deviceinfo.go:249-255, partitions.go:34-43), and shares
    memory only behind its own alpha ConsumableShares gate (consumable_shares.go:29-38,
    pkg/featuregates/featuregates.go:201-204), so the claims ``components.dra`` writes for a
    fraction could not be met even where Kubernetes' DRAConsumableCapacity is on; where it is
    off, ``components.config`` refuses the fraction already (one line per key, not two)."""
    dra_tenants = [(i, t) for i, t in enumerate(platform.tenants) if t.gpu_sharing == "dra"]
    found: list[str] = []
    driver_problem = gpu_cluster_problem(platform.gpu_driver)
    if driver_problem is not None:
        found += [f"tenants[{i}].gpuSharing: dra: {driver_problem}" for i, _ in dra_tenants]
    for t_index, tenant in dra_tenants:
        if fractions_problem(platform.version_of(tenant)) is not None:
            continue
        found += [
            f"tenants[{t_index}].workloads[{w_index}].gpu.cores: {workload.gpu.cores} is a "
            "fraction of a card: NVIDIA's DRA driver publishes no compute capacity to share; "
            "ask for cores: 100 (whole cards) or keep gpuSharing: hami"
            for w_index, workload in enumerate(tenant.workloads)
            if workload.gpu.cores < 100
        ]
    return found


def _backup_targets(platform: PlatformConfig) -> list[str]:
    """Prod has no object store of its own: every backed-up tenant names its S3 target."""
    return [
        f"tenants[{index}].backups.targetConfigKey: prod keeps {tenant.name}'s backups in your "
        "S3-compatible storage: name a secret config key (e.g. "
        f"{_camel(tenant.name)}BackupTarget) and set it with `pulumi config set --secret "
        "<key> < target.json` (docs/backups.md), or set backups.enabled: false"
        for index, tenant in enumerate(platform.tenants)
        if tenant.backups.enabled and tenant.backups.target_config_key is None
    ]


def _camel(name: str) -> str:
    """``team-vision`` -> ``teamVision``: a config key name suggested from a tenant name."""
    head, *rest = name.split("-")
    return head + "".join(part.capitalize() for part in rest)


def _management(platform: PlatformConfig) -> list[str]:
    if platform.management.existing is None or platform.management.kind:
        return ["management: mode prod needs management.existing (and no management.kind)"]
    return []


def _worker_image(platform: PlatformConfig) -> list[str]:
    if platform.worker_image is not None:
        return ["workerImage: prod workers are Cluster API machines; remove workerImage"]
    return []


def _shared(values: Iterable[tuple[str | None, str]]) -> dict[str, list[str]]:
    """Each value more than one tenant names (None is no value) -> those tenants' names."""
    owners: dict[str, list[str]] = {}
    for value, tenant in values:
        if value is not None:
            owners.setdefault(value, []).append(tenant)
    return {value: tenants for value, tenants in owners.items() if len(tenants) > 1}


def _shared_datastores(platform: PlatformConfig) -> list[str]:
    users = _shared((t.data_store.name, t.name) for t in platform.tenants)
    return [
        f"tenants {', '.join(tenants)} share DataStore {name!r}: prod requires a "
        "dedicated DataStore per tenant (dataStore.dedicated)"
        for name, tenants in users.items()
    ]


def _metal3(platform: PlatformConfig) -> bool:
    return platform.existing.cluster_api.infrastructure.name == "metal3"


def _pools(platform: PlatformConfig) -> list[str]:
    found: list[str] = []
    for t_index, tenant in enumerate(platform.tenants):
        for p_index, pool in enumerate(tenant.worker_pools):
            key = f"tenants[{t_index}].workerPools[{p_index}]"
            if (pool.device_mode or "nvidia") == "mock":
                found.append(f"{key}.deviceMode: mock GPUs are lab-only; use nvidia in prod")
            if pool.machine is None:
                found.append(f"{key}.machine: prod pools need a Cluster API machine spec")
    for t_index, tenant in enumerate(platform.tenants):
        slots = {pool.slots_per_card for pool in tenant.worker_pools}
        if len(slots) > 1:
            found.append(
                f"tenants[{t_index}].workerPools[].slotsPerCard: HAMi's device plugin "
                f"splits every card of a tenant the same way, but the pools say "
                f"{sorted(slots)}; give them one value"
            )
    if _metal3(platform):
        for t_index, tenant in enumerate(platform.tenants):
            if tenant.control_plane.address is None:
                found.append(
                    f"tenants[{t_index}].controlPlane.address: Metal3 clusters need a fixed "
                    "control-plane endpoint; give the LoadBalancer IP the tenant's API will use"
                )
    return found


def _management_namespaces(platform: PlatformConfig) -> list[str]:
    """Adoption is required on Metal3.

    CAPM3 picks BareMetalHosts only in the Metal3Machine's own namespace (CAPM3 v1.13.2
    baremetal/metal3machine_manager.go:857-869, ``client.InNamespace``) and Cluster API keeps
    a cluster's objects in one namespace, so the tenant's hosts must be enrolled in its
    namespace before ``up``. A namespace the program created would then fail with
    AlreadyExists (pulumi-kubernetes v4.32.0 provider/pkg/await/await.go:274-291), and
    ``destroy`` would delete it with the hosts and their BMC Secrets in it."""
    if not _metal3(platform):
        return []
    return [
        f"tenants[{index}].managementNamespace.existing: Metal3 machines take BareMetalHosts "
        f"only from their own namespace ({tenant.namespace!r}); enrol the tenant's hosts there "
        "and set existing: true, so the program adopts the namespace and never deletes it"
        for index, tenant in enumerate(platform.tenants)
        if not tenant.management_namespace.existing
    ]


def _pool_providers(platform: PlatformConfig) -> list[str]:
    """A pool's machine template must belong to the infrastructure provider the stack
    installs: a DockerMachineTemplate with only CAPM3 installed (or the reverse) is never
    reconciled, and the MachineDeployment waits forever for machines."""
    installed = platform.existing.cluster_api.infrastructure.name
    return [
        f"tenants[{t_index}].workerPools[{p_index}].machine.provider: "
        f"{pool.machine.provider!r} is not the installed infrastructure provider "
        f"({installed!r}, management.existing.clusterApi.infrastructure.name); "
        "use the same for both"
        for t_index, tenant in enumerate(platform.tenants)
        for p_index, pool in enumerate(tenant.worker_pools)
        if pool.machine is not None and pool.machine.provider != installed
    ]


def _shared_addresses(platform: PlatformConfig) -> list[str]:
    """Two control planes cannot answer on one LoadBalancer address (the lab refuses the same in
    components.lab.network.pinned_address_problems)."""
    owners = _shared((t.control_plane.address, t.name) for t in platform.tenants)
    return [
        f"tenants[].controlPlane.address: {address} is given to {', '.join(names)}; give every "
        "tenant its own control-plane address"
        for address, names in owners.items()
    ]
