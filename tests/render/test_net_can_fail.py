"""The rendered-chart net catches what it is there to catch.

Each test breaks one thing on purpose — a chart template, a chart's CRDs, a values key, an object,
an ordering edge — renders the stack again and expects exactly the check that guards it to name
the breakage. A check that cannot fail here would prove nothing on the real stacks.
"""

from __future__ import annotations

import copy
import re
import shutil
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.chart_cache import release_chart_name
from components.management_values import default_etcd_datastore
from components.versions import PINNED
from tests.render.conftest import platform_block
from tests.support import rendered_facts
from tests.support.charts import chart_source
from tests.support.crd_schemas import CelTally
from tests.support.harness import Recording
from tests.support.render_checks import missing_crds, missing_namespaces, schema_violations
from tests.support.rendered_stack import RELEASE, PlacedObject, RenderedStack, render_stack
from tests.support.upstream import upstream_dir_or_none


def _merge(base: Mapping[str, Any], patch: Mapping[str, Any]) -> dict[str, Any]:
    merged = copy.deepcopy(dict(base))
    for key, value in patch.items():
        if isinstance(value, Mapping) and isinstance(merged.get(key), Mapping):
            merged[key] = _merge(merged[key], value)
        else:
            merged[key] = copy.deepcopy(value)
    return merged


def _with_values(recording: Recording, release: str, patch: Mapping[str, Any]) -> Recording:
    """A copy of the recording whose ``release`` is registered with ``patch`` merged into its
    values."""
    changed = copy.deepcopy(recording)
    reg = changed.named(release)
    reg.inputs["values"] = _merge(reg.inputs.get("values") or {}, patch)
    return changed


def _render(
    recordings: Callable[[str, bool], Recording],
    stack: str,
    recording: Recording | None = None,
    overrides: Mapping[str, Path] | None = None,
) -> RenderedStack:
    return render_stack(
        recording or recordings(stack, False),
        platform_block(stack),
        upstream_dir_or_none(),
        overrides,
    )


def _chart_copy(recording: Recording, release: str, tmp_path: Path) -> Path:
    """The release's chart unpacked into ``tmp_path`` for a test to alter."""
    import helm_python

    source = chart_source(recording.named(release).inputs)
    if source.is_dir():
        return Path(shutil.copytree(source, tmp_path / source.name))
    helm_python.expand(str(tmp_path), str(source))
    (root,) = [p for p in tmp_path.iterdir() if p.is_dir()]
    return root


@pytest.fixture
def lab(rendered: Callable[[str], RenderedStack]) -> RenderedStack:
    return rendered("lab")  # skips, with the archives' names, when they are absent


@pytest.fixture
def prod(rendered: Callable[[str], RenderedStack]) -> RenderedStack:
    return rendered("prod")


# ------------------------------------------------------------------- chart templates and CRDs


def test_a_webhook_template_rendering_ignore_is_caught(
    lab: RenderedStack, recordings: Callable[[str, bool], Recording], tmp_path: Path
) -> None:
    """The acceptance case: HAMi's webhook template altered to render ``failurePolicy: Ignore``."""
    chart = _chart_copy(lab.recording, "tenant-a-hami", tmp_path)
    template = chart / "templates" / "scheduler" / "webhook.yaml"
    text = template.read_text()
    altered = re.sub(r"failurePolicy: .*", "failurePolicy: Ignore", text)
    assert altered != text
    template.write_text(altered)
    broken = _render(recordings, "lab", overrides={"tenant-a-hami": chart})
    problems = rendered_facts.hami_webhook(broken, platform_block("lab"))
    assert problems == ["tenant-a: webhook vgpu.hami.io failurePolicy is Ignore, not Fail"]


def test_a_crd_subchart_without_the_ipaddresspool_crd_is_caught(
    lab: RenderedStack, recordings: Callable[[str, bool], Recording], tmp_path: Path
) -> None:
    """The acceptance case: MetalLB's CRD subchart lacks the IPAddressPool CRD, so the
    program's IPAddressPool has no CRD on the management cluster."""
    chart = _chart_copy(lab.recording, "management-metallb", tmp_path)
    crds = chart / "charts" / "crds" / "templates" / "crds.yaml"
    documents = re.split(r"\n---\n", crds.read_text())
    kept = [d for d in documents if "name: ipaddresspools.metallb.io" not in d]
    assert len(kept) == len(documents) - 1
    crds.write_text("\n---\n".join(kept))
    broken = _render(recordings, "lab", overrides={"management-metallb": chart})
    problems = [p for p in missing_crds(broken) if "on cluster management" in p]
    assert len(problems) == 1, problems
    assert problems[0].startswith(
        "IPAddressPool metallb-system/gpu-platform-lab (metallb.io/v1beta1"
    )
    assert "on cluster management: nothing installs its CRD there" in problems[0]


