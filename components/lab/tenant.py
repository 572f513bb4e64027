"""The lab's parts of a tenant: a TenantControlPlane on a MetalLB address, its own kube-proxy and
HAMi's mock device plugin (``components.lab.kube_proxy``, ``components.lab.mock_device_plugin``
build their manifests)."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.config import Tenant
from components.k8s_objects import typed_object
from components.lab import dra_driver as dra_driver_objects
from components.lab import kube_proxy as kube_proxy_objects
from components.lab import mock_device_plugin as mock_device_plugin_objects
from components.labels import LAB_ONLY_LABEL
from components.substrate import (
    ControlPlaneParts,
    DraDriver,
    InsideTenant,
    KubeconfigRead,
    TenantSite,
    declared_resource,
)
from components.tenant_specs import (
    ADMIN_KUBECONFIG_KEY,
    API_SERVER_PORT,
    SUPER_ADMIN_KUBECONFIG_KEY,
    admin_kubeconfig_secret,
    kubeconfig_address,
    tenant_control_plane,
)
from components.tenant_values import HAMI_NAMESPACE
from components.versions import PINNED

# How long Pulumi waits for the TenantControlPlane to report Ready, and Helm for a release inside
# the tenant (tenant releases need worker nodes, which join in parallel with them: a
# kindest/node container here).
CONTROL_PLANE_TIMEOUT = "30m"
RELEASE_TIMEOUT_SECONDS = 20 * 60


def lab_control_plane(
    site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
) -> ControlPlaneParts:
    """A Kamaji TenantControlPlane on the MetalLB address, and the read of its kubeconfig."""
    tenant = site.tenant
    manifest = tenant_control_plane(
        tenant,
        namespace=site.namespace,
        kubernetes_version=site.platform.version_of(tenant),
        address=site.address,
        address_pool=site.management.tenant_address_pool,
    )
    declared = declared_resource(
        f"{site.name}-control-plane",
        manifest,
        site.on_management(
            depends_on=[namespace, *policies, *site.management.ready],
            custom_timeouts=pulumi.CustomTimeouts(
                create=CONTROL_PLANE_TIMEOUT, update=CONTROL_PLANE_TIMEOUT
            ),
        ),
    )
    tcp = declared.resource
    kubeconfig = site.read_kubeconfig(
        f"{site.name}-admin-kubeconfig",
        [tcp],
        admin_kubeconfig_secret(tenant.name),
        ADMIN_KUBECONFIG_KEY,
        # Kamaji reports Ready before its in-tenant controllers have bound admin.conf's
        # group to cluster-admin; super-admin.conf (system:masters) needs no RBAC, so the
        # program's first calls into the tenant cannot be refused with a 403.
        provider_key=SUPER_ADMIN_KUBECONFIG_KEY,
    )
    return ControlPlaneParts(
        control_plane=tcp,
        identity=[declared],
        teardown_root=tcp,
        cluster_name=pulumi.Output.from_input(tenant.name),
        kubeconfig=kubeconfig,
        address=site.address if site.address is not None else _assigned_address(kubeconfig),
    )


def running_version(spec: Any, status: Any) -> str | None:
    """The version a live TenantControlPlane runs: ``status.kubernetesResources.version.version``,
    which Kamaji sets to the spec's once the control plane's Deployment is ready
    (clastix/kamaji 26.8.2-edge internal/resources/k8s_deployment_resource.go:104-109), else —
    a control plane that never became ready — its ``spec.kubernetes.version``."""
    running = _at(status, "kubernetesResources", "version", "version")
    return running or declared_version(spec)


def declared_version(spec: Any) -> str | None:
    """The version a live TenantControlPlane's spec declares, ``spec.kubernetes.version``: what
    Kamaji's webhook compares an update with (26.8.2-edge
    internal/webhook/handlers/tcp_version.go:67)."""
    return _at(spec, "kubernetes", "version")


def _at(value: Any, *path: str) -> str | None:
    for key in path:
        value = value.get(key) if isinstance(value, dict) else None
    return value if isinstance(value, str) and value else None


def _assigned_address(kubeconfig: KubeconfigRead) -> pulumi.Output[str]:
    """The address MetalLB gave an unpinned control plane, read back from the kubeconfig Kamaji
    wrote once it was ready: its server is ``status.controlPlaneEndpoint``, the Service's
    ``status.loadBalancer.ingress`` IP, which is also in the API server certificate's SANs
    (clastix/kamaji@26.8.2-edge internal/resources/k8s_service_resource.go:56-60,
    kubeadm_config.go:84-138, kubeconfig.go:216). Unknown until the control plane exists (a first
    preview); afterwards a read, so a preview of the existing stack knows it. Not secret: an
    address."""
    return pulumi.Output.unsecret(kubeconfig.kubeconfig.apply(kubeconfig_address))


def lab_kube_proxy(inside: InsideTenant) -> k8s.apps.v1.DaemonSet:
    """LAB_ONLY: a kube-proxy that never writes a conntrack sysctl, in place of Kamaji's addon
    (``components.lab.kube_proxy``); its kubeconfig points at the control plane's
    LoadBalancer address, the only way to the API before kube-proxy runs."""
    if inside.site.address is None:
        raise ValueError(
            f"tenant {inside.site.tenant.name}: the lab's kube-proxy needs the control plane's "
            "LoadBalancer address (controlPlane.address or the one MetalLB assigned)"
        )
    objects = kube_proxy_objects.manifests(
        inside.site.platform.version_of(inside.site.tenant), inside.site.labels
    )
    name = f"{inside.site.name}-kube-proxy"
    account = typed_object(f"{name}-account", objects["serviceAccount"], inside.opts())
    binding = typed_object(
        f"{name}-binding",
        objects["clusterRoleBinding"],
        inside.opts(depends_on=[account]),
    )
    role = typed_object(f"{name}-config-reader", objects["role"], inside.opts())
    typed_object(
        f"{name}-config-reader-binding",
        objects["roleBinding"],
        inside.opts(depends_on=[role]),
    )
    pod_cidr = inside.site.tenant.network.pod_cidr
    config = typed_object(
        f"{name}-config",
        objects["configMap"],
        inside.opts(),
        data=inside.site.address.apply(
            lambda address: kube_proxy_objects.config_map_data(
                pod_cidr, f"https://{address}:{API_SERVER_PORT}"
            )
        ),
    )
    daemon_set: k8s.apps.v1.DaemonSet = typed_object(
        name, objects["daemonSet"], inside.opts(depends_on=[binding, config])
    )
    return daemon_set


def dra_driver(inside: InsideTenant, tenant: Tenant, after: Sequence[pulumi.Resource]) -> DraDriver:
    """LAB_ONLY: the fake DRA driver (``components.lab.dra_driver``, dra-example-driver
    v0.4.0) in place of HAMi's mock device plugin, for a ``gpuSharing: dra`` tenant: it
    publishes ``numDevices`` cards per node, the tenant's count (the configuration checks make
    every pool's the same and every card publishable)."""
    (count,) = dra_driver_objects.cards_per_node([p.resolved_cards() for p in tenant.worker_pools])
    labels = {**inside.site.labels, LAB_ONLY_LABEL: "true"}
    objects = dra_driver_objects.manifests(count, labels)
    name = f"{inside.site.name}-dra-driver"
    account = typed_object(
        f"{name}-account", objects["serviceAccount"], inside.opts(depends_on=[*after])
    )
    role = typed_object(f"{name}-role", objects["clusterRole"], inside.opts(depends_on=[*after]))
    binding = typed_object(
        f"{name}-binding", objects["clusterRoleBinding"], inside.opts(depends_on=[role, account])
    )
    device_class = typed_object(
        f"{name}-device-class", objects["deviceClass"], inside.opts(depends_on=[*after])
    )
    timeout = f"{inside.site.release_timeout}s"
    daemon_set = typed_object(
        name,
        objects["daemonSet"],
        inside.opts(
            depends_on=[binding],
            custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
        ),
    )
    return DraDriver(
        device_class=dra_driver_objects.DEVICE_CLASS,
        driver=dra_driver_objects.DRIVER_NAME,
        ready=[device_class, daemon_set],
    )


