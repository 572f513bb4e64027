"""Upgrading one tenant's Kubernetes, under the mocks: a stack deployed with the tenant at one
version (an update-mode recording) and a preview of the same stack with the tenant one step
later (``evaluate(..., prior=...)``, planned as the engine would).

The previous version comes from the live control-plane object: its identity read, which in a
preview of an update returns the deployed object (harness_runner.PriorState), carries its
``status`` (lab: Kamaji's running version; prod: the KamajiControlPlane's copy of it). The
mocks answer a ready control plane as running its spec's version (tests/support/fakes_tenant).

Not modelled by the harness: replacements a provider's own Diff decides, so a worker container
whose image changes shows as an update here; docker replaces it (pulumi-docker ``image`` is
ForceNew), and with it its join, GPU-capacity patch and inventory (triggers on its ID)."""

from __future__ import annotations

import copy
from typing import Any

import pytest

from tests.support.deployment_snapshot import differences, snapshot
from tests.support.harness import Recording, Registration, evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"
GATE_TYPE = "command:local:Command"
# stack: (tenant, deployed version, next version): one minor in the lab (kind v0.31.0's images
# v1.34.3 -> v1.35.0), one minor in prod.
UPGRADES = {"lab": ("tenant-b", "v1.34.3", "v1.35.0"), "prod": ("team-llm", "v1.35.7", "v1.36.3")}


def _config(stack: str, tenant: str, version: str) -> dict[str, Any]:
    config = copy.deepcopy(load_stack_config(stack))
    for entry in config[PLATFORM]["tenants"]:
        if entry["name"] == tenant:
            entry["kubernetesVersion"] = version
    return config


_CACHE: dict[tuple[str, str, str], Recording] = {}


def _deployed(stack: str, tenant: str, version: str) -> Recording:
    key = (stack, tenant, version)
    if key not in _CACHE:
        recording = evaluate(stack, False, config=_config(stack, tenant, version))
        assert recording.error is None, recording.error
        _CACHE[key] = recording
    return _CACHE[key]


def _preview(stack: str, tenant: str, before: str, after: str) -> Recording:
    return evaluate(
        stack, True, config=_config(stack, tenant, after), prior=_deployed(stack, tenant, before)
    )


def _tenant_of(recording: Recording, reg: Registration) -> str | None:
    component = recording.component_of(reg, ":GpuTenant")
    return component.name if component is not None else None


def _changed(recording: Recording) -> list[Registration]:
    return [r for r in recording.resources if r.step not in ("same", "read")]


@pytest.fixture(scope="module", params=sorted(UPGRADES))
def upgrade(request: pytest.FixtureRequest) -> tuple[str, str, Recording]:
    stack = request.param
    tenant, before, after = UPGRADES[stack]
    preview = _preview(stack, tenant, before, after)
    assert preview.error is None, preview.error
    return stack, tenant, preview


def test_only_the_upgraded_tenant_changes(upgrade: tuple[str, str, Recording]) -> None:
    _stack, tenant, preview = upgrade
    changed = _changed(preview)
    assert changed, "an upgrade must change something"
    assert {_tenant_of(preview, r) for r in changed} == {tenant}
    # The control plane is updated in place (no replacement: its tenant provider and everything
    # inside the tenant keep their identity) and the gate re-runs for the new version.
    steps = {r.name: r.step for r in changed}
    assert steps[f"{tenant}-control-plane"] == "update"
    assert steps[f"{tenant}-served-version"] == "update"
    assert steps[f"{tenant}-hami"] == "update"
    assert "replace" not in steps.values()


def test_the_changed_set_is_what_runs_a_kubernetes_version(
    upgrade: tuple[str, str, Recording],
) -> None:
    stack, tenant, preview = upgrade
    config = _config(stack, tenant, UPGRADES[stack][2])
    entry = next(t for t in config[PLATFORM]["tenants"] if t["name"] == tenant)
    expected = {f"{tenant}-control-plane", f"{tenant}-served-version", f"{tenant}-hami"}
    for pool in entry["workerPools"]:
        if stack == "lab":
            expected |= {f"{tenant}-{pool['name']}-worker-image"}
            expected |= {f"{tenant}-{pool['name']}-version-gate"}
            expected |= {f"{tenant}-{pool['name']}-{i}" for i in range(pool["replicas"])}
        else:
            expected.add(f"{tenant}-{pool['name']}-machines")
    if stack == "lab":
        expected.add(f"{tenant}-kube-proxy")
    assert {r.name for r in _changed(preview)} == expected


