"""scripts/backup/control-plane.sh and api-server-endpoints.sh against a stub `kubectl` that
models what they act on: a TenantControlPlane Kamaji reconciles (it scales the Deployment back
to the TCP's replicas on every call unless the TCP is paused), its Deployment and API server
pods (gone a few polls after a scale to 0), and, in prod, the Cluster whose controllers rewrite
the TCP unless ``spec.paused``."""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from components.backups import objects
from components.backups.objects import CONTROL_PLANE_POD_LABEL, KAMAJI_PAUSED_ANNOTATION
from components.prod.substrate import CLUSTER_PAUSE
from components.scripts import SCRIPTS_ROOT
from tests.support.backup_plans import LAB_PLAN, PROD_PLAN

NOTE = "gpu-platform.io/replicas-before-restore"

# The stub: state in $STUB_DIR/state.json, one call per line in $STUB_DIR/calls.
KUBECTL = r"""
import json, os, sys
state_path = os.path.join(os.environ["STUB_DIR"], "state.json")
state = json.load(open(state_path))
args = sys.argv[1:]
with open(os.path.join(os.environ["STUB_DIR"], "calls"), "a") as calls:
    calls.write(" ".join(args) + "\n")

def save():
    json.dump(state, open(state_path, "w"))

def reconcile():
    # Kamaji: an unpaused TCP's Deployment follows the TCP; the Cluster API provider rewrites an
    # unpaused Cluster's TCP replicas from the KamajiControlPlane.
    tcp = state["tcp"]
    if state.get("cluster") is not None and not state["cluster"]["paused"]:
        tcp["replicas"] = state["cluster"]["kcpReplicas"]
    if "kamaji.clastix.io/paused" not in tcp["annotations"]:
        state["deployment"]["replicas"] = tcp["replicas"]
    if state["deployment"]["replicas"] == 0 and state["pods"] > 0:
        state["pods"] -= 1
    elif state["deployment"]["replicas"] > 0:
        state["pods"] = state["deployment"]["replicas"]

reconcile()
verb = args[0]
if verb == "annotate":
    resource, name, change = args[1], args[2], args[3]
    target = state["tcp"]["annotations"] if resource.startswith("tenantcontrolplanes") else None
    if target is None:
        sys.exit("stub: annotate only TCPs")
    if change.endswith("-"):
        target.pop(change[:-1], None)
    else:
        key, value = change.split("=", 1)
        if key in target and "--overwrite" not in args:
            sys.exit(f"error: {key} already has a value")
        target[key] = value
elif verb == "patch":
    body = json.loads(args[args.index("-p") + 1])
    state["cluster"]["paused"] = body["spec"]["paused"]
elif verb == "scale":
    state["deployment"]["replicas"] = int(args[-1].split("=")[1])
elif verb == "rollout":
    if state["deployment"]["replicas"] == 0:
        sys.exit("stub: rollout of a Deployment at 0 replicas")
elif verb == "get":
    query = next((a for a in args if a.startswith("jsonpath=")), "")
    if args[1] == "pods":
        print("\n".join(f"pod/api-{i}" for i in range(state["pods"])))
    elif "gpu-platform" in query:
        note = "gpu-platform.io/replicas-before-restore"
        print(state["tcp"]["annotations"].get(note, ""), end="")
    elif ".spec.replicas" in query:
        print(state["deployment"]["replicas"], end="")
    elif "].args[*]" in query:
        print("\n".join(state["deployment"]["args"]))
    elif "].image" in query:
        print(state["deployment"]["image"], end="")
    else:
        sys.exit(f"stub: unknown query {args}")
else:
    sys.exit(f"stub: unknown verb {args}")
reconcile()
save()
"""


def _stub(tmp_path: Path, state: dict[str, Any]) -> dict[str, str]:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir(exist_ok=True)
    stub = bin_dir / "kubectl"
    stub.write_text(f"#!{sys.executable}\n{KUBECTL}")
    stub.chmod(0o755)
    (tmp_path / "state.json").write_text(json.dumps(state))
    work = tmp_path / "work"
    work.mkdir(exist_ok=True)
    return {
        "PATH": f"{bin_dir}:{os.environ['PATH']}",
        "STUB_DIR": str(tmp_path),
        "WORK_DIR": str(work),
        "CONTROL_PLANE": "tenant-a",
        "CONTROL_PLANE_POD_LABEL": CONTROL_PLANE_POD_LABEL,
        "KAMAJI_PAUSED_ANNOTATION": KAMAJI_PAUSED_ANNOTATION,
        "STOP_TIMEOUT_SECONDS": "20",
    }


def _state(cluster: bool = False) -> dict[str, Any]:
    return {
        "tcp": {"replicas": 2, "annotations": {}},
        "deployment": {
            "replicas": 2,
            "args": [
                "--allow-privileged=true",
                "--etcd-servers=https://kamaji-etcd-0.kamaji-etcd.kamaji-system.svc:2379,"
                "https://kamaji-etcd-1.kamaji-etcd.kamaji-system.svc:2379",
                "--etcd-prefix=/tenant_a",
            ],
            "image": "registry.k8s.io/kube-apiserver:v1.35.0",
        },
        "pods": 2,
        "cluster": {"paused": False, "kcpReplicas": 2} if cluster else None,
    }


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
    state: dict[str, Any] = json.loads((tmp_path / "state.json").read_text())
    return state


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
    assert state["tcp"]["annotations"] == {}
    if prod:
        assert state["cluster"]["paused"] is False


def test_the_lab_path_pauses_no_cluster(tmp_path: Path) -> None:
    """Without PAUSE_OWNER (the lab's TCP has no Cluster API owner) nothing but the TCP is
    paused: no patch of any other object."""
    env = _stub(tmp_path, _state(cluster=True))
    stopped = _run("control-plane.sh", env, "stop")
    assert stopped.returncode == 0, stopped.stderr
    assert _read(tmp_path)["cluster"]["paused"] is False
    calls = (tmp_path / "calls").read_text()
    assert "patch" not in calls


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

    env = _stub(tmp_path, _state(cluster=prod))
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
    missing = {need for call in calls for need in _needed(call)} - granted
    assert not missing, f"the restore Role lacks {sorted(missing)}"
    # The backup runs only the endpoints step: its Role is enough for that, and no more.
    (tmp_path / "calls").write_text("")
    assert _run("api-server-endpoints.sh", env).returncode == 0
    backup_calls = [line.split() for line in (tmp_path / "calls").read_text().splitlines()]
    backup_granted = _granted(objects.access(plan, restore=False)[1]["rules"])
    assert {n for c in backup_calls for n in _needed(c)} <= backup_granted
