"""The shell scripts: shellcheck-clean, and the worker scripts' behaviour with stub binaries.

The worker scripts run on the lab host (docker, kubectl) and inside a kindest/node container
(kubeadm, kubectl). Here ``docker``, ``kubectl``, ``kubeadm``, ``modprobe`` and ``swapoff`` are
small stubs on PATH that record their arguments and answer as configured, so the scripts' own
logic (ordering, idempotency, what reaches stdout, where secrets go) is exercised for real.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from collections.abc import Callable
from pathlib import Path

import pytest

from components.scripts import SCRIPTS_ROOT

SCRIPTS_DIR = SCRIPTS_ROOT / "worker"

REPO_ROOT = Path(__file__).resolve().parents[2]
SCRIPTS = REPO_ROOT / "scripts"
WORKER_SCRIPTS = sorted(SCRIPTS_DIR.glob("*.sh"))
NODE = "tenant-a-a100-0"
KUBECONFIG = (
    "apiVersion: v1\nkind: Config\nusers:\n- name: admin\n  user:\n    token: s3cr3t-admin\n"
)
TOKEN = "abcdef.0123456789abcdef"
CA_HASH = "sha256:" + "ab" * 32
JOIN_LINE = (
    f"kubeadm join 172.18.0.200:6443 --token {TOKEN} --discovery-token-ca-cert-hash {CA_HASH}"
)


def _shellcheck() -> str | None:
    local = REPO_ROOT / ".venv" / "bin" / "shellcheck"
    return str(local) if local.exists() else shutil.which("shellcheck")


def test_the_component_uses_these_worker_scripts() -> None:
    names = {path.name for path in WORKER_SCRIPTS}
    assert names >= {
        "join-node.sh",
        "node-join-inside.sh",
        "remove-node.sh",
        "patch-gpu-capacity.sh",
        "unpatch-gpu-capacity.sh",
    }


@pytest.mark.parametrize("script", WORKER_SCRIPTS, ids=lambda p: p.name)
def test_worker_scripts_are_strict_bash(script: Path) -> None:
    text = script.read_text()
    assert text.startswith("#!/usr/bin/env bash\n")
    assert "\nset -euo pipefail\n" in text


def test_every_script_passes_shellcheck() -> None:
    binary = _shellcheck()
    if binary is None:
        pytest.skip("shellcheck is not installed (.venv/bin/shellcheck or on PATH)")
    scripts = sorted(str(p) for p in SCRIPTS.rglob("*.sh"))
    assert scripts
    result = subprocess.run(
        [binary, "--severity=style", *scripts], capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


# -------------------------------------------------------------------------------- stubs

STUB_COMMON = """#!/usr/bin/env bash
printf '%s\\0' "$(basename "$0")" "$@" >>"$STUB_DIR/calls"
printf '\\x1e' >>"$STUB_DIR/calls"
"""

DOCKER = (
    STUB_COMMON
    + """
if [[ "$1" == exec && "$3" == systemctl ]]; then
  count=$(( $(cat "$STUB_DIR/systemd-polls" 2>/dev/null || echo 0) + 1 ))
  echo "$count" >"$STUB_DIR/systemd-polls"
  if (( count >= ${STUB_SYSTEMD_READY_AFTER:-2} )); then echo degraded; else echo starting; fi
  exit 1
fi
if [[ "$1" == exec && "$2" == --interactive ]]; then
  # docker exec --interactive --env NODE_NAME=<n> <n> bash -c <script>
  exec env "$4" RUN_DIR="$STUB_DIR/run" KUBELET_CONF="$STUB_DIR/kubelet.conf" "${@:6}"
fi
exit 0
"""
)

KUBEADM = (
    STUB_COMMON
    + """
# fail_first NAME: fail while the STUB_<NAME>_FAILS budget lasts (as the tenant does while
# Kamaji's in-tenant controllers are still setting up RBAC, cluster-info and kubelet-config).
fail_first() {
  local budget="${!1:-0}" count
  count=$(( $(cat "$STUB_DIR/$1" 2>/dev/null || echo 0) + 1 ))
  echo "$count" >"$STUB_DIR/$1"
  (( count <= budget ))
}
case "$1" in
  token)
    cp "${@: -1}" "$STUB_DIR/kubeconfig-seen"
    if fail_first STUB_TOKEN_FAILS; then
      echo 'secrets is forbidden: User "kubernetes-admin" cannot create resource' >&2
      exit 1
    fi
    echo "__JOIN_LINE__"
    ;;
  join)
    echo "[preflight] Running pre-flight checks with token __TOKEN__"
    if fail_first STUB_JOIN_FAILS; then
      echo "error execution phase kubelet-start: configmaps kubelet-config not found"
      exit 1
    fi
    touch "$STUB_DIR/kubelet.conf"
    # the kubelet registers its Node (unless the test says it never does)
    [[ -n "${STUB_NO_REGISTER:-}" ]] || touch "$STUB_DIR/node-registered"
    ;;
  reset)
    if fail_first STUB_RESET_FAILS; then
      echo "[reset] failed to unmount /var/lib/kubelet/pods" >&2
      exit 1
    fi
    rm -f "$STUB_DIR/kubelet.conf"
    ;;
