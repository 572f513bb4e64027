"""Helm values builders for inside (and beside) a tenant: version pairing, webhook exclusions,
node-lock timeout, mock vs real device plugin, and that every key exists in the pinned chart."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import yaml

from components.availability import etcd_selector, topology_spread
from components.config import DedicatedDataStore, GpuDriver, HamiSettings
from components.config.base import storage_bytes
from components.lab import tenant as lab_tenant
from components.lab.substrate import LabSubstrate
from components.management_values import etcd_quota_backend_bytes
from components.prod import tenant as prod_tenant
from components.prod.substrate import ProdSubstrate
from components.prod.tenant_values import (
    HAMI_DEVICE_LIST_STRATEGY,
    dedicated_etcd_issuer,
    driver_repositories_configmap,
    gpu_driver_values,
    gpu_operator_cdi,
    gpu_operator_values,
    kamaji_etcd_values,
)
from components.stack import parse_platform
from components.tenant_values import (
    calico_values,
    device_modes,
    device_split_count,
    extender_args,
    hami_values,
    kube_scheduler_image,
    webhook_excluded_namespaces,
)
from tests.support.contracts import missing_values_keys
from tests.support.harness import load_stack_config

LAB_SETTINGS = HamiSettings(webhook_failure_policy="Fail", node_lock_timeout="30s")


def _lab_values() -> dict[str, Any]:
    return hami_values(
        kubernetes_version="v1.35.0",
        hami=LAB_SETTINGS,
        modes={"mock"},
        excluded_namespaces=webhook_excluded_namespaces(LabSubstrate().tenant_system_namespaces),
        split_count=10,
    )


def _prod_values() -> dict[str, Any]:
    return hami_values(
        kubernetes_version="v1.34.2",
        hami=HamiSettings(
            webhook_failure_policy="Fail",
            node_lock_timeout="5m",
            gpu_scheduler_policy="binpack",
            node_scheduler_policy="spread",
        ),
        modes={"nvidia"},
        excluded_namespaces=webhook_excluded_namespaces(ProdSubstrate().tenant_system_namespaces),
    )


# ------------------------------------------------------------------------- version pairing


def test_kube_scheduler_runs_the_tenant_version_from_the_upstream_registry() -> None:
    assert kube_scheduler_image("v1.35.0") == {
        "registry": "registry.k8s.io",
        "repository": "kube-scheduler",
        "tag": "v1.35.0",
    }
    assert _prod_values()["scheduler"]["kubeScheduler"]["image"]["tag"] == "v1.34.2"


@pytest.mark.parametrize("bad", ["1.35.0", "v1.35", "latest", ""])
def test_kube_scheduler_rejects_what_is_not_a_version(bad: str) -> None:
    with pytest.raises(ValueError, match="not a Kubernetes version"):
        kube_scheduler_image(bad)


# ----------------------------------------------------------------------- webhook exclusions


def test_webhook_skips_system_cni_and_hami_namespaces() -> None:
    lab = webhook_excluded_namespaces(LabSubstrate().tenant_system_namespaces)
    for namespace in (
        "kube-system",
        "kube-public",
        "kube-node-lease",
        "tigera-operator",
        "calico-system",
        "calico-apiserver",
        "hami-system",
    ):
        assert namespace in lab
    assert "gpu-operator" not in lab
    assert "default" not in lab
    prod = webhook_excluded_namespaces(ProdSubstrate().tenant_system_namespaces)
    assert set(prod) == {*lab, "gpu-operator"}


def test_webhook_failure_policy_and_whitelist_reach_the_chart() -> None:
    webhook = _lab_values()["scheduler"]["admissionWebhook"]
    assert webhook["failurePolicy"] == "Fail"
    assert webhook["whitelistNamespaces"] == webhook_excluded_namespaces(
        LabSubstrate().tenant_system_namespaces
    )
    ignore = hami_values(
        kubernetes_version="v1.35.0",
        hami=HamiSettings(webhook_failure_policy="Ignore"),
        modes={"mock"},
        excluded_namespaces=["kube-system"],
    )
    assert ignore["scheduler"]["admissionWebhook"]["failurePolicy"] == "Ignore"


def test_scheduler_policies_come_from_config() -> None:
    policy = _prod_values()["scheduler"]["defaultSchedulerPolicy"]
    assert policy == {"nodeSchedulerPolicy": "spread", "gpuSchedulerPolicy": "binpack"}


# ------------------------------------------------------------------------ node-lock timeout


def test_extender_keeps_the_chart_defaults_and_adds_the_lock_timeout(upstream_dir: Path) -> None:
    chart = yaml.safe_load((upstream_dir / "hami" / "values.yaml").read_text())
    defaults = chart["scheduler"]["extender"]["extraArgs"]
    args = extender_args("30s")
    assert args[: len(defaults)] == defaults
    assert args[len(defaults) :] == ["--node-lock-timeout=30s"]
    assert _lab_values()["scheduler"]["extender"]["extraArgs"][-1] == "--node-lock-timeout=30s"


def test_one_node_lock_expiry_and_no_node_port() -> None:
    """The flag is the expiry HAMi 2.10 uses (main.go:114 overwrites what the env set), so the
    chart's HAMI_NODELOCK_EXPIRE env is blanked; the webhook needs only a ClusterIP Service."""
    for values in (_lab_values(), _prod_values()):
        assert values["scheduler"]["nodeLockExpire"] == ""
        assert values["scheduler"]["service"] == {"type": "ClusterIP"}


