"""GpuWorkerPool: one pool of GPU nodes joined to one tenant.

lab: ``replicas`` kindest/node containers on the kind docker network, joined to the tenant with
kubeadm (scripts/worker/), each carrying the pool's declared cards (HAMi's
``hami.io/node-nvidia-register`` annotation, the ``nvidia.com/gpu`` status capacity the mock
device plugin needs, the tenant/pool/model labels and prod's ``gpu=on``, which nothing in the
lab selects on) and, per pool, the mock allocation completer that does what the mock device
plugin's empty Allocate leaves undone and puts that identity back after restarts.

prod: a Cluster API MachineDeployment with its KubeadmConfigTemplate (node labels through the
kubelet) and infrastructure machine template (Metal3, or CAPD), plus an optional
MachineHealthCheck, in the tenant's namespace of the management cluster.

Both: a ConfigMap in the tenant's kube-system declaring the pool's cards (read by the policy pack
to check capacity fit at preview). Decisions live in ``components.gpu_inventory``,
``components.worker_specs`` and ``components.completer.manifests``; this file only wires them.
"""

from __future__ import annotations

import os
import urllib.parse
from dataclasses import dataclass
from typing import Any

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.completer.manifests import completer_manifests, completer_script, node_state
from components.config import PlatformConfig, Tenant, WorkerPool
from components.gpu_inventory import (
    GPU_COUNT_RESOURCE,
    declared_inventory_configmap,
    gpu_capacity,
    node_labels,
    node_register_annotation,
    pool_inventory,
)
from components.gpu_tenant import GpuTenant
from components.k8s_objects import typed_object
from components.lab import docker_host
from components.labels import HAMI_NODE_REGISTER, LAB_ONLY_LABEL, POOL_LABEL, TENANT_LABEL
from components.management_cluster import ManagementCluster
from components.scripts import read_script
from components.versions import PINNED
from components.worker_specs import (
    BOOTSTRAP_API,
    CAPI_DELETE_TIMEOUT,
    CLUSTER_API,
    INFRASTRUCTURE_API,
    INFRASTRUCTURE_KINDS,
    infrastructure_machine_template,
    kubeadm_config_template,
    machine_deployment,
    machine_health_check,
    rollout_strategy,
    var_volume_name,
    worker_container_spec,
    worker_node_names,
)

TYPE_TOKEN = "gpu-platform:index:GpuWorkerPool"
BASH = ("/bin/bash", "-c")
# Which docker container backs a lab node (changes when the container is replaced, so the node
# patch is applied again to the node the new container registers).
WORKER_CONTAINER_ANNOTATION = "gpu-platform.io/worker-container"
# pulumi-kubernetes: resolve server-side apply conflicts in this patch's favour
# (provider/pkg/metadata/annotations.go AnnotationPatchForce).
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


def _script(name: str) -> str:
    return read_script("worker", name)


@dataclass(frozen=True)
class GpuWorkerPoolArgs:
    platform: PlatformConfig
    tenant_config: Tenant
    pool: WorkerPool
    tenant: GpuTenant
    management: ManagementCluster


