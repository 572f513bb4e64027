"""Stack configuration: both stack files validate, and every kind of bad input fails with one
clear message that names the key and the fix (issue: bad input before any registration)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from components.config import ConfigError, PlatformConfig, required_secret_keys
from components.stack import parse_platform, substrate_for
from tests.support.harness import load_stack_config

PLATFORM_KEY = "gpu-platform:platform"


def stack_platform(stack: str) -> dict[str, Any]:
    return copy.deepcopy(load_stack_config(stack)[PLATFORM_KEY])


def expect_error(raw: dict[str, Any], *fragments: str) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_platform(raw)
    message = str(caught.value)
    for fragment in fragments:
        assert fragment in message, f"{fragment!r} not in:\n{message}"
    return message


# ------------------------------------------------------------------------ the stack files


def test_lab_stack_matches_the_lab_report() -> None:
    platform = parse_platform(stack_platform("lab"))
    assert platform.mode == "lab"
    tenants = {t.name: t for t in platform.tenants}
    assert set(tenants) == {"tenant-a", "tenant-b"}

    def node_totals(name: str) -> tuple[int, int, int]:
        (pool,) = tenants[name].worker_pools
        assert pool.replicas == 1
        cards = pool.resolved_cards()
        memory = sum(card.memory_mib * count for card, count in cards)
        cores = sum(card.core_units * count for card, count in cards)
        slots = sum(count for _, count in cards) * pool.slots_per_card
        return memory, cores, slots

    assert node_totals("tenant-a") == (81_920, 100, 10)
    assert node_totals("tenant-b") == (49_152, 200, 20)
    for tenant in tenants.values():
        assert tenant.data_store.name == "default"
    assert tenants["tenant-a"].data_store.schema_name != tenants["tenant-b"].data_store.schema_name
    assert tenants["tenant-a"].data_store.username != tenants["tenant-b"].data_store.username


def test_prod_stack_is_dedicated_and_keeps_secrets_out_of_the_file() -> None:
    platform = parse_platform(stack_platform("prod"))
    assert platform.mode == "prod"
    assert all(t.data_store.dedicated is not None for t in platform.tenants)
    assert all(p.machine is not None for t in platform.tenants for p in t.worker_pools)
    assert all(
        (p.device_mode or substrate_for(platform).default_device_mode()) == "nvidia"
        for t in platform.tenants
        for p in t.worker_pools
    )
    assert required_secret_keys(platform) == [
        "llmBackupTarget",
        "managementKubeconfig",
        "speechDatastoreCredentials",
        "visionBackupTarget",
    ]
    raw_file = load_stack_config("prod")
    assert "gpu-platform:managementKubeconfig" not in raw_file, "secrets are set with --secret"


def test_models_are_frozen() -> None:
    platform = parse_platform(stack_platform("lab"))
    with pytest.raises(Exception, match="frozen"):
        platform.tenants[0].name = "other"  # type: ignore[misc]


def test_missing_platform_block_says_what_to_do() -> None:
    with pytest.raises(ConfigError, match="config key 'platform' is missing"):
        parse_platform(None)


# ---------------------------------------------------------------------- one test per case


def test_duplicate_tenant_names() -> None:
    raw = stack_platform("lab")
    raw["tenants"][1]["name"] = "tenant-a"
    expect_error(raw, "tenants[].name: 'tenant-a' is declared twice")


@pytest.mark.parametrize("bad_name", ["Tenant-A", "tenant_a", "-tenant", "t" * 64, "tenant-"])
def test_invalid_tenant_names(bad_name: str) -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["name"] = bad_name
    expect_error(raw, "tenants[0].name:", "DNS-1123")


@pytest.mark.parametrize(
    ("where", "key_path"),
    [
        (lambda raw: raw, "kubernetesVersoin"),
        (lambda raw: raw["tenants"][0], "tenants[0].dataStores"),
        (
            lambda raw: raw["tenants"][0]["workerPools"][0]["cards"][0],
            "tenants[0].workerPools[0].cards[0].vram",
        ),
        (lambda raw: raw["management"]["kind"], "management.kind.metalLbPoolSize"),
    ],
    ids=["top-level", "tenant", "card", "management"],
)
def test_unknown_keys_anywhere(where: Any, key_path: str) -> None:
    raw = stack_platform("lab")
    where(raw)[key_path.rsplit(".", 1)[-1]] = "x"
    expect_error(raw, f"{key_path}: unknown key")


def test_schema_used_by_two_tenants() -> None:
    raw = stack_platform("lab")
    raw["tenants"][1]["dataStore"]["schema"] = "tenant_a"
    expect_error(raw, "tenants[].dataStore.schema: 'tenant_a' is used by more than one tenant")


def test_username_used_by_two_tenants() -> None:
    raw = stack_platform("lab")
    raw["tenants"][1]["dataStore"]["username"] = "tenant_a"
    expect_error(raw, "tenants[].dataStore.username: 'tenant_a' is used by more than one tenant")


def test_tenant_version_above_what_kamaji_accepts() -> None:
    raw = stack_platform("lab")
    raw["kubernetesVersion"] = "v1.37.0"
    expect_error(raw, "kubernetesVersion:", "above what Kamaji", "v1.36")


def test_highest_accepted_version_passes() -> None:
    raw = stack_platform("prod")
    raw["kubernetesVersion"] = "v1.36.2"
    assert parse_platform(raw).kubernetes_version == "v1.36.2"


def test_malformed_version() -> None:
    raw = stack_platform("lab")
    raw["kubernetesVersion"] = "1.35"
    expect_error(raw, "kubernetesVersion:", "write it like v1.35.0")


def test_worker_image_of_another_version() -> None:
    raw = stack_platform("lab")
    raw["workerImage"] = "kindest/node:v1.34.0"
    expect_error(raw, "workerImage kindest/node:v1.34.0 is not v1.34.3 (tenants[0]")
    raw["tenants"][0].pop("kubernetesVersion")
    expect_error(raw, "workerImage kindest/node:v1.34.0 is not v1.35.0")


def _worker_image(platform: PlatformConfig) -> str:
    return platform.worker_image_of(platform.tenants[0])


def test_worker_image_of_the_tenant_version_passes() -> None:
    raw = stack_platform("lab")
    raw["workerImage"] = "kindest/node:v1.35.0@sha256:" + "0" * 64
    raw["tenants"][0].pop("kubernetesVersion", None)  # shipped one minor behind (TC-19)
    assert _worker_image(parse_platform(raw)).startswith("kindest/node:v1.35.0@")


def test_mock_gpus_in_prod() -> None:
    raw = stack_platform("prod")
    raw["tenants"][0]["workerPools"][0]["deviceMode"] = "mock"
    expect_error(raw, "tenants[0].workerPools[0].deviceMode: mock GPUs are lab-only")


@pytest.mark.parametrize("value", [0, -1024])
def test_zero_or_negative_memory(value: int) -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["workerPools"][0]["cards"] = [{"memoryMiB": value, "coreUnits": 100}]
    expect_error(raw, "tenants[0].workerPools[0].cards[0].memoryMiB:", "greater than 0")


@pytest.mark.parametrize("value", [0, -10])
def test_zero_or_negative_slots(value: int) -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["workerPools"][0]["slotsPerCard"] = value
    expect_error(raw, "tenants[0].workerPools[0].slotsPerCard:", "greater than 0")


def test_overlapping_cidrs_within_a_tenant() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["network"]["serviceCidr"] = "10.10.128.0/20"
    expect_error(raw, "tenants[0].network:", "overlaps", "disjoint")


def test_overlapping_cidrs_across_tenants() -> None:
    raw = stack_platform("lab")
    raw["tenants"][1]["network"]["podCidr"] = "10.10.0.0/17"
    expect_error(raw, "tenants[1].network.podCidr 10.10.0.0/17 overlaps tenants[0].network.podCidr")


def test_tenant_cidr_overlapping_the_management_cluster() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["network"]["podCidr"] = "10.244.0.0/16"
    expect_error(raw, "management.kind.podSubnet", "overlaps tenants[0].network.podCidr")


def test_nats_datastore_shared_by_two_tenants() -> None:
    raw = stack_platform("lab")
    raw["dataStores"] = [
        {
            "name": "nats-shared",
            "driver": "NATS",
            "endpoints": ["nats.example:4222"],
            "credentialsConfigKey": "natsCredentials",
        }
    ]
    for tenant in raw["tenants"]:
        tenant["dataStore"]["name"] = "nats-shared"
    expect_error(raw, "dataStores 'nats-shared' is NATS and serves tenant-a, tenant-b")


def test_nats_datastore_for_one_tenant_passes() -> None:
    raw = stack_platform("lab")
    raw["dataStores"] = [{"name": "nats-a", "driver": "NATS", "endpoints": ["nats.example:4222"]}]
    raw["tenants"][0]["dataStore"]["name"] = "nats-a"
    # kine on NATS holds no etcd prefix to export: the tenant says so (docs/backups.md).
    expect_error(raw, "tenants[0].backups: tenant-a's DataStore is NATS")
    raw["tenants"][0]["backups"] = {"enabled": False}
    assert parse_platform(raw).tenants[0].data_store.name == "nats-a"


# ----------------------------------------------------------------------------- more cases


def test_unknown_datastore_name() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["dataStore"]["name"] = "missing"
    expect_error(raw, "tenants[0].dataStore.name: 'missing' is not a DataStore this stack has")


def test_prod_tenants_may_not_share_a_datastore() -> None:
    raw = stack_platform("prod")
    raw["dataStores"] = [{"name": "pg", "driver": "PostgreSQL", "endpoints": ["pg:5432"]}]
    for tenant in raw["tenants"][:2]:
        tenant["dataStore"] = {
            "name": "pg",
            "schema": tenant["dataStore"]["schema"],
            "username": tenant["dataStore"]["username"],
        }
    expect_error(raw, "share DataStore 'pg': prod requires a dedicated DataStore per tenant")


def test_admission_controllers_must_keep_the_webhook_plugins() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["controlPlane"] = {
        "admissionControllers": ["NodeRestriction", "MutatingAdmissionWebhook"]
    }
    expect_error(raw, "tenants[0].controlPlane.admissionControllers:", "ValidatingAdmissionWebhook")


def test_unknown_card_model_lists_the_catalog() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["workerPools"][0]["cards"] = [{"model": "B200-192GB"}]
    expect_error(raw, "unknown card model 'B200-192GB'", "A100-80GB", "T4-16GB")


def test_explicit_cards_resolve_without_the_catalog() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["workerPools"][0]["cards"] = [
        {"memoryMiB": 12_288, "coreUnits": 100, "product": "NVIDIA-RTX-4070", "count": 3}
    ]
    platform = parse_platform(raw)
    ((card, count),) = platform.tenants[0].worker_pools[0].resolved_cards()
    assert (card.memory_mib, card.core_units, card.product, count) == (
        12_288,
        100,
        "NVIDIA-RTX-4070",
        3,
    )


def test_catalog_covers_the_issue_models() -> None:
    from components.catalog import CARD_CATALOG

    assert {"A100-80GB", "A100-40GB", "H100-80GB", "L4-24GB", "L40S-48GB", "T4-16GB"} <= set(
        CARD_CATALOG
    )
    assert all("NVIDIA" in model.product for model in CARD_CATALOG.values())


def test_lab_needs_kind_management() -> None:
    raw = stack_platform("lab")
    raw["management"] = {"existing": {}}
    expect_error(raw, "mode lab needs management.kind")


def test_prod_pools_need_a_machine_spec() -> None:
    raw = stack_platform("prod")
    del raw["tenants"][0]["workerPools"][0]["machine"]
    expect_error(
        raw, "tenants[0].workerPools[0].machine: prod pools need a Cluster API machine spec"
    )


def test_old_kamaji_control_plane_provider_is_refused() -> None:
    raw = stack_platform("prod")
    raw["management"]["existing"]["clusterApi"]["controlPlaneKamaji"] = "v0.15.0"
    expect_error(raw, "controlPlaneKamaji:", "v0.20.0 or later")


def test_every_problem_is_reported_at_once() -> None:
    raw = stack_platform("lab")
    raw["tenants"][1]["dataStore"]["schema"] = "tenant_a"
    raw["tenants"][1]["dataStore"]["username"] = "tenant_a"
    message = expect_error(raw, "schema", "username")
    assert message.count("is used by more than one tenant") == 2


def test_model_type_is_platform_config() -> None:
    assert isinstance(parse_platform(stack_platform("lab")), PlatformConfig)


def test_missing_secrets_name_the_command() -> None:
    from components.config import check_secrets_present

    platform = parse_platform(stack_platform("prod"))
    given = {"speechDatastoreCredentials": "x", "llmBackupTarget": "t", "visionBackupTarget": "t"}
    with pytest.raises(ConfigError) as caught:
        check_secrets_present(platform, given.get)
    assert (
        "managementKubeconfig: set it with `pulumi config set --secret managementKubeconfig"
        in str(caught.value)
    )
    assert "speechDatastoreCredentials" not in str(caught.value)
    check_secrets_present(platform, {**given, "managementKubeconfig": "k"}.get)


def test_metal3_tenants_need_a_control_plane_address() -> None:
    raw = stack_platform("prod")
    del raw["tenants"][1]["controlPlane"]["address"]
    expect_error(raw, "tenants[1].controlPlane.address: Metal3 clusters need a fixed")


def test_nodeport_control_planes_are_refused() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["controlPlane"] = {"serviceType": "NodePort"}
    expect_error(raw, "tenants[0].controlPlane.serviceType:", "LoadBalancer")


def test_a_tenant_needs_a_worker_pool() -> None:
    """Without workers the tenant's Calico and HAMi releases could never become ready."""
    raw = stack_platform("lab")
    raw["tenants"][0]["workerPools"] = []
    expect_error(raw, "tenants[0].workerPools:", "add at least one entry")


