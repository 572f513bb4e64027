"""GpuTenant under mocks, lab and prod: every tenant's resources exist, each in-tenant resource
uses its own tenant's provider, tenants never depend on each other, kubeconfigs stay secret and
unknown in preview, and the ordering that keeps the control plane and HAMi healthy."""

from __future__ import annotations

import copy
import ipaddress
import json
from collections.abc import Callable
from typing import Any

import pytest
import yaml

from components import chart_cache
from components.backups.deploy import TENANT_PARTS as BACKUP_TENANT_PARTS
from components.versions import PINNED
from tests.support.harness import (
    UNKNOWN,
    Recording,
    Registration,
    Secret,
    evaluate,
    load_stack_config,
)
from tests.support.kube_proxy_model import sysctl_writes

TENANT = "gpu-platform:index:GpuTenant"
POOL = "gpu-platform:index:GpuWorkerPool"
PROVIDER = "pulumi:providers:kubernetes"
RELEASE = "kubernetes:helm.sh/v3:Release"
TCP = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
KCP = "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane"
CLUSTER = "kubernetes:cluster.x-k8s.io/v1beta2:Cluster"
METAL3_CLUSTER = "kubernetes:infrastructure.cluster.x-k8s.io/v1beta2:Metal3Cluster"
DATASTORE = "kubernetes:kamaji.clastix.io/v1alpha1:DataStore"
SECRET = "kubernetes:core/v1:Secret"
CREDENTIALS_KEY = "gpu-platform:speechDatastoreCredentials"
SPEECH_CREDENTIALS = {
    "ca.crt": "-----BEGIN CERTIFICATE-----",
    "username": "kamaji",
    "password": "pw",
}

# Resources a tenant creates in the management cluster (named "<tenant>-<suffix>").
MANAGEMENT_SIDE = (
    "namespace",
    "default-deny-ingress",
    "allow-same-namespace",
    "allow-kamaji-system",
    "allow-control-plane-ports",
    "control-plane",
    # The reads of the control plane's (and prod Cluster's) live uid for the tenant provider.
    "control-plane-identity",
    "cluster-identity",
    "admin-kubeconfig",
    "capi-kubeconfig",
    "cluster",
    "infrastructure-cluster",
    "etcd-issuer",
    "etcd",
    # The dedicated etcd's nightly defragmentation, beside it (issue 39).
    "etcd-defrag",
    "datastore",
    "datastore-credentials",
    # The disruption budgets of a replicated control plane and a dedicated etcd (issue 44).
    "control-plane-budget",
    "etcd-budget",
    # The tenant's metrics agent runs in its management namespace (docs/metrics.md).
    "metrics-agent-token",
    "metrics-agent-config",
    "metrics-agent",
    # Its usage publisher too (docs/metrics.md, "Your own usage, as a tenant").
    "metrics-usage-publisher-scripts",
    "metrics-usage-publisher",
    # Its backups run in its management namespace next to its control plane (docs/backups.md).
    *BACKUP_TENANT_PARTS,
)


def _prod_config(**tenant0_control_plane: Any) -> dict[str, Any]:
    """The prod stack file with the external DataStore's credentials set as the operator would
    (a JSON object) and optional changes to the first tenant's controlPlane."""
    config = copy.deepcopy(load_stack_config("prod"))
    config[CREDENTIALS_KEY] = Secret(json.dumps(SPEECH_CREDENTIALS))
    if tenant0_control_plane:
        tenant = config["gpu-platform:platform"]["tenants"][0]
        tenant.setdefault("controlPlane", {}).update(tenant0_control_plane)
    return config


@pytest.fixture(scope="module")
def evaluated() -> Callable[[str, bool], Recording]:
    cache: dict[tuple[str, bool], Recording] = {}

    def get(stack: str, preview: bool) -> Recording:
        if (stack, preview) not in cache:
            config = _prod_config() if stack == "prod" else None
            recording = evaluate(stack, preview, config=config)
            assert recording.error is None, recording.error
            cache[(stack, preview)] = recording
        return cache[(stack, preview)]

    return get


Evaluated = Callable[[str, bool], Recording]