esac
""".replace("__JOIN_LINE__", JOIN_LINE).replace("__TOKEN__", TOKEN)
)

KUBECTL = (
    STUB_COMMON
    + """
if [[ "$1" == --kubeconfig ]]; then
  cp "$2" "$STUB_DIR/kubectl-kubeconfig"
  echo "$2" >"$STUB_DIR/kubectl-kubeconfig-path"
  shift 2
fi
[[ "$1" == --request-timeout=* ]] && shift
case "$1 $2" in
  "get --raw") exit "${STUB_API_DOWN:-0}" ;;
  "get node")
    if [[ -n "${STUB_NODE_API_DOWN:-}" ]]; then
      echo "Unable to connect to the server: dial tcp 172.18.255.239:6443: i/o timeout" >&2
      exit 1
    fi
    [[ -f "$STUB_DIR/node-registered" ]] && exit 0
    echo "Error from server (NotFound): nodes \"$3\" not found" >&2
    exit 1
    ;;
  "drain "*) exit "${STUB_DRAIN_FAILS:-0}" ;;
esac
exit 0
"""
)

FAILING = STUB_COMMON + "exit 1\n"
PASSING = STUB_COMMON + "exit 0\n"


class Stubs:
    def __init__(self, root: Path) -> None:
        self.dir = root
        self.bin = root / "bin"
        self.bin.mkdir()
        (root / "run").mkdir()
        for name, body in {
            "docker": DOCKER,
            "kubeadm": KUBEADM,
            "kubectl": KUBECTL,
            "modprobe": FAILING,
            "swapoff": PASSING,
        }.items():
            path = self.bin / name
            path.write_text(body)
            path.chmod(0o755)

    def calls(self, program: str | None = None) -> list[list[str]]:
        path = self.dir / "calls"
        if not path.exists():
            return []
        found = []
        for record in path.read_text().split("\x1e"):
            if not record:
                continue
            parts = record.split("\0")[:-1]
            if program is None or parts[0] == program:
                found.append(parts)
        return found

    def run(self, script: str, **env: str) -> subprocess.CompletedProcess[str]:
        environment = {
            "PATH": f"{self.bin}:{os.environ['PATH']}",
            "STUB_DIR": str(self.dir),
            "HOME": str(self.dir),
            "JOIN_RETRY_SECONDS": "0",
            **env,
        }
        return subprocess.run(
            ["/bin/bash", "-c", (SCRIPTS_DIR / script).read_text()],
            env=environment,
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )


@pytest.fixture
def stubs(tmp_path: Path) -> Stubs:
    if shutil.which("bash") is None or shutil.which("sed") is None:
        pytest.skip("bash and sed are needed to run the worker scripts")
    return Stubs(tmp_path)


def join(stubs: Stubs, **env: str) -> subprocess.CompletedProcess[str]:
    return stubs.run(
        "join-node.sh",
        NODE_NAME=NODE,
        TENANT_KUBECONFIG=KUBECONFIG,
        NODE_JOIN_SCRIPT=(SCRIPTS_DIR / "node-join-inside.sh").read_text(),
        **env,
    )


# ---------------------------------------------------------------------------------- join


def test_join_waits_for_systemd_joins_and_prints_only_the_node_name(stubs: Stubs) -> None:
    result = join(stubs, STUB_SYSTEMD_READY_AFTER="2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}\n"
    assert (stubs.dir / "systemd-polls").read_text().strip() == "2"
    (join_call,) = [c for c in stubs.calls("kubeadm") if c[1] == "join"]
    assert join_call[1:] == [
        *JOIN_LINE.split()[1:],
        "--ignore-preflight-errors=SystemVerification,FileExisting",
    ]
    # br_netfilter failed (stub) and was tolerated; the host's swap was left alone (swapoff is
    # not namespaced: in a privileged container it turns off the host's swap devices)
    assert stubs.calls("modprobe") == [["modprobe", "br_netfilter"]]
    assert stubs.calls("swapoff") == []


def test_join_keeps_the_token_and_kubeconfig_out_of_output_and_arguments(stubs: Stubs) -> None:
    result = join(stubs)
    assert result.returncode == 0, result.stderr
    for secret in (TOKEN, CA_HASH, "s3cr3t-admin"):
        assert secret not in result.stdout
        assert secret not in result.stderr
    assert "<redacted-token>" in result.stderr
    # the kubeconfig went to the container on stdin, never as a docker argument
    for call in stubs.calls("docker"):
        assert all("s3cr3t-admin" not in arg for arg in call)
    assert (stubs.dir / "kubeconfig-seen").read_text() == KUBECONFIG
    # and its copy inside the container is gone afterwards
    assert list((stubs.dir / "run").iterdir()) == []


def test_join_is_a_no_op_when_already_joined(stubs: Stubs) -> None:
    assert join(stubs).returncode == 0
    (stubs.dir / "node-registered").touch()
    (stubs.dir / "calls").unlink()
    result = join(stubs)
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}\n"
    assert stubs.calls("kubeadm") == []
    assert "nothing to do" in result.stderr


def test_join_again_when_the_tenant_lost_the_node(stubs: Stubs) -> None:
    (stubs.dir / "kubelet.conf").touch()  # joined before, but the node is not registered
    result = join(stubs)
    assert result.returncode == 0, result.stderr
    assert [c[1] for c in stubs.calls("kubeadm")] == ["reset", "token", "join"]


def test_join_again_even_when_the_reset_of_a_lost_node_fails(stubs: Stubs) -> None:
    (stubs.dir / "kubelet.conf").touch()  # joined before, but the node is not registered
    result = join(stubs, STUB_RESET_FAILS="1")
    assert result.returncode == 0, result.stderr
    assert [c[1] for c in stubs.calls("kubeadm")] == ["reset", "token", "join"]
    assert "kubeadm reset failed (tolerated)" in result.stderr


def test_no_worker_script_touches_the_hosts_swap() -> None:
    for script in WORKER_SCRIPTS:
        code = [
            line for line in script.read_text().splitlines() if not line.lstrip().startswith("#")
        ]
        assert not any("swapoff" in line or "swapon" in line for line in code), script.name


def _kubeadm_verbs(stubs: Stubs) -> list[str]:
    return [call[1] for call in stubs.calls("kubeadm")]


def test_join_retries_while_the_tenant_is_still_setting_up_rbac(stubs: Stubs) -> None:
    # Kamaji reports the control plane Ready before its in-tenant controllers have bound the
    # admin user and bootstrap tokens: the first token requests are refused.
    result = join(stubs, STUB_TOKEN_FAILS="2")
    assert result.returncode == 0, result.stderr
    assert result.stdout == f"{NODE}\n"
    assert _kubeadm_verbs(stubs) == ["token", "token", "token", "join"]
    assert "forbidden" in result.stderr


def test_a_failed_join_is_reset_and_retried(stubs: Stubs) -> None:
    result = join(stubs, STUB_JOIN_FAILS="1")
    assert result.returncode == 0, result.stderr
    assert _kubeadm_verbs(stubs) == ["token", "join", "reset", "token", "join"]
    assert TOKEN not in result.stderr


def test_join_gives_up_at_its_deadline(stubs: Stubs) -> None:
    result = join(stubs, STUB_TOKEN_FAILS="1000", JOIN_TIMEOUT="0")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "gave up" in result.stderr
    assert "join" not in _kubeadm_verbs(stubs)


def test_a_joined_node_is_never_reset_because_the_tenant_api_did_not_answer(
    stubs: Stubs,
) -> None:
    (stubs.dir / "kubelet.conf").touch()  # joined before; the tenant API is unreachable
    result = join(stubs, STUB_NODE_API_DOWN="1", JOIN_TIMEOUT="0")
    assert result.returncode != 0
    assert _kubeadm_verbs(stubs) == []
    assert (stubs.dir / "kubelet.conf").exists()


def test_join_is_reported_only_once_the_kubelet_registered_its_node(stubs: Stubs) -> None:
    # Whatever runs after the join (the NodePatch, the capacity patch) must find the Node the
    # kubelet created, never create it first: the kubelet would adopt it and zero its
    # nvidia.com/gpu capacity.
    result = join(stubs, STUB_NO_REGISTER="1", JOIN_TIMEOUT="0")
    assert result.returncode != 0
    assert result.stdout == ""
    assert "did not register" in result.stderr
    assert _kubeadm_verbs(stubs) == ["token", "join"]


def test_join_fails_when_systemd_never_comes_up(stubs: Stubs) -> None:
    result = join(stubs, STUB_SYSTEMD_READY_AFTER="1000", SYSTEMD_TIMEOUT="1")
    assert result.returncode != 0
    assert result.stdout == ""
    assert stubs.calls("kubeadm") == []


# ------------------------------------------------------------------------------- remove


def remove(stubs: Stubs, **env: str) -> subprocess.CompletedProcess[str]:
    return stubs.run("remove-node.sh", NODE_NAME=NODE, TENANT_KUBECONFIG=KUBECONFIG, **env)


def _kubectl_verbs(stubs: Stubs) -> list[str]:
    verbs = []
    for call in stubs.calls("kubectl"):
        args = [a for a in call[1:] if not a.startswith("--request-timeout")]
        if args and args[0] == "--kubeconfig":
            args = args[2:]
        verbs.append(" ".join(args[:2]))
    return verbs


def test_remove_drains_then_deletes_the_node(stubs: Stubs) -> None:
    (stubs.dir / "node-registered").touch()
    result = remove(stubs)
    assert result.returncode == 0, result.stderr
    assert _kubectl_verbs(stubs) == ["get --raw", "get node", f"drain {NODE}", "delete node"]
    delete = stubs.calls("kubectl")[-1]
    assert NODE in delete
    assert "--ignore-not-found" in delete
    assert (stubs.dir / "kubectl-kubeconfig").read_text() == KUBECONFIG
    # the kubeconfig file the script wrote is removed
    assert not Path((stubs.dir / "kubectl-kubeconfig-path").read_text().strip()).exists()


def test_remove_deletes_even_when_the_drain_does_not_finish(stubs: Stubs) -> None:
    (stubs.dir / "node-registered").touch()
    result = remove(stubs, STUB_DRAIN_FAILS="1")
    assert result.returncode == 0, result.stderr
    assert _kubectl_verbs(stubs)[-1] == "delete node"


def test_remove_is_a_no_op_for_an_unregistered_node_or_a_gone_tenant(stubs: Stubs) -> None:
    assert remove(stubs).returncode == 0
    assert "delete node" not in _kubectl_verbs(stubs)
    (stubs.dir / "node-registered").touch()
    (stubs.dir / "calls").unlink()
    result = remove(stubs, STUB_API_DOWN="1")
    assert result.returncode == 0, result.stderr
    assert _kubectl_verbs(stubs) == ["get --raw"]


# ----------------------------------------------------------------------------- capacity


def capacity(stubs: Stubs, script: str, **env: str) -> subprocess.CompletedProcess[str]:
    return stubs.run(
        script,
        NODE_NAME=NODE,
        TENANT_KUBECONFIG=KUBECONFIG,
        GPU_RESOURCE="nvidia.com/gpu",
        **env,
    )


def _patches(stubs: Stubs) -> list[list[str]]:
    return [c for c in stubs.calls("kubectl") if "patch" in c]


def test_capacity_is_a_status_patch_of_cards_times_slots(stubs: Stubs) -> None:
    (stubs.dir / "node-registered").touch()
    result = capacity(stubs, "patch-gpu-capacity.sh", GPU_CAPACITY="10")
    assert result.returncode == 0, result.stderr
    assert result.stdout == "10\n"
    (patch,) = _patches(stubs)
    assert "--subresource=status" in patch
    assert "--type=merge" in patch
    assert patch[patch.index("--patch") + 1] == (
        '{"status":{"capacity":{"nvidia.com/gpu":"10"},"allocatable":{"nvidia.com/gpu":"10"}}}'
    )


@pytest.mark.parametrize("value", ["0", "-1", "ten", ""])
def test_capacity_must_be_positive(stubs: Stubs, value: str) -> None:
    (stubs.dir / "node-registered").touch()
    result = capacity(stubs, "patch-gpu-capacity.sh", GPU_CAPACITY=value)
    assert result.returncode != 0
    assert _patches(stubs) == []


def test_capacity_waits_for_the_node_and_gives_up(stubs: Stubs) -> None:
    result = capacity(stubs, "patch-gpu-capacity.sh", GPU_CAPACITY="10", NODE_TIMEOUT="1")
    assert result.returncode != 0
    assert _patches(stubs) == []


def test_capacity_removal(stubs: Stubs) -> None:
    result: Callable[..., subprocess.CompletedProcess[str]] = capacity
    assert result(stubs, "unpatch-gpu-capacity.sh").returncode == 0
    assert _patches(stubs) == []  # node gone: nothing to do
    (stubs.dir / "node-registered").touch()
    assert result(stubs, "unpatch-gpu-capacity.sh").returncode == 0
    (patch,) = _patches(stubs)
    assert patch[patch.index("--patch") + 1] == (
        '{"status":{"capacity":{"nvidia.com/gpu":null},"allocatable":{"nvidia.com/gpu":null}}}'
    )
