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
from pulumi_command import local

from components import chart_cache
from components.scripts import read_script
from components.tenant_specs import decode_kubeconfig

if TYPE_CHECKING:
    from components.backups.objects import PauseOwner
    from components.config import PlatformConfig, Tenant, WorkerPool
    from components.management_values import DefaultEtcd
    from components.metrics.deploy import MetricsStorage
    from components.metrics.scrape import TenantSource
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
class DraDriver:
    """A tenant's DRA driver: the DeviceClass its workloads' claims name, the driver name (the
    attribute and capacity domain of its devices) and what a workload must wait for."""

    device_class: str
    driver: str
    ready: Sequence[pulumi.Resource]


@dataclass(frozen=True)
class Declared:
    """A custom resource the program registered, with what a read of it by ID needs."""

    resource: k8s.apiextensions.CustomResource
    resource_name: str
    api_version: str
    kind: str


@dataclass(frozen=True)
class ControlPlaneParts:
    """What an environment built for one tenant's control plane."""

    control_plane: k8s.apiextensions.CustomResource
    """lab: the TenantControlPlane; prod: the KamajiControlPlane."""
    identity: list[Declared]
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
    return declared_resource(resource_name, manifest, opts).resource


def declared_resource(
    resource_name: str, manifest: Mapping[str, Any], opts: pulumi.ResourceOptions
) -> Declared:
    """``custom_resource``, remembering what a later read of it by ID needs."""
    resource = k8s.apiextensions.CustomResource(
        resource_name,
        api_version=manifest["apiVersion"],
        kind=manifest["kind"],
        metadata=manifest["metadata"],
        spec=manifest["spec"],
        opts=opts,
    )
    return Declared(resource, resource_name, manifest["apiVersion"], manifest["kind"])


