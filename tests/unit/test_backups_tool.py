"""scripts/backups.py: the Jobs it makes from the tenant's CronJobs (components.backups.objects)
and how it reads the tool's summaries; the cluster side is faked by a recorded kubectl."""

from __future__ import annotations

import argparse
import importlib.util
import json
import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from components.backups import objects
from tests.support.backup_plans import LAB_PLAN, PROD_PLAN


def _load_tool() -> Any:
    path = Path(__file__).resolve().parents[2] / "scripts" / "backups.py"
    spec = importlib.util.spec_from_file_location("backups_tool", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules["backups_tool"] = module
    spec.loader.exec_module(module)
    return module


backups = _load_tool()

PLAN = LAB_PLAN


def _live(manifest: dict[str, Any]) -> dict[str, Any]:
    """The CronJob as the API returns it (with a uid)."""
    live = json.loads(json.dumps(manifest))
    live["metadata"]["uid"] = "0a1b2c3d"
    return live


def _containers(job: dict[str, Any]) -> list[dict[str, Any]]:
    pod = job["spec"]["template"]["spec"]
    return [*pod.get("initContainers", []), *pod["containers"]]


def test_a_restore_job_names_the_backup_in_its_fetch_step_only() -> None:
    cron_job = _live(objects.restore_cron_job(PLAN))
    job = backups.job_from(cron_job, "datastore-restore-1", env={"BACKUP_NAME": "tenant-a-x.gz"})
    fetch = next(c for c in _containers(job) if c["name"] == "fetch")
    assert {"name": "BACKUP_NAME", "value": "tenant-a-x.gz"} in fetch["env"]
    assert [c["name"] for c in _containers(job)] == [
        c["name"] for c in _containers(cron_job["spec"]["jobTemplate"])
    ]
    assert job["metadata"]["namespace"] == "tenant-a"
    # Not owned by the CronJob (its history limit would prune the scheduled runs); cleaned up.
    assert "ownerReferences" not in job["metadata"]
    assert job["spec"]["ttlSecondsAfterFinished"] == backups.MANUAL_JOB_TTL_SECONDS
    # The CronJob itself is untouched (a deep copy).
    original = next(c for c in _containers(cron_job["spec"]["jobTemplate"]) if c["name"] == "fetch")
    assert {"name": "BACKUP_NAME", "value": "latest"} in original["env"]


def test_a_listing_runs_the_upload_container_alone_with_list() -> None:
    job = backups.job_from(
        _live(objects.backup_cron_job(PLAN)),
        "datastore-backup-list-1",
        only="upload",
        command="list",
    )
    pod = job["spec"]["template"]["spec"]
    assert "initContainers" not in pod
    assert [c["name"] for c in pod["containers"]] == ["upload"]
    assert pod["containers"][0]["command"][-1] == "list"
    secret_env = {e["name"] for e in pod["containers"][0]["env"] if "valueFrom" in e}
    assert {"AWS_ACCESS_KEY_ID", "AWS_SECRET_ACCESS_KEY"} <= secret_env


def test_an_unknown_container_is_one_line() -> None:
    with pytest.raises(backups.BackupsError, match="has no container 'nope'"):
        backups.job_from(_live(objects.backup_cron_job(PLAN)), "x", only="nope")


def test_summaries_are_read_from_prefixed_logs() -> None:
    logs = (
        "[pod/datastore-restore-1-abc/stop] stopped tenant-a\n"
        '[pod/datastore-restore-1-abc/check] {"action": "restored", "keysRestored": 42}\n'
        "[pod/datastore-restore-1-abc/start] started tenant-a\n"
    )
    assert backups.summaries(logs) == [{"action": "restored", "keysRestored": 42}]


class _Cluster:
    """A recorded kubectl: the CronJob lookup, the Job's create and its status over time, its
    pod with the containers' states, each container's logs."""

    def __init__(
        self,
        cron_job: dict[str, Any],
        statuses: list[dict[str, Any]],
        logs: dict[str, str],
        states: dict[str, str] | None = None,
    ) -> None:
        self.cron_job, self.statuses, self.logs = cron_job, statuses, logs
        self.states = states or dict.fromkeys(logs, "terminated")
        self.created: list[dict[str, Any]] = []
        self.log_reads: list[str] = []
        self.other_jobs: list[dict[str, Any]] = []

    def __call__(self, args: Sequence[str], stdin: str | None) -> str:
        if args[:2] == ["get", "cronjobs"]:
            return json.dumps({"items": [self.cron_job]})
        if args[:2] == ["create", "-f"]:
            assert stdin is not None
            self.created.append(json.loads(stdin))
            return ""
        if "jobs" in args and "get" in args:
            assert "-l" in args
            return json.dumps({"items": self.other_jobs})
        if "job" in args and "get" in args:
            status = self.statuses.pop(0) if len(self.statuses) > 1 else self.statuses[0]
            return json.dumps({"status": status})
        if "pods" in args and "get" in args:
            pod = self.created[-1]["spec"]["template"]["spec"]
            names = [c["name"] for c in [*pod.get("initContainers", []), *pod["containers"]]]
            statuses = [{"name": n, "state": {self.states.get(n, "waiting"): {}}} for n in names]
            return json.dumps(
                {
                    "items": [
                        {
                            "metadata": {"name": "job-pod-1", "creationTimestamp": "t"},
                            "spec": pod,
                            "status": {"initContainerStatuses": statuses},
                        }
                    ]
                }
            )
        if "logs" in args:
            container = args[args.index("-c") + 1]
            assert self.states.get(container) != "waiting", f"read {container} before it started"
            self.log_reads.append(container)
            return self.logs.get(container, "")
        raise AssertionError(f"unexpected kubectl {args}")


def _done(kind: str) -> dict[str, Any]:
    return {"conditions": [{"type": kind, "status": "True"}]}


def _args(action: str, yes: bool = False, backup: str = "latest") -> argparse.Namespace:
    return argparse.Namespace(
        action=action, tenant="tenant-a", backup=backup, yes=yes, timeout=30.0
    )


def _restore_job(name: str, status: dict[str, Any]) -> dict[str, Any]:
    return {"metadata": {"name": name}, "status": status}


def test_a_restore_is_refused_while_another_restore_job_runs() -> None:
    cluster = _Cluster(_live(objects.restore_cron_job(PLAN)), [_done("Complete")], {})
    cluster.other_jobs = [
        _restore_job("datastore-restore-1", _done("Failed")),
        _restore_job("datastore-restore-2", {"active": 1}),
    ]
    with pytest.raises(backups.BackupsError, match="datastore-restore-2 of tenant-a still runs"):
        backups.act(cluster, _args("restore", yes=True))
    assert cluster.created == []


@pytest.mark.parametrize(
    ("status", "running"),
    [
        ({}, True),
        ({"active": 1}, True),
        (_done("Failed"), False),
        (_done("Complete"), False),
        ({**_done("Failed"), "terminating": 1}, True),
    ],
)
def test_which_jobs_still_run(status: dict[str, Any], running: bool) -> None:
    assert backups.still_running({"status": status}) is running


def test_the_tool_waits_as_long_as_the_restore_job_may_run(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    """It gave up at 1800 s while the Job may run 3600 s, inviting a second restore."""
    job = backups.job_from(_live(objects.restore_cron_job(PLAN)), "j")
    deadline = job["spec"]["activeDeadlineSeconds"]
    assert backups.job_deadline(job) >= deadline
    waited: list[float] = []
    cluster = _Cluster(_live(objects.restore_cron_job(PLAN)), [_done("Complete")], {})
    original = backups.run_job

    def recording(kubectl: Any, job: Any, timeout: float, poll: float = 3.0) -> Any:
        waited.append(timeout)
        return original(kubectl, job, timeout, 0.01)

    args = _args("restore", yes=True)
    args.timeout = None
    monkeypatch.setattr(backups, "run_job", recording)
    backups.act(cluster, args)
    assert waited == [deadline + backups.JOB_DEADLINE_MARGIN_SECONDS]


def test_a_restore_must_name_its_backup() -> None:
    """No default: `latest` is said out loud or a name is given (docs/backups.md)."""
    cluster = _Cluster(_live(objects.restore_cron_job(PLAN)), [_done("Complete")], {})
    with pytest.raises(backups.BackupsError, match="name the backup to restore"):
        backups.act(cluster, _args("restore", yes=True, backup=""))
    assert cluster.created == []


def test_an_accepted_backup_tells_the_upload_step(capsys: pytest.CaptureFixture[str]) -> None:
    logs = {"upload": '{"action": "backup", "name": "tenant-a-1.json.gz"}'}
    states = dict.fromkeys(("guard", "endpoints", "export", "recheck", "upload"), "terminated")
    cluster = _Cluster(_live(objects.backup_cron_job(PLAN)), [_done("Complete")], logs, states)
    args = _args("backup")
    args.accept_suspect = True
    assert backups.act(cluster, args) == 0
    upload = next(c for c in _containers(cluster.created[0]) if c["name"] == "upload")
    assert {"name": "BACKUP_ACCEPT_SUSPECT", "value": "1"} in upload["env"]
    plain = _Cluster(_live(objects.backup_cron_job(PLAN)), [_done("Complete")], logs, states)
    assert backups.act(plain, _args("backup")) == 0
    upload = next(c for c in _containers(plain.created[0]) if c["name"] == "upload")
    assert {"name": "BACKUP_ACCEPT_SUSPECT", "value": ""} in upload["env"]


def test_a_restore_without_yes_creates_nothing() -> None:
    cluster = _Cluster(_live(objects.restore_cron_job(PLAN)), [_done("Complete")], {})
    with pytest.raises(backups.BackupsError, match="--yes"):
        backups.act(cluster, _args("restore"))
    assert cluster.created == []


def test_a_failed_step_is_shown_with_its_logs_and_later_steps_are_not_read(
    capsys: pytest.CaptureFixture[str],
) -> None:
    logs = {"endpoints": "etcd endpoints of tenant-a: https://e:2379", "fetch": "error: sha256"}
    states = {"endpoints": "terminated", "fetch": "terminated"}
    cluster = _Cluster(_live(objects.restore_cron_job(PLAN)), [_done("Failed")], logs, states)
    with pytest.raises(backups.BackupsError, match="restore of tenant-a failed"):
        backups.act(cluster, _args("restore", yes=True))
    err = capsys.readouterr().err
    assert "[pod/job-pod-1/fetch] error: sha256" in err
    assert "[pod/job-pod-1/stop] (not started)" in err
    assert err.index("/endpoints]") < err.index("/fetch]") < err.index("/stop]")
    assert cluster.log_reads == ["endpoints", "fetch"]


def test_a_job_still_retrying_is_not_yet_a_failure(capsys: pytest.CaptureFixture[str]) -> None:
    """The backup Job retries a failed pod (backoffLimit 2): one failed pod with the Job
    still running is waited out; the Job's Complete condition decides."""
    logs = {"upload": '{"action": "backup", "name": "tenant-a-1.json.gz"}'}
    states = {"endpoints": "terminated", "export": "terminated", "upload": "terminated"}
    retrying = {"failed": 1, "active": 1}
    cluster = _Cluster(
        _live(objects.backup_cron_job(PLAN)), [retrying, _done("Complete")], logs, states
    )
    succeeded, text = backups.run_job(cluster, backups.job_from(cluster.cron_job, "j"), 30, 0.01)
    assert succeeded
    assert backups.summaries(text) == [{"action": "backup", "name": "tenant-a-1.json.gz"}]


def test_a_backup_prints_the_tools_summary(capsys: pytest.CaptureFixture[str]) -> None:
    logs = {"upload": '{"action": "backup", "name": "tenant-a-1.json.gz"}'}
    states = dict.fromkeys(("guard", "endpoints", "export", "recheck", "upload"), "terminated")
    cluster = _Cluster(_live(objects.backup_cron_job(PLAN)), [_done("Complete")], logs, states)
    assert backups.act(cluster, _args("backup")) == 0
    out = capsys.readouterr().out
    assert json.loads(out.splitlines()[0])["name"] == "tenant-a-1.json.gz"
    assert cluster.created[0]["metadata"]["name"].startswith("datastore-backup-manual-")


def test_a_restore_from_another_tenant_reads_its_backup_through_a_copy_of_its_target() -> None:
    """make restore TENANT=tenant-a FROM_TENANT=team-vision: the Job of tenant-a's restore
    template reads through a copy of team-vision's target Secret (made before the Job, deleted
    after it), tells fetch the source tenant and prefix, and never writes the root keys."""
    restore = _live(objects.restore_cron_job(PLAN))
    source = _live(objects.backup_cron_job(PROD_PLAN))
    calls: list[tuple[str, ...]] = []
    created: list[dict[str, Any]] = []

    def kubectl(args: Sequence[str], stdin: str | None) -> str:
        calls.append(tuple(args))
        if args[:2] == ["get", "cronjobs"]:
            wanted = "team-vision" if "team-vision" in args[4] else "tenant-a"
            return json.dumps({"items": [source if wanted == "team-vision" else restore]})
        if list(args[2:5]) == ["get", "secret", objects.TARGET]:
            assert args[1] == "team-vision"
            return json.dumps({"data": {"archive.key": "c2VjcmV0", "S3_BUCKET": "dmlzaW9u"}})
        if args[:2] == ["create", "-f"]:
            assert stdin is not None
            created.append(json.loads(stdin))
            return ""
        if "jobs" in args:
            return json.dumps({"items": []})
        if "job" in args:
            return json.dumps({"status": _done("Complete")})
        if "pods" in args:
            return json.dumps({"items": []})
        if "delete" in args:
            return ""
        raise AssertionError(f"unexpected kubectl {args}")

    args = argparse.Namespace(
        action="restore",
        tenant="tenant-a",
        backup="team-vision-20260101T000000Z-rev9.json.gz",
        yes=True,
        timeout=30.0,
        from_tenant="team-vision",
    )
    assert backups.act(kubectl, args) == 0
    secret, job = created
    assert secret["kind"] == "Secret"
    assert secret["metadata"]["namespace"] == "tenant-a"
    assert secret["data"] == {"archive.key": "c2VjcmV0", "S3_BUCKET": "dmlzaW9u"}
    name = secret["metadata"]["name"]
    pod = job["spec"]["template"]["spec"]
    assert [c["name"] for c in pod["initContainers"]] == [
        "endpoints",
        "fetch",
        "stop",
        "import",
        "export",
        "check",
    ]
    fetch = next(c for c in pod["initContainers"] if c["name"] == "fetch")
    env = {e["name"]: e.get("value") for e in fetch["env"]}
    assert env["BACKUP_SOURCE_TENANT"] == "team-vision"
    assert env["BACKUP_SOURCE_PREFIX"] == "/team_vision/"
    assert env["BACKUP_PREFIX"] == "/tenant_a/"
    refs = {
        e["valueFrom"]["secretKeyRef"]["name"]
        for c in [*pod["initContainers"], *pod["containers"]]
        for e in c["env"]
        if "secretKeyRef" in e.get("valueFrom", {})
    }
    assert refs == {name}
    volumes = {v["name"]: v for v in pod["volumes"]}
    assert volumes["target"]["secret"]["secretName"] == name
    # The copy goes once the Job is done; the values were never printed.
    assert calls[-1] == ("-n", "tenant-a", "delete", "secret", name, "--ignore-not-found")


def test_a_restore_from_the_tenant_itself_is_refused() -> None:
    restore = _live(objects.restore_cron_job(PLAN))

    def kubectl(args: Sequence[str], stdin: str | None) -> str:
        if args[:2] == ["get", "cronjobs"]:
            return json.dumps({"items": [restore]})
        if "jobs" in args:
            return json.dumps({"items": []})
        raise AssertionError(f"nothing may be created: {args}")

    args = argparse.Namespace(
        action="restore",
        tenant="tenant-a",
        backup="latest",
        yes=True,
        timeout=30.0,
        from_tenant="tenant-a",
    )
    with pytest.raises(backups.BackupsError, match="FROM_TENANT is tenant-a itself"):
        backups.act(kubectl, args)
