"""ManagementCluster under mocks: what the lab and prod stacks register, how it is ordered, what
is secret, and the public interface (``tenant_address``, ``tenant_address_pool``, ``lb_pool``,
``ready``).

The lab's fakes (tests/support/fakes_management.py) print a kubeconfig for the kind cluster and a
``docker network inspect`` whose IPv6 subnet comes first; the IPv4 subnet is 172.18.0.0/16, so the
top 16 addresses below the broadcast are 172.18.255.239-172.18.255.254 (written out by hand).
"""

from __future__ import annotations

import copy
import hashlib
import json
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import yaml

from components import chart_cache
from components.lab.management_values import METALLB_POOL_NAME
from components.management_values import default_etcd_datastore, default_etcd_values
from components.versions import PINNED
from tests.support.fakes_management import FAKE_KUBECONFIG
from tests.support.harness import (
    MOCK_KUBECONFIG,
    REPO_ROOT,
    UNKNOWN,
    Recording,
    Registration,
    evaluate,
    load_stack_config,
)

MANAGEMENT = "gpu-platform:index:ManagementCluster"
COMMAND = "command:local:Command"
RELEASE = "kubernetes:helm.sh/v3:Release"
SCRIPTS = REPO_ROOT / "scripts" / "management"
LAB_POOL = [f"172.18.255.{last}" for last in range(239, 255)]


def _script(name: str) -> str:
    return (SCRIPTS / name).read_text()


def _inside(recording: Recording) -> list[Registration]:
    """Everything the ManagementCluster registered (its descendants)."""
    return [r for r in recording.resources if recording.component_of(r, ":ManagementCluster")]


def _kubernetes(recording: Recording) -> list[Registration]:
    return [r for r in _inside(recording) if r.type.startswith("kubernetes:")]


def _releases(recording: Recording) -> dict[str, Registration]:
    return {r.inputs["name"]: r for r in _inside(recording) if r.type == RELEASE}


def _is_unknown(value: Any) -> bool:
    """An unknown value as the harness records it (``pulumi.output.Unknown`` objects in
    deserialized inputs currently arrive as their repr)."""
    return value == UNKNOWN or (
        isinstance(value, str) and value.startswith("<pulumi.output.Unknown")
    )


def _waits_for(recording: Recording, reg: Registration, other: str) -> bool:
    return recording.named(other).urn in recording.dependency_closure(reg)


# ------------------------------------------------------------------ the component alone

# The ManagementCluster evaluated on its own, in a child process (the Pulumi runtime keeps global
# state), under the same mocks and fakes as the whole program: its registrations, its tenant
# addresses and its pool. Tests of this component do not depend on the other components.

_PROBE = r"""
import json, os, sys
request = json.load(sys.stdin)
if request.get("project_dir"):
    os.environ.pop("GPU_PLATFORM_SKIP_CHART_CHECK", None)
else:
    os.environ["GPU_PLATFORM_SKIP_CHART_CHECK"] = "1"
if request["skip_preflight"]:
    os.environ["GPU_PLATFORM_SKIP_PREFLIGHT"] = "1"
else:
    os.environ.pop("GPU_PLATFORM_SKIP_PREFLIGHT", None)
import pulumi
from pulumi.runtime.config import set_all_config
from pulumi.runtime.stack import run_pulumi_func
from pulumi.runtime.sync_await import _sync_await
from components.lab import preflight
from tests.support import harness
from tests.support.harness_runner import FakeMocks, RecordingMonitor

if request["failing_host"]:
    preflight.gather_facts = lambda timeout=20.0, kind_cluster="gpu-lab": preflight.HostFacts(
        system="Darwin", docker_reachable=False, cpus=2, free_memory_bytes=0,
        free_disk_bytes=0, tools_found=frozenset())
preview = request["preview"]
values, secret_keys = harness.mock_config(request["config"])
set_all_config(values, secret_keys)
monitor = RecordingMonitor(FakeMocks(preview))
pulumi.runtime.set_mocks(monitor.mocks, project=harness.PROJECT, stack=request["stack"],
                         preview=preview, monitor=monitor)
outputs = []
management_ref = []

def program():
    from components.management_cluster import ManagementCluster, ManagementClusterArgs
    from components.stack import load_stack
    stack = load_stack()
    platform = stack.platform
    management = ManagementCluster(
        "management", ManagementClusterArgs(platform=platform, substrate=stack.substrate))
    management_ref.append(management)
    outputs.extend(management.tenant_address(t.name) for t in platform.tenants)

result = {"error": None, "addresses": [], "lb_pool": None, "registered": [], "records": []}
try:
    _sync_await(run_pulumi_func(program))
    if management_ref:
        result["address_pool"] = management_ref[0].tenant_address_pool
        pool = management_ref[0].lb_pool
        result["lb_pool"] = (
            _sync_await(pool.future()) if _sync_await(pool.is_known()) else "<unknown>"
        )
    for output in outputs:
        if output is None:
            result["addresses"].append(None)
        elif not _sync_await(output.is_known()):
            result["addresses"].append("<unknown>")
        else:
            result["addresses"].append(_sync_await(output.future()))
except Exception as exc:
    result["error"] = f"{type(exc).__name__}: {exc}"
result["registered"] = [record["name"] for record in monitor.records]
result["records"] = monitor.records
json.dump(result, sys.stdout, default=str)
"""


def _probe(
    stack: str,
    preview: bool,
    config: dict[str, Any] | None = None,
    skip_preflight: bool = True,
    failing_host: bool = False,
    project_dir: Path | None = None,
    path_prefix: Path | None = None,
) -> dict[str, Any]:
    """Evaluate the ManagementCluster alone; ``project_dir`` runs it there (the CLI runs the
    program in the project directory) with the pinned-chart check on (the offline default
    skips it: nothing is installed under mocks); ``path_prefix`` goes in front of PATH (fake
    CLIs)."""
    request = {
        "stack": stack,
        "preview": preview,
        "config": config if config is not None else load_stack_config(stack),
        "skip_preflight": skip_preflight,
        "failing_host": failing_host,
        "project_dir": str(project_dir) if project_dir is not None else None,
    }
    env = dict(os.environ)
    env["PYTHONPATH"] = os.pathsep.join([str(REPO_ROOT), env.get("PYTHONPATH", "")])
    if path_prefix is not None:
        env["PATH"] = os.pathsep.join([str(path_prefix), env.get("PATH", "")])
    proc = subprocess.run(
        [sys.executable, "-c", _PROBE],
        input=json.dumps(request),
        capture_output=True,
        text=True,
        cwd=project_dir if project_dir is not None else REPO_ROOT,
        env=env,
        timeout=120,
        check=False,
    )
    assert proc.returncode == 0, proc.stderr[-3000:]
    result: dict[str, Any] = json.loads(proc.stdout)
    return result


