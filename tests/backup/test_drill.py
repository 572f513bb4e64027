"""The fault drill (issue 38, point 7): the restore Job's and the backup Job's steps, in their
order, against an etcd of the drill's own that it kills mid-import, moto's S3 behind a proxy that
injects faults, and the stub kubectl's TenantControlPlane, CronJob and Jobs
(tests/support/kubectl_stub.py) for the control-plane steps.

What must hold: no sequence of schedule, restore, failure and retry loses a key that a good
backup held. A backup fired while a restore runs or after one failed publishes nothing; `latest`
stays the good backup; the re-run of the failed restore by name restores every key; two restores
at once leave one restore's backup, whole; an S3 fault is one `error:` line, never a traceback.
"""

from __future__ import annotations

import base64
import os
import shutil
import signal
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest

from components.backups.objects import (
    BACKUP,
    CONTROL_PLANE_POD_LABEL,
    KAMAJI_PAUSED_ANNOTATION,
    PKI_SECRETS,
)
from tests.backup.conftest import SCRIPTS, Etcd, EtcdProcess, S3Server, load_tool
from tests.backup.faulty_s3 import Fault, faulty_s3
from tests.support import kubectl_stub

tool = load_tool()
PREFIX = "/tenant_a/"
RESTORE_MARK = "gpu-platform.io/restore-job"


def fill(etcd: Etcd, count: int, generation: str) -> dict[bytes, bytes]:
    """``count`` keys under tenant_a's prefix (128 per transaction, etcd's default
    --max-txn-ops), and one key of tenant_b; what tenant_a then holds."""
    etcd.ctl("del", "--prefix", PREFIX)
    keys = {
        f"{PREFIX}registry/configmaps/default/cm-{i:05d}".encode(): f"{generation}-{i}".encode()
        for i in range(count)
    }
    items = list(keys.items())
    for start in range(0, len(items), 128):
        ops = "".join(f"put {k.decode()} {v.decode()}\n" for k, v in items[start : start + 128])
        etcd.ctl("txn", stdin=f"\n{ops}\n\n".encode())
    etcd.put("/tenant_b/registry/untouched", b"b")
    return keys


def root_keys(generation: str) -> dict[str, dict[str, bytes]]:
    """Kamaji's three root-key Secrets of tenant-a as it would generate them (keys as Kamaji's
    data keys; values stand-ins that say their generation)."""
    files = {
        "ca": ("ca.crt", "ca.key", "tls.crt", "tls.key"),
        "sa-certificate": ("sa.pub", "sa.key"),
        "front-proxy-ca-certificate": ("front-proxy-ca.crt", "front-proxy-ca.key"),
    }
    assert set(files) == set(PKI_SECRETS)
    return {
        name: {f: f"-----{generation} {name} {f}-----\n".encode() for f in keys}
        for name, keys in files.items()
    }


def as_secrets(keys: dict[str, dict[str, bytes]]) -> dict[str, dict[str, str]]:
    """The same keys as the API holds them: Secrets ``tenant-a-<name>``, data base64."""
    return {
        f"tenant-a-{name}": {k: base64.b64encode(v).decode() for k, v in data.items()}
        for name, data in keys.items()
    }


def mount(directory: Path, keys: dict[str, dict[str, bytes]]) -> None:
    """The Secrets as the kubelet mounts them: a file per key behind ``..data`` links."""
    for name, data in keys.items():
        folder = directory / name
        shutil.rmtree(folder, ignore_errors=True)
        (folder / "..2026_01_01").mkdir(parents=True)
        (folder / "..data").symlink_to("..2026_01_01")
        for key, value in data.items():
            (folder / "..2026_01_01" / key).write_bytes(value)
            (folder / key).symlink_to(f"..data/{key}")


def values(etcd: Etcd, prefix: str = PREFIX) -> dict[bytes, bytes]:
    return {k: v["value"] for k, v in etcd.dump(prefix)[1].items()}