def test_prod_pools_of_a_tenant_share_one_split_count() -> None:
    """HAMi's real device plugin has one deviceSplitCount per tenant (the chart's value)."""
    raw = stack_platform("prod")
    pools = raw["tenants"][0]["workerPools"]
    pools.append({**pools[0], "name": "a100-wide", "slotsPerCard": 4})
    expect_error(raw, "tenants[0].workerPools[].slotsPerCard:", "[4, 10]")


@pytest.mark.parametrize("value", ["40", "forty", "40 %", "1000%"])
def test_health_check_limit_is_a_count_or_a_percentage(value: str) -> None:
    raw = stack_platform("prod")
    raw["tenants"][0]["workerPools"][0]["machine"]["healthCheck"]["maxUnhealthy"] = value
    if value == "40":
        assert parse_platform(raw).tenants[0].worker_pools[0].machine is not None
    else:
        expect_error(raw, "healthCheck.maxUnhealthy:")


def test_health_check_default_remediates_small_pools() -> None:
    """40 % of a 2-machine pool rounds down to 0: the default is an absolute 1."""
    platform = parse_platform(stack_platform("prod"))
    machine = platform.tenants[0].worker_pools[0].machine
    assert machine is not None
    assert machine.health_check.max_unhealthy == "1"


# ------------------------------------------------------------------------ prod: rollouts


