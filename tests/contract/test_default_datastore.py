"""The kamaji-etcd releases: the lab's default etcd, installed as its own release beside
cert-manager, with the DataStore ``default`` created by the program (``components.
management_values``); prod's default etcd inside Kamaji's release; prod's dedicated etcds with
cert-manager certificates. The facts that rest on the pinned charts, read from what they render.

Rendered from the pinned archive (``make charts``); skipped with one line when it is absent.
"""

from __future__ import annotations

import shlex
from typing import Any

import pytest

from components import chart_cache
from components.config import DedicatedDataStore
from components.lab.management import DEFAULT_ETCD_IMAGES
from components.management_values import (
    DEFAULT_DATASTORE,
    KAMAJI_ETCD_NAME,
    KAMAJI_NAMESPACE,
    DefaultEtcd,
    default_etcd_datastore,
    default_etcd_values,
    kamaji_values,
)
from components.prod.tenant_values import dedicated_etcd_issuer, kamaji_etcd_values
from components.versions import PINNED
from tests.support.charts import (
    ChartUnavailableError,
    ClusterCapabilities,
    RenderedRelease,
    render_pinned_or_skip,
    render_release,
)
from tests.support.kube_schemas import builtin_api_versions

MANAGEMENT_VERSION = "v1.35.0"  # the lab's kind node (PINNED.kind_node_image)
SHAPES = (("cluster.local", 1), ("corp.example", 3))


def _render(values: dict[str, Any]) -> RenderedRelease:
    chart = PINNED.kamaji_etcd
    return render_pinned_or_skip(
        chart.chart,
        chart.version,
        values,
        name=KAMAJI_ETCD_NAME,
        namespace=KAMAJI_NAMESPACE,
        kube_version=MANAGEMENT_VERSION,
    )


@pytest.mark.parametrize(("domain", "members"), SHAPES)
def test_the_programs_datastore_is_the_charts_own(domain: str, members: int) -> None:
    """The same release with the chart's own DataStore turned on renders exactly the spec the
    program creates: same members, same certificate Secrets, same keys."""
    values = default_etcd_values(domain, members)
    with_chart_datastore = {**values, "datastore": {"enabled": True, "name": DEFAULT_DATASTORE}}
    [charts] = _render(with_chart_datastore).of_kind("DataStore")
    ours = default_etcd_datastore(domain, members)
    assert charts["apiVersion"] == ours["apiVersion"]
    assert charts["metadata"]["name"] == ours["metadata"]["name"]
    assert charts["spec"] == ours["spec"]


def test_the_release_itself_creates_no_datastore() -> None:
    """Installed before Kamaji, whose CRD a DataStore needs."""
    assert _render(default_etcd_values("cluster.local", 1)).of_kind("DataStore") == []


def test_the_release_needs_no_cert_manager_kind() -> None:
    """Installed beside cert-manager, before its CRDs serve: nothing of cert-manager.io."""
    rendered = _render(default_etcd_values("cluster.local", 1))
    kinds = {str(obj.get("apiVersion", "")) for obj in rendered.all_objects()}
    assert not any(api.startswith("cert-manager.io/") for api in kinds)


def test_its_jobs_store_the_secrets_the_datastore_names() -> None:
    """The pre-install job creates the CA and root-client Secrets the DataStore reads."""
    rendered = _render(default_etcd_values("cluster.local", 1))
    scripts = " ".join(
        " ".join(container.get("command", []) + container.get("args", []))
        for job in rendered.pre_install_hooks
        if job.get("kind") == "Job"
        for container in job["spec"]["template"]["spec"].get("containers", [])
    )
    words = set(shlex.split(scripts.replace(";", " ")))
    datastore = default_etcd_datastore("cluster.local", 1)
    named = {
        ref["secretReference"]["name"]
        for part in datastore["spec"]["tlsConfig"].values()
        for ref in part.values()
    }
    assert named <= words, named - words