def test_a_crd_installed_after_its_custom_resource_is_caught(
    lab: RenderedStack, recordings: Callable[[str, bool], Recording]
) -> None:
    """The IPAddressPool without its dependency on the MetalLB release: the CRD exists on the
    cluster, but nothing orders it first."""
    unordered = copy.deepcopy(lab.recording)
    pool = unordered.named("management-metallb-pool")
    pool.dependencies = []
    pool.property_dependencies = {}
    broken = _render(recordings, "lab", recording=unordered)
    problems = [p for p in missing_crds(broken) if p.startswith("IPAddressPool")]
    assert len(problems) == 1
    assert (
        "its CRD comes from management-metallb (templates), which is not installed before it"
        in (problems[0])
    )


def test_a_custom_resource_waiting_only_for_its_cluster_api_provider_is_caught(
    prod: RenderedStack, recordings: Callable[[str, bool], Recording]
) -> None:
    """The operator installs a provider's CRDs later, asynchronously: a Metal3Cluster that waits
    for the InfrastructureProvider object but not for the gate that waits for its CRD would be
    created too early."""
    early = copy.deepcopy(prod.recording)
    reg = next(r for r in early.resources if r.inputs.get("kind") == "Metal3Cluster")
    reg.dependencies = [early.named("management-capi-metal3").urn]
    reg.property_dependencies = {}
    problems = [
        p
        for p in missing_crds(_render(recordings, "prod", recording=early))
        if "Metal3Cluster" in p
    ]
    assert len(problems) == 1, problems
    assert "management-capi-metal3 (async)" in problems[0]


def test_a_chart_not_waiting_for_the_adopted_cert_manager_is_caught(
    prod: RenderedStack, recordings: Callable[[str, bool], Recording]
) -> None:
    """prod adopts the cluster's cert-manager: its CRDs count only for what waits for the gate
    that proves them Established. Kamaji's Certificates, with Kamaji no longer waiting for it,
    could reach an API server that does not serve them yet."""
    early = copy.deepcopy(prod.recording)
    gate = early.named("management-cert-manager-ready").urn
    kamaji = early.named("management-kamaji")
    kamaji.dependencies = [urn for urn in kamaji.dependencies if urn != gate]
    kamaji.property_dependencies = {}
    problems = [
        p
        for p in missing_crds(_render(recordings, "prod", recording=early))
        if p.startswith("Certificate kamaji-system/")
    ]
    assert problems
    assert "management-cert-manager-ready (gate), which is not installed before it" in (problems[0])


def test_a_crd_from_a_pre_install_hook_does_not_serve_the_same_releases_templates(
    lab: RenderedStack, recordings: Callable[[str, bool], Recording], tmp_path: Path
) -> None:
    """Helm maps every template before it runs any hook: Kamaji's CRDs moved from crds/ into a
    pre-install hook would leave a DataStore template of the same chart unmappable (the chart has
    none of its own since its etcd is a release of its own: the test adds one)."""
    chart = _chart_copy(lab.recording, "management-kamaji", tmp_path)
    hooked = []
    for crd in sorted((chart / "crds").glob("*.yaml")):
        for doc in yaml.safe_load_all(crd.read_text()):
            if isinstance(doc, dict):
                doc["metadata"].setdefault("annotations", {})["helm.sh/hook"] = "pre-install"
                hooked.append(doc)
        crd.unlink()
    (chart / "templates" / "crds-as-hooks.yaml").write_text(yaml.safe_dump_all(hooked))
    datastore = default_etcd_datastore("cluster.local", 1)
    (chart / "templates" / "datastore.yaml").write_text(yaml.safe_dump(datastore))
    broken = _render(recordings, "lab", overrides={"management-kamaji": chart})
    problems = [p for p in missing_crds(broken) if p.startswith("DataStore ")]
    assert len(problems) == 1, problems
    assert "management-kamaji (pre-install), which is not installed before it" in problems[0]


def test_a_release_into_a_namespace_nobody_creates_is_caught(
    lab: RenderedStack, recordings: Callable[[str, bool], Recording]
) -> None:
    """Helm installs only into an existing namespace (pulumi-kubernetes does not set
    CreateNamespace): a release whose namespace nothing creates fails at install."""
    moved = copy.deepcopy(lab.recording)
    moved.named("management-cert-manager").inputs["namespace"] = "no-such-namespace"
    problems = missing_namespaces(_render(recordings, "lab", recording=moved))
    assert problems
    assert problems[0] == (
        "release management-cert-manager: its namespace no-such-namespace does not exist on "
        "cluster management before it"
    )


