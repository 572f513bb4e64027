"""The backup alerts (components.metrics.backup_alerts) under ``promtool test rules``.

The input series have kube-state-metrics v2.20.0's names and labels (internal/store cronjob.go,
job.go, pod.go) as the central Prometheus' ``backup-state-metrics`` job stores them. In each case
one tenant must fire and another, just on the right side of the line, must not. ``promtool``
comes from Debian's ``prometheus`` package (.ci/run installs it); without it this module skips.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.backups.objects import BACKUP
from components.metrics import backup_alerts, objects, rules

PROMTOOL = shutil.which("promtool")
pytestmark = pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("CI"),
    reason="promtool not installed (Debian: apt-get install -y prometheus)",
)
TARGET = {"job": backup_alerts.JOB, "instance": "gpu-backup-state-metrics:8080"}


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    text = ",".join(f'{k}="{v}"' for k, v in {**TARGET, **labels}.items())
    return {"series": f"{name}{{{text}}}", "values": values}


def _cron(namespace: str, name: str, values: str) -> dict[str, str]:
    return _series(name, {"namespace": namespace, "cronjob": BACKUP}, values)


def _failed_job(namespace: str, job: str, started: int) -> list[dict[str, str]]:
    labels = {"namespace": namespace, "job_name": job}
    return [
        _series("kube_job_status_start_time", labels, f"{started}x30"),
        _series("kube_job_failed", {**labels, "condition": "true"}, "1x30"),
        _series("kube_job_failed", {**labels, "condition": "false"}, "0x30"),
    ]


def _oom_pod(namespace: str, pod: str, created: int) -> list[dict[str, str]]:
    labels = {"namespace": namespace, "pod": pod}
    return [
        _series("kube_pod_created", labels, f"{created}x30"),
        _series(
            "kube_pod_init_container_status_terminated_reason",
            {**labels, "container": "export", "reason": "OOMKilled"},
            "1x30",
        ),
        _series(
            "kube_pod_container_status_terminated_reason",
            {**labels, "container": "upload", "reason": "Error"},
            "1x30",
        ),
    ]


def _alert(name: str, labels: dict[str, str]) -> dict[str, Any]:
    """The alert with its summary rendered for ``labels`` (the template only reads labels)."""
    [summary] = [text for alert, _, _, text in backup_alerts.ALERTS if alert == name]
    rendered = re.sub(r"\{\{ \$labels\.(\w+) \}\}", lambda m: labels[m[1]], summary)
    return {
        "exp_labels": {"severity": "warning", **labels},
        "exp_annotations": {"summary": rendered},
    }


# (title, input series, eval time, alert, expected alerts)
CASES: list[tuple[str, list[dict[str, str]], str, str, list[dict[str, Any]]]] = [
    (
        "a failed backup after the last success fires; one before it, or a list Job, does not",
        [
            _cron("tenant-a", "kube_cronjob_created", "0x30"),
            _cron("tenant-a", "kube_cronjob_status_last_successful_time", "60x30"),
            *_failed_job("tenant-a", "datastore-backup-29437100", 120),
            _cron("tenant-b", "kube_cronjob_created", "0x30"),
            _cron("tenant-b", "kube_cronjob_status_last_successful_time", "120x30"),
            *_failed_job("tenant-b", "datastore-backup-29437099", 60),
            *_failed_job("tenant-b", "datastore-backup-list-20261206030000", 600),
            # Never succeeded: any failure counts.
            _cron("tenant-c", "kube_cronjob_created", "0x30"),
            *_failed_job("tenant-c", "datastore-backup-manual-20261206030000", 30),
        ],
        "5m",
        "TenantBackupFailed",
        [_alert("TenantBackupFailed", {"namespace": n}) for n in ("tenant-a", "tenant-c")],
    ),
    (
        "an OOM-killed backup step after the last success fires; one before it does not",
        [
            _cron("tenant-a", "kube_cronjob_created", "0x30"),
            _cron("tenant-a", "kube_cronjob_status_last_successful_time", "60x30"),
            *_oom_pod("tenant-a", "datastore-backup-29437100-x7k2p", 120),
            _cron("tenant-b", "kube_cronjob_created", "0x30"),
            _cron("tenant-b", "kube_cronjob_status_last_successful_time", "120x30"),
            *_oom_pod("tenant-b", "datastore-backup-29437099-q9m4r", 60),
        ],
        "5m",
        "TenantBackupOOMKilled",
        [
            _alert(
                "TenantBackupOOMKilled",
                {
                    "namespace": "tenant-a",
                    "pod": "datastore-backup-29437100-x7k2p",
                    "container": "export",
                },
            )
        ],
    ),
    (
        "a backup older than twice the schedule fires; one within it does not",
        [
            # Hourly: the next run is 3600 s after the last one.
            _cron("tenant-a", "kube_cronjob_created", "0x200"),
            _cron("tenant-a", "kube_cronjob_status_last_successful_time", "0x200"),
            _cron("tenant-a", "kube_cronjob_status_last_schedule_time", "7200x200"),
            _cron("tenant-a", "kube_cronjob_next_schedule_time", "10800x200"),
            _cron("tenant-b", "kube_cronjob_created", "0x200"),
            _cron("tenant-b", "kube_cronjob_status_last_successful_time", "4000x200"),
            _cron("tenant-b", "kube_cronjob_status_last_schedule_time", "7200x200"),
            _cron("tenant-b", "kube_cronjob_next_schedule_time", "10800x200"),
        ],
        "3h",
        "TenantBackupTooOld",
        [_alert("TenantBackupTooOld", {"namespace": "tenant-a"})],
    ),
    (
        "a backup suspended past a restore's deadline fires; one a restore resumed does not",
        [
            _cron("tenant-a", "kube_cronjob_spec_suspend", "1x200"),
            _cron("tenant-b", "kube_cronjob_spec_suspend", "1x60 0x140"),
        ],
        "3h",
        "TenantBackupSuspended",
        [_alert("TenantBackupSuspended", {"namespace": "tenant-a"})],
    ),
]


def _run(tmp_path: Path, groups: dict[str, Any]) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool is missing: apt-get install -y prometheus"
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(groups, sort_keys=False))
    tests = [
        {
            "name": title,
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": at, "alertname": name, "exp_alerts": expected},
                # Every other backup alert stays quiet in this case.
                *(
                    {"eval_time": at, "alertname": other, "exp_alerts": []}
                    for other, _, _, _ in backup_alerts.ALERTS
                    if other != name
                ),
            ],
        }
        for title, series, at, name, expected in CASES
    ]
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": f"{rules.RULE_INTERVAL_SECONDS}s",
        "tests": tests,
    }
    (tmp_path / "test.yml").write_text(yaml.safe_dump(document, sort_keys=False))
    return subprocess.run(
        [PROMTOOL, "test", "rules", "test.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )


def test_each_backup_alert_fires_for_the_tenant_concerned_only(tmp_path: Path) -> None:
    result = _run(tmp_path, rules.rule_groups())
    assert result.returncode == 0, result.stdout + result.stderr


@pytest.mark.parametrize("alert", [name for name, _, _, _ in backup_alerts.ALERTS])
def test_an_alert_that_cannot_fire_fails(tmp_path: Path, alert: str) -> None:
    groups = rules.rule_groups()
    group = next(g for g in groups["groups"] if g["name"] == "gpu-platform-backup-alerts")
    rule = next(r for r in group["rules"] if r["alert"] == alert)
    rule["expr"] = f"({rule['expr']}) and on () vector(0) > 1"  # never true
    assert _run(tmp_path, groups).returncode != 0


def test_the_alerts_read_the_names_the_backups_use_and_the_series_the_scrape_keeps() -> None:
    """The CronJob the alerts watch is the one components.backups deploys; every series they
    read is one kube-state-metrics is allowed to export; the scrape keeps the backups' series
    and drops the rest."""
    assert backup_alerts.BACKUP_CRON_JOB == BACKUP
    read = {
        name
        for _, expr, _, _ in backup_alerts.ALERTS
        for name in backup_alerts.METRICS
        if name in expr
    }
    assert read == set(backup_alerts.METRICS)
    deployment = next(m for m in backup_alerts.manifests("ns") if m["kind"] == "Deployment")
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert f"--metric-allowlist={','.join(backup_alerts.METRICS)}" in args
    config = yaml.safe_load(
        objects.prometheus_config("30s", "kamaji-system")["data"]["prometheus.yml"]
    )
    [job] = [j for j in config["scrape_configs"] if j["job_name"] == backup_alerts.JOB]
    assert job == backup_alerts.scrape_job(objects.METRICS_NAMESPACE)
    [relabel] = job["metric_relabel_configs"]
    keep = re.compile(f"^(?:{relabel['regex']})$")
    for pod, job_name, cron in (
        ("datastore-backup-29437100-x7k2p", "", ""),
        ("", "datastore-backup-29437100", ""),
        ("", "", "datastore-backup"),
    ):
        assert keep.match(f"{pod};{job_name};{cron}")
    for pod, job_name, cron in (("kube-apiserver-0", "", ""), ("", "nightly", ""), ("", "", "x")):
        assert not keep.match(f"{pod};{job_name};{cron}")