def _recording(stack: str, preview: bool, config: dict[str, Any] | None = None) -> Recording:
    result = _probe(stack, preview, config)
    assert result["error"] is None, result["error"]
    return Recording(
        stack=stack,
        preview=preview,
        resources=[Registration(**record) for record in result["records"]],
        outputs={},
        secret_outputs=[],
        logs=[],
    )


# These shadow conftest's whole-program ``lab``/``prod`` fixtures in this module.
@pytest.fixture(scope="module")
def lab() -> Recording:
    """The lab's ManagementCluster as ``pulumi up`` registers it."""
    return _recording("lab", False)


@pytest.fixture(scope="module")
def prod() -> Recording:
    """The prod ManagementCluster as ``pulumi up`` registers it."""
    return _recording("prod", False)


# -------------------------------------------------------------------------------- lab


def test_lab_kind_cluster_is_created_and_deleted_by_scripts(lab: Recording) -> None:
    cluster = lab.named("management-kind-cluster")
    assert cluster.type == COMMAND
    assert cluster.inputs["create"] == _script("kind-create.sh")
    assert cluster.inputs["update"] == _script("kind-create.sh")
    assert cluster.inputs["delete"] == _script("kind-delete.sh")
    assert cluster.inputs["interpreter"] == ["/bin/bash", "-c"]
    assert cluster.inputs["environment"] == {
        "KIND_CLUSTER_NAME": "gpu-lab",
        "KIND_NODE_IMAGE": PINNED.kind_node_image,
        "KIND_EXPERIMENTAL_DOCKER_NETWORK": "kind",
    }
    assert yaml.safe_load(cluster.inputs["stdin"]) == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": "gpu-lab",
        "networking": {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"},
        "nodes": [{"role": "control-plane", "image": PINNED.kind_node_image}],
    }


def test_lab_kind_cluster_keeps_its_kubeconfig_secret_and_out_of_the_logs(lab: Recording) -> None:
    cluster = lab.named("management-kind-cluster")
    assert cluster.options["additional_secret_outputs"] == ["stdout"]
    assert cluster.inputs["logging"] == "stderr"
    # Replaced (old cluster deleted first) only when the kind config or its names change.
    assert cluster.options["delete_before_replace"] is True
    assert {"stdin", "environment"} <= set(cluster.options["replace_on_changes"])
    assert "triggers" not in cluster.inputs


def test_lab_provider_uses_the_kind_kubeconfig_with_a_stable_identifier(lab: Recording) -> None:
    provider = lab.named("management-provider")
    assert provider.input_is_secret("kubeconfig")
    assert provider.inputs["kubeconfig"] == FAKE_KUBECONFIG
    assert provider.inputs["clusterIdentifier"].startswith("kind-gpu-lab-")
    assert _waits_for(lab, provider, "management-kind-cluster")


def test_lab_stack_exports_the_pool_and_the_secret_kubeconfig(recordings: Any) -> None:
    """Through the whole program: the lead's exports read the component's attributes."""
    program: Recording = recordings("lab", False)
    assert program.outputs["managementKubeconfig"] == FAKE_KUBECONFIG
    assert "managementKubeconfig" in program.secret_outputs
    assert program.outputs["lbPool"] == LAB_POOL


def test_lab_reads_the_kind_network_after_the_cluster_exists(lab: Recording) -> None:
    network = lab.named("management-kind-network")
    assert network.inputs["create"] == _script("network-inspect.sh")
    assert network.inputs["environment"] == {"DOCKER_NETWORK": "kind"}
    assert network.inputs["delete"]
    assert _waits_for(lab, network, "management-kind-cluster")


def test_lab_metallb_pool_is_the_top_of_the_ipv4_subnet(lab: Recording) -> None:
    pool = lab.named("management-metallb-pool")
    assert pool.inputs["apiVersion"] == "metallb.io/v1beta1"
    assert pool.inputs["kind"] == "IPAddressPool"
    assert pool.inputs["metadata"] == {"name": "gpu-platform-lab", "namespace": "metallb-system"}
    assert pool.inputs["spec"] == {
        "addresses": ["172.18.255.239-172.18.255.254"],
        "autoAssign": False,
    }
    advertisement = lab.named("management-metallb-l2")
    assert advertisement.inputs["spec"] == {"ipAddressPools": ["gpu-platform-lab"]}
    assert _probe("lab", False)["lb_pool"] == LAB_POOL


def test_lab_metallb_objects_wait_for_metallb_to_serve(lab: Recording) -> None:
    pool = lab.named("management-metallb-pool")
    assert _waits_for(lab, pool, "management-metallb")
    assert _waits_for(lab, pool, "management-metallb-ready")
    gate = lab.named("management-metallb-ready")
    manifest = json.loads(gate.inputs["environment"]["DRY_RUN_MANIFEST"])
    assert manifest["spec"]["addresses"] == ["172.18.255.239-172.18.255.254"]


def test_lab_installs_the_pinned_charts(lab: Recording) -> None:
    releases = _releases(lab)
    assert set(releases) == {"metallb", "cert-manager", "kamaji", "kamaji-etcd"}
    assert releases["metallb"].inputs["version"] == PINNED.metallb.version
    assert releases["cert-manager"].inputs["values"] == {"crds": {"enabled": True}}
    kamaji = releases["kamaji"]
    assert kamaji.inputs["namespace"] == "kamaji-system"
    # The chart of the image's own release, from the directory pinned by content.
    assert kamaji.inputs["chart"] == chart_cache.kamaji_chart_input()
    assert chart_cache.kamaji_pins()[0].tag == PINNED.kamaji_image_tag
    assert "version" not in kamaji.inputs
    assert kamaji.inputs["values"]["image"]["tag"] == PINNED.kamaji_image_tag
    assert kamaji.inputs["values"]["kamaji-etcd"] == {"deploy": False}
    assert kamaji.inputs["values"]["defaultDatastoreName"] == "default"
    etcd = releases["kamaji-etcd"]
    assert etcd.inputs["chart"] == chart_cache.chart_input(PINNED.kamaji_etcd)
    assert etcd.inputs["namespace"] == "kamaji-system"
    # One member in the lab (components/lab/substrate.py says why).
    assert etcd.inputs["values"] == default_etcd_values("cluster.local", 1)
    for release in releases.values():
        assert release.inputs["skipAwait"] is False
        assert (
            release.inputs["namespace"]
            == lab.named(f"management-ns-{release.inputs['namespace']}").inputs["metadata"]["name"]
        )