# -------------------------------------------------------------------------------- values


@pytest.mark.parametrize(
    ("release", "patch", "judge", "expected"),
    [
        (
            "tenant-a-hami",
            {"scheduler": {"admissionWebhook": {"whitelistNamespaces": ["kube-system"]}}},
            rendered_facts.hami_webhook,
            "tenant-a: webhook vgpu.hami.io covers namespace calico-system",
        ),
        (
            "tenant-b-hami",
            {
                "scheduler": {
                    "admissionWebhook": {
                        "whitelistNamespaces": [
                            "kube-system",
                            "calico-system",
                            "tigera-operator",
                            "hami-system",
                            "default",
                        ]
                    }
                }
            },
            rendered_facts.hami_webhook,
            "tenant-b: webhook vgpu.hami.io skips namespace default, where GPU workloads or "
            "quotas are declared",
        ),
        (
            "tenant-a-hami",
            # tenant-a runs v1.34.3 in the lab (a minor behind, for TC-19): another minor here.
            {"scheduler": {"kubeScheduler": {"image": {"tag": "v1.33.0"}}}},
            rendered_facts.scheduler_version,
            "tenant-a: hami-scheduler's kube-scheduler image is "
            "['registry.k8s.io/kube-scheduler:v1.33.0'], not tag v1.34.3",
        ),
        (
            "tenant-a-hami",
            {"scheduler": {"extender": {"extraArgs": ["--node-lock-timeout=5m"]}}},
            rendered_facts.node_lock_expiry,
            "tenant-a: extender --node-lock-timeout=5m, but the configured node-lock expiry is 30s",
        ),
        (
            "tenant-a-hami",
            {"scheduler": {"nodeLockExpire": "30s"}},
            rendered_facts.node_lock_expiry,
            "tenant-a: the extender must set one node-lock expiry (--node-lock-timeout=30s, "
            "HAMI_NODELOCK_EXPIRE=30s)",
        ),
        (
            "tenant-b-hami",
            {"scheduler": {"service": {"type": "NodePort"}}},
            rendered_facts.hami_webhook_service,
            "tenant-b: Service hami-scheduler is NodePort",
        ),
        (
            "management-kamaji",
            {"resources": {"limits": {"memory": "100Mi"}}},
            rendered_facts.kamaji_memory,
            "management: Kamaji's controller memory limit is 100Mi",
        ),
        (
            "tenant-b-calico",
            {"installation": {"calicoNetwork": {"ipPools": [{"cidr": "10.99.0.0/16"}]}}},
            rendered_facts.calico_pool,
            "tenant-b: Calico IP pools ['10.99.0.0/16'], not [10.20.0.0/16]",
        ),
        (
            "tenant-a-calico",
            {"manageCRDs": True},
            rendered_facts.calico_crd_owner,
            "tenant-a: the tigera-operator runs with ['-manage-crds=true'], not -manage-crds=false",
        ),
        (
            "tenant-b-calico",
            {"installation": {"kubernetesProvider": "OpenShift"}},
            rendered_facts.calico_crd_owner,
            "tenant-b: the tigera-operator Deployment's container bootstrap-crds runs "
            "-bootstrap-crds",
        ),
        (
            "management-metallb",
            {"frrk8s": {"enabled": True}},
            rendered_facts.metallb_without_frr,
            "management: MetalLB renders",
        ),
    ],
    ids=[
        "webhook-covers-cni",
        "webhook-skips-users",
        "scheduler-tag",
        "node-lock",
        "node-lock-twice",
        "webhook-node-port",
        "kamaji-100mi",
        "calico",
        "calico-manages-crds",
        "calico-bootstraps-crds",
        "frr",
    ],
)
def test_a_wrong_value_is_caught_on_the_lab(
    lab: RenderedStack,
    recordings: Callable[[str, bool], Recording],
    release: str,
    patch: Mapping[str, Any],
    judge: Callable[..., list[str]],
    expected: str,
) -> None:
    broken = _render(recordings, "lab", recording=_with_values(lab.recording, release, patch))
    problems = judge(broken, platform_block("lab"))
    assert any(p.startswith(expected) for p in problems), problems


