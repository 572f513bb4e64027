"""ManagementCluster: the cluster that hosts every tenant's control plane (Kamaji).

What every environment has is built here: cert-manager — installed, or (prod,
``existing.certManager: existing``, the default: a Metal3 management cluster already runs one)
the cluster's own, gated until it serves — and Kamaji (the pinned chart), gated until its CRDs and
webhooks serve. Where the environment runs the DataStore ``default`` (``Substrate.default_etcd``),
its etcd is either a kamaji-etcd release of its own that starts at once, beside cert-manager,
with the DataStore following Kamaji's CRD (lab), or Kamaji's bundled subchart (prod with
``existing.kamajiEtcd``: cert-manager renews its certificates).

The stack's substrate says where the cluster comes from and what else runs in it: lab — a kind
cluster created by scripts, MetalLB with a pool carved from the ``kind`` docker network
(``components.lab.management``), a host preflight first; prod — an existing cluster reached with
a secret kubeconfig, and Cluster API through the cluster-api-operator
(``components.prod.management``), the adopted tenant namespaces checked first.

Nothing that creates a TenantControlPlane, KamajiControlPlane or Cluster API object may start
before Kamaji (and Cluster API) serve: ``ready`` holds the readiness gates (commands that poll the
cluster with ``kubectl wait``/``rollout status`` and a server-side dry run through the admission
webhooks), never sleeps.
"""

from __future__ import annotations

from dataclasses import dataclass

import pulumi
import pulumi_kubernetes as k8s

from components import capacity, chart_cache
from components.config import PlatformConfig
from components.k8s_objects import typed_object
from components.management_values import (
    CERT_MANAGER_NAMESPACE,
    CERT_MANAGER_RELEASE,
    DEFAULT_DATASTORE,
    DEFAULT_ETCD_QUOTA_BYTES,
    KAMAJI_ETCD_NAME,
    KAMAJI_NAMESPACE,
    KAMAJI_RELEASE,
    cert_manager_gate_env,
    cert_manager_values,
    default_etcd_budget,
    default_etcd_datastore,
    default_etcd_values,
    etcd_defrag_cron_job,
    kamaji_budget,
    kamaji_gate_env,
    kamaji_values,
    management_versions,
)
from components.metrics import deploy as metrics
from components.scripts import read_script
from components.substrate import ClusterAccess, ManagementSite, Substrate
from components.versions import PINNED

TYPE_TOKEN = "gpu-platform:index:ManagementCluster"


def check_capacity(platform: PlatformConfig, substrate: Substrate) -> None:
    """The stack's requests on the management cluster (``components.capacity``) against the
    allocatable of its schedulable nodes, read live (the substrate's ``management_nodes``):
    above it the preview fails with the figures; above ``capacity.headroomPercent`` of it, a
    warning. Nothing is checked where the nodes cannot be read yet (a lab before its kind
    cluster exists) or the checks are skipped."""
    nodes = substrate.management_nodes(platform)
    if nodes is None:
        return
    cost = capacity.stack_cost(
        platform, substrate.kamaji_replicas, substrate.default_etcd(platform)
    )
    available = capacity.allocatable(nodes)
    verdict = capacity.verdict(cost.total, available, platform.capacity.headroom_percent)
    if verdict.refusal is not None:
        raise pulumi.RunError(verdict.refusal)
    if verdict.warning is not None:
        pulumi.log.warn(verdict.warning)
    else:
        pulumi.log.info(
            f"capacity: the stack requests {cost.total} of the management cluster's "
            f"{available} allocatable"
        )


