"""ManagementCluster: the cluster that hosts every tenant's control plane (Kamaji)."""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components.config import PlatformConfig
from components.versions import PINNED

TYPE_TOKEN = "gpu-platform:index:ManagementCluster"


@dataclass(frozen=True)
class ManagementClusterArgs:
    platform: PlatformConfig


class ManagementCluster(pulumi.ComponentResource):
    """SKELETON: replaced by the lab/prod implementation."""

    provider: k8s.Provider
    kubeconfig: pulumi.Output[str]
    kind_network: pulumi.Output[str] | None
    lb_pool: pulumi.Output[list[str]]
    default_datastore: pulumi.Output[str] | None
    versions: dict[str, object]
    ready: list[pulumi.Resource]

    def __init__(
        self, name: str, args: ManagementClusterArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self.kubeconfig = pulumi.Output.secret("apiVersion: v1\nkind: Config\n")
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self.kubeconfig,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.kind_network = None
        self.lb_pool = pulumi.Output.from_input([])
        self.default_datastore = None
        self.versions = PINNED.as_dict()
        self.ready = []
        self.register_outputs({})

    def tenant_address(self, index: int) -> pulumi.Output[str] | None:
        """The fixed LoadBalancer address of the tenant at ``index`` (lab), else None."""
        return None
