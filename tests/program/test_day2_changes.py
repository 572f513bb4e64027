"""Day-2 changes (issue 39): what a platform team changes on a running stack, tried as a preview
of an update of the deployed stack (``evaluate(stack, True, prior=<deployed>)``, see
tests/support/harness_runner.PriorState): each change is either planned in place or refused at
preview with one line naming the key and the supported way.

The datastore keys fixed at creation are read back from the live control-plane object (its
``gpu-platform.io/datastore-shape`` annotation, ``components.tenant_specs``), the way the
served-version gate reads the running version.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Callable
from typing import Any

import pytest

from components.labels import IDENTITY_READ_SUFFIX
from tests.support.harness import Recording, evaluate, load_stack_config

PLATFORM = "gpu-platform:platform"


def _changed(stack: str, change: Callable[[dict[str, Any]], None]) -> dict[str, Any]:
    config = copy.deepcopy(load_stack_config(stack))
    change(config[PLATFORM]["tenants"][0])
    return config


def _preview(
    stack: str,
    recordings: Callable[[str, bool], Recording],
    change: Callable[[dict[str, Any]], None],
) -> Recording:
    return evaluate(stack, True, config=_changed(stack, change), prior=recordings(stack, False))


def _set(path: str, value: Any) -> Callable[[dict[str, Any]], None]:
    def change(tenant: dict[str, Any]) -> None:
        *parents, last = path.split(".")
        node = tenant
        for key in parents:
            node = node.setdefault(key, {})
        node[last] = value

    return change


FIXED = [
    (
        "lab",
        "dataStore.schema",
        "tenant_a_v2",
        "tenants[0].dataStore.schema: tenant_a -> tenant_a_v2",
    ),
    (
        "lab",
        "dataStore.username",
        "tenant_x",
        "tenants[0].dataStore.username: tenant_a -> tenant_x",
    ),
    ("prod", "dataStore.dedicated.replicas", 5, "tenants[0].dataStore.dedicated.replicas: 3 -> 5"),
    ("prod", "dataStore.dedicated.replicas", 1, "tenants[0].dataStore.dedicated.replicas: 3 -> 1"),
    (
        "prod",
        "dataStore.dedicated.storageSize",
        "32Gi",
        "tenants[0].dataStore.dedicated.storageSize: 16Gi -> 32Gi",
    ),
    (
        "prod",
        "dataStore.dedicated.storageClassName",
        "local-nvme",
        "tenants[0].dataStore.dedicated.storageClassName: (the cluster's default) -> local-nvme",
    ),
]


@pytest.mark.parametrize(
    ("stack", "key", "value", "line"), FIXED, ids=[f"{s}-{k}-{v}" for s, k, v, _ in FIXED]
)
def test_a_datastore_key_fixed_at_creation_is_refused_at_preview(
    stack: str, key: str, value: Any, line: str, recordings: Callable[[str, bool], Recording]
) -> None:
    preview = _preview(stack, recordings, _set(key, value))
    assert preview.error is not None, f"{key} -> {value} was planned on a running tenant"
    assert line in preview.error
    assert "docs/configuration.md" in preview.error


def test_moving_a_tenant_to_another_datastore_is_refused_at_preview(
    recordings: Callable[[str, bool], Recording],
) -> None:
    def dedicated(tenant: dict[str, Any]) -> None:
        tenant["dataStore"] = {
            "dedicated": {"driver": "etcd", "replicas": 3},
            "schema": tenant["dataStore"]["schema"],
            "username": tenant["dataStore"]["username"],
        }

    preview = _preview("lab", recordings, dedicated)
    assert preview.error is not None
    assert "tenants[0].dataStore.dedicated.driver: (not set) -> etcd" in preview.error


def test_the_same_datastore_on_a_running_tenant_plans_no_change(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """The check can pass: an unchanged datastore with another change (the control plane's
    replicas, changed in place) is planned."""
    preview = _preview("prod", recordings, _set("controlPlane.replicas", 2))
    assert preview.error is None, preview.error
    assert preview.named("team-vision-control-plane").step == "update"


def test_a_first_deployment_has_nothing_to_compare_against() -> None:
    config = _changed("prod", _set("dataStore.dedicated.replicas", 5))
    preview = evaluate("prod", True, config=config)
    assert preview.error is None, preview.error


# ------------------------------------------------------------------ a stuck upgrade's rollback


def _stuck(deployed: Recording, control_plane: str, running: str) -> Recording:
    """``deployed`` with its control plane's upgrade not finished: the live object (its identity
    read) declares the new version in its spec but still runs ``running``."""
    stuck = copy.deepcopy(deployed)
    read = stuck.named(f"{control_plane}{IDENTITY_READ_SUFFIX}")
    status = read.outputs.setdefault("status", {})
    if "kubernetesResources" in status:  # a TenantControlPlane (lab)
        status["kubernetesResources"]["version"] = {"version": running, "status": "Upgrading"}
    else:  # a KamajiControlPlane (prod): the provider's copy of the TCP's running version
        status["version"] = running.removeprefix("v")
    return stuck


# stack, tenant, the spec's version (the upgrade asked for), the version still running, the
# rollback to it, and Kamaji's webhook line cited.
STUCK = [
    ("lab", "tenant-b", "v1.35.0", "v1.34.3"),
    ("prod", "team-llm", "v1.36.3", "v1.35.7"),
]


@pytest.mark.parametrize(("stack", "tenant", "spec", "running"), STUCK, ids=[s for s, *_ in STUCK])
def test_rolling_back_a_stuck_upgrade_is_refused_at_preview(
    stack: str, tenant: str, spec: str, running: str
) -> None:
    """Kamaji's webhook compares the old spec with the new one (clastix/kamaji 26.8.2-edge
    internal/webhook/handlers/tcp_version.go:59-96), so going back to the version still running
    is a downgrade to it and would fail ``up`` at the control plane; the preview says so first,
    naming the key."""
    names = [t["name"] for t in load_stack_config(stack)[PLATFORM]["tenants"]]
    index = names.index(tenant)

    def at(version: str) -> dict[str, Any]:
        config = copy.deepcopy(load_stack_config(stack))
        config[PLATFORM]["tenants"][index]["kubernetesVersion"] = version
        return config

    deployed = evaluate(stack, False, config=at(spec))
    assert deployed.error is None, deployed.error
    preview = evaluate(
        stack, True, config=at(running), prior=_stuck(deployed, f"{tenant}-control-plane", running)
    )
    assert preview.error is not None, "a rollback Kamaji's webhook refuses passed the preview"
    assert preview.run_error, preview.error
    assert f"tenants[{index}].kubernetesVersion: {running} would downgrade" in preview.error
    assert f"the control plane's spec, {spec} (it still runs {running}" in preview.error
    assert f"keep {spec}" in preview.error
    # The same stuck tenant may keep its spec (the rollout finishes): nothing is refused.
    kept = evaluate(
        stack, True, config=at(spec), prior=_stuck(deployed, f"{tenant}-control-plane", running)
    )
    assert kept.error is None, kept.error


# ------------------------------------------------------------ scheduled etcd defragmentation


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_every_kamaji_etcd_release_has_its_defragmentation(
    stack: str, recordings: Callable[[str, bool], Recording]
) -> None:
    """kamaji-etcd v0.17.0 ships no defragmentation (docs/defragmentation.md: a script to run by
    hand): each of its releases gets a nightly CronJob ``<release>-defrag`` in its namespace,
    created after the release (whose Secrets it mounts), with the release's members and quota."""
    recording = recordings(stack, False)
    releases = {
        r.inputs["name"]: r
        for r in recording.of_type("kubernetes:helm.sh/v3:Release")
        if "kamaji-etcd" in str(r.inputs.get("chart"))
    }
    crons = {
        r.inputs["metadata"]["name"]: r
        for r in recording.of_type("kubernetes:batch/v1:CronJob")
        if r.inputs["metadata"]["name"].endswith("-defrag")
    }
    assert releases, f"{stack}: no kamaji-etcd release"
    assert set(crons) == {f"{name}-defrag" for name in releases}
    for name, release in releases.items():
        cron = crons[f"{name}-defrag"]
        assert cron.inputs["metadata"]["namespace"] == release.inputs["namespace"]
        assert release.urn in recording.dependency_closure(cron)
        pod = cron.inputs["spec"]["jobTemplate"]["spec"]["template"]["spec"]
        env = {e["name"]: e["value"] for e in pod["containers"][0]["env"]}
        values = release.inputs["values"]
        assert len(env["ETCD_ENDPOINTS"].split()) == values["replicas"]
        assert env["QUOTA_BACKEND_BYTES"] == values.get("quotaBackendBytes", str(8 * 2**30))
        assert "etcdctl" in pod["containers"][0]["command"][2]


