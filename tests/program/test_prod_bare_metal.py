"""The prod stack as bare metal will run it: what the recorded Cluster API, Metal3, GPU Operator
and HAMi objects do once they exist (not only whether they validate). Each test names the
upstream behaviour it guards; the review ``../shared/reviews/prod-cluster-api-and-gpus.md``
traces them at the pinned tags."""

from __future__ import annotations

import json
import re

from tests.support.harness import Recording, Secret

KUBEADM_CONFIG_TEMPLATE = "kubernetes:bootstrap.cluster.x-k8s.io/v1beta2:KubeadmConfigTemplate"

# Metadata the bare-metal operator always writes to a host's config drive; anything else
# (``providerid`` included) needs a Metal3DataTemplate, which the program does not create.
BMO_DEFAULT_METADATA = {"uuid", "metal3-namespace", "metal3-name", "local-hostname", "name"}


# --------------------------------------------------------------------------- provider IDs


def test_no_kubelet_argument_reads_metadata_a_host_does_not_have(prod: Recording) -> None:
    """A missing key renders as CI_MISSING_JINJA_VAR/<key>; a --provider-id built from one makes
    CAPM3 refuse the node and its Machine keeps the uninitialized taint forever."""
    templates = prod.of_type(KUBEADM_CONFIG_TEMPLATE)
    assert templates
    for template in templates:
        text = json.dumps(template.inputs["spec"])
        used = set(re.findall(r"ds\.meta_data\.([A-Za-z0-9_-]+)", text))
        assert used <= BMO_DEFAULT_METADATA, (template.name, used - BMO_DEFAULT_METADATA)
        args = template.inputs["spec"]["template"]["spec"]["joinConfiguration"]["nodeRegistration"][
            "kubeletExtraArgs"
        ]
        assert "provider-id" not in {a["name"] for a in args}, template.name


# ------------------------------------------------------------- Kamaji control-plane provider

CONTROL_PLANE_PROVIDER = "kubernetes:operator.cluster.x-k8s.io/v1alpha2:ControlPlaneProvider"


def _mebibytes(quantity: str) -> float:
    factors = {"Ki": 1 / 1024, "Mi": 1, "Gi": 1024}
    for suffix, factor in factors.items():
        if quantity.endswith(suffix):
            return float(quantity[: -len(suffix)]) * factor
    return float(quantity) / 2**20


def test_the_kamaji_capi_provider_has_memory_beyond_its_128mi_default(prod: Recording) -> None:
    """v0.20.0 limits its container (named ``controller``) to 128Mi while it caches every Secret
    of the management cluster; the operator applies an override only to a container of that
    name."""
    (provider,) = prod.of_type(CONTROL_PLANE_PROVIDER)
    containers = provider.inputs["spec"]["deployment"]["containers"]
    (controller,) = [c for c in containers if c["name"] == "controller"]
    assert _mebibytes(controller["resources"]["limits"]["memory"]) > 128


# ---------------------------------------------------------------------- Cluster API gate


def test_the_capi_gate_proves_the_capi_and_capm3_webhooks_answer(prod: Recording) -> None:
    gate = prod.named("management-capi-ready")
    probe = json.loads(gate.inputs["environment"]["DRY_RUN_MANIFEST"])
    kinds = {(item["apiVersion"].split("/")[0], item["kind"]) for item in probe["items"]}
    assert ("cluster.x-k8s.io", "Cluster") in kinds
    assert ("infrastructure.cluster.x-k8s.io", "Metal3Cluster") in kinds
    # Tenants' Cluster API objects wait for this gate.
    for cluster in prod.of_type("kubernetes:cluster.x-k8s.io/v1beta2:Cluster"):
        assert gate.urn in prod.dependency_closure(cluster), cluster.name


# ------------------------------------------------------------------------------ rollouts

MACHINE_DEPLOYMENT = "kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment"


def test_metal3_pools_do_not_surge_onto_hosts_that_do_not_exist(prod: Recording) -> None:
    """Without a strategy Cluster API surges one machine (maxSurge 1, maxUnavailable 0); with
    exactly ``replicas`` GPU hosts it waits forever for a free BareMetalHost."""
    deployments = prod.of_type(MACHINE_DEPLOYMENT)
    assert deployments
    for deployment in deployments:
        update = deployment.inputs["spec"]["rollout"]["strategy"]["rollingUpdate"]
        assert update["maxSurge"] in (0, "0%"), deployment.name
        assert update["maxUnavailable"] not in (0, "0%"), deployment.name


