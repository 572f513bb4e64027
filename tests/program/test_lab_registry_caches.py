"""The lab stack under the mocks: one pull-through cache per registry of the derived image list,
every node (the kind node, each worker container) wired to every cache before anything pulls,
caches that no destroy removes, and worker containers that start before the management cluster
serves."""

from __future__ import annotations

import base64

from components.lab import lab_images, registry_cache
from components.substrate import NOTHING_TO_DELETE
from tests.support.harness import Recording

COMMAND = "command:local:Command"
CONTAINER = "docker:index/container:Container"


def _caches(lab: Recording) -> list[str]:
    lines = lab.named("management-registry-caches").inputs["environment"]["CACHES"].splitlines()
    return [line.split()[2] for line in lines]


def _mirrored(reg: object) -> dict[str, str]:
    env = reg.inputs["environment"]  # type: ignore[attr-defined]
    return {
        line.split(" ", 1)[0]: base64.b64decode(line.split(" ", 1)[1]).decode()
        for line in env["MIRRORS"].splitlines()
    }


def _waits_for(lab: Recording, name: str) -> set[str]:
    """Names of everything ``name`` transitively waits for (dependencies of any kind)."""
    by_urn = {r.urn: r for r in lab.resources}
    seen: set[str] = set()
    todo = [lab.named(name).urn]
    while todo:
        reg = by_urn[todo.pop()]
        deps = list(reg.dependencies)
        for urns in reg.property_dependencies.values():
            deps += urns
        if reg.provider_urn in by_urn:
            deps.append(reg.provider_urn)
        for dep in deps:
            if dep in by_urn and by_urn[dep].name not in seen:
                seen.add(by_urn[dep].name)
                todo.append(dep)
    return seen


def test_one_cache_per_registry_of_the_derived_list(lab: Recording) -> None:
    wanted = lab_images.registries(lab_images.pinned())
    assert wanted, "the derived image list is empty"
    assert _caches(lab) == wanted


def test_every_image_registry_has_a_cache(lab: Recording) -> None:
    # What a chart adding an image from a new registry breaks (after `make docs`).
    missing = {e.image for e in lab_images.pinned() if e.registry not in _caches(lab)}
    assert missing == set()


def test_destroy_leaves_the_caches(lab: Recording) -> None:
    caches = lab.named("management-registry-caches")
    assert caches.inputs["delete"] == NOTHING_TO_DELETE
    assert "volume rm" not in caches.inputs["create"]
    assert "rm -f" not in caches.inputs["delete"]


def test_every_node_pulls_through_every_cache(lab: Recording) -> None:
    expected = {
        registry: registry_cache.hosts_toml(registry_cache.cache_for(registry))
        for registry in _caches(lab)
    }
    wiring = [r for r in lab.of_type(COMMAND) if "MIRRORS" in r.inputs.get("environment", {})]
    nodes = {r.inputs["environment"]["NODES"] for r in wiring}
    workers = {r.inputs["name"] for r in lab.of_type(CONTAINER)}
    kind_node = f"{lab.named('management-kind-cluster').inputs['environment']['KIND_CLUSTER_NAME']}"
    assert nodes == {f"{kind_node}-control-plane", *workers}
    for reg in wiring:
        assert _mirrored(reg) == expected, reg.name


def test_the_management_cluster_pulls_nothing_before_its_node_is_wired(lab: Recording) -> None:
    for release in ("management-cert-manager", "management-kamaji", "management-metallb"):
        assert "management-kind-node-mirrors" in _waits_for(lab, release)
        assert "management-registry-caches" in _waits_for(lab, release)


def test_workers_start_at_once_and_pull_ahead_before_they_join(lab: Recording) -> None:
    prepull = lab_images.prepull_images(lab_images.pinned())
    for container in lab.of_type(CONTAINER):
        waits = _waits_for(lab, container.name)
        assert "management-kind-cluster" in waits
        assert "management-kind-node-mirrors" in waits
        assert not {"management-kamaji", "management-kamaji-ready", "management-metallb"} & waits
        images = lab.named(f"{container.name}-node-images")
        assert images.inputs["environment"]["PREPULL_IMAGES"].split() == prepull
        assert f"{container.name}-node-images" in _waits_for(lab, f"{container.name}-node-join")