def test_every_worker_change_waits_for_the_control_plane_gate(
    upgrade: tuple[str, str, Recording],
) -> None:
    """In-tenant versions (HAMi's kube-scheduler, the lab's kube-proxy) and prod's machines wait
    for ``<tenant>-served-version``, which waits for the control plane. A lab pool waits for its
    own ``<pool>-version-gate``: its update runs the same served-version wait (reading the
    tenant's kubeconfig itself), its create nothing, so that a first deployment's workers are not
    held back behind the control plane (the registry-cache bring-up)."""
    stack, tenant, preview = upgrade
    target = UPGRADES[stack][2]
    gate = preview.named(f"{tenant}-served-version")
    assert gate.type == GATE_TYPE
    control_plane = preview.named(f"{tenant}-control-plane")
    assert control_plane.urn in preview.dependency_closure(gate)
    assert gate.inputs["environment"]["EXPECTED_VERSION"] == target
    assert "/version" in gate.inputs["create"]
    pool_gates = {
        r.urn: r
        for r in preview.resources
        if r.name.endswith("-version-gate") and _tenant_of(preview, r) == tenant
    }
    assert bool(pool_gates) == (stack == "lab")
    for pool_gate in pool_gates.values():
        assert pool_gate.step == "update"  # so its update, the wait, runs
        assert pool_gate.inputs["environment"]["EXPECTED_VERSION"] == target
        assert "served-version" in pool_gate.inputs["update"]
        assert pool_gate.inputs["create"] == "true"
        assert "served-version.sh" not in pool_gate.inputs["create"]
    gates = {gate.urn, control_plane.urn, *pool_gates}
    waiting = [r for r in _changed(preview) if r.urn not in gates]
    assert waiting
    for reg in waiting:
        closure = preview.dependency_closure(reg)
        pool = preview.component_of(reg, ":GpuWorkerPool")
        if pool is not None and stack == "lab":
            own = [u for u in pool_gates if pool_gates[u].parent == pool.urn]
            assert own, f"{pool.name} has no version gate"
            assert own[0] in closure, f"{reg.name} does not wait for its pool's version gate"
        else:
            assert gate.urn in closure, f"{reg.name} does not wait for {gate.name}"


def test_lab_workers_are_replaced_one_at_a_time() -> None:
    """Each worker container (and so its replacement: drain, new container, join) waits until
    the previous worker of its pool is back with its GPU capacity and inventory."""
    config = copy.deepcopy(load_stack_config("lab"))
    tenant = config[PLATFORM]["tenants"][0]
    pool = tenant["workerPools"][0]
    pool["replicas"] = 3
    recording = evaluate("lab", False, config=config)
    assert recording.error is None, recording.error
    base = f"{tenant['name']}-{pool['name']}"
    for index in range(1, pool["replicas"]):
        closure = recording.dependency_closure(recording.named(f"{base}-{index}"))
        assert recording.named(f"{base}-{index - 1}-inventory").urn in closure
        assert recording.named(f"{base}-{index - 1}-gpu-capacity").urn in closure
    first = recording.dependency_closure(recording.named(f"{base}-0"))
    assert recording.named(f"{base}-1-inventory").urn not in first


def test_the_deployments_differ_only_inside_the_upgraded_tenant() -> None:
    """Before and after as two update-mode deployments (tests/support/deployment_snapshot)."""
    for stack, (tenant, before, after) in UPGRADES.items():
        old = _deployed(stack, tenant, before)
        new = _deployed(stack, tenant, after)
        lines = differences(snapshot(old), snapshot(new), {})
        assert lines
        urns = {r.urn: r for r in new.resources}
        for line in lines:
            urn = line.rsplit(" ", 1)[-1] if line.startswith(("gone", "added")) else None
            if line.startswith("changed outputs of outputs"):
                assert "tenants" in line, line
                continue
            urn = urn or line.split(" of ", 1)[1].split(" at ", 1)[0]
            reg = urns.get(urn)
            assert reg is not None, line
            assert _tenant_of(new, reg) == tenant, line


# ------------------------------------------------------------------------------ refusals


@pytest.mark.parametrize(
    ("stack", "tenant", "before", "after", "words"),
    [
        ("lab", "tenant-b", "v1.35.0", "v1.34.3", ["downgrade", "from v1.35.0", "keep v1.35.0"]),
        ("lab", "tenant-b", "v1.33.7", "v1.35.0", ["2 minors above", "next versions are v1.34.3"]),
        ("prod", "team-llm", "v1.34.8", "v1.36.0", ["2 minors above", "v1.35.0", "v1.35.7"]),
        ("prod", "team-llm", "v1.35.7", "v1.35.5", ["downgrade", "v1.36.3"]),
    ],
)
def test_a_skew_the_policy_forbids_fails_the_preview(
    stack: str, tenant: str, before: str, after: str, words: list[str]
) -> None:
    preview = _preview(stack, tenant, before, after)
    assert preview.error is not None
    assert preview.run_error, preview.error
    index = [t["name"] for t in load_stack_config(stack)[PLATFORM]["tenants"]].index(tenant)
    assert f"tenants[{index}].kubernetesVersion: {after}" in preview.error
    for word in words:
        assert word in preview.error
    # A failed preview applies nothing. In prod the machines are not even registered: they
    # wait for the gate, whose version is the checked one. (A lab pool's version gate does not
    # wait for the check; the preview fails all the same.)
    if stack == "prod":
        machines = "kubernetes:cluster.x-k8s.io/v1beta2:MachineDeployment"
        assert not [
            r.name
            for r in preview.resources
            if r.type == machines and _tenant_of(preview, r) == tenant
        ]


def test_a_patch_upgrade_passes_the_preview() -> None:
    preview = _preview("prod", "team-llm", "v1.35.0", "v1.35.7")
    assert preview.error is None, preview.error
    assert preview.named("team-llm-h100-machines").step == "update"
    # Pulumi.prod.yaml's machine images carry v1.35.0: the preview says the image must move too.
    assert [line for line in preview.logs if "machine.template names Kubernetes v1.35.0" in line]


def test_a_first_deployment_has_nothing_to_compare() -> None:
    """A first preview: the control plane does not exist, its read is skipped, no check."""
    preview = evaluate("lab", True, config=_config("lab", "tenant-b", "v1.34.3"))
    assert preview.error is None, preview.error