def _prod_with_rollout(rollout: Any) -> dict[str, Any]:
    raw = stack_platform("prod")
    raw["tenants"][0]["workerPools"][0]["machine"]["rollout"] = rollout
    return raw


@pytest.mark.parametrize(
    "rollout", [{"maxSurge": 0, "maxUnavailable": 1}, {"maxSurge": "10%", "maxUnavailable": 0}]
)
def test_a_pool_rollout_may_be_configured(rollout: dict[str, Any]) -> None:
    platform = parse_platform(_prod_with_rollout(rollout))
    machine = platform.tenants[0].worker_pools[0].machine
    assert machine is not None
    assert machine.rollout is not None
    assert machine.rollout.model_dump(by_alias=True) == rollout


def test_a_rollout_that_can_never_replace_a_machine_is_refused() -> None:
    expect_error(
        _prod_with_rollout({"maxSurge": 0, "maxUnavailable": "0%"}),
        "tenants[0].workerPools[0].machine.rollout",
        "cannot both be 0",
    )


@pytest.mark.parametrize("amount", [-1, "150%", "one", "5"])
def test_a_rollout_amount_is_a_number_or_a_percentage(amount: Any) -> None:
    expect_error(
        _prod_with_rollout({"maxSurge": amount, "maxUnavailable": 1}),
        "tenants[0].workerPools[0].machine.rollout.maxSurge",
        "percentage",
    )


