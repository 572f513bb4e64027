"""The seam between the two environments: what differs between ``lab`` and ``prod``.

The three components (``ManagementCluster``, ``GpuTenant``, ``GpuWorkerPool``) build what every
platform has — Kamaji, a tenant's namespace, Calico, HAMi, quotas, declared inventories — and
ask the stack's ``Substrate`` for everything else: where the management cluster comes from, how
a tenant's control plane gets its address, how worker machines are made and joined, which
device plugin and driver the GPU nodes use, and what is checked before anything is created.
The stack chooses its substrate once (``components.stack``); nothing above this module compares
the mode. One package per environment implements it: ``components.lab`` (kind, Docker workers,
MetalLB, the host preflight, its own kube-proxy, HAMi's mock device plugin and the allocation
completer) and ``components.prod`` (an existing cluster, the Cluster API operator and providers,
Metal3 machines, the NVIDIA GPU Operator). Adding an environment is adding a package that
implements this interface and one line in ``components.stack``.

The interface is structural (``typing.Protocol``): the environment packages never import the
components, only the views of them declared here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Protocol

import pulumi

if TYPE_CHECKING:
    import pulumi_kubernetes as k8s

    from components.config import PlatformConfig
    from components.sites import InsideTenant, KubeconfigRead, PoolSite, TenantSite


# ------------------------------------------------------------------ views of the components


class ManagementView(Protocol):
    """What an environment may use of the ``ManagementCluster``."""

    @property
    def provider(self) -> k8s.Provider: ...
    @property
    def kind_network(self) -> pulumi.Output[str] | None: ...
    @property
    def ready(self) -> list[pulumi.Resource]: ...


class TenantView(Protocol):
    """What an environment may use of a ``GpuTenant``."""

    @property
    def namespace(self) -> pulumi.Output[str]: ...
    @property
    def cluster_name(self) -> pulumi.Output[str]: ...
    @property
    def endpoint(self) -> pulumi.Output[str]: ...
    @property
    def kubeconfig(self) -> pulumi.Output[str]: ...
    @property
    def provider(self) -> k8s.Provider: ...
    @property
    def ready(self) -> list[pulumi.Resource]: ...
    @property
    def control_plane_ready(self) -> list[pulumi.Resource]: ...
    @property
    def teardown_root(self) -> pulumi.Resource: ...


@dataclass(frozen=True)
class ControlPlaneParts:
    """What an environment built for one tenant's control plane."""

    control_plane: k8s.apiextensions.CustomResource
    """lab: the TenantControlPlane; prod: the KamajiControlPlane."""
    identity: list[k8s.apiextensions.CustomResource]
    """The objects whose recreation leaves an empty tenant cluster (the tenant provider's
    ``cluster_identifier`` follows their uids)."""
    teardown_root: pulumi.Resource
    """Deleting it deletes everything inside the tenant (lab: the TenantControlPlane; prod: the
    Cluster)."""
    cluster_name: pulumi.Output[str]
    kubeconfig: KubeconfigRead


@dataclass(frozen=True)
class PoolParts:
    """What an environment built for one pool."""

    node_names: pulumi.Output[list[str]]
    machine_deployment: k8s.apiextensions.CustomResource | None = None
    completer: k8s.apps.v1.Deployment | None = None


# --------------------------------------------------------------------------- the interface


class Substrate(Protocol):
    """Everything that differs between the environments, asked for by the components."""

    @property
    def name(self) -> str:
        """``lab`` or ``prod``: for messages, never for decisions."""
        ...

    # ----- a tenant

    @property
    def release_timeout_seconds(self) -> int:
        """Helm ``--timeout`` for releases inside a tenant (and its dedicated datastore)."""
        ...

    @property
    def tenant_system_namespaces(self) -> tuple[str, ...]:
        """Namespaces inside every tenant, besides Calico's and HAMi's, that HAMi's webhook must
        never gate (prod: the GPU Operator's)."""
        ...

    @property
    def tenant_provider_deletes_unreachable(self) -> bool:
        """Whether a tenant whose API is gone may be dropped from the state on destroy."""
        ...

    def default_device_mode(self) -> str:
        """The device plugin of a pool that names none: ``mock`` or ``nvidia``."""
        ...

    def blocked_pod_cidrs(self, platform: PlatformConfig) -> list[str]:
        """Management-cluster pod ranges a tenant's control plane must not be reached from."""
        ...

    def control_plane(
        self, site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
    ) -> ControlPlaneParts:
        """The tenant's hosted control plane and the read of its kubeconfig."""
        ...

    def before_hami(self, inside: InsideTenant, calico: pulumi.Resource) -> list[pulumi.Resource]:
        """What the environment adds inside a tenant before HAMi, which waits for it."""
        ...

    def after_hami(self, inside: InsideTenant, hami: pulumi.Resource, modes: set[str]) -> None:
        """What the environment adds inside a tenant once HAMi runs."""
        ...

    # ----- a worker pool

    def worker_pool(self, site: PoolSite) -> PoolParts:
        """Make the pool's machines and join them to the tenant."""
        ...
