"""Every custom resource of the prod stack has its CRD on the cluster it lands on.

Two sources of custom resources are checked here: the objects the program registers on the
management cluster (Cluster API, Metal3, Kamaji, provider objects) and the objects the charts it
installs render from the program's values (the GPU Operator's ClusterPolicy inside each tenant,
each tenant's kamaji-etcd DataStore on the management cluster). A CRD is there when a chart on
that cluster ships it (``crds/`` or a rendered CustomResourceDefinition) or when a Cluster API
provider object the stack declares installs it; the provider's CRDs are the pinned copies in
``../shared/upstream``. Rendering needs the chart archives (skipped with one line without them).
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.chart_cache import charts_dir, kamaji_chart_dir
from components.versions import PINNED, HelmChart
from tests.support.contracts import crd_index
from tests.support.harness import Recording

RELEASE = "kubernetes:helm.sh/v3:Release"
CHART_CACHE = charts_dir()
PROVIDER_GROUP = "operator.cluster.x-k8s.io"
# Which Cluster API provider object installs the CRDs of an API group (clusterctl's contract:
# core, bootstrap, control-plane and infrastructure providers each own their group).
GROUP_PROVIDER = {
    "cluster.x-k8s.io": ("CoreProvider", "cluster-api"),
    "bootstrap.cluster.x-k8s.io": ("BootstrapProvider", "kubeadm"),
    "controlplane.cluster.x-k8s.io": ("ControlPlaneProvider", "kamaji"),
}
INFRASTRUCTURE_GROUP = "infrastructure.cluster.x-k8s.io"
INFRASTRUCTURE_PREFIX = {"metal3": "Metal3", "docker": "Docker"}
# API groups Kubernetes serves itself.
BUILT_IN_GROUPS = {
    "",
    "v1",
    "apps",
    "batch",
    "policy",
    "autoscaling",
    "rbac.authorization.k8s.io",
    "networking.k8s.io",
    "admissionregistration.k8s.io",
    "apiextensions.k8s.io",
    "scheduling.k8s.io",
    "storage.k8s.io",
    "node.k8s.io",
    "coordination.k8s.io",
    "discovery.k8s.io",
    "certificates.k8s.io",
}


def _group(api_version: str) -> str:
    return api_version.rpartition("/")[0] if "/" in api_version else ""


def _local_chart(path: Path) -> Any:
    """The local Kamaji chart directory pinned by content (components/chart_cache.py)."""
    if not path.is_dir():
        pytest.skip(f"chart {path} is absent: run `make fetch-upstream`")
    helm_python = pytest.importorskip("helm_python")
    return helm_python.Chart.load(str(path))


def _archive(chart: HelmChart) -> Any:
    path = CHART_CACHE / f"{chart.chart}-{chart.version}.tgz"
    if not path.is_file():
        pytest.skip(f"chart archive {path} is absent: run `make fetch-upstream`")
    helm_python = pytest.importorskip("helm_python")
    return helm_python.Chart.load_archive(path.read_bytes())


# Helm splits a rendered template into documents on this pattern (helm/pkg/releaseutil
# SplitManifests), which also accepts "---# comment" that YAML itself does not.
HELM_DOCUMENT_SEPARATOR = re.compile(r"(?:^|\s*\n)---\s*")


def _documents(texts: Iterator[str]) -> Iterator[dict[str, Any]]:
    for text in texts:
        for part in HELM_DOCUMENT_SEPARATOR.split(text):
            document = yaml.safe_load(part) if part.strip() else None
            if isinstance(document, dict):
                yield document


def _chart_crds(chart: Any) -> set[tuple[str, str]]:
    """(group, kind) of every CRD a chart ships in crds/ (subcharts included)."""
    return {
        (d["spec"]["group"], d["spec"]["names"]["kind"])
        for d in _documents(crd["data"] for crd in chart.crds)
        if d.get("kind") == "CustomResourceDefinition"
    }


def _rendered(chart: Any, release: Any) -> list[dict[str, Any]]:
    manifests = chart.render(
        release.inputs.get("values") or {},
        name=release.inputs["name"],
        namespace=release.inputs["namespace"],
        is_install=True,
    )
    texts = (text for path, text in manifests.items() if path.endswith((".yaml", ".yml")))
    return list(_documents(texts))


def _custom(objects: list[dict[str, Any]]) -> set[tuple[str, str]]:
    return {
        (_group(str(o.get("apiVersion", ""))), str(o.get("kind")))
        for o in objects
        if _group(str(o.get("apiVersion", ""))) not in BUILT_IN_GROUPS
    }


def _releases(prod: Recording, provider: str, chart: str | None = None) -> list[Any]:
    return [
        r
        for r in prod.of_type(RELEASE)
        if (p := prod.provider_of(r)) is not None
        and p.name == provider
        and (chart is None or r.inputs.get("chart") == chart)
    ]


def _provided_by_capi(prod: Recording, upstream_dir: Path) -> set[tuple[str, str]]:
    """The CRDs the stack's Cluster API provider objects install (their pinned copies)."""
    declared = {
        (r.inputs["kind"], r.inputs["metadata"]["name"])
        for r in prod.resources
        if r.type.startswith(f"kubernetes:{PROVIDER_GROUP}/")
    }
    provided: set[tuple[str, str]] = set()
    for group, _, kind in crd_index(upstream_dir):
        owner = GROUP_PROVIDER.get(group)
        if owner is not None and owner in declared:
            provided.add((group, kind))
        if group == INFRASTRUCTURE_GROUP:
            for name, prefix in INFRASTRUCTURE_PREFIX.items():
                if kind.startswith(prefix) and ("InfrastructureProvider", name) in declared:
                    provided.add((group, kind))
    return provided


