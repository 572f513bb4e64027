"""Prod's parts of a tenant: a Cluster API Cluster with a KamajiControlPlane and its
infrastructure cluster, the tenant's dedicated DataStore, and the NVIDIA GPU Operator inside it."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components.availability import etcd_budget
from components.k8s_objects import typed_object
from components.management_values import etcd_defrag_cron_job, etcd_quota_backend_bytes
from components.prod.cluster_specs import capi_cluster, infrastructure_cluster, kamaji_control_plane
from components.prod.machine_specs import CAPI_DELETE_TIMEOUT
from components.prod.names import ETCD_BUDGET_PART
from components.prod.tenant_values import (
    dedicated_etcd_issuer,
    driver_repositories_configmap,
    gpu_operator_values,
    kamaji_etcd_values,
)
from components.scripts import read_script
from components.substrate import (
    ControlPlaneParts,
    InsideTenant,
    TenantSite,
    custom_resource,
    declared_resource,
)
from components.tenant_specs import (
    ADMIN_KUBECONFIG_KEY,
    SUPER_ADMIN_KUBECONFIG_KEY,
    admin_kubeconfig_secret,
    data_store_name,
    datastore_secret_data,
    dedicated_etcd_name,
    external_datastore,
)
from components.tenant_values import GPU_OPERATOR_NAMESPACE
from components.versions import PINNED

# How long Pulumi waits for the KamajiControlPlane to report Ready, and Helm for a release inside
# the tenant (tenant releases need worker nodes, which join in parallel: bare-metal machines).
CONTROL_PLANE_TIMEOUT = "60m"
RELEASE_TIMEOUT_SECONDS = 90 * 60


def cluster_api_control_plane(
    site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
) -> ControlPlaneParts:
    """A Cluster API Cluster whose control plane is a KamajiControlPlane and whose
    infrastructure is a Metal3Cluster (or DockerCluster), its dedicated DataStore, and the read
    of its kubeconfig."""
    tenant = site.tenant
    provider = site.platform.existing.cluster_api.infrastructure.name
    datastore = _dedicated_datastore(site, namespace, policies)
    infra = custom_resource(
        f"{site.name}-infrastructure-cluster",
        infrastructure_cluster(
            provider,
            name=tenant.name,
            namespace=site.namespace,
            labels=site.labels,
            address=site.address,
        ),
        site.on_management(depends_on=[namespace, *site.management.ready]),
    )
    # The Cluster first, the KamajiControlPlane after it, so that destroy deletes them in the
    # reverse order. Deleted together, Cluster API's own background delete of the control
    # plane (cluster-api v1.13.5 internal/controllers/cluster/cluster_controller.go:421-441)
    # can remove the KamajiControlPlane at once (no finalizer without an
    # ExternalClusterReference: provider v0.20.0 controllers/kamajicontrolplane_finalizer.go
    # handleDeletion), Pulumi's delete then sees NotFound and deletes the datastore while the
    # TenantControlPlane still needs it for its cleanup (Kamaji 26.8.2-edge
    # controllers/tenantcontrolplane_controller.go:151-205): a stuck TenantControlPlane and
    # DataStore. After the Cluster, the KamajiControlPlane's foreground delete
    # (pulumi-kubernetes v4.32.0 provider/pkg/metadata/overrides.go:69-78) waits for its
    # TenantControlPlane (controller-owned, provider
    # controllers/kamajicontrolplane_controller_tcp.go:268), and only then go the Cluster
    # and the datastore. Creation is not held back: the Cluster has no
    # pulumi.com/waitFor, so it counts as created at once (overrides.go:112-116); Cluster API
    # requeues every 30 s until the control plane exists and then owns it
    # (cluster_controller_phases.go:251-276, ensureOwnerRefAndLabel at :64), which is what the
    # Kamaji provider waits for (kamajicontrolplane_controller.go:76-81).
    declared_cluster = declared_resource(
        f"{site.name}-cluster",
        capi_cluster(tenant, namespace=site.namespace, infrastructure_provider=provider),
        site.on_management(
            depends_on=[namespace, infra, *site.management.ready],
            custom_timeouts=pulumi.CustomTimeouts(delete=CAPI_DELETE_TIMEOUT),
        ),
    )
    cluster = declared_cluster.resource
    declared_kcp = declared_resource(
        f"{site.name}-control-plane",
        kamaji_control_plane(
            tenant,
            namespace=site.namespace,
            kubernetes_version=site.platform.version_of(tenant),
            address=site.address,
        ),
        site.on_management(
            depends_on=[namespace, *policies, *datastore, cluster, *site.management.ready],
            custom_timeouts=pulumi.CustomTimeouts(
                create=CONTROL_PLANE_TIMEOUT,
                update=CONTROL_PLANE_TIMEOUT,
                delete=CAPI_DELETE_TIMEOUT,
            ),
        ),
    )
    kcp = declared_kcp.resource
    # The provider copies admin.conf into <cluster>-kubeconfig (provider v0.20.0
    # controllers/kamajicontrolplane_controller_resources.go:132-172), whose group is bound to
    # cluster-admin only once Kamaji's in-tenant soot manager ran PhaseClusterAdminRBAC, after
    # the control plane reports Ready (Kamaji 26.8.2-edge controllers/soot/manager.go:212-216,
    # internal/resources/kubeadm_phases.go:176-214; clastix/kamaji#1167, unfixed). So, as in
    # the lab, the tenant provider uses super-admin.conf from the TenantControlPlane's own
    # Secret (the TCP is named and namespaced like the KamajiControlPlane,
    # kamajicontrolplane_controller_tcp.go:32-34); people get its admin.conf.
    kubeconfig = site.read_kubeconfig(
        f"{site.name}-admin-kubeconfig",
        [kcp, cluster],
        admin_kubeconfig_secret(tenant.name),
        ADMIN_KUBECONFIG_KEY,
        provider_key=SUPER_ADMIN_KUBECONFIG_KEY,
    )
    return ControlPlaneParts(
        control_plane=kcp,
        identity=[declared_kcp, declared_cluster],
        teardown_root=cluster,
        cluster_name=cluster.urn.apply(lambda _: tenant.name),
        kubeconfig=kubeconfig,
        address=site.address,
    )


def running_version(spec: Any, status: Any) -> str | None:
    """The version a live KamajiControlPlane runs: ``status.version``, the provider's copy of its
    TenantControlPlane's running version (provider v0.20.0
    controllers/kamajicontrolplane_controller.go:301; Kamaji sets that once the Deployment is
    ready), else its ``spec.version`` (copied into the TenantControlPlane with a ``v`` prefix,
    controllers/kamajicontrolplane_controller_tcp.go:82-87)."""
    value = status.get("version") if isinstance(status, dict) else None
    if isinstance(value, str) and value:
        return value if value.startswith("v") else f"v{value}"
    return declared_version(spec)


def declared_version(spec: Any) -> str | None:
    """The version a live KamajiControlPlane's spec declares, ``spec.version``: the provider
    copies it into its TenantControlPlane's spec (v0.20.0
    controllers/kamajicontrolplane_controller_tcp.go:82-87), which Kamaji's webhook compares an
    update with (clastix/kamaji 26.8.2-edge internal/webhook/handlers/tcp_version.go:67)."""
    value = spec.get("version") if isinstance(spec, dict) else None
    if isinstance(value, str) and value:
        return value if value.startswith("v") else f"v{value}"
    return None


def _dedicated_datastore(
    site: TenantSite, namespace: pulumi.Resource, policies: Sequence[pulumi.Resource]
) -> list[pulumi.Resource]:
    """The tenant's dedicated DataStore; a named (shared) one is declared elsewhere."""
    tenant = site.tenant
    dedicated = tenant.data_store.dedicated
    if dedicated is None:
        return []
    if dedicated.deploys_kamaji_etcd:
        # Its Issuer first, once cert-manager serves (management.ready waits for it).
        issuer = custom_resource(
            f"{site.name}-etcd-issuer",
            dedicated_etcd_issuer(tenant.name, site.namespace, site.labels),
            site.on_management(depends_on=[namespace, *site.management.ready]),
        )
        release = site.release(
            f"{site.name}-etcd",
            dedicated_etcd_name(tenant.name),
            PINNED.kamaji_etcd,
            site.namespace,
            kamaji_etcd_values(
                tenant.name, dedicated, cluster_domain=site.platform.existing.cluster_domain
            ),
            site.on_management(depends_on=[namespace, *policies, issuer, *site.management.ready]),
        )
        release_name = dedicated_etcd_name(tenant.name)
        budget = etcd_budget(
            release_name, site.namespace, release_name, dedicated.replicas, site.labels
        )
        if budget is not None:
            # kamaji-etcd ships none (components.availability): its quorum through a drain.
            k8s.policy.v1.PodDisruptionBudget(
                f"{site.name}-{ETCD_BUDGET_PART}",
                metadata=budget["metadata"],
                spec=budget["spec"],
                opts=site.on_management(depends_on=[namespace]),
            )
        # Its nightly defragmentation (kamaji-etcd ships none), after the release's certificates.
        typed_object(
            f"{site.name}-etcd-defrag",
            etcd_defrag_cron_job(
                dedicated_etcd_name(tenant.name),
                site.namespace,
                replicas=dedicated.replicas,
                cluster_domain=site.platform.existing.cluster_domain,
                cert_manager=True,
                quota_backend_bytes=etcd_quota_backend_bytes(dedicated.storage_size),
                script=read_script("etcd", "defrag.sh"),
                labels=site.labels,
            ),
            site.on_management(depends_on=[release]),
        )
        return [issuer, release]
    config_key = dedicated.credentials_config_key
    if config_key is None:  # enforced by DedicatedDataStore
        raise ValueError(f"tenant {tenant.name}: external DataStore without credentials")
    secret_name = f"{tenant.name}-datastore-credentials"
    driver = dedicated.driver
    credentials = pulumi.Config().require_secret(config_key)
    secret = k8s.core.v1.Secret(
        f"{site.name}-datastore-credentials",
        metadata={"name": secret_name, "namespace": site.namespace, "labels": dict(site.labels)},
        type="Opaque",
        # Derived from a secret config value, so itself secret.
        string_data=credentials.apply(lambda raw: datastore_secret_data(driver, raw, config_key)),
        opts=site.on_management(
            depends_on=[namespace], additional_secret_outputs=["data", "stringData"]
        ),
    )
    datastore = custom_resource(
        f"{site.name}-datastore",
        external_datastore(
            data_store_name(tenant),
            dedicated,
            secret_name=secret_name,
            secret_namespace=site.namespace,
            labels=site.labels,
        ),
        site.on_management(depends_on=[secret, *site.management.ready]),
    )
    return [datastore]


