"""ManagementCluster: the cluster that hosts every tenant's control plane (Kamaji).

* lab: a kind cluster created and deleted by scripts through pulumi-command, MetalLB with a pool
  carved from the IPv4 subnet of the ``kind`` docker network, cert-manager, Kamaji with its
  bundled kamaji-etcd DataStore ``default``. A host preflight runs first on ``pulumi up``.
* prod: a Provider for an existing cluster (secret kubeconfig from config); the cluster's own
  cert-manager, gated until it serves (``existing.certManager: existing``, the default: a Metal3
  management cluster already runs one), or one installed here (``install``); Kamaji (bundled
  etcd only when ``existing.kamajiEtcd``), and Cluster API installed declaratively with the
  cluster-api-operator chart plus one provider object per provider (with a config Secret holding
  the operator's GitHub token when one is configured). Tenants' adopted namespaces are checked
  to exist before anything is registered (``cluster_checks``).

Nothing that creates a TenantControlPlane, KamajiControlPlane or Cluster API object may start
before Kamaji (and Cluster API) serve: ``ready`` holds the readiness gates (commands that poll the
cluster with ``kubectl wait``/``rollout status`` and a server-side dry run through the admission
webhooks), never sleeps. Decisions live in ``lab_network``, ``preflight`` and
``management_values``; this file only wires them to resources.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import pulumi
import pulumi_kubernetes as k8s
from pulumi_command import local

from components import chart_cache
from components.config import ExistingManagement, KindManagement, PlatformConfig
from components.lab import network as lab_network
from components.lab import preflight
from components.management_values import (
    CAPI_GITHUB_TOKEN_KEY,
    CAPI_OPERATOR_NAMESPACE,
    CAPI_OPERATOR_RELEASE,
    CERT_MANAGER_NAMESPACE,
    CERT_MANAGER_RELEASE,
    DEFAULT_DATASTORE,
    KAMAJI_NAMESPACE,
    KAMAJI_RELEASE,
    METALLB_NAMESPACE,
    METALLB_POOL_NAME,
    METALLB_RELEASE,
    CapiProvider,
    capi_config_secret_name,
    capi_gate_env,
    capi_operator_values,
    capi_providers,
    cert_manager_gate_env,
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
from components.prod import cluster_checks
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
    # The MetalLB IPAddressPool an unpinned tenant's control-plane Service names
    # (``metallb.io/address-pool``); None where the load balancer needs no such choice (prod).
    tenant_address_pool: str | None
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
        if platform.adopted_namespaces:
            # Before any registration, in preview too: a tenant namespace to adopt that does not
            # exist fails here as one line naming its key, not as the engine's read error.
            cluster_checks.check_adopted_namespaces(
                platform.adopted_namespaces,
                pulumi.Config().get(platform.existing.kubeconfig_config_key),
            )
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
        """The address pinned for the tenant called ``name``, or None when the load balancer
        assigns one (``tenant_address_pool`` says from where).

        lab: the tenant's ``controlPlane.address``, checked against the MetalLB pool once the
        kind network is known (before the control plane, whose spec waits for it, is
        registered); None without one, and MetalLB assigns a free address of the pool
        (``components.lab.network``). prod: the configured ``controlPlane.address`` or None."""
        tenants = {tenant.name: tenant for tenant in self._platform.tenants}
        if name not in tenants:
            raise KeyError(f"no tenant named {name!r} (the stack has {', '.join(tenants)})")
        address = tenants[name].control_plane.address
        if address is None:
            return None
        if self.tenant_address_pool is None:
            return pulumi.Output.from_input(address)
        index = list(tenants).index(name)
        return self.lb_pool.apply(
            lambda pool: lab_network.pinned_address(pool, index, name, address)
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
        self.tenant_address_pool = METALLB_POOL_NAME
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
        self.tenant_address_pool = None

        cert_manager, kamaji_ready = self._cert_manager_and_kamaji(
            existing.kamaji_etcd, install_cert_manager=existing.installs_cert_manager
        )

        operator = self._release(
            CAPI_OPERATOR_RELEASE,
            PINNED.cluster_api_operator,
            CAPI_OPERATOR_NAMESPACE,
            capi_operator_values(),
            depends_on=[cert_manager],
        )
        providers = capi_providers(existing.cluster_api)
        token_key = existing.cluster_api.github_token_config_key
        token: pulumi.Output[str] | None = None
        if token_key is not None:
            token = pulumi.Output.secret(pulumi.Config().require_secret(token_key))
        provider_objects: list[pulumi.Resource] = []
        for spec in providers:
            namespace = self._namespace(spec.namespace)
            # The Kamaji control-plane provider reconciles TenantControlPlanes: Kamaji first.
            after: list[pulumi.Resource] = [operator, namespace]
            if spec.kind == "ControlPlaneProvider":
                after.append(kamaji_ready)
            secret_name: pulumi.Output[str] | None = None
            if token is not None:
                secret, secret_name = self._provider_config_secret(spec, token, namespace)
                after.append(secret)
            provider_objects.append(
                self._custom_resource(
                    f"capi-{spec.name}", spec.manifest(config_secret=secret_name), after
                )
            )
        capi_ready = self._gate("capi-ready", capi_gate_env(providers), provider_objects)

        self.default_datastore = (
            pulumi.Output.from_input(DEFAULT_DATASTORE) if existing.kamaji_etcd else None
        )
        self.ready = [kamaji_ready, capi_ready]

    # ---------------------------------------------------------------------------- helpers

    def _provider_config_secret(
        self, spec: CapiProvider, token: pulumi.Output[str], namespace: k8s.core.v1.Namespace
    ) -> tuple[k8s.core.v1.Secret, pulumi.Output[str]]:
        """The Secret a provider object's ``configSecret`` names, in the provider's namespace,
        and its name: the operator's GitHub token under clusterctl's variable ``github-token``.
        Immutable and named after the token (``capi_config_secret_name``), so a new token is a
        new Secret and the provider objects move to it, as the operator asks."""
        name = pulumi.Output.unsecret(token.apply(capi_config_secret_name))
        secret = k8s.core.v1.Secret(
            f"{self._name}-capi-config-{spec.name}",
            metadata=k8s.meta.v1.ObjectMetaArgs(name=name, namespace=namespace.metadata.name),
            type="Opaque",
            immutable=True,
            string_data=token.apply(lambda value: {CAPI_GITHUB_TOKEN_KEY: value}),
            opts=pulumi.ResourceOptions.merge(
                self._k8s_opts([namespace]),
                pulumi.ResourceOptions(additional_secret_outputs=["data", "stringData"]),
            ),
        )
        return secret, name

    def _cert_manager(self, install: bool) -> pulumi.Resource:
        """What everything that creates cert-manager objects waits for: the pinned release
        (lab, or prod with ``certManager: install``; the chart's post-install startupapicheck
        Job dry-run creates a Certificate through its webhook, cert-manager v1.21.1
        deploy/charts/cert-manager/values.yaml:1534-1578, cmd/startupapicheck/pkg/check/api/
        api.go:73), or — adopting the cluster's cert-manager — a gate that proves it
        serves, with no cert-manager Namespace or release registered (so none is ever deleted)."""
        if install:
            return self._release(
                CERT_MANAGER_RELEASE,
                PINNED.cert_manager,
                CERT_MANAGER_NAMESPACE,
                cert_manager_values(),
            )
        return self._gate(
            "cert-manager-ready", cert_manager_gate_env(), [], script="cert-manager-ready.sh"
        )

    def _cert_manager_and_kamaji(
        self, deploy_etcd: bool, install_cert_manager: bool = True
    ) -> tuple[pulumi.Resource, local.Command]:
        """cert-manager (installed, or the cluster's own once it serves), then Kamaji (pinned
        image, bundled etcd on request), then the gate that waits until Kamaji's CRDs and
        webhooks serve. Returns what stands for cert-manager and the gate."""
        cert_manager = self._cert_manager(install_cert_manager)
        kamaji = self._release(
            KAMAJI_RELEASE,
            chart_cache.kamaji_chart_dir(),
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
        chart: HelmChart | Path,
        namespace: str,
        values: Mapping[str, Any],
        depends_on: Sequence[pulumi.Resource] = (),
        timeout: int = 600,
    ) -> k8s.helm.v3.Release:
        """A pinned chart — from its repository by version, or a local chart directory pinned by
        content — in its own namespace (a Namespace object, so destroy removes it), awaited
        until its workloads are ready."""
        ns = self._namespace(namespace)
        if isinstance(chart, Path):
            source: dict[str, Any] = {"chart": str(chart)}
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
        script: str = "wait-ready.sh",
    ) -> local.Command:
        """A readiness gate: ``script`` (``wait-ready.sh`` unless named) with the management
        kubeconfig (secret, written to a private temp file by the script). It re-runs only when
        its parameters change."""
        env: pulumi.Output[dict[str, str]] = pulumi.Output.all(
            pulumi.Output.from_input(environment), self.kubeconfig
        ).apply(lambda parts: {**parts[0], "KUBECONFIG_CONTENT": parts[1]})
        return local.Command(
            f"{self._name}-{suffix}",
            create=_script(script),
            delete=NOTHING_TO_DELETE,
            interpreter=list(BASH),
            environment=env,  # secret: it carries the (secret) kubeconfig
            opts=pulumi.ResourceOptions(parent=self, depends_on=list(depends_on)),
        )