class GpuWorkerPool(pulumi.ComponentResource):
    """One pool of identical GPU nodes in one tenant (lab containers or prod CAPI machines)."""

    node_names: pulumi.Output[list[str]]
    """lab: the tenant's node names, once joined. prod: [] (Cluster API names the machines)."""
    inventory: dict[str, Any]
    """Declared totals: nodes, cards, memoryMiB, coreUnits, slots (pool) and perNode."""
    declared_inventory: k8s.core.v1.ConfigMap
    machine_deployment: k8s.apiextensions.CustomResource | None
    completer: k8s.apps.v1.Deployment | None

    def __init__(
        self, name: str, args: GpuWorkerPoolArgs, opts: pulumi.ResourceOptions | None = None
    ) -> None:
        super().__init__(TYPE_TOKEN, name, None, opts)
        self._name = name
        self._args = args
        pool = args.pool
        cards = pool.resolved_cards()
        self.inventory = pool_inventory(pool.replicas, cards, pool.slots_per_card)
        self.machine_deployment = None
        self.completer = None

        declared = declared_inventory_configmap(
            args.tenant_config.name, pool.name, pool.replicas, cards, pool.slots_per_card
        )
        self.declared_inventory = k8s.core.v1.ConfigMap(
            f"{name}-declared-inventory",
            metadata=declared["metadata"],
            data=declared["data"],
            opts=self._in_tenant(),
        )

        if args.platform.mode == "lab":
            self.node_names = self._lab_workers()
        else:
            self.node_names = self._prod_machines()

        self.register_outputs({"nodeNames": self.node_names, "inventory": self.inventory})

    # ------------------------------------------------------------------------------- helpers

    def _opts(self, **kwargs: Any) -> pulumi.ResourceOptions:
        return pulumi.ResourceOptions(parent=self, **kwargs)

    def _in_tenant(self, **kwargs: Any) -> pulumi.ResourceOptions:
        """Objects inside the tenant: its provider, and gone with the tenant on destroy."""
        tenant = self._args.tenant
        return self._opts(provider=tenant.provider, deleted_with=tenant.teardown_root, **kwargs)

    # ----------------------------------------------------------------------------------- lab

    def _lab_workers(self) -> pulumi.Output[list[str]]:
        args = self._args
        name = self._name
        tenant_name = args.tenant_config.name
        pool = args.pool
        cards = pool.resolved_cards()
        names = worker_node_names(tenant_name, pool.name, pool.replicas)
        network = args.management.kind_network
        if network is None:  # the kind network is a lab output; fall back to its configured name
            network = pulumi.Output.from_input(args.platform.kind.docker_network)
        kubeconfig: pulumi.Output[str] = pulumi.Output.secret(args.tenant.kubeconfig)
        capacity = str(gpu_capacity(cards, pool.slots_per_card))
        labels = node_labels(tenant_name, pool.name, cards, lab=True)

        # kind's host-dependent node arguments (/dev/mapper, --userns=host, /dev/fuse, the
        # proxy), decided from `docker info` and this process's environment as kind decides them.
        facts = docker_host.read_docker_info(dry_run=pulumi.runtime.is_dry_run())
        host = docker_host.node_options(docker_host.docker_host(facts))
        for reason in host.reasons:
            pulumi.log.info(f"pool {pool.name}: worker containers get {reason}", resource=self)
        proxy = docker_host.proxy_settings(os.environ)
        envs: pulumi.Output[list[str]] | None = None
        if proxy:
            direct = [args.tenant_config.network.pod_cidr, args.tenant_config.network.service_cidr]
            envs = pulumi.Output.secret(
                args.tenant.endpoint.apply(
                    lambda endpoint: docker_host.proxy_envs(
                        proxy, [urllib.parse.urlparse(endpoint).hostname or "", *direct, *names]
                    )
                )
            )

        image = docker.RemoteImage(
            f"{name}-worker-image",
            name=args.platform.effective_worker_image,
            keep_locally=True,  # other pools (and the next `up`) use the same image
            opts=self._opts(),
        )
        joins: list[command.local.Command] = []
        # What each node must carry; the completer keeps it in place across restarts.
        identity = {
            node: node_state(
                labels,
                {
                    HAMI_NODE_REGISTER: node_register_annotation(
                        tenant_name, pool.name, node, cards, pool.slots_per_card
                    )
                },
                {GPU_COUNT_RESOURCE: capacity},
            )
            for node in names
        }
        for index, node in enumerate(names):
            volume = docker.Volume(
                f"{name}-{index}-var",
                name=var_volume_name(node),
                labels=[
                    docker.VolumeLabelArgs(label=TENANT_LABEL, value=tenant_name),
                    docker.VolumeLabelArgs(label=POOL_LABEL, value=pool.name),
                    docker.VolumeLabelArgs(label=LAB_ONLY_LABEL, value="true"),
                ],
                opts=self._opts(delete_before_replace=True),
            )
            spec = worker_container_spec(tenant_name, pool.name, node, host)
            devices = [docker.ContainerDeviceArgs(**d) for d in spec.pop("devices", [])]
            container = docker.Container(
                f"{name}-{index}",
                image=image.image_id,
                networks_advanced=[docker.ContainerNetworksAdvancedArgs(name=network)],
                volumes=[docker.ContainerVolumeArgs(**v) for v in spec.pop("volumes")],
                labels=[docker.ContainerLabelArgs(**label) for label in spec.pop("labels")],
                devices=devices or None,
                envs=envs,
                **spec,
                # The kind network exists once the management cluster is up (kind_network alone
                # may be a plain name that carries no dependency).
                opts=self._opts(
                    depends_on=[volume, *args.management.ready], delete_before_replace=True
                ),
            )
            join = command.local.Command(
                f"{name}-{index}-node-join",
                create=_script("join-node.sh"),
                delete=_script("remove-node.sh"),
                interpreter=list(BASH),
                environment={
                    "NODE_NAME": node,
                    "TENANT_KUBECONFIG": kubeconfig,
                    "NODE_JOIN_SCRIPT": _script("node-join-inside.sh"),
                },
                # stdout is only the node name, but the process handles the join token: keep
                # stdout/stderr secret and log stderr only (token-shaped strings are masked).
                logging=command.local.Logging.STDERR,
                triggers=[container.id],
                opts=self._opts(
                    depends_on=[container],
                    additional_secret_outputs=["stdout", "stderr"],
                    delete_before_replace=True,
                ),
            )
            joins.append(join)
            command.local.Command(
                f"{name}-{index}-gpu-capacity",
                create=_script("patch-gpu-capacity.sh"),
                delete=_script("unpatch-gpu-capacity.sh"),
                interpreter=list(BASH),
                environment={
                    "NODE_NAME": node,
                    "TENANT_KUBECONFIG": kubeconfig,
                    "GPU_RESOURCE": GPU_COUNT_RESOURCE,
                    "GPU_CAPACITY": capacity,
                },
                logging=command.local.Logging.STDOUT_AND_STDERR,
                triggers=[join.id],
                opts=self._opts(depends_on=[join], delete_before_replace=True),
            )
            # LAB_ONLY: simulated cards. A NodePatch (server-side apply) owns only these fields;
            # it wins over the completer, which co-owns them once it had to put one back.
            k8s.core.v1.NodePatch(
                f"{name}-{index}-inventory",
                metadata={
                    "name": node,
                    "labels": labels,
                    "annotations": {
                        **identity[node]["annotations"],
                        WORKER_CONTAINER_ANNOTATION: container.id,
                        PATCH_FORCE_ANNOTATION: "true",
                    },
                },
                opts=self._in_tenant(depends_on=[join]),
            )
        self.completer = self._mock_allocation_completer(joins, identity)
        return pulumi.Output.all(*[join.id for join in joins]).apply(lambda _: list(names))

    def _mock_allocation_completer(
        self,
        nodes: list[command.local.Command],
        identity: dict[str, dict[str, dict[str, str]]],
    ) -> k8s.apps.v1.Deployment:
        """The pool's completer (lab only): it needs the pool's nodes and the tenant's CNI, and
        keeps each node's declared ``identity`` (labels, register annotation, GPU capacity)."""
        args = self._args
        name = self._name
        manifests = completer_manifests(
            args.tenant_config.name,
            args.pool.name,
            completer_script(),
            PINNED.completer_image,
            identity,
        )
        namespace = typed_object(
            f"{name}-completer-namespace", manifests["namespace"], self._in_tenant()
        )
        account = typed_object(
            f"{name}-completer-account",
            manifests["serviceAccount"],
            self._in_tenant(depends_on=[namespace]),
        )
        role = typed_object(f"{name}-completer-role", manifests["clusterRole"], self._in_tenant())
        binding = typed_object(
            f"{name}-completer-binding",
            manifests["clusterRoleBinding"],
            self._in_tenant(depends_on=[role, account]),
        )
        script = typed_object(
            f"{name}-completer-script",
            manifests["configMap"],
            self._in_tenant(depends_on=[namespace]),
        )
        completer: k8s.apps.v1.Deployment = typed_object(
            f"{name}-completer",
            manifests["deployment"],
            self._in_tenant(depends_on=[account, binding, script, *nodes, *args.tenant.ready]),
        )
        return completer

    # ---------------------------------------------------------------------------------- prod

    def _prod_machines(self) -> pulumi.Output[list[str]]:
        args = self._args
        name = self._name
        tenant_name = args.tenant_config.name
        pool = args.pool
        machine = pool.machine
        if machine is None:  # the config validation requires it in prod
            raise ValueError(f"pool {pool.name}: prod pools need a machine spec")
        labels = node_labels(tenant_name, pool.name, pool.resolved_cards(), lab=False)
        version = args.platform.kubernetes_version
        objects = pulumi.Output.all(args.tenant.namespace, args.tenant.cluster_name).apply(
            lambda values: _capi_objects(
                name, tenant_name, pool, labels, version, str(values[0]), str(values[1])
            )
        )

        def custom_resource(
            resource_name: str,
            key: str,
            depends_on: list[pulumi.Resource] | None = None,
            timeouts: pulumi.CustomTimeouts | None = None,
        ) -> k8s.apiextensions.CustomResource:
            obj = objects.apply(lambda o: o[key])
            template = _capi_static(key, machine.provider)
            return k8s.apiextensions.CustomResource(
                resource_name,
                api_version=template[0],
                kind=template[1],
                metadata=obj.apply(lambda o: o["metadata"]),
                spec=obj.apply(lambda o: o["spec"]),
                opts=self._opts(
                    provider=args.management.provider,
                    depends_on=[*args.management.ready, *(depends_on or [])],
                    custom_timeouts=timeouts,
                ),
            )

        bootstrap = custom_resource(f"{name}-kubeadm-config", "bootstrap")
        infrastructure = custom_resource(f"{name}-machine-template", "infrastructure")
        # After the control plane, so that on destroy (reverse order) the machines are drained
        # and deprovisioned while the tenant's API still answers, and only then the control plane
        # goes. Creating it earlier would gain nothing: CAPM3 picks a host only once the machine's
        # bootstrap data exists, which needs an initialized control plane (CAPM3 v1.13.2
        # docs/deployment_workflow.md:50-56,81-82).
        self.machine_deployment = custom_resource(
            f"{name}-machines",
            "deployment",
            depends_on=[bootstrap, infrastructure, *args.tenant.control_plane_ready],
            timeouts=pulumi.CustomTimeouts(delete=CAPI_DELETE_TIMEOUT),
        )
        if machine.health_check.enabled:
            custom_resource(
                f"{name}-health-check", "healthCheck", depends_on=[self.machine_deployment]
            )
        return pulumi.Output.from_input([])