# --------------------------------------------------------- prod: the tenant's namespace


def test_metal3_tenants_must_adopt_the_namespace_that_holds_their_hosts() -> None:
    """CAPM3 takes BareMetalHosts only from the Metal3Machine's namespace: it must exist (hosts
    enrolled) before up, and the program must never create or delete it."""
    raw = stack_platform("prod")
    del raw["tenants"][1]["managementNamespace"]
    expect_error(raw, "tenants[1].managementNamespace.existing", "'team-llm'", "existing: true")


def test_docker_tenants_may_have_their_namespace_created() -> None:
    raw = stack_platform("prod")
    raw["management"]["existing"]["clusterApi"]["infrastructure"] = {
        "name": "docker",
        "version": "v1.13.5",
    }
    for tenant in raw["tenants"]:
        del tenant["managementNamespace"]
        for pool in tenant["workerPools"]:
            pool["machine"] = {"provider": "docker", "template": {"customImage": "x"}}
    platform = parse_platform(raw)
    assert [t.namespace for t in platform.tenants] == ["team-vision", "team-llm", "team-speech"]
    assert not any(t.management_namespace.existing for t in platform.tenants)


def test_the_lab_cannot_adopt_a_namespace() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["managementNamespace"] = {"existing": True}
    expect_error(raw, "tenants[0].managementNamespace.existing", "remove existing")


