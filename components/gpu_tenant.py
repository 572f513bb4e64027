"""GpuTenant: one team's hosted control plane, datastore binding, CNI, HAMi and quotas."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config import PlatformConfig, Tenant
from components.management_cluster import ManagementCluster

TYPE_TOKEN = "gpu-platform:index:GpuTenant"


@dataclass(frozen=True)
class GpuTenantArgs:
    platform: PlatformConfig
    tenant: Tenant
    management: ManagementCluster
    address: pulumi.Input[str] | None = None


class GpuTenant(pulumi.ComponentResource):
    """SKELETON: replaced by the lab/prod implementation."""

    namespace: pulumi.Output[str]
    control_plane_name: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: GpuTenantArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.namespace = pulumi.Output.from_input(name)
        self.control_plane_name = pulumi.Output.from_input(name)
        self.cluster_name = pulumi.Output.from_input(name)
        self.endpoint = pulumi.Output.from_input("")
        self.kubeconfig = pulumi.Output.secret("apiVersion: v1\nkind: Config\n")
        self.provider = k8s.Provider(
            f"{name}-provider", kubeconfig=self.kubeconfig, opts=pulumi.ResourceOptions(parent=self)
        )
        self.ready = []
        self.register_outputs({})