CASES = [(stack, preview) for stack in ("lab", "prod") for preview in (False, True)]
IDS = [f"{stack}-{'preview' if preview else 'update'}" for stack, preview in CASES]


@pytest.fixture(params=CASES, ids=IDS)
def recording(request: pytest.FixtureRequest, evaluated: Evaluated) -> Recording:
    return evaluated(*request.param)


@pytest.fixture(params=["lab", "prod"])
def updated(request: pytest.FixtureRequest, evaluated: Evaluated) -> Recording:
    return evaluated(request.param, False)


# ------------------------------------------------------------------------------- helpers


def _tenants(rec: Recording) -> dict[str, Registration]:
    return {r.name: r for r in rec.of_type(TENANT)}


def _under(rec: Recording, component: Registration) -> list[Registration]:
    return [r for r in rec.resources if any(a.urn == component.urn for a in rec.ancestors(r))]


def _own(rec: Recording, tenant: Registration) -> list[Registration]:
    """Resources the GpuTenant itself creates (not its worker pools')."""
    return [r for r in _under(rec, tenant) if rec.component_of(r, ":GpuWorkerPool") is None]


def _named(rec: Recording, name: str) -> Registration:
    return rec.named(name)


def _provider(rec: Recording, name: str) -> Registration:
    [provider] = [r for r in rec.of_type(PROVIDER) if r.name == name]
    return provider


def _release(rec: Recording, tenant: str, release: str) -> Registration:
    return _named(rec, f"{tenant}-{release}")


def _registered_after(rec: Recording, later: Registration, earlier: Registration) -> bool:
    """The harness records no dependencies for reads; a read whose ID waits for a resource's ID
    reaches the engine only after that resource was registered."""
    return rec.resources.index(later) > rec.resources.index(earlier)


def _is_unknown(value: Any) -> bool:
    return value == UNKNOWN or "Unknown object" in str(value)


def _config_tenants(stack: str) -> list[dict[str, Any]]:
    tenants: list[dict[str, Any]] = load_stack_config(stack)["gpu-platform:platform"]["tenants"]
    return tenants


# ------------------------------------------------------------------------- every tenant


def test_every_tenant_gets_its_namespace_policies_control_plane_and_stack(
    recording: Recording,
) -> None:
    for tenant in _config_tenants(recording.stack):
        name = tenant["name"]
        namespace = _named(recording, f"{name}-namespace")
        if (tenant.get("managementNamespace") or {}).get("existing"):
            assert namespace.read  # adopted: read, never created
            assert namespace.outputs["metadata"]["name"] == name
        else:
            assert not namespace.read
            assert namespace.inputs["metadata"]["name"] == name
        for policy in ("default-deny-ingress", "allow-same-namespace", "allow-kamaji-system"):
            assert _named(recording, f"{name}-{policy}").inputs["metadata"]["namespace"] == name
        control_plane = _named(recording, f"{name}-control-plane")
        assert control_plane.type == (TCP if recording.stack == "lab" else KCP)
        assert _provider(recording, f"{name}-provider")
        charts = {"calico": "tigera-operator", "hami": "hami"}
        if recording.stack == "prod":
            charts["gpu-operator"] = "gpu-operator"
            assert _named(recording, f"{name}-cluster").type == CLUSTER
            assert _named(recording, f"{name}-infrastructure-cluster").type == METAL3_CLUSTER
        for release, chart in charts.items():
            inputs = _release(recording, name, release).inputs
            assert chart_cache.release_chart_name(inputs["chart"]) == chart
            assert "repositoryOpts" not in inputs  # the verified archive in .charts/
        quotas = {q["namespace"] for q in tenant.get("gpuQuotas", [])}
        found = {
            r.inputs["metadata"]["namespace"]
            for r in recording.of_type("kubernetes:core/v1:ResourceQuota")
            if r.name.startswith(f"{name}-quota-")
        }
        assert found == quotas


