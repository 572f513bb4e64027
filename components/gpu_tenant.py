"""GpuTenant: one team's hosted control plane, datastore binding, CNI, HAMi and quotas.

Layer by layer, for one tenant:

1. **Management cluster** (management provider): the tenant's namespace (named after the
   tenant or ``managementNamespace.name``; created, or — ``managementNamespace.existing``, required
   with Metal3, whose hosts must already be enrolled in it — only read, so never deleted) with
   ingress NetworkPolicies (see ``tenant_specs.network_policies``); in prod the tenant's
   dedicated DataStore (a kamaji-etcd release, or a Secret + ``DataStore`` for an external
   server).
2. **Control plane**: lab — a Kamaji ``TenantControlPlane``; prod — a Cluster API ``Cluster``
   whose control plane is a ``KamajiControlPlane`` and whose infrastructure is a
   ``Metal3Cluster`` (or ``DockerCluster``). Both bind their DataStore, schema and user
   explicitly, run Konnectivity, CoreDNS and kube-proxy, and are awaited through the
   ``pulumi.com/waitFor`` annotation (pulumi-kubernetes >= 4.18) — everything that creates one
   depends on ``management.ready``.
3. **Kubeconfig**: read from the Secret Kamaji writes for the TenantControlPlane (in prod the
   one the KamajiControlPlane creates) once the control plane is ready: ``admin.conf`` is kept as
   a secret output for people, ``super-admin.conf`` becomes the tenant's own
   ``kubernetes.Provider`` (admin.conf's RBAC may not exist yet when Kamaji reports Ready).
   Its server is the control plane's LoadBalancer address (in the lab a MetalLB address on the
   ``kind`` network, reachable from a Linux host only).
4. **Inside the tenant** (tenant provider only): Calico's CRDs (the ``crd.projectcalico.org.v1``
   chart), then Calico through the tigera-operator chart, in
   prod the NVIDIA GPU Operator, then HAMi (webhook excluding the system, CNI, HAMi and GPU
   Operator namespaces; the real device plugin in prod), GPU ResourceQuotas and the declared GPU
   workloads. The lab adds its own kube-proxy and HAMi's mock device plugin
   (``components.lab``).

Ordering caveat for worker pools: the Helm releases inside the tenant (``ready``) complete only
once workers have joined — HAMi's certificate hook Job and the tigera-operator, HAMi scheduler
and GPU Operator Deployments need a node. Pools must join their workers as soon as the
kubeconfig exists (``control_plane_ready`` / ``provider``), never after ``ready``.

No resource of one tenant depends on another tenant's: Pulumi builds tenants in parallel.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s

from components import resource_names
from components.config import PlatformConfig, Tenant
from components.k8s_objects import typed_object
from components.lab import kube_proxy, mock_device_plugin
from components.labels import HAMI_WEBHOOK_IGNORE_LABEL, IDENTITY_READ_SUFFIX, LAB_ONLY_LABEL
from components.management_cluster import ManagementCluster
from components.tenant_specs import (
    ADMIN_KUBECONFIG_KEY,
    API_SERVER_PORT,
    SUPER_ADMIN_KUBECONFIG_KEY,
    admin_kubeconfig_secret,
    capi_cluster,
    data_store_name,
    datastore_secret_data,
    decode_kubeconfig,
    dedicated_etcd_name,
    external_datastore,
    infrastructure_cluster,
    kamaji_control_plane,
    kubeconfig_server,
    namespaces_to_create,
    network_policies,
    resource_quota,
    tenant_control_plane,
    tenant_labels,
    workload_deployment,
)
from components.tenant_values import (
    CALICO_CRDS_RELEASE,
    GPU_OPERATOR_NAMESPACE,
    HAMI_NAMESPACE,
    TIGERA_OPERATOR_NAMESPACE,
    calico_crds_values,
    calico_values,
    control_plane_timeout,
    device_modes,
    device_split_count,
    driver_repositories_configmap,
    gpu_operator_values,
    hami_values,
    kamaji_etcd_values,
    release_timeout_seconds,
    webhook_excluded_namespaces,
)
from components.versions import PINNED, HelmChart
from components.worker_specs import CAPI_DELETE_TIMEOUT

TYPE_TOKEN = "gpu-platform:index:GpuTenant"


@dataclass(frozen=True)
class GpuTenantArgs:
    platform: PlatformConfig
    tenant: Tenant
    management: ManagementCluster
    # The control plane's fixed LoadBalancer address (lab: from the MetalLB pool). None falls
    # back to tenants[].controlPlane.address, then to whatever the load balancer assigns.
    address: pulumi.Input[str] | None = None


def _meta_name(meta: Any, default: str) -> str:
    """``metadata.name`` of a resource output (an ObjectMeta object or a plain dict)."""
    name = getattr(meta, "name", None)
    if name is None and isinstance(meta, dict):
        name = meta.get("name")
    return name if isinstance(name, str) and name else default


def _meta_uid(meta: Any) -> str | None:
    """``metadata.uid`` of a resource output (an ObjectMeta object or a plain dict)."""
    uid = getattr(meta, "uid", None)
    if uid is None and isinstance(meta, dict):
        uid = meta.get("uid")
    return uid if isinstance(uid, str) and uid else None


def _live_uid(meta: Any, what: str) -> str:
    """The uid of a live object read back; an object the API server stores always has one."""
    uid = _meta_uid(meta)
    if uid is None:
        raise ValueError(f"the live {what} has no metadata.uid")
    return uid


class _LiveObject(pulumi.CustomResource):
    """A read of an existing Kubernetes object by its ID, with its ``metadata`` as an output.

    ``k8s.apiextensions.CustomResource.get`` cannot serve: with ``opts.id`` set its Python class
    registers no properties (``__props__`` stays None in pulumi-kubernetes 4.34.2
    ``apiextensions/CustomResource.py`` ``_internal_init``), so the read's ``metadata`` never
    becomes an attribute. The type token is the one CustomResource uses,
    ``kubernetes:<apiVersion>:<kind>``, so the provider's Read is the same."""

    metadata: pulumi.Output[Any]

    def __init__(
        self,
        resource_name: str,
        api_version: str,
        kind: str,
        resource_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
    ) -> None:
        super().__init__(
            f"kubernetes:{api_version}:{kind}",
            resource_name,
            {"apiVersion": api_version, "kind": kind, "metadata": None},
            pulumi.ResourceOptions.merge(opts, pulumi.ResourceOptions(id=resource_id)),
        )


