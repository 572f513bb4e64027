"""GpuWorkerPool under mocks: what each stack registers for its pools.

lab: worker containers, secret join commands, GPU capacity commands, node inventories and the
mock allocation completer per pool. prod: Cluster API machines and no lab part. Both: the
declared-inventory ConfigMap. Expected values come from the stack files and the lab report
(tenant-a: one A100 80 GB = 81,920 MiB / 100 units / 10 slots; tenant-b: two L4 =
49,152 MiB / 200 units / 20 slots), written out here.
"""

from __future__ import annotations

import copy
import json
from pathlib import Path
from typing import Any

import pytest

from components.versions import PINNED
from tests.support.contracts import crd_violations
from tests.support.harness import Recording, evaluate, load_stack_config

POOL = "gpu-platform:index:GpuWorkerPool"
CONTAINER = "docker:index/container:Container"
REMOTE_IMAGE = "docker:index/remoteImage:RemoteImage"
VOLUME = "docker:index/volume:Volume"
COMMAND = "command:local:Command"
NODE_PATCH = "kubernetes:core/v1:NodePatch"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
DEPLOYMENT = "kubernetes:apps/v1:Deployment"
CLUSTER_ROLE = "kubernetes:rbac.authorization.k8s.io/v1:ClusterRole"
NAMESPACE = "kubernetes:core/v1:Namespace"
MACHINE_DEPLOYMENT = "kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment"
HEALTH_CHECK = "kubernetes:cluster.x-k8s.io/v1beta2:MachineHealthCheck"
LAB_ONLY = "gpu-platform.io/lab-only"
REGISTER = "hami.io/node-nvidia-register"

LAB_NODES = {"tenant-a-a100": ["tenant-a-a100-0"], "tenant-b-l4": ["tenant-b-l4-0"]}
# (cards, MiB, compute units, slots) per node, from the lab report
LAB_INVENTORY = {"tenant-a-a100": (1, 81_920, 100, 10), "tenant-b-l4": (2, 49_152, 200, 20)}

KIND_V0_31_V1_35_0 = "sha256:452d707d4862f52530247495d180205e029056831160e22870e37e3f6c1ac31f"
KIND_V0_31_V1_34_3 = "sha256:08497ee19eace7b4b5348db5c6a1591d7752b164530a36f855cb0f2bdcbadd48"
LAB_WORKER_IMAGES = {
    "tenant-a-a100": f"kindest/node:v1.34.3@{KIND_V0_31_V1_34_3}",
    "tenant-b-l4": f"kindest/node:v1.35.0@{KIND_V0_31_V1_35_0}",
}


def pool_children(recording: Recording, pool: str, type_: str | None = None) -> list[Any]:
    # a program error stops registration half-way: say so instead of a confusing miss below
    assert recording.error is None, f"{recording.stack} does not evaluate: {recording.error}"
    component = recording.named(pool)
    assert component.type == POOL
    found = [r for r in recording.resources if component.urn in (r.parent,)]
    return [r for r in found if type_ is None or r.type == type_]


def tenant_of_provider(recording: Recording, reg: Any) -> str | None:
    provider = recording.provider_of(reg)
    assert provider is not None, reg.name
    owner = recording.component_of(provider, ":GpuTenant")
    return owner.name if owner else None


def management_owns_provider(recording: Recording, reg: Any) -> bool:
    provider = recording.provider_of(reg)
    assert provider is not None, reg.name
    return recording.component_of(provider, ":ManagementCluster") is not None


# ------------------------------------------------------------------------------------ lab