@pytest.mark.parametrize(
    ("patch", "expected"),
    [
        ({"devicePlugin": {"enabled": True}}, "the GPU Operator's device plugin is not disabled"),
        ({"cdi": {"enabled": True}}, "GPU Operator CDI on with HAMi's device-list strategy envvar"),
        (
            {"toolkit": {"env": []}},
            "with CDI off the nvidia runtime becomes the default, so pods that ask HAMi for no "
            "GPU get every GPU (set NVIDIA_RUNTIME_SET_AS_DEFAULT=false)",
        ),
    ],
    ids=["device-plugin-on", "cdi-on", "nvidia-default-runtime"],
)
def test_a_wrong_gpu_operator_value_is_caught_on_prod(
    prod: RenderedStack,
    recordings: Callable[[str, bool], Recording],
    patch: Mapping[str, Any],
    expected: str,
) -> None:
    reg = next(
        r
        for r in prod.recording.of_type(RELEASE)
        if release_chart_name(r.inputs["chart"]) == "gpu-operator"
    )
    release, tenant = reg.name, prod.clusters[reg.provider_urn].name
    broken = _render(recordings, "prod", recording=_with_values(prod.recording, release, patch))
    problems = rendered_facts.gpu_operator(broken, platform_block("prod"))
    assert f"{tenant}: {expected}" in problems, problems


def test_a_device_plugin_selecting_other_nodes_is_caught_on_prod(
    prod: RenderedStack, recordings: Callable[[str, bool], Recording]
) -> None:
    release = next(
        r.name
        for r in prod.recording.of_type(RELEASE)
        if release_chart_name(r.inputs["chart"]) == "hami"
    )
    patch = {"devicePlugin": {"nvidiaNodeSelector": {"gpu": "off"}}}
    broken = _render(recordings, "prod", recording=_with_values(prod.recording, release, patch))
    problems = rendered_facts.device_plugins(broken, platform_block("prod"))
    assert any("selects nodes by {'gpu': 'off'}" in p for p in problems), problems


def test_a_missing_mock_plugin_is_caught_on_the_lab(lab: RenderedStack) -> None:
    broken = copy.copy(lab)
    broken.objects = [
        p for p in lab.objects if not (p.kind == "DaemonSet" and "mock-device-plugin" in str(p.obj))
    ]
    problems = rendered_facts.device_plugins(broken, platform_block("lab"))
    assert "tenant-a: pools use deviceMode mock but no such plugin runs" in problems


def test_a_kamaji_image_of_another_release_is_caught(
    lab: RenderedStack, recordings: Callable[[str, bool], Recording]
) -> None:
    patch = {"image": {"tag": "latest"}}
    broken = _render(
        recordings, "lab", recording=_with_values(lab.recording, "management-kamaji", patch)
    )
    assert rendered_facts.kamaji_image(broken, PINNED.kamaji_image_tag) == [
        "management: Kamaji's controller images ['clastix/kamaji:latest'], not tag "
        f"{PINNED.kamaji_image_tag}"
    ]


# -------------------------------------------------------------------------------- schemas


def _replace(stack: RenderedStack, placed: PlacedObject, obj: dict[str, Any]) -> RenderedStack:
    changed = copy.copy(stack)
    changed.objects = [
        PlacedObject(obj, p.cluster, p.origin, p.phase) if p is placed else p for p in stack.objects
    ]
    return changed


def test_an_unknown_field_in_a_rendered_object_is_caught(lab: RenderedStack) -> None:
    placed = next(p for p in lab.objects if p.kind == "Deployment" and p.phase == "templates")
    obj = copy.deepcopy(placed.obj)
    obj["spec"]["template"]["spec"]["containers"][0]["imagePullPolcy"] = "Always"
    problems = schema_violations(_replace(lab, placed, obj))
    assert len(problems) == 1
    assert "'imagePullPolcy' was unexpected" in problems[0]


def test_a_custom_resource_breaking_its_crds_cel_rule_is_caught(lab: RenderedStack) -> None:
    """Kamaji's rule: a Konnectivity agent in DaemonSet mode takes no replica count."""
    placed = next(p for p in lab.objects if p.kind == "TenantControlPlane")
    obj = copy.deepcopy(placed.obj)
    obj["spec"]["addons"]["konnectivity"]["agent"]["replicas"] = 2
    tally = CelTally()
    problems = schema_violations(_replace(lab, placed, obj), tally)
    assert len(problems) == 1
    assert problems[0].startswith("TenantControlPlane ")
    assert "spec.addons.konnectivity.agent:" in problems[0]
    assert tally.evaluated > 0


def test_a_custom_resource_field_its_crd_lacks_is_caught(lab: RenderedStack) -> None:
    """Checked against the CRD the cluster has (here the one Kamaji's chart installs)."""
    placed = next(p for p in lab.objects if p.kind == "TenantControlPlane")
    obj = copy.deepcopy(placed.obj)
    obj["spec"]["dataStoreSchem"] = obj["spec"].pop("dataStoreSchema")
    problems = schema_violations(_replace(lab, placed, obj))
    assert len(problems) == 1
    assert "'dataStoreSchem' was unexpected" in problems[0]