def test_in_tenant_resources_use_their_own_tenants_provider(recording: Recording) -> None:
    management = _provider(recording, "management-provider").urn
    for name, tenant in _tenants(recording).items():
        own_provider = _provider(recording, f"{name}-provider").urn
        management_side = {f"{name}-{suffix}" for suffix in MANAGEMENT_SIDE}
        for reg in _own(recording, tenant):
            if not reg.type.startswith("kubernetes:"):
                continue
            expected = management if reg.name in management_side else own_provider
            assert reg.provider_urn == expected, f"{reg.type} {reg.name}"


def test_no_resource_uses_another_tenants_provider(recording: Recording) -> None:
    providers = {_provider(recording, f"{name}-provider").urn: name for name in _tenants(recording)}
    for reg in recording.resources:
        owner = providers.get(reg.provider_urn)
        if owner is None:
            continue
        component = recording.component_of(reg, ":GpuTenant")
        assert component is not None, f"{reg.type} {reg.name}"
        assert component.name == owner, f"{reg.type} {reg.name}"


def test_tenants_never_depend_on_each_other(recording: Recording) -> None:
    tenants = _tenants(recording)
    members = {
        name: {tenant.urn, *(r.urn for r in _under(recording, tenant))}
        for name, tenant in tenants.items()
    }
    for name, tenant in tenants.items():
        others = set().union(*(urns for other, urns in members.items() if other != name))
        for reg in [tenant, *_under(recording, tenant)]:
            crossing = recording.dependency_closure(reg) & others
            assert not crossing, f"{reg.name} waits for {sorted(crossing)}"


# ------------------------------------------------------------------ kubeconfig, provider


def test_kubeconfig_is_read_after_the_control_plane_and_kept_secret(updated: Recording) -> None:
    for name in _tenants(updated):
        read = _named(updated, f"{name}-admin-kubeconfig")
        assert read.read
        assert read.type == SECRET
        assert read.provider_urn == _provider(updated, "management-provider").urn
        assert _registered_after(updated, read, _named(updated, f"{name}-control-plane"))
        if updated.stack == "prod":
            assert _registered_after(updated, read, _named(updated, f"{name}-cluster"))
        # Kamaji's Secret of the TenantControlPlane (in prod: the one the KamajiControlPlane
        # creates under its own name), in the tenant's namespace.
        assert read.outputs["metadata"]["name"] == f"{name}-admin-kubeconfig"
        assert read.outputs["metadata"]["namespace"] == name
        provider = _provider(updated, f"{name}-provider")
        assert read.urn in provider.dependencies
        assert provider.input_is_secret("kubeconfig")
        # Kamaji writes the control plane's endpoint as the server (lab: the address MetalLB
        # assigned, from the fakes; prod's fake kubeconfig names the tenant).
        # (A prod KamajiControlPlane's status carries its version only.)
        status = _named(updated, f"{name}-control-plane").outputs.get("status") or {}
        server = (
            f"https://{status['controlPlaneEndpoint']}"
            if "controlPlaneEndpoint" in status
            else f"https://{name}.tenant.invalid:6443"
        )
        assert server in provider.inputs["kubeconfig"]
        # The tenant name and the uid of the object(s) whose recreation empties the tenant.
        roots = ["control-plane"] if updated.stack == "lab" else ["control-plane", "cluster"]
        uids = [_named(updated, f"{name}-{root}").outputs["metadata"]["uid"] for root in roots]
        assert provider.inputs["clusterIdentifier"] == "/".join([name, *uids])
    assert "tenantKubeconfigs" in updated.secret_outputs


def test_preview_leaves_the_kubeconfig_unknown(evaluated: Evaluated) -> None:
    for stack in ("lab", "prod"):
        preview = evaluated(stack, True)
        for name in _tenants(preview):
            provider = _provider(preview, f"{name}-provider")
            assert _is_unknown(provider.inputs["kubeconfig"]), provider.inputs["kubeconfig"]
            assert provider.input_is_secret("kubeconfig")
            # ... and everything inside the tenant is still declared against it.
            hami = _release(preview, name, "hami")
            assert hami.provider_urn == provider.urn


# -------------------------------------------------------------------- control plane (lab)