@pytest.mark.parametrize("good", ["30s", "5m", "1m30s", "500ms", "1.5h"])
def test_lock_timeout_accepts_go_durations(good: str) -> None:
    assert extender_args(good)[-1] == f"--node-lock-timeout={good}"


@pytest.mark.parametrize("bad", ["30", "30 seconds", "5min", "-1s", ""])
def test_lock_timeout_rejects_what_go_cannot_parse(bad: str) -> None:
    with pytest.raises(ValueError, match="nodeLockTimeout"):
        extender_args(bad)


def test_lab_lock_timeout_is_far_below_hamis_five_minute_default() -> None:
    platform = parse_platform(load_stack_config("lab")["gpu-platform:platform"])
    assert platform.hami.node_lock_timeout in extender_args(platform.hami.node_lock_timeout)[-1]
    assert platform.hami.node_lock_timeout.endswith("s")
    assert int(platform.hami.node_lock_timeout[:-1]) < 300


# ------------------------------------------------------------------- mock vs real devices


def test_lab_charts_run_neither_the_real_nor_the_charts_mock_device_plugin() -> None:
    """The chart's mock mounts the scheduler's device config, which mock 1.0.1 cannot decode;
    the lab runs the mock itself (components.lab.mock_device_plugin)."""
    values = _lab_values()
    assert values["devicePlugin"]["enabled"] is False
    assert "runtimeClassName" not in values["devicePlugin"]
    assert values.get("mockDevicePlugin", {}).get("enabled", False) is False
    assert values["devicePlugin"]["deviceSplitCount"] == 10


def test_prod_runs_the_real_device_plugin_under_the_gpu_operator_runtime() -> None:
    values = _prod_values()
    assert values["devicePlugin"]["enabled"] is True
    assert values["devicePlugin"]["runtimeClassName"] == "nvidia"
    assert values["devicePlugin"]["gpuOperatorToolkitReady"] == {"enabled": True}
    assert "mockDevicePlugin" not in values
    assert "deviceSplitCount" not in values["devicePlugin"]
    # The runtime class HAMi uses is the one the GPU Operator creates.
    assert gpu_operator_values()["operator"]["runtimeClass"] == "nvidia"


def test_device_modes_follow_the_pools_and_the_stack_mode() -> None:
    lab = parse_platform(load_stack_config("lab")["gpu-platform:platform"])
    prod = parse_platform(load_stack_config("prod")["gpu-platform:platform"])
    assert device_modes(lab.tenants[0], LabSubstrate().default_device_mode()) == {"mock"}
    assert device_modes(prod.tenants[0], ProdSubstrate().default_device_mode()) == {"nvidia"}
    poolless = lab.tenants[0].model_copy(update={"worker_pools": []})
    assert device_modes(poolless, "mock") == {"mock"}
    mixed = lab.tenants[0].worker_pools[0].model_copy(update={"device_mode": "nvidia"})
    both = lab.tenants[0].model_copy(update={"worker_pools": [*lab.tenants[0].worker_pools, mixed]})
    assert device_modes(both, "mock") == {"mock", "nvidia"}