def test_an_adopted_namespace_may_have_another_name() -> None:
    raw = stack_platform("prod")
    raw["tenants"][0]["managementNamespace"] = {"name": "metal3-vision", "existing": True}
    platform = parse_platform(raw)
    assert platform.tenants[0].namespace == "metal3-vision"
    assert platform.tenants[1].namespace == "team-llm"


def test_two_tenants_may_not_share_a_namespace() -> None:
    raw = stack_platform("prod")
    raw["tenants"][0]["managementNamespace"] = {"name": "team-llm", "existing": True}
    expect_error(raw, "tenants[].managementNamespace.name", "'team-llm'", "more than one")


@pytest.mark.parametrize("name", ["kube-system", "kamaji-system", "capm3-system", "default"])
def test_a_tenant_namespace_may_not_be_the_platforms(name: str) -> None:
    raw = stack_platform("prod")
    raw["tenants"][0]["managementNamespace"] = {"name": name, "existing": True}
    expect_error(raw, "tenants[0].managementNamespace.name", "belongs to Kubernetes")


def test_the_reserved_namespaces_are_the_ones_the_platform_installs_into() -> None:
    from components import management_values as mv
    from components.config import PLATFORM_NAMESPACES, ClusterApiVersions, InfrastructureProvider
    from components.metrics.objects import METRICS_NAMESPACE
    from components.prod.capi_providers import capi_providers

    used = {
        mv.METALLB_NAMESPACE,
        mv.CERT_MANAGER_NAMESPACE,
        mv.KAMAJI_NAMESPACE,
        mv.CAPI_OPERATOR_NAMESPACE,
        METRICS_NAMESPACE,
    }
    for name in ("metal3", "docker"):
        versions = ClusterApiVersions(infrastructure=InfrastructureProvider(name=name))
        used |= {provider.namespace for provider in capi_providers(versions)}
    assert used <= set(PLATFORM_NAMESPACES)


# ------------------------------------------------------ prod: pools and the installed provider


def test_a_pool_must_use_the_installed_infrastructure_provider() -> None:
    raw = stack_platform("prod")
    raw["tenants"][2]["workerPools"][0]["machine"]["provider"] = "docker"
    expect_error(
        raw,
        "tenants[2].workerPools[0].machine.provider",
        "'docker' is not the installed infrastructure provider ('metal3'",
    )


# ------------------------------------------------------- prod: kamaji-etcd's assumptions