def test_lab_kamaji_comes_after_cert_manager_and_is_gated(lab: Recording) -> None:
    kamaji = lab.named("management-kamaji")
    assert _waits_for(lab, kamaji, "management-cert-manager")
    gate = lab.named("management-kamaji-ready")
    assert gate.inputs["create"] == _script("wait-ready.sh")
    assert _waits_for(lab, gate, "management-kamaji")
    assert _waits_for(lab, gate, "management-datastore-default")
    env = gate.inputs["environment"]
    assert "tenantcontrolplanes.kamaji.clastix.io" in env["WAIT_CRDS"].split()
    assert "kamaji-system/deployment/kamaji" in env["WAIT_ROLLOUTS"].split()
    assert "datastores.kamaji.clastix.io/default" in env["WAIT_CONDITIONS"]
    assert json.loads(env["DRY_RUN_MANIFEST"])["kind"] == "TenantControlPlane"


def test_gates_get_the_kubeconfig_as_a_secret(lab: Recording, prod: Recording) -> None:
    for recording, kubeconfig in ((lab, FAKE_KUBECONFIG), (prod, MOCK_KUBECONFIG)):
        gates = [r for r in _inside(recording) if r.type == COMMAND and r.name.endswith("-ready")]
        assert gates
        for gate in gates:
            assert gate.input_is_secret("environment"), gate.name
            assert gate.inputs["environment"]["KUBECONFIG_CONTENT"] == kubeconfig
            assert gate.inputs["delete"]


def test_the_default_etcd_starts_beside_cert_manager(lab: Recording, prod: Recording) -> None:
    """The etcd needs nothing of cert-manager or Kamaji, so nothing of theirs is before it: it
    comes up while they do. Its DataStore waits for both Kamaji (the CRD) and the etcd (its
    certificate Secrets), and the tenants wait for the DataStore through the gate."""
    etcd = lab.named("management-kamaji-etcd")
    before_etcd = lab.dependency_closure(etcd)
    for unrelated in ("management-cert-manager", "management-kamaji", "management-metallb"):
        assert lab.named(unrelated).urn not in before_etcd, unrelated
    kamaji = lab.named("management-kamaji")
    assert etcd.urn not in lab.dependency_closure(kamaji)
    assert lab.named("management-ns-kamaji-system").urn in before_etcd
    datastore = lab.named("management-datastore-default")
    assert datastore.inputs["kind"] == "DataStore"
    assert datastore.inputs["spec"] == default_etcd_datastore("cluster.local", 1)["spec"]
    assert _waits_for(lab, datastore, "management-kamaji")
    assert _waits_for(lab, datastore, "management-kamaji-etcd")
    for tenant in lab.of_type("kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"):
        assert datastore.urn in lab.dependency_closure(tenant), tenant.name
    # prod adopts tenants' own DataStores unless management.existing.kamajiEtcd is set.
    assert not [r for r in prod.resources if r.name == "management-kamaji-etcd"]
    assert not [r for r in prod.resources if r.name == "management-datastore-default"]


def test_lab_ready_covers_kamaji_serving_and_the_pool(lab: Recording) -> None:
    """A tenant depending on ``management.ready`` waits for all of it (checked through a
    resource that depends on the same list: the L2Advertisement waits for the pool)."""
    gate = lab.named("management-kamaji-ready")
    closure = lab.dependency_closure(gate)
    for needed in ("management-kamaji", "management-cert-manager", "management-kind-cluster"):
        assert lab.named(needed).urn in closure


def test_every_kubernetes_object_uses_the_management_provider(
    lab: Recording, prod: Recording
) -> None:
    for recording in (lab, prod):
        provider = recording.named("management-provider")
        objects = _kubernetes(recording)
        assert objects
        for reg in objects:
            assert reg.provider_urn == provider.urn, reg.name


def test_lab_objects_go_with_the_kind_cluster_on_destroy(lab: Recording) -> None:
    cluster = lab.named("management-kind-cluster")
    for reg in _kubernetes(lab):
        assert reg.options["deleted_with"] == cluster.urn, reg.name


def test_lab_has_no_prod_parts(lab: Recording) -> None:
    assert not [r for r in lab.resources if "operator.cluster.x-k8s.io" in r.type]
    assert "capi-operator" not in _releases(lab)


def test_lab_preview_leaves_deploy_time_data_unknown() -> None:
    preview = _recording("lab", True)
    assert _is_unknown(preview.named("management-provider").inputs.get("kubeconfig", UNKNOWN))
    spec = preview.named("management-metallb-pool").inputs.get("spec", UNKNOWN)
    assert _is_unknown(spec) or _is_unknown(spec.get("addresses", UNKNOWN))
    assert _probe("lab", True)["lb_pool"] == "<unknown>"


def test_a_second_up_registers_identical_inputs(lab: Recording) -> None:
    """No timestamps, random names or ever-changing triggers: evaluated again, every input of
    every management resource is the same, so `pulumi up` has nothing to change."""
    again = _recording("lab", False)

    def inputs(recording: Recording) -> dict[str, Any]:
        return {r.urn: r.inputs for r in _inside(recording)}

    assert inputs(again) == inputs(lab)


# ------------------------------------------------------------------------------- prod


def test_prod_provider_reads_the_secret_kubeconfig(prod: Recording) -> None:
    provider = prod.named("management-provider")
    assert provider.input_is_secret("kubeconfig")
    assert provider.inputs["kubeconfig"] == MOCK_KUBECONFIG
    assert provider.inputs["clusterIdentifier"] == "gpu-platform-management"
    assert _probe("prod", False)["lb_pool"] == []


def test_prod_has_no_lab_parts(prod: Recording) -> None:
    assert not [r for r in _inside(prod) if r.type == COMMAND and "kind" in r.name]
    assert not [r for r in prod.resources if "metallb.io" in r.type]
    assert "metallb" not in _releases(prod)


