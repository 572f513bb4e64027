"""The lab environment: kind on this host, Docker workers, simulated GPUs."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import pulumi

from components.config import PlatformConfig
from components.lab import tenant as lab_tenant
from components.lab.workers import lab_workers
from components.substrate import ControlPlaneParts, InsideTenant, PoolParts, PoolSite, TenantSite


@dataclass(frozen=True)
class LabSubstrate:
    """``components.substrate.Substrate`` for the lab."""

    name: str = "lab"
    release_timeout_seconds: int = lab_tenant.RELEASE_TIMEOUT_SECONDS
    tenant_system_namespaces: tuple[str, ...] = ()
    # A lab torn down by hand (kind cluster deleted) must still be destroyable.
    tenant_provider_deletes_unreachable: bool = True

    def default_device_mode(self) -> str:
        return "mock"

    def blocked_pod_cidrs(self, platform: PlatformConfig) -> list[str]:
        # The kind cluster's pods: nothing there but Kamaji's own talks to a control plane.
        return [platform.kind.pod_subnet]

    def control_plane(
        self, site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
    ) -> ControlPlaneParts:
        return lab_tenant.lab_control_plane(site, namespace, policies)

    def before_hami(self, inside: InsideTenant, calico: pulumi.Resource) -> list[pulumi.Resource]:
        # HAMi's certificate hook Job and scheduler reach the API through its ClusterIP.
        return [lab_tenant.lab_kube_proxy(inside)]

    def after_hami(self, inside: InsideTenant, hami: pulumi.Resource, modes: set[str]) -> None:
        if "mock" in modes:
            lab_tenant.mock_device_plugin(inside, after=[hami])

    def worker_pool(self, site: PoolSite) -> PoolParts:
        return lab_workers(site)