def test_cluster_domain_and_storage_class_are_validated() -> None:
    raw = stack_platform("prod")
    raw["management"]["existing"]["clusterDomain"] = "Cluster_Local"
    raw["tenants"][0]["dataStore"]["dedicated"]["storageClassName"] = "Fast Disks"
    expect_error(
        raw,
        "management.existing.clusterDomain: 'Cluster_Local' is not a DNS domain",
        "tenants[0].dataStore.dedicated.storageClassName: 'Fast Disks' is not a StorageClass",
    )


@pytest.mark.parametrize("members", [2, 4])
def test_a_dedicated_etcd_has_an_odd_number_of_members(members: int) -> None:
    raw = stack_platform("prod")
    raw["tenants"][0]["dataStore"]["dedicated"]["replicas"] = members
    expect_error(
        raw,
        "tenants[0].dataStore.dedicated.replicas",
        f"{members} etcd members tolerate no more failures than {members - 1}",
    )


def test_an_external_datastore_has_no_storage_class() -> None:
    raw = stack_platform("prod")
    raw["tenants"][2]["dataStore"]["dedicated"]["storageClassName"] = "fast"
    expect_error(raw, "tenants[2].dataStore.dedicated", "external DataStore has none")


# ------------------------------------------------------------------------ prod: GPU driver


@pytest.mark.parametrize(
    "driver",
    [
        {
            "source": "runtime-built",
            "packageRepositories": {"mirror.list": "deb http://m/ noble main"},
        },
        {"source": "precompiled", "version": "595", "autoUpgrade": False},
        {"source": "preinstalled"},
    ],
)
def test_gpu_driver_settings_parse(driver: dict[str, Any]) -> None:
    raw = stack_platform("prod")
    raw["gpuDriver"] = driver
    assert parse_platform(raw).gpu_driver.source == driver["source"]


@pytest.mark.parametrize(
    ("driver", "fragment"),
    [
        ({"source": "precompiled"}, "driver branch, e.g. 595"),
        ({"source": "precompiled", "version": "595.91.07"}, "driver branch, e.g. 595"),
        (
            {"source": "precompiled", "version": "595", "packageRepositories": {"a.list": "x"}},
            "remove packageRepositories",
        ),
        ({"source": "preinstalled", "version": "595.91.07"}, "remove version"),
        ({"version": "latest"}, "not a driver version"),
        ({"packageRepositories": {"../evil": "x"}}, "is not a file name"),
        ({"packageRepositories": {"mirror": "deb http://m/ noble main"}}, "would be ignored"),
    ],
)
def test_gpu_driver_settings_that_cannot_work_are_refused(
    driver: dict[str, Any], fragment: str
) -> None:
    raw = stack_platform("prod")
    raw["gpuDriver"] = driver
    expect_error(raw, "gpuDriver", fragment)


def test_the_lab_takes_no_gpu_driver_settings() -> None:
    raw = stack_platform("lab")
    raw["gpuDriver"] = {"source": "preinstalled"}
    expect_error(raw, "gpuDriver: the lab's GPUs are simulated")


def test_a_mock_node_with_more_memory_than_the_mock_can_advertise_is_refused() -> None:
    """mock 1.0.1 lists one device per MiB; two A100-80GB per node (163,840) would exceed what
    the kubelet accepts in one message, and the node would advertise no memory at all."""
    config = stack_platform("lab")
    config["tenants"][0]["workerPools"][0]["cards"] = [{"model": "A100-80GB", "count": 2}]
    expect_error(config, "tenants[0].workerPools[0].cards: 163840 MiB per node", "raise replicas")


# ---------------------------------------------------------- prod: cert-manager and providers


def test_prod_adopts_cert_manager_unless_told_to_install_it() -> None:
    """A Metal3 management cluster already runs cert-manager: the model default adopts it too,
    so a stack file that says nothing never installs a second one."""
    raw = stack_platform("prod")
    raw["management"]["existing"].pop("certManager")
    existing = parse_platform(raw).existing
    assert existing.cert_manager == "existing"
    assert existing.installs_cert_manager is False
    raw["management"]["existing"]["certManager"] = "install"
    assert parse_platform(raw).existing.installs_cert_manager is True


def test_github_token_key_is_a_required_secret() -> None:
    raw = stack_platform("prod")
    raw["management"]["existing"]["clusterApi"]["githubTokenConfigKey"] = "capiGithubToken"
    assert "capiGithubToken" in required_secret_keys(parse_platform(raw))