def tenant_cluster_identifier(tenant: str, uids: Sequence[str]) -> str:
    """The tenant provider's ``cluster_identifier``: the tenant name and the uid of each object
    whose recreation leaves an empty tenant cluster (lab: the TenantControlPlane; prod: the
    KamajiControlPlane and the Cluster, whose deletion deletes it)."""
    return "/".join([tenant, *uids])


class GpuTenant(pulumi.ComponentResource):
    """One tenant: hosted control plane (lab: TenantControlPlane; prod: Cluster API), its
    kubeconfig and provider, Calico, HAMi, GPU quotas and declared workloads."""

    namespace: pulumi.Output[str]
    control_plane_name: pulumi.Output[str]
    cluster_name: pulumi.Output[str]
    endpoint: pulumi.Output[str]
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    ready: list[pulumi.Resource]
    # Additional interface: what must exist before workers can join (the control plane and
    # the read of its kubeconfig), and where HAMi runs inside the tenant.
    control_plane_ready: list[pulumi.Resource]
    hami_namespace: str
    # Deleting this (lab: the TenantControlPlane; prod: the Cluster) deletes everything inside the
    # tenant, so objects in the tenant are not deleted one by one on destroy.
    teardown_root: pulumi.Resource

    def __init__(
        self, name: str, args: GpuTenantArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._name = name
        self._platform = args.platform
        self._tenant = args.tenant
        self._management = args.management
        self._labels = tenant_labels(args.tenant.name)
        # The tenant's namespace in the management cluster (``managementNamespace``).
        self._ns = args.tenant.namespace
        # Custom resources registered on the management cluster: (resource, name, apiVersion,
        # kind), for the reads of their uid.
        self._declared: list[tuple[pulumi.Resource, str, str, str]] = []
        self.hami_namespace = HAMI_NAMESPACE

        address = args.address if args.address is not None else args.tenant.control_plane.address
        self._address: pulumi.Output[str] | None = (
            pulumi.Output.from_input(address) if address is not None else None
        )

        namespace, policies = self._management_namespace()
        self.namespace = namespace.metadata.apply(lambda m: _meta_name(m, self._ns))
        if self._platform.mode == "lab":
            control_plane, kubeconfig_read = self._lab_control_plane(namespace, policies)
            self.cluster_name = pulumi.Output.from_input(args.tenant.name)
            self.teardown_root: pulumi.Resource = control_plane
            identity = [control_plane]
        else:
            control_plane, cluster, kubeconfig_read = self._prod_control_plane(namespace, policies)
            self.cluster_name = cluster.urn.apply(lambda _: args.tenant.name)
            self.teardown_root = cluster
            identity = [control_plane, cluster]
        # Tied to the registration (known in preview, unlike the ID).
        self.control_plane_name = control_plane.urn.apply(lambda _: args.tenant.name)
        self.control_plane_ready = [control_plane, kubeconfig_read]

        # Replaced (and with it everything inside the tenant) exactly when the control plane is
        # recreated, not when its kubeconfig's certificates rotate: a new control plane is an
        # empty cluster, and with an unchanged identifier pulumi-kubernetes only *updates* the
        # provider (provider/pkg/provider/provider.go:486-500 at v4.32.0), so Calico, HAMi and
        # the rest would be reported unchanged and never created in it. The engine replaces
        # every resource of a replaced provider (pulumi/pulumi v3.259.0
        # pkg/resource/deploy/step_generator.go:2798-2850, 2909-2913).
        self.provider = k8s.Provider(
            f"{name}-provider",
            kubeconfig=self._provider_kubeconfig,
            cluster_identifier=pulumi.Output.all(
                *[self._object_identity(r) for r in identity]
            ).apply(lambda uids: tenant_cluster_identifier(args.tenant.name, uids)),
            # A lab torn down by hand (kind cluster deleted) must still be destroyable.
            delete_unreachable=self._platform.mode == "lab",
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.endpoint = (
            pulumi.Output.concat("https://", self._address, f":{API_SERVER_PORT}")
            if self._address is not None
            else pulumi.Output.unsecret(self.kubeconfig.apply(kubeconfig_server))
        )

        self.ready = self._inside_tenant()
        self._workloads()

        self.register_outputs(
            {
                "namespace": self.namespace,
                "controlPlaneName": self.control_plane_name,
                "clusterName": self.cluster_name,
                "endpoint": self.endpoint,
                "kubeconfig": self.kubeconfig,
            }
        )

    # ------------------------------------------------------------------------- options

    def _on_management(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, provider=self._management.provider, **kwargs)

    def _in_tenant(self, **kwargs: Any) -> pulumi.ResourceOptions:
        """Options of every object inside the tenant: its own provider, and no separate delete
        when the whole tenant goes (Kamaji removes the tenant's data with its control plane;
        uninstalling Calico or HAMi first would only wait on finalizers whose nodes are leaving)."""
        return pulumi.ResourceOptions(
            parent=self, provider=self.provider, deleted_with=self.teardown_root, **kwargs
        )

    def _release(
        self,
        resource_name: str,
        release_name: str,
        chart: HelmChart,
        namespace: str,
        values: dict[str, Any],
        opts: pulumi.ResourceOptions,
    ) -> k8s.helm.v3.Release:
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
                timeout=release_timeout_seconds(self._platform.mode),
            ),
            opts=opts,
        )

    # ---------------------------------------------------------------- management cluster

    def _management_namespace(
        self,
    ) -> tuple[k8s.core.v1.Namespace, list[k8s.networking.v1.NetworkPolicy]]:
        """The tenant's namespace and its ingress NetworkPolicies.

        An adopted namespace (``managementNamespace.existing``: on Metal3 it holds the tenant's
        BareMetalHosts and their BMC Secrets) is only read: Pulumi never creates, labels or
        deletes it, and a preview fails while it does not exist. The policies are the program's
        either way (created and deleted with the tenant); they select pods only, so the hosts and
        Secrets in the namespace — objects, reconciled by the bare-metal operator and Ironic from
        their own namespaces — are untouched by them."""
        tenant = self._tenant
        if tenant.management_namespace.existing:
            namespace = k8s.core.v1.Namespace.get(
                f"{self._name}-namespace", self._ns, opts=self._on_management()
            )
        else:
            namespace = k8s.core.v1.Namespace(
                f"{self._name}-namespace",
                metadata={"name": self._ns, "labels": dict(self._labels)},
                opts=self._on_management(),
            )
        blocked = [self._platform.kind.pod_subnet] if self._platform.mode == "lab" else []
        policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{self._name}-{manifest['metadata']['name']}",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=self._on_management(depends_on=[namespace]),
            )
            for manifest in network_policies(tenant.name, self._ns, blocked)
        ]
        return namespace, policies

    def _custom_resource(
        self, resource_name: str, manifest: dict[str, Any], opts: pulumi.ResourceOptions
    ) -> k8s.apiextensions.CustomResource:
        resource = k8s.apiextensions.CustomResource(
            resource_name,
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=opts,
        )
        self._declared.append((resource, resource_name, manifest["apiVersion"], manifest["kind"]))
        return resource

    def _object_identity(self, resource: k8s.apiextensions.CustomResource) -> pulumi.Output[str]:
        """What identifies one incarnation of ``resource``: the uid of the live object, read back
        by its ID (``<resource name>-identity``), never the ID itself.

        A read runs in preview whenever its ID is known (pulumi/pulumi v3.259.0
        pkg/resource/deploy/step.go:1314-1320). In a preview of an in-place update the ID is
        the deployed one, so the read returns the live uid even when the update's own preview
        outputs carry none (pulumi-kubernetes returns the inputs as-is when they hold unknowns,
        provider/pkg/provider/provider.go:2367-2371 at v4.32.0) and the identifier stays the
        deployed one. On a create or replacement the ID is unknown, the read is skipped and the
        identifier unknown: a replacement of the tenant provider, which is right then
        (DiffConfig, provider.go:486-515). In ``up`` the read follows the control plane's
        create or update, so it sees the object as it now is."""
        ((_, resource_name, api_version, kind),) = [d for d in self._declared if d[0] is resource]
        live = _LiveObject(
            f"{resource_name}{IDENTITY_READ_SUFFIX}",
            api_version,
            kind,
            resource.id,
            self._on_management(depends_on=[resource]),
        )
        return live.metadata.apply(lambda meta: _live_uid(meta, f"{kind} {resource_name}"))

    def _control_plane_timeouts(self) -> pulumi.CustomTimeouts:
        """Create/update wait for the control plane to be ready; in prod a delete waits for the
        machines and datastore cleanup behind it (``CAPI_DELETE_TIMEOUT``)."""
        timeout = control_plane_timeout(self._platform.mode)
        delete = CAPI_DELETE_TIMEOUT if self._platform.mode == "prod" else None
        return pulumi.CustomTimeouts(create=timeout, update=timeout, delete=delete)

    def _lab_control_plane(
        self, namespace: k8s.core.v1.Namespace, policies: Sequence[pulumi.Resource]
    ) -> tuple[k8s.apiextensions.CustomResource, k8s.core.v1.Secret]:
        tenant = self._tenant
        manifest = tenant_control_plane(
            tenant,
            namespace=self._ns,
            kubernetes_version=self._platform.kubernetes_version,
            address=self._address,
        )
        tcp = self._custom_resource(
            f"{self._name}-control-plane",
            manifest,
            self._on_management(
                depends_on=[namespace, *policies, *self._management.ready],
                custom_timeouts=self._control_plane_timeouts(),
            ),
        )
        secret = self._read_kubeconfig(
            f"{self._name}-admin-kubeconfig",
            [tcp],
            admin_kubeconfig_secret(tenant.name),
            ADMIN_KUBECONFIG_KEY,
            # Kamaji reports Ready before its in-tenant controllers have bound admin.conf's
            # group to cluster-admin; super-admin.conf (system:masters) needs no RBAC, so the
            # program's first calls into the tenant cannot be refused with a 403.
            provider_key=SUPER_ADMIN_KUBECONFIG_KEY,
        )
        return tcp, secret

    def _prod_control_plane(
        self, namespace: k8s.core.v1.Namespace, policies: Sequence[pulumi.Resource]
    ) -> tuple[
        k8s.apiextensions.CustomResource, k8s.apiextensions.CustomResource, k8s.core.v1.Secret
    ]:
        tenant = self._tenant
        provider = self._platform.existing.cluster_api.infrastructure.name
        datastore = self._prod_datastore(namespace, policies)
        infra = self._custom_resource(
            f"{self._name}-infrastructure-cluster",
            infrastructure_cluster(
                provider,
                name=tenant.name,
                namespace=self._ns,
                labels=self._labels,
                address=self._address,
            ),
            self._on_management(depends_on=[namespace, *self._management.ready]),
        )
        kcp = self._custom_resource(
            f"{self._name}-control-plane",
            kamaji_control_plane(
                tenant,
                namespace=self._ns,
                kubernetes_version=self._platform.kubernetes_version,
                address=self._address,
            ),
            self._on_management(
                depends_on=[namespace, *policies, *datastore, *self._management.ready],
                custom_timeouts=self._control_plane_timeouts(),
            ),
        )
        # Not after the KamajiControlPlane: it becomes ready only once this Cluster owns it.
        cluster = self._custom_resource(
            f"{self._name}-cluster",
            capi_cluster(tenant, namespace=self._ns, infrastructure_provider=provider),
            self._on_management(
                depends_on=[namespace, infra, *self._management.ready],
                custom_timeouts=pulumi.CustomTimeouts(delete=CAPI_DELETE_TIMEOUT),
            ),
        )
        # The provider copies admin.conf into <cluster>-kubeconfig (provider v0.20.0
        # controllers/kamajicontrolplane_controller_resources.go:132-172), whose group is bound to
        # cluster-admin only once Kamaji's in-tenant soot manager ran PhaseClusterAdminRBAC, after
        # the control plane reports Ready (Kamaji 26.8.2-edge controllers/soot/manager.go:212-216,
        # internal/resources/kubeadm_phases.go:176-214; clastix/kamaji#1167, unfixed). So, as in
        # the lab, the tenant provider uses super-admin.conf from the TenantControlPlane's own
        # Secret (the TCP is named and namespaced like the KamajiControlPlane,
        # kamajicontrolplane_controller_tcp.go:32-34); people get its admin.conf.
        secret = self._read_kubeconfig(
            f"{self._name}-admin-kubeconfig",
            [kcp, cluster],
            admin_kubeconfig_secret(tenant.name),
            ADMIN_KUBECONFIG_KEY,
            provider_key=SUPER_ADMIN_KUBECONFIG_KEY,
        )
        return kcp, cluster, secret

    def _prod_datastore(
        self, namespace: k8s.core.v1.Namespace, policies: Sequence[pulumi.Resource]
    ) -> list[pulumi.Resource]:
        """The tenant's dedicated DataStore; a named (shared) one is declared elsewhere."""
        tenant = self._tenant
        dedicated = tenant.data_store.dedicated
        if dedicated is None:
            return []
        if dedicated.deploys_kamaji_etcd:
            release = self._release(
                f"{self._name}-etcd",
                dedicated_etcd_name(tenant.name),
                PINNED.kamaji_etcd,
                self._ns,
                kamaji_etcd_values(
                    tenant.name, dedicated, cluster_domain=self._platform.existing.cluster_domain
                ),
                self._on_management(depends_on=[namespace, *policies, *self._management.ready]),
            )
            return [release]
        config_key = dedicated.credentials_config_key
        if config_key is None:  # enforced by DedicatedDataStore
            raise ValueError(f"tenant {tenant.name}: external DataStore without credentials")
        secret_name = f"{tenant.name}-datastore-credentials"
        driver = dedicated.driver
        credentials = pulumi.Config().require_secret(config_key)
        secret = k8s.core.v1.Secret(
            f"{self._name}-datastore-credentials",
            metadata={"name": secret_name, "namespace": self._ns, "labels": dict(self._labels)},
            type="Opaque",
            # Derived from a secret config value, so itself secret.
            string_data=credentials.apply(
                lambda raw: datastore_secret_data(driver, raw, config_key)
            ),
            opts=self._on_management(
                depends_on=[namespace], additional_secret_outputs=["data", "stringData"]
            ),
        )
        datastore = self._custom_resource(
            f"{self._name}-datastore",
            external_datastore(
                data_store_name(tenant),
                dedicated,
                secret_name=secret_name,
                secret_namespace=self._ns,
                labels=self._labels,
            ),
            self._on_management(depends_on=[secret, *self._management.ready]),
        )
        return [datastore]

    def _read_kubeconfig(
        self,
        resource_name: str,
        after: Sequence[pulumi.CustomResource],
        secret_name: str,
        key: str,
        provider_key: str | None = None,
    ) -> k8s.core.v1.Secret:
        """Read the kubeconfig Secret once ``after`` is ready and set ``self.kubeconfig`` (from
        ``key``, exported for people) and the tenant provider's (from ``provider_key``, else the
        same).

        The read's ID waits for the control plane's ID: on a first preview the control plane
        does not exist, the ID is unknown and the engine skips the read (the kubeconfig stays
        unknown) instead of failing on a Secret that is not there yet."""
        namespace = self._ns
        secret_id = pulumi.Output.all(*[r.id for r in after]).apply(
            lambda _: f"{namespace}/{secret_name}"
        )
        secret = k8s.core.v1.Secret.get(
            resource_name,
            secret_id,
            opts=self._on_management(depends_on=list(after), additional_secret_outputs=["data"]),
        )
        self.kubeconfig = pulumi.Output.secret(
            secret.data.apply(lambda data: decode_kubeconfig(data, key, secret_name))
        )
        self._provider_kubeconfig: pulumi.Output[str] = (
            pulumi.Output.secret(
                secret.data.apply(lambda data: decode_kubeconfig(data, provider_key, secret_name))
            )
            if provider_key is not None
            else self.kubeconfig
        )
        return secret

    # ------------------------------------------------------------------ inside the tenant

    def _inside_tenant(self) -> list[pulumi.Resource]:
        """Calico, (prod) the GPU Operator, HAMi and the GPU quotas; returns [Calico, HAMi]."""
        platform, tenant = self._platform, self._tenant
        system = [TIGERA_OPERATOR_NAMESPACE, HAMI_NAMESPACE]
        if platform.mode == "prod":
            system.append(GPU_OPERATOR_NAMESPACE)
        # Belt and braces next to the webhook's whitelist: HAMi skips namespaces labelled so.
        self._namespaces = {
            ns: self._tenant_namespace(ns, {HAMI_WEBHOOK_IGNORE_LABEL: "ignore"}) for ns in system
        }
        for ns in namespaces_to_create(tenant, existing=system):
            self._namespaces[ns] = self._tenant_namespace(ns, {})

        operator_namespace = self._namespaces[TIGERA_OPERATOR_NAMESPACE]
        # Calico's CRDs first: the tigera-operator chart (v3.32+) renders an Installation but ships
        # no CRD for it, and Helm refuses a release whose kinds the API does not serve. A Helm
        # release (not server-side apply) because its stored release fits the 1 MiB Secret limit
        # (tests/contract/test_calico_crds.py measures it) and Helm waits until every CRD is
        # Established; upstream only warns about kubectl's client-side apply annotation.
        calico_crds = self._release(
            f"{self._name}-calico-crds",
            CALICO_CRDS_RELEASE,
            PINNED.calico_crds,
            TIGERA_OPERATOR_NAMESPACE,
            calico_crds_values(),
            self._in_tenant(depends_on=[operator_namespace]),
        )
        calico = self._release(
            f"{self._name}-calico",
            "calico",
            PINNED.tigera_operator,
            TIGERA_OPERATOR_NAMESPACE,
            calico_values(tenant.network.pod_cidr, self._address),
            self._in_tenant(depends_on=[operator_namespace, calico_crds]),
        )
        hami_after: list[pulumi.Resource] = [self._namespaces[HAMI_NAMESPACE], calico]
        if platform.mode == "lab":
            # HAMi's certificate hook Job and scheduler reach the API through its ClusterIP.
            hami_after.append(self._lab_kube_proxy())
        if platform.mode == "prod":
            operator_after: list[pulumi.Resource] = [
                self._namespaces[GPU_OPERATOR_NAMESPACE],
                calico,
            ]
            repositories = driver_repositories_configmap(platform.gpu_driver)
            if repositories is not None:
                metadata: Any = {**repositories["metadata"], "labels": dict(self._labels)}
                operator_after.append(
                    k8s.core.v1.ConfigMap(
                        f"{self._name}-gpu-driver-repositories",
                        metadata=metadata,
                        data=repositories["data"],
                        opts=self._in_tenant(depends_on=[self._namespaces[GPU_OPERATOR_NAMESPACE]]),
                    )
                )
            hami_after.append(
                self._release(
                    f"{self._name}-gpu-operator",
                    "gpu-operator",
                    PINNED.gpu_operator,
                    GPU_OPERATOR_NAMESPACE,
                    gpu_operator_values(platform.gpu_driver),
                    self._in_tenant(depends_on=operator_after),
                )
            )
        hami = self._release(
            f"{self._name}-hami",
            "hami",
            PINNED.hami,
            HAMI_NAMESPACE,
            hami_values(
                kubernetes_version=platform.kubernetes_version,
                hami=platform.hami,
                modes=device_modes(platform, tenant),
                excluded_namespaces=webhook_excluded_namespaces(platform.mode),
                split_count=device_split_count(p.slots_per_card for p in tenant.worker_pools),
            ),
            self._in_tenant(depends_on=hami_after),
        )
        if "mock" in device_modes(platform, tenant):
            self._lab_mock_device_plugin(after=[hami])
        for quota in tenant.gpu_quotas:
            manifest = resource_quota(quota, tenant.name)
            created = self._namespaces.get(quota.namespace)
            k8s.core.v1.ResourceQuota(
                resource_names.tenant_quota(self._name, quota.namespace),
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=self._in_tenant(depends_on=[created] if created else []),
            )
        self._hami = hami
        return [calico, hami]

    def _lab_kube_proxy(self) -> k8s.apps.v1.DaemonSet:
        """LAB_ONLY: a kube-proxy that never writes a conntrack sysctl, in place of Kamaji's addon
        (``components.lab.kube_proxy``); its kubeconfig points at the control plane's
        LoadBalancer address, the only way to the API before kube-proxy runs."""
        if self._address is None:
            raise ValueError(
                f"tenant {self._tenant.name}: the lab's kube-proxy needs the control plane's "
                "LoadBalancer address (controlPlane.address or the MetalLB pool)"
            )
        objects = kube_proxy.manifests(self._platform.kubernetes_version, self._labels)
        name = f"{self._name}-kube-proxy"
        account = typed_object(f"{name}-account", objects["serviceAccount"], self._in_tenant())
        binding = typed_object(
            f"{name}-binding",
            objects["clusterRoleBinding"],
            self._in_tenant(depends_on=[account]),
        )
        role = typed_object(f"{name}-config-reader", objects["role"], self._in_tenant())
        typed_object(
            f"{name}-config-reader-binding",
            objects["roleBinding"],
            self._in_tenant(depends_on=[role]),
        )
        pod_cidr = self._tenant.network.pod_cidr
        config = typed_object(
            f"{name}-config",
            objects["configMap"],
            self._in_tenant(),
            data=self._address.apply(
                lambda address: kube_proxy.config_map_data(
                    pod_cidr, f"https://{address}:{API_SERVER_PORT}"
                )
            ),
        )
        daemon_set: k8s.apps.v1.DaemonSet = typed_object(
            name, objects["daemonSet"], self._in_tenant(depends_on=[binding, config])
        )
        return daemon_set

    def _lab_mock_device_plugin(self, after: Sequence[pulumi.Resource]) -> k8s.apps.v1.DaemonSet:
        """LAB_ONLY: HAMi's mock device plugin with a device config it can decode, in place of
        the chart's (``components.lab.mock_device_plugin``). Created once HAMi is up: then the
        tenant's pod network and ClusterIPs work, and awaiting the DaemonSet proves the mock runs
        on every node."""
        labels = {**self._labels, LAB_ONLY_LABEL: "true"}
        objects = mock_device_plugin.manifests(
            HAMI_NAMESPACE, PINNED.hami_mock_device_plugin_tag, labels
        )
        name = f"{self._name}-mock-device-plugin"
        # Every object after HAMi: a lab deployed before this layout had the chart's own mock,
        # with these names, which Helm removes only on HAMi's upgrade (created earlier, ours
        # would collide with them: pulumi-kubernetes creates without upsert).
        first = [self._namespaces[HAMI_NAMESPACE], *after]
        account = typed_object(
            f"{name}-account", objects["serviceAccount"], self._in_tenant(depends_on=first)
        )
        role = typed_object(
            f"{name}-role", objects["clusterRole"], self._in_tenant(depends_on=first)
        )
        binding = typed_object(
            f"{name}-binding",
            objects["clusterRoleBinding"],
            self._in_tenant(depends_on=[role, account]),
        )
        config = typed_object(
            f"{name}-config", objects["configMap"], self._in_tenant(depends_on=first)
        )
        timeout = f"{release_timeout_seconds(self._platform.mode)}s"
        daemon_set: k8s.apps.v1.DaemonSet = typed_object(
            name,
            objects["daemonSet"],
            self._in_tenant(
                depends_on=[binding, config, *after],
                custom_timeouts=pulumi.CustomTimeouts(create=timeout, update=timeout),
            ),
        )
        return daemon_set

    def _tenant_namespace(self, namespace: str, extra_labels: dict[str, str]) -> pulumi.Resource:
        return k8s.core.v1.Namespace(
            resource_names.tenant_namespace(self._name, namespace),
            metadata={"name": namespace, "labels": {**self._labels, **extra_labels}},
            opts=self._in_tenant(),
        )

    def _workloads(self) -> None:
        """Declared GPU workloads as Deployments, after HAMi (whose webhook routes them to its
        scheduler). Not awaited: whether a workload gets its GPU share is the acceptance
        suite's question, not a reason to fail the platform's deployment."""
        for workload in self._tenant.workloads:
            manifest = workload_deployment(workload, self._tenant.name)
            metadata: Any = {
                **manifest["metadata"],
                "annotations": {"pulumi.com/skipAwait": "true"},
            }
            created = self._namespaces.get(workload.namespace)
            k8s.apps.v1.Deployment(
                resource_names.tenant_workload(self._name, workload.namespace, workload.name),
                metadata=metadata,
                spec=manifest["spec"],
                opts=self._in_tenant(depends_on=[self._hami, *([created] if created else [])]),
            )