def chart_release(
    resource_name: str,
    release_name: str,
    chart: HelmChart,
    namespace: str,
    values: dict[str, Any],
    timeout: int,
    opts: pulumi.ResourceOptions,
) -> k8s.helm.v3.Release:
    """A pinned chart from its verified archive in the project's ``.charts/``
    (``chart_cache.chart_input``: no repository asked at install, the same input on every
    machine), awaited until its workloads are ready."""
    return k8s.helm.v3.Release(
        resource_name,
        k8s.helm.v3.ReleaseArgs(
            name=release_name,
            chart=chart_cache.chart_input(chart),
            version=chart.version,
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


BASH = ("/bin/bash", "-c")
# Read-only commands and readiness gates have nothing to undo on delete.
NOTHING_TO_DELETE = "true"
# What a made-once secret's command never re-runs for: pulumi-command v1.2.1 has no Diff of its
# own and runs ``create`` again on any changed input when no ``update`` is given
# (provider/pkg/provider/common/inputs.go:26-30, local/commandController.go:66-90), which would
# replace the secret; an edited comment in the script would rotate every archive key.
MADE_ONCE_IGNORED = ("create", "delete", "interpreter", "logging", "environment", "dir")


def secret_made_once(
    resource_name: str, parent: pulumi.Resource, depends_on: Sequence[pulumi.Resource] = ()
) -> pulumi.Output[str]:
    """32 random bytes as hex (``new-secret.sh``), made once on the host running Pulumi and
    kept in the stack's state as a secret until the resource is replaced (``pulumi up
    --replace``): ``delete`` does nothing, a changed script or setting is ignored
    (``MADE_ONCE_IGNORED``), and the output is never logged (pulumi-command logs a command's
    stdout by default, local/logging.go:27-28, even where ``stdout`` is a secret output)."""
    command = local.Command(
        resource_name,
        create=read_script("management", "new-secret.sh"),
        delete=NOTHING_TO_DELETE,
        interpreter=list(BASH),
        logging=local.Logging.NONE,
        opts=pulumi.ResourceOptions(
            parent=parent,
            depends_on=list(depends_on),
            additional_secret_outputs=["stdout"],
            ignore_changes=list(MADE_ONCE_IGNORED),
        ),
    )
    return pulumi.Output.secret(command.stdout.apply(str.strip))


@dataclass(frozen=True)
class ClusterAccess:
    """How the program reaches the management cluster: what an environment returns for it."""

    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    teardown_root: pulumi.Resource | None
    """Deleting it deletes every object in the cluster (lab: the kind cluster); None for a
    cluster the program does not own (prod)."""
    kind_network: pulumi.Output[str] | None = None
    lb_pool: pulumi.Output[list[str]] | None = None
    tenant_address_pool: str | None = None
    """The MetalLB IPAddressPool an unpinned tenant's control-plane Service names
    (``metallb.io/address-pool``); None where the load balancer needs no such choice."""


@dataclass(frozen=True)
class ManagementSite:
    """The management cluster being built, once reachable: every Kubernetes object on the
    management provider, explicitly, and (lab) deleted with the kind cluster on destroy
    (deleting them one by one first would only wait on finalizers whose controllers are being
    removed)."""

    name: str
    platform: PlatformConfig
    component: pulumi.Resource
    kubeconfig: pulumi.Output[str]
    provider: k8s.Provider
    teardown_root: pulumi.Resource | None

    def k8s_opts(self, depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(
            parent=self.component,
            provider=self.provider,
            depends_on=list(depends_on),
            deleted_with=self.teardown_root,
        )

    def namespace(self, namespace: str) -> k8s.core.v1.Namespace:
        return k8s.core.v1.Namespace(
            f"{self.name}-ns-{namespace}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace),
            opts=self.k8s_opts(),
        )

    def release(
        self,
        release: str,
        chart: HelmChart | str,
        namespace: str | k8s.core.v1.Namespace,
        values: Mapping[str, Any],
        depends_on: Sequence[pulumi.Resource] = (),
        timeout: int = 600,
    ) -> k8s.helm.v3.Release:
        """A pinned chart — its verified archive in ``.charts/`` (``chart_cache.chart_input``), or
        the local Kamaji chart directory pinned by content (``chart_cache.kamaji_chart_input``),
        each a project-relative path, the same input on every machine, and no repository asked
        at install — in its own namespace (a Namespace object, so destroy removes it; two
        releases that share one pass the same ``site.namespace(...)``), awaited until its
        workloads are ready."""
        ns = self.namespace(namespace) if isinstance(namespace, str) else namespace
        if isinstance(chart, str):
            source: dict[str, Any] = {"chart": chart}
        else:
            source = {"chart": chart_cache.chart_input(chart), "version": chart.version}
        return k8s.helm.v3.Release(
            f"{self.name}-{release}",
            k8s.helm.v3.ReleaseArgs(
                name=release,
                **source,
                namespace=ns.metadata.name,
                values=dict(values),
                skip_await=False,
                wait_for_jobs=True,
                timeout=timeout,
            ),
            opts=self.k8s_opts(depends_on),
        )

    def custom_resource(
        self,
        suffix: str,
        manifest: Mapping[str, Any],
        depends_on: Sequence[pulumi.Resource],
        spec: pulumi.Input[Mapping[str, Any]] | None = None,
    ) -> k8s.apiextensions.CustomResource:
        """A custom resource from a manifest built by a pure builder; ``spec`` replaces the
        manifest's when it depends on deploy-time data (the MetalLB pool's addresses)."""
        return k8s.apiextensions.CustomResource(
            f"{self.name}-{suffix}",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"] if spec is None else spec,
            opts=self.k8s_opts(depends_on),
        )

    def generated_secret(
        self, suffix: str, depends_on: Sequence[pulumi.Resource] = ()
    ) -> pulumi.Output[str]:
        """``secret_made_once`` on the host running Pulumi, lab or prod alike."""
        return secret_made_once(f"{self.name}-{suffix}", self.component, depends_on)

    def gate(
        self,
        suffix: str,
        environment: pulumi.Input[Mapping[str, str]],
        depends_on: Sequence[pulumi.Resource],
        script: str = "wait-ready.sh",
    ) -> local.Command:
        """A readiness gate: ``script`` (``wait-ready.sh`` unless named) with the management
        kubeconfig (secret, written to a private temp file by the script). It re-runs only when
        its parameters change."""
        env: pulumi.Output[dict[str, str]] = pulumi.Output.all(
            pulumi.Output.from_input(environment), self.kubeconfig
        ).apply(lambda parts: {**parts[0], "KUBECONFIG_CONTENT": parts[1]})
        return local.Command(
            f"{self.name}-{suffix}",
            create=read_script("management", script),
            delete=NOTHING_TO_DELETE,
            interpreter=list(BASH),
            environment=env,  # secret: it carries the (secret) kubeconfig
            opts=pulumi.ResourceOptions(parent=self.component, depends_on=list(depends_on)),
        )


# --------------------------------------------------------------------------- the interface


class Substrate(Protocol):
    """Everything that differs between the environments, asked for by the components."""

    @property
    def name(self) -> str:
        """``lab`` or ``prod``: for messages, never for decisions."""
        ...

    # ----- the configuration, before anything is registered

    def config_problems(self, platform: PlatformConfig) -> list[str]:
        """What the environment demands of the stack's configuration, one line per problem
        naming the key and the fix (``components.stack`` adds the checks every stack has)."""
        ...

    def planned_tenant_parts(self, tenant: Tenant) -> Sequence[str]:
        """Suffixes of the environment's own children of a GpuTenant (``components.name_plan``)."""
        ...

    def planned_pool_parts(self, tenant: Tenant, pool: WorkerPool) -> Sequence[str]:
        """Suffixes of the environment's own children of a GpuWorkerPool (of ``tenant``)."""
        ...

    def name_length_problems(self, platform: PlatformConfig) -> list[str]:
        """Names the environment derives that would be too long for Helm or Kubernetes."""
        ...

    # ----- the management cluster

    def check_before_registration(self, platform: PlatformConfig) -> None:
        """What must hold of this machine or the cluster before anything is registered (lab:
        the host preflight; prod: the adopted namespaces exist); raises a one-line RunError."""
        ...

    def management_cluster(
        self, name: str, platform: PlatformConfig, component: pulumi.Resource
    ) -> ClusterAccess:
        """Make (lab) or reach (prod) the management cluster."""
        ...

    def installs_cert_manager(self, platform: PlatformConfig) -> bool:
        """Whether the program installs cert-manager, or adopts the cluster's own."""
        ...

    def management_nodes(self, platform: PlatformConfig) -> Mapping[str, Any] | None:
        """The management cluster's nodes (``kubectl get nodes -o json``), read live before
        anything is registered, for the capacity check (``components.management_nodes``);
        None where they cannot be known yet (the lab before its kind cluster exists) or the
        checks are skipped."""
        ...

    @property
    def kamaji_replicas(self) -> int:
        """How many Kamaji controllers run (leader-elected; more than one get a disruption
        budget and are spread across nodes): lab, one on its one node; prod, two."""
        ...

    def default_etcd(self, platform: PlatformConfig) -> DefaultEtcd | None:
        """How the management cluster runs its own etcd as the DataStore ``default``; None where
        it runs none (every tenant names its DataStore)."""
        ...

    def management_services(
        self,
        site: ManagementSite,
        access: ClusterAccess,
        cert_manager: pulumi.Resource,
        kamaji_ready: pulumi.Resource,
    ) -> list[pulumi.Resource]:
        """What the environment runs in the management cluster besides cert-manager and Kamaji
        (lab: MetalLB and its pool; prod: Cluster API), as what tenants must wait for."""
        ...

    def pinned_tenant_address(
        self, platform: PlatformConfig, access: ClusterAccess, tenant_name: str
    ) -> pulumi.Output[str] | None:
        """The address pinned for a tenant's control plane (checked against the environment's
        pool), or None when the load balancer assigns one."""
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

    def tenant_kubernetes_versions(self) -> Sequence[str]:
        """Every Kubernetes version a tenant may run here, oldest first (lab: those kind's pinned
        release has node images for; prod: every released patch Kamaji accepts)."""
        ...

    def running_control_plane_version(self, spec: Any, status: Any) -> str | None:
        """The version the live control-plane object (``ControlPlaneParts.control_plane``, as
        read back: its ``spec`` and ``status``) runs now, or None when it has none yet."""
        ...

    def declared_control_plane_version(self, spec: Any) -> str | None:
        """The version the live control-plane object's ``spec`` declares (what Kamaji's webhook
        compares an update with, ``kubernetes_versions.kamaji_update_problem``), or None."""
        ...

    def before_hami(self, inside: InsideTenant, calico: pulumi.Resource) -> list[pulumi.Resource]:
        """What the environment adds inside a tenant before HAMi, which waits for it."""
        ...

    def after_hami(self, inside: InsideTenant, hami: pulumi.Resource, modes: set[str]) -> None:
        """What the environment adds inside a tenant once HAMi runs."""
        ...

    def dra_driver(
        self, inside: InsideTenant, tenant: Tenant, after: Sequence[pulumi.Resource]
    ) -> DraDriver:
        """The DRA driver of a ``gpuSharing: dra`` tenant, in place of what ``after_hami`` adds
        (HAMi's device plugin): it publishes the tenant's cards as ResourceSlices."""
        ...

    @property
    def dra_device_classes(self) -> tuple[str, ...]:
        """The DeviceClasses ``dra_driver`` registers in a ``gpuSharing: dra`` tenant: the only
        ones its claims may name (the tenant's admission params, before the driver exists)."""
        ...

    # ----- a worker pool

    def worker_pool(self, site: PoolSite) -> PoolParts:
        """Make the pool's machines and join them to the tenant."""
        ...

    # ----- backups (docs/backups.md)

    def backup_targets(
        self, site: ManagementSite, access: ClusterAccess
    ) -> Mapping[str, pulumi.Output[dict[str, str]]]:
        """Every backed-up tenant's S3 target (its backup Secret's data, secret), by tenant
        name: the target a tenant names, else the environment's own store (lab: an object store
        in the management cluster, registered here; prod has none and demands a target)."""
        ...

    @property
    def control_plane_pause_owner(self) -> PauseOwner | None:
        """What owns a TenantControlPlane and must be paused with it for a restore (prod: the
        Cluster API KamajiControlPlane); None where the program owns it directly (lab)."""
        ...

    # ----- metrics (docs/metrics.md)

    def metrics_storage(self, platform: PlatformConfig) -> MetricsStorage:
        """Where the central Prometheus keeps its samples (lab: emptyDir; prod: a claim)."""
        ...

    @property
    def tenant_metrics_sources(self) -> tuple[TenantSource, ...]:
        """What every tenant's agent scrapes besides HAMi (prod: the GPU Operator's DCGM
        exporter)."""
        ...