@pytest.mark.parametrize(
    ("fetch", "fragment"),
    [
        ({}, "give exactly one of oci or configMapLabels"),
        (
            {"oci": "registry.example.internal/capi/core", "configMapLabels": {"a": "b"}},
            "give exactly one of oci or configMapLabels",
        ),
        ({"oci": "oci://registry.example.internal/capi/core"}, "is not an OCI reference"),
        ({"oci": "https://registry.example.internal/capi/core"}, "is not an OCI reference"),
        ({"oci": "core"}, "is not an OCI reference"),
        ({"configMapLabels": {}}, "give at least one label"),
    ],
)
def test_bad_provider_fetch_sources(fetch: dict[str, Any], fragment: str) -> None:
    raw = stack_platform("prod")
    raw["management"]["existing"]["clusterApi"]["fetch"] = {"core": fetch}
    message = expect_error(raw, "management.existing.clusterApi.fetch.core", fragment)
    assert "\n" not in message


@pytest.mark.parametrize(
    "oci",
    [
        "registry.example.internal/capi/core",
        "registry.example.internal:5000/capi/core:v1.13.5",
        "http://registry.example.internal/capi/core",
        "ghcr.io/org/cluster-api-components",
    ],
)
def test_oci_references_the_operator_parses(oci: str) -> None:
    raw = stack_platform("prod")
    raw["management"]["existing"]["clusterApi"]["fetch"] = {"infrastructure": {"oci": oci}}
    fetch = parse_platform(raw).existing.cluster_api.fetch.infrastructure
    assert fetch is not None
    assert fetch.oci == oci


def test_adopted_namespaces_name_their_keys() -> None:
    platform = parse_platform(stack_platform("prod"))
    assert platform.adopted_namespaces == [
        ("tenants[0].managementNamespace.existing", "team-vision"),
        ("tenants[1].managementNamespace.existing", "team-llm"),
        ("tenants[2].managementNamespace.existing", "team-speech"),
    ]
    assert parse_platform(stack_platform("lab")).adopted_namespaces == []


# -------------------------------------------- values parsed only while building, now at once


def _prod_etcd(raw: dict[str, Any]) -> dict[str, Any]:
    """The first prod tenant's dedicated kamaji-etcd settings."""
    dedicated = [t["dataStore"].get("dedicated") or {} for t in raw["tenants"]]
    etcd: dict[str, Any] = next(d for d in dedicated if d.get("driver") == "etcd")
    return etcd


def _first_health_check(raw: dict[str, Any]) -> tuple[str, dict[str, Any]]:
    for t_index, tenant in enumerate(raw["tenants"]):
        for p_index, pool in enumerate(tenant["workerPools"]):
            check = (pool.get("machine") or {}).get("healthCheck")
            if check is not None:
                return f"tenants[{t_index}].workerPools[{p_index}].machine.healthCheck", check
    raise AssertionError("Pulumi.prod.yaml declares no health check")


@pytest.mark.parametrize("value", ["thirty seconds", "30", "5 m", ""])
def test_a_node_lock_timeout_that_is_not_a_duration_is_refused_in_the_config(value: str) -> None:
    raw = stack_platform("lab")
    raw["hami"] = {"nodeLockTimeout": value}
    expect_error(raw, "hami.nodeLockTimeout", "is not a duration", "30s")


@pytest.mark.parametrize("value", ["five minutes", "300", "1.5m", "5m30"])
def test_a_health_check_delay_that_is_not_whole_units_is_refused(value: str) -> None:
    raw = stack_platform("prod")
    key, check = _first_health_check(raw)
    check["unhealthyAfter"] = value
    expect_error(raw, f"{key}.unhealthyAfter", "300s")


@pytest.mark.parametrize("value", ["eight gigs", "8 Gi", "8GB", "-8Gi", "8gi"])
def test_a_storage_size_that_is_not_a_quantity_is_refused(value: str) -> None:
    raw = stack_platform("prod")
    _prod_etcd(raw)["storageSize"] = value
    expect_error(raw, "storageSize", "Kubernetes storage quantity", "8Gi")