def test_prod_installs_kamaji_without_bundled_etcd_and_the_capi_operator(prod: Recording) -> None:
    releases = _releases(prod)
    assert set(releases) == {"kamaji", "capi-operator"}
    values = releases["kamaji"].inputs["values"]
    assert values["image"]["tag"] == PINNED.kamaji_image_tag
    assert values["kamaji-etcd"] == {"deploy": False}
    assert values["defaultDatastoreName"] == ""
    operator = releases["capi-operator"]
    assert operator.inputs["chart"] == chart_cache.chart_input(PINNED.cluster_api_operator)
    assert operator.inputs["version"] == PINNED.cluster_api_operator.version


def _namespaces(recording: Recording) -> set[str]:
    return {
        r.inputs["metadata"]["name"]
        for r in _inside(recording)
        if r.type == "kubernetes:core/v1:Namespace" and not r.read
    }


def test_prod_adopts_the_clusters_cert_manager(prod: Recording) -> None:
    """The shipped prod stack: a Metal3 management cluster already runs cert-manager, so nothing
    of cert-manager is registered (so nothing of it is ever deleted) and what needs it waits for
    a gate proving the cluster's own serves: its CRDs Established, its webhook answering."""
    platform = load_stack_config("prod")["gpu-platform:platform"]
    assert platform["management"]["existing"]["certManager"] == "existing"
    assert "cert-manager" not in _releases(prod)
    assert "cert-manager" not in _namespaces(prod)
    assert not [r for r in _inside(prod) if "cert-manager" in json.dumps(r.inputs.get("chart"))]
    gate = prod.named("management-cert-manager-ready")
    assert gate.type == COMMAND
    assert gate.inputs["create"] == _script("cert-manager-ready.sh")
    assert gate.inputs["delete"] == "true"
    env = gate.inputs["environment"]
    assert "certificates.cert-manager.io" in env["CERT_MANAGER_CRDS"].split()
    assert "issuers.cert-manager.io" in env["CERT_MANAGER_CRDS"].split()
    probe = json.loads(env["PROBE_MANIFEST"])
    assert (probe["apiVersion"], probe["kind"]) == ("cert-manager.io/v1", "Issuer")
    # Kamaji's and the cluster-api-operator's charts create Certificates and Issuers.
    for needs_cert_manager in ("management-kamaji", "management-capi-operator"):
        assert _waits_for(prod, prod.named(needs_cert_manager), "management-cert-manager-ready")


def test_prod_installs_cert_manager_when_asked() -> None:
    config = _prod_config()
    config["gpu-platform:platform"]["management"]["existing"]["certManager"] = "install"
    recording = _recording("prod", False, config)
    release = _releases(recording)["cert-manager"]
    assert release.inputs["version"] == PINNED.cert_manager.version
    assert release.inputs["values"] == {"crds": {"enabled": True}}
    assert "cert-manager" in _namespaces(recording)
    for needs_cert_manager in ("management-kamaji", "management-capi-operator"):
        assert _waits_for(recording, recording.named(needs_cert_manager), "management-cert-manager")
    assert not [r for r in recording.resources if r.name == "management-cert-manager-ready"]


def test_prod_refuses_an_unknown_cert_manager_choice() -> None:
    config = _prod_config()
    config["gpu-platform:platform"]["management"]["existing"]["certManager"] = "skip"
    recording = evaluate("prod", False, config=config)
    assert recording.resources == []
    assert recording.run_error
    assert recording.error is not None
    assert "management.existing.certManager" in recording.error
    assert "'existing' or 'install'" in recording.error


def test_prod_declares_every_capi_provider_in_its_own_namespace(prod: Recording) -> None:
    providers = {
        r.inputs["kind"]: r for r in prod.resources if "operator.cluster.x-k8s.io" in r.type
    }
    assert set(providers) == {
        "CoreProvider",
        "BootstrapProvider",
        "ControlPlaneProvider",
        "InfrastructureProvider",
    }
    assert providers["CoreProvider"].inputs["metadata"]["name"] == "cluster-api"
    assert providers["CoreProvider"].inputs["spec"]["version"] == "v1.13.5"
    assert providers["BootstrapProvider"].inputs["metadata"]["name"] == "kubeadm"
    assert providers["ControlPlaneProvider"].inputs["metadata"]["name"] == "kamaji"
    assert providers["ControlPlaneProvider"].inputs["spec"]["version"] == "v0.20.0"
    assert providers["InfrastructureProvider"].inputs["metadata"]["name"] == "metal3"
    namespaces = {p.inputs["metadata"]["namespace"] for p in providers.values()}
    assert len(namespaces) == 4
    for reg in providers.values():
        namespace = reg.inputs["metadata"]["namespace"]
        assert _waits_for(prod, reg, f"management-ns-{namespace}")
        assert _waits_for(prod, reg, "management-capi-operator")
    # The Kamaji control-plane provider reconciles TenantControlPlanes: Kamaji serves first.
    assert _waits_for(prod, providers["ControlPlaneProvider"], "management-kamaji-ready")


def test_prod_providers_fetch_from_github_without_credentials_by_default(prod: Recording) -> None:
    namespaces = set()
    for reg in prod.resources:
        if "operator.cluster.x-k8s.io" in reg.type:
            assert "configSecret" not in reg.inputs["spec"], reg.name
            assert "fetchConfig" not in reg.inputs["spec"], reg.name
            namespaces.add(reg.inputs["metadata"]["namespace"])
    # No token Secret beside any provider (the metrics stack's password Secret lives elsewhere).
    assert not [
        r
        for r in _inside(prod)
        if r.type == "kubernetes:core/v1:Secret" and r.inputs["metadata"]["namespace"] in namespaces
    ]


def test_prod_providers_get_the_github_token_and_fetch_sources() -> None:
    """Behind a shared NAT the operator's unauthenticated GitHub downloads hit the rate limit:
    a configured token reaches every provider through a Secret in its own namespace, under
    clusterctl's ``github-token``; an offline cluster fetches a provider elsewhere."""
    config = _prod_config()
    capi = config["gpu-platform:platform"]["management"]["existing"]["clusterApi"]
    capi["githubTokenConfigKey"] = "capiGithubToken"
    capi["fetch"] = {
        "infrastructure": {"oci": "registry.example.internal/capi/infrastructure-metal3"},
        "controlPlaneKamaji": {"configMapLabels": {"provider-components": "kamaji"}},
    }
    recording = _recording("prod", False, config)
    secrets = {
        r.inputs["metadata"]["namespace"]: r
        for r in _inside(recording)
        if r.type == "kubernetes:core/v1:Secret"
    }
    providers = {
        r.inputs["kind"]: r for r in recording.resources if "operator.cluster.x-k8s.io" in r.type
    }
    assert len(providers) == 4
    for reg in providers.values():
        namespace = reg.inputs["metadata"]["namespace"]
        secret = secrets[namespace]
        assert reg.inputs["spec"]["configSecret"] == {
            "name": secret.inputs["metadata"]["name"],
            "namespace": namespace,
        }
        assert secret.urn in recording.dependency_closure(reg)
        assert secret.inputs["stringData"] == {"github-token": MOCK_KUBECONFIG}
        assert secret.input_is_secret("stringData")
        assert secret.inputs["immutable"] is True
        assert _waits_for(recording, secret, f"management-ns-{namespace}")
    assert providers["InfrastructureProvider"].inputs["spec"]["fetchConfig"] == {
        "oci": "registry.example.internal/capi/infrastructure-metal3"
    }
    assert providers["ControlPlaneProvider"].inputs["spec"]["fetchConfig"] == {
        "selector": {"matchLabels": {"provider-components": "kamaji"}}
    }
    assert "fetchConfig" not in providers["CoreProvider"].inputs["spec"]


