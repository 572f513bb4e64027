"""Fixtures and reporting for the acceptance suite (needs a deployed stack).

Run after ``pulumi up -s lab``::

    GPU_PLATFORM_STACK=lab .venv/bin/pytest tests/acceptance --junitxml reports/acceptance.xml

The stack name comes from env ``GPU_PLATFORM_STACK`` (default ``lab``). Outputs are read with
``pulumi stack output --json --show-secrets`` (the operator's backend and passphrase environment
apply); expectations come from ``Pulumi.<stack>.yaml``. Without a live stack every test is
skipped with one line saying what is missing. The run ends with a table (id, verdict, seconds,
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

from tests.acceptance.kube import (
    CLEANUP_TIMEOUT,
    CleanupError,
    UnreachableError,
    cleanup_namespace,
    connect,
    create_namespace,
    create_pod,
    probe,
)
from tests.acceptance.live import MANAGEMENT, LiveStack, Marker
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
    StackUnavailableError,
    check_outputs_match_config,
    load_platform,
    parse_outputs,
    read_outputs,
    stack_name,
)
from tests.acceptance.workloads import pod_body, random_suffix

REPORT_ENV = "GPU_PLATFORM_ACCEPTANCE_JSON"
ROWS = pytest.StashKey[dict[str, ResultRow]]()
STARTED = pytest.StashKey[str]()
EVIDENCE = pytest.StashKey[Evidence]()


def _now() -> str:
    return dt.datetime.now(dt.UTC).isoformat(timespec="seconds")


@pytest.fixture(scope="session")
def live() -> Iterator[LiveStack]:
    """The deployed stack, or a skip saying what is missing (no CLI, no outputs, no API)."""
    stack = stack_name()
    try:
        raw = read_outputs(stack)
        outputs = parse_outputs(raw, stack)
        platform = load_platform(stack)
    except StackUnavailableError as exc:
        pytest.skip(str(exc))
    problems = check_outputs_match_config(outputs, platform)
    if problems:
        raise OutputsError("; ".join(problems))
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
        if len(unreachable) == len(clusters):
            pytest.skip(
                f"no API server of stack {stack!r} answers from here: "
                + "; ".join(unreachable.values())
            )
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
            create_pod(cluster, namespace, pod_body("marker", live.run_id))
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
    config.addinivalue_line(
        "markers", "tc(id): acceptance test id (TC-01 ...) for the report table"
    )
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