@pytest.mark.parametrize("value", ["16Gi", "2500M", "1.5Ti", "2Ei"])
def test_storage_quantities_kubernetes_accepts_are_taken(value: str) -> None:
    raw = stack_platform("prod")
    _prod_etcd(raw)["storageSize"] = value
    parse_platform(raw)


def test_a_kamaji_etcd_volume_too_small_for_its_space_quota_is_refused() -> None:
    raw = stack_platform("prod")
    _prod_etcd(raw)["storageSize"] = "500M"
    expect_error(raw, "storageSize 500M leaves a kamaji-etcd less than 512 MiB", "2Gi or more")


@pytest.mark.parametrize(("value", "wrong"), [(True, "bool"), (2.0, "float"), ("2", "string")])
def test_a_whole_number_is_not_taken_from_another_type(value: object, wrong: str) -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["workerPools"][0]["replicas"] = value
    expect_error(raw, "tenants[0].workerPools[0].replicas", "whole number")


@pytest.mark.parametrize(
    "image", ["busybox", "busybox:latest", "registry.local:5000/team/trainer", "nvcr.io/x:latest"]
)
def test_a_workload_image_without_a_pinned_tag_is_refused(image: str) -> None:
    raw = stack_platform("lab")
    tenant = next(t for t in raw["tenants"] if t.get("workloads"))
    tenant["workloads"][0]["image"] = image
    expect_error(raw, "workloads[0].image", "no pinned tag", "digest")


@pytest.mark.parametrize(
    "image",
    ["busybox:1.37.0", "registry.local:5000/team/trainer:2026.11", "busybox@sha256:" + "a" * 64],
)
def test_a_workload_image_with_a_tag_or_digest_is_taken(image: str) -> None:
    raw = stack_platform("lab")
    tenant = next(t for t in raw["tenants"] if t.get("workloads"))
    tenant["workloads"][0]["image"] = image
    parse_platform(raw)


# ------------------------------------------------------- declared workloads against the tenant


def _lab_workload(raw: dict[str, Any]) -> tuple[int, dict[str, Any]]:
    index = next(i for i, t in enumerate(raw["tenants"]) if t.get("workloads"))
    return index, raw["tenants"][index]


def test_workloads_that_outgrow_their_namespaces_quota_are_refused() -> None:
    raw = stack_platform("lab")
    index, tenant = _lab_workload(raw)
    workload = tenant["workloads"][0]
    quota_index = next(
        i for i, q in enumerate(tenant["gpuQuotas"]) if q["namespace"] == workload["namespace"]
    )
    quota = tenant["gpuQuotas"][quota_index]
    # One pod more than the quota's memory holds, by HAMi's count (replicas x cards x request).
    workload["replicas"] = quota["gpuMemoryMiB"] // workload["gpu"]["memoryMiB"] + 1
    message = expect_error(raw, f"tenants[{index}].gpuQuotas[{quota_index}].gpuMemoryMiB")
    assert "raise it to at least" in message


def test_a_workload_in_a_namespace_no_quota_covers_is_refused() -> None:
    raw = stack_platform("lab")
    index, tenant = _lab_workload(raw)
    tenant["workloads"][0]["namespace"] = "unmetered"
    expect_error(raw, f"tenants[{index}].workloads[0].namespace", "has no gpuQuotas entry")


@pytest.mark.parametrize("namespace", ["kube-system", "hami-system", "calico-system"])
def test_a_workload_where_hamis_webhook_does_not_run_is_refused(namespace: str) -> None:
    raw = stack_platform("lab")
    index, tenant = _lab_workload(raw)
    tenant["workloads"][0]["namespace"] = namespace
    tenant["gpuQuotas"].append(
        {"namespace": namespace, "gpuMemoryMiB": 81920, "gpuCores": 100, "gpus": 10}
    )
    expect_error(raw, f"tenants[{index}].workloads[0].namespace", "bypass hami-scheduler")


def test_two_prod_tenants_on_one_control_plane_address_are_refused() -> None:
    raw = stack_platform("prod")
    raw["tenants"][1]["controlPlane"]["address"] = raw["tenants"][0]["controlPlane"]["address"]
    expect_error(raw, "tenants[].controlPlane.address", "give every tenant its own")
