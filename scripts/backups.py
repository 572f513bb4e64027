"""Run a tenant's backup now, list its backups, or restore one (``make backup``, ``make backups``,
``make restore``; docs/backups.md).

Each action is a Job made from the tenant's own CronJob in the management cluster
(``components.backups.objects``): ``datastore-backup`` as it is (a backup now), its upload step
alone with ``list`` (the listing, read with the tenant's own credentials), or the suspended
``datastore-restore`` with the backup to restore (``BACKUP_NAME``). A restore stops the tenant's
API server until the restored keys are checked, so it runs only with ``--yes``, and only with the
backup named: a name from ``list``, or ``latest`` said explicitly (the newest complete backup,
which the backup Job only publishes for a running tenant no restore has touched since).

The management kubeconfig comes on stdin (``make`` pipes ``pulumi stack output --show-secrets
managementKubeconfig``) and is written to a private temporary file, never printed.

Usage: ``python scripts/backups.py {backup,list,restore} --tenant NAME [--backup NAME|latest]
[--from-tenant NAME] [--yes] [--accept-suspect] [--timeout SECONDS] --kubeconfig-stdin``

``--from-tenant`` restores another tenant's backup into this one (a clone, or a tenant re-created
under another name): the restore Job reads it through a copy of that tenant's target Secret,
made for the Job and deleted after it, and moves every key under this tenant's prefix.
"""

from __future__ import annotations

import argparse
import copy
import json
import os
import subprocess
import sys
import tempfile
import time
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components.backups.objects import BACKUP, RESTORE, TARGET
from components.labels import TENANT_LABEL

Kubectl = Callable[[Sequence[str], str | None], str]
MANUAL_JOB_TTL_SECONDS = 86400
JOB_DEADLINE_MARGIN_SECONDS = 300


class BackupsError(Exception):
    """One line for the user."""


