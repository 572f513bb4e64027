"""The lab's pull-through registry caches, and how every node is wired to them.

One cache per registry the lab pulls from (``components.lab.lab_images``, the committed derived
list), each a CNCF Distribution registry in proxy mode (``registry:3.0.0``, distribution/
distribution v3.0.0): a container on the kind docker network, its storage in a named volume. The
caches belong to the host, not to a stack: ``make destroy`` leaves them (their Command deletes
nothing) and ``make clean-caches`` removes them (``scripts/management/registry-caches-remove.sh``),
so an image leaves the host once per host, not once per node and per run.

Why Distribution (the image kind's own local-registry recipe runs, kind v0.31.0
``site/static/examples/kind-with-registry.sh``), and what it does when the upstream is gone —
the offline second run rests on it (distribution/distribution v3.0.0):

* a tag is looked up upstream first and the answer cached; when the upstream (or its auth
  challenge) cannot be reached, the cached tag is served (``registry/proxy/proxytagservice.go:
  21-40``);
* manifests and blobs by digest are served from local storage before the upstream is asked
  (``proxymanifeststore.go:41-57``, ``proxyblobstore.go:70-91``), so images a chart pins by
  digest resolve offline too;
* cached content expires after ``proxy.ttl``, 7 days by default, and ``0`` disables expiry
  (``proxyregistry.go:46-56``, ``configuration/configuration.go:693-696``): the caches set
  ``REGISTRY_PROXY_TTL=0`` (the environment overrides the field: ``configuration/parser.go:
  223-231``), else a lab left a week would find its cache emptied;
* one registry proxies exactly one upstream (``proxy.remoteurl``), hence one cache per registry.

Each node's containerd finds its cache through ``hosts.toml`` (containerd v2.2.0
``docs/hosts.md``): the cache as a ``[host]`` with pull and resolve, the upstream as ``server``,
which containerd tries when every host failed (``docs/hosts.md:248-256``) — so a cache that is
down or lacks an image costs a fallback, never the pull. kindest/node for kind v0.31.0 runs
containerd v2.2.0 (``images/base/Dockerfile:125``), whose CRI image service reads
``/etc/containerd/certs.d`` by default (``internal/cri/config/config_unix.go:36``; kind's recipe:
"the containerd config patch is not necessary with images from kind v0.27.0+"), and hosts files
are read at each pull (``docs/hosts.md``: no restart). The nodes reach a cache by container name
through Docker's DNS on the kind network, as kind's recipe does.
"""

from __future__ import annotations

import base64
import hashlib
import json
import subprocess
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass

from components.labels import LAB_ONLY_LABEL

# The CNCF Distribution registry (Docker Hub's official ``registry`` image), pinned by tag only:
# its digest could not be established from an upstream source (docker-library/repo-info's
# stored repos/registry/ lists only 3.1.x now; third-party repositories name two different
# digests for 3.0.0), so none is pinned rather than a guessed one.
REGISTRY_IMAGE = "registry:3.0.0"
CACHE_LABEL = "gpu-platform.io/registry-cache"
CACHE_CONFIG_LABEL = "gpu-platform.io/registry-cache-config"
CACHE_PORT = 5000
CACHE_STORAGE = "/var/lib/registry"
CERTS_DIR = "/etc/containerd/certs.d"
# Where a registry's API is when it is not ``https://<registry>`` (containerd's own default for
# docker.io, core/remotes/docker/config/hosts.go:100-103 at v2.2.0).
UPSTREAMS: Mapping[str, str] = {"docker.io": "https://registry-1.docker.io"}
# Disk the caches take once warm (the distinct images of docs/lab.md, compressed, with room):
# an estimate the preflight adds to its free-disk threshold while no cache volume exists yet.
CACHE_DISK_GIB = 4.0