@pytest.mark.parametrize("pool", sorted(LAB_NODES))
def test_lab_pool_runs_one_kindest_node_container_per_replica(lab: Recording, pool: str) -> None:
    (image,) = pool_children(lab, pool, REMOTE_IMAGE)
    # The tenant version, by the digest kind v0.31.0 published for it (tenant-a ships one minor
    # behind, for the upgrade drill TC-19).
    assert image.inputs["name"] == LAB_WORKER_IMAGES[pool]
    containers = pool_children(lab, pool, CONTAINER)
    assert sorted(c.inputs["name"] for c in containers) == LAB_NODES[pool]
    # No named volume: a worker's /var is anonymous, created and removed with its container,
    # so a replaced worker (an upgrade) never mounts the old node's /var (kind v0.31.0
    # pkg/cluster/internal/providers/docker/provision.go:236).
    assert pool_children(lab, pool, VOLUME) == []
    for container in containers:
        inputs = container.inputs
        assert inputs["image"] == image.outputs["imageId"]
        assert image.urn in container.dependencies
        assert inputs["hostname"] == inputs["name"]
        assert inputs["networksAdvanced"] == [{"name": "kind"}]
        assert inputs["privileged"] is True
        # label=disable: what Docker stores for a privileged container anyway, declared so the
        # provider's read-back matches and no later `up` replaces the worker.
        assert sorted(inputs["securityOpts"]) == [
            "apparmor=unconfined",
            "label=disable",
            "seccomp=unconfined",
        ]
        assert set(inputs["tmpfs"]) == {"/tmp", "/run"}
        # No Docker facts, no proxy under the harness: kind's host-dependent arguments stay off.
        assert "usernsMode" not in inputs
        assert "devices" not in inputs
        assert "envs" not in inputs
        assert inputs["cgroupnsMode"] == "private"
        mounts = {v["containerPath"]: v for v in inputs["volumes"]}
        assert mounts["/var"] == {"containerPath": "/var"}
        assert inputs["removeVolumes"] is True
        assert mounts["/lib/modules"]["readOnly"] is True
        assert container.options["delete_before_replace"] is True
        # the kind network exists only once the management cluster is up
        by_urn = lab.by_urn()
        assert any(
            lab.component_of(by_urn[urn], ":ManagementCluster") is not None
            for urn in container.dependencies
            if urn in by_urn
        ), container.name


def test_lab_workers_get_kinds_host_dependent_arguments(tmp_path: Path) -> None:
    """On a btrfs host with user-namespace remapping behind a proxy, the workers get what kind
    gives its own nodes there: /dev/mapper, the host user namespace, the proxy with NO_PROXY
    covering the tenant's API address, CIDRs and nodes (secret: proxy URLs may hold passwords)."""
    samples = Path(__file__).parents[1] / "unit" / "samples"
    info = json.loads((samples / "docker-info-btrfs.json").read_text())
    info["SecurityOptions"].append("name=userns")
    path = tmp_path / "docker-info.json"
    path.write_text(json.dumps(info))
    recording = evaluate(
        "lab",
        False,
        environment={
            "GPU_PLATFORM_DOCKER_INFO": str(path),
            "HTTPS_PROXY": "http://u:pw@proxy:3128",
        },
    )
    assert recording.error is None, recording.error
    tenant = load_stack_config("lab")["gpu-platform:platform"]["tenants"][0]
    (container,) = pool_children(recording, "tenant-a-a100", CONTAINER)
    inputs = container.inputs
    assert {"hostPath": "/dev/mapper", "containerPath": "/dev/mapper"} in inputs["volumes"]
    assert inputs["usernsMode"] == "host"
    assert container.input_is_secret("envs")
    envs = dict(entry.split("=", 1) for entry in inputs["envs"])
    assert envs["HTTPS_PROXY"] == envs["https_proxy"] == "http://u:pw@proxy:3128"
    no_proxy = envs["NO_PROXY"].split(",")
    tcp = recording.named("tenant-a-control-plane")
    for direct in (
        # The address Kamaji reported (MetalLB's, from the fakes), read back by the tenant.
        tcp.outputs["status"]["controlPlaneEndpoint"].rsplit(":", 1)[0],
        tenant["network"]["podCidr"],
        tenant["network"]["serviceCidr"],
        "tenant-a-a100-0",
    ):
        assert direct in no_proxy


