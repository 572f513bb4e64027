"""Spec builders of a tenant: control planes, Cluster API objects, DataStores, NetworkPolicies,
quotas and workloads — their fields, and their validity against the pinned CRDs."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest

from components.config import (
    ControlPlane,
    DedicatedDataStore,
    GpuQuota,
    GpuRequest,
    Tenant,
    Workload,
)
from components.prod.cluster_specs import capi_cluster, infrastructure_cluster, kamaji_control_plane
from components.stack import parse_platform
from components.tenant_specs import (
    data_store_name,
    datastore_secret_data,
    datastore_shape,
    datastore_shape_problem,
    decode_kubeconfig,
    deployed_datastore_shape,
    external_datastore,
    gpu_limits,
    kubeconfig_address,
    kubeconfig_server,
    namespaces_to_create,
    network_policies,
    resource_quota,
    tenant_control_plane,
    workload_deployment,
)
from tests.support.contracts import crd_violations
from tests.support.harness import load_stack_config

LAB = parse_platform(load_stack_config("lab")["gpu-platform:platform"])
PROD = parse_platform(load_stack_config("prod")["gpu-platform:platform"])
TENANT_A = LAB.tenants[0]


def _tenant(**changes: Any) -> Tenant:
    return TENANT_A.model_copy(update=changes)


def _tcp(tenant: Tenant = TENANT_A, address: str | None = "172.18.255.200") -> dict[str, Any]:
    return tenant_control_plane(
        tenant, namespace=tenant.name, kubernetes_version="v1.35.0", address=address
    )


def _kcp(tenant: Tenant, address: str | None = "10.0.0.40") -> dict[str, Any]:
    return kamaji_control_plane(
        tenant, namespace=tenant.name, kubernetes_version="v1.35.0", address=address
    )


# ---------------------------------------------------------------------- TenantControlPlane


@pytest.mark.parametrize("address", ["172.18.255.200", None])
def test_tenant_control_plane_validates_against_the_pinned_crd(
    upstream_dir: Path, address: str | None
) -> None:
    assert crd_violations(upstream_dir, _tcp(address=address)) == []


def test_tenant_control_plane_binds_its_datastore_explicitly() -> None:
    spec = _tcp()["spec"]
    assert spec["dataStore"] == "default"
    assert spec["dataStoreSchema"] == "tenant_a"
    assert spec["dataStoreUsername"] == "tenant_a"
    other = tenant_control_plane(
        LAB.tenants[1], namespace="tenant-b", kubernetes_version="v1.35.0", address=None
    )["spec"]
    assert other["dataStore"] == spec["dataStore"]  # the lab shares DataStore "default" ...
    assert other["dataStoreSchema"] != spec["dataStoreSchema"]  # ... but not schema or user
    assert other["dataStoreUsername"] != spec["dataStoreUsername"]


def test_tenant_control_plane_pins_its_load_balancer_address() -> None:
    tcp = _tcp()
    service = tcp["spec"]["controlPlane"]["service"]
    assert service["serviceType"] == "LoadBalancer"
    assert service["additionalMetadata"]["annotations"] == {
        "metallb.io/loadBalancerIPs": "172.18.255.200"
    }
    assert tcp["spec"]["networkProfile"]["address"] == "172.18.255.200"
    unpinned = _tcp(address=None)["spec"]
    assert "address" not in unpinned["networkProfile"]
    assert "additionalMetadata" not in unpinned["controlPlane"]["service"]


def test_an_unpinned_control_plane_names_the_pool_metallb_assigns_from() -> None:
    def tcp(address: str | None) -> dict[str, Any]:
        return tenant_control_plane(
            TENANT_A,
            namespace="tenant-a",
            kubernetes_version="v1.35.0",
            address=address,
            address_pool="gpu-platform-lab",
        )

    unpinned = tcp(None)["spec"]
    assert "address" not in unpinned["networkProfile"]
    assert unpinned["controlPlane"]["service"]["additionalMetadata"]["annotations"] == {
        "metallb.io/address-pool": "gpu-platform-lab"
    }
    # A pin wins: the Service asks for that one address, not for the pool.
    pinned = tcp("172.18.255.254")["spec"]
    assert pinned["networkProfile"]["address"] == "172.18.255.254"
    assert pinned["controlPlane"]["service"]["additionalMetadata"]["annotations"] == {
        "metallb.io/loadBalancerIPs": "172.18.255.254"
    }


def test_tenant_control_plane_network_and_kubelet() -> None:
    spec = _tcp()["spec"]
    assert spec["networkProfile"]["podCidrs"] == ["10.10.0.0/16"]
    assert spec["networkProfile"]["serviceCidrs"] == ["10.11.0.0/16"]
    assert spec["networkProfile"]["port"] == 6443
    assert spec["kubernetes"]["version"] == "v1.35.0"
    assert spec["kubernetes"]["kubelet"]["configurationJSONPatches"] == [
        {"op": "add", "path": "/cgroupDriver", "value": "systemd"},
        # kindest/node workers share the host's swap and disk, as kind's own nodes do.
        {"op": "add", "path": "/failSwapOn", "value": False},
        {
            "op": "add",
            "path": "/evictionHard",
            "value": {
                "nodefs.available": "0%",
                "nodefs.inodesFree": "0%",
                "imagefs.available": "0%",
            },
        },
        {"op": "add", "path": "/imageGCHighThresholdPercent", "value": 100},
    ]
    assert "cgroupfs" not in spec["kubernetes"]["kubelet"]


def _apply_member_patch(document: dict[str, Any], patch: dict[str, Any]) -> None:
    """RFC 6902 add/replace of a top-level member: ``replace`` needs the member to exist."""
    key = patch["path"].removeprefix("/")
    assert "/" not in key, "only top-level members are modelled"
    if patch["op"] == "replace" and key not in document:
        raise KeyError(f"replace operation does not apply: doc is missing key: /{key}")
    assert patch["op"] in ("add", "replace")
    document[key] = patch["value"]


@pytest.mark.parametrize("build", ["tcp", "kcp"])
def test_kubelet_patches_apply_to_the_configuration_kamaji_generates(build: str) -> None:
    # Kamaji 26.8.2-edge generates the KubeletConfiguration with cgroupDriver taken from the
    # deprecated kubelet.cgroupfs, which the program leaves unset: the key is then omitted
    # (omitempty), and the patches must still leave the kubelet on the systemd driver.
    generated: dict[str, Any] = {
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "clusterDomain": "cluster.local",
        "rotateCertificates": True,
    }
    kubelet = (
        _tcp()["spec"]["kubernetes"]["kubelet"]
        if build == "tcp"
        else _kcp(PROD.tenants[0])["spec"]["kubelet"]
    )
    assert "cgroupfs" not in kubelet
    for patch in kubelet["configurationJSONPatches"]:
        _apply_member_patch(generated, patch)
    assert generated["cgroupDriver"] == "systemd"
    if build == "tcp":
        assert generated["failSwapOn"] is False
        assert generated["evictionHard"]["imagefs.available"] == "0%"


def test_tenant_control_plane_addons_include_konnectivity() -> None:
    addons = _tcp()["spec"]["addons"]
    assert addons["konnectivity"] == {"server": {"port": 8132}, "agent": {"mode": "DaemonSet"}}
    assert addons["coreDNS"] == {}


def test_lab_control_planes_leave_kube_proxy_to_the_lab_and_prod_keeps_kamajis() -> None:
    """Kamaji's kube-proxy writes nf_conntrack_max, read-only in a kindest/node container; the
    lab runs its own (components.lab.kube_proxy). Real machines keep Kamaji's addon."""
    assert "kubeProxy" not in _tcp()["spec"]["addons"]
    assert _kcp(PROD.tenants[0])["spec"]["addons"]["kubeProxy"] == {}