def test_lab_control_plane_waits_for_kamaji_and_is_awaited(evaluated: Evaluated) -> None:
    lab = evaluated("lab", False)
    [kamaji] = [r for r in lab.of_type(RELEASE) if r.inputs.get("name") == "kamaji"]
    for name in _tenants(lab):
        tcp = _named(lab, f"{name}-control-plane")
        assert kamaji.urn in lab.dependency_closure(tcp)
        assert _named(lab, f"{name}-allow-control-plane-ports").urn in tcp.dependencies
        annotations = tcp.inputs["metadata"]["annotations"]
        assert annotations["pulumi.com/waitFor"] == (
            "jsonpath={.status.kubernetesResources.version.status}=Ready"
        )
        assert tcp.options["custom_timeouts"]["create"]


def _assigned_address(tcp: Any) -> str:
    """The address Kamaji reported for a TenantControlPlane (under the mocks, the fake MetalLB's
    assignment, tests/support/fakes_tenant.py)."""
    return str(tcp.outputs["status"]["controlPlaneEndpoint"]).rsplit(":", 1)[0]


def test_lab_control_plane_address_is_metallbs_read_back(evaluated: Evaluated) -> None:
    lab = evaluated("lab", False)
    addresses = set()
    for name in _tenants(lab):
        tcp = _named(lab, f"{name}-control-plane")
        spec = tcp.inputs["spec"]
        # The program pins nothing: the Service names the lab pool and MetalLB assigns.
        assert "address" not in spec["networkProfile"]
        annotations = spec["controlPlane"]["service"]["additionalMetadata"]["annotations"]
        assert annotations == {"metallb.io/address-pool": "gpu-platform-lab"}
        address = _assigned_address(tcp)
        assert lab.outputs["tenants"][name]["endpoint"] == f"https://{address}:6443"
        calico = _release(lab, name, "calico").inputs["values"]
        assert calico["kubernetesServiceEndpoint"]["host"] == address
        addresses.add(address)
    assert len(addresses) == len(_tenants(lab))


def test_lab_policies_keep_the_management_pod_network_out(evaluated: Evaluated) -> None:
    lab = evaluated("lab", False)
    pod_subnet = load_stack_config("lab")["gpu-platform:platform"]["management"]["kind"].get(
        "podSubnet", "10.244.0.0/16"
    )
    for name in _tenants(lab):
        spec = _named(lab, f"{name}-allow-control-plane-ports").inputs["spec"]
        assert spec["ingress"][0]["from"] == [
            {"ipBlock": {"cidr": "0.0.0.0/0", "except": [pod_subnet]}}
        ]


def test_prod_policies_let_cluster_api_controllers_reach_the_tenant_api(
    evaluated: Evaluated,
) -> None:
    # The management cluster's pod network is unknown in prod; Cluster API's controllers reach
    # the tenant API from pods, which an ipBlock alone does not admit on every CNI.
    prod = evaluated("prod", False)
    for name in _tenants(prod):
        spec = _named(prod, f"{name}-allow-control-plane-ports").inputs["spec"]
        assert {"namespaceSelector": {}} in spec["ingress"][0]["from"]


# ------------------------------------------------------------------ inside a tenant


def test_hami_comes_after_calico_and_workloads_after_hami(updated: Recording) -> None:
    for name in _tenants(updated):
        calico = _release(updated, name, "calico")
        hami = _release(updated, name, "hami")
        assert calico.urn in hami.dependencies
        if updated.stack == "prod":
            gpu_operator = _release(updated, name, "gpu-operator")
            assert gpu_operator.urn in hami.dependencies
            assert calico.urn in gpu_operator.dependencies
        for reg in updated.of_type("kubernetes:apps/v1:Deployment"):
            if reg.name.startswith(f"{name}-workload-"):
                assert hami.urn in reg.dependencies