def test_hami_rejects_unknown_device_modes() -> None:
    with pytest.raises(ValueError, match="device modes"):
        hami_values(
            kubernetes_version="v1.35.0",
            hami=LAB_SETTINGS,
            modes={"fake"},
            excluded_namespaces=[],
        )
    with pytest.raises(ValueError, match="device modes"):
        hami_values(
            kubernetes_version="v1.35.0", hami=LAB_SETTINGS, modes=set(), excluded_namespaces=[]
        )


def test_split_count_only_when_the_pools_agree() -> None:
    assert device_split_count([10, 10]) == 10
    assert device_split_count([4]) == 4
    assert device_split_count([4, 10]) is None
    assert device_split_count([]) is None


# ----------------------------------------------------------------------------- GPU Operator


def test_gpu_operator_brings_driver_and_toolkit_but_not_its_device_plugin() -> None:
    values = gpu_operator_values()
    assert values["driver"] == {"enabled": True}
    # The nvidia runtime is not made the default: only pods that name it get GPUs.
    assert values["toolkit"] == {
        "enabled": True,
        "env": [{"name": "NVIDIA_RUNTIME_SET_AS_DEFAULT", "value": "false"}],
    }
    assert values["devicePlugin"] == {"enabled": False}


def test_hami_hides_the_gpus_from_containers_that_ask_for_none_where_gpus_are_real() -> None:
    common = {
        "kubernetes_version": "v1.35.0",
        "hami": HamiSettings(),
        "excluded_namespaces": ["kube-system"],
    }
    assert hami_values(modes={"nvidia"}, **common)["scheduler"]["overwriteEnv"] == "true"
    assert "overwriteEnv" not in hami_values(modes={"mock"}, **common)["scheduler"]


# ----------------------------------------------------------------------------------- Calico


def test_calico_pool_is_the_tenant_pod_cidr() -> None:
    values = calico_values("10.10.0.0/16")
    pools = values["installation"]["calicoNetwork"]["ipPools"]
    assert [pool["cidr"] for pool in pools] == ["10.10.0.0/16"]
    assert "kubernetesServiceEndpoint" not in values
    assert values["apiServer"] == {"enabled": False}


def test_calico_talks_to_a_known_api_address_directly() -> None:
    values = calico_values("10.10.0.0/16", "172.18.255.200")
    assert values["kubernetesServiceEndpoint"] == {"host": "172.18.255.200", "port": "6443"}


# ------------------------------------------------------------------------------ kamaji-etcd