def test_admission_controllers_stay_kamajis_default_unless_configured(upstream_dir: Path) -> None:
    assert "admissionControllers" not in _tcp()["spec"]["kubernetes"]
    plugins = ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook", "ResourceQuota"]
    custom = _tenant(control_plane=ControlPlane(admission_controllers=plugins))
    tcp = _tcp(custom)
    assert tcp["spec"]["kubernetes"]["admissionControllers"] == plugins
    assert crd_violations(upstream_dir, tcp) == []


def test_control_plane_replicas_and_resources_come_from_config() -> None:
    control_plane = ControlPlane.model_validate(
        {
            "replicas": 3,
            "resources": {
                "apiServer": {"requests": {"cpu": "1"}, "limits": {"memory": "2Gi"}},
                "scheduler": {"requests": {"cpu": "100m"}},
            },
        }
    )
    deployment = _tcp(_tenant(control_plane=control_plane))["spec"]["controlPlane"]["deployment"]
    assert deployment["replicas"] == 3
    assert deployment["resources"]["apiServer"] == {
        "requests": {"cpu": "1"},
        "limits": {"memory": "2Gi"},
    }
    assert deployment["resources"]["scheduler"] == {"requests": {"cpu": "100m"}}
    assert deployment["resources"]["controllerManager"] == {
        "requests": {"cpu": "125m", "memory": "256Mi"}
    }


