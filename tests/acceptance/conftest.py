"""Fixtures and reporting for the acceptance suite (needs a deployed stack).

Run after ``pulumi up -s lab``::

    GPU_PLATFORM_STACK=lab .venv/bin/pytest tests/acceptance --junitxml reports/acceptance.xml

The stack name comes from env ``GPU_PLATFORM_STACK`` (default ``lab``). Outputs are read with
``pulumi stack output --json --show-secrets`` (the operator's backend and passphrase environment
apply); expectations come from ``Pulumi.<stack>.yaml``. When no stack is deployed (no Pulumi CLI,
no such stack, no outputs) every test is skipped with one line saying which; once outputs exist,
anything that stops the suite (the CLI failing otherwise, no API server answering, outputs that
do not match the stack file) fails every test with one line saying why, so a broken lab never
reports success. The run ends with a table (id, verdict, seconds,
evidence) and writes the evidence to ``reports/acceptance.json`` (or env
``GPU_PLATFORM_ACCEPTANCE_JSON``).
"""

from __future__ import annotations

import datetime as dt
import os
from collections.abc import Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance.gpu_live import GpuTarget, choose_card
from tests.acceptance.gpu_plan import GpuPlan, no_gpu_pool_reason, plan_gpu
from tests.acceptance.gpu_workloads import probe_image
from tests.acceptance.hami_evidence import HAMI_NODE_REGISTER, EvidenceError, parse_node_register
from tests.acceptance.kube import (
    CLEANUP_TIMEOUT,
    CleanupError,
    UnreachableError,
    cleanup_namespace,
    connect,
    create_namespace,
    create_pod,
    list_nodes,
    pool_nodes,
    probe,
)
from tests.acceptance.live import MANAGEMENT, LiveStack, Marker, Target
from tests.acceptance.lookups import HAMI_WEBHOOK_IGNORE
from tests.acceptance.report import (
    Evidence,
    ResultRow,
    all_skipped,
    first_line,
    format_table,
    report_document,
    write_report,
)
from tests.acceptance.stack import (
    OutputsError,
    SharingPlan,
    StackBrokenError,
    StackUnavailableError,
    deployed_stack,
    plan_sharing,
    stack_name,
    unreachable_failure,
)
from tests.acceptance.workloads import HOSTNAME_LABEL, pod_body, random_suffix

REPORT_ENV = "GPU_PLATFORM_ACCEPTANCE_JSON"
ROWS = pytest.StashKey[dict[str, ResultRow]]()
STARTED = pytest.StashKey[str]()
EVIDENCE = pytest.StashKey[Evidence]()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


def marker_pod(run_id: str) -> dict[str, Any]:
    """TC-07/08's marker: not sent to HAMi's webhook (visibility is under test, and a
    Konnectivity outage, which breaks the webhook call, is TC-00's and TC-03's finding)."""
    return pod_body("marker", run_id, labels=HAMI_WEBHOOK_IGNORE)


@pytest.fixture(scope="session")
def live() -> Iterator[LiveStack]:
    """The deployed stack; a skip only when none is deployed (no CLI, no stack, no outputs),
    a failure when it is deployed but cannot be reached or checked."""
    stack = stack_name()
    try:
        outputs, platform = deployed_stack(stack)
    except StackUnavailableError as exc:
        pytest.skip(str(exc))
    except (StackBrokenError, OutputsError) as exc:
        pytest.fail(f"{type(exc).__name__}: {exc}", pytrace=False)
    clusters = {MANAGEMENT: connect(MANAGEMENT, outputs.management_kubeconfig)}
    for name, tenant in outputs.tenants.items():
        clusters[name] = connect(name, tenant.kubeconfig)
    try:
        versions: dict[str, str] = {}
        unreachable: dict[str, str] = {}
        for name, cluster in clusters.items():
            try:
                versions[name] = probe(cluster)
            except UnreachableError as exc:
                unreachable[name] = str(exc)
        failure = unreachable_failure(stack, unreachable, len(clusters))
        if failure is not None:
            pytest.fail(failure, pytrace=False)
        yield LiveStack(
            stack=stack,
            platform=platform,
            outputs=outputs,
            management=clusters[MANAGEMENT],
            tenants={n: c for n, c in clusters.items() if n != MANAGEMENT},
            run_id=random_suffix(8),
            versions_seen=versions,
            unreachable=unreachable,
        )
    finally:
        for cluster in clusters.values():
            cluster.close()


@pytest.fixture(scope="session")
def markers(live: LiveStack) -> Iterator[dict[str, Marker]]:
    """One marker namespace + sleeping pod per reachable tenant (TC-07/08 look for them)."""
    created: dict[str, Marker] = {}
    try:
        for name, cluster in live.tenants.items():
            if name in live.unreachable:
                continue
            namespace = create_namespace(cluster, live.run_id)
            created[name] = Marker(namespace, f"{namespace}/marker")
            # Not sent to HAMi's webhook: TC-07/08 are about visibility, and a Konnectivity
            # outage (which breaks the webhook call) is TC-00's and TC-03's finding.
            create_pod(cluster, namespace, marker_pod(live.run_id))
        yield created
    finally:
        failures = []
        for name, marker in created.items():
            try:
                cleanup_namespace(live.tenants[name], marker.namespace, CLEANUP_TIMEOUT)
            except CleanupError as exc:
                failures.append(str(exc))
        if failures:
            raise CleanupError("; ".join(failures))


