"""The whole pack on recorded stacks: the offline stand-in for ``pulumi preview --policy-pack``.

First on a synthetic recording shaped like the program's registrations (so the converter and the
pack are tested on their own), then on the real recordings of both stacks in update and preview
mode, each judged with its own policy config (``policies/config/<stack>.json``).
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest
from gpu_platform_policies.model import Stack, from_policy_resource
from gpu_platform_policies.props import UNKNOWN
from pulumi_policy import EnforcementLevel
from pulumi_policy.proxy import UNKNOWN_STRING_VALUE, UnknownValueError

from tests.policies.builders import (
    A100,
    L4,
    gpu_deployment,
    hami_release,
    hami_values,
    inventory,
    tcp,
)
from tests.policies.recorded import (
    Finding,
    blocking,
    load_policy_config,
    run_pack,
    stack_urn,
    to_policy_resources,
)
from tests.support.harness import Recording, Registration, evaluate, load_stack_config

TCP_TYPE = "kubernetes:kamaji.clastix.io/v1alpha1:TenantControlPlane"
KCP_TYPE = "kubernetes:controlplane.cluster.x-k8s.io/v1alpha2:KamajiControlPlane"
RELEASE_TYPE = "kubernetes:helm.sh/v3:Release"
CONFIG_MAP = "kubernetes:core/v1:ConfigMap"
PROVIDER = "pulumi:providers:kubernetes"
HARNESS_UNKNOWN = "<pulumi.output.Unknown object at 0x7f0d2c3b4e50>"


# ---------------------------------------------------------------- a synthetic recording


class Recorder:
    """Builds registrations the way the harness records them (URNs from parent types)."""

    def __init__(self, stack: str = "lab") -> None:
        self.stack = stack
        self.resources: list[Registration] = []
        self.types: dict[str, list[str]] = {stack_urn(stack): []}

    def add(
        self,
        type_: str,
        name: str,
        inputs: dict[str, Any] | None = None,
        parent: str | None = None,
        provider: str | None = None,
        custom: bool = True,
    ) -> str:
        parent = parent or stack_urn(self.stack)
        chain = [*self.types.get(parent, []), type_]
        qualified = (
            "$".join(["pulumi:pulumi:Stack", *chain[:-1], type_])
            if parent != stack_urn(self.stack)
            else f"pulumi:pulumi:Stack${type_}"
        )
        urn = f"urn:pulumi:{self.stack}::gpu-platform::{qualified}::{name}"
        self.types[urn] = chain
        body = copy.deepcopy(inputs or {})
        self.resources.append(
            Registration(
                urn=urn,
                type=type_,
                name=name,
                custom=custom,
                inputs=body,
                outputs=copy.deepcopy(body),
                secret_inputs=[],
                parent=parent,
                provider=f"{provider}::{name}-provider-id" if provider else "",
                dependencies=[],
                property_dependencies={},
                options={"protect": False, "ignore_changes": [], "custom_timeouts": {}},
            )
        )
        return urn


def lab_like(workload_memory: float = 20000.0) -> Recorder:
    """Two tenants as the lab registers them: components, providers, a TCP under each tenant
    (management provider), HAMi and an inventory ConfigMap in each tenant (tenant provider),
    and a GPU workload for tenant-b."""
    rec = Recorder()
    management = rec.add("gpu-platform:index:ManagementCluster", "management", custom=False)
    mgmt_provider = rec.add(PROVIDER, "management-provider", {"kubeconfig": "x"}, parent=management)
    for tenant, card in (("tenant-a", A100), ("tenant-b", L4)):
        component = rec.add("gpu-platform:index:GpuTenant", tenant, custom=False)
        provider = rec.add(PROVIDER, f"{tenant}-provider", {"kubeconfig": "x"}, parent=component)
        rec.add(TCP_TYPE, f"{tenant}-tcp", tcp(tenant), parent=component, provider=mgmt_provider)
        rec.add(RELEASE_TYPE, f"{tenant}-hami", hami_release(hami_values()), parent=component,
                provider=provider)  # fmt: skip
        pool = rec.add("gpu-platform:index:GpuWorkerPool", f"{tenant}-pool", parent=component,
                       custom=False)  # fmt: skip
        cm = inventory(tenant, "pool", [card])
        del cm["metadata"]["labels"]["gpu-platform.io/tenant"]  # found through the parents
        rec.add(CONFIG_MAP, f"{tenant}-pool-inventory", cm, parent=pool, provider=provider)
    rec.add(
        "kubernetes:apps/v1:Deployment",
        "tenant-b-inference-sample",
        gpu_deployment("inference-sample", memory=workload_memory, tenant=None),
        parent=rec.resources[-1].parent,  # tenant-b's pool... its GpuTenant is an ancestor
        provider=next(r.urn for r in rec.resources if r.name == "tenant-b-provider"),
    )
    return rec


LAB_CONFIG = {
    "hami-scheduler-version": "advisory",
    "tenant-webhook-path": {"environment": "lab"},
    "lab-only-components": {"environment": "lab"},
}


def test_converter_builds_what_analyze_stack_hands_a_policy() -> None:
    rec = lab_like()
    resources = to_policy_resources(rec.resources)
    by_urn = {r.urn: r for r in resources}
    root = by_urn[stack_urn("lab")]
    assert root.resource_type == "pulumi:pulumi:Stack"
    cm = next(r for r in resources if r.name == "tenant-a-pool-inventory")
    assert cm.parent is not None
    assert cm.parent.resource_type == "gpu-platform:index:GpuWorkerPool"
    assert cm.parent.parent is not None
    assert cm.parent.parent.name == "tenant-a"
    assert cm.parent.parent.parent is root
    assert cm.provider is not None
    assert cm.provider.name == "tenant-a-provider"
    assert cm.provider.resource_type == PROVIDER
    assert cm.opts.parent == cm.parent.urn
    assert json.loads(cm.props["data"]["cards.json"])["tenant"] == "tenant-a"


def test_converter_turns_recorded_unknowns_into_engine_unknowns() -> None:
    rec = lab_like()
    reg = next(r for r in rec.resources if r.name == "tenant-a-tcp")
    reg.outputs["spec"]["dataStoreSchema"] = HARNESS_UNKNOWN
    reg.outputs["spec"]["dataStoreUsername"] = "<unknown>"
    resource = next(r for r in to_policy_resources(rec.resources) if r.urn == reg.urn)
    with pytest.raises(UnknownValueError):
        _ = resource.props["spec"]["dataStoreSchema"]
    assert resource.props["spec"]["__target"]["dataStoreUsername"] == UNKNOWN_STRING_VALUE
    plain = from_policy_resource(resource)
    assert plain.props["spec"]["dataStoreSchema"] is UNKNOWN


def test_tenant_grouping_on_the_synthetic_recording() -> None:
    stack = Stack(from_policy_resource(r) for r in to_policy_resources(lab_like().resources))
    tenants = {r.name: stack.tenant_of(r) for r in stack}
    assert tenants["tenant-a-tcp"] == "tenant-a"  # management provider, GpuTenant parent
    assert tenants["tenant-b-hami"] == "tenant-b"
    assert tenants["tenant-a-pool-inventory"] == "tenant-a"  # through the pool component
    assert tenants["tenant-b-inference-sample"] == "tenant-b"
    assert tenants["management-provider"] is None


def test_the_pack_passes_a_compliant_lab_like_stack() -> None:
    findings = run_pack(lab_like().resources, LAB_CONFIG)
    assert findings == []


def test_the_pack_blocks_a_workload_that_fits_no_card() -> None:
    rec = lab_like(workload_memory=30000.0)
    findings = run_pack(rec.resources, LAB_CONFIG)
    assert [(f.policy, f.level) for f in findings] == [
        ("hami-capacity-fit", EnforcementLevel.MANDATORY)
    ]
    assert findings[0].urn.endswith("::tenant-b-inference-sample")
    assert (
        "CardInsufficientMemory — 30000 MiB requested, largest card 24576 MiB"
        in findings[0].message
    )


def test_the_pack_reports_every_policy_on_a_broken_stack() -> None:
    rec = lab_like()
    for reg in rec.resources:
        if reg.name == "tenant-b-tcp":
            reg.outputs["spec"]["dataStoreSchema"] = "tenant_a"  # same as tenant-a
            del reg.outputs["spec"]["addons"]
        if reg.name == "tenant-a-hami":
            values = hami_values(tag="v1.30.0", failure_policy="Ignore", mock=True)
            reg.inputs["values"] = reg.outputs["values"] = values
        if reg.name == "tenant-b-inference-sample":
            limits = reg.inputs["spec"]["template"]["spec"]["containers"][0]["resources"]["limits"]
            limits["nvidia.com/gpumem"] = "20Gi"
    prod_config = load_policy_config("prod")
    by_policy: dict[str, list[Finding]] = {}
    for finding in run_pack(rec.resources, prod_config):
        by_policy.setdefault(finding.policy, []).append(finding)
    assert set(by_policy) == {
        "hami-gpu-requests",
        "tenant-datastore-separation",
        "tenant-webhook-path",
        "lab-only-components",
        "hami-scheduler-version",
    }
    every = [f for found in by_policy.values() for f in found]
    assert all(f.level == EnforcementLevel.MANDATORY for f in every)
    # Judged with the lab's config, the prod-only rules stay quiet and the version is advisory.
    lab = {f.policy: f.level for f in run_pack(rec.resources, load_policy_config("lab"))}
    assert "lab-only-components" not in lab
    assert lab["hami-scheduler-version"] == EnforcementLevel.ADVISORY


def test_the_pack_on_a_preview_with_unknowns_neither_blocks_nor_fails() -> None:
    rec = lab_like(workload_memory=30000.0)
    for reg in rec.resources:
        if reg.type in (TCP_TYPE, RELEASE_TYPE, CONFIG_MAP):
            for props in (reg.inputs, reg.outputs):
                for key in ("spec", "values", "data"):
                    if key in props:
                        props[key] = HARNESS_UNKNOWN
    findings = run_pack(rec.resources, load_policy_config("prod"))
    assert findings == []


# ------------------------------------------------------------------ the real recordings

EXPECTED_CONTROL_PLANE = {"lab": TCP_TYPE, "prod": KCP_TYPE}
MODES = [("lab", False), ("lab", True), ("prod", False), ("prod", True)]


def tenant_names(stack: str) -> set[str]:
    platform = load_stack_config(stack)["gpu-platform:platform"]
    return {tenant["name"] for tenant in platform["tenants"]}


def is_declared_inventory(reg: Registration) -> bool:
    labels = (reg.inputs.get("metadata") or {}).get("labels") or {}
    return bool(labels.get("gpu-platform.io/declared-inventory") == "true")


def is_hami(reg: Registration) -> bool:
    from components.chart_cache import release_chart_name

    chart = reg.inputs.get("chart")
    return (
        reg.type == RELEASE_TYPE
        and isinstance(chart, str)
        and release_chart_name(chart).rsplit("/", 1)[-1] == "hami"
    )


@pytest.fixture(params=MODES, ids=[f"{s}-{'preview' if p else 'update'}" for s, p in MODES])
def recorded(
    request: pytest.FixtureRequest, recordings: Callable[[str, bool], Recording]
) -> Recording:
    stack, preview = request.param
    return recordings(stack, preview)


def test_recorded_stack_has_what_the_pack_judges(recorded: Recording) -> None:
    """Precondition of the test below: the stack registers the platform's parts (this fails
    while the components are skeletons), and the pack can tell each part's tenant."""
    assert recorded.error is None, recorded.error
    control_planes = recorded.of_type(EXPECTED_CONTROL_PLANE[recorded.stack])
    releases = [r for r in recorded.resources if is_hami(r)]
    inventories = [r for r in recorded.of_type(CONFIG_MAP) if is_declared_inventory(r)]
    assert control_planes, f"no {EXPECTED_CONTROL_PLANE[recorded.stack]} registered"
    assert releases, "no HAMi release registered"
    assert inventories, "no declared-inventory ConfigMap registered"
    stack = Stack(from_policy_resource(r) for r in to_policy_resources(recorded.resources))
    names = tenant_names(recorded.stack)
    for reg in [*control_planes, *releases, *inventories]:
        tenant = stack.tenant_of(stack.by_urn[reg.urn])
        assert tenant in names, f"{reg.type} {reg.name}: tenant {tenant!r} not in {sorted(names)}"
    assert {stack.tenant_of(stack.by_urn[r.urn]) for r in control_planes} == names
    assert {stack.tenant_of(stack.by_urn[r.urn]) for r in releases} == names