class Cluster:
    """The management cluster's side: the stub kubectl's state, and the Jobs' environments."""

    def __init__(self, root: Path, etcd: Etcd, s3_env: dict[str, str]) -> None:
        self.stub_dir = root / "kube"
        self.stub_dir.mkdir()
        self.root = root
        self.pki_dir = root / "pki"
        keys = root_keys("first")
        mount(self.pki_dir, keys)
        state = kubectl_stub.initial_state()
        state["secrets"] = as_secrets(keys)
        self.base = {
            **etcd.env("tenant_a"),
            # After etcd's environment, whose PATH it replaces: the stub kubectl comes first.
            **kubectl_stub.install(self.stub_dir, state),
            "BACKUP_PKI_DIR": str(self.pki_dir),
            "BACKUP_PKI_SECRETS": ",".join(PKI_SECRETS),
            **s3_env,
            "BACKUP_TENANT": "tenant_a",
            "BACKUP_PREFIX": PREFIX,
            "BACKUP_KUBERNETES_VERSION": "v1.33.4",
            "BACKUP_RETENTION": "8",
            "CONTROL_PLANE": "tenant-a",
            "CONTROL_PLANE_POD_LABEL": CONTROL_PLANE_POD_LABEL,
            "KAMAJI_PAUSED_ANNOTATION": KAMAJI_PAUSED_ANNOTATION,
            "BACKUP_CRON_JOB": BACKUP,
            "STOP_TIMEOUT_SECONDS": "20",
        }

    def state(self) -> dict[str, Any]:
        return kubectl_stub.read_state(self.stub_dir)

    def job_status(self, name: str, status: dict[str, Any]) -> None:
        """What the Job controller would record (the stub's reads are serialised by its lock)."""
        state = self.state()
        state["jobs"][name] = status
        kubectl_stub.write_state(self.stub_dir, state)

    def env(self, job: str, **extra: str) -> dict[str, str]:
        work = self.root / job
        work.mkdir(exist_ok=True)
        return {**self.base, "JOB_NAME": job, "WORK_DIR": str(work), **extra}


def step(name: str, env: dict[str, str]) -> subprocess.Popen[str]:
    """Start one container's command of the Jobs (components/backups/objects.py)."""
    commands = {
        "fetch": [sys.executable, str(SCRIPTS / "tenant_backup.py"), "fetch"],
        "stop": ["sh", str(SCRIPTS / "control-plane.sh"), "stop"],
        "import": ["bash", str(SCRIPTS / "etcd-import.sh")],
        "export": ["bash", str(SCRIPTS / "etcd-export.sh")],
        "check": [sys.executable, str(SCRIPTS / "tenant_backup.py"), "check-restored"],
        "start": ["sh", str(SCRIPTS / "control-plane.sh"), "start"],
        "guard": ["sh", str(SCRIPTS / "backup-guard.sh"), "before"],
        "recheck": ["sh", str(SCRIPTS / "backup-guard.sh"), "after"],
        "upload": [sys.executable, str(SCRIPTS / "tenant_backup.py"), "backup"],
        "pki": ["sh", str(SCRIPTS / "tenant-pki.sh")],
    }
    if name in ("check", "export") and env.get("RESTORE") == "1":
        env = {**env, "EXPORT_FILE": "restored.json"}
    return subprocess.Popen(
        commands[name],
        env=env,
        stdout=subprocess.PIPE,
        stderr=subprocess.PIPE,
        text=True,
        start_new_session=True,  # its own process group: a finalizer can end xargs' puts too
    )


def run_steps(names: list[str], env: dict[str, str]) -> tuple[str | None, str]:
    """The steps in order, as init containers run: the first failure ends the pod. Returns the
    failed step (None: all passed) and the last step's output."""
    output = ""
    for name in names:
        process = step(name, env)
        out, err = process.communicate(timeout=300)
        output = out + err
        if process.returncode != 0:
            return name, output
    return None, output


RESTORE_STEPS = ["fetch", "stop", "import", "export", "check", "pki", "start"]
BACKUP_STEPS = ["guard", "export", "recheck", "upload"]


