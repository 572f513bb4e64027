"""A lab worker's container as plain data: the flags kind gives a node container.

Lab containers copy the flags kind v0.31.0 gives a node container (``runArgsForNode`` and
``commonArgs`` in ``pkg/cluster/internal/providers/docker/provision.go``): privileged, seccomp and
apparmor unconfined, tmpfs on /tmp and /run, an anonymous volume on /var, /lib/modules read-only,
a private cgroup namespace, hostname = name, restart on failure once, a TTY and no init (systemd is
PID 1),
plus kind's host-dependent ones (``components.lab.docker_host``). Kamaji's own kindest/node join
e2e (``e2e/worker_kubeadm_join_test.go``) runs a plainer container (privileged, /lib/modules,
network ``kind``) and no kube-proxy; what upstream exercises is kind's set.

``label=disable`` is declared because Docker adds it anyway: for a privileged container the
daemon appends it to ``HostConfig.SecurityOpt`` unless the caller passed a ``label=`` option (moby
docker-v29.7.2 ``daemon/create.go:296-308`` ``generateSecurityOpt``, ``daemon_unix.go:361-365``),
and the docker provider reads ``security_opts`` back into a ``ForceNew`` attribute
(kreuzwerker/terraform-provider-docker v4.5.0, pulumi-docker v5.1.0's upstream and its mirror's
head: ``resource_docker_container.go:291``, ``resource_docker_container_funcs.go:854``).
Undeclared, every later ``pulumi up`` would replace every worker (drain, delete, re-join).
"""

from __future__ import annotations

from typing import Any

from components.lab.docker_host import NodeOptions
from components.labels import LAB_ONLY_LABEL, POOL_LABEL, TENANT_LABEL

# A worker's /var (containerd's images, the kubelet's state and client certificate) is an
# anonymous volume, as kind gives every node (``--volume /var``, kind v0.31.0
# pkg/cluster/internal/providers/docker/provision.go:236), removed with its container (kind's
# ``docker rm -f -v``, provider.go:140-146; the docker provider's ``remove_volumes``, default
# true, kreuzwerker/terraform-provider-docker v4.5.0 internal/provider/resource_docker_container.go
# :256-261 and resource_docker_container_funcs.go:1100-1106). A volume entry with only a container
# path is exactly that (resource_docker_container_structures.go:323-324: ``Config.Volumes``, no
# bind), and the provider reads no volumes back (resource_docker_container_funcs.go:882), so it
# causes no diff. A replaced worker (an upgrade's new image) therefore starts from the new image's
# own /var (its preloaded images), never the old node's: a named volume would outlive the
# container, and Docker copies an image's content only into an empty volume.
VAR_VOLUME = {"container_path": "/var"}


# What a privileged node container's HostConfig.SecurityOpt holds once Docker created it.
NODE_SECURITY_OPTS = ("seccomp=unconfined", "apparmor=unconfined", "label=disable")


def worker_container_spec(
    tenant: str, pool: str, node: str, host: NodeOptions | None = None
) -> dict[str, Any]:
    """Keyword arguments for ``docker.Container`` (without image, network and environment),
    nested values as plain dicts in pulumi-docker's snake_case argument names; ``host`` adds the
    Docker host's options."""
    host = host or NodeOptions()
    spec: dict[str, Any] = {
        "name": node,
        "hostname": node,
        "privileged": True,
        "security_opts": list(NODE_SECURITY_OPTS),
        "tmpfs": {"/tmp": "", "/run": ""},
        "cgroupns_mode": "private",
        "volumes": [
            dict(VAR_VOLUME),
            {"host_path": "/lib/modules", "container_path": "/lib/modules", "read_only": True},
            *(dict(volume) for volume in host.volumes),
        ],
        "restart": "on-failure",
        "max_retry_count": 1,
        "tty": True,
        "init": False,
        "must_run": True,
        "remove_volumes": True,  # the anonymous /var goes with the container (VAR_VOLUME)
        "labels": [
            {"label": TENANT_LABEL, "value": tenant},
            {"label": POOL_LABEL, "value": pool},
            {"label": LAB_ONLY_LABEL, "value": "true"},
        ],
    }
    if host.devices:
        spec["devices"] = [dict(device) for device in host.devices]
    if host.userns_mode is not None:
        spec["userns_mode"] = host.userns_mode
    return spec
