"""scripts/tenant/served-version.sh with a stub `kubectl`: the gate passes only once the tenant
API has answered the expected version on SERVED_READS reads in a row (Kamaji's Blue/Green
rollout serves both versions for a while), and fails at its deadline otherwise."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from components.scripts import SCRIPTS_ROOT

# Answers one line of $STUB_DIR/answers per call (the last one forever), as `get --raw /version`.
KUBECTL = """#!/usr/bin/env bash
n=$(cat "$STUB_DIR/count" 2>/dev/null || echo 0)
echo $((n + 1)) >"$STUB_DIR/count"
line=$(sed -n "$((n + 1))p" "$STUB_DIR/answers")
[[ -n "$line" ]] || line=$(tail -n 1 "$STUB_DIR/answers")
[[ "$line" == down ]] && exit 1
printf '{"major":"1","gitVersion":"%s","platform":"linux/amd64"}\\n' "$line"
"""


def _run(tmp_path: Path, answers: list[str], **env: str) -> subprocess.CompletedProcess[str]:
    (tmp_path / "bin").mkdir(exist_ok=True)
    stub = tmp_path / "bin" / "kubectl"
    stub.write_text(KUBECTL)
    stub.chmod(0o755)
    (tmp_path / "answers").write_text("\n".join(answers) + "\n")
    environment = {
        "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
        "STUB_DIR": str(tmp_path),
        "TENANT_KUBECONFIG": "apiVersion: v1 # secret",
        "EXPECTED_VERSION": "v1.35.0",
        "SERVED_READS": "3",
        "WAIT_POLL_SECONDS": "0",
        "WAIT_TIMEOUT_SECONDS": "5",
        **env,
    }
    return subprocess.run(
        ["bash", str(SCRIPTS_ROOT / "tenant" / "served-version.sh")],
        env=environment,
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )


def _calls(tmp_path: Path) -> int:
    return int((tmp_path / "count").read_text())


def test_passes_after_enough_reads_of_the_new_version(tmp_path: Path) -> None:
    done = _run(tmp_path, ["v1.34.3", "down", "v1.35.0", "v1.34.3", "v1.35.0+build.1"])
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "v1.35.0"
    # v1.35.0 at call 3, the old version again at 4 resets the count: 5, 6, 7 make three.
    assert _calls(tmp_path) == 7
    assert "secret" not in done.stdout + done.stderr


def test_times_out_while_the_old_version_is_served(tmp_path: Path) -> None:
    done = _run(tmp_path, ["v1.34.3"], WAIT_TIMEOUT_SECONDS="1", WAIT_POLL_SECONDS="0.2")
    assert done.returncode == 1
    assert "serves v1.34.3, not v1.35.0" in done.stderr


def test_needs_the_expected_version(tmp_path: Path) -> None:
    done = _run(tmp_path, ["v1.35.0"], EXPECTED_VERSION="")
    assert done.returncode != 0
    assert "EXPECTED_VERSION is required" in done.stderr


# The pool's version gate (lab): it reads the tenant's super-admin kubeconfig from Kamaji's Secret
# in the kind management cluster, then runs the served-version wait with it.
KIND = """#!/usr/bin/env bash
[[ "$1 $2" == "get kubeconfig" ]] && echo "apiVersion: v1 # management"
"""
KUBECTL_BOTH = """#!/usr/bin/env bash
echo "kubectl $*" >>"$STUB_DIR/calls"
if [[ " $* " == *" get secret "* ]]; then
  printf 'apiVersion: v1 # tenant super-admin' | base64
  exit 0
fi
printf '{"gitVersion":"%s"}\\n' "$(cat "$STUB_DIR/served")"
"""


def test_the_pool_gate_reads_the_tenant_kubeconfig_and_waits(tmp_path: Path) -> None:
    (tmp_path / "bin").mkdir()
    for name, body in {"kind": KIND, "kubectl": KUBECTL_BOTH}.items():
        stub = tmp_path / "bin" / name
        stub.write_text(body)
        stub.chmod(0o755)
    (tmp_path / "served").write_text("v1.35.0")
    done = subprocess.run(
        ["bash", str(SCRIPTS_ROOT / "worker" / "wait-tenant-version.sh")],
        env={
            "PATH": f"{tmp_path / 'bin'}:{os.environ['PATH']}",
            "STUB_DIR": str(tmp_path),
            "KIND_CLUSTER_NAME": "gpu-lab",
            "TENANT_NAMESPACE": "tenant-b",
            "TENANT_SECRET": "tenant-b-admin-kubeconfig",
            "EXPECTED_VERSION": "v1.35.0",
            "SERVED_VERSION_SCRIPT": (SCRIPTS_ROOT / "tenant" / "served-version.sh").read_text(),
            "SERVED_READS": "2",
            "WAIT_POLL_SECONDS": "0",
            "WAIT_TIMEOUT_SECONDS": "5",
        },
        capture_output=True,
        text=True,
        check=False,
        timeout=60,
    )
    assert done.returncode == 0, done.stderr
    assert done.stdout.strip() == "v1.35.0"
    calls = (tmp_path / "calls").read_text()
    assert "--namespace tenant-b get secret tenant-b-admin-kubeconfig" in calls
    assert "super-admin" not in done.stdout + done.stderr
