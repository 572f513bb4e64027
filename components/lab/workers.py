"""Lab worker pools: kindest/node containers joined to one tenant, with simulated GPUs.

``replicas`` containers on the kind docker network, joined with kubeadm (scripts/worker/), each
carrying the pool's declared cards (HAMi's ``hami.io/node-nvidia-register`` annotation, the
``nvidia.com/gpu`` status capacity the mock device plugin needs, the tenant/pool/model labels and
prod's ``gpu=on``, which nothing in the lab selects on) and, per pool, the mock allocation
completer that does what the mock device plugin's empty Allocate leaves undone and puts that
identity back after restarts. Decisions live in ``components.gpu_inventory``,
``components.lab.node_container`` and ``components.lab.completer.manifests``.
"""

from __future__ import annotations

import functools
import os
import urllib.parse

import pulumi
import pulumi_command as command
import pulumi_docker as docker
import pulumi_kubernetes as k8s

from components.gpu_inventory import (
    GPU_COUNT_RESOURCE,
    gpu_capacity,
    node_labels,
    node_register_annotation,
)
from components.k8s_objects import typed_object
from components.lab import docker_host, lab_images, registry_cache
from components.lab.completer.manifests import completer_manifests, completer_script, node_state
from components.lab.node_container import worker_container_spec
from components.labels import HAMI_NODE_REGISTER
from components.resource_names import worker_node_names
from components.scripts import read_script
from components.substrate import NOTHING_TO_DELETE, PoolParts, PoolSite
from components.tenant_specs import admin_kubeconfig_secret
from components.versions import PINNED

BASH = ("/bin/bash", "-c")
# Which docker container backs a lab node (changes when the container is replaced, so the node
# patch is applied again to the node the new container registers).
WORKER_CONTAINER_ANNOTATION = "gpu-platform.io/worker-container"
# pulumi-kubernetes: resolve server-side apply conflicts in this patch's favour
# (provider/pkg/metadata/annotations.go AnnotationPatchForce).
PATCH_FORCE_ANNOTATION = "pulumi.com/patchForce"


def _script(name: str) -> str:
    return read_script("worker", name)


