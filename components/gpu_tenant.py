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

import dataclasses
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_command import local

from components import resource_names
from components.admission_policies import (
    admission_binding,
    admission_params,
    admission_policy,
    claim_rule_definitions,
    device_sharing,
    rule_definitions,
)
from components.availability import control_plane_budget
from components.backups import deploy as backups
from components.backups.objects import BackupPlan
from components.config import PlatformConfig, Tenant
from components.k8s_objects import typed_object
from components.kubernetes_versions import kamaji_update_problem, upgrade_problem
from components.labels import HAMI_WEBHOOK_IGNORE_LABEL, IDENTITY_READ_SUFFIX
from components.management_cluster import ManagementCluster
from components.metrics import deploy as metrics
from components.metrics.objects import tenant_api_server
from components.metrics.scrape import TenantSource, tenant_sources
from components.metrics.self_view import NAMESPACE as USAGE_NAMESPACE
from components.metrics.usage_publisher import publishes_usage
from components.name_plan import CONTROL_PLANE_BUDGET_PART, SERVED_VERSION_PART
from components.scripts import read_script
from components.substrate import (
    BASH,
    NOTHING_TO_DELETE,
    Declared,
    DraDriver,
    InsideTenant,
    Substrate,
    TenantSite,
)
from components.tenant_specs import (
    API_SERVER_PORT,
    datastore_shape,
    datastore_shape_problem,
    deployed_datastore_shape,
    device_quota,
    dra_workload,
    kubeconfig_server,
    namespaces_to_create,
    network_policies,
    resource_quota,
    tenant_labels,
    workload_deployment,
)
from components.tenant_values import (
    CALICO_CRDS_RELEASE,
    HAMI_NAMESPACE,
    TIGERA_OPERATOR_NAMESPACE,
    calico_crds_values,
    calico_values,
    device_modes,
    device_split_count,
    hami_values,
    webhook_excluded_namespaces,
)
from components.versions import PINNED

TYPE_TOKEN = "gpu-platform:index:GpuTenant"