def test_tenant_control_plane_is_awaited_until_ready() -> None:
    annotations = _tcp()["metadata"]["annotations"]
    assert annotations["pulumi.com/waitFor"] == (
        "jsonpath={.status.kubernetesResources.version.status}=Ready"
    )
    assert set(annotations) == {"pulumi.com/waitFor", "gpu-platform.io/datastore-shape"}


def test_the_datastore_shape_names_every_key_fixed_at_creation() -> None:
    """What the next preview compares (issue 39): read back from the live object, equal for an
    unchanged tenant, one line naming the first changed key otherwise."""
    tenant = PROD.tenants[0]
    shape = deployed_datastore_shape(_kcp(tenant)["metadata"])
    assert shape == {
        "dataStore.schema": "team_vision",
        "dataStore.username": "team_vision",
        "dataStore.dedicated.driver": "etcd",
        "dataStore.dedicated.endpoints": "none (a kamaji-etcd release)",
        "dataStore.dedicated.replicas": "3",
        "dataStore.dedicated.storageSize": "16Gi",
        "dataStore.dedicated.storageClassName": "(the cluster's default)",
    }
    assert datastore_shape_problem(0, shape, datastore_shape(tenant)) is None
    external = datastore_shape(PROD.tenants[2])
    assert external["dataStore.dedicated.endpoints"] == "external"
    assert "dataStore.dedicated.replicas" not in external
    problem = datastore_shape_problem(0, shape, external)
    assert problem is not None
    assert problem.startswith("tenants[0].dataStore.dedicated.driver: etcd -> PostgreSQL ")
    assert deployed_datastore_shape({"annotations": {}}) is None
    assert deployed_datastore_shape(None) is None


# -------------------------------------------------------------------- Cluster API (prod)


def test_kamaji_control_plane_validates_and_binds_its_datastore(upstream_dir: Path) -> None:
    for tenant in PROD.tenants:
        kcp = _kcp(tenant)
        assert crd_violations(upstream_dir, kcp) == [], tenant.name
        spec = kcp["spec"]
        assert spec["dataStoreName"] == data_store_name(tenant)
        assert spec["dataStoreSchema"] == tenant.data_store.schema_name
        assert spec["dataStoreUsername"] == tenant.data_store.username
        assert spec["replicas"] == tenant.control_plane.replicas
        assert spec["version"] == "v1.35.0"
        assert spec["addons"]["konnectivity"]["server"]["port"] == 8132
        assert spec["network"]["serviceType"] == "LoadBalancer"
        assert spec["network"]["serviceAddress"] == "10.0.0.40"
    assert crd_violations(upstream_dir, _kcp(PROD.tenants[0], address=None)) == []