def test_prod_refuses_a_fetch_source_with_both_or_neither() -> None:
    config = _prod_config()
    capi = config["gpu-platform:platform"]["management"]["existing"]["clusterApi"]
    capi["fetch"] = {
        "core": {"oci": "registry.example.internal/capi/core", "configMapLabels": {"a": "b"}}
    }
    recording = evaluate("prod", False, config=config)
    assert recording.resources == []
    assert recording.error is not None
    assert (
        "management.existing.clusterApi.fetch.core: give exactly one of oci or configMapLabels"
        in (recording.error)
    )
    assert "\n" not in recording.error


def test_prod_ready_waits_for_every_provider(prod: Recording) -> None:
    gate = prod.named("management-capi-ready")
    for reg in prod.resources:
        if "operator.cluster.x-k8s.io" in reg.type:
            assert reg.urn in prod.dependency_closure(gate), reg.name
    env = gate.inputs["environment"]
    assert "kamajicontrolplanes.controlplane.cluster.x-k8s.io" in env["WAIT_CRDS"].split()
    assert "machinedeployments.cluster.x-k8s.io" in env["WAIT_CRDS"].split()
    assert len(env["WAIT_CONDITIONS"].split()) == 4


# --------------------------------------------------------------------------- scenarios


def _lab_config() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("lab"))


def _prod_config() -> dict[str, Any]:
    return copy.deepcopy(load_stack_config("prod"))


def test_custom_network_and_pool_size() -> None:
    config = _lab_config()
    kind = config["gpu-platform:platform"]["management"]["kind"]
    kind["dockerNetwork"] = "gpu-net"
    kind["metallbPoolSize"] = 4
    recording = _recording("lab", False, config)
    cluster = recording.named("management-kind-cluster")
    assert cluster.inputs["environment"]["KIND_EXPERIMENTAL_DOCKER_NETWORK"] == "gpu-net"
    network = recording.named("management-kind-network")
    assert network.inputs["environment"] == {"DOCKER_NETWORK": "gpu-net"}
    assert recording.named("management-metallb-pool").inputs["spec"]["addresses"] == [
        "172.18.255.251-172.18.255.254"
    ]


def test_more_tenants_than_pool_addresses_fails_before_registration() -> None:
    config = _lab_config()
    platform = config["gpu-platform:platform"]
    platform["management"]["kind"]["metallbPoolSize"] = 2
    third = copy.deepcopy(platform["tenants"][1])
    third.update(name="tenant-c", workloads=[])
    third["dataStore"].update(schema="tenant_c", username="tenant_c")
    third["network"] = {"podCidr": "10.30.0.0/16", "serviceCidr": "10.31.0.0/16"}
    platform["tenants"].append(third)
    recording = evaluate("lab", False, config=config)  # the whole program: nothing registered
    assert recording.error is not None
    assert "metallbPoolSize is 2" in recording.error
    assert recording.resources == []


def test_prod_with_bundled_etcd_and_docker_infrastructure() -> None:
    config = _prod_config()
    existing = config["gpu-platform:platform"]["management"]["existing"]
    existing["kamajiEtcd"] = True
    existing["clusterDomain"] = "corp.example"
    existing["clusterApi"]["infrastructure"] = {"name": "docker", "version": "v1.13.5"}
    for tenant in config["gpu-platform:platform"]["tenants"]:
        for pool in tenant["workerPools"]:
            pool["machine"] = {"provider": "docker", "template": {"customImage": "x"}}
    recording = _recording("prod", False, config)
    values = _releases(recording)["kamaji"].inputs["values"]
    # Kamaji's bundled etcd, whose certificates cert-manager renews, in the management cluster's
    # own DNS domain (not kind's); no release or DataStore of the program's for it.
    assert values["kamaji-etcd"]["deploy"] is True
    assert values["kamaji-etcd"]["clusterDomain"] == "corp.example"
    assert values["kamaji-etcd"]["replicas"] == 3
    assert values["kamaji-etcd"]["datastore"] == {"enabled": True, "name": "default"}
    assert values["defaultDatastoreName"] == "default"
    assert "kamaji-etcd" not in _releases(recording)
    assert not [r for r in recording.resources if r.name == "management-datastore-default"]
    infra = next(r for r in recording.resources if r.type.endswith(":InfrastructureProvider"))
    assert infra.inputs["metadata"] == {"name": "docker", "namespace": "capd-system"}
    assert infra.inputs["spec"] == {"version": "v1.13.5"}
    gate = recording.named("management-kamaji-ready")
    assert "statefulset/kamaji-etcd" in gate.inputs["environment"]["WAIT_ROLLOUTS"]


def test_lab_tenants_without_a_pin_get_their_address_from_metallb() -> None:
    # No address from the program: each control plane's Service names the pool and MetalLB
    # assigns one (components/lab/network.py has the upstream trace).
    result = _probe("lab", preview=False)
    assert result["error"] is None
    assert result["addresses"] == [None, None]
    assert result["address_pool"] == METALLB_POOL_NAME
    assert _probe("prod", preview=False)["address_pool"] is None


def test_lab_pinned_address_is_unknown_in_preview_and_checked_at_evaluate() -> None:
    config = _lab_config()
    config["gpu-platform:platform"]["tenants"][1]["controlPlane"] = {"address": "172.18.255.250"}
    result = _probe("lab", preview=True, config=config)
    assert result["error"] is None
    assert result["addresses"] == [None, "<unknown>"]