@dataclass(frozen=True)
class GpuTenantArgs:
    platform: PlatformConfig
    substrate: Substrate
    tenant: Tenant
    management: ManagementCluster
    # The control plane's pinned LoadBalancer address (lab: a controlPlane.address checked
    # against the MetalLB pool). None falls back to tenants[].controlPlane.address, then to
    # whatever the load balancer assigns (lab: from management.tenant_address_pool, read back).
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
    # Only when read with ``fields=("spec", "status")`` (the control plane's version).
    spec: pulumi.Output[Any]
    status: pulumi.Output[Any]

    def __init__(
        self,
        resource_name: str,
        api_version: str,
        kind: str,
        resource_id: pulumi.Input[str],
        opts: pulumi.ResourceOptions,
        fields: Sequence[str] = (),
    ) -> None:
        super().__init__(
            f"kubernetes:{api_version}:{kind}",
            resource_name,
            {"apiVersion": api_version, "kind": kind, "metadata": None, **dict.fromkeys(fields)},
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
    # The gate that passes once the tenant's API serves the tenant's version.
    served_version: local.Command
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
        self.hami_namespace = HAMI_NAMESPACE
        # A gpuSharing: dra tenant's driver (its DeviceClass), set with HAMi inside the tenant.
        self._dra: DraDriver | None = None

        address = args.address if args.address is not None else args.tenant.control_plane.address
        self._address: pulumi.Output[str] | None = (
            pulumi.Output.from_input(address) if address is not None else None
        )

        self._substrate = args.substrate
        self._site = TenantSite(
            name=name,
            platform=args.platform,
            tenant=args.tenant,
            management=args.management,
            component=self,
            namespace=self._ns,
            labels=self._labels,
            address=self._address,
            release_timeout=args.substrate.release_timeout_seconds,
        )

        namespace, policies = self._management_namespace()
        self.namespace = namespace.metadata.apply(lambda m: _meta_name(m, self._ns))
        self._control_plane_budget(namespace)
        parts = args.substrate.control_plane(self._site, namespace, policies)
        control_plane = parts.control_plane
        identity = parts.identity
        self.cluster_name = parts.cluster_name
        self.teardown_root: pulumi.Resource = parts.teardown_root
        self.kubeconfig = parts.kubeconfig.kubeconfig
        self._provider_kubeconfig = parts.kubeconfig.provider_kubeconfig
        kubeconfig_read = parts.kubeconfig.secret
        # Everything below uses the address the control plane really has.
        self._address = parts.address
        self._site = dataclasses.replace(self._site, address=parts.address)
        # Tied to the registration (known in preview, unlike the ID).
        self.control_plane_name = control_plane.urn.apply(lambda _: args.tenant.name)
        # Workers follow the control plane: each of their changes waits for the tenant's API
        # to serve the tenant's version (``_served_version_gate``).
        self._live_control_plane: _LiveObject | None = None
        identifiers = [
            self._object_identity(declared, control_plane=declared.resource is control_plane)
            for declared in identity
        ]
        self.served_version = self._served_version_gate(control_plane, kubeconfig_read)
        self.control_plane_ready = [control_plane, kubeconfig_read, self.served_version]

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
            cluster_identifier=pulumi.Output.all(*identifiers).apply(
                lambda uids: tenant_cluster_identifier(args.tenant.name, uids)
            ),
            # A lab torn down by hand (kind cluster deleted) must still be destroyable.
            delete_unreachable=args.substrate.tenant_provider_deletes_unreachable,
            # Nothing inside the tenant (HAMi's kube-scheduler, the lab's kube-proxy) moves to a
            # new version before the API server serves it.
            opts=pulumi.ResourceOptions(parent=self, depends_on=[self.served_version]),
        )
        self.endpoint = (
            pulumi.Output.concat("https://", self._address, f":{API_SERVER_PORT}")
            if self._address is not None
            else pulumi.Output.unsecret(self.kubeconfig.apply(kubeconfig_server))
        )

        self.ready = self._inside_tenant()
        self._workloads()
        if args.platform.metrics.enabled:
            self._metrics_agent(namespace)
        if args.tenant.backups.enabled:
            self._backups(namespace, control_plane, kubeconfig_read)

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

    def _object_identity(self, declared: Declared, control_plane: bool) -> pulumi.Output[str]:
        """What identifies one incarnation of a control-plane object: the uid of the live
        object, read back by its ID (``<resource name>-identity``), never the ID itself.

        A read runs in preview whenever its ID is known (pulumi/pulumi v3.259.0
        pkg/resource/deploy/step.go:1314-1320). In a preview of an in-place update the ID is
        the deployed one, so the read returns the live uid even when the update's own preview
        outputs carry none (pulumi-kubernetes returns the inputs as-is when they hold unknowns,
        provider/pkg/provider/provider.go:2367-2371 at v4.32.0) and the identifier stays the
        deployed one. On a create or replacement the ID is unknown, the read is skipped and the
        identifier unknown: a replacement of the tenant provider, which is right then
        (DiffConfig, provider.go:486-515). In ``up`` the read follows the control plane's
        create or update, so it sees the object as it now is."""
        live = _LiveObject(
            f"{declared.resource_name}{IDENTITY_READ_SUFFIX}",
            declared.api_version,
            declared.kind,
            declared.resource.id,
            self._site.on_management(depends_on=[declared.resource]),
            fields=("spec", "status") if control_plane else (),
        )
        if control_plane:
            self._live_control_plane = live
        what = f"{declared.kind} {declared.resource_name}"
        return live.metadata.apply(lambda meta: _live_uid(meta, what))

    def _served_version_gate(
        self, control_plane: pulumi.Resource, kubeconfig_read: pulumi.Resource
    ) -> local.Command:
        """The gate between the control plane and everything that runs a Kubernetes version
        inside the tenant (workers, HAMi's kube-scheduler, the lab's kube-proxy): it passes once
        the tenant's own API serves the tenant's version (``scripts/tenant/served-version.sh``),
        and re-runs when that version changes.

        Its version is checked against the one the control plane runs now, read from the live
        control-plane object (its identity read, ``_object_identity``): in a preview of an
        update that read returns the deployed object, so a downgrade or a jump of more than one
        minor fails the preview, naming the allowed next versions
        (``components.kubernetes_versions.upgrade_problem``); so does a version Kamaji's webhook
        will refuse against the spec the object declares, such as going back to the running
        version while an upgrade has not finished (``kamaji_update_problem``). On a first
        deployment the read is skipped (no ID yet) and there is nothing to check; in ``up`` it
        follows the control plane's update and sees the new version, so the check is the
        preview's.

        The same read carries the datastore shape the tenant was deployed with
        (``tenant_specs.DATASTORE_SHAPE_ANNOTATION``): a change of a key fixed at creation fails
        the preview the same way (``tenant_specs.datastore_shape_problem``)."""
        platform, tenant, substrate = self._platform, self._tenant, self._substrate
        wanted = platform.version_of(tenant)
        index = [t.name for t in platform.tenants].index(tenant.name)
        key = f"tenants[{index}].kubernetesVersion"
        live = self._live_control_plane

        def checked(parts: list[Any]) -> str:
            deployed_shape = deployed_datastore_shape(parts[2])
            if deployed_shape is not None:
                problem = datastore_shape_problem(index, deployed_shape, datastore_shape(tenant))
                if problem is not None:
                    raise pulumi.RunError(problem)
            previous = substrate.running_control_plane_version(parts[0], parts[1])
            if previous is not None and previous != wanted:
                problem = upgrade_problem(previous, wanted, substrate.tenant_kubernetes_versions())
                if problem is not None:
                    # A RunError that is not a ValueError: the SDK passes it through its input
                    # serialization unwrapped (it wraps only ValueError and AssertionError,
                    # the pinned pulumi 3.272.0 pulumi/runtime/rpc.py:233-242), so the CLI prints
                    # this one line.
                    raise pulumi.RunError(f"{key}: {problem}")
                pulumi.log.info(
                    f"tenant {tenant.name}: control plane {previous} -> {wanted}; its workers "
                    "follow once the tenant API serves it",
                    resource=self,
                )
            # Kamaji's webhook judges the spec, not the running version: after an upgrade that
            # never finished, going back to the running version is a downgrade to it.
            declared = substrate.declared_control_plane_version(parts[0])
            if declared is not None and declared != wanted:
                problem = kamaji_update_problem(declared, wanted, previous)
                if problem is not None:
                    raise pulumi.RunError(f"{key}: {problem}")
            return wanted

        expected: pulumi.Output[str] = (
            pulumi.Output.all(live.spec, live.status, live.metadata).apply(checked)
            if live is not None
            else pulumi.Output.from_input(wanted)
        )
        environment: pulumi.Output[dict[str, str]] = pulumi.Output.all(
            expected, self._provider_kubeconfig
        ).apply(lambda values: {"EXPECTED_VERSION": values[0], "TENANT_KUBECONFIG": values[1]})
        return local.Command(
            f"{self._name}-{SERVED_VERSION_PART}",
            create=read_script("tenant", "served-version.sh"),
            delete=NOTHING_TO_DELETE,
            interpreter=list(BASH),
            environment=environment,  # secret: it carries the (secret) kubeconfig
            logging=local.Logging.STDERR,
            opts=pulumi.ResourceOptions(
                parent=self,
                depends_on=[control_plane, kubeconfig_read],
                additional_secret_outputs=["stdout", "stderr"],
            ),
        )

    def _in_tenant(self, **kwargs: Any) -> pulumi.ResourceOptions:
        """Options of every object inside the tenant: its own provider, and no separate delete
        when the whole tenant goes (Kamaji removes the tenant's data with its control plane;
        uninstalling Calico or HAMi first would only wait on finalizers whose nodes are leaving)."""
        return pulumi.ResourceOptions(
            parent=self, provider=self.provider, deleted_with=self.teardown_root, **kwargs
        )

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
                f"{self._name}-namespace", self._ns, opts=self._site.on_management()
            )
        else:
            namespace = k8s.core.v1.Namespace(
                f"{self._name}-namespace",
                metadata={"name": self._ns, "labels": dict(self._labels)},
                opts=self._site.on_management(),
            )
        blocked = self._substrate.blocked_pod_cidrs(self._platform)
        policies = [
            k8s.networking.v1.NetworkPolicy(
                f"{self._name}-{manifest['metadata']['name']}",
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=self._site.on_management(depends_on=[namespace]),
            )
            for manifest in network_policies(tenant.name, self._ns, blocked)
        ]
        return namespace, policies

    def _control_plane_budget(self, namespace: pulumi.Resource) -> None:
        """A replicated control plane's PodDisruptionBudget in its management namespace: Kamaji
        creates none (components.availability), so without it a node drain may evict every
        API server of the tenant at once."""
        budget = control_plane_budget(
            self._tenant.name, self._ns, self._tenant.control_plane.replicas, self._labels
        )
        if budget is not None:
            k8s.policy.v1.PodDisruptionBudget(
                f"{self._name}-{CONTROL_PLANE_BUDGET_PART}",
                metadata=budget["metadata"],
                spec=budget["spec"],
                opts=self._site.on_management(depends_on=[namespace]),
            )

    def _inside_tenant(self) -> list[pulumi.Resource]:
        """Calico, what the environment needs before HAMi (lab: its kube-proxy; prod: the GPU
        Operator), HAMi, what the environment adds after it (lab: the mock device plugin) and
        the GPU quotas; returns [Calico, HAMi]."""
        platform, tenant = self._platform, self._tenant
        system = [
            TIGERA_OPERATOR_NAMESPACE,
            HAMI_NAMESPACE,
            *self._substrate.tenant_system_namespaces,
        ]
        # Belt and braces next to the webhook's whitelist: HAMi skips namespaces labelled so.
        self._namespaces = {
            ns: self._tenant_namespace(ns, {HAMI_WEBHOOK_IGNORE_LABEL: "ignore"}) for ns in system
        }
        for ns in namespaces_to_create(tenant, existing=system):
            self._namespaces[ns] = self._tenant_namespace(ns, {})
        inside = InsideTenant(
            site=self._site,
            provider=self.provider,
            teardown_root=self.teardown_root,
            namespaces=self._namespaces,
        )

        operator_namespace = self._namespaces[TIGERA_OPERATOR_NAMESPACE]
        # Calico's CRDs first: the tigera-operator chart (v3.32+) renders an Installation but ships
        # no CRD for it, and Helm refuses a release whose kinds the API does not serve. A Helm
        # release (not server-side apply) because its stored release fits the 1 MiB Secret limit
        # (tests/contract/test_calico_crds.py measures it) and Helm waits until every CRD is
        # Established; upstream only warns about kubectl's client-side apply annotation.
        calico_crds = inside.release(
            f"{self._name}-calico-crds",
            CALICO_CRDS_RELEASE,
            PINNED.calico_crds,
            TIGERA_OPERATOR_NAMESPACE,
            calico_crds_values(),
            inside.opts(depends_on=[operator_namespace]),
        )
        calico = inside.release(
            f"{self._name}-calico",
            "calico",
            PINNED.tigera_operator,
            TIGERA_OPERATOR_NAMESPACE,
            calico_values(tenant.network.pod_cidr, self._address),
            inside.opts(depends_on=[operator_namespace, calico_crds]),
        )
        excluded = webhook_excluded_namespaces(self._substrate.tenant_system_namespaces)
        hami_after: list[pulumi.Resource] = [
            self._namespaces[HAMI_NAMESPACE],
            calico,
            *self._substrate.before_hami(inside, calico),
            *self._admission_policies(excluded),
        ]
        modes = device_modes(tenant, self._substrate.default_device_mode())
        hami = inside.release(
            f"{self._name}-hami",
            "hami",
            PINNED.hami,
            HAMI_NAMESPACE,
            hami_values(
                kubernetes_version=platform.version_of(tenant),
                hami=platform.hami,
                modes=modes,
                excluded_namespaces=excluded,
                split_count=device_split_count(p.slots_per_card for p in tenant.worker_pools),
                hami_cards=tenant.gpu_sharing == "hami",
            ),
            inside.opts(depends_on=hami_after),
        )
        if tenant.gpu_sharing == "dra":
            # The environment's DRA driver publishes the cards instead of HAMi's device plugin;
            # HAMi's webhook and scheduler stay (they leave pods without its resources alone).
            self._dra = self._substrate.dra_driver(inside, tenant, after=[hami])
        else:
            self._substrate.after_hami(inside, hami, modes)
        for quota in tenant.gpu_quotas:
            manifest = resource_quota(quota, tenant.name)
            created = self._namespaces.get(quota.namespace)
            k8s.core.v1.ResourceQuota(
                resource_names.tenant_quota(self._name, quota.namespace),
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=self._in_tenant(depends_on=[created] if created else []),
            )
        for device_quota_config in tenant.device_quotas:
            manifest = device_quota(
                device_quota_config, tenant.name, self._substrate.dra_device_classes
            )
            created = self._namespaces.get(device_quota_config.namespace)
            k8s.core.v1.ResourceQuota(
                resource_names.tenant_quota(self._name, device_quota_config.namespace),
                metadata=manifest["metadata"],
                spec=manifest["spec"],
                opts=self._in_tenant(depends_on=[created] if created else []),
            )
        self._hami = hami
        return [calico, hami]

    def _admission_policies(self, excluded: list[str]) -> list[pulumi.Resource]:
        """The pack's GPU rules in the tenant's API server (``components.admission_policies``),
        before HAMi and so before every workload: its params, the policy, the binding."""
        rules = rule_definitions()
        sharing = device_sharing(self._tenant, self._substrate.dra_device_classes)
        params = admission_params(rules, self._tenant.admission, self._labels, sharing)
        limits = k8s.core.v1.ConfigMap(
            resource_names.tenant_child(self._name, "admission-limits"),
            metadata=params["metadata"],
            data=params["data"],
            opts=self._in_tenant(),
        )
        manifest = admission_policy(rules, self._labels)
        policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            resource_names.tenant_child(self._name, "admission-policy"),
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=self._in_tenant(),
        )
        manifest = admission_binding(rules, self._tenant.admission.mode, excluded, self._labels)
        binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            resource_names.tenant_child(self._name, "admission-binding"),
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=self._in_tenant(depends_on=[policy, limits]),
        )
        # ResourceClaims and their templates, every namespace but the environment's own system
        # ones: prod's GPU Operator validates its DRA driver with an adminAccess claim in
        # gpu-operator (v26.7.0 manifests/state-dra-validation/0400_resourceclaimtemplate.yaml),
        # which dra-admin-access would refuse and the GPUCluster would never be ready.
        claim_rules = claim_rule_definitions()
        manifest = admission_policy(claim_rules, self._labels)
        claim_policy = k8s.admissionregistration.v1.ValidatingAdmissionPolicy(
            resource_names.tenant_child(self._name, "claim-admission-policy"),
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=self._in_tenant(),
        )
        manifest = admission_binding(
            claim_rules,
            self._tenant.admission.mode,
            list(self._substrate.tenant_system_namespaces),
            self._labels,
        )
        claim_binding = k8s.admissionregistration.v1.ValidatingAdmissionPolicyBinding(
            resource_names.tenant_child(self._name, "claim-admission-binding"),
            metadata=manifest["metadata"],
            spec=manifest["spec"],
            opts=self._in_tenant(depends_on=[claim_policy, limits]),
        )
        return [limits, policy, binding, claim_policy, claim_binding]

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
            created = self._namespaces.get(workload.namespace)
            namespace = [created] if created else []
            after: list[pulumi.Resource] = [self._hami]
            if self._dra is not None:
                template, manifest = dra_workload(
                    workload, self._tenant.name, self._dra.device_class, self._dra.driver
                )
                claims = typed_object(
                    resource_names.tenant_workload_claims(
                        self._name, workload.namespace, workload.name
                    ),
                    template,
                    # Immutable once created (kubernetes v1.35.0
                    # pkg/apis/resource/validation/validation.go:617-624): a changed request
                    # replaces it, under the same name, so the old one goes first.
                    self._in_tenant(
                        depends_on=[*self._dra.ready, *namespace],
                        replace_on_changes=["spec"],
                        delete_before_replace=True,
                    ),
                )
                after = [*self._dra.ready, claims]
            metadata: Any = {
                **manifest["metadata"],
                "annotations": {"pulumi.com/skipAwait": "true"},
            }
            k8s.apps.v1.Deployment(
                resource_names.tenant_workload(self._name, workload.namespace, workload.name),
                metadata=metadata,
                spec=manifest["spec"],
                opts=self._in_tenant(depends_on=[*after, *namespace]),
            )

    def _backups(
        self,
        namespace: pulumi.Resource,
        control_plane: pulumi.Resource,
        kubeconfig_read: pulumi.Resource,
    ) -> None:
        """The tenant's scheduled datastore backups and its restore template (docs/backups.md),
        in its management namespace, once its control plane (and so Kamaji's datastore
        certificate for the tenant) exists; the target comes from the management cluster."""
        tenant = self._tenant
        plan = BackupPlan.of(tenant, self._ns, self._substrate.control_plane_pause_owner)
        backups.register_tenant(
            self._name,
            plan=plan,
            target=self._management.backup_target(tenant.name),
            on_management=self._site.on_management,
            namespace=namespace,
            after=[control_plane, kubeconfig_read],
        )

    def _metrics_agent(self, namespace: pulumi.Resource) -> None:
        """The tenant's metrics agent (docs/metrics.md): a reader inside the tenant, an agent in
        its management namespace scraping HAMi (and the substrate's sources) through the
        tenant's API server, writing to the central Prometheus with ``tenant`` set."""
        metrics.register_tenant(
            self._name,
            tenant=self._tenant.name,
            management_namespace=self._ns,
            api_server=tenant_api_server(self._tenant.name, self._ns, API_SERVER_PORT),
            reader_namespace=HAMI_NAMESPACE,
            sources=self._metrics_sources(),
            scrape_interval=self._platform.metrics.scrape_interval,
            write_to=metrics.agents_write_to(self._platform.metrics),
            password=self._management.metrics_password,
            in_tenant=self._in_tenant,
            on_management=self._site.on_management,
            after=[self._namespaces[ns] for ns in self._reader_namespaces()],
            management_after=[namespace],
        )
        if publishes_usage(self._platform.metrics):
            # The tenant's own usage, readable by its users in its own cluster (docs/metrics.md).
            metrics.register_usage_publisher(
                self._name,
                tenant=self._tenant.name,
                management_namespace=self._ns,
                usage_namespace=self._tenant_namespace(USAGE_NAMESPACE, {}),
                in_tenant=self._in_tenant,
                on_management=self._site.on_management,
                management_after=[namespace],
            )

        if self._dra is not None:  # a dra tenant (``_inside_tenant`` asked the substrate)
            # Which DRA device each claim holds: the dra path's chargeback source, billing the
            # tenant's GPU driver only (the substrate's answer: another driver's devices in the
            # tenant are not GPU cards).
            metrics.register_dra_claims(
                self._name,
                HAMI_NAMESPACE,
                (self._dra.driver,),
                self._in_tenant,
                after=[self._namespaces[HAMI_NAMESPACE]],
            )

    def _metrics_sources(self) -> tuple[TenantSource, ...]:
        return tenant_sources(self._tenant.gpu_sharing, self._substrate.tenant_metrics_sources)

    def _reader_namespaces(self) -> list[str]:
        sources = self._metrics_sources()
        return sorted({HAMI_NAMESPACE, *(source.namespace for source in sources)})
