"""scripts/backup/control-plane.sh, backup-guard.sh and api-server-endpoints.sh against a stub
`kubectl` (tests/support/kubectl_stub.py) that models what they act on: a TenantControlPlane
Kamaji reconciles (it scales the Deployment back to the TCP's replicas on every call unless the
TCP is paused), its Deployment and API server pods (gone a few polls after a scale to 0), in
prod the Cluster whose controllers rewrite the TCP unless ``spec.paused``, and the tenant's
backup CronJob, which a restore suspends."""

from __future__ import annotations

import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.backups import objects
from components.backups.objects import CONTROL_PLANE_POD_LABEL, KAMAJI_PAUSED_ANNOTATION
from components.prod.substrate import CLUSTER_PAUSE
from components.scripts import SCRIPTS_ROOT
from tests.support import kubectl_stub
from tests.support.backup_plans import LAB_PLAN, PROD_PLAN

NOTE = "gpu-platform.io/replicas-before-restore"
RESTORE_MARK = "gpu-platform.io/restore-job"
LAST_RESTORE = "gpu-platform.io/last-restore-job"


def _stub(tmp_path: Path, state: dict[str, Any]) -> dict[str, str]:
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return {
        **kubectl_stub.install(tmp_path, state),
        "WORK_DIR": str(work),
        "CONTROL_PLANE": "tenant-a",
        "CONTROL_PLANE_POD_LABEL": CONTROL_PLANE_POD_LABEL,
        "KAMAJI_PAUSED_ANNOTATION": KAMAJI_PAUSED_ANNOTATION,
        "BACKUP_CRON_JOB": objects.BACKUP,
        "JOB_NAME": "datastore-restore-1",
        "STOP_TIMEOUT_SECONDS": "20",
    }


def _state(cluster: bool = False) -> dict[str, Any]:
    return kubectl_stub.initial_state(cluster)


