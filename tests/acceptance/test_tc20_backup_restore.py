"""TC-20: a tenant loses an object and gets it back from its backup (the restore drill).

In the first backed-up tenant: create a marker ConfigMap with a unique value, take a backup
(``scripts/backups.py backup``: a Job from the tenant's own ``datastore-backup`` CronJob), delete
the marker, restore that backup by name (``scripts/backups.py restore --yes``: stops the tenant's
API server, replaces its keys, checks them, starts it again), and read the marker back through
the tenant's API with its value. Each step is timed; the restore's downtime is measured from
outside as the span in which the tenant's ``/version`` did not answer. The other tenants must
answer throughout.

Opt-in with ``GPU_PLATFORM_ACCEPTANCE_RESTORE=1``: the restore takes the tenant's API down for a
minute or two and rolls every object of it back to the backup. Skipped without a deployed stack,
like every live test.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import threading
import time
from pathlib import Path
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.acceptance.kube import API_ERRORS, describe_error
from tests.acceptance.live import LiveStack
from tests.acceptance.report import Evidence

OPT_IN_ENV = "GPU_PLATFORM_ACCEPTANCE_RESTORE"
STEP_TIMEOUT_SECONDS = 30 * 60
REPO = Path(__file__).resolve().parents[2]
MARKER_NAMESPACE = "default"

pytestmark = [pytest.mark.live, pytest.mark.timeout(3 * STEP_TIMEOUT_SECONDS)]


def _backups(live: LiveStack, *args: str) -> tuple[list[dict[str, Any]], float]:
    """Run scripts/backups.py with the management kubeconfig on stdin; its JSON summaries and
    how long it took. Fails the test with the tool's own message."""
    started = time.monotonic()
    done = subprocess.run(
        [sys.executable, "scripts/backups.py", *args, "--kubeconfig-stdin"],
        cwd=REPO,
        input=live.outputs.management_kubeconfig,
        capture_output=True,
        text=True,
        timeout=STEP_TIMEOUT_SECONDS,
        check=False,
    )
    seconds = time.monotonic() - started
    if done.returncode != 0:
        pytest.fail(f"backups.py {' '.join(args)}: {done.stderr.strip()[-1500:]}")
    summaries = [json.loads(line) for line in done.stdout.splitlines() if line.startswith("{")]
    return summaries, seconds


class _Downtime:
    """Samples a cluster's /version every second in a thread: the longest run of failures."""

    def __init__(self, read: Any) -> None:
        self._read = read
        self._stop = threading.Event()
        self.samples: list[tuple[float, bool]] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        while not self._stop.is_set():
            try:
                self._read()
                ok = True
            except API_ERRORS:
                ok = False
            self.samples.append((time.monotonic(), ok))
            self._stop.wait(1.0)

    def __enter__(self) -> _Downtime:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=10)

    def longest_gap(self) -> float:
        longest, start = 0.0, None
        for when, ok in self.samples:
            if not ok and start is None:
                start = when
            elif ok and start is not None:
                longest, start = max(longest, when - start), None
        if start is not None and self.samples:
            longest = max(longest, self.samples[-1][0] - start)
        return longest

    def failures(self) -> int:
        return sum(1 for _, ok in self.samples if not ok)


@pytest.mark.tc("TC-20")
def test_a_deleted_object_comes_back_from_the_tenants_backup(
    live: LiveStack, evidence: Evidence
) -> None:
    if os.environ.get(OPT_IN_ENV) != "1":
        pytest.skip(f"{OPT_IN_ENV}=1 not set (opt-in: stops a tenant's API server for a restore)")
    backed_up = [t.name for t in live.platform.tenants if t.backups.enabled]
    if not backed_up:
        pytest.skip("no tenant has backups enabled")
    tenant = backed_up[0]
    others = [t.name for t in live.platform.tenants if t.name != tenant]
    cluster = live.tenant(tenant)
    marker_name = f"tc20-marker-{live.run_id}"
    value = f"restored-{live.run_id}-{time.time_ns()}"
    steps: dict[str, float] = {}

    started = time.monotonic()
    cluster.core.create_namespaced_config_map(
        MARKER_NAMESPACE,
        k8s.V1ConfigMap(metadata=k8s.V1ObjectMeta(name=marker_name), data={"value": value}),
    )
    steps["create marker"] = time.monotonic() - started

    summaries, steps["backup"] = _backups(live, "backup", "--tenant", tenant)
    written = [s for s in summaries if s.get("action") == "backup"]
    assert written, f"the backup printed no summary: {summaries}"
    backup = written[-1]
    evidence.record("backup", backup)

    started = time.monotonic()
    cluster.core.delete_namespaced_config_map(marker_name, MARKER_NAMESPACE)
    with pytest.raises(k8s.ApiException) as gone:
        cluster.core.read_namespaced_config_map(marker_name, MARKER_NAMESPACE)
    assert gone.value.status == 404, describe_error(gone.value)
    steps["delete marker"] = time.monotonic() - started

    watchers = {name: _Downtime(live.tenant(name).git_version) for name in [tenant, *others]}
    for watcher in watchers.values():
        watcher.__enter__()
    try:
        summaries, steps["restore"] = _backups(
            live, "restore", "--tenant", tenant, "--backup", str(backup["name"]), "--yes"
        )
    finally:
        for watcher in watchers.values():
            watcher.__exit__()
    evidence.record("restore", summaries)

    started = time.monotonic()
    found = None
    deadline = time.monotonic() + 300
    while time.monotonic() < deadline:
        try:
            found = cluster.core.read_namespaced_config_map(marker_name, MARKER_NAMESPACE)
            break
        except API_ERRORS:
            time.sleep(2)
    steps["read marker"] = time.monotonic() - started
    evidence.record("stepSeconds", {k: round(v, 1) for k, v in steps.items()})
    downtime = watchers[tenant].longest_gap()
    evidence.record("apiDowntimeSeconds", round(downtime, 1))
    problems = []
    if found is None:
        problems.append(f"{tenant}: the marker {marker_name} did not come back")
    elif (found.data or {}).get("value") != value:
        problems.append(f"{tenant}: the marker came back with {found.data!r}, not {value!r}")
    for name in others:
        if watchers[name].failures():
            problems.append(f"{name} failed {watchers[name].failures()} /version reads")
    restored = [s for s in summaries if s.get("action") == "restored"]
    if not restored or restored[-1].get("name") != backup["name"]:
        problems.append(f"the restore printed no summary of what it restored: {summaries}")
    evidence.summary(
        f"{tenant}: backup {backup['name']} ({steps['backup']:.0f} s), restore "
        f"{steps['restore']:.0f} s, API down {downtime:.0f} s, marker "
        f"{'back' if found is not None else 'missing'}"
    )
    # Clean up the marker (it is the suite's own object).
    if found is not None:
        try:
            cluster.core.delete_namespaced_config_map(marker_name, MARKER_NAMESPACE)
        except API_ERRORS as exc:
            problems.append(f"cleaning the marker up: {describe_error(exc)}")
    assert not problems, "; ".join(problems)