def _awaited(wait_for: str, kcp: dict[str, Any]) -> bool:
    """pulumi-kubernetes' await of ``pulumi.com/waitFor`` on a KamajiControlPlane, for the two
    forms the program uses (pulumi/pulumi-kubernetes v4.32.0 provider/pkg/metadata/
    overrides.go:85-140: a JSON list means all of them; provider/pkg/await/condition/
    kubectl.go:30-86: a condition holds only once its own observedGeneration, else the status',
    has reached metadata.generation; jsonpath.go:46-52 checks the status' observedGeneration,
    which a KCP status does not have)."""
    try:
        expressions = json.loads(wait_for)
    except json.JSONDecodeError:
        expressions = [wait_for]
    status = kcp.get("status", {})
    for expression in expressions:
        if expression == "jsonpath={.status.ready}=true":
            if status.get("ready") is not True:
                return False
        elif expression.startswith("condition="):
            wanted = expression.removeprefix("condition=")
            found = [c for c in status.get("conditions", []) if c["type"] == wanted]
            if not found:
                return False
            generation = kcp["metadata"]["generation"]
            if found[0].get("observedGeneration", generation) < generation:
                return False
            if found[0]["status"] != "True":
                return False
        else:
            raise AssertionError(f"no model for {expression}")
    return True


def _kcp_status(generation: int, created: str, observed: int) -> dict[str, Any]:
    condition = {
        "type": "TenantControlPlaneCreated",
        "status": created,
        "observedGeneration": observed,
        "message": "admission webhook denied: changing the dataStoreSchema is not supported",
    }
    return {
        "metadata": {"generation": generation},
        "status": {"ready": True, "conditions": [condition]},
    }


def test_kamaji_control_plane_is_awaited_until_this_generation_reached_its_tcp() -> None:
    """Issue 39: ``status.ready`` stays true through an update and the KCP status has no
    observedGeneration, so awaiting it alone reported an update the provider could not write
    (Kamaji refuses e.g. a datastore schema change) as applied. The provider stamps
    TenantControlPlaneCreated with the KCP's generation (provider v0.20.0
    controllers/conditions.go:14-50): the await must wait for it."""
    wait_for = _kcp(PROD.tenants[0])["metadata"]["annotations"]["pulumi.com/waitFor"]
    created = _kcp_status(generation=1, created="True", observed=1)
    refused = _kcp_status(generation=2, created="False", observed=2)
    not_yet_seen = _kcp_status(generation=2, created="True", observed=1)
    applied = _kcp_status(generation=2, created="True", observed=2)
    assert _awaited(wait_for, created)
    assert _awaited(wait_for, applied)
    assert not _awaited(wait_for, refused)
    assert not _awaited(wait_for, not_yet_seen)
    # The JSONPath alone, as before, passed the refused update at once.
    assert _awaited("jsonpath={.status.ready}=true", refused)


def test_each_prod_tenant_has_its_own_datastore() -> None:
    names = [data_store_name(tenant) for tenant in PROD.tenants]
    assert names == ["team-vision-etcd", "team-llm-etcd", "team-speech-datastore"]


@pytest.mark.parametrize("provider", ["metal3", "docker"])
def test_cluster_references_use_v1beta2_shapes(upstream_dir: Path, provider: str) -> None:
    tenant = PROD.tenants[0]
    cluster = capi_cluster(tenant, namespace=tenant.name, infrastructure_provider=provider)
    assert crd_violations(upstream_dir, cluster) == []
    spec = cluster["spec"]
    assert spec["controlPlaneRef"] == {
        "apiGroup": "controlplane.cluster.x-k8s.io",
        "kind": "KamajiControlPlane",
        "name": tenant.name,
    }
    assert spec["infrastructureRef"]["apiGroup"] == "infrastructure.cluster.x-k8s.io"
    assert (
        spec["infrastructureRef"]["kind"]
        == {"metal3": "Metal3Cluster", "docker": "DockerCluster"}[provider]
    )
    assert spec["clusterNetwork"]["pods"]["cidrBlocks"] == [tenant.network.pod_cidr]
    assert spec["clusterNetwork"]["services"]["cidrBlocks"] == [tenant.network.service_cidr]


def test_cluster_with_an_apiversion_reference_would_be_rejected(upstream_dir: Path) -> None:
    """The check can fail: the v1beta1 reference shape is not valid in v1beta2."""
    tenant = PROD.tenants[0]
    cluster = capi_cluster(tenant, namespace=tenant.name, infrastructure_provider="metal3")
    cluster["spec"]["controlPlaneRef"] = {
        "apiVersion": "controlplane.cluster.x-k8s.io/v1alpha2",
        "kind": "KamajiControlPlane",
        "name": tenant.name,
    }
    assert crd_violations(upstream_dir, cluster) != []


