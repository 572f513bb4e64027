"""Calico's custom resources have their CRDs in every tenant, installed before the operator.

Since Calico v3.32.0 the tigera-operator chart ships no CRDs (projectcalico/calico v3.32.1
``charts/tigera-operator/README.md``): its ``Installation`` fails to install unless the
``crd.projectcalico.org.v1`` chart of the same release is installed first. Rendered from the
pinned archives with Helm's engine; skipped when they are absent.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest

from components.versions import PINNED, HelmChart
from tests.support.charts import release_payload, render
from tests.support.harness import Recording, Registration

RELEASE = "kubernetes:helm.sh/v3:Release"
MIB = 1024 * 1024
# Helm v3 keeps a release in one Secret, whose data the API server limits to 1 MiB
# (k8s.io/api core/v1 MaxSecretSize). The estimate uses Python's zlib for Go's deflate, which
# compresses a few per cent worse: keep that much headroom.
RELEASE_SECRET_BUDGET = int(0.97 * MIB)

# API groups the Kubernetes API server serves itself (no CRD needed).
BUILT_IN_GROUPS = frozenset(
    {
        "",
        "admissionregistration.k8s.io",
        "apiextensions.k8s.io",
        "apiregistration.k8s.io",
        "apps",
        "authentication.k8s.io",
        "authorization.k8s.io",
        "autoscaling",
        "batch",
        "certificates.k8s.io",
        "coordination.k8s.io",
        "discovery.k8s.io",
        "events.k8s.io",
        "flowcontrol.apiserver.k8s.io",
        "networking.k8s.io",
        "node.k8s.io",
        "policy",
        "rbac.authorization.k8s.io",
        "resource.k8s.io",
        "scheduling.k8s.io",
        "storage.k8s.io",
    }
)


def _group_version(api_version: str) -> tuple[str, str]:
    group, _, version = api_version.rpartition("/")
    return group, version


def _rendered(release: Registration) -> list[dict[str, Any]]:
    chart = HelmChart(
        release.inputs["repositoryOpts"]["repo"], release.inputs["chart"], release.inputs["version"]
    )
    return render(
        chart,
        release.inputs.get("values") or {},
        name=release.inputs["name"],
        namespace=release.inputs["namespace"],
    )


def _served(crds: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (crd["spec"]["group"], version["name"], crd["spec"]["names"]["kind"])
        for crd in crds
        for version in crd["spec"]["versions"]
        if version.get("served")
    }


def _tenant_releases(recording: Recording, tenant: str) -> dict[str, Registration]:
    prefix = f"{tenant}-"
    releases = {}
    for release in recording.of_type(RELEASE):
        owner = recording.component_of(release, ":GpuTenant")
        if owner is not None and owner.name == tenant:
            releases[release.name.removeprefix(prefix)] = release
    return releases


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_calico_custom_resource_has_its_crd_installed_first(
    stack: str, recordings: Callable[[str, bool], Recording]
) -> None:
    recording = recordings(stack, False)
    tenants = recording.of_type("gpu-platform:index:GpuTenant")
    assert tenants
    for tenant in tenants:
        releases = _tenant_releases(recording, tenant.name)
        operator = releases["calico"]
        custom = {
            (*_group_version(obj["apiVersion"]), obj["kind"])
            for obj in _rendered(operator)
            if _group_version(obj["apiVersion"])[0] not in BUILT_IN_GROUPS
        }
        assert ("operator.tigera.io", "v1", "Installation") in custom
        crd_releases = [
            r
            for r in releases.values()
            if r is not operator
            and any(obj["kind"] == "CustomResourceDefinition" for obj in _rendered(r))
        ]
        served = _served(
            [
                obj
                for release in crd_releases
                for obj in _rendered(release)
                if obj["kind"] == "CustomResourceDefinition"
            ]
        )
        assert custom - served == set(), f"{tenant.name}: no CRD serves {sorted(custom - served)}"
        for release in crd_releases:
            assert release.urn in operator.dependencies, (
                f"{tenant.name}: the operator release does not wait for {release.name}"
            )


def test_the_tigera_operator_chart_ships_no_crds() -> None:
    """The upstream fact the CRD release rests on (it would be redundant if this changed)."""
    objects = render(PINNED.tigera_operator, {}, name="calico", namespace="tigera-operator")
    assert objects
    assert [o for o in objects if o["kind"] == "CustomResourceDefinition"] == []


def test_the_crd_chart_is_the_operators_calico_release() -> None:
    assert PINNED.calico_crds.version == PINNED.tigera_operator.version
    assert PINNED.calico_crds.repo == PINNED.tigera_operator.repo


def test_the_calico_crd_release_fits_helms_release_secret() -> None:
    """~3 MB of CRDs: Helm stores chart and manifest gzip'd in one Secret of at most 1 MiB.
    Measured 0.90 MiB at v3.32.1; a Calico bump past the budget needs another install route
    (a kubernetes.helm.v4.Chart or server-side apply of the rendered CRDs)."""
    size = release_payload(PINNED.calico_crds, {}, name="calico-crds", namespace="tigera-operator")
    assert size < RELEASE_SECRET_BUDGET, f"release Secret ~{size / MIB:.2f} MiB"