def test_calico_crds_are_installed_before_the_operator(updated: Recording) -> None:
    """tigera-operator v3.32 renders an Installation but ships no CRD for it: the CRD chart of
    the same Calico release comes first, in every tenant of both stacks."""
    for name in _tenants(updated):
        crds = _release(updated, name, "calico-crds")
        operator = _release(updated, name, "calico")
        assert crds.inputs["chart"] == chart_cache.chart_input(PINNED.calico_crds)
        assert operator.inputs["chart"] == chart_cache.chart_input(PINNED.tigera_operator)
        assert crds.inputs["version"] == operator.inputs["version"]
        assert crds.inputs.get("values") in (None, {})
        assert crds.urn in operator.dependencies
        assert crds.provider == operator.provider


def test_lab_kube_proxy_never_sets_a_conntrack_sysctl(evaluated: Evaluated) -> None:
    """In the lab each tenant runs its own kube-proxy (Kamaji's writes nf_conntrack_max, which is
    read-only inside a kindest/node container): no conntrack sysctl on any host, its API server
    the control plane's LoadBalancer address, and HAMi (whose hook Job needs ClusterIPs) after it.
    Prod keeps Kamaji's addon."""
    lab = evaluated("lab", False)
    for name in _tenants(lab):
        tcp = _named(lab, f"{name}-control-plane")
        assert "kubeProxy" not in tcp.inputs["spec"]["addons"]
        config = _named(lab, f"{name}-kube-proxy-config")
        assert config.inputs["metadata"]["namespace"] == "kube-system"
        assert config.inputs["metadata"]["name"] == "kube-proxy"
        conf = yaml.safe_load(config.inputs["data"]["config.conf"])
        for cpus in (1, 4, 8, 16, 128):
            assert sysctl_writes(conf["conntrack"], cpus) == [], (name, cpus)
        kubeconfig = yaml.safe_load(config.inputs["data"]["kubeconfig.conf"])
        server = kubeconfig["clusters"][0]["cluster"]["server"]
        address = _assigned_address(tcp)
        assert server == f"https://{address}:6443"
        service_cidr = ipaddress.ip_network(tcp.inputs["spec"]["networkProfile"]["serviceCidrs"][0])
        assert ipaddress.ip_address(address) not in service_cidr
        daemon_set = _named(lab, f"{name}-kube-proxy")
        assert daemon_set.type == "kubernetes:apps/v1:DaemonSet"
        assert daemon_set.inputs["spec"]["template"]["metadata"]["labels"]["k8s-app"] == (
            "kube-proxy"
        )
        assert config.urn in daemon_set.dependencies
        assert daemon_set.urn in _release(lab, name, "hami").dependencies
    prod = evaluated("prod", False)
    for kcp in (r for r in prod.of_type(KCP) if not r.read):
        assert kcp.inputs["spec"]["addons"]["kubeProxy"] == {}
    assert not [r for r in prod.resources if r.name.endswith("-kube-proxy")]


def test_tenant_stack_values(updated: Recording) -> None:
    platform = load_stack_config(updated.stack)["gpu-platform:platform"]
    for tenant in platform["tenants"]:
        name = tenant["name"]
        calico = _release(updated, name, "calico").inputs["values"]
        pools = calico["installation"]["calicoNetwork"]["ipPools"]
        assert [p["cidr"] for p in pools] == [tenant["network"]["podCidr"]]
        hami = _release(updated, name, "hami").inputs["values"]
        # The tenant's own version (Pulumi.lab.yaml ships tenant-a one minor behind), else the
        # platform's.
        version = tenant.get("kubernetesVersion", platform["kubernetesVersion"])
        assert hami["scheduler"]["kubeScheduler"]["image"]["tag"] == version
        webhook = hami["scheduler"]["admissionWebhook"]
        assert webhook["failurePolicy"] == platform["hami"]["webhookFailurePolicy"]
        assert {"kube-system", "tigera-operator", "calico-system", "hami-system"} <= set(
            webhook["whitelistNamespaces"]
        )
        lock = f"--node-lock-timeout={platform['hami']['nodeLockTimeout']}"
        assert lock in hami["scheduler"]["extender"]["extraArgs"]
        if updated.stack == "lab":
            assert hami.get("mockDevicePlugin", {}).get("enabled", False) is False
            assert hami["devicePlugin"]["enabled"] is False
        else:
            assert "mockDevicePlugin" not in hami
            assert hami["devicePlugin"]["runtimeClassName"] == "nvidia"
            assert "gpu-operator" in webhook["whitelistNamespaces"]
            operator = _release(updated, name, "gpu-operator").inputs["values"]
            assert operator["devicePlugin"] == {"enabled": False}


