"""The node-container options that depend on the Docker host, decided as kind decides them.

kind adds four things to a node container only on some hosts (kind v0.31.0
``pkg/cluster/internal/providers/docker/provision.go`` ``commonArgs``, lines 182-206, with the
checks in ``util.go``):

* ``--volume /dev/mapper:/dev/mapper`` when Docker's storage driver is btrfs, zfs or devicemapper,
  or its backing filesystem is btrfs, zfs or xfs (``mountDevMapper``): without it the kubelet in
  the container cannot map its root filesystem to a device ("failed to get rootfs info"), never
  becomes ready and the join times out;
* ``--userns=host`` when the daemon remaps user namespaces (``usernsRemap``: ``SecurityOptions``
  holds ``name=userns``): Docker refuses a privileged container in a remapped namespace;
* ``--device /dev/fuse`` for rootless Docker (``mountFuse``: ``name=rootless``), which does not give
  privileged containers ``/dev/fuse`` (fuse-overlayfs needs it);
* the proxy variables of kind's own environment (``getProxyEnv``, ``common/proxy.go``), with
  ``NO_PROXY`` extended by what the node must reach directly: kindest/node's entrypoint hands them
  to every unit (``configure_proxy``), containerd and the kubelet included.

``docker_host`` and ``node_options`` are pure (``docker info --format '{{json .}}'`` in, options
out); ``read_docker_info`` asks Docker. ``GPU_PLATFORM_DOCKER_INFO`` overrides the question: a
path to such a JSON document, or empty for "no facts" (what the offline tests use).
"""

from __future__ import annotations

import csv
import json
import os
import subprocess
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pulumi

DOCKER_INFO_ENV = "GPU_PLATFORM_DOCKER_INFO"
DEV_MAPPER = "/dev/mapper"
FUSE = "/dev/fuse"
# kind's NO_PROXY additions for in-cluster names (provision.go getProxyEnv).
CLUSTER_DNS_SUFFIXES = (".svc", ".svc.cluster", ".svc.cluster.local")
PROXY_VARIABLES = ("HTTP_PROXY", "HTTPS_PROXY", "NO_PROXY")

_DEV_MAPPER_DRIVERS = frozenset({"btrfs", "zfs", "devicemapper"})
_DEV_MAPPER_FILESYSTEMS = frozenset({"btrfs", "zfs", "xfs"})


@dataclass(frozen=True)
class DockerHost:
    """What kind looks at in ``docker info``."""

    storage_driver: str = ""
    backing_filesystem: str = ""
    userns_remap: bool = False
    rootless: bool = False


@dataclass(frozen=True)
class NodeOptions:
    """Extra ``docker.Container`` arguments for a node container on this host."""

    volumes: tuple[dict[str, Any], ...] = ()
    devices: tuple[dict[str, str], ...] = ()
    userns_mode: str | None = None
    reasons: tuple[str, ...] = field(default=(), compare=False)


def _security_option_fields(options: Sequence[Any]) -> set[str]:
    """Every ``k=v`` field of ``SecurityOptions`` (each entry is CSV: ``name=seccomp,profile=x``,
    read as kind reads it in ``provider.go`` ``info``)."""
    fields: set[str] = set()
    for option in options:
        for row in csv.reader([str(option)]):
            fields.update(item.strip() for item in row)
    return fields


def docker_host(info: Mapping[str, Any] | None) -> DockerHost:
    """The facts kind uses, from ``docker info --format '{{json .}}'`` (None: nothing known)."""
    if not info:
        return DockerHost()
    backing = ""
    for item in info.get("DriverStatus") or []:
        if isinstance(item, list) and len(item) >= 2 and item[0] == "Backing Filesystem":
            backing = str(item[1]).lower()
            break
    fields = _security_option_fields(info.get("SecurityOptions") or [])
    return DockerHost(
        storage_driver=str(info.get("Driver") or "").strip().lower(),
        backing_filesystem=backing,
        userns_remap="name=userns" in fields,
        rootless="name=rootless" in fields,
    )


