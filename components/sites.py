"""Registration kits: what a component hands an environment package to build its part with.

A kit carries the config being built, the component to parent children to, and the options every
child of that kind takes (its provider, what it is deleted with), so the environment packages
(``components.lab``, ``components.prod``) register resources exactly as the components would,
without importing them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

import pulumi
import pulumi_kubernetes as k8s

from components.tenant_specs import decode_kubeconfig

if TYPE_CHECKING:
    from components.config import PlatformConfig, Tenant, WorkerPool
    from components.substrate import ManagementView, TenantView
    from components.versions import HelmChart


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