@pytest.mark.parametrize("pool", sorted(LAB_NODES))
def test_lab_nodes_join_with_a_secret_command_that_also_removes_them(
    lab: Recording, pool: str
) -> None:
    containers = {c.inputs["name"]: c for c in pool_children(lab, pool, CONTAINER)}
    joins = [c for c in pool_children(lab, pool, COMMAND) if c.name.endswith("-node-join")]
    assert len(joins) == len(containers)
    for join in joins:
        node = join.inputs["environment"]["NODE_NAME"]
        assert containers[node].urn in join.dependencies
        assert "kubeadm join" not in join.inputs["create"]  # the script, not a join command
        assert join.inputs["create"].startswith("#!/usr/bin/env bash")
        assert "kubectl" in join.inputs["delete"]
        assert join.input_is_secret("environment")
        assert "stdout" in join.options["additional_secret_outputs"]
        assert join.inputs["logging"] in ("stderr", "none")
        assert join.options["delete_before_replace"] is True
        assert join.outputs["stdout"].strip() == node  # fake: what join-node.sh prints


@pytest.mark.parametrize("pool", sorted(LAB_NODES))
def test_lab_nodes_carry_the_declared_cards(lab: Recording, pool: str) -> None:
    cards, memory, cores, slots = LAB_INVENTORY[pool]
    tenant = pool.rpartition("-")[0]
    joins = {
        c.inputs["environment"]["NODE_NAME"]: c
        for c in pool_children(lab, pool, COMMAND)
        if c.name.endswith("-node-join")
    }
    capacities = [c for c in pool_children(lab, pool, COMMAND) if c.name.endswith("-gpu-capacity")]
    assert {c.inputs["environment"]["NODE_NAME"] for c in capacities} == set(LAB_NODES[pool])
    for command in capacities:
        env = command.inputs["environment"]
        assert env["GPU_RESOURCE"] == "nvidia.com/gpu"
        assert env["GPU_CAPACITY"] == str(slots)
        assert joins[env["NODE_NAME"]].urn in command.dependencies
        assert command.input_is_secret("environment")
        assert "--subresource=status" in command.inputs["create"]

    patches = pool_children(lab, pool, NODE_PATCH)
    assert sorted(p.inputs["metadata"]["name"] for p in patches) == LAB_NODES[pool]
    for patch in patches:
        metadata = patch.inputs["metadata"]
        assert tenant_of_provider(lab, patch) == tenant
        assert joins[metadata["name"]].urn in patch.dependencies
        assert metadata["labels"]["gpu"] == "on"
        assert metadata["labels"][LAB_ONLY] == "true"
        registered = json.loads(metadata["annotations"][REGISTER])
        assert len(registered) == cards
        assert sum(c["devmem"] for c in registered) == memory
        assert sum(c["devcore"] for c in registered) == cores
        assert sum(c["count"] for c in registered) == slots
        assert all("NVIDIA" in c["type"] and c["health"] is True for c in registered)


def test_lab_outputs_node_names_and_inventory_totals(lab: Recording) -> None:
    tenants = lab.outputs["tenants"]
    for pool, nodes in LAB_NODES.items():
        tenant, _, pool_name = pool.rpartition("-")
        summary = tenants[tenant]["pools"][pool_name]
        assert summary["nodes"] == nodes
        cards, memory, cores, slots = LAB_INVENTORY[pool]
        inventory = summary["inventory"]
        assert inventory["nodes"] == len(nodes)
        assert (
            inventory["cards"],
            inventory["memoryMiB"],
            inventory["coreUnits"],
            inventory["slots"],
        ) == (cards, memory, cores, slots)
        assert inventory["perNode"] == {
            "cards": cards,
            "memoryMiB": memory,
            "coreUnits": cores,
            "slots": slots,
        }


def test_lab_preview_leaves_join_output_unknown(recordings: Any) -> None:
    preview: Recording = recordings("lab", True)
    assert preview.error is None, preview.error
    for pool in LAB_NODES:
        for join in pool_children(preview, pool, COMMAND):
            assert "stdout" not in join.outputs or join.outputs["stdout"] in (None, "<unknown>")


