"""The providers' ``cluster_identifier`` follows the cluster behind them.

pulumi-kubernetes replaces a provider only when its ``clusterIdentifier`` changes and treats
every other change, a new kubeconfig included, as an update (provider/pkg/provider/provider.go:
486-500 at v4.32.0; the 4.34.2 SDK's docstring says the same); the engine replaces every resource
of a replaced provider (pulumi/pulumi v3.259.0 pkg/resource/deploy/step_generator.go:2798-2850).
So an identifier that survives the recreation of its cluster leaves the objects in it reported
unchanged on an empty cluster.
"""

from __future__ import annotations

import copy
from collections.abc import Callable

from components.gpu_tenant import tenant_cluster_identifier
from components.lab.management_values import kind_cluster_identifier
from tests.support.harness import Recording, evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"


def test_tenant_identifier_is_the_name_and_the_control_planes_uid(
    recordings: Callable[[str, bool], Recording],
) -> None:
    lab = recordings("lab", False)
    for tenant in ("tenant-a", "tenant-b"):
        uid = lab.named(f"{tenant}-control-plane").outputs["metadata"]["uid"]
        assert uid
        provider = lab.named(f"{tenant}-provider")
        assert provider.inputs["clusterIdentifier"] == f"{tenant}/{uid}"


def test_a_recreated_control_plane_changes_the_identifier() -> None:
    assert tenant_cluster_identifier("tenant-a", ["uid-1"]) != tenant_cluster_identifier(
        "tenant-a", ["uid-2"]
    )
    assert tenant_cluster_identifier("team", ["kcp", "cluster-1"]) != tenant_cluster_identifier(
        "team", ["kcp", "cluster-2"]
    )


def test_management_identifier_covers_every_input_that_replaces_the_kind_cluster(
    recordings: Callable[[str, bool], Recording],
) -> None:
    lab = recordings("lab", False)
    cluster = lab.named("management-kind-cluster")
    assert {"stdin", "environment"} <= set(cluster.options["replace_on_changes"])
    provider = lab.named("management-provider")
    assert provider.inputs["clusterIdentifier"] == kind_cluster_identifier(
        "gpu-lab", cluster.inputs["stdin"], cluster.inputs["environment"]
    )


def test_a_new_docker_network_is_a_new_management_cluster() -> None:
    config = copy.deepcopy(load_stack_config("lab"))
    before = evaluate("lab", False, config=config).named("management-provider")
    config[PLATFORM]["management"]["kind"]["dockerNetwork"] = "lab-net"
    after = evaluate("lab", False, config=config)
    assert (
        after.named("management-provider").inputs["clusterIdentifier"]
        != (before.inputs["clusterIdentifier"])
    )
    network = after.named("management-kind-network")
    assert network.inputs["environment"] == {"DOCKER_NETWORK": "lab-net"}


def test_the_kind_network_is_inspected_again_when_the_cluster_is_replaced(
    recordings: Callable[[str, bool], Recording],
) -> None:
    lab = recordings("lab", False)
    cluster = lab.named("management-kind-cluster")
    network = lab.named("management-kind-network")
    # The mocks give every resource the ID ``<name>-id``; a real Command's is new per creation.
    assert cluster.name == "management-kind-cluster"
    assert network.inputs["triggers"] == ["management-kind-cluster-id"]
