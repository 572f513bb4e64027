"""The prod management cluster's own checks, run against a fake ``kubectl``:

* ``cert-manager-ready.sh``, the gate of an adopted cert-manager (CRDs present and Established,
  an Issuer through its webhook by a server-side dry run);
* ``namespaces-exist.sh`` and ``cluster_checks.check_adopted_namespaces``, which make a missing
  adopted tenant namespace fail before registration, as one line naming its key, in preview and
  in ``up`` (the whole program under mocks, with the fake on PATH).
"""

from __future__ import annotations

import json
import os
import subprocess
from pathlib import Path
from typing import Any

import pytest

from components.config import ConfigError
from components.management_values import CERT_MANAGER_CRDS, cert_manager_gate_env
from components.prod import cluster_checks
from components.scripts import read_script
from tests.support.harness import evaluate

# A kubectl answering from files in $FAKE_STATE: `crds` and `namespaces` list what exists,
# `unreachable` counts the calls still to fail as if the API server were down, FAKE_DRY_RUN says
# how the webhook answers a create (ok, denied, or unreachable `create-failures` times).
FAKE_KUBECTL = r"""#!/usr/bin/env bash
set -euo pipefail
echo "kubectl $*" >>"$FAKE_STATE/calls"
stat -c '%a' "$KUBECONFIG" >>"$FAKE_STATE/kubeconfig-modes"
cat "$KUBECONFIG" >"$FAKE_STATE/kubeconfig-seen"
if [[ -n "${KUBECONFIG_CONTENT:-}" ]]; then echo "leaked" >>"$FAKE_STATE/calls"; fi
countdown() {
  local file="$FAKE_STATE/$1"
  if [[ -f "$file" && "$(cat "$file")" -gt 0 ]]; then
    echo $(( $(cat "$file") - 1 )) >"$file"
    return 0
  fi
  return 1
}
if countdown unreachable; then
  echo "Unable to connect to the server: dial tcp 10.0.0.1:6443: connect: connection refused" >&2
  exit 1
fi
case "$1 $2" in
  "get customresourcedefinitions.apiextensions.k8s.io/"*)
    crd="${2#*/}"
    if grep -qx "$crd" "$FAKE_STATE/crds" 2>/dev/null; then echo "$2"; exit 0; fi
    echo "Error from server (NotFound): customresourcedefinitions \"$crd\" not found" >&2
    exit 1 ;;
  "get namespace")
    if grep -qx "$3" "$FAKE_STATE/namespaces" 2>/dev/null; then echo "namespace/$3"; exit 0; fi
    echo "Error from server (NotFound): namespaces \"$3\" not found" >&2
    exit 1 ;;
  "wait "*) echo "condition met"; exit 0 ;;
  "create --dry-run=server")
    cat >"$FAKE_STATE/dry-run-stdin"
    case "${FAKE_DRY_RUN:-ok}" in
      ok) ;;
      denied)
        echo 'admission webhook "webhook.cert-manager.io" denied the request: no' >&2
        exit 1 ;;
      *)
        if countdown create-failures; then
          echo 'Internal error occurred: failed calling webhook "webhook.cert-manager.io":' \
            'x509: certificate signed by unknown authority' >&2
          exit 1
        fi ;;
    esac
    echo "issuer.cert-manager.io/gpu-platform-readiness-probe created (server dry run)" ;;
  *) echo "unexpected: kubectl $*" >&2; exit 2 ;;
esac
"""

KUBECONFIG = "secret-kubeconfig"


@pytest.fixture
def fake(tmp_path: Path) -> dict[str, Any]:
    bin_dir = tmp_path / "bin"
    state = tmp_path / "state"
    bin_dir.mkdir()
    state.mkdir()
    kubectl = bin_dir / "kubectl"
    kubectl.write_text(FAKE_KUBECTL)
    kubectl.chmod(0o755)
    env = {"PATH": f"{bin_dir}{os.pathsep}{os.environ['PATH']}", "FAKE_STATE": str(state)}
    return {"env": env, "state": state}