@pytest.mark.parametrize("pool", sorted(LAB_NODES))
def test_lab_pool_has_its_mock_allocation_completer(lab: Recording, pool: str) -> None:
    tenant = pool.rpartition("-")[0]
    (deployment,) = pool_children(lab, pool, DEPLOYMENT)
    (namespace,) = pool_children(lab, pool, NAMESPACE)
    (role,) = pool_children(lab, pool, CLUSTER_ROLE)
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    assert container["image"] == PINNED.completer_image
    assert namespace.inputs["metadata"]["labels"]["hami.io/webhook"] == "ignore"
    assert role.inputs["rules"] == [
        {"apiGroups": [""], "resources": ["pods"], "verbs": ["list", "patch"]},
        {
            "apiGroups": [""],
            "resources": ["nodes"],
            "resourceNames": LAB_NODES[pool],
            "verbs": ["get", "patch"],
        },
        {
            "apiGroups": [""],
            "resources": ["nodes/status"],
            "resourceNames": LAB_NODES[pool],
            "verbs": ["patch"],
        },
    ]
    completer_parts = [
        r
        for r in pool_children(lab, pool)
        if r.type.startswith("kubernetes:") and "-completer" in r.name
    ]
    assert len(completer_parts) == 6
    for part in completer_parts:
        assert part.inputs["metadata"]["labels"][LAB_ONLY] == "true", part.name
        assert tenant_of_provider(lab, part) == tenant, part.name
    # the completer needs the pool's nodes joined
    joins = [c.urn for c in pool_children(lab, pool, COMMAND) if c.name.endswith("-node-join")]
    assert set(joins) <= set(deployment.dependencies)


@pytest.mark.parametrize("pool", sorted(LAB_NODES))
def test_the_completer_keeps_each_nodes_declared_gpu_identity(lab: Recording, pool: str) -> None:
    """The kubelet zeroes nvidia.com/gpu on every restart (no device-plugin checkpoint) and a
    re-registered Node has no labels or annotations; the one-shot join-time patches would not
    run again, so the completer (which keeps running) holds what they set and puts it back."""
    (config,) = [
        c for c in pool_children(lab, pool, CONFIG_MAP) if c.name.endswith("-completer-script")
    ]
    identity = json.loads(config.inputs["data"]["nodes.json"])
    assert sorted(identity) == LAB_NODES[pool]
    capacities = {
        c.inputs["environment"]["NODE_NAME"]: c.inputs["environment"]["GPU_CAPACITY"]
        for c in pool_children(lab, pool, COMMAND)
        if c.name.endswith("-gpu-capacity")
    }
    patches = {p.inputs["metadata"]["name"]: p for p in pool_children(lab, pool, NODE_PATCH)}
    for node, state in identity.items():
        assert state["capacity"] == {"nvidia.com/gpu": capacities[node]}
        metadata = patches[node].inputs["metadata"]
        assert state["labels"] == metadata["labels"]
        assert state["annotations"] == {REGISTER: metadata["annotations"][REGISTER]}
        # the declaration wins should the completer have co-owned a field it put back
        assert metadata["annotations"]["pulumi.com/patchForce"] == "true"
    (deployment,) = pool_children(lab, pool, DEPLOYMENT)
    (container,) = deployment.inputs["spec"]["template"]["spec"]["containers"]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NODES_FILE"].endswith("/nodes.json")


def test_every_pool_command_creates_and_deletes(lab: Recording) -> None:
    for pool in LAB_NODES:
        for command in pool_children(lab, pool, COMMAND):
            assert command.inputs.get("create"), command.name
            assert command.inputs.get("delete"), command.name
            assert command.inputs.get("interpreter") == ["/bin/bash", "-c"], command.name


def test_pools_of_one_tenant_never_wait_for_another_tenant(lab: Recording) -> None:
    other = {"tenant-a-a100": "tenant-b", "tenant-b-l4": "tenant-a"}
    by_urn = lab.by_urn()
    for pool, foreign in other.items():
        for reg in pool_children(lab, pool):
            for urn in lab.dependency_closure(reg):
                dep = by_urn.get(urn)
                if dep is None:
                    continue
                owner = lab.component_of(dep, ":GpuTenant")
                assert owner is None or owner.name != foreign, (reg.name, dep.name)


