"""What a ``make lab`` costs with and without the registry caches: the estimated critical path of
a first and a second run, and the image pulls that leave the host.

Pure: works on ``graph.Node``s and the committed image list (``components.lab.lab_images``).

Every duration estimate (``graph.DURATIONS``) says how much of it is image pulls from the internet
(``pulls``, ``images``) and where they land (``where``). A scenario charges them:

* ``host`` pulls (kindest/node, the registry image) land in Docker's own image store, which
  ``make destroy`` keeps: charged on a cold host only, with or without caches;
* ``cluster`` pulls land in a node's containerd, which every ``make destroy`` empties:
  - **without caches** (today): from the internet on every run;
  - **with caches**: a tenant's images are pulled ahead by each worker's ``node-images``
    command, which its join waits for, so nothing on a tenant's path pulls; the management
    cluster's images are pulled ahead by ``management-kind-node-images`` while cert-manager
    installs, so only the releases that start with it pull on the path: cert-manager and the
    default etcd (the metrics stack and the backup store pull their own images through the
    caches when they start too). The pre-pull commands
    take the pulls they do: from the internet on the first run, from the caches on the second.
    ``late`` lists consumers that would start before their pre-pull finished (then the
    estimate would be optimistic); the report prints it.

A pull from a warm cache is charged ``CACHED_PULL_SECONDS`` per image: the cache serves the
blobs from its own volume, on the same host, over the docker bridge (no internet, TLS or
token round trip: distribution v3.0.0 ``registry/proxy/proxyblobstore.go:82-91`` serves
local blobs before it asks the upstream), so what is left is containerd's unpacking of
10-150 MB of compressed layers (gzip at roughly 100 MB/s or more, three layers at once:
containerd v2.2.0 ``internal/cri/config/config_unix.go:34`` ``MaxConcurrentDownloads: 3``)
and a few resolve requests over the bridge: about 0.1-1.5 s per image, charged as 2 s.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from benchmarks import graph
from components.lab import lab_images

if TYPE_CHECKING:
    from benchmarks.report import Check

CACHED_PULL_SECONDS = 2.0
# The management cluster's releases whose pulls are not ahead even with caches: they start
# with the management pre-pull, not after it.
NOT_PULLED_AHEAD = ("*cert-manager*", "*kamaji-etcd*", "*metallb*", "*metrics*", "*backup-store*")
MANAGEMENT_PREFIX = "management-"
MANAGEMENT_PREPULL = "*kind-node-images*"
WORKER_PREPULL = "*node-images*"
CACHE_COMMANDS = ("*registry-caches*", "*node-mirrors*", "*node-images*")
SECOND_RUN_GOAL_SECONDS = 300.0


@dataclass(frozen=True)
class Scenario:
    name: str
    caches: bool
    warm: bool  # a second run: the host's images and (with caches) the caches are warm


SCENARIOS = (
    Scenario("today, first run", caches=False, warm=False),
    Scenario("today, second run", caches=False, warm=True),
    Scenario("caches, first run", caches=True, warm=False),
    Scenario("caches, second run", caches=True, warm=True),
)


def _matches(node: graph.Node, globs: Sequence[str]) -> bool:
    return any(graph.fnmatchcase(node.name, glob) for glob in globs)


def _on_management(node: graph.Node) -> bool:
    """Whether the resource runs on the management cluster (its own, or through its provider:
    a tenant's control plane does)."""
    return node.name.startswith(MANAGEMENT_PREFIX) or node.provider.rsplit("::", 1)[-1].startswith(
        MANAGEMENT_PREFIX
    )


def _tenant_of(index: Mapping[str, graph.Node], node: graph.Node) -> str | None:
    return graph.owner(index, node.urn, graph.TENANT_SUFFIX)


def weights(nodes: Sequence[graph.Node], scenario: Scenario) -> dict[str, float]:
    """Seconds per resource (URN) in ``scenario``."""
    index = {n.urn: n for n in nodes}
    result: dict[str, float] = {}
    # What each pre-pull pulls: the cluster pulls of the resources it stands in for.
    ahead_pulls: dict[str | None, float] = {}
    ahead_images: dict[str | None, int] = {}
    for node in nodes:
        row = graph.estimate(node)
        work = row.seconds - row.pulls
        if not node.custom:
            result[node.urn] = 0.0
            continue
        if _matches(node, CACHE_COMMANDS) and not scenario.caches:
            result[node.urn] = 0.0  # today has no caches, mirrors or pre-pulls
            continue
        if row.where == "host":
            result[node.urn] = work + (0.0 if scenario.warm else row.pulls)
        elif row.where == "cluster":
            pulled_ahead = scenario.caches and not (
                _on_management(node) and _matches(node, NOT_PULLED_AHEAD)
            )
            if pulled_ahead:
                key = None if _on_management(node) else _tenant_of(index, node)
                ahead_pulls[key] = ahead_pulls.get(key, 0.0) + row.pulls
                ahead_images[key] = ahead_images.get(key, 0) + row.images
                result[node.urn] = work
            elif scenario.caches and scenario.warm:
                result[node.urn] = work + row.images * CACHED_PULL_SECONDS
            else:
                result[node.urn] = row.seconds
        else:
            result[node.urn] = row.seconds
    if scenario.caches:
        for node in nodes:
            if not node.custom or not _matches(node, (WORKER_PREPULL,)):
                continue
            key = None if _matches(node, (MANAGEMENT_PREPULL,)) else _tenant_of(index, node)
            pulls = (
                ahead_images.get(key, 0) * CACHED_PULL_SECONDS
                if scenario.warm
                else ahead_pulls.get(key, 0.0)
            )
            result[node.urn] = graph.estimate(node).seconds + pulls
    return result


@dataclass(frozen=True)
class Run:
    scenario: Scenario
    path: graph.CriticalPath
    late: tuple[str, ...] = ()  # consumers that start before their pre-pull finished


def _late(nodes: Sequence[graph.Node], sched: graph.Schedule) -> tuple[str, ...]:
    """Resources with pulled-ahead images that start before their node's pre-pull is done."""
    index = {n.urn: n for n in nodes}
    ahead: dict[str | None, float] = {}
    for node in nodes:
        if node.custom and _matches(node, (WORKER_PREPULL,)):
            key = None if _matches(node, (MANAGEMENT_PREPULL,)) else _tenant_of(index, node)
            ahead[key] = max(ahead.get(key, 0.0), sched.finish[node.urn])
    late = []
    for node in nodes:
        row = graph.estimate(node)
        if not node.custom or row.where != "cluster":
            continue
        if _on_management(node) and _matches(node, NOT_PULLED_AHEAD):
            continue
        key = None if _on_management(node) else _tenant_of(index, node)
        if key in ahead and sched.start[node.urn] < ahead[key]:
            late.append(node.name)
    return tuple(sorted(late))


def runs(nodes: Sequence[graph.Node]) -> list[Run]:
    found = []
    for scenario in SCENARIOS:
        table = weights(nodes, scenario)
        sched = graph.schedule(nodes, lambda node, table=table: table[node.urn])
        late = _late(nodes, sched) if scenario.caches else ()
        found.append(Run(scenario, sched.path, late))
    return found


# ---------------------------------------------------------------------------------- pulls


@dataclass(frozen=True)
class Pulls:
    """Image pulls that leave the host per ``make lab``."""

    today: int  # every run: each node pulls what it runs
    first: int  # with caches, cold: each distinct image once
    second: int = 0  # with caches, warm: none
    distinct: int = 0
    nodes: Mapping[str, int] = field(default_factory=dict)  # workers per tenant


def pulls(images: Sequence[lab_images.LabImage], workers: Mapping[str, int]) -> Pulls:
    """Pulls of the cluster images (the host's own, kindest/node and the registry image, are
    kept by Docker in both cases and left out): today the kind node pulls each management image
    and each tenant's workers each image they run (a DaemonSet's on every worker, another's on
    one); with caches each distinct image leaves the host once."""
    today = 0
    for entry in images:
        if entry.cluster == lab_images.MANAGEMENT:
            today += 1
        else:
            today += sum(count if entry.every_node else 1 for count in workers.values())
    distinct = len({entry.image for entry in images})
    return Pulls(today=today, first=distinct, second=0, distinct=distinct, nodes=dict(workers))


def workers_per_tenant(nodes: Sequence[graph.Node]) -> dict[str, int]:
    """Worker containers per tenant component (by the tenant's name)."""
    index = {n.urn: n for n in nodes}
    found: dict[str, int] = {}
    for node in nodes:
        if node.type == "docker:index/container:Container":
            tenant = _tenant_of(index, node)
            name = index[tenant].name if tenant else "?"
            found[name] = found.get(name, 0) + 1
    return found


# --------------------------------------------------------------------------------- report


@dataclass(frozen=True)
class BringUp:
    stack: str
    runs: tuple[Run, ...]
    pulls: Pulls

    def total(self, name: str) -> float:
        return next(r.path.total for r in self.runs if r.scenario.name == name)

    @property
    def second_run_within_goal(self) -> bool:
        return self.total("caches, second run") <= SECOND_RUN_GOAL_SECONDS


def bring_up(stack: str, nodes: Sequence[graph.Node]) -> BringUp:
    found = workers_per_tenant(nodes)
    return BringUp(stack, tuple(runs(nodes)), pulls(lab_images.pinned(), found))


def to_json(result: BringUp) -> dict[str, object]:
    return {
        "stack": result.stack,
        "cached_pull_seconds": CACHED_PULL_SECONDS,
        "critical_path_seconds": {r.scenario.name: r.path.total for r in result.runs},
        "late_pre_pulls": {r.scenario.name: list(r.late) for r in result.runs if r.late},
        "pulls_leaving_host": {
            "today_per_run": result.pulls.today,
            "caches_first_run": result.pulls.first,
            "caches_second_run": result.pulls.second,
            "distinct_images": result.pulls.distinct,
            "workers_per_tenant": dict(result.pulls.nodes),
        },
        "second_run_goal_seconds": SECOND_RUN_GOAL_SECONDS,
        "second_run_within_goal": result.second_run_within_goal,
    }


def goal_check(result: BringUp) -> Check:
    from benchmarks.report import Check

    second = result.total("caches, second run")
    return Check(
        "second make lab within 5 minutes",
        result.second_run_within_goal,
        f"{second:g} s estimated with warm caches (goal <= {SECOND_RUN_GOAL_SECONDS:g} s)",
    )


def render(result: BringUp) -> list[str]:
    """The report's bring-up section."""
    from benchmarks.report import table

    by_name = {r.scenario.name: r for r in result.runs}
    rows = []
    for run_name in ("first run", "second run"):
        today = by_name[f"today, {run_name}"].path
        cached = by_name[f"caches, {run_name}"].path
        pulls_today = result.pulls.today
        pulls_cached = result.pulls.first if run_name == "first run" else result.pulls.second
        rows.append(
            [
                run_name,
                today.total,
                cached.total,
                today.total - cached.total,
                pulls_today,
                pulls_cached,
            ]
        )
    workers = ", ".join(f"{name} {count}" for name, count in sorted(result.pulls.nodes.items()))
    lines = [
        f"4. make lab with and without the registry caches (stack {result.stack}: "
        f"{result.pulls.distinct} distinct images, workers: {workers}; a warm-cache pull "
        f"charged {CACHED_PULL_SECONDS:g} s per image, benchmarks/bringup.py says why)",
        table(
            [
                "run",
                "path s today",
                "path s with caches",
                "saved s",
                "pulls leaving the host today",
                "with caches",
            ],
            rows,
        ),
    ]
    for run in result.runs:
        if run.late:
            lines.append(f"  {run.scenario.name}: pre-pull late for {', '.join(run.late)}")
    second = by_name["caches, second run"].path
    verdict = "met" if result.second_run_within_goal else "MISSED"
    lines.append(
        f"  second run with caches: {second.total:g} s estimated, goal <= "
        f"{SECOND_RUN_GOAL_SECONDS:g} s: {verdict}"
    )
    lines.append("critical path of the second run with caches:")
    from benchmarks.report import _chain

    lines.append(_chain(second))
    return lines