def test_every_image_of_the_release_is_pinned_and_not_pulled_ahead() -> None:
    """The release starts at once, so the management pre-pull leaves its images out
    (``STARTS_AT_ONCE``): the list there must be what the chart runs."""
    rendered = _render(default_etcd_values("cluster.local", 1))
    images = {
        container["image"]
        for obj in rendered.all_objects()
        if obj.get("kind") in ("Job", "StatefulSet")
        for key in ("initContainers", "containers")
        for container in obj["spec"]["template"]["spec"].get(key, [])
    }
    assert f"cfssl/cfssl:{PINNED.kamaji_etcd_cfssl_tag}" in images
    assert not [image for image in images if image.endswith(":latest") or ":" not in image]
    assert images == DEFAULT_ETCD_IMAGES


def test_prods_default_etcd_is_kamajis_subchart_in_the_clusters_domain() -> None:
    """prod's default etcd (``management.existing.kamajiEtcd``) stays in Kamaji's release, its
    certificates from cert-manager (which renews them), its members and DataStore endpoints in
    the management cluster's DNS domain."""
    etcd = DefaultEtcd(members=3, cluster_domain="corp.example", own_release=False)
    inputs = {
        "chart": chart_cache.kamaji_chart_input(),
        "name": "kamaji",
        "namespace": KAMAJI_NAMESPACE,
        "values": kamaji_values(PINNED.kamaji_image_tag, etcd),
    }
    caps = ClusterCapabilities(MANAGEMENT_VERSION, builtin_api_versions(MANAGEMENT_VERSION))
    try:
        rendered = render_release(inputs, caps)
    except ChartUnavailableError as missing:
        pytest.skip(str(missing))
    [datastore] = rendered.of_kind("DataStore")
    assert datastore["metadata"]["name"] == DEFAULT_DATASTORE
    assert datastore["spec"]["endpoints"] == [
        f"kamaji-etcd-{member}.kamaji-etcd.kamaji-system.svc.corp.example:2379"
        for member in range(3)
    ]
    certificates = [c["metadata"]["name"] for c in rendered.of_kind("Certificate")]
    assert any(name.startswith("kamaji-etcd") for name in certificates), certificates
    images = [
        container["image"]
        for job in rendered.of_kind("Job")
        for key in ("initContainers", "containers")
        for container in job["spec"]["template"]["spec"].get(key, [])
    ]
    assert not [image for image in images if "cfssl" in image], images


def test_a_dedicated_etcd_takes_renewed_certificates_from_its_issuer() -> None:
    """prod's dedicated etcds: every certificate from cert-manager (renewed 7 days before its
    90 days run out), the CA rooted in the tenant's self-signed Issuer, no cfssl job; the root
    client certificate is etcd's ``root`` user, and the DataStore reads the CA and it."""
    values = kamaji_etcd_values("team-a", DedicatedDataStore(), cluster_domain="corp.example")
    issuer = dedicated_etcd_issuer("team-a", "team-a", {})
    chart = PINNED.kamaji_etcd
    rendered = render_pinned_or_skip(
        chart.chart,
        chart.version,
        values,
        name="team-a-etcd",
        namespace="team-a",
        kube_version=MANAGEMENT_VERSION,
    )
    certificates = {c["metadata"]["name"]: c["spec"] for c in rendered.of_kind("Certificate")}
    ca = certificates["team-a-etcd-ca"]
    assert ca["isCA"] is True
    assert ca["issuerRef"]["name"] == issuer["metadata"]["name"]
    assert ca["issuerRef"]["kind"] == issuer["kind"]
    leaves = {name: spec for name, spec in certificates.items() if name != "team-a-etcd-ca"}
    assert set(leaves) == {
        "team-a-etcd-server-certs",
        "team-a-etcd-peer-certs",
        "team-a-etcd-client-certs",
    }
    for spec in leaves.values():
        assert spec["issuerRef"]["name"] == "team-a-etcd-ca"
        assert spec.get("renewBefore")
    assert leaves["team-a-etcd-client-certs"]["commonName"] == "root"
    [datastore] = rendered.of_kind("DataStore")
    secrets = {
        ref["secretReference"]["name"]
        for part in datastore["spec"]["tlsConfig"].values()
        for ref in part.values()
    }
    assert secrets == {"team-a-etcd-ca", "team-a-etcd-client-certs"}
    images = {
        container["image"]
        for obj in rendered.all_objects()
        if obj.get("kind") == "Job"
        for key in ("initContainers", "containers")
        for container in obj["spec"]["template"]["spec"].get(key, [])
    }
    assert not [image for image in images if "cfssl" in image], images
