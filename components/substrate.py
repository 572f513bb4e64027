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

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any, Protocol

import pulumi
import pulumi_kubernetes as k8s

from components.tenant_specs import decode_kubeconfig

if TYPE_CHECKING:
    from components.config import PlatformConfig, Tenant, WorkerPool
    from components.versions import HelmChart


# ------------------------------------------------------------------ views of the components


class ManagementView(Protocol):
    """What an environment may use of the ``ManagementCluster``."""

    @property
    def provider(self) -> k8s.Provider: ...
    @property
    def kind_network(self) -> pulumi.Output[str] | None: ...
    @property
    def tenant_address_pool(self) -> str | None: ...
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
    address: pulumi.Output[str] | None
    """The control plane's LoadBalancer address once known: the pinned one, or (lab) the one
    MetalLB assigned, read back; None when only the kubeconfig's server says it."""


@dataclass(frozen=True)
class PoolParts:
    """What an environment built for one pool."""

    node_names: pulumi.Output[list[str]]
    machine_deployment: k8s.apiextensions.CustomResource | None = None
    completer: k8s.apps.v1.Deployment | None = None


# -------------------------------------------------------------------- registration kits
# What a component hands an environment to build its part with: the config being built, the
# component to parent children to, and the options every child of that kind takes.


def custom_resource(
    resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> k8s.apiextensions.CustomResource:
    """A custom resource from a manifest built by a pure builder."""
    return k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )


def chart_release(
    resource_name: str,
    release_name: str,
    chart: HelmChart,
    namespace: str,
    values: dict[str, Any],
    timeout: int,
    opts: pulumi.ResourceOptions,
) -> k8s.helm.v3.Release:
    """A pinned chart from its repository, awaited until its workloads are ready."""
    return k8s.helm.v3.Release(
        resource_name,
        k8s.helm.v3.ReleaseArgs(
            name=release_name,
            chart=chart.chart,
            version=chart.version,
            repository_opts=k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
            namespace=namespace,
            values=values,
            skip_await=False,
            timeout=timeout,
        ),
        opts=opts,
    )


@dataclass(frozen=True)
class KubeconfigRead:
    """The read of a tenant's kubeconfig Secret: for people (``kubeconfig``) and for the
    tenant's own provider (``provider_kubeconfig``), both secret."""

    secret: k8s.core.v1.Secret
    kubeconfig: pulumi.Output[str]
    provider_kubeconfig: pulumi.Output[str]


@dataclass(frozen=True)
class TenantSite:
    """One tenant being built, on the management side (before its control plane serves)."""

    name: str
    platform: PlatformConfig
    tenant: Tenant
    management: ManagementView
    component: pulumi.Resource
    namespace: str
    labels: Mapping[str, str]
    address: pulumi.Output[str] | None
    release_timeout: int

    def on_management(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=self.component, provider=self.management.provider, **kwargs
        )

    def release(
        self,
        resource_name: str,
        release_name: str,
        chart: HelmChart,
        namespace: str,
        values: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> k8s.helm.v3.Release:
        return chart_release(
            resource_name, release_name, chart, namespace, values, self.release_timeout, opts
        )

    def read_kubeconfig(
        self,
        resource_name: str,
        after: Sequence[pulumi.CustomResource],
        secret_name: str,
        key: str,
        provider_key: str | None = None,
    ) -> KubeconfigRead:
        """Read the kubeconfig Secret once ``after`` is ready: ``key`` for people, the tenant
        provider's from ``provider_key`` (else the same).

        The read's ID waits for the control plane's ID: on a first preview the control plane
        does not exist, the ID is unknown and the engine skips the read (the kubeconfig stays
        unknown) instead of failing on a Secret that is not there yet."""
        namespace = self.namespace
        secret_id = pulumi.Output.all(*[r.id for r in after]).apply(
            lambda _: f"{namespace}/{secret_name}"
        )
        secret = k8s.core.v1.Secret.get(
            resource_name,
            secret_id,
            opts=self.on_management(depends_on=list(after), additional_secret_outputs=["data"]),
        )
        data: pulumi.Output[Any] = secret.data

        def read(from_key: str) -> pulumi.Output[str]:
            return pulumi.Output.secret(
                data.apply(lambda values: decode_kubeconfig(values, from_key, secret_name))
            )

        kubeconfig = read(key)
        provider_kubeconfig = read(provider_key) if provider_key is not None else kubeconfig
        return KubeconfigRead(secret, kubeconfig, provider_kubeconfig)


@dataclass(frozen=True)
class InsideTenant:
    """Objects inside one tenant cluster: its own provider, and no separate delete when the
    whole tenant goes (Kamaji removes the tenant's data with its control plane; uninstalling
    Calico or HAMi first would only wait on finalizers whose nodes are leaving)."""

    site: TenantSite
    provider: k8s.Provider
    teardown_root: pulumi.Resource
    namespaces: Mapping[str, pulumi.Resource]

    def opts(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=self.site.component,
            provider=self.provider,
            deleted_with=self.teardown_root,
            **kwargs,
        )

    def release(
        self,
        resource_name: str,
        release_name: str,
        chart: HelmChart,
        namespace: str,
        values: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> k8s.helm.v3.Release:
        return self.site.release(resource_name, release_name, chart, namespace, values, opts)


@dataclass(frozen=True)
class PoolSite:
    """One worker pool being built: its config, its neighbours, and how to register children
    (``opts``: parented to the pool; ``in_tenant``: also on the tenant's provider and deleted
    with the tenant)."""

    name: str
    platform: PlatformConfig
    tenant_config: Tenant
    pool: WorkerPool
    tenant: TenantView
    management: ManagementView
    component: pulumi.Resource

    def opts(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self.component, **kwargs)

    def in_tenant(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return self.opts(
            provider=self.tenant.provider, deleted_with=self.tenant.teardown_root, **kwargs
        )


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
