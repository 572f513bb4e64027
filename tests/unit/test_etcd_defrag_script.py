"""scripts/etcd/defrag.sh with a stub `etcdctl`: only a healthy etcd is touched, member by
member, only a member worth it (free pages over the threshold, or a file near the quota), and a
NOSPACE alarm is disarmed afterwards."""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path

from components.scripts import SCRIPTS_ROOT

# Logs every call; `endpoint status` answers $STUB_DIR/status.<n> for the n-th endpoint named,
# `alarm list` answers $STUB_DIR/alarms, `endpoint health` fails while $STUB_DIR/unhealthy exists.
ETCDCTL = """#!/usr/bin/env bash
echo "$*" >>"$STUB_DIR/calls"
endpoint=""
for arg in "$@"; do
  case "$arg" in --endpoints=*) endpoint="${arg#--endpoints=}" ;; esac
done
case "$*" in
  *"endpoint health"*) [[ ! -e "$STUB_DIR/unhealthy" ]] ;;
  *"endpoint status"*) cat "$STUB_DIR/status.${endpoint//[^a-z0-9]/_}" ;;
  *"alarm list"*) cat "$STUB_DIR/alarms" 2>/dev/null || true ;;
  *) true ;;
esac
"""
MIB = 2**20
ENDPOINTS = ["https://e-0:2379", "https://e-1:2379", "https://e-2:2379"]


def _status(size: int, in_use: int) -> str:
    """As etcdctl prints it: Go's json.Marshal, no spaces (etcd v3.5.6
    etcdctl/ctlv3/command/printer_json.go:51-58)."""
    status = {"header": {"revision": 7}, "dbSize": size, "dbSizeInUse": in_use}
    return json.dumps([{"Endpoint": "x", "Status": status}], separators=(",", ":"))


def _run(
    tmp_path: Path, sizes: list[tuple[int, int]], *, alarms: str = "", unhealthy: bool = False
) -> tuple[subprocess.CompletedProcess[str], list[str]]:
    (tmp_path / "bin").mkdir(exist_ok=True)
    stub = tmp_path / "bin" / "etcdctl"
    stub.write_text(ETCDCTL)
    stub.chmod(0o755)
    for endpoint, (size, in_use) in zip(ENDPOINTS, sizes, strict=True):
        name = "".join(c if c.isalnum() else "_" for c in endpoint)
        (tmp_path / f"status.{name}").write_text(_status(size, in_use))
    (tmp_path / "alarms").write_text(alarms)
    if unhealthy:
        (tmp_path / "unhealthy").write_text("")
    done = subprocess.run(
        ["bash", str(SCRIPTS_ROOT / "etcd" / "defrag.sh")],
        env={
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "STUB_DIR": str(tmp_path),
            "ETCD_ENDPOINTS": " ".join(ENDPOINTS),
            "QUOTA_BACKEND_BYTES": str(1000 * MIB),
            "DEFRAG_FREEABLE_BYTES": str(200 * MIB),
            "DEFRAG_QUOTA_PERCENT": "80",
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    calls = (tmp_path / "calls").read_text().splitlines() if (tmp_path / "calls").exists() else []
    return done, calls


def test_only_the_members_worth_it_are_defragmented_one_at_a_time(tmp_path: Path) -> None:
    # e-0: 300 MiB free; e-1: 50 MiB free, small; e-2: little free but 850 of 1000 MiB quota.
    done, calls = _run(
        tmp_path, [(400 * MIB, 100 * MIB), (100 * MIB, 50 * MIB), (850 * MIB, 800 * MIB)]
    )
    assert done.returncode == 0, done.stderr
    defrags = [c for c in calls if c.endswith(" defrag")]
    assert defrags == [
        "--endpoints=https://e-0:2379 --command-timeout=300s defrag",
        "--endpoints=https://e-2:2379 --command-timeout=300s defrag",
    ]
    # The whole cluster's health before anything, and again after each defragmentation.
    health = [i for i, c in enumerate(calls) if "endpoint health" in c]
    assert health[0] == 0
    assert len(health) == 3
    assert not [c for c in calls if "alarm disarm" in c]


def test_a_degraded_etcd_is_left_alone(tmp_path: Path) -> None:
    done, calls = _run(tmp_path, [(900 * MIB, 100 * MIB)] * 3, unhealthy=True)
    assert done.returncode != 0
    assert not [c for c in calls if "defrag" in c]


def test_a_nospace_alarm_is_disarmed_after_the_defragmentation(tmp_path: Path) -> None:
    alarms = "memberID:123 alarm:NOSPACE\n"
    done, calls = _run(tmp_path, [(900 * MIB, 100 * MIB)] * 3, alarms=alarms)
    assert done.returncode == 0, done.stderr
    assert calls[-1] == f"--endpoints={','.join(ENDPOINTS)} alarm disarm"