def _run(script: str, fake: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    """The script's text through ``bash -c``, as pulumi-command runs it."""
    return subprocess.run(
        ["/bin/bash", "-c", read_script("management", script)],
        capture_output=True,
        text=True,
        env={**os.environ, **fake["env"], "KUBECONFIG_CONTENT": KUBECONFIG, **env},
        timeout=60,
        check=False,
    )


def _calls(fake: dict[str, Any]) -> list[str]:
    calls = fake["state"] / "calls"
    return calls.read_text().splitlines() if calls.exists() else []


def _gate(fake: dict[str, Any], **env: str) -> subprocess.CompletedProcess[str]:
    return _run(
        "cert-manager-ready.sh",
        fake,
        **{**cert_manager_gate_env(), "WAIT_POLL_SECONDS": "0", **env},
    )


def _install_crds(fake: dict[str, Any], crds: tuple[str, ...] = CERT_MANAGER_CRDS) -> None:
    (fake["state"] / "crds").write_text("".join(f"{crd}\n" for crd in crds))


# ------------------------------------------------------------------ cert-manager-ready.sh


def test_cert_manager_gate_waits_for_each_crd_and_the_webhook(fake: dict[str, Any]) -> None:
    _install_crds(fake)
    result = _gate(fake)
    assert result.returncode == 0, result.stderr
    calls = _calls(fake)
    for crd in CERT_MANAGER_CRDS:
        assert (
            "kubectl wait --for=condition=Established --timeout=60s "
            f"customresourcedefinitions.apiextensions.k8s.io/{crd}"
        ) in calls
    assert calls[-1] == "kubectl create --dry-run=server -f -"
    probe = json.loads((fake["state"] / "dry-run-stdin").read_text())
    assert probe["kind"] == "Issuer"
    assert "cert-manager's CRDs and webhook serve" in result.stdout
    # The kubeconfig reached kubectl through a private file, never the environment or output.
    assert (fake["state"] / "kubeconfig-seen").read_text() == f"{KUBECONFIG}\n"
    assert set((fake["state"] / "kubeconfig-modes").read_text().split()) == {"600"}
    assert "leaked" not in calls
    assert KUBECONFIG not in result.stdout + result.stderr


def test_cert_manager_gate_is_read_only_and_passes_again(fake: dict[str, Any]) -> None:
    _install_crds(fake)
    first, second = _gate(fake), _gate(fake)
    assert first.returncode == second.returncode == 0
    assert not [c for c in _calls(fake) if c.split()[1] not in ("get", "wait", "create")]
    assert all("--dry-run=server" in c for c in _calls(fake) if c.split()[1] == "create")


def test_cert_manager_gate_fails_at_once_when_cert_manager_is_absent(
    fake: dict[str, Any],
) -> None:
    _install_crds(fake, CERT_MANAGER_CRDS[1:])
    result = _gate(fake, WAIT_TIMEOUT_SECONDS="600")
    assert result.returncode == 1
    (line,) = result.stderr.strip().splitlines()
    assert f"CRD {CERT_MANAGER_CRDS[0]} is not on the management cluster" in line
    assert "management.existing.certManager: install" in line
    assert not [c for c in _calls(fake) if c.startswith("kubectl create")]


def test_cert_manager_gate_retries_an_unreachable_api_server_and_webhook(
    fake: dict[str, Any],
) -> None:
    _install_crds(fake)
    (fake["state"] / "unreachable").write_text("2\n")
    (fake["state"] / "create-failures").write_text("3\n")
    result = _gate(fake, FAKE_DRY_RUN="starting")
    assert result.returncode == 0, result.stderr
    assert len([c for c in _calls(fake) if c.startswith("kubectl create")]) == 4


def test_cert_manager_gate_gives_up_on_a_webhook_that_never_answers(
    fake: dict[str, Any],
) -> None:
    _install_crds(fake)
    (fake["state"] / "create-failures").write_text("1000\n")
    result = _gate(fake, FAKE_DRY_RUN="starting", WAIT_TIMEOUT_SECONDS="0")
    assert result.returncode == 1
    assert "timed out after 0s waiting for cert-manager's webhook" in result.stderr
    assert "failed calling webhook" in result.stderr


def test_cert_manager_gate_stops_when_the_webhook_refuses_the_issuer(
    fake: dict[str, Any],
) -> None:
    _install_crds(fake)
    result = _gate(fake, FAKE_DRY_RUN="denied", WAIT_TIMEOUT_SECONDS="600")
    assert result.returncode == 1
    assert "refused a self-signed Issuer" in result.stderr
    assert len([c for c in _calls(fake) if c.startswith("kubectl create")]) == 1


# --------------------------------------------------------------- adopted namespaces


ADOPTED = [
    ("tenants[0].managementNamespace.existing", "team-vision"),
    ("tenants[1].managementNamespace.existing", "team-llm"),
]


def _script_runner(fake: dict[str, Any]) -> Any:
    def run(environment: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return _run("namespaces-exist.sh", fake, **environment)

    return run


def test_namespaces_exist_prints_only_the_missing_ones(fake: dict[str, Any]) -> None:
    (fake["state"] / "namespaces").write_text("team-vision\n")
    result = _run("namespaces-exist.sh", fake, NAMESPACES="team-vision team-llm")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "team-llm\n"
    assert KUBECONFIG not in result.stdout + result.stderr


def test_missing_adopted_namespace_is_one_line_naming_its_key(fake: dict[str, Any]) -> None:
    (fake["state"] / "namespaces").write_text("team-vision\n")
    with pytest.raises(ConfigError) as caught:
        cluster_checks.check_adopted_namespaces(ADOPTED, KUBECONFIG, {}, _script_runner(fake))
    message = str(caught.value)
    assert "\n" not in message
    assert message.startswith(
        "adopted namespaces are missing: tenants[1].managementNamespace.existing: namespace "
        "'team-llm' does not exist on the management cluster"
    )


def test_present_adopted_namespaces_pass(fake: dict[str, Any]) -> None:
    (fake["state"] / "namespaces").write_text("team-vision\nteam-llm\n")
    assert cluster_checks.check_adopted_namespaces(ADOPTED, KUBECONFIG, {}, _script_runner(fake))


def test_an_unreachable_cluster_is_said_so(fake: dict[str, Any]) -> None:
    (fake["state"] / "unreachable").write_text("5\n")
    with pytest.raises(cluster_checks.RunError) as caught:
        cluster_checks.check_adopted_namespaces(ADOPTED, KUBECONFIG, {}, _script_runner(fake))
    assert not isinstance(caught.value, ConfigError)
    assert "cannot check on the management cluster" in str(caught.value)
    assert "connection refused" in str(caught.value)


def test_the_check_can_be_skipped(fake: dict[str, Any]) -> None:
    ran = cluster_checks.check_adopted_namespaces(
        ADOPTED, KUBECONFIG, {"GPU_PLATFORM_SKIP_PREFLIGHT": "1"}, _script_runner(fake)
    )
    assert ran is False
    assert _calls(fake) == []


@pytest.mark.parametrize("preview", [True, False], ids=["preview", "update"])
def test_the_program_stops_before_registering_when_an_adopted_namespace_is_missing(
    fake: dict[str, Any], preview: bool
) -> None:
    """The whole prod program under mocks, with the check on and the fake kubectl on PATH: the
    engine's read error ("resource ... does not exist") is never reached."""
    (fake["state"] / "namespaces").write_text("team-vision\nteam-speech\n")
    recording = evaluate(
        "prod", preview, environment={**fake["env"], "GPU_PLATFORM_SKIP_PREFLIGHT": "0"}
    )
    assert recording.resources == []
    assert recording.run_error
    assert recording.error is not None
    assert "\n" not in recording.error.strip()
    assert "tenants[1].managementNamespace.existing: namespace 'team-llm'" in recording.error
    (fake["state"] / "namespaces").write_text("team-vision\nteam-llm\nteam-speech\n")
    # The capacity check reads the nodes next (components.management_nodes): a recorded,
    # roomy cluster, since the fake kubectl answers for namespaces only.
    nodes = fake["state"] / "nodes.json"
    allocatable = {"cpu": "64", "memory": "256Gi"}
    nodes.write_text(json.dumps({"items": [{"spec": {}, "status": {"allocatable": allocatable}}]}))
    passing = evaluate(
        "prod",
        preview,
        environment={
            **fake["env"],
            "GPU_PLATFORM_SKIP_PREFLIGHT": "0",
            "GPU_PLATFORM_MANAGEMENT_NODES": str(nodes),
        },
    )
    assert passing.error is None, passing.error
    assert passing.resources


def test_one_switch_skips_the_checks_of_both_environments() -> None:
    from components.lab import preflight

    assert cluster_checks.SKIP_ENV == preflight.SKIP_ENV