def test_every_cr_the_program_puts_on_the_management_cluster_has_its_crd(
    prod: Recording, upstream_dir: Path
) -> None:
    management = "management-provider"
    available = _provided_by_capi(prod, upstream_dir)
    for release in _releases(prod, management):
        if release.inputs["chart"] == str(kamaji_chart_dir()):
            loaded = _local_chart(kamaji_chart_dir())
        else:
            chart = {c.chart: c for c in vars(PINNED).values() if isinstance(c, HelmChart)}[
                release.inputs["chart"]
            ]
            loaded = _archive(chart)
        available |= _chart_crds(loaded)
        if release.inputs["chart"] in ("cert-manager", "cluster-api-operator"):
            # These render their CRDs as templates (cert-manager with crds.enabled).
            available |= {
                (d["spec"]["group"], d["spec"]["names"]["kind"])
                for d in _rendered(loaded, release)
                if d.get("kind") == "CustomResourceDefinition"
            }
    registered = {
        (_group(str(r.inputs.get("apiVersion", ""))), str(r.inputs.get("kind")))
        for r in prod.resources
        if r.type.startswith("kubernetes:")
        and r.type != RELEASE
        and (p := prod.provider_of(r)) is not None
        and p.name == management
        and _group(str(r.inputs.get("apiVersion", ""))) not in BUILT_IN_GROUPS
    }
    assert registered, "prod registers no custom resource on the management cluster"
    assert registered - available == set()


def test_every_cr_the_gpu_operator_renders_has_its_crd_in_the_chart(prod: Recording) -> None:
    releases = [r for r in prod.of_type(RELEASE) if r.inputs.get("chart") == "gpu-operator"]
    assert releases
    chart = _archive(PINNED.gpu_operator)
    shipped = _chart_crds(chart)
    for release in releases:
        rendered = _custom(_rendered(chart, release))
        assert ("nvidia.com", "ClusterPolicy") in rendered, release.name
        assert rendered - shipped == set(), release.name


def test_each_tenants_kamaji_etcd_renders_a_datastore_kamaji_serves(
    prod: Recording, upstream_dir: Path
) -> None:
    """The dedicated kamaji-etcd's DataStore lands on the management cluster, whose Kamaji chart
    ships the DataStore CRD (pinned copy in upstream/kamaji/crds)."""
    releases = _releases(prod, "management-provider", "kamaji-etcd")
    assert releases
    chart = _archive(PINNED.kamaji_etcd)
    served = {(group, kind) for group, _, kind in crd_index(upstream_dir)}
    for release in releases:
        rendered = _custom(_rendered(chart, release))
        assert ("kamaji.clastix.io", "DataStore") in rendered, release.name
        assert rendered - served - _chart_crds(chart) == set(), release.name