def test_lab_tenant_may_pin_an_address_from_the_pool() -> None:
    config = _lab_config()
    config["gpu-platform:platform"]["tenants"][1]["controlPlane"] = {"address": "172.18.255.250"}
    result = _probe("lab", preview=False, config=config)
    assert result["addresses"] == [None, "172.18.255.250"]


def test_lab_tenant_requesting_an_address_outside_the_pool_fails() -> None:
    config = _lab_config()
    config["gpu-platform:platform"]["tenants"][0]["controlPlane"] = {"address": "10.1.2.3"}
    result = _probe("lab", preview=False, config=config)
    assert result["error"] is not None
    assert "not in the lab's MetalLB pool" in result["error"]


def test_prod_tenant_address_is_the_configured_one_or_none() -> None:
    configured = [
        t["controlPlane"]["address"]
        for t in load_stack_config("prod")["gpu-platform:platform"]["tenants"]
    ]
    assert _probe("prod", preview=False)["addresses"] == configured
    config = _prod_config()
    platform = config["gpu-platform:platform"]
    platform["management"]["existing"]["clusterApi"]["infrastructure"] = {"name": "docker"}
    for tenant in platform["tenants"]:
        for pool in tenant["workerPools"]:
            pool["machine"] = {"provider": "docker"}
    platform["tenants"][0]["controlPlane"].pop("address")
    platform["tenants"][1]["controlPlane"]["address"] = "10.0.0.50"
    assert _probe("prod", preview=False, config=config)["addresses"] == [
        None,
        "10.0.0.50",
        configured[2],
    ]


def test_preflight_failure_stops_up_before_any_registration() -> None:
    result = _probe("lab", preview=False, skip_preflight=False, failing_host=True)
    assert result["error"] is not None
    assert result["error"].startswith("PreflightError: lab host preflight failed")
    assert "not Linux" in result["error"]
    assert "`kind` is not on PATH" in result["error"]
    assert result["registered"] == []


@pytest.mark.parametrize(("stack", "preview"), [("lab", True), ("lab", False), ("prod", True)])
def test_a_missing_kamaji_chart_stops_both_stacks_before_any_registration(
    stack: str, preview: bool, tmp_path: Path
) -> None:
    """Kamaji is installed from the local chart pinned by content: without it nothing starts,
    in preview too (the Release reads the chart), and the one line says what to run."""
    result = _probe(stack, preview=preview, project_dir=tmp_path)
    assert result["error"] is not None
    assert result["error"].startswith("ChartPinError: the pinned Kamaji chart")
    assert "make charts" in result["error"]
    assert result["registered"] == []


def _project_with_verified_charts(project: Path) -> None:
    """A project directory as ``make charts`` leaves it, from this machine's charts cache: the
    verified Kamaji chart and every pinned archive with the digest it was checked against."""
    cached = chart_cache.kamaji_chart_dir()
    if chart_cache.verify_kamaji_chart(cached):
        pytest.skip(f"{cached} absent or not verified: run `make charts`")
    shutil.copytree(cached, project / chart_cache.kamaji_chart_input())
    for chart in chart_cache.installed_archives():
        source = chart_cache.charts_dir() / chart_cache.archive_name(chart)
        if not source.is_file():
            pytest.skip(f"{source} absent: run `make charts`")
        target = project / chart_cache.chart_input(chart)
        shutil.copyfile(source, target)
        digest = hashlib.sha256(source.read_bytes()).hexdigest()
        chart_cache.digest_record(target).write_text(digest + "\n")


@pytest.mark.parametrize(("stack", "preview"), [("lab", True), ("lab", False), ("prod", True)])
def test_a_missing_or_tampered_chart_archive_stops_both_stacks_before_any_registration(
    stack: str, preview: bool, tmp_path: Path
) -> None:
    """Every chart is installed from its verified archive in .charts/ (no repository asked at
    install, so a second `make lab` needs no network for charts): one missing or altered
    archive stops the program before anything is registered, in one line naming the fix."""
    _project_with_verified_charts(tmp_path)
    hami = tmp_path / chart_cache.chart_input(PINNED.hami)
    hami.unlink()
    result = _probe(stack, preview=preview, project_dir=tmp_path)
    assert result["error"] is not None
    assert result["error"].startswith("ChartPinError: the pinned chart archives hami-2.10.0.tgz")
    assert "run `make charts`" in result["error"]
    assert "\n" not in result["error"]
    assert result["registered"] == []
    shutil.copyfile(chart_cache.charts_dir() / chart_cache.archive_name(PINNED.hami), hami)
    hami.write_bytes(hami.read_bytes() + b"\0")
    result = _probe(stack, preview=preview, project_dir=tmp_path)
    assert result["error"] is not None
    assert ".charts/hami-2.10.0.tgz: sha256" in result["error"]
    assert "run `make charts` again" in result["error"]
    assert result["registered"] == []


def test_an_altered_kamaji_chart_is_refused(tmp_path: Path) -> None:
    chart = tmp_path / ".charts" / "kamaji-26.8.2-edge"
    (chart / "templates").mkdir(parents=True)
    (chart / "Chart.yaml").write_text("apiVersion: v2\nname: kamaji\nversion: 0.0.0+latest\n")
    (chart / "templates" / "controller.yaml").write_text("kind: Deployment\n")
    result = _probe("lab", preview=True, project_dir=tmp_path)
    assert result["error"] is not None
    assert "is not Kamaji 26.8.2-edge's chart" in result["error"]
    assert "templates/controller.yaml differs" in result["error"]
    assert result["registered"] == []


def test_the_kamaji_chart_input_is_the_same_relative_path_on_every_machine(tmp_path: Path) -> None:
    """pulumi-kubernetes diffs the Release's ``chart`` input as given (helm_release.go:377-396,
    795-895 at v4.32.0): a per-user path would make every other machine update Kamaji. The
    input names no home or cache directory and is relative (to the project directory, the
    provider's working directory)."""
    charts = []
    for user in ("alice", "runner"):
        home = tmp_path / user
        environment = {"HOME": str(home), "XDG_CACHE_HOME": str(home / "cache")}
        recording = evaluate("lab", False, environment=environment)
        assert recording.error is None, recording.error
        (kamaji,) = [r for r in recording.of_type(RELEASE) if r.inputs["name"] == "kamaji"]
        charts.append(kamaji.inputs["chart"])
    assert charts[0] == charts[1]
    assert not Path(charts[0]).is_absolute()
    assert str(tmp_path) not in charts[0]