# ------------------------------------------- the cluster-api-operator's webhooks before providers


def test_provider_objects_wait_until_the_operators_webhooks_answer(
    recordings: Callable[[str, bool], Recording],
) -> None:
    """The operator's provider webhooks (failurePolicy Fail, CA from cert-manager's cainjector)
    are not behind its readiness probe, and pulumi-kubernetes retries a create only on NotFound
    or NoMatch (v4.32.0 provider/pkg/await/await.go:274): a gate that submits the provider
    objects themselves by a server-side dry run (wait-ready.sh retries "failed calling webhook")
    stands between the operator's release and every provider object."""
    prod = recordings("prod", False)
    gate = prod.named("management-capi-operator-webhooks")
    assert gate.type == "command:local:Command"
    assert "wait-ready" in gate.inputs["create"]
    closure = prod.dependency_closure(gate)
    assert prod.named("management-capi-operator").urn in closure
    providers = [r for r in prod.resources if "operator.cluster.x-k8s.io" in r.type]
    assert len(providers) == 4
    env = gate.inputs["environment"]
    probe = json.loads(env["DRY_RUN_MANIFEST"])
    assert probe["kind"] == "List"
    assert {
        (i["kind"], i["metadata"]["name"], i["metadata"]["namespace"]) for i in probe["items"]
    } == {
        (p.inputs["kind"], p.inputs["metadata"]["name"], p.inputs["metadata"]["namespace"])
        for p in providers
    }
    assert set(env["WAIT_CRDS"].split()) == {
        f"{p.inputs['kind'].lower()}s.operator.cluster.x-k8s.io" for p in providers
    }
    for provider in providers:
        assert gate.urn in prod.dependency_closure(provider), provider.name
        # its namespace exists before the dry run names it
        namespace = provider.inputs["metadata"]["namespace"]
        assert prod.named(f"management-ns-{namespace}").urn in closure
