"""The caches' pure decisions: which registry an image comes from, one cache per registry, the
hosts.toml each node gets (the cache first, the upstream as containerd's fallback) and the
registry settings (its upstream, no expiry), and the derived image list's own rules."""

from __future__ import annotations

import base64
import tomllib

import pytest

from components.lab import lab_images, registry_cache
from components.lab.lab_images import LabImage


@pytest.mark.parametrize(
    ("image", "registry"),
    [
        # distribution/reference v0.6.0 normalize.go:126-160 (splitDockerDomain), case by case.
        ("busybox:1.37.0", "docker.io"),
        ("python:3.12.8-alpine3.21", "docker.io"),
        ("clastix/kamaji:26.8.2-edge", "docker.io"),
        ("docker.io/projecthami/hami:v2.10.0", "docker.io"),
        ("index.docker.io/library/busybox:1", "docker.io"),
        ("quay.io/calico/node:v3.32.1", "quay.io"),
        ("registry.k8s.io/kas-network-proxy/proxy-agent:v0.35.0", "registry.k8s.io"),
        ("localhost/thing:1", "localhost"),
        ("myhost:5000/thing:1", "myhost:5000"),
        ("ghcr.io/org/img@sha256:" + "a" * 64, "ghcr.io"),
    ],
)
def test_registry_of_follows_dockers_normalisation(image: str, registry: str) -> None:
    assert lab_images.registry_of(image) == registry


def test_hosts_toml_puts_the_cache_first_and_the_upstream_last() -> None:
    for registry, upstream in [
        ("docker.io", "https://registry-1.docker.io"),
        ("quay.io", "https://quay.io"),
    ]:
        cache = registry_cache.cache_for(registry)
        parsed = tomllib.loads(registry_cache.hosts_toml(cache))
        assert parsed["server"] == upstream
        assert parsed["host"] == {
            f"http://{cache.container}:5000": {"capabilities": ["pull", "resolve"]}
        }


def test_a_cache_never_expires_and_proxies_its_own_registry() -> None:
    env = registry_cache.cache_for("registry.k8s.io").environment()
    assert env["REGISTRY_PROXY_REMOTEURL"] == "https://registry.k8s.io"
    assert env["REGISTRY_PROXY_TTL"] == "0"
    assert env["REGISTRY_STORAGE_FILESYSTEM_ROOTDIRECTORY"] == "/var/lib/registry"


def test_one_cache_per_registry_with_distinct_names() -> None:
    found = registry_cache.caches(["quay.io", "docker.io", "quay.io"])
    assert [c.registry for c in found] == ["docker.io", "quay.io"]
    assert len({c.container for c in found}) == len({c.volume for c in found}) == 2


def test_the_container_is_recreated_when_its_image_or_settings_change() -> None:
    cache = registry_cache.cache_for("quay.io")
    assert cache.config_hash("registry:3.0.0") != cache.config_hash("registry:3.0.1")
    assert cache.config_hash() != registry_cache.cache_for("docker.io").config_hash()


def test_mirrors_env_carries_every_hosts_toml() -> None:
    found = registry_cache.caches(["docker.io", "quay.io"])
    env = registry_cache.mirrors_env(found, ["a", "b"], "kind", ["x:1"])
    lines = dict(line.split(" ", 1) for line in env["MIRRORS"].splitlines())
    assert {r: base64.b64decode(b).decode() for r, b in lines.items()} == {
        c.registry: registry_cache.hosts_toml(c) for c in found
    }
    assert env["NODES"] == "a b"
    assert env["PREPULL_IMAGES"] == "x:1"


def test_derive_counts_a_daemonset_image_on_every_node_and_adds_the_controllers() -> None:
    deployment = {
        "kind": "Deployment",
        "spec": {"template": {"spec": {"containers": [{"image": "quay.io/a/b:1"}]}}},
    }
    daemonset = {
        "kind": "DaemonSet",
        "spec": {
            "template": {
                "spec": {
                    "initContainers": [{"image": "ghcr.io/i/init:2"}],
                    "containers": [{"image": "quay.io/a/b:1"}],
                }
            }
        },
    }
    crd_default = {"kind": "CustomResourceDefinition", "spec": {"image": "nowhere.io/x:1"}}
    placed = [
        ("management", deployment),
        ("tenant-a", deployment),
        ("tenant-b", daemonset),
        ("management", crd_default),
    ]
    images = lab_images.derive(placed, ["v1.35.0"], "v3.32.1")
    assert LabImage("management", "quay.io/a/b:1") in images
    assert LabImage("tenant", "quay.io/a/b:1", every_node=True) in images
    assert LabImage("tenant", "ghcr.io/i/init:2", every_node=True) in images
    assert "nowhere.io" not in lab_images.registries(images)
    names = {e.image for e in images}
    assert "registry.k8s.io/kube-apiserver:v1.35.0" in names
    assert "registry.k8s.io/kas-network-proxy/proxy-agent:v0.35.0" in names
    assert "quay.io/calico/node:v3.32.1" in names
    assert lab_images.from_json(lab_images.to_json(images)) == images


def test_only_images_with_a_tag_or_digest_are_pulled_ahead() -> None:
    images = [
        LabImage("tenant", "registry.k8s.io/coredns/coredns", source="kamaji"),
        LabImage("tenant", "quay.io/calico/node:v3.32.1", True),
        LabImage("tenant", "ghcr.io/x/y@sha256:" + "b" * 64),
        LabImage("management", "quay.io/metallb/speaker:v0.16.1", True),
    ]
    assert lab_images.prepull_images(images) == [
        "ghcr.io/x/y@sha256:" + "b" * 64,
        "quay.io/calico/node:v3.32.1",
    ]


def test_the_docs_block_is_replaced_between_its_markers() -> None:
    doc = f"intro\n{lab_images.DOC_BEGIN}\nold\n{lab_images.DOC_END}\noutro\n"
    block = lab_images.markdown([LabImage("tenant", "quay.io/a/b:1")])
    replaced = lab_images.replace_block(doc, block)
    assert replaced.startswith("intro\n")
    assert replaced.endswith("\noutro\n")
    assert "old" not in replaced
    assert "`gpu-platform-cache-quay-io`" in replaced
    with pytest.raises(ValueError, match="marker"):
        lab_images.replace_block("no markers", block)
