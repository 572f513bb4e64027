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

from components.config.changes import CHANGEABLE, CHANGES
from components.config_reference import reference_rows
from components.labels import IDENTITY_READ_SUFFIX
from tests.support.harness import Recording, Secret, evaluate, load_stack_config

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


# ------------------------------------------- every changeable key: a preview of that update


def _lab_changes(config: dict[str, Any]) -> None:
    platform = config[PLATFORM]
    platform["hami"].update(
        webhookFailurePolicy="Ignore",
        nodeLockTimeout="45s",
        gpuSchedulerPolicy="binpack",
        nodeSchedulerPolicy="spread",
    )
    platform["metrics"] = {
        "retention": "30d",
        "scrapeInterval": "60s",
        "alertmanagers": ["http://am.example.internal:9093"],
    }
    tenant_a, tenant_b = platform["tenants"]
    tenant_a["gpuQuotas"][0].update(gpuMemoryMiB=40960, gpuCores=90, gpus=8)
    tenant_a["controlPlane"] = {
        "replicas": 2,
        "resources": {
            part: {"requests": {"cpu": "210m"}, "limits": {"memory": "1100Mi"}}
            for part in ("apiServer", "controllerManager", "scheduler")
        },
    }
    tenant_a["admission"] = {
        "mode": "Warn",
        "maxGpuMemoryMiB": 40000,
        "wholeCards": False,
        "privilegedNamespaces": ["tools"],
    }
    tenant_a["backups"] = {"schedule": "7 */3 * * *", "retention": 4}
    tenant_a["workerPools"][0]["replicas"] = 2
    workload = tenant_b["workloads"][0]
    workload.update(replicas=2, image="busybox:1.36.1", command=["sleep", "3600"])
    workload["gpu"].update(cards=2, memoryMiB=12000, cores=40)


def _prod_changes(config: dict[str, Any]) -> None:
    platform = config[PLATFORM]
    platform["gpuDriver"]["autoUpgrade"] = True
    platform["management"]["existing"]["clusterApi"]["githubTokenConfigKey"] = "capiGithubToken"
    config["gpu-platform:capiGithubToken"] = Secret("ghp_example")
    vision, _llm, speech = platform["tenants"]
    machine = vision["workerPools"][0]["machine"]
    machine["healthCheck"].update(unhealthyAfter="600s", maxUnhealthy="2")
    machine["rollout"] = {"maxSurge": 1, "maxUnavailable": 0}
    vision["workerPools"][0]["replicas"] = 3
    speech["dataStore"]["dedicated"]["endpoints"].append("speech-pg-2.db.example.internal:5432")
    speech["workerPools"][0]["machine"]["healthCheck"] = {"enabled": True}