# ------------------------------------------------------------------------------ teardown

KAMAJI_CONTROL_PLANE = "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane"
CLUSTER = "kubernetes:cluster.x-k8s.io/v1beta2:Cluster"


def _seconds(duration: str) -> int:
    match = re.fullmatch(r"(?:(\d+)h)?(?:(\d+)m)?(?:(\d+)s)?", duration)
    assert duration, duration
    assert match is not None, duration
    hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return hours * 3600 + minutes * 60 + seconds


def test_bare_metal_objects_wait_at_least_30_minutes_on_delete(prod: Recording) -> None:
    """pulumi-kubernetes waits 10 minutes for a delete by default; a MachineDeployment (and the
    Cluster and control plane above it) is gone only once Metal3 has deprovisioned its hosts."""
    for type_ in (MACHINE_DEPLOYMENT, CLUSTER, KAMAJI_CONTROL_PLANE):
        registered = [r for r in prod.of_type(type_) if not r.read]  # reads delete nothing
        assert registered, type_
        for reg in registered:
            delete = reg.options["custom_timeouts"]["delete"]
            assert _seconds(delete) >= 30 * 60, (reg.name, delete)


def test_the_control_plane_outlives_the_pools_on_destroy(prod: Recording) -> None:
    """Destroy deletes in reverse dependency order: a MachineDeployment that waits for its
    tenant's control plane is deleted (its machines drained while the API answers) first."""
    for deployment in prod.of_type(MACHINE_DEPLOYMENT):
        tenant = prod.component_of(deployment, ":GpuTenant")
        assert tenant is not None
        kcp = prod.named(f"{tenant.name}-control-plane")
        cluster = prod.named(f"{tenant.name}-cluster")
        closure = prod.dependency_closure(deployment)
        assert kcp.urn in closure, deployment.name
        assert cluster.urn in closure, deployment.name


def test_the_control_plane_goes_before_the_cluster_and_the_datastore(prod: Recording) -> None:
    """The KamajiControlPlane depends on the Cluster, so destroy deletes it first, in the
    foreground, while its TenantControlPlane can still reach the datastore for its cleanup;
    deleted together, Cluster API's own background delete of it can let Pulumi move on to the
    etcd release with the TenantControlPlane stuck on its finalizer. The Cluster waits for
    nothing of the control plane (it only refers to it), so creation has no cycle."""
    for kcp in (r for r in prod.of_type(KAMAJI_CONTROL_PLANE) if not r.read):
        tenant = prod.component_of(kcp, ":GpuTenant")
        assert tenant is not None
        cluster = prod.named(f"{tenant.name}-cluster")
        assert cluster.urn in kcp.dependencies, kcp.name
        assert kcp.urn not in prod.dependency_closure(cluster), cluster.name
        assert not (cluster.inputs["metadata"].get("annotations") or {}).get("pulumi.com/waitFor")
        for reg in prod.resources:
            if prod.component_of(reg, ":GpuTenant") == tenant and reg.name.endswith("-etcd"):
                assert reg.urn in prod.dependency_closure(kcp), reg.name


def test_a_nodes_drain_is_bounded_so_destroy_and_rollouts_end(prod: Recording) -> None:
    """Pools go while the control plane runs, so Cluster API drains their nodes for real; with
    its default (no limit) the drain of a one-node pool never ends, because tigera-operator
    tolerates the cordon and comes back; the wait for its volumes to detach is unbounded too. Both
    bounds together must end before Pulumi stops waiting."""
    for deployment in prod.of_type(MACHINE_DEPLOYMENT):
        deletion = deployment.inputs["spec"]["template"]["spec"].get("deletion") or {}
        drain = deletion.get("nodeDrainTimeoutSeconds")
        assert drain, deployment.name
        # Issue 39: then the wait for its volumes to detach, unbounded too by default.
        detach = deletion.get("nodeVolumeDetachTimeoutSeconds")
        assert detach, deployment.name
        delete = _seconds(deployment.options["custom_timeouts"]["delete"])
        assert drain + detach < delete, deployment.name


# ------------------------------------------------------------ where the BareMetalHosts live