@pytest.mark.parametrize("provider", ["metal3", "docker"])
@pytest.mark.parametrize("address", ["10.0.0.40", None])
def test_infrastructure_cluster_validates(
    upstream_dir: Path, provider: str, address: str | None
) -> None:
    infra = infrastructure_cluster(
        provider, name="team-a", namespace="team-a", labels={}, address=address
    )
    assert crd_violations(upstream_dir, infra) == []


def test_metal3_cluster_carries_the_control_plane_address() -> None:
    infra = infrastructure_cluster(
        "metal3", name="team-a", namespace="team-a", labels={}, address="10.0.0.40"
    )
    assert infra["kind"] == "Metal3Cluster"
    assert infra["spec"]["controlPlaneEndpoint"] == {"host": "10.0.0.40", "port": 6443}
    assert infra["spec"]["cloudProviderEnabled"] is False
    with pytest.raises(ValueError, match="infrastructure provider"):
        infrastructure_cluster("aws", name="x", namespace="x", labels={}, address=None)


# ------------------------------------------------------------------------------ DataStores


def _external(driver: str) -> DedicatedDataStore:
    return DedicatedDataStore(
        driver=driver,  # type: ignore[arg-type]
        endpoints=["db.example.internal:5432"],
        credentials_config_key="creds",
    )


@pytest.mark.parametrize("driver", ["etcd", "PostgreSQL", "MySQL", "NATS"])
def test_external_datastore_validates_against_the_pinned_crd(
    upstream_dir: Path, driver: str
) -> None:
    datastore = external_datastore(
        "team-a-datastore",
        _external(driver),
        secret_name="team-a-datastore-credentials",
        secret_namespace="team-a",
        labels={"gpu-platform.io/tenant": "team-a"},
    )
    assert crd_violations(upstream_dir, datastore) == []
    assert "namespace" not in datastore["metadata"]  # cluster-scoped


def test_external_etcd_meets_the_crd_rules_the_schema_checker_cannot_see() -> None:
    """The DataStore CRD's CEL rules: etcd needs the CA private key and a client pair; other
    drivers need tlsConfig or basicAuth."""
    etcd = external_datastore(
        "x", _external("etcd"), secret_name="s", secret_namespace="n", labels={}
    )["spec"]
    assert "secretReference" in etcd["tlsConfig"]["certificateAuthority"]["privateKey"]
    assert "secretReference" in etcd["tlsConfig"]["clientCertificate"]["certificate"]
    assert "secretReference" in etcd["tlsConfig"]["clientCertificate"]["privateKey"]
    sql = external_datastore(
        "x", _external("PostgreSQL"), secret_name="s", secret_namespace="n", labels={}
    )["spec"]
    assert sql["basicAuth"]["username"]["secretReference"]["keyPath"] == "username"
    assert sql["basicAuth"]["password"]["secretReference"]["keyPath"] == "password"
    assert sql["tlsConfig"]["certificateAuthority"]["certificate"]["secretReference"] == {
        "name": "s",
        "namespace": "n",
        "keyPath": "ca.crt",
    }


def test_datastore_credentials_come_from_a_json_object() -> None:
    raw = json.dumps({"ca.crt": "CA", "username": "admin", "password": "p4ss", "extra": "x"})
    assert datastore_secret_data("PostgreSQL", raw, "creds") == {
        "ca.crt": "CA",
        "username": "admin",
        "password": "p4ss",
    }


def test_datastore_credentials_errors_name_the_key_but_never_the_value() -> None:
    with pytest.raises(ValueError, match="config creds: expected a JSON object") as not_json:
        datastore_secret_data("PostgreSQL", "hunter2", "creds")
    assert "hunter2" not in str(not_json.value)
    partial = json.dumps({"ca.crt": "CA", "tls.crt": "CERT", "tls.key": "s3cret-key"})
    with pytest.raises(ValueError, match=r"lack ca\.key") as missing:
        datastore_secret_data("etcd", partial, "creds")
    assert "s3cret-key" not in str(missing.value)


# ------------------------------------------------------------------------- NetworkPolicies


def _by_name(policies: list[dict[str, Any]]) -> dict[str, dict[str, Any]]:
    return {p["metadata"]["name"]: p for p in policies}


