"""The registry-cache scripts against a stub `docker` that keeps state: caches started once and
kept (a stopped one started, one with another configuration recreated with its volume kept),
nothing ever deleting a volume but `make clean-caches`, and node-mirrors writing each registry's
hosts.toml into every node and tolerating a pre-pull that fails."""

from __future__ import annotations

import os
import subprocess
from pathlib import Path

from components.lab import registry_cache
from components.scripts import SCRIPTS_ROOT

DOCKER = r"""#!/usr/bin/env bash
echo "docker $*" >>"$STUB_DIR/calls"
state="$STUB_DIR/state"
mkdir -p "$state/containers" "$state/volumes"
case "$1" in
  volume)
    case "$2" in
      inspect) [[ -e "$state/volumes/$3" ]] || exit 1 ;;
      create) touch "$state/volumes/${*: -1}" ;;
      ls) ls "$state/volumes" ;;
      rm) shift 2; for v in "$@"; do rm -f "$state/volumes/$v"; done ;;
    esac ;;
  inspect)
    format="$3"; c="$state/containers/$4"
    [[ -d "$c" ]] || exit 1
    case "$format" in
      *registry-cache-config*) cat "$c/config" ;;
      *State.Running*) cat "$c/running" ;;
      *NetworkSettings*) [[ -e "$c/net" ]] && echo yes; true ;;
    esac ;;
  rm) for c in "${@:3}"; do rm -rf "$state/containers/$c"; done ;;
  run)
    name=""; config=""; prev=""
    for arg in "$@"; do
      [[ "$prev" == --name ]] && name="$arg"
      [[ "$prev" == --label && "$arg" == *registry-cache-config=* ]] && config="${arg#*=}"
      prev="$arg"
    done
    mkdir -p "$state/containers/$name"
    printf '%s' "$config" >"$state/containers/$name/config"
    echo true >"$state/containers/$name/running"
    echo "$*" >"$state/containers/$name/run" ;;
  start) echo true >"$state/containers/$2/running" ;;
  ps) ls "$state/containers" ;;
  network)
    case "$2" in
      inspect) [[ -e "$STUB_DIR/network" ]] || exit 1 ;;
      connect) touch "$state/containers/$4/net" ;;
    esac ;;
  exec)
    if [[ "$2" == -i ]]; then
      node="$3"; target="$(sed -nE "s/.*cat > '([^']+)'.*/\1/p" <<<"${*: -1}")"
      mkdir -p "$STUB_DIR/fs/$node$(dirname "$target")"
      cat >"$STUB_DIR/fs/$node$target"
    elif [[ "$3 $4" == "crictl pull" ]]; then
      [[ " ${STUB_FAIL_PULL:-} " == *" $5 "* ]] && exit 1
      echo "$2 $5" >>"$STUB_DIR/pulls"
    fi ;;
esac
exit 0
"""

CACHES = registry_cache.caches(["docker.io", "quay.io"])


class Host:
    def __init__(self, root: Path, network: bool = True) -> None:
        self.dir = root
        (root / "bin").mkdir()
        stub = root / "bin" / "docker"
        stub.write_text(DOCKER)
        stub.chmod(0o755)
        if network:
            (root / "network").touch()

    def run(self, script: str, env: dict[str, str]) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            ["/bin/bash", "-c", (SCRIPTS_ROOT / "management" / script).read_text()],
            env={
                "PATH": f"{self.dir / 'bin'}:{os.environ['PATH']}",
                "STUB_DIR": str(self.dir),
                "CONTAINERD_TIMEOUT": "2",
                **env,
            },
            capture_output=True,
            text=True,
            timeout=60,
            check=False,
        )

    def up(self, image: str = registry_cache.REGISTRY_IMAGE) -> subprocess.CompletedProcess[str]:
        return self.run("registry-caches-up.sh", registry_cache.caches_env(CACHES, "kind", image))

    def calls(self) -> list[str]:
        path = self.dir / "calls"
        lines = path.read_text().splitlines() if path.exists() else []
        path.unlink(missing_ok=True)
        return lines

    def container(self, name: str) -> Path:
        return self.dir / "state" / "containers" / name


