"""kind's host-dependent node-container arguments, decided from `docker info` samples
(tests/unit/samples/docker-info-*.json) as kind v0.31.0 decides them (providers/docker/util.go:
mountDevMapper, usernsRemap, mountFuse; provision.go getProxyEnv)."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from components.lab import docker_host
from components.lab.node_container import worker_container_spec

SAMPLES = Path(__file__).with_name("samples")


def _options(sample: str) -> docker_host.NodeOptions:
    info = json.loads((SAMPLES / f"docker-info-{sample}.json").read_text())
    return docker_host.node_options(docker_host.docker_host(info))


DEV_MAPPER = {"host_path": "/dev/mapper", "container_path": "/dev/mapper"}


@pytest.mark.parametrize(
    ("sample", "dev_mapper", "userns", "fuse"),
    [
        ("overlay2-extfs", False, False, False),
        ("containerd-snapshotter", False, False, False),
        ("btrfs", True, False, False),
        ("overlay2-xfs", True, False, False),
        ("rootless", False, False, True),
        ("userns-remap", False, True, False),
    ],
)
def test_node_options_follow_kind(sample: str, dev_mapper: bool, userns: bool, fuse: bool) -> None:
    options = _options(sample)
    assert (DEV_MAPPER in options.volumes) is dev_mapper
    assert options.userns_mode == ("host" if userns else None)
    assert bool(options.devices) is fuse
    assert len(options.reasons) == dev_mapper + userns + fuse


def test_zfs_and_devicemapper_drivers_mount_dev_mapper() -> None:
    for driver in ("zfs", "devicemapper"):
        host = docker_host.docker_host({"Driver": driver, "DriverStatus": []})
        assert DEV_MAPPER in docker_host.node_options(host).volumes


def test_without_docker_facts_the_container_gets_nothing_extra() -> None:
    assert docker_host.node_options(docker_host.docker_host(None)) == docker_host.NodeOptions()


def test_fuse_is_declared_as_docker_reports_it() -> None:
    """The docker CLI turns `--device /dev/fuse` into /dev/fuse:/dev/fuse:rwm and the provider
    reads the permissions back: declaring all three keeps the container from being replaced."""
    assert _options("rootless").devices == (
        {"host_path": "/dev/fuse", "container_path": "/dev/fuse", "permissions": "rwm"},
    )


def test_the_container_spec_carries_the_hosts_options() -> None:
    spec = worker_container_spec("tenant-a", "a100", "tenant-a-a100-0", _options("btrfs"))
    assert DEV_MAPPER in spec["volumes"]
    assert "userns_mode" not in spec
    spec = worker_container_spec("tenant-a", "a100", "tenant-a-a100-0", _options("userns-remap"))
    assert spec["userns_mode"] == "host"
    assert DEV_MAPPER not in spec["volumes"]


# --------------------------------------------------------------------------------- proxy


def test_no_proxy_no_environment() -> None:
    assert docker_host.proxy_settings({"PATH": "/bin"}) == {}
    assert docker_host.proxy_envs({}, ["10.0.0.0/16"]) == []


def test_proxy_variables_reach_the_node_with_no_proxy_extended() -> None:
    proxy = docker_host.proxy_settings(
        {"https_proxy": "http://proxy:3128", "HTTP_PROXY": "http://proxy:3128", "no_proxy": "corp"}
    )
    envs = docker_host.proxy_envs(proxy, ["172.18.255.200", "10.10.0.0/16", "tenant-a-a100-0"])
    values = dict(entry.split("=", 1) for entry in envs)
    assert values["HTTPS_PROXY"] == values["https_proxy"] == "http://proxy:3128"
    assert values["HTTP_PROXY"] == "http://proxy:3128"
    no_proxy = values["NO_PROXY"].split(",")
    assert values["no_proxy"] == values["NO_PROXY"]
    assert no_proxy[0] == "corp"
    for entry in ("172.18.255.200", "10.10.0.0/16", "tenant-a-a100-0", ".svc.cluster.local"):
        assert entry in no_proxy


def test_docker_info_can_be_given_as_a_file_or_as_nothing(tmp_path: Path) -> None:
    sample = SAMPLES / "docker-info-btrfs.json"
    assert docker_host.read_docker_info({docker_host.DOCKER_INFO_ENV: str(sample)}) == json.loads(
        sample.read_text()
    )
    assert docker_host.read_docker_info({docker_host.DOCKER_INFO_ENV: ""}) is None


def _fake_docker(tmp_path: Path, script: str) -> list[str]:
    fake = tmp_path / "docker"
    fake.write_text(f"#!/bin/sh\n{script}\n")
    fake.chmod(0o755)
    return [str(fake)]


def test_no_answer_from_docker_plans_without_host_options_only_in_preview(
    tmp_path: Path,
) -> None:
    """During `pulumi up` the host's options must be known: without them the workers' ForceNew
    inputs change and every worker is replaced (or cannot start)."""
    down = _fake_docker(tmp_path, "echo 'Cannot connect to the Docker daemon' >&2; exit 1")
    assert docker_host.read_docker_info({}, dry_run=True, docker=down) is None
    with pytest.raises(docker_host.DockerInfoError, match="Cannot connect to the Docker daemon"):
        docker_host.read_docker_info({}, dry_run=False, docker=down)
    sample = (SAMPLES / "docker-info-btrfs.json").read_text()
    (tmp_path / "info.json").write_text(sample)
    up = _fake_docker(tmp_path, f"cat {tmp_path / 'info.json'}")
    assert docker_host.read_docker_info({}, dry_run=False, docker=up) == json.loads(sample)