def job_from(
    cron_job: Mapping[str, Any],
    name: str,
    *,
    only: str | None = None,
    command: str | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A Job from ``cron_job``'s template, as ``kubectl create job --from=cronjob/...`` makes one,
    with changes: ``only`` keeps that container alone (no init containers), ``command`` replaces
    its last argument (the subcommand of ``tenant_backup.py``), ``env`` sets variables in every
    container that has them already. Not owned by the CronJob, whose history limits would
    otherwise push the scheduled backups' Jobs out; removed a day after it finishes."""
    template = copy.deepcopy(cron_job["spec"]["jobTemplate"])
    pod = template["spec"]["template"]["spec"]
    if only is not None:
        containers = list(pod["containers"] + pod.get("initContainers", []))
        chosen = [c for c in containers if c["name"] == only]
        if not chosen:
            raise BackupsError(f"{cron_job['metadata']['name']} has no container {only!r}")
        pod["containers"] = chosen
        pod.pop("initContainers", None)
        if command is not None:
            chosen[0]["command"] = [*chosen[0]["command"][:-1], command]
    for container in pod.get("initContainers", []) + pod["containers"]:
        for entry in container.get("env", []):
            if env and entry["name"] in env:
                entry["value"] = env[entry["name"]]
                entry.pop("valueFrom", None)
    metadata = cron_job["metadata"]
    return {
        "apiVersion": "batch/v1",
        "kind": "Job",
        "metadata": {
            "name": name,
            "namespace": metadata["namespace"],
            "labels": dict(metadata.get("labels", {})),
            "annotations": {"cronjob.kubernetes.io/instantiate": "manual"},
        },
        "spec": {**template["spec"], "ttlSecondsAfterFinished": MANUAL_JOB_TTL_SECONDS},
    }


def clone_job(
    job: Mapping[str, Any], source_tenant: str, source_prefix: str, source_secret: str
) -> dict[str, Any]:
    """The restore ``job`` of one tenant made to read another tenant's backup: its fetch step
    gets the source tenant and key prefix (tenant_backup.py moves every key under this tenant's
    prefix), every reference to the tenant's own target Secret points at ``source_secret`` (a
    copy of the source tenant's: its store, credential and archive key), and the step that writes
    the root keys back is left out (two tenants must not share a CA or service-account key)."""
    job = copy.deepcopy(dict(job))
    pod = job["spec"]["template"]["spec"]
    pod["initContainers"] = [c for c in pod.get("initContainers", []) if c["name"] != "pki"]
    for container in pod["initContainers"] + pod["containers"]:
        for entry in container.get("env", []):
            ref = entry.get("valueFrom", {}).get("secretKeyRef")
            if ref is not None and ref.get("name") == TARGET:
                ref["name"] = source_secret
        if container["name"] == "fetch":
            container["env"] += [
                {"name": "BACKUP_SOURCE_TENANT", "value": source_tenant},
                {"name": "BACKUP_SOURCE_PREFIX", "value": source_prefix},
            ]
    for volume in pod.get("volumes", []):
        if volume.get("secret", {}).get("secretName") == TARGET:
            volume["secret"]["secretName"] = source_secret
    job["metadata"]["annotations"] = {
        **job["metadata"].get("annotations", {}),
        "gpu-platform.io/restore-from-tenant": source_tenant,
    }
    return job


def source_target(kubectl: Kubectl, source_tenant: str) -> tuple[str, dict[str, str]]:
    """The source tenant's key prefix (its backup Job's ``BACKUP_PREFIX``) and its target
    Secret's data (base64, as the API returns it; never printed)."""
    cron_job = find_cron_job(kubectl, source_tenant, BACKUP)
    pod = cron_job["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    prefixes = {
        e.get("value")
        for c in pod.get("initContainers", []) + pod["containers"]
        for e in c.get("env", [])
        if e["name"] == "BACKUP_PREFIX"
    }
    if len(prefixes) != 1:
        raise BackupsError(f"tenant {source_tenant!r}'s backup names no single key prefix")
    namespace = cron_job["metadata"]["namespace"]
    secret = json.loads(kubectl(["-n", namespace, "get", "secret", TARGET, "-o", "json"], None))
    return str(prefixes.pop()), dict(secret.get("data") or {})


def find_cron_job(kubectl: Kubectl, tenant: str, which: str) -> dict[str, Any]:
    """The tenant's ``datastore-backup`` or ``datastore-restore`` CronJob, wherever its
    management namespace is (found by the tenant label)."""
    selector = f"{TENANT_LABEL}={tenant},app.kubernetes.io/name={which}"
    found = json.loads(kubectl(["get", "cronjobs", "-A", "-l", selector, "-o", "json"], None))
    items: list[dict[str, Any]] = found.get("items", [])
    if len(items) != 1:
        raise BackupsError(
            f"tenant {tenant!r} has no {which} CronJob (found {len(items)}): is the tenant "
            "deployed with tenants[].backups.enabled?"
        )
    return items[0]


def _finished(job_status: Mapping[str, Any]) -> bool | None:
    """True once the Job's Complete condition holds, False once its Failed condition does (after
    its own retries, ``backoffLimit``), None while it runs."""
    for condition in job_status.get("conditions") or []:
        if condition.get("status") == "True" and condition.get("type") in ("Complete", "Failed"):
            return condition["type"] == "Complete"
    return None


def still_running(job: Mapping[str, Any]) -> bool:
    """Whether a Job may still write: not finished (no Complete or Failed condition), or its pods
    not yet gone (active or terminating). The same test control-plane.sh makes before taking
    over the restore lock of a Job."""
    status = job.get("status") or {}
    if _finished(status) is None:
        return True
    return bool(status.get("active") or status.get("terminating"))


def running_restores(kubectl: Kubectl, cron_job: Mapping[str, Any]) -> list[str]:
    """The tenant's restore Jobs that still run (created from ``cron_job``, by its labels)."""
    metadata = cron_job["metadata"]
    labels = metadata.get("labels", {})
    selector = ",".join(
        f"{key}={labels[key]}" for key in (TENANT_LABEL, "app.kubernetes.io/name") if key in labels
    )
    found = json.loads(
        kubectl(["-n", metadata["namespace"], "get", "jobs", "-l", selector, "-o", "json"], None)
    )
    return sorted(j["metadata"]["name"] for j in found.get("items", []) if still_running(j))


def job_deadline(job: Mapping[str, Any]) -> float:
    """How long to wait for ``job``: as long as it may run (activeDeadlineSeconds), plus the time
    to schedule its pod and read its logs."""
    return float(job["spec"].get("activeDeadlineSeconds") or 3600) + JOB_DEADLINE_MARGIN_SECONDS


def pod_logs(kubectl: Kubectl, namespace: str, job: str) -> str:
    """Every started container's logs, pod by pod, in the pod's own order (init containers
    first), each line prefixed ``[pod/<pod>/<container>]``. A container that never started (a
    step after a failed one) is named, not read: asking for its logs is an error, and
    ``kubectl logs --all-containers`` stops at the first error, in no fixed order (kubectl
    v0.35.0 pkg/cmd/logs/logs.go:431-444)."""
    pods = json.loads(
        kubectl(["-n", namespace, "get", "pods", "-l", f"job-name={job}", "-o", "json"], None)
    )
    lines: list[str] = []
    for pod in sorted(pods.get("items", []), key=lambda p: p["metadata"]["creationTimestamp"]):
        name = pod["metadata"]["name"]
        spec, status = pod["spec"], pod.get("status", {})
        statuses = {
            s["name"]: s
            for s in [
                *status.get("initContainerStatuses", []),
                *status.get("containerStatuses", []),
            ]
        }
        for container in [*spec.get("initContainers", []), *spec["containers"]]:
            state = statuses.get(container["name"], {}).get("state", {})
            prefix = f"[pod/{name}/{container['name']}]"
            if not state or "waiting" in state:
                lines.append(f"{prefix} (not started)")
                continue
            text = kubectl(["-n", namespace, "logs", f"pod/{name}", "-c", container["name"]], None)
            lines += [f"{prefix} {line}" for line in text.splitlines()]
    return "\n".join(lines) + ("\n" if lines else "")


def run_job(
    kubectl: Kubectl, job: Mapping[str, Any], timeout: float, poll: float = 3.0
) -> tuple[bool, str]:
    """Create ``job``, wait until it has completed or failed for good, and return (succeeded,
    the logs of its pods)."""
    namespace, name = job["metadata"]["namespace"], job["metadata"]["name"]
    kubectl(["create", "-f", "-"], json.dumps(job))
    deadline = time.monotonic() + timeout
    while True:
        found = json.loads(kubectl(["-n", namespace, "get", "job", name, "-o", "json"], None))
        succeeded = _finished(found.get("status", {}))
        if succeeded is not None:
            break
        if time.monotonic() > deadline:
            raise BackupsError(
                f"job {namespace}/{name} did not finish in {timeout:.0f}s and may still run "
                f"(kubectl -n {namespace} get job {name})"
            )
        time.sleep(poll)
    return succeeded, pod_logs(kubectl, namespace, name)


def summaries(logs: str) -> list[dict[str, Any]]:
    """The JSON summary lines ``tenant_backup.py`` prints, in order."""
    found = []
    for line in logs.splitlines():
        text = line.split(" ", 1)[1] if line.startswith("[") and " " in line else line
        if text.startswith("{"):
            try:
                found.append(json.loads(text))
            except ValueError:
                continue
    return found


def _kubectl_with(kubeconfig: Path) -> Kubectl:
    def kubectl(args: Sequence[str], stdin: str | None) -> str:
        done = subprocess.run(
            ["kubectl", "--kubeconfig", str(kubeconfig), *args],
            input=stdin,
            capture_output=True,
            text=True,
            check=False,
        )
        if done.returncode != 0:
            raise BackupsError(f"kubectl {args[0]} failed: {done.stderr.strip()}")
        return done.stdout

    return kubectl


def act(kubectl: Kubectl, args: argparse.Namespace) -> int:
    stamp = time.strftime("%Y%m%d%H%M%S", time.gmtime())
    started = time.monotonic()
    if args.action == "restore":
        if not args.yes:
            raise BackupsError(
                f"a restore stops {args.tenant}'s API server until the restored keys are "
                "checked and replaces every key of the tenant: run again with --yes (make "
                "restore ... YES=1)"
            )
        if not args.backup:
            raise BackupsError(
                "name the backup to restore: BACKUP=<name> from make backups, or BACKUP=latest "
                "(the newest complete backup)"
            )
        cron_job = find_cron_job(kubectl, args.tenant, RESTORE)
        running = running_restores(kubectl, cron_job)
        if running:
            raise BackupsError(
                f"restore job {', '.join(running)} of {args.tenant} still runs: one restore at "
                "a time (wait for it, or delete that job to stop it; its restore lock is then "
                "taken over)"
            )
        job = job_from(cron_job, f"{RESTORE}-{stamp}", env={"BACKUP_NAME": args.backup})
        source = getattr(args, "from_tenant", None)
        if source:
            if source == args.tenant:
                raise BackupsError(
                    f"FROM_TENANT is {args.tenant} itself: restore its own backup without it"
                )
            prefix, data = source_target(kubectl, source)
            secret = {
                "apiVersion": "v1",
                "kind": "Secret",
                "metadata": {
                    "name": f"{RESTORE}-source-{stamp}",
                    "namespace": job["metadata"]["namespace"],
                    "labels": dict(job["metadata"].get("labels", {})),
                },
                "type": "Opaque",
                "data": data,
            }
            job = clone_job(job, source, prefix, secret["metadata"]["name"])
            return _run_with_source(kubectl, args, job, secret, started)
    elif args.action == "list":
        cron_job = find_cron_job(kubectl, args.tenant, BACKUP)
        job = job_from(cron_job, f"{BACKUP}-list-{stamp}", only="upload", command="list")
    else:
        cron_job = find_cron_job(kubectl, args.tenant, BACKUP)
        accept = {"BACKUP_ACCEPT_SUSPECT": "1"} if getattr(args, "accept_suspect", False) else {}
        job = job_from(cron_job, f"{BACKUP}-manual-{stamp}", env=accept)
    return _run(kubectl, args, job, started)


def _run_with_source(
    kubectl: Kubectl,
    args: argparse.Namespace,
    job: Mapping[str, Any],
    secret: Mapping[str, Any],
    started: float,
) -> int:
    """A restore from another tenant: its target Secret copied for the Job's lifetime only."""
    namespace, name = secret["metadata"]["namespace"], secret["metadata"]["name"]
    kubectl(["create", "-f", "-"], json.dumps(secret))
    try:
        return _run(kubectl, args, job, started)
    finally:
        kubectl(["-n", namespace, "delete", "secret", name, "--ignore-not-found"], None)


def _run(kubectl: Kubectl, args: argparse.Namespace, job: Mapping[str, Any], started: float) -> int:
    timeout = args.timeout if args.timeout else job_deadline(job)
    succeeded, logs = run_job(kubectl, job, timeout)
    seconds = time.monotonic() - started
    for summary in summaries(logs):
        print(json.dumps(summary))
    if not succeeded:
        sys.stderr.write(logs)
        raise BackupsError(
            f"{args.action} of {args.tenant} failed after {seconds:.0f}s (job "
            f"{job['metadata']['namespace']}/{job['metadata']['name']}; its logs are above)"
        )
    print(f"{args.action} of {args.tenant}: done in {seconds:.0f}s", file=sys.stderr)
    return 0


def main(argv: Sequence[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("action", choices=("backup", "list", "restore"))
    parser.add_argument("--tenant", required=True)
    parser.add_argument("--backup", default="", help="object name or latest (restore)")
    parser.add_argument("--yes", action="store_true", help="really restore")
    parser.add_argument(
        "--from-tenant",
        default="",
        help="restore this other tenant's backup (BACKUP names one of its backups) (restore)",
    )
    parser.add_argument(
        "--accept-suspect",
        action="store_true",
        help="back up even when the key count fell by half or the revision went back (backup)",
    )
    parser.add_argument(
        "--timeout",
        type=float,
        default=None,
        help="seconds to wait (default: the Job's activeDeadlineSeconds and a margin)",
    )
    parser.add_argument(
        "--kubeconfig-stdin", action="store_true", help="the management kubeconfig on stdin"
    )
    args = parser.parse_args(argv)
    try:
        if args.kubeconfig_stdin:
            text = sys.stdin.read()
            if not text.strip():
                raise BackupsError("no kubeconfig on stdin: deploy the stack first (make lab)")
            with tempfile.TemporaryDirectory(prefix="gpu-platform-backups-") as scratch:
                path = Path(scratch) / "kubeconfig"
                path.write_text(text)
                os.chmod(path, 0o600)
                return act(_kubectl_with(path), args)
        kubeconfig = os.environ.get("KUBECONFIG")
        if not kubeconfig:
            raise BackupsError("give the management kubeconfig on stdin or in KUBECONFIG")
        return act(_kubectl_with(Path(kubeconfig)), args)
    except BackupsError as error:
        print(f"FAIL: {error}", file=sys.stderr)
        return 1


if __name__ == "__main__":
    raise SystemExit(main())