@dataclass(frozen=True)
class Cache:
    """The pull-through cache of one registry."""

    registry: str

    @property
    def slug(self) -> str:
        return self.registry.replace(".", "-").replace(":", "-")

    @property
    def container(self) -> str:
        return f"gpu-platform-cache-{self.slug}"

    @property
    def volume(self) -> str:
        return f"{self.container}-data"

    @property
    def upstream(self) -> str:
        return UPSTREAMS.get(self.registry, f"https://{self.registry}")

    @property
    def endpoint(self) -> str:
        """The cache's address as a node on the kind network reaches it."""
        return f"http://{self.container}:{CACHE_PORT}"

    def environment(self) -> dict[str, str]:
        """The registry's configuration (environment overrides of the image's config file)."""
        return {
            "REGISTRY_HTTP_ADDR": f":{CACHE_PORT}",
            "REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY": CACHE_STORAGE,
            "REGISTRY_PROXY_REMOTEURL": self.upstream,
            "REGISTRY_PROXY_TTL": "0",
        }

    def config_hash(self, image: str = REGISTRY_IMAGE) -> str:
        """Changes whenever the container must be recreated (its volume is kept)."""
        spec = json.dumps({"image": image, "env": self.environment()}, sort_keys=True)
        return hashlib.sha256(spec.encode()).hexdigest()[:16]


def cache_for(registry: str) -> Cache:
    return Cache(registry)


def caches(registries: Iterable[str]) -> list[Cache]:
    return [Cache(registry) for registry in sorted(set(registries))]


def hosts_toml(cache: Cache) -> str:
    """``/etc/containerd/certs.d/<registry>/hosts.toml``: the cache first, the upstream last."""
    return (
        "# Written by gpu-platform (components/lab/registry_cache.py): pull through the lab's\n"
        "# cache; containerd falls back to the server when the cache fails.\n"
        f'server = "{cache.upstream}"\n'
        "\n"
        f'[host."{cache.endpoint}"]\n'
        '  capabilities = ["pull", "resolve"]\n'
    )


# ------------------------------------------------------------------ what the scripts receive


def caches_env(found: Sequence[Cache], network: str, image: str = REGISTRY_IMAGE) -> dict[str, str]:
    """The environment of ``scripts/management/registry-caches-up.sh``: one line per cache,
    ``container volume registry config-hash KEY=value...`` (the registry's settings)."""
    lines = []
    for cache in found:
        settings = " ".join(f"{k}={v}" for k, v in sorted(cache.environment().items()))
        lines.append(
            f"{cache.container} {cache.volume} {cache.registry} {cache.config_hash(image)} "
            f"{settings}"
        )
    return {
        "REGISTRY_IMAGE": image,
        "CACHES": "\n".join(lines),
        "DOCKER_NETWORK": network,
        "CACHE_LABEL": CACHE_LABEL,
        "CACHE_CONFIG_LABEL": CACHE_CONFIG_LABEL,
        "LAB_ONLY_LABEL": LAB_ONLY_LABEL,
    }


def mirrors_env(
    found: Sequence[Cache], nodes: Sequence[str], network: str, prepull: Sequence[str] = ()
) -> dict[str, str]:
    """The environment of ``scripts/management/node-mirrors.sh``: the nodes to wire, the caches
    to put on their network, each registry's hosts.toml (base64, one ``registry b64`` line per
    registry) and the images to pull ahead."""
    mirrors = [f"{c.registry} {base64.b64encode(hosts_toml(c).encode()).decode()}" for c in found]
    return {
        "NODES": " ".join(nodes),
        "CACHE_CONTAINERS": " ".join(c.container for c in found),
        "DOCKER_NETWORK": network,
        "CERTS_DIR": CERTS_DIR,
        "MIRRORS": "\n".join(mirrors),
        "PREPULL_IMAGES": " ".join(prepull),
    }


# ----------------------------------------------------------------------------- host facts


def cache_volumes_present(timeout: float = 10.0, docker: Sequence[str] = ("docker",)) -> bool:
    """Whether this host already holds the caches' volumes (their disk is then in use)."""
    try:
        proc = subprocess.run(
            [*docker, "volume", "ls", "-q", "--filter", f"label={CACHE_LABEL}"],
            capture_output=True,
            text=True,
            timeout=timeout,
            check=False,
        )
    except (OSError, subprocess.TimeoutExpired):
        return False
    return proc.returncode == 0 and bool(proc.stdout.strip())
