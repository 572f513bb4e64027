"""The preflight counts the registry caches' disk while they do not exist yet, and not once
they do (their images are then already on the disk)."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

from components.lab import registry_cache
from components.lab.preflight import GIB, HostFacts, Requirements, failures

FACTS = HostFacts(
    system="Linux",
    docker_reachable=True,
    cpus=8,
    free_memory_bytes=16 * GIB,
    free_disk_bytes=22 * GIB,
    disk_path="/var/lib/docker",
    tools_found=frozenset(Requirements().tools),
    tool_versions={},
)


def _disk(facts: HostFacts) -> list[str]:
    return [p for p in failures(facts, replace(Requirements(), tools=())) if "is free under" in p]


def test_a_first_run_needs_room_for_the_caches() -> None:
    problems = _disk(replace(FACTS, registry_caches_present=False))
    needed = 20 + registry_cache.CACHE_DISK_GIB
    assert problems == [
        f"Only 22.0 GiB is free under /var/lib/docker (Docker's data directory) and the lab "
        f"needs {needed:g} GiB ({registry_cache.CACHE_DISK_GIB:g} of them for the registry "
        "caches it creates): free space (e.g. `docker system prune`) or move Docker's "
        "data-root to a larger disk."
    ]


def test_warm_caches_need_no_more_room() -> None:
    assert _disk(replace(FACTS, registry_caches_present=True)) == []
    assert _disk(FACTS) == []  # not looked at


def test_the_caches_volumes_are_looked_up_by_their_label(tmp_path: Path) -> None:

    root = tmp_path
    stub = root / "docker"
    stub.write_text(
        "#!/bin/sh\n"
        f'[ "$*" = "volume ls -q --filter label={registry_cache.CACHE_LABEL}" ] && echo v\n'
    )
    stub.chmod(0o755)
    assert registry_cache.cache_volumes_present(docker=(str(stub),))
    (root / "empty").write_text("#!/bin/sh\nexit 0\n")
    (root / "empty").chmod(0o755)
    assert not registry_cache.cache_volumes_present(docker=(str(root / "empty"),))
    assert not registry_cache.cache_volumes_present(docker=(str(root / "missing"),))