# key -> (stack, the resource its change reaches, what that resource's inputs then hold and did
# not before); all of one stack's changes are previewed together, as one update.
PREVIEWED: dict[str, tuple[str, str, str]] = {
    "hami.webhookFailurePolicy": ("lab", "tenant-a-hami", '"failurePolicy": "Ignore"'),
    "hami.nodeLockTimeout": ("lab", "tenant-b-hami", "--node-lock-timeout=45s"),
    "hami.gpuSchedulerPolicy": ("lab", "tenant-a-hami", '"gpuSchedulerPolicy": "binpack"'),
    "hami.nodeSchedulerPolicy": ("lab", "tenant-a-hami", '"nodeSchedulerPolicy": "spread"'),
    "metrics.retention": ("lab", "management-metrics-prometheus", "retention.time=30d"),
    "metrics.scrapeInterval": ("lab", "tenant-a-metrics-agent-config", "60s"),
    "metrics.alertmanagers": (
        "lab",
        "management-metrics-prometheus-config",
        "am.example.internal:9093",
    ),
    "tenants[].gpuQuotas[].gpuMemoryMiB": (
        "lab",
        "tenant-a-quota-default",
        '"limits.nvidia.com/gpumem": "40960"',
    ),
    "tenants[].gpuQuotas[].gpuCores": (
        "lab",
        "tenant-a-quota-default",
        '"limits.nvidia.com/gpucores": "90"',
    ),
    "tenants[].gpuQuotas[].gpus": (
        "lab",
        "tenant-a-quota-default",
        '"requests.nvidia.com/gpu": "8"',
    ),
    "tenants[].controlPlane.replicas": ("lab", "tenant-a-control-plane", '"replicas": 2.0'),
    "tenants[].controlPlane.resources.apiServer.requests": (
        "lab",
        "tenant-a-control-plane",
        '"apiServer": {"limits": {"memory": "1100Mi"}, "requests": {"cpu": "210m"}}',
    ),
    "tenants[].controlPlane.resources.apiServer.limits": (
        "lab",
        "tenant-a-control-plane",
        '"apiServer": {"limits": {"memory": "1100Mi"}',
    ),
    "tenants[].controlPlane.resources.controllerManager.requests": (
        "lab",
        "tenant-a-control-plane",
        '"controllerManager": {"limits": {"memory": "1100Mi"}, "requests": {"cpu": "210m"}}',
    ),
    "tenants[].controlPlane.resources.controllerManager.limits": (
        "lab",
        "tenant-a-control-plane",
        '"controllerManager": {"limits": {"memory": "1100Mi"}',
    ),
    "tenants[].controlPlane.resources.scheduler.requests": (
        "lab",
        "tenant-a-control-plane",
        '"scheduler": {"limits": {"memory": "1100Mi"}, "requests": {"cpu": "210m"}}',
    ),
    "tenants[].controlPlane.resources.scheduler.limits": (
        "lab",
        "tenant-a-control-plane",
        '"scheduler": {"limits": {"memory": "1100Mi"}',
    ),
    "tenants[].admission.mode": ("lab", "tenant-a-admission-binding", '["Warn"]'),
    "tenants[].admission.maxGpuMemoryMiB": (
        "lab",
        "tenant-a-admission-limits",
        '"maxGpuMemoryMiB": "40000"',
    ),
    "tenants[].admission.wholeCards": ("lab", "tenant-a-admission-limits", '"wholeCards": "false"'),
    "tenants[].admission.privilegedNamespaces": (
        "lab",
        "tenant-a-admission-limits",
        '"privilegedNamespace.tools": "true"',
    ),
    "tenants[].backups.schedule": ("lab", "tenant-a-backup", '"schedule": "7 */3 * * *"'),
    "tenants[].backups.retention": (
        "lab",
        "tenant-a-backup",
        '"name": "BACKUP_RETENTION", "value": "4"',
    ),
    "tenants[].workerPools[].replicas": ("prod", "team-vision-a100-machines", '"replicas": 3.0'),
    "tenants[].workloads[].replicas": (
        "lab",
        "tenant-b-workload-default-inference-sample",
        '"replicas": 2.0',
    ),
    "tenants[].workloads[].image": (
        "lab",
        "tenant-b-workload-default-inference-sample",
        '"image": "busybox:1.36.1"',
    ),
    "tenants[].workloads[].command": (
        "lab",
        "tenant-b-workload-default-inference-sample",
        '"command": ["sleep", "3600"]',
    ),
    "tenants[].workloads[].gpu.cards": (
        "lab",
        "tenant-b-workload-default-inference-sample",
        '"nvidia.com/gpu": "2"',
    ),
    "tenants[].workloads[].gpu.memoryMiB": (
        "lab",
        "tenant-b-workload-default-inference-sample",
        '"nvidia.com/gpumem": "12000"',
    ),
    "tenants[].workloads[].gpu.cores": (
        "lab",
        "tenant-b-workload-default-inference-sample",
        '"nvidia.com/gpucores": "40"',
    ),
    "management.existing.clusterApi.githubTokenConfigKey": (
        "prod",
        "management-capi-kamaji",
        '"configSecret"',
    ),
    "gpuDriver.autoUpgrade": ("prod", "team-vision-gpu-operator", '"autoUpgrade": true'),
    "tenants[].dataStore.dedicated.endpoints": (
        "prod",
        "team-speech-datastore",
        "speech-pg-2.db.example.internal:5432",
    ),
    "tenants[].workerPools[].machine.healthCheck.enabled": (
        "prod",
        "team-speech-l40s-health-check",
        '"clusterName": "team-speech"',
    ),
    "tenants[].workerPools[].machine.healthCheck.unhealthyAfter": (
        "prod",
        "team-vision-a100-health-check",
        '"timeoutSeconds": 600.0',
    ),
    "tenants[].workerPools[].machine.healthCheck.maxUnhealthy": (
        "prod",
        "team-vision-a100-health-check",
        '"unhealthyLessThanOrEqualTo": 2.0',
    ),
    "tenants[].workerPools[].machine.rollout.maxSurge": (
        "prod",
        "team-vision-a100-machines",
        '"maxSurge": 1.0',
    ),
    "tenants[].workerPools[].machine.rollout.maxUnavailable": (
        "prod",
        "team-vision-a100-machines",
        '"maxUnavailable": 0.0',
    ),
}
# Changeable keys whose update is not previewed here, and why.
NOT_PREVIEWED = {
    "tenants[].deviceQuotas": "no stack file declares a gpuSharing: dra tenant; "
    "tests/program/test_dra_tenant.py registers a dra tenant's quota under mocks",
    "tenants[].deviceQuotas[].devices": "no stack file declares a gpuSharing: dra tenant; "
    "tests/program/test_dra_tenant.py registers a dra tenant's quota under mocks",
    "dataStores[].endpoints": "no stack file declares a shared DataStore; a dedicated external "
    "one's endpoints (the same DataStore object) are previewed",
    "tenants[].workloads[].gpu.memoryPercentage": "excludes memoryMiB on the same workload, "
    "whose change (the same container limit) is previewed",
    "capacity.headroomPercent": "deploys nothing: it only moves where the preview warns "
    "(tests/program/test_capacity_check.py previews both sides of it)",
}
# What the changes above also change, by design: the lab pool's second worker (created) and
# what lists the pool's nodes, and what carries a hash of a changed configuration.
ALSO_CHANGED = {
    "lab": {
        "tenant-a-a100-1",
        "tenant-a-a100-1-node-images",
        "tenant-a-a100-1-node-join",
        "tenant-a-a100-1-gpu-capacity",
        "tenant-a-a100-1-inventory",
        "tenant-a-a100-declared-inventory",
        "tenant-a-a100-completer-role",
        "tenant-a-a100-completer-script",
        "tenant-a-a100-completer",
        "tenant-a-restore",  # the backup's retention is the restore template's too
        # controlPlane.replicas 1 -> 2: a replicated control plane gets its disruption budget
        # (components/availability.py).
        "tenant-a-control-plane-budget",
        # admission.mode is the claim policy's binding's mode too (components/gpu_tenant.py).
        "tenant-a-claim-admission-binding",
        "tenant-b-metrics-agent-config",
        "tenant-a-metrics-agent",
        "tenant-b-metrics-agent",
    },
    "prod": {
        *(f"management-capi-config-{p}" for p in ("cluster-api", "kubeadm", "kamaji", "metal3")),
        "management-capi-cluster-api",
        "management-capi-kubeadm",
        "management-capi-metal3",
        "team-vision-a100-declared-inventory",
        "team-llm-gpu-operator",
        "team-speech-gpu-operator",
    },
}


