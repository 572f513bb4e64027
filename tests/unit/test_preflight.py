"""Lab host preflight: the pure decisions over a facts record, when it runs, and fact parsing."""

from __future__ import annotations

from dataclasses import replace
from pathlib import Path

import pytest

from components import preflight
from components.preflight import (
    GIB,
    HostFacts,
    PreflightError,
    check_lab_host,
    failures,
    should_run,
)

GOOD = HostFacts(
    system="Linux",
    docker_reachable=True,
    cpus=8,
    free_memory_bytes=16 * GIB,
    free_disk_bytes=100 * GIB,
    disk_path="/var/lib/docker",
    tools_found=frozenset({"docker", "kind", "kubectl"}),
    inotify_max_user_instances=8192,
)


def test_a_capable_linux_host_passes() -> None:
    assert failures(GOOD) == []


def test_exactly_the_minimum_passes() -> None:
    minimum = replace(GOOD, cpus=4, free_memory_bytes=8 * GIB, free_disk_bytes=20 * GIB)
    assert failures(minimum) == []
    assert failures(replace(GOOD, inotify_max_user_instances=512)) == []


@pytest.mark.parametrize(
    ("change", "expected"),
    [
        ({"system": "Darwin"}, "not Linux"),
        ({"docker_reachable": False, "docker_error": "permission denied"}, "not reachable"),
        ({"cpus": 2}, "has 2 CPUs and the lab needs at least 4"),
        ({"cpus": None}, "number of CPUs could not be determined"),
        ({"free_memory_bytes": 4 * GIB}, "Only 4.0 GiB of memory is free"),
        ({"free_memory_bytes": None}, "could not be read from /proc/meminfo"),
        ({"free_disk_bytes": 10 * GIB}, "Only 10.0 GiB is free under /var/lib/docker"),
        ({"free_disk_bytes": None}, "could not be determined"),
        ({"tools_found": frozenset({"docker", "kubectl"})}, "`kind` is not on PATH"),
        ({"tools_found": frozenset({"docker", "kind"})}, "`kubectl` is not on PATH"),
        ({"inotify_max_user_instances": 128}, "fs.inotify.max_user_instances is 128"),
    ],
)
def test_each_failure_is_one_sentence_with_a_fix(change: dict[str, object], expected: str) -> None:
    problems = failures(replace(GOOD, **change))
    assert len(problems) == 1, problems
    assert expected in problems[0]
    # One sentence: it names the problem, then the fix after a colon, and ends with a period.
    assert ": " in problems[0]
    assert problems[0].endswith(".")


def test_docker_missing_is_reported_once_not_also_as_unreachable() -> None:
    problems = failures(
        replace(GOOD, docker_reachable=False, tools_found=frozenset({"kind", "kubectl"}))
    )
    assert len(problems) == 1
    assert "`docker` is not on PATH" in problems[0]


def test_unknown_memory_on_a_non_linux_host_adds_nothing_beyond_the_linux_failure() -> None:
    problems = failures(replace(GOOD, system="Darwin", free_memory_bytes=None))
    assert len(problems) == 1
    assert "not Linux" in problems[0]


def test_every_problem_is_listed_at_once() -> None:
    bad = HostFacts(
        system="Windows",
        docker_reachable=False,
        cpus=2,
        free_memory_bytes=GIB,
        free_disk_bytes=GIB,
        tools_found=frozenset(),
    )
    problems = failures(bad)
    assert len(problems) == 7  # not Linux, 3 tools missing, CPUs, memory, disk


@pytest.mark.parametrize(
    ("dry_run", "environ", "expected"),
    [
        (False, {}, True),
        (True, {}, False),
        (False, {"GPU_PLATFORM_SKIP_PREFLIGHT": "1"}, False),
        (False, {"GPU_PLATFORM_SKIP_PREFLIGHT": "0"}, True),
        (True, {"GPU_PLATFORM_SKIP_PREFLIGHT": "1"}, False),
    ],
)
def test_when_it_runs(dry_run: bool, environ: dict[str, str], expected: bool) -> None:
    assert should_run(dry_run, environ) is expected


def _never() -> HostFacts:
    raise AssertionError("facts must not be gathered")


def test_preview_and_skip_never_gather_facts() -> None:
    assert check_lab_host(True, {}, gather=_never) is False
    assert check_lab_host(False, {"GPU_PLATFORM_SKIP_PREFLIGHT": "1"}, gather=_never) is False


def test_up_raises_listing_every_problem_and_how_to_skip() -> None:
    bad = replace(GOOD, cpus=2, free_disk_bytes=GIB)
    with pytest.raises(PreflightError) as error:
        check_lab_host(False, {}, gather=lambda: bad)
    message = str(error.value)
    assert "2 problems" in message
    assert "2 CPUs" in message
    assert "Only 1.0 GiB is free" in message
    assert "GPU_PLATFORM_SKIP_PREFLIGHT=1" in message


def test_up_on_a_good_host_runs_and_passes() -> None:
    assert check_lab_host(False, {}, gather=lambda: GOOD) is True


def test_mem_available_is_read_from_meminfo(tmp_path: Path) -> None:
    meminfo = tmp_path / "meminfo"
    meminfo.write_text("MemTotal:       32000000 kB\nMemAvailable:    8388608 kB\n")
    assert preflight._mem_available(meminfo) == 8 * GIB
    meminfo.write_text("MemTotal:       32000000 kB\n")
    assert preflight._mem_available(meminfo) is None
    assert preflight._mem_available(tmp_path / "absent") is None


def test_free_disk_walks_up_to_an_existing_directory(tmp_path: Path) -> None:
    free, path = preflight._free_disk(str(tmp_path / "not" / "there"))
    assert path == str(tmp_path)
    assert free is not None
    assert free > 0


def test_an_unknown_inotify_limit_is_not_a_failure() -> None:
    assert failures(replace(GOOD, inotify_max_user_instances=None)) == []


def test_gather_facts_never_raises() -> None:
    """On this machine (no Docker engine) gathering still returns a record."""
    facts = preflight.gather_facts(timeout=5)
    assert facts.system
    assert facts.cpus is None or facts.cpus > 0