def restore(cluster: Cluster, job: str, backup: str) -> tuple[str | None, str]:
    cluster.job_status(job, {"active": 1})
    failed, output = run_steps(RESTORE_STEPS, cluster.env(job, BACKUP_NAME=backup, RESTORE="1"))
    done = "Failed" if failed else "Complete"
    cluster.job_status(job, {"conditions": [{"type": done, "status": "True"}]})
    return failed, output


def scheduled_backup(cluster: Cluster, job: str) -> tuple[str | None, str]:
    return run_steps(BACKUP_STEPS, cluster.env(job, EXPORT_FILE="export.json"))


def listed(cluster: Cluster) -> list[str]:
    return [b.name for b in tool.list_backups(tool.S3(cluster.base), "tenant_a") if b.complete]


def one_error(output: str) -> str:
    lines = [line for line in output.strip().splitlines() if line]
    assert len(lines) == 1, output
    assert lines[0].startswith(("error: ", "FAIL: ")), output
    assert "Traceback" not in output
    return lines[0]


@pytest.fixture
def cluster(own_etcd: EtcdProcess, s3: S3Server, s3_prefix: str, tmp_path: Path) -> Cluster:
    return Cluster(tmp_path, own_etcd.server, s3.env(s3_prefix))


def test_etcd_killed_mid_import_then_the_rerun_restores_the_good_backup(
    own_etcd: EtcdProcess, cluster: Cluster, request: pytest.FixtureRequest
) -> None:
    etcd = own_etcd.server
    good_keys = fill(etcd, 500, "good")
    assert scheduled_backup(cluster, "datastore-backup-1")[0] is None
    [good] = listed(cluster)
    # Something goes wrong in the tenant: half its objects are deleted; the team restores.
    for key in list(good_keys)[::2]:
        etcd.ctl("del", key.decode())

    # A scheduled backup fires just before the restore stops the tenant: its first check passes.
    early = cluster.env("datastore-backup-2", EXPORT_FILE="export.json")
    assert run_steps(["guard"], early)[0] is None
    # Restore 1: fetch, stop, and the import starts.
    cluster.job_status("datastore-restore-1", {"active": 1})
    # One put per transaction: the import lasts long enough to be cut in the middle. A
    # transaction to a dead member waits its whole IMPORT_PUT_TIMEOUT (etcdctl txn has no
    # command timeout of its own): 10 s here.
    env = cluster.env(
        "datastore-restore-1",
        BACKUP_NAME="latest",
        RESTORE="1",
        BACKUP_TXN_OPS="1",
        IMPORT_PUT_TIMEOUT="10s",
    )
    assert run_steps(["fetch", "stop"], env)[0] is None
    assert cluster.state()["cronjob"]["suspend"] is True
    importing = step("import", env)
    request.addfinalizer(
        lambda: importing.poll() is None and os.killpg(importing.pid, signal.SIGKILL)
    )
    time.sleep(1.0)
    # The early backup exports mid-import: its second check refuses it.
    failed, output = run_steps(["export", "recheck", "upload"], early)
    assert failed == "recheck", output
    assert "is paused" in one_error(output)
    # etcd dies mid-import: the import stops at its first failed transaction, not after every
    # key.
    own_etcd.kill()
    killed = time.monotonic()
    assert importing.wait(timeout=120) != 0
    assert time.monotonic() - killed < 30, "the import kept trying after etcd died"
    cluster.job_status(
        "datastore-restore-1", {"conditions": [{"type": "Failed", "status": "True"}]}
    )

    own_etcd.start()
    partial = values(etcd)
    assert 0 < len(partial) < len(good_keys), len(partial)
    # The tenant stays stopped and marked; the CronJob stays suspended; a Job it had created
    # before is refused, so nothing half-restored is published and `latest` is still `good`.
    state = cluster.state()
    assert state["deployment"]["replicas"] == 0
    assert state["tcp"]["annotations"][RESTORE_MARK] == "datastore-restore-1"
    assert state["cronjob"]["suspend"] is True
    failed, output = scheduled_backup(cluster, "datastore-backup-3")
    assert failed == "guard"
    assert listed(cluster) == [good]

    # The re-run as docs/backups.md says: the same backup, by name.
    failed, output = restore(cluster, "datastore-restore-2", good)
    assert failed is None, output
    assert values(etcd) == good_keys
    assert values(etcd, "/tenant_b/") == {b"/tenant_b/registry/untouched": b"b"}
    state = cluster.state()
    assert state["deployment"]["replicas"] == 2
    assert state["cronjob"]["suspend"] is False
    assert RESTORE_MARK not in state["tcp"]["annotations"]
    # Backups run again, of the whole tenant.
    assert scheduled_backup(cluster, "datastore-backup-4")[0] is None
    assert len(listed(cluster)) == 2