def test_declared_workloads_ask_hami_for_their_share(evaluated: Evaluated) -> None:
    lab = evaluated("lab", False)
    declared = [
        (tenant["name"], workload)
        for tenant in _config_tenants("lab")
        for workload in tenant.get("workloads", [])
    ]
    assert declared, "the lab stack declares a sample workload"
    for tenant, workload in declared:
        deployment = _named(
            lab, f"{tenant}-workload-{workload.get('namespace', 'default')}-{workload['name']}"
        )
        [container] = deployment.inputs["spec"]["template"]["spec"]["containers"]
        gpu = workload["gpu"]
        assert container["resources"]["limits"] == {
            "nvidia.com/gpu": str(gpu.get("cards", 1)),
            "nvidia.com/gpumem": str(gpu["memoryMiB"]),
            "nvidia.com/gpucores": str(gpu["cores"]),
        }
        labels = deployment.inputs["spec"]["template"]["metadata"]["labels"]
        assert labels["gpu-platform.io/tenant"] == tenant


# -------------------------------------------------------------------- control plane (prod)


def test_prod_cluster_is_not_held_back_by_its_control_plane(evaluated: Evaluated) -> None:
    """The KamajiControlPlane becomes ready only once the Cluster owns it: the Cluster must not
    wait for it (that would deadlock), the kubeconfig read must."""
    prod = evaluated("prod", False)
    for name in _tenants(prod):
        kcp = _named(prod, f"{name}-control-plane")
        cluster = _named(prod, f"{name}-cluster")
        assert kcp.urn not in prod.dependency_closure(cluster)
        assert kcp.inputs["metadata"]["annotations"]["pulumi.com/waitFor"] == (
            '["jsonpath={.status.ready}=true", "condition=TenantControlPlaneCreated"]'
        )
        read = _named(prod, f"{name}-admin-kubeconfig")
        assert _registered_after(prod, read, kcp)
        assert _registered_after(prod, read, cluster)
        ref = cluster.inputs["spec"]["infrastructureRef"]
        infra = _named(prod, f"{name}-infrastructure-cluster")
        assert (ref["kind"], ref["name"]) == (
            infra.inputs["kind"],
            infra.inputs["metadata"]["name"],
        )
        assert cluster.inputs["spec"]["controlPlaneRef"]["name"] == kcp.inputs["metadata"]["name"]


def test_prod_control_planes_wait_for_their_dedicated_datastores(evaluated: Evaluated) -> None:
    prod = evaluated("prod", False)
    for name in ("team-vision", "team-llm"):
        kcp = _named(prod, f"{name}-control-plane")
        etcd = _named(prod, f"{name}-etcd")
        assert etcd.inputs["chart"] == chart_cache.chart_input(PINNED.kamaji_etcd)
        assert etcd.inputs["namespace"] == name
        assert etcd.inputs["values"]["datastore"] == {"enabled": True, "name": f"{name}-etcd"}
        assert etcd.urn in kcp.dependencies
        assert kcp.inputs["spec"]["dataStoreName"] == f"{name}-etcd"
    speech = _named(prod, "team-speech-control-plane")
    datastore = _named(prod, "team-speech-datastore")
    assert datastore.type == DATASTORE
    assert datastore.urn in speech.dependencies
    assert speech.inputs["spec"]["dataStoreName"] == datastore.inputs["metadata"]["name"]


def test_prod_external_datastore_credentials_stay_secret(evaluated: Evaluated) -> None:
    prod = evaluated("prod", False)
    secret = _named(prod, "team-speech-datastore-credentials")
    assert secret.input_is_secret("stringData")
    assert secret.inputs["stringData"] == SPEECH_CREDENTIALS
    refs = json.dumps(_named(prod, "team-speech-datastore").inputs["spec"])
    assert secret.inputs["metadata"]["name"] in refs
    assert "pw" not in refs
    assert not any("pw" in line.split() for line in prod.logs)