def gpu_operator(inside: InsideTenant, calico: pulumi.Resource) -> k8s.helm.v3.Release:
    """The NVIDIA GPU Operator (driver, container toolkit) and, when the driver is built from
    packages, the repository files it installs from; HAMi waits for it. A ``gpuSharing: dra``
    tenant's operator runs its GPUCluster instead: NVIDIA's DRA driver on the host's driver
    (``components.prod.tenant_values.gpu_cluster_values``)."""
    site = inside.site
    operator_after: list[pulumi.Resource] = [inside.namespaces[GPU_OPERATOR_NAMESPACE], calico]
    repositories = driver_repositories_configmap(site.platform.gpu_driver)
    if repositories is not None:
        metadata: Any = {**repositories["metadata"], "labels": dict(site.labels)}
        operator_after.append(
            k8s.core.v1.ConfigMap(
                f"{site.name}-gpu-driver-repositories",
                metadata=metadata,
                data=repositories["data"],
                opts=inside.opts(depends_on=[inside.namespaces[GPU_OPERATOR_NAMESPACE]]),
            )
        )
    return inside.release(
        f"{site.name}-gpu-operator",
        "gpu-operator",
        PINNED.gpu_operator,
        GPU_OPERATOR_NAMESPACE,
        gpu_operator_values(site.platform.gpu_driver, dra=site.tenant.gpu_sharing == "dra"),
        inside.opts(depends_on=operator_after),
    )