def test_recorded_stack_passes_its_policy_config(recorded: Recording) -> None:
    test_recorded_stack_has_what_the_pack_judges(recorded)
    findings = run_pack(recorded.resources, load_policy_config(recorded.stack))
    cannot_run = [f for f in findings if f.message.startswith("can't run")]
    assert cannot_run == [], cannot_run
    assert blocking(findings) == [], "\n".join(f"{f.policy}: {f.message}" for f in findings)
    if not recorded.preview:
        # In update mode everything is known: nothing at all to report.
        assert findings == [], "\n".join(f"{f.policy}: {f.message}" for f in findings)


def test_the_lab_stack_judged_as_prod_is_blocked_by_its_lab_parts(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """The lab registers the mock plugin, the completer and fake inventories, and shares one
    DataStore: with prod's policy config those are exactly what blocks."""
    lab = recordings("lab", False)
    test_recorded_stack_has_what_the_pack_judges(lab)
    findings = blocking(run_pack(lab.resources, load_policy_config("prod")))
    policies = {f.policy for f in findings}
    assert {"lab-only-components", "tenant-datastore-separation"} <= policies
    lab_only = [f.message for f in findings if f.policy == "lab-only-components"]
    # The lab runs the mock itself (not through HAMi's chart): its image is what blocks.
    assert any("uses the mock device plugin image" in m for m in lab_only)
    assert any("gpu-platform.io/lab-only" in m for m in lab_only)
    assert any("hami.io/node-nvidia-register" in m for m in lab_only)


def test_prod_config_keeps_the_cni_out_of_the_webhooks_reach(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """With failurePolicy Fail, a HAMi whose webhook gates Calico's namespace deadlocks the
    tenant once the webhook is down (no CNI, so no HAMi): prod's policy config blocks it."""
    prod = recordings("prod", False)
    changed: list[Registration] = []
    for reg in prod.resources:
        if is_hami(reg):
            reg = copy.deepcopy(reg)
            for props in (reg.inputs, reg.outputs):
                webhook = props["values"]["scheduler"]["admissionWebhook"]
                webhook["whitelistNamespaces"].remove("calico-system")
        changed.append(reg)
    findings = blocking(run_pack(changed, load_policy_config("prod")))
    gated = [f for f in findings if f.policy == "tenant-webhook-path"]
    assert len(gated) == len(tenant_names("prod")), [f.message for f in findings]
    assert all("gates calico-system" in f.message for f in gated)


# ------------------------------------------- the lab report's cases through the program


def lab_with_workloads(workloads: list[dict[str, Any]]) -> dict[str, Any]:
    """The lab with ``workloads`` in tenant-a, its quota raised to what they declare: these
    cases are about fitting the *cards* (the pack's capacity rule), which the config's quota
    check would otherwise refuse first."""
    config = copy.deepcopy(load_stack_config("lab"))
    tenant = config["gpu-platform:platform"]["tenants"][0]
    tenant["workloads"] = workloads
    for quota in tenant["gpuQuotas"]:
        mine = [w for w in workloads if w["namespace"] == quota["namespace"]]
        cards = [w["replicas"] * w["gpu"].get("cards", 1) for w in mine]
        memory = sum(n * w["gpu"].get("memoryMiB", 0) for n, w in zip(cards, mine, strict=True))
        cores = sum(n * w["gpu"]["cores"] for n, w in zip(cards, mine, strict=True))
        quota["gpuMemoryMiB"] = max(quota["gpuMemoryMiB"], memory)
        quota["gpuCores"] = max(quota["gpuCores"], cores)
        quota["gpus"] = max(quota["gpus"], sum(cards))
    return config


def workload(name: str, replicas: int, memory: int, cores: int) -> dict[str, Any]:
    return {
        "name": name,
        "namespace": "default",
        "replicas": replicas,
        "gpu": {"cards": 1, "memoryMiB": memory, "cores": cores},
    }


@pytest.mark.parametrize("preview", [False, True], ids=["update", "preview"])
def test_the_lab_reports_cases_are_found_in_the_programs_preview(preview: bool) -> None:
    """Workloads declared in the stack config for tenant-a (one A100): three 20,000 MiB / 30 %
    pods fit, a fourth stays Pending (CardInsufficientCore); 90,000 MiB never fits
    (CardInsufficientMemory)."""
    fits = evaluate("lab", preview, lab_with_workloads([workload("sample", 3, 20000, 30)]))
    assert fits.error is None, fits.error
    assert blocking(run_pack(fits.resources, load_policy_config("lab"))) == []

    # 90,000 MiB is more than the largest card holds: the config refuses it before the pack
    # runs (no quota would let it run), naming the key; the pack's own CardInsufficientMemory
    # answer for it is checked on recorded pods (test_policy_capacity).
    too_big = evaluate("lab", preview, lab_with_workloads([workload("big", 1, 90000, 30)]))
    assert too_big.error is not None
    assert "workloads[0].gpu.memoryMiB" in str(too_big.error)
    assert "largest card holds (81920 MiB" in str(too_big.error)

    # The report's fourth pod: 4 x 20,000 MiB / 30 % on one A100 (81,920 MiB, 100 %).
    config = lab_with_workloads([workload("sample", 4, 20000, 30)])
    recording = evaluate("lab", preview, config)
    assert recording.error is None, recording.error
    findings = blocking(run_pack(recording.resources, load_policy_config("lab")))
    assert [f.policy for f in findings] == ["hami-capacity-fit"]
    assert "replica 4 of 4 would stay Pending: CardInsufficientCore" in findings[0].message

    # Memory running out together, whichever workload the model places first (the order the
    # resources are registered in is not fixed): 3 x 20,000 MiB and 30,000 MiB need 90,000 MiB
    # of the card's 81,920 at 95 % of its cores.
    config = lab_with_workloads([workload("sample", 3, 20000, 30), workload("tail", 1, 30000, 5)])
    recording = evaluate("lab", preview, config)
    assert recording.error is None, recording.error
    findings = blocking(run_pack(recording.resources, load_policy_config("lab")))
    assert [f.policy for f in findings] == ["hami-capacity-fit"]
    assert "would stay Pending: CardInsufficientMemory" in findings[0].message