def test_tenant_namespace_denies_ingress_by_default() -> None:
    policies = _by_name(network_policies("tenant-a", "tenant-a", ["10.244.0.0/16"]))
    assert set(policies) == {
        "default-deny-ingress",
        "allow-same-namespace",
        "allow-kamaji-system",
        "allow-control-plane-ports",
    }
    deny = policies["default-deny-ingress"]["spec"]
    assert deny == {"podSelector": {}, "policyTypes": ["Ingress"]}
    for policy in policies.values():
        assert policy["metadata"]["namespace"] == "tenant-a"
        assert policy["metadata"]["labels"] == {"gpu-platform.io/tenant": "tenant-a"}


def test_only_the_namespace_itself_and_kamaji_are_let_in_on_every_port() -> None:
    policies = _by_name(network_policies("tenant-a", "tenant-a", ["10.244.0.0/16"]))
    same = policies["allow-same-namespace"]["spec"]["ingress"]
    assert same == [{"from": [{"podSelector": {}}]}]
    kamaji = policies["allow-kamaji-system"]["spec"]["ingress"][0]["from"][0]
    assert kamaji == {
        "namespaceSelector": {"matchLabels": {"kubernetes.io/metadata.name": "kamaji-system"}}
    }
    for policy in policies.values():
        for rule in policy["spec"].get("ingress", []):
            for peer in rule["from"]:
                # No rule ever names another namespace than this one and kamaji-system.
                selector = peer.get("namespaceSelector")
                if selector is not None:
                    assert selector["matchLabels"] == {
                        "kubernetes.io/metadata.name": "kamaji-system"
                    }


def test_workers_reach_only_the_api_and_konnectivity_ports_from_outside_the_pod_network() -> None:
    policies = _by_name(network_policies("tenant-a", "tenant-a", ["10.244.0.0/16"]))
    spec = policies["allow-control-plane-ports"]["spec"]
    assert spec["podSelector"] == {"matchLabels": {"kamaji.clastix.io/name": "tenant-a"}}
    [rule] = spec["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "0.0.0.0/0", "except": ["10.244.0.0/16"]}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 8132}]
    # Lab: no other selector opens the two ports to pods of the management cluster.
    assert not any("namespaceSelector" in peer for peer in rule["from"])


def test_without_a_known_pod_network_the_ports_are_open_to_management_pods_too() -> None:
    # Prod: Cluster API controllers in other namespaces (bootstrap tokens, node references,
    # provider IDs) reach the tenant API from pods; an ipBlock alone does not admit pod traffic
    # on every CNI (Cilium never matches cluster endpoints by CIDR), an all-namespaces peer does.
    spec = _by_name(network_policies("t", "t"))["allow-control-plane-ports"]["spec"]
    [rule] = spec["ingress"]
    assert rule["from"] == [{"ipBlock": {"cidr": "0.0.0.0/0"}}, {"namespaceSelector": {}}]
    assert rule["ports"] == [{"protocol": "TCP", "port": 6443}, {"protocol": "TCP", "port": 8132}]
    # ... and only those ports: every other rule still admits this namespace and Kamaji only.
    for policy in network_policies("t", "t"):
        if policy["metadata"]["name"] == "allow-control-plane-ports":
            continue
        for other in policy["spec"].get("ingress", []):
            assert {"namespaceSelector": {}} not in other["from"]


# ---------------------------------------------------------------------- quotas, workloads


def test_gpu_quota_uses_the_keys_hami_and_kubernetes_enforce() -> None:
    quota = resource_quota(
        GpuQuota.model_validate(
            {"namespace": "training", "gpuMemoryMiB": 81920, "gpuCores": 100, "gpus": 10}
        ),
        "team-a",
    )
    assert quota["metadata"]["namespace"] == "training"
    assert quota["spec"]["hard"] == {
        "limits.nvidia.com/gpumem": "81920",
        "limits.nvidia.com/gpucores": "100",
        "requests.nvidia.com/gpu": "10",
    }


def test_gpu_limits_are_plain_integers() -> None:
    assert gpu_limits(GpuRequest.model_validate({"cards": 1, "memoryMiB": 20000, "cores": 30})) == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "20000",
        "nvidia.com/gpucores": "30",
    }
    assert gpu_limits(
        GpuRequest.model_validate({"cards": 2, "memoryPercentage": 50, "cores": 100})
    ) == {
        "nvidia.com/gpu": "2",
        "nvidia.com/gpumem-percentage": "50",
        "nvidia.com/gpucores": "100",
    }