NAMESPACE = "kubernetes:core/v1:Namespace"
NETWORK_POLICY = "kubernetes:networking.k8s.io/v1:NetworkPolicy"
CREDENTIALS_KEY = "gpu-platform:speechDatastoreCredentials"


def _management_provider(recording: Recording) -> str:
    return recording.named("management-provider").urn


def test_the_namespace_holding_a_tenants_hosts_is_never_deleted_by_destroy(
    prod: Recording,
) -> None:
    """CAPM3 takes hosts only from the Metal3Machine's namespace; the program reads that
    namespace (a read is never deleted) and creates no Namespace of that name."""
    management = _management_provider(prod)
    for tenant in prod.of_type("gpu-platform:index:GpuTenant"):
        namespace = prod.named(f"{tenant.name}-namespace")
        assert namespace.read, tenant.name
        assert namespace.provider_urn == management
        created = [
            r
            for r in prod.of_type(NAMESPACE)
            if not r.read
            and r.provider_urn == management
            and (r.inputs.get("metadata") or {}).get("name") == tenant.name
        ]
        assert created == [], tenant.name
        # Its NetworkPolicies are still the program's: created in it after the read.
        policies = [
            r for r in prod.of_type(NETWORK_POLICY) if prod.component_of(r, ":GpuTenant") == tenant
        ]
        assert len(policies) == 4, tenant.name
        for policy in policies:
            assert not policy.read
            assert policy.inputs["metadata"]["namespace"] == tenant.name
            assert namespace.urn in policy.dependencies


def test_a_tenant_may_adopt_a_namespace_named_otherwise() -> None:
    """Hosts enrolled in, say, ``metal3-vision``: every Cluster API, Kamaji and datastore object
    of the tenant goes there, since CAPM3 and Cluster API look nowhere else."""
    import copy

    from tests.support.harness import evaluate, load_stack_config

    config = copy.deepcopy(load_stack_config("prod"))
    config[CREDENTIALS_KEY] = Secret(json.dumps({"ca.crt": "x", "username": "u", "password": "p"}))
    tenant = config["gpu-platform:platform"]["tenants"][0]
    tenant["managementNamespace"] = {"name": "metal3-vision", "existing": True}
    recording = evaluate("prod", False, config=config)
    assert recording.error is None, recording.error
    management = _management_provider(recording)
    owned = [
        r
        for r in recording.resources
        if r.provider_urn == management
        and (c := recording.component_of(r, ":GpuTenant")) is not None
        and c.name == "team-vision"
    ]
    namespaced = [r for r in owned if "namespace" in (r.inputs.get("metadata") or {})]
    assert {r.inputs["metadata"]["namespace"] for r in namespaced} == {"metal3-vision"}
    kinds = {r.inputs.get("kind") for r in namespaced}
    assert {"Cluster", "KamajiControlPlane", "Metal3Cluster", "MachineDeployment"} <= kinds
    (etcd,) = [r for r in owned if r.name == "team-vision-etcd"]
    assert etcd.inputs["namespace"] == "metal3-vision"
    read = recording.named("team-vision-admin-kubeconfig")
    assert read.outputs["metadata"]["namespace"] == "metal3-vision"
    assert recording.named("team-vision-namespace").outputs["metadata"]["name"] == "metal3-vision"
    assert recording.outputs["tenants"]["team-vision"]["namespace"] == "metal3-vision"


# --------------------------------------------------------------------------- kamaji-etcd


def test_kamaji_etcd_follows_the_configured_cluster_domain_and_storage_class() -> None:
    import copy

    from tests.support.harness import evaluate, load_stack_config

    config = copy.deepcopy(load_stack_config("prod"))
    config[CREDENTIALS_KEY] = Secret(json.dumps({"ca.crt": "x", "username": "u", "password": "p"}))
    platform = config["gpu-platform:platform"]
    platform["management"]["existing"]["clusterDomain"] = "mgmt.example"
    platform["tenants"][0]["dataStore"]["dedicated"]["storageClassName"] = "fast-local"
    recording = evaluate("prod", False, config=config)
    assert recording.error is None, recording.error
    vision = recording.named("team-vision-etcd").inputs["values"]
    llm = recording.named("team-llm-etcd").inputs["values"]
    assert vision["clusterDomain"] == llm["clusterDomain"] == "mgmt.example"
    assert vision["persistentVolumeClaim"]["storageClassName"] == "fast-local"
    assert "storageClassName" not in llm["persistentVolumeClaim"]


