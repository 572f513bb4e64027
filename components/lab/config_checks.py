"""What a lab stack's configuration must also satisfy: kind, containers and simulated GPUs.

Called by ``components.stack`` after the models validated, together with the checks every
stack has, so one error lists every problem. Each line names the key and the fix.
"""

from __future__ import annotations

from components import kubernetes_versions
from components.config import PlatformConfig
from components.lab import dra_driver
from components.lab.mock_device_plugin import MAX_NODE_MEMORY_MIB
from components.lab.network import pinned_address_problems, pool_size_problem
from components.versions import KIND_RELEASE


def problems(platform: PlatformConfig) -> list[str]:
    found = _management(platform)
    if found:  # the checks below read management.kind
        return found
    return [
        *_versions(platform),
        *_pools(platform),
        *_management_namespaces(platform),
        *_gpu_driver(platform),
        *_addresses(platform),
        *_dra_driver(platform),
    ]


def _dra_driver(platform: PlatformConfig) -> list[str]:
    """A ``gpuSharing: dra`` tenant's cards come from the lab's fake DRA driver
    (``components.lab.dra_driver``), which publishes only 80Gi/100-unit cards, the same count
    on every node."""
    found: list[str] = []
    release = f"dra-example-driver {dra_driver.DRIVER_RELEASE}"
    for t_index, tenant in enumerate(platform.tenants):
        if tenant.gpu_sharing != "dra":
            continue
        for p_index, pool in enumerate(tenant.worker_pools):
            if not dra_driver.publishable(pool.resolved_cards()):
                found.append(
                    f"tenants[{t_index}].workerPools[{p_index}].cards: the lab's DRA driver "
                    f"({release}) publishes every card as {dra_driver.CARD_MEMORY_MIB} MiB and "
                    f"{dra_driver.CARD_COMPUTE} compute units; declare A100-80GB cards or keep "
                    "gpuSharing: hami"
                )
        counts = dra_driver.cards_per_node([pool.resolved_cards() for pool in tenant.worker_pools])
        if len(counts) > 1:
            found.append(
                f"tenants[{t_index}].workerPools: the lab's DRA driver ({release}) publishes "
                f"one card count on every node, and the pools declare {sorted(counts)}; give "
                "every pool the same number of cards per node or keep gpuSharing: hami"
            )
    return found


def _management(platform: PlatformConfig) -> list[str]:
    if platform.management.kind is None or platform.management.existing:
        return ["management: mode lab needs management.kind (and no management.existing)"]
    return []


def _versions(platform: PlatformConfig) -> list[str]:
    """Lab workers are kindest/node containers: every tenant version needs a node image of the
    pinned kind release (``components.kubernetes_versions.kind_versions``), and a workerImage
    must be of the version of every tenant it serves (a kubelet newer than its API server, or
    another minor, breaks the version-skew policy)."""
    allowed = kubernetes_versions.kind_versions()
    what = f"a version kind {KIND_RELEASE} publishes a node image for"
    found: list[str] = []
    keyed = [("kubernetesVersion", platform.kubernetes_version)] + [
        (f"tenants[{index}].kubernetesVersion", tenant.kubernetes_version)
        for index, tenant in enumerate(platform.tenants)
        if tenant.kubernetes_version is not None
    ]
    if platform.worker_image is None:
        for key, version in keyed:
            problem = kubernetes_versions.version_problem(version, allowed, what)
            if problem is not None:
                found.append(f"{key}: {problem}")
        return found
    tag = platform.worker_image.split("@", 1)[0].rsplit(":", 1)[-1]
    for index, tenant in enumerate(platform.tenants):
        version = platform.version_of(tenant)
        if tag != version:
            found.append(
                f"workerImage {platform.worker_image} is not {version} (tenants[{index}] "
                f"{tenant.name}): workers must run the tenant version "
                f"(kindest/node:{version}), or drop the key"
            )
    return found


def _pools(platform: PlatformConfig) -> list[str]:
    found: list[str] = []
    for t_index, tenant in enumerate(platform.tenants):
        for p_index, pool in enumerate(tenant.worker_pools):
            key = f"tenants[{t_index}].workerPools[{p_index}]"
            mock = (pool.device_mode or "mock") == "mock"
            if not mock:
                found.append(
                    f"{key}.deviceMode: the lab's kindest/node workers have no GPUs; use mock"
                )
            if pool.machine is not None:
                found.append(f"{key}.machine: lab workers are containers; remove machine")
            memory = sum(card.memory_mib * count for card, count in pool.resolved_cards())
            if mock and memory > MAX_NODE_MEMORY_MIB:
                found.append(
                    f"{key}.cards: {memory} MiB per node is more than the mock device "
                    f"plugin can advertise ({MAX_NODE_MEMORY_MIB} MiB: one device per "
                    "MiB in one message to the kubelet); put fewer cards on each node and "
                    "raise replicas"
                )
    return found


def _management_namespaces(platform: PlatformConfig) -> list[str]:
    return [
        f"tenants[{index}].managementNamespace.existing: the lab's kind cluster is created by "
        "this program, so no namespace exists in it beforehand; remove existing"
        for index, tenant in enumerate(platform.tenants)
        if tenant.management_namespace.existing
    ]


def _gpu_driver(platform: PlatformConfig) -> list[str]:
    if "gpu_driver" in platform.model_fields_set:
        return ["gpuDriver: the lab's GPUs are simulated and get no driver; remove gpuDriver"]
    return []


def _addresses(platform: PlatformConfig) -> list[str]:
    """Lab tenants without a pin get their address from MetalLB (components.lab.network):
    the pool must hold one per tenant, and no address may be pinned twice."""
    too_small = pool_size_problem(platform.kind.metallb_pool_size, len(platform.tenants))
    if too_small is not None:
        return [too_small]
    return pinned_address_problems(
        [(tenant.name, tenant.control_plane.address) for tenant in platform.tenants]
    )