@dataclass(frozen=True)
class ManagementClusterArgs:
    platform: PlatformConfig
    substrate: Substrate


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
        platform, substrate = args.platform, args.substrate
        # Both stacks install Kamaji from the local chart pinned by content; a missing or
        # altered chart fails here, before anything is registered (also in preview, which
        # reads the chart).
        chart_cache.check_pinned_charts()
        # Before any registration: what the environment needs of this host or the cluster.
        substrate.check_before_registration(platform)
        # Before any registration too: does the stack fit the management cluster?
        check_capacity(platform, substrate)
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._platform = platform
        self._substrate = substrate
        self.versions = management_versions(platform)

        access = substrate.management_cluster(name, platform, self)
        self._access: ClusterAccess = access
        self.kubeconfig = access.kubeconfig
        self.provider = access.provider
        self.kind_network = access.kind_network
        self.lb_pool = (
            access.lb_pool if access.lb_pool is not None else pulumi.Output.from_input([])
        )
        self.tenant_address_pool = access.tenant_address_pool
        site = ManagementSite(
            name=name,
            platform=platform,
            component=self,
            kubeconfig=access.kubeconfig,
            provider=access.provider,
            teardown_root=access.teardown_root,
        )

        default_etcd = substrate.default_etcd(platform)
        own_etcd = default_etcd if default_etcd is not None and default_etcd.own_release else None
        kamaji_namespace = site.namespace(KAMAJI_NAMESPACE)
        # A default etcd of its own release first, in Kamaji's namespace as the chart's bundled
        # one would be: it needs nothing of cert-manager (its certificates come from its own
        # jobs), so it comes up while cert-manager does.
        etcd_release = (
            [
                site.release(
                    KAMAJI_ETCD_NAME,
                    PINNED.kamaji_etcd,
                    kamaji_namespace,
                    default_etcd_values(own_etcd.cluster_domain, own_etcd.members),
                )
            ]
            if own_etcd is not None
            else []
        )
        cert_manager = self._cert_manager(site, substrate.installs_cert_manager(platform))
        kamaji = site.release(
            KAMAJI_RELEASE,
            chart_cache.kamaji_chart_input(),
            kamaji_namespace,
            kamaji_values(PINNED.kamaji_image_tag, default_etcd, substrate.kamaji_replicas),
            depends_on=[cert_manager],
            timeout=900,
        )
        # Disruption budgets where more than one pod runs (components.availability): a drain
        # takes one Kamaji and one etcd member at a time.
        budgets = [
            kamaji_budget(substrate.kamaji_replicas),
            default_etcd_budget(default_etcd) if default_etcd is not None else None,
        ]
        for budget in budgets:
            if budget is not None:
                k8s.policy.v1.PodDisruptionBudget(
                    f"{name}-pdb-{budget['metadata']['name']}",
                    metadata=budget["metadata"],
                    spec=budget["spec"],
                    opts=site.k8s_opts([kamaji_namespace]),
                )
        datastore = (
            # Kamaji's CRD (its release) and the etcd's Secrets (the etcd's release) first.
            [
                site.custom_resource(
                    f"datastore-{DEFAULT_DATASTORE}",
                    default_etcd_datastore(own_etcd.cluster_domain, own_etcd.members),
                    [kamaji, *etcd_release],
                )
            ]
            if own_etcd is not None
            else []
        )
        if default_etcd is not None:
            # Its nightly defragmentation (kamaji-etcd ships none): beside the release, own or
            # Kamaji's bundled one (whose certificates cert-manager issues).
            typed_object(
                f"{name}-etcd-defrag",
                etcd_defrag_cron_job(
                    KAMAJI_ETCD_NAME,
                    KAMAJI_NAMESPACE,
                    replicas=default_etcd.members,
                    cluster_domain=default_etcd.cluster_domain,
                    cert_manager=not default_etcd.own_release,
                    quota_backend_bytes=DEFAULT_ETCD_QUOTA_BYTES,
                    script=read_script("etcd", "defrag.sh"),
                ),
                site.k8s_opts([*(etcd_release or [kamaji])]),
            )
        kamaji_ready = site.gate(
            "kamaji-ready",
            kamaji_gate_env(platform.kubernetes_version, with_etcd=default_etcd is not None),
            [kamaji, *datastore],
        )
        services = substrate.management_services(site, access, cert_manager, kamaji_ready)
        # The central Prometheus' password, which every tenant's agent sends (docs/metrics.md).
        self.metrics_password: pulumi.Output[str] | None = None
        if platform.metrics.enabled:
            # The central Prometheus and Grafana (docs/metrics.md); tenants do not wait for them.
            central = metrics.register_central(
                name,
                retention=platform.metrics.retention,
                scrape_interval=platform.metrics.scrape_interval,
                alertmanagers=platform.metrics.alertmanagers,
                kamaji_namespace=KAMAJI_NAMESPACE,
                storage=substrate.metrics_storage(platform),
                opts=site.k8s_opts,
                # Made once Kamaji serves, like everything central after it: its command is
                # not the program's first (the real-engine tier, which has no command plugin,
                # stops at the same gate as before, tests/local/engine/test_prod_stack.py).
                password=lambda: site.generated_secret(
                    "metrics-prometheus-password", depends_on=[kamaji_ready]
                ),
                operator=platform.metrics.prometheus_operator,
            )
            self.metrics_password = central.password
        self.default_datastore = (
            pulumi.Output.from_input(DEFAULT_DATASTORE) if default_etcd is not None else None
        )
        self.ready = [kamaji_ready, *services]
        # Where each backed-up tenant's backups go (docs/backups.md): the environment's own
        # store (lab) or the target the tenant names.
        self._backup_targets = substrate.backup_targets(site, access)
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
        assigns one (``tenant_address_pool`` says from where; lab: a pin is checked against
        the MetalLB pool once the kind network is known)."""
        tenants = [tenant.name for tenant in self._platform.tenants]
        if name not in tenants:
            raise KeyError(f"no tenant named {name!r} (the stack has {', '.join(tenants)})")
        return self._substrate.pinned_tenant_address(self._platform, self._access, name)

    def backup_target(self, name: str) -> pulumi.Output[dict[str, str]]:
        """The S3 target of the backed-up tenant called ``name``, as the backup Secret's data
        (secret)."""
        if name not in self._backup_targets:
            raise KeyError(f"tenant {name!r} has no backups (tenants[].backups.enabled)")
        return self._backup_targets[name]

    # ---------------------------------------------------------------------------- helpers

    @staticmethod
    def _cert_manager(site: ManagementSite, install: bool) -> pulumi.Resource:
        """What everything that creates cert-manager objects waits for: the pinned release
        (lab, or prod with ``certManager: install``; the chart's post-install startupapicheck
        Job dry-run creates a Certificate through its webhook, cert-manager v1.21.1
        deploy/charts/cert-manager/values.yaml:1534-1578, cmd/startupapicheck/pkg/check/api/
        api.go:73), or — adopting the cluster's cert-manager — a gate that proves it
        serves, with no cert-manager Namespace or release registered (so none is ever deleted)."""
        if install:
            return site.release(
                CERT_MANAGER_RELEASE,
                PINNED.cert_manager,
                CERT_MANAGER_NAMESPACE,
                cert_manager_values(),
            )
        return site.gate(
            "cert-manager-ready", cert_manager_gate_env(), [], script="cert-manager-ready.sh"
        )