def lab_workers(site: PoolSite) -> PoolParts:
    """``replicas`` kindest/node containers joined to the tenant, their declared cards, and the
    pool's mock allocation completer."""
    args = site
    name = site.name
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
        pulumi.log.info(
            f"pool {pool.name}: worker containers get {reason}", resource=site.component
        )
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

    # Workers follow the control plane: on an upgrade the pool's version gate waits (its update,
    # scripts/worker/wait-tenant-version.sh) until the tenant's API serves the new version, and
    # only then is the new image pulled and a container replaced. Its create does nothing, and it
    # depends on nothing the control plane produces, so a first deployment's workers still start
    # at once, while the management cluster and the control plane come up.
    version = args.platform.version_of(args.tenant_config)
    version_gate = command.local.Command(
        f"{name}-version-gate",
        create=NOTHING_TO_DELETE,
        update=_script("wait-tenant-version.sh"),
        delete=NOTHING_TO_DELETE,
        interpreter=list(BASH),
        environment={
            "KIND_CLUSTER_NAME": args.platform.kind.cluster_name,
            "TENANT_NAMESPACE": args.tenant_config.namespace,
            "TENANT_SECRET": admin_kubeconfig_secret(tenant_name),
            "EXPECTED_VERSION": version,
            "SERVED_VERSION_SCRIPT": read_script("tenant", "served-version.sh"),
        },
        logging=command.local.Logging.STDERR,
        opts=site.opts(),
    )
    after_control_plane: list[pulumi.Resource] = [version_gate]
    image = docker.RemoteImage(
        f"{name}-worker-image",
        name=args.platform.worker_image_of(args.tenant_config),
        keep_locally=True,  # other pools (and the next `up`) use the same image
        opts=site.opts(depends_on=after_control_plane),
    )
    pinned_images = lab_images.pinned()
    mirror_caches = registry_cache.caches(lab_images.registries(pinned_images))
    prepull = lab_images.prepull_images(pinned_images)
    # One worker at a time: a container (and so its replacement on an upgrade: the drain and
    # removal of its node by the join's delete, the new container, the join, the GPU capacity and
    # the inventory patch) waits until the previous worker is back with its inventory.
    previous: list[pulumi.Resource] = []
    joins: list[command.local.Command] = []
    # HAMi's simulated cards (its register annotation, the nvidia.com/gpu capacity, the mock
    # allocation completer) only where HAMi shares them: a gpuSharing: dra tenant's cards are
    # published by its DRA driver alone, or HAMi's scheduler would hand out the same cards too.
    hami_cards = args.tenant_config.gpu_sharing == "hami"
    # What each node must carry; the completer keeps it in place across restarts.
    identity = {
        node: node_state(
            labels,
            {
                HAMI_NODE_REGISTER: node_register_annotation(
                    tenant_name, pool.name, node, cards, pool.slots_per_card
                )
            }
            if hami_cards
            else {},
            {GPU_COUNT_RESOURCE: capacity} if hami_cards else {},
        )
        for node in names
    }
    for index, node in enumerate(names):
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
            # The lab's kind_network resolves once the kind network exists with the registry
            # caches on it: the container starts then, while the management cluster and Kamaji
            # come up (its join waits for the tenant's kubeconfig). On an upgrade it is replaced
            # only after the pool's version gate, and after the previous worker of the pool.
            opts=site.opts(
                depends_on=[*after_control_plane, *previous], delete_before_replace=True
            ),
        )
        # Pull through the caches, and pull the tenant's images ahead, before the join.
        node_images = command.local.Command(
            f"{name}-{index}-node-images",
            create=read_script("management", "node-mirrors.sh"),
            update=read_script("management", "node-mirrors.sh"),
            delete=NOTHING_TO_DELETE,
            interpreter=list(BASH),
            environment=network.apply(
                functools.partial(_mirrors_env, mirror_caches, node, prepull)
            ),
            logging=command.local.Logging.STDOUT_AND_STDERR,
            triggers=[container.id],
            opts=site.opts(depends_on=[container], delete_before_replace=True),
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
            opts=site.opts(
                depends_on=[container, node_images],
                additional_secret_outputs=["stdout", "stderr"],
                delete_before_replace=True,
            ),
        )
        joins.append(join)
        patches: list[pulumi.Resource] = []
        if hami_cards:
            capacity_patch = command.local.Command(
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
                opts=site.opts(depends_on=[join], delete_before_replace=True),
            )
            patches.append(capacity_patch)
        # LAB_ONLY: simulated cards. A NodePatch (server-side apply) owns only these fields;
        # it wins over the completer, which co-owns them once it had to put one back.
        inventory = k8s.core.v1.NodePatch(
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
            opts=site.in_tenant(depends_on=[join]),
        )
        previous = [inventory, *patches]
    completer = _mock_allocation_completer(site, joins, identity) if hami_cards else None
    node_names = pulumi.Output.all(*[join.id for join in joins]).apply(lambda _: list(names))
    return PoolParts(node_names=node_names, completer=completer)


def _mirrors_env(
    caches: list[registry_cache.Cache], node: str, prepull: list[str], network: str
) -> dict[str, str]:
    return registry_cache.mirrors_env(caches, [node], network, prepull)


def _mock_allocation_completer(
    site: PoolSite,
    nodes: list[command.local.Command],
    identity: dict[str, dict[str, dict[str, str]]],
) -> k8s.apps.v1.Deployment:
    """The pool's completer (lab only): it needs the pool's nodes and the tenant's CNI, and
    keeps each node's declared ``identity`` (labels, register annotation, GPU capacity)."""
    args = site
    name = site.name
    manifests = completer_manifests(
        args.tenant_config.name,
        args.pool.name,
        completer_script(),
        PINNED.completer_image,
        identity,
    )
    namespace = typed_object(
        f"{name}-completer-namespace", manifests["namespace"], site.in_tenant()
    )
    account = typed_object(
        f"{name}-completer-account",
        manifests["serviceAccount"],
        site.in_tenant(depends_on=[namespace]),
    )
    role = typed_object(f"{name}-completer-role", manifests["clusterRole"], site.in_tenant())
    binding = typed_object(
        f"{name}-completer-binding",
        manifests["clusterRoleBinding"],
        site.in_tenant(depends_on=[role, account]),
    )
    script = typed_object(
        f"{name}-completer-script",
        manifests["configMap"],
        site.in_tenant(depends_on=[namespace]),
    )
    completer: k8s.apps.v1.Deployment = typed_object(
        f"{name}-completer",
        manifests["deployment"],
        site.in_tenant(depends_on=[account, binding, script, *nodes, *args.tenant.ready]),
    )
    return completer