def test_a_verified_project_copy_of_the_charts_is_accepted(tmp_path: Path) -> None:
    _project_with_verified_charts(tmp_path)
    result = _probe("lab", preview=True, project_dir=tmp_path)
    assert result["error"] is None, result["error"]
    (kamaji,) = [r for r in result["records"] if r["name"] == "management-kamaji"]
    assert (tmp_path / kamaji["inputs"]["chart"]).resolve() == (
        chart_cache.project_kamaji_chart(tmp_path).resolve()
    )
    (cert_manager,) = [r for r in result["records"] if r["name"] == "management-cert-manager"]
    assert (tmp_path / cert_manager["inputs"]["chart"]).is_file()
    assert "repositoryOpts" not in cert_manager["inputs"]


def test_preflight_never_runs_in_preview() -> None:
    result = _probe("lab", preview=True, skip_preflight=False, failing_host=True)
    assert result["error"] is None
    assert "management-kind-cluster" in result["registered"]


def test_preflight_is_lab_only(tmp_path: Path) -> None:
    """The lab host preflight never runs in prod; prod's own checks (its adopted namespaces,
    its capacity) do, and answer from a kubectl that finds them all and a roomy node."""
    kubectl = tmp_path / "kubectl"
    node = '{"items":[{"spec":{},"status":{"allocatable":{"cpu":"64","memory":"256Gi"}}}]}'
    kubectl.write_text(
        "#!/usr/bin/env bash\n"
        f"if [ \"$2\" = nodes ]; then echo '{node}'; exit 0; fi\n"
        'echo "namespace/$3"\n'
    )
    kubectl.chmod(0o755)
    result = _probe(
        "prod",
        preview=False,
        skip_preflight=False,
        failing_host=True,
        path_prefix=tmp_path,
    )
    assert result["error"] is None


# ------------------------------------------------------------ the scripts, with fake CLIs

# Stand-ins for kind, docker and kubectl: they record their arguments and answer from files in
# $FAKE_STATE, so the scripts' logic (idempotent create, delete, secret handling, retries) runs
# here without Docker.
_FAKE_KIND = r"""#!/usr/bin/env bash
set -euo pipefail
echo "kind $*" >>"$FAKE_STATE/calls"
case "$1 $2" in
  "get clusters")
    if [[ -s "$FAKE_STATE/clusters" ]]; then cat "$FAKE_STATE/clusters";
    else echo "No kind clusters found." >&2; fi ;;
  "create cluster")
    cat >"$FAKE_STATE/create-stdin"
    echo "$4" >>"$FAKE_STATE/clusters"
    echo "Creating cluster $4 ..." ;;
  "get kubeconfig") echo "kubeconfig-of-$4" ;;
  "delete cluster") grep -vx "$4" "$FAKE_STATE/clusters" >"$FAKE_STATE/left" || true
                    mv "$FAKE_STATE/left" "$FAKE_STATE/clusters" ;;
esac
"""

_FAKE_DOCKER = r"""#!/usr/bin/env bash
set -euo pipefail
echo "docker $*" >>"$FAKE_STATE/calls"
case "$1" in
  inspect) cat "$FAKE_STATE/node-image" ;;
  network) if [[ -f "$FAKE_STATE/network.json" ]]; then cat "$FAKE_STATE/network.json";
           else echo "Error: No such network: $3" >&2; exit 1; fi ;;
esac
"""

_FAKE_KUBECTL = r"""#!/usr/bin/env bash
set -euo pipefail
echo "kubectl $*" >>"$FAKE_STATE/calls"
stat -c '%a' "$KUBECONFIG" >>"$FAKE_STATE/kubeconfig-modes"
cat "$KUBECONFIG" >"$FAKE_STATE/kubeconfig-seen"
if [[ -n "${KUBECONFIG_CONTENT:-}" ]]; then echo "leaked" >>"$FAKE_STATE/calls"; fi
failures="$FAKE_STATE/fail-$1"
if [[ -f "$failures" && "$(cat "$failures")" -gt 0 ]]; then
  echo $(( $(cat "$failures") - 1 )) >"$failures"
  echo "Error from server (NotFound): not yet" >&2
  exit 1
fi
if [[ "$1" == "apply" ]]; then
  cat >"$FAKE_STATE/dry-run-stdin"
  case "${FAKE_DRY_RUN:-ok}" in
    ok) echo "created (server dry run)" ;;
    denied) echo 'admission webhook "vtcp.kb.io" denied the request: no DataStore' >&2; exit 1 ;;
    mixed) echo 'admission webhook "validation.cluster.x-k8s.io" denied the request: no' >&2
           echo 'Internal error occurred: failed calling webhook "y": x509: unknown authority' >&2
           exit 1 ;;
    *) echo 'Internal error occurred: failed calling webhook "x": connection refused' >&2
       exit 1 ;;
  esac
fi
"""


