"""ManagementCluster: the cluster that hosts every tenant's control plane (Kamaji).

* lab: a kind cluster created and deleted by scripts through pulumi-command, MetalLB with a pool
  carved from the IPv4 subnet of the ``kind`` docker network, cert-manager, Kamaji with its
  bundled kamaji-etcd DataStore ``default``. A host preflight runs first on ``pulumi up``.
* prod: a Provider for an existing cluster (secret kubeconfig from config), cert-manager, Kamaji
  (bundled etcd only when ``existing.kamajiEtcd``), and Cluster API installed declaratively with
  the cluster-api-operator chart plus one provider object per provider.

Nothing that creates a TenantControlPlane, KamajiControlPlane or Cluster API object may start
before Kamaji (and Cluster API) serve: ``ready`` holds the readiness gates (commands that poll the
cluster with ``kubectl wait``/``rollout status`` and a server-side dry run through the admission
webhooks), never sleeps. Decisions live in ``lab_network``, ``preflight`` and
``management_values``; this file only wires them to resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_command import local

from components import chart_cache, lab_network, preflight
from components.config import ExistingManagement, KindManagement, PlatformConfig
from components.management_values import (
    CAPI_OPERATOR_NAMESPACE,
    CAPI_OPERATOR_RELEASE,
    CERT_MANAGER_NAMESPACE,
    CERT_MANAGER_RELEASE,
    DEFAULT_DATASTORE,
    KAMAJI_NAMESPACE,
    KAMAJI_RELEASE,
    METALLB_NAMESPACE,
    METALLB_RELEASE,
    capi_gate_env,
    capi_operator_values,
    capi_providers,
    cert_manager_values,
    ip_address_pool,
    kamaji_gate_env,
    kamaji_values,
    kind_cluster_identifier,
    kind_config,
    l2_advertisement,
    management_versions,
    metallb_gate_env,
    metallb_values,
)
from components.scripts import read_script
from components.versions import PINNED, HelmChart

TYPE_TOKEN = "gpu-platform:index:ManagementCluster"
BASH = ("/bin/bash", "-c")
# Read-only commands and readiness gates have nothing to undo on delete.
NOTHING_TO_DELETE = "true"
PROD_CLUSTER_IDENTIFIER = "gpu-platform-management"


def _script(name: str) -> str:
    return read_script("management", name)


@dataclass(frozen=True)
class ManagementClusterArgs:
    platform: PlatformConfig


class ManagementCluster(pulumi.ComponentResource):
    """The management cluster, lab (kind) or prod (existing), with Kamaji serving."""

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
        platform = args.platform
        # Both stacks install Kamaji from the local chart pinned by content; a missing or
        # altered chart fails here, before anything is registered (also in preview, which
        # reads the chart).
        chart_cache.check_pinned_charts()
        if platform.mode == "lab":
            # Before any registration: a host that cannot run the lab fails here, with every
            # problem listed. Skipped in preview and with GPU_PLATFORM_SKIP_PREFLIGHT=1.
            dry_run = pulumi.runtime.is_dry_run()
            if preflight.check_lab_host(dry_run, kind_cluster=platform.kind.cluster_name):
                pulumi.log.info("lab host preflight passed")
            lab_network.check_pool_size(platform.kind.metallb_pool_size, len(platform.tenants))
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._name = name
        self._platform = platform
        # Set when the lab's kind cluster exists: in-cluster objects go with it on destroy.
        self._cluster: pulumi.Resource | None = None
        self.versions = management_versions(platform)
        if platform.mode == "lab":
            self._build_lab(platform.kind)
        else:
            self._build_prod(platform.existing)
        self.register_outputs(
            {
                "kubeconfig": self.kubeconfig,
                "kindNetwork": self.kind_network,
                "lbPool": self.lb_pool,
                "defaultDatastore": self.default_datastore,
                "versions": self.versions,
            }
        )

    # ------------------------------------------------------------------------------ public

    def tenant_address(self, name: str) -> pulumi.Output[str] | None:
        """The fixed LoadBalancer address of the tenant called ``name``.

        lab: from the MetalLB pool (the tenant's ``controlPlane.address`` when it names one of
        the pool's addresses, else the address its name hashes to), so reordering, adding or
        removing tenants never moves another tenant's address; unknown until the kind network
        exists (preview). prod: the configured ``controlPlane.address`` or None."""
        tenants = {tenant.name: tenant for tenant in self._platform.tenants}
        if name not in tenants:
            raise KeyError(f"no tenant named {name!r} (the stack has {', '.join(tenants)})")
        if self._platform.mode == "prod":
            address = tenants[name].control_plane.address
            return pulumi.Output.from_input(address) if address is not None else None
        requested = [(tenant.name, tenant.control_plane.address) for tenant in tenants.values()]
        return self.lb_pool.apply(
            lambda pool: lab_network.assign_tenant_addresses(pool, requested)[name]
        )

    # ------------------------------------------------------------------------------- lab

    def _build_lab(self, kind: KindManagement) -> None:
        config = kind_config(
            kind.cluster_name, kind.node_image, kind.pod_subnet, kind.service_subnet
        )
        # One mapping for the command and the provider's identifier: whatever replaces the
        # cluster (stdin or environment) changes the identifier too.
        environment = {
            "KIND_CLUSTER_NAME": kind.cluster_name,
            "KIND_NODE_IMAGE": kind.node_image,
            "KIND_EXPERIMENTAL_DOCKER_NETWORK": kind.docker_network,
        }
        cluster = local.Command(
            f"{self._name}-kind-cluster",
            create=_script("kind-create.sh"),
            # An edited script re-runs in place (it reuses the cluster); a changed kind config
            # or name replaces the cluster, deleting the old one first.
            update=_script("kind-create.sh"),
            delete=_script("kind-delete.sh"),
            interpreter=list(BASH),
            stdin=config,
            environment=environment,
            # stdout is the kubeconfig: secret, and never logged.
            logging=local.Logging.STDERR,
            opts=pulumi.ResourceOptions(
                parent=self,
                additional_secret_outputs=["stdout"],
                replace_on_changes=["stdin", "environment"],
                delete_before_replace=True,
            ),
        )
        self._cluster = cluster
        self.kubeconfig = pulumi.Output.secret(cluster.stdout)
        self.provider = k8s.Provider(
            f"{self._name}-provider",
            kubeconfig=self.kubeconfig,
            cluster_identifier=kind_cluster_identifier(kind.cluster_name, config, environment),
            # A kind cluster deleted by hand must not block `pulumi destroy`.
            delete_unreachable=True,
            opts=pulumi.ResourceOptions(parent=self),
        )
        network = local.Command(
            f"{self._name}-kind-network",
            create=_script("network-inspect.sh"),
            delete=NOTHING_TO_DELETE,
            interpreter=list(BASH),
            environment={"DOCKER_NETWORK": kind.docker_network},
            # A replaced kind cluster (a new Command ID, pulumi-command v1.2.1
            # provider/pkg/provider/local/commandController.go:42) may sit on another network:
            # inspect it again (the review's finding 7).
            triggers=[cluster.id],
            opts=pulumi.ResourceOptions(parent=self, depends_on=[cluster]),
        )
        self.kind_network = pulumi.Output.from_input(kind.docker_network)
        self.lb_pool = network.stdout.apply(
            lambda inspect: lab_network.metallb_pool(inspect, kind.metallb_pool_size)
        )
        pool_manifest = self.lb_pool.apply(
            lambda pool: ip_address_pool(lab_network.address_ranges(pool))
        )

        metallb = self._release(
            METALLB_RELEASE, PINNED.metallb, METALLB_NAMESPACE, metallb_values()
        )
        metallb_ready = self._gate(
            "metallb-ready", pool_manifest.apply(metallb_gate_env), [metallb]
        )
        pool = self._custom_resource(
            "metallb-pool",
            ip_address_pool([]),  # name and namespace; the addresses arrive at deploy time
            [metallb_ready],
            spec=pool_manifest.apply(lambda manifest: manifest["spec"]),
        )
        advertisement = self._custom_resource("metallb-l2", l2_advertisement(), [pool])

        _, kamaji_ready = self._cert_manager_and_kamaji(deploy_etcd=True)
        self.default_datastore = pulumi.Output.from_input(DEFAULT_DATASTORE)
        self.ready = [kamaji_ready, pool, advertisement]

    # ------------------------------------------------------------------------------ prod

    def _build_prod(self, existing: ExistingManagement) -> None:
        self.kubeconfig = pulumi.Config().require_secret(existing.kubeconfig_config_key)
        self.provider = k8s.Provider(
            f"{self._name}-provider",
            kubeconfig=self.kubeconfig,
            cluster_identifier=PROD_CLUSTER_IDENTIFIER,
            opts=pulumi.ResourceOptions(parent=self),
        )
        self.kind_network = None
        self.lb_pool = pulumi.Output.from_input([])

        cert_manager, kamaji_ready = self._cert_manager_and_kamaji(existing.kamaji_etcd)

        operator = self._release(
            CAPI_OPERATOR_RELEASE,
            PINNED.cluster_api_operator,
            CAPI_OPERATOR_NAMESPACE,
            capi_operator_values(),
            depends_on=[cert_manager],
        )
        providers = capi_providers(existing.cluster_api)
        provider_objects: list[pulumi.Resource] = []
        for spec in providers:
            namespace = self._namespace(spec.namespace)
            # The Kamaji control-plane provider reconciles TenantControlPlanes: Kamaji first.
            after: list[pulumi.Resource] = [operator, namespace]
            if spec.kind == "ControlPlaneProvider":
                after.append(kamaji_ready)
            provider_objects.append(
                self._custom_resource(f"capi-{spec.name}", spec.manifest(), after)
            )
        capi_ready = self._gate("capi-ready", capi_gate_env(providers), provider_objects)

        self.default_datastore = (
            pulumi.Output.from_input(DEFAULT_DATASTORE) if existing.kamaji_etcd else None
        )
        self.ready = [kamaji_ready, capi_ready]

    # ---------------------------------------------------------------------------- helpers

    def _cert_manager_and_kamaji(
        self, deploy_etcd: bool
    ) -> tuple[k8s.helm.v3.Release, local.Command]:
        """cert-manager, then Kamaji (pinned image, bundled etcd on request), then the gate that
        waits until Kamaji's CRDs and webhooks serve. Returns cert-manager and the gate."""
        cert_manager = self._release(
            CERT_MANAGER_RELEASE, PINNED.cert_manager, CERT_MANAGER_NAMESPACE, cert_manager_values()
        )
        kamaji = self._release(
            KAMAJI_RELEASE,
            chart_cache.kamaji_chart_input(),
            KAMAJI_NAMESPACE,
            kamaji_values(PINNED.kamaji_image_tag, deploy_etcd=deploy_etcd),
            depends_on=[cert_manager],
            timeout=900,
        )
        kamaji_ready = self._gate(
            "kamaji-ready",
            kamaji_gate_env(self._platform.kubernetes_version, with_etcd=deploy_etcd),
            [kamaji],
        )
        return cert_manager, kamaji_ready

    def _k8s_opts(self, depends_on: Sequence[pulumi.Resource] = ()) -> pulumi.ResourceOptions:
        """Options of every Kubernetes object: the management provider, explicitly; in the lab
        they go with the kind cluster on destroy (deleting them one by one first would only
        wait on finalizers whose controllers are being removed)."""
        return pulumi.ResourceOptions(
            parent=self,
            provider=self.provider,
            depends_on=list(depends_on),
            deleted_with=self._cluster,
        )

    def _namespace(self, namespace: str) -> k8s.core.v1.Namespace:
        return k8s.core.v1.Namespace(
            f"{self._name}-ns-{namespace}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=namespace),
            opts=self._k8s_opts(),
        )

    def _release(
        self,
        release: str,
        chart: HelmChart | str,
        namespace: str,
        values: Mapping[str, Any],
        depends_on: Sequence[pulumi.Resource] = (),
        timeout: int = 600,
    ) -> k8s.helm.v3.Release:
        """A pinned chart — from its repository by version, or a local chart directory pinned by
        content, given as a project-relative path (``chart_cache.kamaji_chart_input``: the same
        input on every machine) — in its own namespace (a Namespace object, so destroy removes
        it), awaited until its workloads are ready."""
        ns = self._namespace(namespace)
        if isinstance(chart, str):
            source: dict[str, Any] = {"chart": chart}
        else:
            source = {
                "chart": chart.chart,
                "version": chart.version,
                "repository_opts": k8s.helm.v3.RepositoryOptsArgs(repo=chart.repo),
            }
        return k8s.helm.v3.Release(
            f"{self._name}-{release}",
            k8s.helm.v3.ReleaseArgs(
                name=release,
                **source,
                namespace=ns.metadata.name,
                values=dict(values),
                skip_await=False,
                wait_for_jobs=True,
                timeout=timeout,
            ),
            opts=self._k8s_opts(depends_on),
        )

    def _custom_resource(
        self,
        suffix: str,
        manifest: Mapping[str, Any],
        depends_on: Sequence[pulumi.Resource],
        spec: pulumi.Input[Mapping[str, Any]] | None = None,
    ) -> k8s.apiextensions.CustomResource:
        """A custom resource from a manifest built by ``management_values``; ``spec`` replaces
        the manifest's when it depends on deploy-time data (the MetalLB pool's addresses)."""
        return k8s.apiextensions.CustomResource(
            f"{self._name}-{suffix}",
            api_version=manifest["apiVersion"],
            kind=manifest["kind"],
            metadata=manifest["metadata"],
            spec=manifest["spec"] if spec is None else spec,
            opts=self._k8s_opts(depends_on),
        )

    def _gate(
        self,
        suffix: str,
        environment: pulumi.Input[Mapping[str, str]],
        depends_on: Sequence[pulumi.Resource],
    ) -> local.Command:
        """A readiness gate: ``wait-ready.sh`` with the management kubeconfig (secret, written
        to a private temp file by the script). It re-runs only when its parameters change."""
        env: pulumi.Output[dict[str, str]] = pulumi.Output.all(
            pulumi.Output.from_input(environment), self.kubeconfig
        ).apply(lambda parts: {**parts[0], "KUBECONFIG_CONTENT": parts[1]})
        return local.Command(
            f"{self._name}-{suffix}",
            create=_script("wait-ready.sh"),
            delete=NOTHING_TO_DELETE,
            interpreter=list(BASH),
            environment=env,  # secret: it carries the (secret) kubeconfig
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
        )