def _run(script: str, env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        ["sh", str(SCRIPTS_ROOT / "backup" / script), *args],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _read(tmp_path: Path) -> dict[str, Any]:
    return kubectl_stub.read_state(tmp_path)


@pytest.mark.parametrize("prod", [False, True], ids=["lab", "prod"])
def test_stop_leaves_no_api_server_and_start_brings_back_the_replicas(
    tmp_path: Path, prod: bool
) -> None:
    env = _stub(tmp_path, _state(cluster=prod))
    if prod:
        env["PAUSE_OWNER"] = "clusters.cluster.x-k8s.io"
    stopped = _run("control-plane.sh", env, "stop")
    assert stopped.returncode == 0, stopped.stderr
    state = _read(tmp_path)
    assert state["pods"] == 0
    assert state["deployment"]["replicas"] == 0
    assert KAMAJI_PAUSED_ANNOTATION in state["tcp"]["annotations"]
    assert state["tcp"]["annotations"][NOTE] == "2"
    if prod:
        assert state["cluster"]["paused"] is True
    # A second stop (a retried Job) keeps the first count, not the 0 it finds.
    again = _run("control-plane.sh", env, "stop")
    assert again.returncode == 0, again.stderr
    assert _read(tmp_path)["tcp"]["annotations"][NOTE] == "2"

    started = _run("control-plane.sh", env, "start")
    assert started.returncode == 0, started.stderr
    state = _read(tmp_path)
    assert state["deployment"]["replicas"] == 2
    assert state["pods"] == 2
    # Only the record of the last restore stays (backup-guard.sh compares it around an export).
    assert state["tcp"]["annotations"] == {LAST_RESTORE: "datastore-restore-1"}
    assert state["cronjob"]["suspend"] is False
    if prod:
        assert state["cluster"]["paused"] is False


def test_the_lab_path_pauses_no_cluster(tmp_path: Path) -> None:
    """Without PAUSE_OWNER (the lab's TCP has no Cluster API owner) nothing but the TCP is
    paused: no patch of any other object."""
    env = _stub(tmp_path, _state(cluster=True))
    stopped = _run("control-plane.sh", env, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert _read(tmp_path)["cluster"]["paused"] is False
    calls = (tmp_path / "calls").read_text().splitlines()
    assert [c for c in calls if c.startswith("patch")] == [
        'patch cronjob datastore-backup --type merge -p {"spec":{"suspend":true}}'
    ]


@pytest.mark.parametrize("was", [None, False, True], ids=["unset", "running", "suspended"])
def test_a_restore_suspends_the_backups_until_its_verified_start(tmp_path: Path, was: Any) -> None:
    """stop suspends the scheduled backup before it touches the control plane; only start (the
    Job's last step, after check-restored) resumes it, as it was before the restore."""
    state = _state()
    state["cronjob"]["suspend"] = was
    env = _stub(tmp_path, state)
    assert _run("control-plane.sh", env, "stop").returncode == 0
    calls = (tmp_path / "calls").read_text().splitlines()
    suspended = calls.index(
        'patch cronjob datastore-backup --type merge -p {"spec":{"suspend":true}}'
    )
    assert suspended < next(i for i, c in enumerate(calls) if c.startswith("scale"))
    stopped = _read(tmp_path)
    assert stopped["cronjob"]["suspend"] is True
    assert stopped["tcp"]["annotations"][RESTORE_MARK] == "datastore-restore-1"
    # A failed step (the import) leaves everything so; a re-run's stop keeps the first note.
    env["JOB_NAME"] = "datastore-restore-2"
    assert _run("control-plane.sh", env, "stop").returncode == 0
    assert _read(tmp_path)["tcp"]["annotations"][RESTORE_MARK] == "datastore-restore-2"
    assert _run("control-plane.sh", env, "start").returncode == 0
    state = _read(tmp_path)
    assert state["cronjob"]["suspend"] is (was is True)
    assert RESTORE_MARK not in state["tcp"]["annotations"]


def _guard(env: dict[str, str], when: str) -> subprocess.CompletedProcess[str]:
    return _run("backup-guard.sh", env, when)


def _one_error(done: subprocess.CompletedProcess[str]) -> str:
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert lines[0].startswith("error: ")
    return lines[0]


def test_the_backup_guard_passes_a_running_tenant(tmp_path: Path) -> None:
    state = _state()
    state["tcp"]["annotations"] = {LAST_RESTORE: "datastore-restore-0", "other": "x"}
    env = _stub(tmp_path, state)
    assert _guard(env, "before").returncode == 0
    assert _guard(env, "after").returncode == 0


@pytest.mark.parametrize(
    ("annotations", "words"),
    [
        ({KAMAJI_PAUSED_ANNOTATION: ""}, "is paused"),
        ({KAMAJI_PAUSED_ANNOTATION: "by-hand"}, "is paused"),
        ({RESTORE_MARK: "datastore-restore-7"}, "being restored by job datastore-restore-7"),
    ],
)
def test_the_backup_guard_refuses_a_paused_or_restoring_tenant(
    tmp_path: Path, annotations: dict[str, str], words: str
) -> None:
    state = _state()
    state["tcp"]["annotations"] = annotations
    env = _stub(tmp_path, state)
    for when in ("before", "after"):
        assert words in _one_error(_guard(env, when))


def test_the_backup_guard_refuses_an_export_a_restore_overlapped(tmp_path: Path) -> None:
    """A restore that began after the first check and finished before the second still
    changed the prefix during the export: the record of the last restore tells."""
    env = _stub(tmp_path, _state())
    assert _guard(env, "before").returncode == 0
    restore_env = {**env, "JOB_NAME": "datastore-restore-9"}
    assert _run("control-plane.sh", restore_env, "stop").returncode == 0
    assert "is paused" in _one_error(_guard(env, "after"))
    assert _run("control-plane.sh", restore_env, "start").returncode == 0
    assert "restore job datastore-restore-9 ran" in _one_error(_guard(env, "after"))
    # The next scheduled backup, wholly after the restore, passes.
    assert _guard(env, "before").returncode == 0
    assert _guard(env, "after").returncode == 0


def test_the_backup_guard_fails_closed_when_it_cannot_read(tmp_path: Path) -> None:
    env = _stub(tmp_path, _state())
    env["CONTROL_PLANE"] = "tenant-a"
    (tmp_path / "state.json").write_text("not json")
    assert _guard(env, "before").returncode != 0


def test_stop_fails_when_the_api_server_does_not_go(tmp_path: Path) -> None:
    state = _state()
    state["tcp"]["annotations"] = {}
    env = _stub(tmp_path, state)
    env["STOP_TIMEOUT_SECONDS"] = "2"
    # A Kamaji that ignores the pause: the stub's reconcile keeps scaling back.
    env["CONTROL_PLANE_POD_LABEL"] = CONTROL_PLANE_POD_LABEL
    env["KAMAJI_PAUSED_ANNOTATION"] = "example.invalid/not-the-pause"
    done = _run("control-plane.sh", env, "stop")
    assert done.returncode != 0
    assert "still running" in done.stderr


def test_endpoints_and_version_are_read_off_the_api_server(tmp_path: Path) -> None:
    env = _stub(tmp_path, _state())
    done = _run("api-server-endpoints.sh", env)
    assert done.returncode == 0, done.stderr
    work = Path(env["WORK_DIR"])
    assert (work / "endpoints").read_text().strip() == (
        "https://kamaji-etcd-0.kamaji-etcd.kamaji-system.svc:2379,"
        "https://kamaji-etcd-1.kamaji-etcd.kamaji-system.svc:2379"
    )
    assert (work / "kubernetes-version").read_text().strip() == "v1.35.0"


def test_a_control_plane_on_kine_is_refused(tmp_path: Path) -> None:
    state = _state()
    state["deployment"]["args"] = ["--etcd-servers=unix:///var/run/kine.sock"]
    env = _stub(tmp_path, state)
    done = _run("api-server-endpoints.sh", env)
    assert done.returncode == 1
    assert "not etcd" in done.stderr
    assert not (Path(env["WORK_DIR"]) / "endpoints").exists()


# What each kubectl call the scripts make needs of the API (kubernetes/kubectl v0.35.0):
# `rollout status` gets, lists and watches the Deployment (pkg/cmd/rollout/rollout_status.go:
# 161-194); `scale` gets it and patches deployments/scale (pkg/cmd/scale/scale.go:218-247);
# `annotate` gets the object and patches it (pkg/cmd/annotate/annotate.go:297-303, 376-377).
def _needed(call: list[str]) -> set[tuple[str, str, str]]:
    verb = call[0]
    if verb == "rollout":
        return {("apps", "deployments", v) for v in ("get", "list", "watch")}
    if verb == "scale":
        return {("apps", "deployments", "get"), ("apps", "deployments/scale", "patch")}
    if verb == "annotate":
        group, plural = _group_of(call[1])
        return {(group, plural, "get"), (group, plural, "patch")}
    if verb == "patch":
        return {(*_group_of(call[1]), "patch")}
    if verb == "get" and call[1] == "pods":
        return {("", "pods", "list")}
    if verb == "get":
        return {(*_group_of(call[1]), "get")}
    raise AssertionError(f"no permission table entry for kubectl {call}")


def _group_of(resource: str) -> tuple[str, str]:
    if resource == "deployment":
        return ("apps", "deployments")
    if resource in ("cronjob", "job"):
        return ("batch", f"{resource}s")
    plural, _, group = resource.partition(".")
    return (group, plural)


def _granted(rules: list[dict[str, Any]]) -> set[tuple[str, str, str]]:
    return {
        (group, resource, verb)
        for rule in rules
        for group in rule["apiGroups"]
        for resource in rule["resources"]
        for verb in rule["verbs"]
    }


@pytest.mark.parametrize("prod", [False, True], ids=["lab", "prod"])
def test_the_restore_role_allows_every_call_the_scripts_make(tmp_path: Path, prod: bool) -> None:
    # A failed restore's mark, so that stop also reads whether its Job still runs.
    state = _state(cluster=prod)
    state["tcp"]["annotations"][RESTORE_MARK] = "datastore-restore-0"
    state["jobs"] = {"datastore-restore-0": _job("Failed")}
    env = _stub(tmp_path, state)
    if prod:
        env["PAUSE_OWNER"] = CLUSTER_PAUSE.resource
    for script, args in (
        ("api-server-endpoints.sh", ()),
        ("control-plane.sh", ("stop",)),
        ("control-plane.sh", ("start",)),
    ):
        done = _run(script, env, *args)
        assert done.returncode == 0, done.stderr
    plan = PROD_PLAN if prod else LAB_PLAN
    granted = _granted(objects.access(plan, restore=True)[1]["rules"])
    calls = [line.split() for line in (tmp_path / "calls").read_text().splitlines()]
    assert ["get", "job"] in [c[:2] for c in calls]
    missing = {need for call in calls for need in _needed(call)} - granted
    assert not missing, f"the restore Role lacks {sorted(missing)}"
    # The backup runs the guard and the endpoints step: its Role is enough for that.
    (tmp_path / "calls").write_text("")
    assert _run("backup-guard.sh", env, "before").returncode == 0
    assert _run("api-server-endpoints.sh", env).returncode == 0
    assert _run("backup-guard.sh", env, "after").returncode == 0
    backup_calls = [line.split() for line in (tmp_path / "calls").read_text().splitlines()]
    backup_granted = _granted(objects.access(plan, restore=False)[1]["rules"])
    assert {n for c in backup_calls for n in _needed(c)} <= backup_granted


# ------------------------------------------------------------------- one restore at a time


def _job(*conditions: str, active: int = 0) -> dict[str, Any]:
    return {
        "active": active,
        "conditions": [{"type": c, "status": "True"} for c in conditions],
    }


def test_a_second_restore_is_refused_while_the_first_runs(tmp_path: Path) -> None:
    state = _state()
    state["jobs"] = {"datastore-restore-1": _job(active=1)}
    env = _stub(tmp_path, state)
    assert _run("control-plane.sh", env, "stop").returncode == 0
    before = len((tmp_path / "calls").read_text().splitlines())
    second = _run("control-plane.sh", {**env, "JOB_NAME": "datastore-restore-2"}, "stop")
    assert second.returncode == 1
    assert "restore job datastore-restore-1 is still running" in second.stderr
    after = _read(tmp_path)
    assert after["tcp"]["annotations"][RESTORE_MARK] == "datastore-restore-1"
    # The second touched nothing: its only calls were reads.
    calls = (tmp_path / "calls").read_text().splitlines()[before:]
    assert calls
    assert all(c.startswith("get ") for c in calls), calls
    # Nor may it start the control plane the first one stopped.
    started = _run("control-plane.sh", {**env, "JOB_NAME": "datastore-restore-2"}, "start")
    assert started.returncode == 1
    assert "not datastore-restore-2" in started.stderr
    assert _read(tmp_path)["deployment"]["replicas"] == 0


@pytest.mark.parametrize(
    "holder",
    [None, _job("Failed"), _job("Complete"), _job("FailureTarget", "Failed")],
    ids=["gone", "failed", "complete", "deadline"],
)
def test_a_finished_restores_lock_is_taken_over(tmp_path: Path, holder: Any) -> None:
    """A failed restore leaves its mark; the re-run takes it over and finishes the job."""
    state = _state()
    if holder is not None:
        state["jobs"] = {"datastore-restore-1": holder}
    env = _stub(tmp_path, state)
    assert _run("control-plane.sh", env, "stop").returncode == 0
    rerun = {**env, "JOB_NAME": "datastore-restore-2"}
    stopped = _run("control-plane.sh", rerun, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert "datastore-restore-1 no longer runs" in stopped.stdout
    assert _run("control-plane.sh", rerun, "start").returncode == 0
    done = _read(tmp_path)
    assert done["tcp"]["annotations"] == {LAST_RESTORE: "datastore-restore-2"}
    assert done["deployment"]["replicas"] == 2


def test_a_job_whose_pods_still_terminate_keeps_its_lock(tmp_path: Path) -> None:
    state = _state()
    state["jobs"] = {"datastore-restore-1": _job("Failed", active=1)}
    env = _stub(tmp_path, state)
    assert _run("control-plane.sh", env, "stop").returncode == 0
    second = _run("control-plane.sh", {**env, "JOB_NAME": "datastore-restore-2"}, "stop")
    assert second.returncode == 1


def test_two_restores_racing_for_the_lock_leave_one_holder(tmp_path: Path) -> None:
    """Both read the same unmarked TenantControlPlane; the resourceVersion precondition lets
    exactly one write its mark, and the other then finds it running."""
    state = _state()
    state["jobs"] = {f"datastore-restore-{i}": _job(active=1) for i in (1, 2)}
    env = _stub(tmp_path, state)
    script = str(SCRIPTS_ROOT / "backup" / "control-plane.sh")
    racers = [
        subprocess.Popen(
            ["sh", script, "stop"],
            env={**env, "JOB_NAME": f"datastore-restore-{i}"},
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for i in (1, 2)
    ]
    results = [(r.wait(timeout=60), r.stderr.read() if r.stderr else "") for r in racers]
    assert sorted(code for code, _ in results) == [0, 1], results
    loser = next(err for code, err in results if code == 1)
    assert "one restore at a time" in loser
    winner = next(i for i, (code, _) in zip((1, 2), results, strict=True) if code == 0)
    assert _read(tmp_path)["tcp"]["annotations"][RESTORE_MARK] == f"datastore-restore-{winner}"


def test_a_stale_resource_version_is_a_conflict_the_lock_retries(tmp_path: Path) -> None:
    """The stub's optimistic concurrency can fail (the race test above relies on it)."""
    env = _stub(tmp_path, _state())
    done = subprocess.run(
        [
            "kubectl",
            "annotate",
            "tenantcontrolplanes.kamaji.clastix.io",
            "tenant-a",
            "--resource-version=0",
            f"{RESTORE_MARK}=x",
        ],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 1
    assert "Conflict" in done.stderr
    assert RESTORE_MARK not in _read(tmp_path)["tcp"]["annotations"]