# ---------------------------------------------------------------------------- GPU driver

CONFIG_MAP = "kubernetes:core/v1:ConfigMap"


def _prod_with_driver(driver: dict[str, object]) -> Recording:
    import copy

    from tests.support.harness import evaluate, load_stack_config

    config = copy.deepcopy(load_stack_config("prod"))
    config[CREDENTIALS_KEY] = Secret(json.dumps({"ca.crt": "x", "username": "u", "password": "p"}))
    config["gpu-platform:platform"]["gpuDriver"] = driver
    recording = evaluate("prod", False, config=config)
    assert recording.error is None, recording.error
    return recording


def test_a_driver_mirror_reaches_every_tenants_gpu_operator_before_it_installs() -> None:
    mirror = {"mirror.list": "deb http://mirror.internal/ubuntu noble main"}
    recording = _prod_with_driver({"packageRepositories": mirror})
    for tenant in recording.of_type("gpu-platform:index:GpuTenant"):
        repositories = recording.named(f"{tenant.name}-gpu-driver-repositories")
        assert repositories.type == CONFIG_MAP
        assert repositories.inputs["data"] == mirror
        assert repositories.inputs["metadata"]["namespace"] == "gpu-operator"
        assert recording.provider_of(repositories) == recording.named(f"{tenant.name}-provider")
        operator = recording.named(f"{tenant.name}-gpu-operator")
        assert repositories.urn in operator.dependencies
        driver = operator.inputs["values"]["driver"]
        assert driver["repoConfig"] == {"configMapName": repositories.inputs["metadata"]["name"]}


def test_an_image_with_a_baked_in_driver_turns_the_operators_driver_off() -> None:
    recording = _prod_with_driver({"source": "preinstalled"})
    for tenant in recording.of_type("gpu-platform:index:GpuTenant"):
        values = recording.named(f"{tenant.name}-gpu-operator").inputs["values"]
        assert values["driver"] == {"enabled": False}
        # The operator's toolkit still comes, with nvidia kept off the default runtime.
        assert values["toolkit"]["enabled"] is True
    assert not [r for r in recording.of_type(CONFIG_MAP) if "driver-repositories" in r.name]


# ---------------------------------------------------------------------------- card catalog


def test_the_policy_pack_sees_what_nvml_registers_for_prod_cards(prod: Recording) -> None:
    """The pack judges capacity from each pool's declared-inventory ConfigMap: for the prod
    pools it must carry NVML's totals (H100 80GB HBM3: 81,559 MiB; L40S: 46,068 MiB)."""
    from components.labels import INVENTORY_KEY

    declared = {}
    for configmap in prod.of_type(CONFIG_MAP):
        if configmap.name.endswith("-declared-inventory"):
            payload = json.loads(configmap.inputs["data"][INVENTORY_KEY])
            declared[payload["pool"]] = {c["model"]: c["memoryMiB"] for c in payload["cards"]}
    assert declared["h100"] == {"H100-80GB": 81_559}
    assert declared["l40s"] == {"L40S-48GB": 46_068}
    assert declared["a100"] == {"A100-80GB": 81_920}


def test_a_pod_hami_would_refuse_on_an_h100_is_blocked_at_preview() -> None:
    """81,700 MiB fits the marketing 80 GiB but not the 81,559 MiB an H100 80GB HBM3 registers:
    refused before anything is registered (larger than every card of the tenant), naming the
    figure HAMi would see; the pack's CardInsufficientMemory answer for a pod it records is
    checked in tests/policies/test_policy_capacity.py."""
    import copy

    from tests.support.harness import evaluate, load_stack_config

    config = copy.deepcopy(load_stack_config("prod"))
    config[CREDENTIALS_KEY] = Secret(json.dumps({"ca.crt": "x", "username": "u", "password": "p"}))
    llm = config["gpu-platform:platform"]["tenants"][1]
    llm["workloads"] = [
        {"name": "big", "namespace": "default", "gpu": {"memoryMiB": 81_700, "cores": 50}}
    ]
    recording = evaluate("prod", True, config=config)
    assert recording.resources == []
    assert "tenants[1].workloads[0].gpu.memoryMiB: 81700 MiB per card is more than this " in str(
        recording.error
    )
    assert "(81559 MiB, H100-80GB)" in str(recording.error)