# ---------------------------------------------------------------------------------- both


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_pool_declares_its_inventory_in_the_tenant(recordings: Any, stack: str) -> None:
    recording: Recording = recordings(stack, False)
    platform = load_stack_config(stack)["gpu-platform:platform"]
    for tenant in platform["tenants"]:
        for pool in tenant.get("workerPools", []):
            name = f"{tenant['name']}-{pool['name']}"
            (configmap,) = [
                c for c in pool_children(recording, name, CONFIG_MAP) if "declared" in c.name
            ]
            metadata = configmap.inputs["metadata"]
            assert metadata["name"] == f"gpu-platform-pool-{pool['name']}"
            assert metadata["namespace"] == "kube-system"
            assert metadata["labels"]["gpu-platform.io/declared-inventory"] == "true"
            assert metadata["labels"]["gpu-platform.io/tenant"] == tenant["name"]
            assert metadata["labels"]["gpu-platform.io/pool"] == pool["name"]
            assert tenant_of_provider(recording, configmap) == tenant["name"]
            payload = json.loads(configmap.inputs["data"]["cards.json"])
            assert payload["replicas"] == pool.get("replicas", 1)
            assert payload["slotsPerCard"] == pool.get("slotsPerCard", 10)
            assert [c["count"] for c in payload["cards"]] == [c["count"] for c in pool["cards"]]
            assert [c["model"] for c in payload["cards"]] == [c["model"] for c in pool["cards"]]


# ----------------------------------------------------------------------------------- prod

PROD_POOLS = {  # pool: (replicas, health check)
    "team-vision-a100": (2, True),
    "team-llm-h100": (2, True),
    "team-speech-l40s": (1, False),
}


@pytest.mark.parametrize("pool", sorted(PROD_POOLS))
def test_prod_pool_is_a_machine_deployment(prod: Recording, pool: str) -> None:
    replicas, health_check = PROD_POOLS[pool]
    tenant = pool.rpartition("-")[0]
    (deployment,) = pool_children(prod, pool, MACHINE_DEPLOYMENT)
    spec = deployment.inputs["spec"]
    assert spec["replicas"] == replicas
    assert spec["template"]["spec"]["version"] == "v1.35.0"
    assert spec["clusterName"] == spec["template"]["spec"]["clusterName"]
    assert management_owns_provider(prod, deployment)
    by_name = {
        r.inputs["metadata"]["name"]: r for r in pool_children(prod, pool) if r.type != CONFIG_MAP
    }
    bootstrap = by_name[spec["template"]["spec"]["bootstrap"]["configRef"]["name"]]
    infrastructure = by_name[spec["template"]["spec"]["infrastructureRef"]["name"]]
    assert bootstrap.inputs["kind"] == "KubeadmConfigTemplate"
    assert infrastructure.inputs["kind"] == "Metal3MachineTemplate"
    for reg in (deployment, bootstrap, infrastructure):
        assert reg.inputs["metadata"]["namespace"] == deployment.inputs["metadata"]["namespace"]
        assert management_owns_provider(prod, reg)
    args = bootstrap.inputs["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"][
        "kubeletExtraArgs"
    ]
    (labels,) = [a["value"] for a in args if a["name"] == "node-labels"]
    assert "gpu=on" in labels.split(",")
    assert f"gpu-platform.io/tenant={tenant}" in labels.split(",")
    assert len(pool_children(prod, pool, HEALTH_CHECK)) == (1 if health_check else 0)


def test_prod_machine_deployments_use_the_tenants_cluster(prod: Recording) -> None:
    clusters = [
        r
        for r in prod.resources
        if r.type == "kubernetes:cluster.x-k8s.io/v1beta2:Cluster" and not r.read
    ]
    if not clusters:
        pytest.skip("GpuTenant registers no Cluster API Cluster yet")
    for pool in PROD_POOLS:
        (deployment,) = pool_children(prod, pool, MACHINE_DEPLOYMENT)
        tenant = prod.component_of(prod.named(pool), ":GpuTenant")
        assert tenant is not None
        (cluster,) = [c for c in clusters if prod.component_of(c, ":GpuTenant") == tenant]
        assert deployment.inputs["spec"]["clusterName"] == cluster.inputs["metadata"]["name"]
        assert deployment.inputs["metadata"]["namespace"] == cluster.inputs["metadata"]["namespace"]