@pytest.fixture
def fake_clis(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    state = tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    for name, body in (("kind", _FAKE_KIND), ("docker", _FAKE_DOCKER), ("kubectl", _FAKE_KUBECTL)):
        path = bin_dir / name
        path.write_text(body)
        path.chmod(0o755)
    env = {
        "PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}",
        "FAKE_STATE": str(state),
        "HOME": str(tmp_path),
    }
    return {"env": env, "state": state}


def _run(
    script: str, fake: dict[str, Any], env: dict[str, str], stdin: str = ""
) -> subprocess.CompletedProcess[str]:
    """Run a script the way pulumi-command does: its text through ``bash -c``."""
    return subprocess.run(
        ["/bin/bash", "-c", _script(script)],
        input=stdin,
        capture_output=True,
        text=True,
        env={**fake["env"], **env},
        timeout=60,
        check=False,
    )


KIND_ENV = {"KIND_CLUSTER_NAME": "gpu-lab", "KIND_NODE_IMAGE": "kindest/node:v1.35.0"}


def _calls(fake: dict[str, Any]) -> list[str]:
    calls = fake["state"] / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


def test_kind_create_creates_once_and_prints_only_the_kubeconfig(fake_clis: dict[str, Any]) -> None:
    result = _run("kind-create.sh", fake_clis, KIND_ENV, stdin="kind: Cluster\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "kubeconfig-of-gpu-lab\n"
    assert "Creating cluster" in result.stderr  # kind's own output goes to stderr
    creates = [c for c in _calls(fake_clis) if c.startswith("kind create cluster")]
    assert len(creates) == 1
    assert "--name gpu-lab --config -" in creates[0]
    assert "--kubeconfig" in creates[0]  # the user's ~/.kube/config stays untouched
    assert (fake_clis["state"] / "create-stdin").read_text() == "kind: Cluster\n"


def test_kind_create_reuses_an_existing_cluster(fake_clis: dict[str, Any]) -> None:
    (fake_clis["state"] / "clusters").write_text("gpu-lab\n")
    (fake_clis["state"] / "node-image").write_text("kindest/node:v1.35.0\n")
    result = _run("kind-create.sh", fake_clis, KIND_ENV, stdin="kind: Cluster\n")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "kubeconfig-of-gpu-lab\n"
    assert "reusing" in result.stderr
    assert not [c for c in _calls(fake_clis) if c.startswith("kind create")]


def test_kind_create_refuses_a_cluster_on_another_image(fake_clis: dict[str, Any]) -> None:
    (fake_clis["state"] / "clusters").write_text("gpu-lab\n")
    (fake_clis["state"] / "node-image").write_text("kindest/node:v1.31.0\n")
    result = _run("kind-create.sh", fake_clis, KIND_ENV, stdin="kind: Cluster\n")
    assert result.returncode == 1
    assert "kind delete cluster --name gpu-lab" in result.stderr
    assert result.stdout == ""


def test_kind_delete_deletes_and_is_idempotent(fake_clis: dict[str, Any]) -> None:
    (fake_clis["state"] / "clusters").write_text("other\ngpu-lab\n")
    first = _run("kind-delete.sh", fake_clis, KIND_ENV)
    assert first.returncode == 0, first.stderr
    assert "kind delete cluster --name gpu-lab" in _calls(fake_clis)
    assert (fake_clis["state"] / "clusters").read_text() == "other\n"
    second = _run("kind-delete.sh", fake_clis, KIND_ENV)
    assert second.returncode == 0
    assert "nothing to delete" in second.stdout
    assert _calls(fake_clis).count("kind delete cluster --name gpu-lab") == 1


def test_network_inspect_prints_the_docker_json(fake_clis: dict[str, Any]) -> None:
    missing = _run("network-inspect.sh", fake_clis, {"DOCKER_NETWORK": "kind"})
    assert missing.returncode == 1
    assert "created by 'kind create cluster'" in missing.stderr
    (fake_clis["state"] / "network.json").write_text('[{"Name": "kind"}]\n')
    found = _run("network-inspect.sh", fake_clis, {"DOCKER_NETWORK": "kind"})
    assert found.returncode == 0
    assert json.loads(found.stdout) == [{"Name": "kind"}]


def _gate_env(**extra: str) -> dict[str, str]:
    return {
        "KUBECONFIG_CONTENT": "secret-kubeconfig",
        "WAIT_POLL_SECONDS": "0",
        "WAIT_CRDS": "tenantcontrolplanes.kamaji.clastix.io",
        "WAIT_ROLLOUTS": "kamaji-system/deployment/kamaji",
        "WAIT_CONDITIONS": "-/datastores.kamaji.clastix.io/default/jsonpath={.status.ready}=true "
        "capi-system/coreproviders.operator.cluster.x-k8s.io/cluster-api/condition=Ready",
        "DRY_RUN_MANIFEST": '{"kind": "TenantControlPlane"}',
        **extra,
    }


def test_wait_ready_waits_for_everything_and_keeps_the_kubeconfig_private(
    fake_clis: dict[str, Any],
) -> None:
    result = _run("wait-ready.sh", fake_clis, _gate_env())
    assert result.returncode == 0, result.stderr
    calls = _calls(fake_clis)
    assert (
        "kubectl wait --for=condition=Established --timeout=60s "
        "customresourcedefinitions.apiextensions.k8s.io/tenantcontrolplanes.kamaji.clastix.io"
    ) in calls
    assert (
        "kubectl rollout status --namespace kamaji-system --timeout=60s deployment/kamaji" in calls
    )
    assert (
        "kubectl wait --for=jsonpath={.status.ready}=true --timeout=60s "
        "datastores.kamaji.clastix.io/default"
    ) in calls
    assert (
        "kubectl wait --namespace capi-system --for=condition=Ready --timeout=60s "
        "coreproviders.operator.cluster.x-k8s.io/cluster-api"
    ) in calls
    assert "kubectl apply --dry-run=server -f -" in calls
    assert (fake_clis["state"] / "dry-run-stdin").read_text() == '{"kind": "TenantControlPlane"}\n'
    # The kubeconfig reached kubectl through a private file, never the environment or output.
    assert (fake_clis["state"] / "kubeconfig-seen").read_text() == "secret-kubeconfig\n"
    assert set((fake_clis["state"] / "kubeconfig-modes").read_text().split()) == {"600"}
    assert "leaked" not in calls
    assert "secret-kubeconfig" not in result.stdout + result.stderr


def test_wait_ready_retries_what_does_not_exist_yet(fake_clis: dict[str, Any]) -> None:
    (fake_clis["state"] / "fail-wait").write_text("2\n")
    result = _run("wait-ready.sh", fake_clis, _gate_env(WAIT_ROLLOUTS="", DRY_RUN_MANIFEST=""))
    assert result.returncode == 0, result.stderr
    waits = [c for c in _calls(fake_clis) if c.startswith("kubectl wait")]
    assert len(waits) == 3 + 2  # three objects, two failed attempts retried


def test_wait_ready_accepts_a_webhook_denial_but_not_an_unreachable_webhook(
    fake_clis: dict[str, Any],
) -> None:
    denied = _run("wait-ready.sh", fake_clis, _gate_env(FAKE_DRY_RUN="denied"))
    assert denied.returncode == 0, denied.stderr
    assert "the webhook answered" in denied.stdout
    unreachable = _run(
        "wait-ready.sh", fake_clis, _gate_env(FAKE_DRY_RUN="unreachable", WAIT_TIMEOUT_SECONDS="0")
    )
    assert unreachable.returncode == 1
    assert "timed out" in unreachable.stderr
    assert "failed calling webhook" in unreachable.stderr


def test_wait_ready_does_not_let_one_denial_hide_an_unreachable_webhook(
    fake_clis: dict[str, Any],
) -> None:
    """The Cluster API probe is a List: one webhook denying its object must not pass the gate
    while another webhook (CA not injected yet) cannot be called."""
    mixed = _run(
        "wait-ready.sh", fake_clis, _gate_env(FAKE_DRY_RUN="mixed", WAIT_TIMEOUT_SECONDS="0")
    )
    assert mixed.returncode == 1
    assert "x509" in mixed.stderr