@pytest.fixture(scope="session")
def plan(live: LiveStack) -> SharingPlan:
    """The pool TC-04 ... TC-06 run on. In the lab such a pool must exist (the lab is built for
    the report's scenario), so its absence fails; a prod stack without one skips these tests."""
    found = plan_sharing(live.platform)
    if found is None:
        why = (
            "no tenant pool has nodes with exactly one card of >= 80000 MiB and 100 compute "
            "units and >= 4 slots among the tenants HAMi shares cards for (gpuSharing: hami): "
            "the report's sharing scenario cannot run on this stack"
        )
        if live.platform.mode == "lab":
            pytest.fail(why, pytrace=False)
        pytest.skip(why)
    return found


def pool_target(live: LiveStack, tenant: str, pool: str) -> Target:
    """The first node (by name) of a tenant's pool and its registered cards, through the tenant's
    API; a failure when the pool has no node or the node no readable card registration."""
    cluster = live.tenant(tenant)
    nodes = list_nodes(cluster)
    named = live.outputs.tenants[tenant].pools[pool].nodes
    found, _ = pool_nodes(pool, named, nodes)
    if not found:
        pytest.fail(f"{tenant}: no node of pool {pool} is listed by its API")
    node = sorted(found, key=lambda n: n.name)[0]
    raw = node.annotations.get(HAMI_NODE_REGISTER)
    if raw is None:
        pytest.fail(f"{node.name} has no {HAMI_NODE_REGISTER}: HAMi cannot schedule on it")
    try:
        cards = parse_node_register(raw)
    except EvidenceError as exc:
        pytest.fail(f"{node.name}: {exc}")
    # Pin only when the tenant has other nodes a pod could go to (the lab has one).
    selector = (
        {HOSTNAME_LABEL: node.labels.get(HOSTNAME_LABEL, node.name)} if len(nodes) > 1 else None
    )
    return Target(cluster=cluster, node=node.name, node_selector=selector, cards=cards)


@pytest.fixture(scope="session")
def target(live: LiveStack, plan: SharingPlan) -> Target:
    """The node and card of the sharing scenario (the first node of the plan's pool)."""
    return pool_target(live, plan.tenant, plan.pool)


@pytest.fixture(scope="session")
def gpu_plan(live: LiveStack) -> GpuPlan:
    """The real-GPU pool TC-11 ... TC-15 run on. A skip only when the stack declares none
    (``deviceMode: nvidia``); once one is declared, anything that stops the tests fails."""
    found = plan_gpu(live.platform)
    if found is None:
        pytest.skip(no_gpu_pool_reason(live.stack))
    return found


@pytest.fixture(scope="session")
def gpu_target(live: LiveStack, gpu_plan: GpuPlan) -> GpuTarget:
    """The node, card and probe image of TC-11 ... TC-15: the first healthy registered card (by
    index) of the first node of the GPU pool."""
    try:
        image = probe_image()
    except ValueError as exc:
        pytest.fail(str(exc), pytrace=False)
    where = pool_target(live, gpu_plan.tenant, gpu_plan.pool)
    card = choose_card(where.cards)
    if card is None:
        pytest.fail(f"{where.node}: no healthy NVIDIA card is registered", pytrace=False)
    return GpuTarget(where=where, card=card, image=image)


@pytest.fixture
def evidence(request: pytest.FixtureRequest) -> Evidence:
    """What this test saw; shown in the final table and stored in the JSON report."""
    marker = request.node.get_closest_marker("tc")
    tc_id = str(marker.args[0]) if marker else request.node.name
    record = Evidence(tc_id)
    request.node.stash[EVIDENCE] = record
    return record


# ------------------------------------------------------------------------------- reporting


def pytest_configure(config: pytest.Config) -> None:
    # The marker tc(id) itself is registered in pyproject.toml (other suites import these
    # modules too).
    config.stash[ROWS] = {}
    config.stash[STARTED] = _now()


def _detail(report: pytest.TestReport, call: pytest.CallInfo[Any]) -> str:
    if report.skipped and isinstance(report.longrepr, tuple):
        return first_line(str(report.longrepr[2]))
    if report.failed and call.excinfo is not None:
        return first_line(call.excinfo.exconly())
    return ""


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[Any]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report = yield
    marker = item.get_closest_marker("tc")
    if marker is not None:
        rows = item.config.stash.setdefault(ROWS, {})
        row = rows.setdefault(item.nodeid, ResultRow(tc_id=str(marker.args[0]), nodeid=item.nodeid))
        row.merge_phase(report.when, report.outcome, report.duration, _detail(report, call))
        record = item.stash.get(EVIDENCE, None)
        if record is not None:
            row.facts = record.facts
            row.summary = record.one_line
    return report


def _report_path(config: pytest.Config) -> Path:
    override = os.environ.get(REPORT_ENV, "").strip()
    return Path(override) if override else config.rootpath / "reports" / "acceptance.json"


def pytest_terminal_summary(
    terminalreporter: pytest.TerminalReporter, exitstatus: int, config: pytest.Config
) -> None:
    rows = list(config.stash.get(ROWS, {}).values())
    if not rows:
        return
    stack = stack_name()
    if all_skipped(rows):
        reasons = sorted({row.detail for row in rows if row.detail})
        terminalreporter.write_line(
            f"acceptance ({stack}): all {len(rows)} tests skipped: {' | '.join(reasons)}"
        )
        return
    terminalreporter.section(f"acceptance evidence (stack {stack})")
    for line in format_table(rows):
        terminalreporter.write_line(line)
    path = _report_path(config)
    write_report(
        path,
        report_document(rows, stack=stack, started=config.stash[STARTED], finished=_now()),
    )
    terminalreporter.write_line(f"evidence: {path}")