def test_prod_rejects_credentials_that_are_not_a_json_object() -> None:
    config = _prod_config()
    config[CREDENTIALS_KEY] = Secret("s3cr3t-not-json")
    recording = evaluate("prod", False, config=config)
    assert recording.error is not None
    assert "speechDatastoreCredentials" in recording.error
    assert "expected a JSON object" in recording.error
    assert "s3cr3t-not-json" not in recording.error
    assert recording.run_error, "a bad config value is a RunError: one message, no traceback"
    assert recording.resources == [], "refused before anything is registered"


def test_prod_metal3_endpoint_follows_the_configured_address() -> None:
    recording = evaluate("prod", False, config=_prod_config(address="10.0.0.40"))
    assert recording.error is None, recording.error
    infra = _named(recording, "team-vision-infrastructure-cluster")
    assert infra.inputs["spec"]["controlPlaneEndpoint"] == {"host": "10.0.0.40", "port": 6443}
    kcp = _named(recording, "team-vision-control-plane")
    assert kcp.inputs["spec"]["network"]["serviceAddress"] == "10.0.0.40"
    assert recording.outputs["tenants"]["team-vision"]["endpoint"] == "https://10.0.0.40:6443"


def test_tenant_provider_uses_super_admin_and_people_get_admin(updated: Recording) -> None:
    """Kamaji reports Ready before admin.conf's group is bound to cluster-admin inside the
    tenant (clastix/kamaji#1167), in the lab and behind the Cluster API provider alike; the
    program's own provider uses super-admin.conf (system:masters) so its first calls cannot be
    refused, while the exported kubeconfig stays the ordinary admin one."""
    from tests.support.fakes_tenant import placeholder_kubeconfig

    tenants = [t["name"] for t in _config_tenants(updated.stack)]
    assert tenants
    for tenant in tenants:
        provider = updated.named(f"{tenant}-provider")
        assert provider.input_is_secret("kubeconfig")
        # Lab: the fake Kamaji writes the address the fake MetalLB assigned as the server.
        status = updated.named(f"{tenant}-control-plane").outputs.get("status") or {}
        endpoint = status.get("controlPlaneEndpoint")
        server = f"https://{endpoint}" if endpoint else None
        assert provider.inputs["kubeconfig"] == placeholder_kubeconfig(
            tenant, "super-admin", server
        )
        assert updated.outputs["tenantKubeconfigs"][tenant] == placeholder_kubeconfig(
            tenant, server=server
        )


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_objects_inside_a_tenant_go_with_its_control_plane(
    stack: str, recordings: Callable[..., Recording]
) -> None:
    """On destroy nothing inside a tenant is uninstalled one by one (Calico's and HAMi's
    finalizers would wait for nodes that are leaving): it all goes with the TenantControlPlane
    (lab) or the Cluster (prod), whose deletion removes the tenant's data."""
    recording = recordings(stack, False)
    root_suffix = "-control-plane" if stack == "lab" else "-cluster"
    checked = 0
    for tenant in recording.of_type("gpu-platform:index:GpuTenant"):
        root = recording.named(f"{tenant.name}{root_suffix}")
        for reg in recording.resources:
            provider = recording.provider_of(reg)
            if provider is not None and provider.name == f"{tenant.name}-provider":
                assert reg.options["deleted_with"] == root.urn, reg.name
                checked += 1
    assert checked > 0


def test_the_labs_mock_device_plugin_comes_entirely_after_hami(evaluated: Evaluated) -> None:
    """A lab deployed before this layout ran the HAMi chart's own mock under the same names;
    Helm removes those on HAMi's upgrade, so every object of ours must wait for that release
    (pulumi-kubernetes creates without upsert: an earlier create collides)."""
    lab = evaluated("lab", False)
    for name in _tenants(lab):
        hami = _release(lab, name, "hami")
        for part in ("account", "role", "binding", "config"):
            reg = _named(lab, f"{name}-mock-device-plugin-{part}")
            assert hami.urn in lab.dependency_closure(reg), (name, part)