def _sections(keys: list[str]) -> set[str]:
    return {k for k in keys if any(o.startswith((f"{k}.", f"{k}[].")) for o in keys)}


def test_every_changeable_key_is_previewed_or_says_why_not() -> None:
    keys = [row[0] for row in reference_rows()]
    sections = _sections(keys)
    changeable = {k for k in keys if CHANGES[k][0] == CHANGEABLE and k not in sections}
    assert changeable - set(PREVIEWED) - set(NOT_PREVIEWED) == set()
    assert set(PREVIEWED) <= changeable, "only changeable keys are previewed as such"
    assert not set(PREVIEWED) & set(NOT_PREVIEWED)


@pytest.mark.parametrize("stack", ["lab", "prod"])
def test_a_preview_of_every_changeable_keys_update_plans_it_in_place(
    stack: str, recordings: Callable[[str, bool], Recording]
) -> None:
    """Each changeable key's new value reaches its resource as an in-place update (or the
    object it adds), in one preview of the deployed stack; nothing is replaced, and nothing
    changes that no key explains."""
    config = copy.deepcopy(load_stack_config(stack))
    (_lab_changes if stack == "lab" else _prod_changes)(config)
    deployed = recordings(stack, False)
    preview = evaluate(stack, True, config=config, prior=deployed)
    assert preview.error is None, preview.error
    changed = {r.name: r.step for r in preview.resources if r.step not in ("same", "read")}
    assert "replace" not in changed.values(), changed
    cases = {key: case for key, case in PREVIEWED.items() if case[0] == stack}
    for key, (_stack, name, needle) in cases.items():
        assert changed.get(name) in ("update", "create"), f"{key}: {name} is not planned"
        after = json.dumps(preview.named(name).inputs, sort_keys=True)
        assert needle in after, f"{key}: {name} does not carry {needle}"
        before = [r for r in deployed.resources if r.name == name]
        if before:
            assert needle not in json.dumps(before[0].inputs, sort_keys=True), key
    explained = {name for _s, name, _n in cases.values()} | ALSO_CHANGED[stack]
    assert set(changed) - explained == set()