def test_two_restores_at_once_leave_one_backup_whole(
    own_etcd: EtcdProcess, cluster: Cluster
) -> None:
    etcd = own_etcd.server
    first = fill(etcd, 300, "first")
    assert scheduled_backup(cluster, "datastore-backup-1")[0] is None
    second = fill(etcd, 200, "second")
    assert scheduled_backup(cluster, "datastore-backup-2")[0] is None
    names = sorted(listed(cluster))
    contents = {names[0]: first, names[1]: second}
    jobs = {"datastore-restore-a": names[0], "datastore-restore-b": names[1]}
    for job in jobs:
        cluster.job_status(job, {"active": 1})
    # Both verified their backup; then both stop at the same moment, and race for the lock.
    # Only the stop steps race: the winner goes on after both have tried, so the loser always
    # meets a held lock (run whole, a loaded machine could finish the first restore, releasing
    # its lock, before the second one's stop began, and both would rightly succeed in turn).
    for job, name in jobs.items():
        env = cluster.env(job, BACKUP_NAME=name, RESTORE="1")
        assert run_steps(["fetch"], env)[0] is None
    barrier = threading.Barrier(2)
    results: dict[str, tuple[str | None, str]] = {}

    def stop(job: str) -> None:
        barrier.wait()
        results[job] = run_steps(["stop"], cluster.env(job, RESTORE="1"))

    threads = [threading.Thread(target=stop, args=(job,)) for job in jobs]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=300)
    outcomes = sorted(results[job][0] or "done" for job in jobs)
    assert outcomes == ["done", "stop"], results
    loser = next(job for job in jobs if results[job][0] == "stop")
    winner = next(job for job in jobs if job != loser)
    assert "one restore at a time" in results[loser][1].strip().splitlines()[-1]
    assert run_steps(RESTORE_STEPS[2:], cluster.env(winner, RESTORE="1"))[0] is None
    assert values(etcd) == contents[jobs[winner]]
    state = cluster.state()
    assert state["cronjob"]["suspend"] is False
    assert RESTORE_MARK not in state["tcp"]["annotations"]


@pytest.mark.parametrize(
    ("command", "fault", "words"),
    [
        ("fetch", Fault("GET", ".json.gz", "cut"), "IncompleteRead"),
        ("fetch", Fault("GET", ".manifest.json", "500"), "HTTP 500 InternalError"),
        ("fetch", Fault("GET", "/tenant-backups", "stall", seconds=3), "timed out"),
        ("backup", Fault("PUT", ".json.gz", "500"), "HTTP 500 InternalError"),
        ("backup", Fault("GET", ".json.gz", "cut"), "IncompleteRead"),
    ],
    ids=["fetch-cut", "fetch-500", "list-stall", "upload-500", "readback-cut"],
)
def test_an_s3_fault_is_one_line_and_touches_nothing(
    etcd: Etcd,
    s3: S3Server,
    s3_prefix: str,
    tmp_path: Path,
    command: str,
    fault: Fault,
    words: str,
) -> None:
    env = {
        **etcd.env("tenant_a"),
        **s3.env(s3_prefix),
        "BACKUP_TENANT": "tenant_a",
        "BACKUP_PREFIX": PREFIX,
        "BACKUP_KUBERNETES_VERSION": "v1.33.4",
        "BACKUP_RETENTION": "3",
        "WORK_DIR": str(tmp_path / "work"),
        "EXPORT_FILE": "export.json",
        "S3_TIMEOUT_SECONDS": "1",
    }
    etcd.ctl("del", "--prefix", PREFIX)
    etcd.put(f"{PREFIX}registry/namespaces/default", b"ns")
    assert run_steps(["export", "upload"], env)[0] is None
    etcd.put(f"{PREFIX}registry/namespaces/kube-system", b"ns")  # a new revision, a new name
    before = etcd.dump("/")
    stored = {o.key for o in tool.S3(env).list(s3_prefix)}
    with faulty_s3(env["S3_ENDPOINT"]) as proxy:
        proxy.faults.append(fault)
        faulty = {**env, "S3_ENDPOINT": proxy.endpoint, "BACKUP_NAME": "latest"}
        failed, output = run_steps(["export" if command == "backup" else "fetch"], faulty)
        assert failed is None or command == "fetch", output
        if command == "backup":
            failed, output = run_steps(["upload"], faulty)
        assert failed in ("fetch", "upload"), output
        assert words in one_error(output)
        assert fault.hits == 1
    assert etcd.dump("/") == before
    assert not (tmp_path / "work" / "restore").exists()
    # A failed read-back removes its archive: nothing half-written is left beside the backups.
    assert {o.key for o in tool.S3(env).list(s3_prefix)} == stored