def mock_device_plugin(
    inside: InsideTenant, after: Sequence[pulumi.Resource]
) -> k8s.apps.v1.DaemonSet:
    """LAB_ONLY: HAMi's mock device plugin with a device config it can decode, in place of
    the chart's (``components.lab.mock_device_plugin``). Created once HAMi is up: then the
    tenant's pod network and ClusterIPs work, and awaiting the DaemonSet proves the mock runs
    on every node."""
    labels = {**inside.site.labels, LAB_ONLY_LABEL: "true"}
    objects = mock_device_plugin_objects.manifests(
        HAMI_NAMESPACE, PINNED.hami_mock_device_plugin_tag, labels
    )
    name = f"{inside.site.name}-mock-device-plugin"
    # Every object after HAMi: a lab deployed before this layout had the chart's own mock,
    # with these names, which Helm removes only on HAMi's upgrade (created earlier, ours
    # would collide with them: pulumi-kubernetes creates without upsert).
    first = [inside.namespaces[HAMI_NAMESPACE], *after]
    account = typed_object(
        f"{name}-account", objects["serviceAccount"], inside.opts(depends_on=first)
    )
    role = typed_object(f"{name}-role", objects["clusterRole"], inside.opts(depends_on=first))
    binding = typed_object(
        f"{name}-binding",
        objects["clusterRoleBinding"],
        inside.opts(depends_on=[role, account]),
    )
    config = typed_object(f"{name}-config", objects["configMap"], inside.opts(depends_on=first))
    timeout = f"{inside.site.release_timeout}s"
    daemon_set: k8s.apps.v1.DaemonSet = typed_object(
        name,
        objects["daemonSet"],
        inside.opts(
            depends_on=[binding, config, *after],
            custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
        ),
    )
    return daemon_set