def test_workload_becomes_a_labelled_deployment_asking_hami() -> None:
    workload = Workload.model_validate(
        {
            "name": "infer",
            "namespace": "serving",
            "replicas": 2,
            "gpu": {"cards": 1, "memoryMiB": 20000, "cores": 30},
        }
    )
    deployment = workload_deployment(workload, "tenant-b")
    assert deployment["metadata"]["namespace"] == "serving"
    assert deployment["metadata"]["labels"]["gpu-platform.io/tenant"] == "tenant-b"
    spec = deployment["spec"]
    assert spec["replicas"] == 2
    assert spec["selector"]["matchLabels"].items() <= spec["template"]["metadata"]["labels"].items()
    assert spec["template"]["metadata"]["labels"]["gpu-platform.io/tenant"] == "tenant-b"
    [container] = spec["template"]["spec"]["containers"]
    assert container["resources"] == {
        "limits": {
            "nvidia.com/gpu": "1",
            "nvidia.com/gpumem": "20000",
            "nvidia.com/gpucores": "30",
        }
    }
    assert container["command"] == ["sleep", "infinity"]
    assert "schedulerName" not in spec["template"]["spec"]
    assert "nodeName" not in spec["template"]["spec"]


def test_only_missing_namespaces_are_created() -> None:
    tenant = _tenant(
        gpu_quotas=[
            GpuQuota.model_validate({"namespace": ns, "gpuMemoryMiB": 1, "gpuCores": 1, "gpus": 1})
            for ns in ("default", "kube-system", "training", "hami-system")
        ],
        workloads=[
            Workload.model_validate(
                {"name": "w", "namespace": ns, "gpu": {"memoryMiB": 1, "cores": 1}}
            )
            for ns in ("training", "serving")
        ],
    )
    assert namespaces_to_create(tenant, existing=["hami-system"]) == ["serving", "training"]


# ------------------------------------------------------------------------------ kubeconfig


KUBECONFIG = """apiVersion: v1
kind: Config
clusters:
- name: other
  cluster: {server: "https://10.0.0.9:6443"}
- name: tenant-a
  cluster: {server: "https://172.18.255.200:6443"}
contexts:
- name: admin@tenant-a
  context: {cluster: tenant-a, user: admin}
current-context: admin@tenant-a
users: []
"""


def test_kubeconfig_is_decoded_from_the_secret_data() -> None:
    data = {"admin.conf": base64.b64encode(KUBECONFIG.encode()).decode()}
    assert decode_kubeconfig(data, "admin.conf", "tenant-a-admin-kubeconfig") == KUBECONFIG
    with pytest.raises(ValueError, match="no key 'value'"):
        decode_kubeconfig(data, "value", "team-a-kubeconfig")
    with pytest.raises(ValueError, match="no key"):
        decode_kubeconfig(None, "admin.conf", "tenant-a-admin-kubeconfig")
    with pytest.raises(ValueError, match="not base64"):
        decode_kubeconfig({"admin.conf": "%%%"}, "admin.conf", "tenant-a-admin-kubeconfig")


def test_kubeconfig_server_follows_the_current_context() -> None:
    assert kubeconfig_server(KUBECONFIG) == "https://172.18.255.200:6443"
    assert kubeconfig_address(KUBECONFIG) == "172.18.255.200"
    with pytest.raises(ValueError, match="no API server"):
        kubeconfig_server("apiVersion: v1\nkind: Config\nclusters: []\n")


def test_prod_kubelets_keep_their_swap_and_eviction_defaults() -> None:
    """Only the lab's container workers share the host's swap and disk; real GPU servers keep
    the kubelet's failSwapOn and eviction thresholds."""
    patches = _kcp(PROD.tenants[0])["spec"]["kubelet"]["configurationJSONPatches"]
    assert patches == [{"op": "add", "path": "/cgroupDriver", "value": "systemd"}]