def test_after_losing_the_management_cluster_the_restore_brings_back_the_tenants_keys(
    own_etcd: EtcdProcess, cluster: Cluster, s3: S3Server
) -> None:
    """The management cluster is lost and rebuilt: `pulumi up` re-creates the tenant, Kamaji
    generates a new CA and service-account key, the datastore is empty but for a fresh
    bootstrap. The restore brings back the keys with the objects, so the tenant's kubelets'
    certificates and service-account tokens verify again. The keys are archived encrypted."""
    etcd = own_etcd.server
    before = fill(etcd, 50, "before")
    assert scheduled_backup(cluster, "datastore-backup-1")[0] is None
    [good] = listed(cluster)
    stored = tool.S3(cluster.base).get(good)
    for data in root_keys("first").values():
        for value in data.values():
            assert value not in stored
            assert base64.b64encode(value) not in stored

    # The rebuild: new keys in Kamaji's Secrets (and so in what a backup Job would mount), a
    # fresh prefix.
    state = cluster.state()
    state["secrets"] = as_secrets(root_keys("rebuilt"))
    kubectl_stub.write_state(cluster.stub_dir, state)
    mount(cluster.pki_dir, root_keys("rebuilt"))
    fill(etcd, 5, "bootstrap")

    failed, output = restore(cluster, "datastore-restore-1", good)
    assert failed is None, output
    assert values(etcd) == before
    assert cluster.state()["secrets"] == as_secrets(root_keys("first"))
    calls = (cluster.stub_dir / "calls").read_text().splitlines()
    patched = [c.split()[2] for c in calls if c.startswith("patch secret")]
    assert sorted(patched) == sorted(f"tenant-a-{n}" for n in PKI_SECRETS)
    # Written while the tenant was still stopped: before the start scaled it back.
    first_scale_up = next(
        i for i, c in enumerate(calls) if c.startswith("scale") and "replicas=2" in c
    )
    assert max(i for i, c in enumerate(calls) if c.startswith("patch secret")) < first_scale_up


def test_a_restore_without_kamajis_secrets_fails_before_the_start(
    own_etcd: EtcdProcess, cluster: Cluster
) -> None:
    """The keys are patched into Secrets Kamaji made (keeping its labels and owner): a tenant
    whose control plane was never reconciled has none, and the restore stops, one line."""
    etcd = own_etcd.server
    fill(etcd, 20, "good")
    assert scheduled_backup(cluster, "datastore-backup-1")[0] is None
    [good] = listed(cluster)
    state = cluster.state()
    del state["secrets"]["tenant-a-sa-certificate"]
    kubectl_stub.write_state(cluster.stub_dir, state)
    failed, output = restore(cluster, "datastore-restore-1", good)
    assert failed == "pki", output
    line = one_error(output)
    assert line.startswith("error: cannot write the tenant's keys into Secret tenant-a-sa-cert")
    assert "NotFound" in line
    assert cluster.state()["deployment"]["replicas"] == 0
