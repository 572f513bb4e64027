"""scripts/management/backup-buckets.sh against a stub `kubectl exec ... weed shell` that keeps
the store's buckets and, like seaweedfs 4.44's shell without a terminal, prints a failed
command's error and still exits 0 (weed/shell/shell_liner.go:110-123, 144-146)."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

from components.scripts import SCRIPTS_ROOT

KUBECTL = r"""
import json, os, sys
state_path = os.path.join(os.environ["STUB_DIR"], "state.json")
state = json.load(open(state_path))
args = sys.argv[1:]
if "rollout" in args:
    sys.exit(0)
assert "exec" in args and "shell" in args, args
command = sys.stdin.read().split()
if command[0] == "s3.bucket.list":
    for bucket in state["buckets"]:
        print(f"  {bucket}\tsize:0\tchunk:0")
elif command[0] == "s3.bucket.create":
    name = command[command.index("-name") + 1]
    if name in state.get("refuse", []):
        print(f"error: create bucket {name}: permission denied")
    else:
        state["buckets"].append(name)
        state.setdefault("created", []).append(name)
        print("create bucket under /buckets")
json.dump(state, open(state_path, "w"))
"""


def _run(
    tmp_path: Path, state: dict[str, object], buckets: str
) -> subprocess.CompletedProcess[str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "kubectl"
    stub.write_text(f"#!{sys.executable}\n{KUBECTL}")
    stub.chmod(0o755)
    (tmp_path / "state.json").write_text(json.dumps(state))
    env = {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STUB_DIR": str(tmp_path),
        "KUBECONFIG_CONTENT": "apiVersion: v1 # secret",
        "NAMESPACE": "gpu-platform-backups",
        "STORE": "object-store",
        "BUCKETS": buckets,
    }
    return subprocess.run(
        ["bash", str(SCRIPTS_ROOT / "management" / "backup-buckets.sh")],
        env=env,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _state(tmp_path: Path) -> dict[str, list[str]]:
    state: dict[str, list[str]] = json.loads((tmp_path / "state.json").read_text())
    return state


BUCKETS = "tenant-a-backups=tenant-tenant-a tenant-b-backups=tenant-tenant-b"


def test_creates_only_the_missing_buckets(tmp_path: Path) -> None:
    done = _run(tmp_path, {"buckets": ["tenant-a-backups"]}, BUCKETS)
    assert done.returncode == 0, done.stderr
    assert _state(tmp_path)["created"] == ["tenant-b-backups"]
    again = _run(tmp_path, _state(tmp_path), BUCKETS)
    assert again.returncode == 0, again.stderr
    assert _state(tmp_path)["created"] == ["tenant-b-backups"]
    assert "secret" not in done.stdout + done.stderr


def test_a_bucket_the_shell_failed_to_create_fails_the_gate(tmp_path: Path) -> None:
    done = _run(tmp_path, {"buckets": [], "refuse": ["tenant-b-backups"]}, BUCKETS)
    assert done.returncode != 0
    assert "permission denied" in done.stderr


def test_a_name_that_only_contains_another_is_not_taken_for_it(tmp_path: Path) -> None:
    done = _run(tmp_path, {"buckets": ["tenant-a-backups-old"]}, BUCKETS)
    assert done.returncode == 0, done.stderr
    assert "tenant-a-backups" in _state(tmp_path)["created"]
