"""The ManagementCluster's pure builders: kind config, Helm values, MetalLB and Cluster API
objects, readiness gate parameters, versions. Where a pinned upstream copy exists the output is
also checked against it (values keys, CRD schemas)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
import yaml

from components import availability
from components.config import (
    ClusterApiVersions,
    InfrastructureProvider,
    ProviderFetch,
    ProviderFetchSources,
)
from components.lab.management_values import (
    ip_address_pool,
    kind_cluster_identifier,
    kind_config,
    l2_advertisement,
    metallb_gate_env,
    metallb_values,
)
from components.management_values import (
    CERT_MANAGER_CRDS,
    DefaultEtcd,
    cert_manager_gate_env,
    cert_manager_values,
    default_etcd_datastore,
    default_etcd_values,
    gate_env,
    kamaji_etcd_values,
    kamaji_gate_env,
    kamaji_values,
    management_versions,
    readiness_probe_tcp,
)
from components.prod.capi_providers import capi_providers
from components.prod.cluster_api_values import (
    capi_config_secret_name,
    capi_gate_env,
    readiness_probe_capi,
)
from components.stack import parse_platform
from components.versions import PINNED
from tests.support.contracts import crd_violations, missing_values_keys
from tests.support.harness import load_stack_config

# ------------------------------------------------------------------------------------ kind

LAB_ETCD = DefaultEtcd(members=1, cluster_domain="cluster.local", own_release=True)
PROD_ETCD = DefaultEtcd(members=3, cluster_domain="corp.example", own_release=False)


def test_kind_config_carries_name_image_and_subnets() -> None:
    text = kind_config("gpu-lab", "kindest/node:v1.35.0", "10.244.0.0/16", "10.96.0.0/12")
    config = yaml.safe_load(text)
    assert config == {
        "kind": "Cluster",
        "apiVersion": "kind.x-k8s.io/v1alpha4",
        "name": "gpu-lab",
        "networking": {"podSubnet": "10.244.0.0/16", "serviceSubnet": "10.96.0.0/12"},
        "nodes": [{"role": "control-plane", "image": "kindest/node:v1.35.0"}],
    }


def test_kind_config_is_deterministic() -> None:
    """No timestamps or random parts: a second `up` sees the same stdin and changes nothing."""
    args = ("gpu-lab", "kindest/node:v1.35.0", "10.244.0.0/16", "10.96.0.0/12")
    assert kind_config(*args) == kind_config(*args)


def test_cluster_identifier_is_stable_and_follows_the_cluster() -> None:
    config = kind_config("gpu-lab", "kindest/node:v1.35.0", "10.244.0.0/16", "10.96.0.0/12")
    other = kind_config("gpu-lab", "kindest/node:v1.34.0", "10.244.0.0/16", "10.96.0.0/12")
    first = kind_cluster_identifier("gpu-lab", config)
    assert first == kind_cluster_identifier("gpu-lab", config)
    assert first.startswith("kind-gpu-lab-")
    assert kind_cluster_identifier("gpu-lab", other) != first
    # Every input that replaces the kind cluster command changes it: its environment too (a new
    # docker network gives a new, empty cluster).
    env = {"KIND_CLUSTER_NAME": "gpu-lab", "KIND_EXPERIMENTAL_DOCKER_NETWORK": "kind"}
    on_kind = kind_cluster_identifier("gpu-lab", config, env)
    assert on_kind == kind_cluster_identifier("gpu-lab", config, dict(env))
    moved = {**env, "KIND_EXPERIMENTAL_DOCKER_NETWORK": "lab-net"}
    assert kind_cluster_identifier("gpu-lab", config, moved) != on_kind


# ------------------------------------------------------------------------------------ values


def test_metallb_runs_l2_without_frr() -> None:
    assert metallb_values() == {"frrk8s": {"enabled": False}}


def test_cert_manager_installs_its_crds_with_the_v1_21_key() -> None:
    assert cert_manager_values() == {"crds": {"enabled": True}}


def test_kamaji_lab_values_pin_the_image_and_name_the_default_datastore() -> None:
    values = kamaji_values("26.8.2-edge", LAB_ETCD)
    assert values["image"]["tag"] == "26.8.2-edge"
    assert values["defaultDatastoreName"] == "default"
    # The etcd is a release of its own (default_etcd_values), never the chart's subchart, whose
    # certificates would wait for cert-manager.
    assert values["kamaji-etcd"] == {"deploy": False}
    # The docs' keys etcd.* and datastore.* do not exist in the chart.
    assert "etcd" not in values
    assert "datastore" not in values


def test_a_default_etcd_not_of_its_own_is_kamajis_subchart_in_the_clusters_domain() -> None:
    """prod's: cert-manager renews its certificates (the chart's own values), in the cluster's
    DNS domain, with its members."""
    values = kamaji_values("26.8.2-edge", PROD_ETCD)
    assert values["defaultDatastoreName"] == "default"
    assert values["kamaji-etcd"] == {
        "deploy": True,
        "fullnameOverride": "kamaji-etcd",
        "replicas": 3,
        # Requests, so that no member is a BestEffort pod (ETCD_RESOURCES).
        "resources": {"requests": {"cpu": "100m", "memory": "256Mi"}},
        "clusterDomain": "corp.example",
        "datastore": {"enabled": True, "name": "default"},
        # 3.5 GiB: the chart's 8 GiB quota would let its 8Gi volume fill first.
        "quotaBackendBytes": str(7 * 2**29),
        # Its three members spread across nodes (components.availability).
        "topologySpreadConstraints": availability.topology_spread(
            availability.etcd_selector("kamaji")
        ),
    }


def test_the_default_etcd_needs_nothing_of_cert_manager(upstream_dir: Path) -> None:
    """Installed beside cert-manager, so its certificates must come from its own jobs: the
    chart's defaults (self-signed on, cert-manager off) are left alone, and the chart would fail
    its render with both on (templates/_helpers.tpl:220-222)."""
    defaults = yaml.safe_load((upstream_dir / "kamaji-etcd" / "values.yaml").read_text())
    values = default_etcd_values("cluster.local", 1)
    assert defaults["selfSignedCertificates"]["enabled"] is True
    assert defaults["certManager"]["enabled"] is False
    assert "certManager" not in values
    assert "selfSignedCertificates" not in values
    assert values["fullnameOverride"] == "kamaji-etcd"
    assert values["replicas"] == 1
    assert default_etcd_values("cluster.local", 3)["replicas"] == defaults["replicas"] == 3
    # Its DataStore is the program's: the chart's would need Kamaji's CRD, installed later.
    assert values["datastore"] == {"enabled": False}


def test_kamaji_etcd_jobs_run_a_pinned_cfssl_not_latest(upstream_dir: Path) -> None:
    defaults = yaml.safe_load((upstream_dir / "kamaji-etcd" / "values.yaml").read_text())
    assert defaults["jobs"]["cfssl"]["tag"] == ""  # the template's default: "latest"
    for values in (
        default_etcd_values("cluster.local", 1),
        kamaji_etcd_values("team-a-etcd", cluster_domain="cluster.local"),
    ):
        assert values["jobs"]["cfssl"] == {"tag": PINNED.kamaji_etcd_cfssl_tag}
        assert PINNED.kamaji_etcd_cfssl_tag not in ("", "latest")


def test_kamaji_etcd_jobs_run_the_backups_pinned_kubectl_and_etcd(upstream_dir: Path) -> None:
    """Issue 39: the chart tags kubectl with whatever minor the cluster runs
    (templates/_helpers.tpl:172-174); an offline management cluster mirrors only pinned images,
    the same ones the backups run."""
    defaults = yaml.safe_load((upstream_dir / "kamaji-etcd" / "values.yaml").read_text())
    assert defaults["jobs"]["kubectl"]["tag"] == ""
    for values in (
        default_etcd_values("cluster.local", 1),
        kamaji_etcd_values("team-a-etcd", cluster_domain="cluster.local", issuer="x"),
    ):
        jobs = values["jobs"]
        kubectl = f"{jobs['kubectl']['image']}:{jobs['kubectl']['tag']}"
        etcd = f"{jobs['etcd']['image']}:{jobs['etcd']['tag']}"
        assert (kubectl, etcd) == (PINNED.backup_kubectl_image, PINNED.backup_etcd_image)


def test_the_default_datastore_names_every_member_in_the_clusters_domain() -> None:
    datastore = default_etcd_datastore("corp.example", 3)
    assert datastore["metadata"] == {"name": "default"}
    assert datastore["spec"]["endpoints"] == [
        f"kamaji-etcd-{member}.kamaji-etcd.kamaji-system.svc.corp.example:2379"
        for member in range(3)
    ]
    assert default_etcd_datastore("cluster.local", 1)["spec"]["endpoints"] == [
        "kamaji-etcd-0.kamaji-etcd.kamaji-system.svc.cluster.local:2379"
    ]
    tls = datastore["spec"]["tlsConfig"]
    secrets = {ref["secretReference"]["name"] for part in tls.values() for ref in part.values()}
    assert secrets == {"kamaji-etcd-certs", "kamaji-etcd-root-client-certs"}


def test_the_default_datastore_fits_kamajis_crd(upstream_dir: Path) -> None:
    assert crd_violations(upstream_dir, default_etcd_datastore("cluster.local", 1)) == []


def test_kamaji_does_not_run_at_the_charts_100mi_limit(upstream_dir: Path) -> None:
    """The chart's default limit (100Mi) OOM-kills a controller that also serves the Fail
    webhooks; Kamaji's guides install without limits. Every default key is overridden, so none
    of the chart's small numbers survives Helm's merge."""
    defaults = yaml.safe_load((upstream_dir / "kamaji" / "values.yaml").read_text())["resources"]
    for default_etcd in (LAB_ETCD, PROD_ETCD, None):
        resources = kamaji_values(PINNED.kamaji_image_tag, default_etcd)["resources"]
        assert {(k, r) for k in defaults for r in defaults[k]} <= {
            (k, r) for k in resources for r in resources[k]
        }
        assert resources["limits"]["memory"] != defaults["limits"]["memory"]
        assert _mebibytes(resources["limits"]["memory"]) >= 512
        assert _mebibytes(resources["requests"]["memory"]) <= _mebibytes(
            resources["limits"]["memory"]
        )


def _mebibytes(quantity: str) -> int:
    units = {"Mi": 1, "Gi": 1024}
    return int(quantity[:-2]) * units[quantity[-2:]]


def test_kamaji_without_a_default_etcd_has_no_default_datastore() -> None:
    values = kamaji_values("26.8.2-edge", None)
    assert values["kamaji-etcd"] == {"deploy": False}
    assert values["defaultDatastoreName"] == ""


@pytest.mark.parametrize(
    ("chart", "values"),
    [
        ("metallb", metallb_values()),
        ("cert-manager", cert_manager_values()),
        ("kamaji", kamaji_values(PINNED.kamaji_image_tag, LAB_ETCD)),
        ("kamaji", kamaji_values(PINNED.kamaji_image_tag, PROD_ETCD)),
        ("kamaji", kamaji_values(PINNED.kamaji_image_tag, None)),
        ("kamaji-etcd", default_etcd_values("cluster.local", 1)),
    ],
)
def test_values_keys_exist_in_the_pinned_charts(
    upstream_dir: Path, chart: str, values: dict[str, object]
) -> None:
    assert missing_values_keys(upstream_dir, chart, values) == []


def test_cert_manager_crds_default_is_off_upstream(upstream_dir: Path) -> None:
    """Why the value is set at all: the pinned chart does not install CRDs by default."""
    defaults = yaml.safe_load((upstream_dir / "cert-manager" / "values.yaml").read_text())
    assert defaults["crds"]["enabled"] is False


# ----------------------------------------------------------------------------- MetalLB


def test_ip_address_pool_and_advertisement() -> None:
    pool = ip_address_pool(["172.18.255.239-172.18.255.254"])
    assert pool["apiVersion"] == "metallb.io/v1beta1"
    assert pool["metadata"] == {"name": "gpu-platform-lab", "namespace": "metallb-system"}
    assert pool["spec"] == {"addresses": ["172.18.255.239-172.18.255.254"], "autoAssign": False}
    advertisement = l2_advertisement()
    assert advertisement["kind"] == "L2Advertisement"
    assert advertisement["spec"] == {"ipAddressPools": ["gpu-platform-lab"]}


def test_metallb_objects_validate_against_the_pinned_crds(upstream_dir: Path) -> None:
    assert crd_violations(upstream_dir, ip_address_pool(["10.0.0.1-10.0.0.2"])) == []
    assert crd_violations(upstream_dir, l2_advertisement()) == []


# ------------------------------------------------------------------------- Cluster API


def test_reference_providers_each_in_its_own_namespace() -> None:
    providers = capi_providers(ClusterApiVersions())
    assert [(p.kind, p.name) for p in providers] == [
        ("CoreProvider", "cluster-api"),
        ("BootstrapProvider", "kubeadm"),
        ("ControlPlaneProvider", "kamaji"),
        ("InfrastructureProvider", "metal3"),
    ]
    namespaces = [p.namespace for p in providers]
    assert len(set(namespaces)) == 4
    assert "kamaji-system" not in namespaces  # Kamaji itself lives there
    assert providers[2].version == "v0.20.0"
    assert providers[3].namespace == "capm3-system"


def test_docker_infrastructure_is_pluggable() -> None:
    versions = ClusterApiVersions(
        infrastructure=InfrastructureProvider(name="docker", version="v1.13.5")
    )
    infra = capi_providers(versions)[3]
    assert (infra.name, infra.namespace, infra.version) == ("docker", "capd-system", "v1.13.5")
    assert "dockermachinetemplates.infrastructure.cluster.x-k8s.io" in infra.crds


def test_kamaji_provider_patches_docker_clusters_only_when_told_to() -> None:
    """The Kamaji control-plane provider refuses infrastructure clusters it does not know
    (CAPD's DockerCluster) unless its dynamic-patch feature gate lists them; Metal3 is known."""
    docker = capi_providers(
        ClusterApiVersions(infrastructure=InfrastructureProvider(name="docker", version="v1.13.5"))
    )[2].manifest()
    assert docker["spec"]["manager"] == {
        "featureGates": {"DynamicInfrastructureClusterPatch": True},
    }
    (container,) = docker["spec"]["deployment"]["containers"]
    assert container["args"] == {"--dynamic-infrastructure-clusters": "DockerCluster"}
    metal3 = capi_providers(ClusterApiVersions())[2].manifest()
    assert "manager" not in metal3["spec"]
    assert "args" not in metal3["spec"]["deployment"]["containers"][0]


# Flags the Kamaji provider v0.20.0 manifest already passes its container
# (config/control-plane-components.yaml:15427-15429); cluster-api-operator v0.28.0 refuses a
# manager.additionalArgs key that is already there ("arg ... already exists",
# internal/controller/component_customizer.go:293-302), so the provider never installs.
KAMAJI_PROVIDER_MANIFEST_FLAGS = (
    "--leader-elect",
    "--feature-gates",
    "--dynamic-infrastructure-clusters",
)


@pytest.mark.parametrize("infrastructure", ["metal3", "docker"])
def test_kamaji_provider_adds_no_flag_its_manifest_already_has(infrastructure: str) -> None:
    versions = ClusterApiVersions(
        infrastructure=InfrastructureProvider(name=infrastructure, version="v1.13.2")
    )
    manager = capi_providers(versions)[2].manifest()["spec"].get("manager") or {}
    assert set(manager.get("additionalArgs") or {}) & set(KAMAJI_PROVIDER_MANIFEST_FLAGS) == set()


def _bytes(quantity: str) -> int:
    units = {"Ki": 2**10, "Mi": 2**20, "Gi": 2**30}
    for suffix, factor in units.items():
        if quantity.endswith(suffix):
            return int(quantity[: -len(suffix)]) * factor
    return int(quantity)


@pytest.mark.parametrize("infrastructure", ["metal3", "docker"])
def test_kamaji_provider_controller_gets_memory_for_its_secret_cache(infrastructure: str) -> None:
    """Upstream runs the container named ``controller`` with a 128Mi limit while it caches every
    Secret of the cluster; the override must name that container or the operator ignores it."""
    versions = ClusterApiVersions(
        infrastructure=InfrastructureProvider(name=infrastructure, version="v1.13.2")
    )
    spec = capi_providers(versions)[2].manifest()["spec"]
    (container,) = spec["deployment"]["containers"]
    assert container["name"] == "controller"
    limits, requests = container["resources"]["limits"], container["resources"]["requests"]
    assert _bytes(limits["memory"]) > _bytes("128Mi")
    assert _bytes(requests["memory"]) <= _bytes(limits["memory"])
    # The other providers keep their upstream deployments.
    for other in capi_providers(versions):
        if other.kind != "ControlPlaneProvider":
            assert "deployment" not in other.manifest()["spec"], other.name


def test_provider_manifest() -> None:
    core = capi_providers(ClusterApiVersions())[0]
    assert core.manifest() == {
        "apiVersion": "operator.cluster.x-k8s.io/v1alpha2",
        "kind": "CoreProvider",
        "metadata": {"name": "cluster-api", "namespace": "capi-system"},
        "spec": {"version": "v1.13.5"},
    }
    assert core.resource == "coreproviders.operator.cluster.x-k8s.io"


@pytest.mark.parametrize("infrastructure", ["metal3", "docker"])
def test_provider_objects_validate_against_the_pinned_crds(
    upstream_dir: Path, infrastructure: str
) -> None:
    versions = ClusterApiVersions(
        infrastructure=InfrastructureProvider(name=infrastructure, version="v1.13.2")
    )
    for provider in capi_providers(versions):
        assert crd_violations(upstream_dir, provider.manifest()) == [], provider.kind


def test_a_fetch_url_would_validate_too(upstream_dir: Path) -> None:
    """If a provider ever needs one, spec.fetchConfig.url is the CRD's field for it."""
    from dataclasses import replace

    kamaji = capi_providers(ClusterApiVersions())[2]
    url = (
        "https://github.com/clastix/cluster-api-control-plane-provider-kamaji/releases/"
        "v0.20.0/control-plane-components.yaml"
    )
    manifest = replace(kamaji, fetch_url=url).manifest()
    assert manifest["spec"]["fetchConfig"] == {"url": url}
    assert crd_violations(upstream_dir, manifest) == []


def test_fetch_sources_and_config_secret_validate_against_the_pinned_crds(
    upstream_dir: Path,
) -> None:
    """An OCI artifact, a ConfigMap selector and the token's configSecret are fields of the
    v0.28.0 provider CRDs, which allow one fetch source only (their CEL rule is evaluated)."""
    versions = ClusterApiVersions(
        fetch=ProviderFetchSources(
            core=ProviderFetch(oci="registry.example.internal/capi/core"),
            bootstrap_kubeadm=ProviderFetch(config_map_labels={"provider-components": "kubeadm"}),
            control_plane_kamaji=ProviderFetch(oci="http://registry.example.internal/kamaji:v1"),
            infrastructure=ProviderFetch(config_map_labels={"provider-components": "metal3"}),
        )
    )
    secret = capi_config_secret_name("ghp_example")
    for provider in capi_providers(versions):
        manifest = provider.manifest(config_secret=secret)
        assert manifest["spec"]["configSecret"] == {"name": secret, "namespace": provider.namespace}
        assert len(manifest["spec"]["fetchConfig"]) == 1
        assert crd_violations(upstream_dir, manifest) == [], provider.kind
    both = capi_providers(ClusterApiVersions())[0].manifest()
    both["spec"]["fetchConfig"] = {"oci": "registry.example.internal/x", "url": "https://x"}
    assert crd_violations(upstream_dir, both) != []


def test_config_secret_name_follows_the_token() -> None:
    """The operator treats a configSecret's content as immutable and asks for a new name on a
    change: another token must give another name, the same token the same one."""
    name = capi_config_secret_name("ghp_one")
    assert name == capi_config_secret_name("ghp_one")
    assert name != capi_config_secret_name("ghp_two")
    assert "ghp_one" not in name
    assert len(name) <= 253


def test_cert_manager_gate_waits_for_the_crds_the_charts_use_and_the_webhook() -> None:
    """An adopted cert-manager's gate: the CRD names are cert-manager's own, and the probe is an
    Issuer, a kind its validating webhook covers."""
    env = cert_manager_gate_env()
    assert env["CERT_MANAGER_CRDS"].split() == list(CERT_MANAGER_CRDS)
    probe = json.loads(env["PROBE_MANIFEST"])
    assert probe["apiVersion"] == "cert-manager.io/v1"
    assert probe["kind"] == "Issuer"
    assert probe["spec"] == {"selfSigned": {}}
    assert "KUBECONFIG_CONTENT" not in env


def test_gated_crds_exist_upstream(upstream_dir: Path) -> None:
    """The CRDs the CAPI gate waits for are the ones the pinned providers ship."""
    names: set[str] = set()
    for path in upstream_dir.rglob("*.yaml"):
        for document in yaml.safe_load_all(path.read_text()):
            if isinstance(document, dict) and document.get("kind") == "CustomResourceDefinition":
                names.add(document["metadata"]["name"])
    for infrastructure in ("metal3", "docker"):
        versions = ClusterApiVersions(
            infrastructure=InfrastructureProvider(name=infrastructure, version="v1.13.2")
        )
        for provider in capi_providers(versions):
            assert set(provider.crds) <= names, provider.name


# ----------------------------------------------------------------------------- gates


def test_readiness_probe_is_a_valid_tenant_control_plane(upstream_dir: Path) -> None:
    probe = readiness_probe_tcp("v1.35.0")
    assert probe["kind"] == "TenantControlPlane"
    assert probe["spec"]["kubernetes"]["version"] == "v1.35.0"
    assert crd_violations(upstream_dir, probe) == []


def test_kamaji_gate_waits_for_crds_controller_etcd_datastore_and_webhooks() -> None:
    env = kamaji_gate_env("v1.35.0", with_etcd=True)
    assert env["WAIT_CRDS"].split() == [
        "tenantcontrolplanes.kamaji.clastix.io",
        "datastores.kamaji.clastix.io",
    ]
    assert env["WAIT_ROLLOUTS"].split() == [
        "kamaji-system/deployment/kamaji",
        "kamaji-system/statefulset/kamaji-etcd",
    ]
    assert env["WAIT_CONDITIONS"] == (
        "-/datastores.kamaji.clastix.io/default/jsonpath={.status.ready}=true"
    )
    assert json.loads(env["DRY_RUN_MANIFEST"])["kind"] == "TenantControlPlane"
    assert "KUBECONFIG_CONTENT" not in env  # the component adds it, as a secret


def test_kamaji_gate_without_etcd_waits_for_no_datastore() -> None:
    env = kamaji_gate_env("v1.35.0", with_etcd=False)
    assert env["WAIT_ROLLOUTS"] == "kamaji-system/deployment/kamaji"
    assert env["WAIT_CONDITIONS"] == ""


def test_metallb_gate_dry_runs_the_pool() -> None:
    pool = ip_address_pool(["10.0.0.1-10.0.0.2"])
    env = metallb_gate_env(pool)
    assert json.loads(env["DRY_RUN_MANIFEST"]) == pool
    assert env["WAIT_ROLLOUTS"] == "metallb-system/deployment/metallb-controller"


def test_capi_gate_waits_for_every_provider_and_the_tenant_crds() -> None:
    env = capi_gate_env(capi_providers(ClusterApiVersions()))
    conditions = env["WAIT_CONDITIONS"].split()
    assert (
        "capi-kamaji-control-plane-system/controlplaneproviders.operator.cluster.x-k8s.io/"
        "kamaji/condition=Ready"
    ) in conditions
    assert len(conditions) == 4
    crds = env["WAIT_CRDS"].split()
    for crd in (
        "kamajicontrolplanes.controlplane.cluster.x-k8s.io",
        "clusters.cluster.x-k8s.io",
        "machinedeployments.cluster.x-k8s.io",
    ):
        assert crd in crds


@pytest.mark.parametrize(
    ("infrastructure", "kind"), [("metal3", "Metal3Cluster"), ("docker", "DockerCluster")]
)
def test_capi_gate_dry_runs_what_tenants_and_pools_create_through_every_webhook(
    infrastructure: str, kind: str, upstream_dir: Path
) -> None:
    """Provider Ready proves the Deployments run, not that their webhooks answer (cert-manager's
    CA injection lags); the gate also submits a Cluster, a KubeadmConfigTemplate and the
    infrastructure cluster, each valid for its pinned CRD so that only a webhook can refuse it."""
    versions = ClusterApiVersions(
        infrastructure=InfrastructureProvider(name=infrastructure, version="v1.13.2")
    )
    env = capi_gate_env(capi_providers(versions))
    probe = json.loads(env["DRY_RUN_MANIFEST"])
    assert (probe["apiVersion"], probe["kind"]) == ("v1", "List")
    assert probe == readiness_probe_capi(infrastructure)
    kinds = [item["kind"] for item in probe["items"]]
    assert kinds == ["Cluster", "KubeadmConfigTemplate", kind]
    crds = set(env["WAIT_CRDS"].split())
    for item in probe["items"]:
        assert crd_violations(upstream_dir, item) == [], item["kind"]
        plural = f"{item['kind'].lower()}s.{item['apiVersion'].split('/')[0]}"
        assert plural in crds, plural  # the gate waits for the CRD before the dry run
    cluster = probe["items"][0]["spec"]
    assert cluster["infrastructureRef"]["kind"] == kind


def test_gate_tokens_must_not_contain_whitespace() -> None:
    with pytest.raises(ValueError, match="without whitespace"):
        gate_env(crds=["two words"])


def test_gate_parameters_are_deterministic() -> None:
    """Same config, same environment: a second `up` does not re-run a gate."""
    assert kamaji_gate_env("v1.35.0", True) == kamaji_gate_env("v1.35.0", True)


# ----------------------------------------------------------------------------- versions


def test_versions_report_what_each_stack_deploys() -> None:
    lab = parse_platform(load_stack_config("lab")["gpu-platform:platform"])
    versions = management_versions(lab)
    assert versions["kamaji_image_tag"] == PINNED.kamaji_image_tag
    assert versions["kind_node_image"] == PINNED.kind_node_image
    prod = parse_platform(load_stack_config("prod")["gpu-platform:platform"])
    prod_versions = management_versions(prod)
    assert prod_versions["kamaji_control_plane_provider"] == "v0.20.0"
    assert prod_versions["infrastructure_provider"] == {"name": "metal3", "version": "v1.13.2"}