def node_options(host: DockerHost) -> NodeOptions:
    """kind's host-dependent node-container arguments for ``host``."""
    volumes: list[dict[str, Any]] = []
    devices: list[dict[str, str]] = []
    reasons: list[str] = []
    if (
        host.storage_driver in _DEV_MAPPER_DRIVERS
        or host.backing_filesystem in _DEV_MAPPER_FILESYSTEMS
    ):
        volumes.append({"host_path": DEV_MAPPER, "container_path": DEV_MAPPER})
        reasons.append(
            f"{DEV_MAPPER} mounted (storage driver {host.storage_driver or '?'}, backing "
            f"filesystem {host.backing_filesystem or '?'})"
        )
    if host.rootless:
        # Spelled out as the docker CLI fills it in for `--device /dev/fuse`, so the provider
        # reads back what was declared.
        devices.append({"host_path": FUSE, "container_path": FUSE, "permissions": "rwm"})
        reasons.append(f"{FUSE} passed in (rootless Docker)")
    userns_mode = None
    if host.userns_remap:
        userns_mode = "host"
        reasons.append("host user namespace (the daemon remaps user namespaces)")
    return NodeOptions(tuple(volumes), tuple(devices), userns_mode, tuple(reasons))


def proxy_settings(environ: Mapping[str, str]) -> dict[str, str]:
    """The proxy variables set in ``environ`` (upper case wins over lower, as in kind)."""
    found: dict[str, str] = {}
    for name in PROXY_VARIABLES:
        value = environ.get(name) or environ.get(name.lower()) or ""
        if value:
            found[name] = value
    return found


def proxy_envs(proxy: Mapping[str, str], direct: Sequence[str]) -> list[str]:
    """``KEY=value`` entries for a node container, both spellings as kind sets them; ``NO_PROXY``
    gains ``direct`` (addresses, CIDRs and names the node reaches without the proxy) and the
    cluster DNS suffixes. Empty without a proxy."""
    if not proxy:
        return []
    values = dict(proxy)
    no_proxy = [part for part in values.get("NO_PROXY", "").split(",") if part]
    for entry in [*direct, *CLUSTER_DNS_SUFFIXES]:
        if entry and entry not in no_proxy:
            no_proxy.append(entry)
    values["NO_PROXY"] = ",".join(no_proxy)
    envs: list[str] = []
    for name in PROXY_VARIABLES:
        if name in values:
            envs += [f"{name}={values[name]}", f"{name.lower()}={values[name]}"]
    return envs


# ------------------------------------------------------------------------------- impure


class DockerInfoError(pulumi.RunError):
    """``docker info`` did not answer during ``pulumi up`` (one line, with what to do)."""


def read_docker_info(
    environ: Mapping[str, str] | None = None,
    timeout: float = 20.0,
    dry_run: bool = True,
    docker: Sequence[str] = ("docker",),
) -> dict[str, Any] | None:
    """``docker info`` as JSON, or None when Docker does not answer during a preview (a machine
    without Docker: the containers are then planned without host options).

    During ``pulumi up`` (``dry_run`` false) no answer is an error: planning the containers
    without the host's options would change their ForceNew inputs (mounts, devices, userns) and
    replace, re-join and re-patch every worker — or create ones that cannot start."""
    environ = os.environ if environ is None else environ
    if DOCKER_INFO_ENV in environ:
        path = environ[DOCKER_INFO_ENV]
        if not path:
            return None
        data = json.loads(Path(path).read_text())
        return data if isinstance(data, dict) else None
    problem = ""
    data = None
    try:
        proc = subprocess.run(
            [*docker, "info", "--format", "{{json .}}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
        if proc.returncode != 0:
            problem = (proc.stderr.strip().splitlines() or [f"exit {proc.returncode}"])[-1]
        else:
            data = json.loads(proc.stdout)
    except (OSError, subprocess.TimeoutExpired) as error:
        problem = str(error)
    except json.JSONDecodeError:
        problem = "its output is not JSON"
    if isinstance(data, dict):
        return data
    if dry_run:
        return None
    raise DockerInfoError(
        f"`docker info` did not answer ({problem or 'no JSON object'}): the lab's worker "
        "containers are planned from the host's storage driver, user namespaces and rootless "
        "mode; check that Docker runs and run `pulumi up` again"
    )