def test_kamaji_etcd_serves_one_tenant_under_its_name() -> None:
    values = kamaji_etcd_values("team-a", DedicatedDataStore(replicas=5, storage_size="16Gi"))
    assert values == {
        "fullnameOverride": "team-a-etcd",
        "replicas": 5,
        # Requests, so that no member is a BestEffort pod (ETCD_RESOURCES).
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "clusterDomain": "cluster.local",
        "persistentVolumeClaim": {"size": "16Gi"},
        # Half of what 16 GiB leaves after 1 GiB (not the chart's 8 GiB whatever the volume).
        "quotaBackendBytes": str(15 * 2**30 // 2),
        # The images the backups run, not kubectl of whatever minor the cluster runs.
        "jobs": {
            "kubectl": {"image": "clastix/kubectl", "tag": "v1.35"},
            "etcd": {"image": "quay.io/coreos/etcd", "tag": "v3.5.6"},
        },
        "datastore": {"enabled": True, "name": "team-a-etcd"},
        # cert-manager renews its certificates (the chart's own jobs would make one-year ones).
        "selfSignedCertificates": {"enabled": False},
        "certManager": {
            "enabled": True,
            "issuerRef": {
                "name": "team-a-etcd-issuer",
                "kind": "Issuer",
                "group": "cert-manager.io",
            },
        },
        # Its members on different nodes (components.availability).
        "topologySpreadConstraints": topology_spread(etcd_selector("team-a-etcd")),
    }


@pytest.mark.parametrize(
    ("volume", "quota_gib"),
    [("2Gi", 0.5), ("8Gi", 3.5), ("16Gi", 7.5), ("32Gi", 8.0), ("1Ti", 8.0)],
)
def test_a_dedicated_etcds_space_quota_leaves_room_on_its_volume(
    volume: str, quota_gib: float
) -> None:
    """Issue 39: the chart's quota is 8 GiB whatever the volume, so an 8 GiB volume filled up
    before etcd raised its NOSPACE alarm. The quota leaves 1 GiB for the WAL and snapshots and
    room for the copy a defragmentation writes, and stays within etcd's suggested 8 GiB."""
    quota = etcd_quota_backend_bytes(volume)
    assert quota == quota_gib * 2**30
    assert 2 * quota + 2**30 <= storage_bytes(volume) or quota == 8 * 2**30


def test_a_kamaji_etcd_volume_under_2gi_is_refused() -> None:
    with pytest.raises(ValueError, match="storageSize 1Gi leaves a kamaji-etcd less than 512 MiB"):
        DedicatedDataStore(storage_size="1Gi")
    DedicatedDataStore(storage_size="1Gi", endpoints=["db:2379"], credentials_config_key="c")


def test_the_dedicated_etcds_issuer_is_self_signed_in_the_tenants_namespace() -> None:
    issuer = dedicated_etcd_issuer("team-a", "team-a-home", {"gpu-platform.io/tenant": "team-a"})
    assert issuer == {
        "apiVersion": "cert-manager.io/v1",
        "kind": "Issuer",
        "metadata": {
            "name": "team-a-etcd-issuer",
            "namespace": "team-a-home",
            "labels": {"gpu-platform.io/tenant": "team-a"},
        },
        "spec": {"selfSigned": {}},
    }
    values = kamaji_etcd_values("team-a", DedicatedDataStore())
    assert values["certManager"]["issuerRef"]["name"] == issuer["metadata"]["name"]


def test_kamaji_etcd_follows_the_management_clusters_domain_and_storage_class() -> None:
    """Its member and DataStore endpoint names end in the cluster domain (a hard-coded
    cluster.local breaks on any other); an unset StorageClass needs a default one."""
    values = kamaji_etcd_values(
        "team-a",
        DedicatedDataStore(storage_class_name="fast-local"),
        cluster_domain="mgmt.example",
    )
    assert values["clusterDomain"] == "mgmt.example"
    assert values["persistentVolumeClaim"] == {"size": "8Gi", "storageClassName": "fast-local"}


def test_kamaji_etcd_values_with_every_setting_exist_in_the_pinned_chart(
    upstream_dir: Path,
) -> None:
    values = kamaji_etcd_values(
        "team-a", DedicatedDataStore(storage_class_name="fast"), cluster_domain="mgmt.example"
    )
    assert missing_values_keys(upstream_dir, "kamaji-etcd", values) == []


def test_kamaji_etcd_is_not_for_external_datastores() -> None:
    external = DedicatedDataStore(
        driver="etcd", endpoints=["etcd.example:2379"], credentials_config_key="creds"
    )
    with pytest.raises(ValueError, match="kamaji-etcd"):
        kamaji_etcd_values("team-a", external)


# ---------------------------------------------------------------------------- timeouts


def test_timeouts_leave_room_for_workers_to_join() -> None:
    # Longer than Helm's 5-minute default, and longer in prod (bare metal) than in the lab.
    assert 300 < lab_tenant.RELEASE_TIMEOUT_SECONDS < prod_tenant.RELEASE_TIMEOUT_SECONDS
    assert LabSubstrate().release_timeout_seconds == lab_tenant.RELEASE_TIMEOUT_SECONDS
    assert ProdSubstrate().release_timeout_seconds == prod_tenant.RELEASE_TIMEOUT_SECONDS
    assert lab_tenant.CONTROL_PLANE_TIMEOUT.endswith("m")
    assert prod_tenant.CONTROL_PLANE_TIMEOUT.endswith("m")


# ------------------------------------------------------- contract: keys exist in the charts


def test_hami_values_keys_exist_in_the_pinned_chart(upstream_dir: Path) -> None:
    assert missing_values_keys(upstream_dir, "hami", _lab_values()) == []
    assert missing_values_keys(upstream_dir, "hami", _prod_values()) == []


def test_gpu_operator_values_keys_exist_in_the_pinned_chart(upstream_dir: Path) -> None:
    assert missing_values_keys(upstream_dir, "gpu-operator", gpu_operator_values()) == []


def test_kamaji_etcd_values_keys_exist_in_the_pinned_chart(upstream_dir: Path) -> None:
    values = kamaji_etcd_values("team-a", DedicatedDataStore())
    assert missing_values_keys(upstream_dir, "kamaji-etcd", values) == []


def test_calico_values_keys_exist_except_the_commented_installation_network(
    upstream_dir: Path,
) -> None:
    """``installation.calicoNetwork`` is documented only as a comment in the chart's values and
    passed through as the Installation spec; every other key must exist."""
    values = calico_values("10.10.0.0/16", "172.18.255.200")
    missing = missing_values_keys(upstream_dir, "tigera-operator", values)
    assert {key.split(".ipPools")[0] for key in missing} <= {"installation.calicoNetwork"}
    text = (upstream_dir / "tigera-operator" / "values.yaml").read_text()
    assert "#   ipPools:" in text
    assert '#     - cidr: "192.168.0.0/16"' in text
    assert '#       encapsulation: "IPIP" # IPIP, VXLAN' in text


def test_gpu_operator_turns_cdi_off_for_hamis_envvar_device_list() -> None:
    """GPU Operator v26.7.0 defaults to CDI, which cannot resolve HAMi's envvar device list."""
    assert gpu_operator_values()["cdi"] == {"enabled": False}
    assert gpu_operator_cdi("envvar") == {"enabled": False}
    with pytest.raises(ValueError, match="cdi-cri"):
        gpu_operator_cdi("cdi-cri")


def test_prod_hami_keeps_the_envvar_device_list_the_cdi_pairing_assumes() -> None:
    assert HAMI_DEVICE_LIST_STRATEGY == "envvar"
    assert "deviceListStrategy" not in _prod_values()["devicePlugin"]


# ------------------------------------------------------------------------------ GPU driver

DRIVER_VARIANTS = {
    "runtime-built": GpuDriver(
        version="595.91.07",
        package_repositories={"mirror.list": "deb http://mirror.internal/ubuntu noble main"},
        auto_upgrade=False,
    ),
    "precompiled": GpuDriver(source="precompiled", version="595"),
    "preinstalled": GpuDriver(source="preinstalled"),
}


def test_by_default_the_operator_builds_the_driver_as_its_chart_does() -> None:
    assert gpu_operator_values()["driver"] == {"enabled": True}
    assert gpu_operator_values(GpuDriver())["driver"] == {"enabled": True}
    assert driver_repositories_configmap(GpuDriver()) is None


def test_a_runtime_built_driver_can_install_kernel_headers_from_a_mirror() -> None:
    driver = DRIVER_VARIANTS["runtime-built"]
    assert gpu_driver_values(driver) == {
        "enabled": True,
        "version": "595.91.07",
        "repoConfig": {"configMapName": "gpu-driver-repositories"},
        "upgradePolicy": {"autoUpgrade": False},
    }
    assert driver_repositories_configmap(driver) == {
        "metadata": {"name": "gpu-driver-repositories", "namespace": "gpu-operator"},
        "data": {"mirror.list": "deb http://mirror.internal/ubuntu noble main"},
    }


def test_precompiled_and_preinstalled_drivers() -> None:
    assert gpu_driver_values(DRIVER_VARIANTS["precompiled"]) == {
        "enabled": True,
        "usePrecompiled": True,
        "version": "595",
    }
    assert gpu_driver_values(DRIVER_VARIANTS["preinstalled"]) == {"enabled": False}


@pytest.mark.parametrize("source", sorted(DRIVER_VARIANTS))
def test_gpu_driver_values_keys_exist_in_the_pinned_chart(source: str, upstream_dir: Path) -> None:
    values = gpu_operator_values(DRIVER_VARIANTS[source])
    assert missing_values_keys(upstream_dir, "gpu-operator", values) == []