def test_prod_pools_have_no_lab_parts(prod: Recording) -> None:
    for pool in PROD_POOLS:
        children = pool_children(prod, pool)
        types = {r.type for r in children}
        assert not types & {CONTAINER, REMOTE_IMAGE, VOLUME, COMMAND, NODE_PATCH, DEPLOYMENT}
        for reg in children:
            metadata = reg.inputs.get("metadata") or {}
            assert LAB_ONLY not in (metadata.get("labels") or {}), reg.name
            assert REGISTER not in (metadata.get("annotations") or {}), reg.name
        summary = prod.outputs["tenants"][pool.rpartition("-")[0]]["pools"]
        assert all(p["nodes"] == [] for p in summary.values())


# ------------------------------------------------------------------------------ scenarios


def _lab_config_with(pool_changes: dict[str, Any]) -> dict[str, Any]:
    config = copy.deepcopy(load_stack_config("lab"))
    pool = config["gpu-platform:platform"]["tenants"][0]["workerPools"][0]
    pool.update(pool_changes)
    return config


def test_a_bigger_lab_pool_gets_a_container_join_and_distinct_cards_per_node() -> None:
    config = _lab_config_with(
        {
            "replicas": 3,
            "cards": [
                {"model": "A100-80GB", "count": 1},
                {"model": "L4-24GB", "memoryMiB": 24_576, "coreUnits": 100},  # the lab report's
            ],
        }
    )
    recording = evaluate("lab", False, config)
    assert recording.error is None, recording.error
    pool = "tenant-a-a100"
    assert len(pool_children(recording, pool, CONTAINER)) == 3
    joins = [c for c in pool_children(recording, pool, COMMAND) if c.name.endswith("-node-join")]
    assert len(joins) == 3
    ids: list[str] = []
    for patch in pool_children(recording, pool, NODE_PATCH):
        registered = json.loads(patch.inputs["metadata"]["annotations"][REGISTER])
        assert [c["devmem"] for c in registered] == [81_920, 24_576]
        ids += [c["id"] for c in registered]
    assert len(set(ids)) == 6
    capacities = [c for c in pool_children(recording, pool, COMMAND) if "capacity" in c.name]
    assert {c.inputs["environment"]["GPU_CAPACITY"] for c in capacities} == {"20"}
    inventory = recording.outputs["tenants"]["tenant-a"]["pools"]["a100"]["inventory"]
    assert (inventory["nodes"], inventory["cards"], inventory["memoryMiB"]) == (3, 6, 319_488)


def test_a_docker_machine_pool_validates_against_capd(upstream_dir: Path) -> None:
    config = copy.deepcopy(load_stack_config("prod"))
    platform = config["gpu-platform:platform"]
    platform["tenants"] = platform["tenants"][:1]  # team-vision only
    platform["management"]["existing"]["clusterApi"]["infrastructure"] = {
        "name": "docker",
        "version": "v1.13.5",
    }
    pool = platform["tenants"][0]["workerPools"][0]
    pool["machine"] = {"provider": "docker", "template": {"customImage": "kindest/node:v1.35.0"}}
    recording = evaluate("prod", False, config)
    assert recording.error is None, recording.error
    children = pool_children(recording, "team-vision-a100")
    (template,) = [r for r in children if r.inputs.get("kind") == "DockerMachineTemplate"]
    assert crd_violations(upstream_dir, template.inputs) == []
    (deployment,) = [r for r in children if r.type == MACHINE_DEPLOYMENT]
    reference = deployment.inputs["spec"]["template"]["spec"]["infrastructureRef"]
    assert reference["kind"] == "DockerMachineTemplate"
    assert reference["name"] == template.inputs["metadata"]["name"]