def test_caches_start_once_with_their_upstream_and_no_expiry(tmp_path: Path) -> None:
    host = Host(tmp_path)
    first = host.up()
    assert first.returncode == 0, first.stderr
    assert first.stdout.split() == [w for c in CACHES for w in (c.registry, c.container)]
    for cache in CACHES:
        run = (host.container(cache.container) / "run").read_text()
        assert f"--env REGISTRY_PROXY_REMOTEURL={cache.upstream}" in run
        assert "--env REGISTRY_PROXY_TTL=0" in run
        assert f"--volume {cache.volume}:/var/lib/registry" in run
        assert (host.container(cache.container) / "net").exists()  # on the kind network
        assert (tmp_path / "state" / "volumes" / cache.volume).exists()
    host.calls()
    again = host.up()
    assert again.returncode == 0, again.stderr
    calls = host.calls()
    assert not [c for c in calls if c.split()[1] in ("run", "rm", "start", "create")], calls


def test_a_stopped_cache_is_started_and_a_changed_one_recreated_keeping_its_volume(
    tmp_path: Path,
) -> None:
    host = Host(tmp_path)
    assert host.up().returncode == 0
    docker_io = CACHES[0].container
    (host.container(docker_io) / "running").write_text("false\n")
    host.calls()
    assert host.up().returncode == 0
    assert f"docker start {docker_io}" in host.calls()
    changed = host.up(image="registry:3.0.1")
    assert changed.returncode == 0, changed.stderr
    calls = host.calls()
    assert f"docker rm -f {docker_io}" in calls
    assert "registry:3.0.1" in (host.container(docker_io) / "run").read_text()
    assert not [c for c in calls if c.startswith("docker volume rm")]
    assert (tmp_path / "state" / "volumes" / CACHES[0].volume).exists()


def test_without_the_kind_network_the_caches_start_unattached(tmp_path: Path) -> None:
    host = Host(tmp_path, network=False)
    assert host.up().returncode == 0
    assert not (host.container(CACHES[0].container) / "net").exists()


def test_node_mirrors_wires_every_node_to_every_cache(tmp_path: Path) -> None:
    host = Host(tmp_path)
    assert host.up().returncode == 0
    for cache in CACHES:
        (host.container(cache.container) / "net").unlink()
    nodes = ["w-0", "w-1"]
    images = ["quay.io/calico/node:v3.32.1", "busybox:1.37.0"]
    env = registry_cache.mirrors_env(CACHES, nodes, "kind", images)
    result = host.run("node-mirrors.sh", {**env, "STUB_FAIL_PULL": "busybox:1.37.0"})
    assert result.returncode == 0, result.stderr
    assert result.stdout.split() == nodes
    for node in nodes:
        for cache in CACHES:
            written = tmp_path / "fs" / node / "etc/containerd/certs.d" / cache.registry
            assert (written / "hosts.toml").read_text() == registry_cache.hosts_toml(cache)
    assert (tmp_path / "pulls").read_text().split("\n")[:-1] == [
        f"{node} quay.io/calico/node:v3.32.1" for node in nodes
    ]
    assert "could not pull busybox:1.37.0 ahead" in result.stderr
    assert all((host.container(c.container) / "net").exists() for c in CACHES)


def test_clean_caches_removes_containers_and_volumes(tmp_path: Path) -> None:
    host = Host(tmp_path)
    assert host.up().returncode == 0
    result = host.run("registry-caches-remove.sh", {})
    assert result.returncode == 0, result.stderr
    assert not list((tmp_path / "state" / "containers").iterdir())
    assert not list((tmp_path / "state" / "volumes").iterdir())
    assert host.run("registry-caches-remove.sh", {}).returncode == 0  # idempotent


def test_a_missing_cache_is_reported_and_the_node_still_wired(tmp_path: Path) -> None:
    host = Host(tmp_path)  # no cache started: `docker network connect` finds none
    stub = tmp_path / "bin" / "docker"
    stub.write_text(
        stub.read_text().replace(
            'connect) touch "$state/containers/$4/net" ;;',
            'connect) [[ -d "$state/containers/$4" ]] || exit 1; '
            'touch "$state/containers/$4/net" ;;',
        )
    )
    env = registry_cache.mirrors_env(CACHES, ["w-0"], "kind")
    result = host.run("node-mirrors.sh", env)
    assert result.returncode == 0, result.stderr
    assert "WARNING: cache gpu-platform-cache-docker-io is not there" in result.stderr
    assert (tmp_path / "fs" / "w-0" / "etc/containerd/certs.d/quay.io/hosts.toml").exists()