def _capi_static(key: str, provider: str) -> tuple[str, str]:
    """apiVersion and kind of each Cluster API object (known before any output resolves)."""
    return {
        "bootstrap": (BOOTSTRAP_API, "KubeadmConfigTemplate"),
        "infrastructure": (INFRASTRUCTURE_API, INFRASTRUCTURE_KINDS[provider]),
        "deployment": (CLUSTER_API, "MachineDeployment"),
        "healthCheck": (CLUSTER_API, "MachineHealthCheck"),
    }[key]


def _capi_objects(
    name: str,
    tenant: str,
    pool: WorkerPool,
    labels: dict[str, str],
    version: str,
    namespace: str,
    cluster_name: str,
) -> dict[str, dict[str, Any]]:
    """Every Cluster API object of a prod pool, once the namespace and cluster name are known."""
    machine = pool.machine
    assert machine is not None
    bootstrap = kubeadm_config_template(
        name, namespace, tenant, pool.name, labels, machine.provider
    )
    infrastructure = infrastructure_machine_template(
        machine.provider, name, namespace, tenant, pool.name, machine.template
    )
    objects = {
        "bootstrap": bootstrap,
        "infrastructure": infrastructure,
        "deployment": machine_deployment(
            name,
            namespace,
            tenant,
            pool.name,
            cluster_name,
            pool.replicas,
            version,
            bootstrap,
            infrastructure,
            rollout_strategy(
                machine.provider,
                machine.rollout.model_dump(by_alias=True) if machine.rollout else None,
            ),
        ),
        "healthCheck": machine_health_check(
            f"{name}-health",
            namespace,
            tenant,
            pool.name,
            cluster_name,
            machine.health_check.unhealthy_after,
            machine.health_check.max_unhealthy,
        ),
    }
    return objects
