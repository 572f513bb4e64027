"""TC-21: a tenant's API rides out a disruption of the management cluster (issue 44, point 3).

While a client in the tenant lists pods and creates one (a server-side dry run, HAMi's webhook
included: it declares ``sideEffects: None``, HAMi v2.10.0
charts/hami/templates/scheduler/webhook.yaml:71) about once a second, the drill:

1. evicts Kamaji's controller pods in the management cluster, one at a time, each after the last
   replacement is Ready (what draining the nodes one after another does);
2. evicts the tenant's control-plane pods the same way (a disruption budget, where the stack
   sets one, is honoured: an eviction it refuses is retried, and one never allowed fails the
   test, since a drain would hang there too).

``management_drill.judge_drill`` then holds each phase to its target: no failed request while
Kamaji restarts (it serves no tenant request) or while another control-plane replica serves;
with a single replica (the lab) the API must answer again within
``SINGLE_REPLICA_RECOVERY_SECONDS``. The report keeps every phase's requests, failures, first
errors and recovery time.

In the lab it runs with the suite; on other stacks only with
``GPU_PLATFORM_ACCEPTANCE_DISRUPTIVE=1`` (it restarts a production tenant's API servers).
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Mapping
from typing import Any

import pytest
from kubernetes import client as k8s

from tests.acceptance.kube import API_ERRORS, Cluster, describe_error, scratch_namespace
from tests.acceptance.live import LiveStack
from tests.acceptance.lookups import (
    CONTROL_PLANE_POD_LABEL,
    KAMAJI_CONTROLLER_LABELS,
    KAMAJI_NAMESPACE,
    selector,
)
from tests.acceptance.management_drill import TAIL_SECONDS, Phase, Sample, judge_drill
from tests.acceptance.report import Evidence
from tests.acceptance.test_tc16_konnectivity_down import DISRUPTIVE_ENV
from tests.acceptance.workloads import pod_body

pytestmark = [pytest.mark.live, pytest.mark.timeout(1800)]

REQUEST_INTERVAL = 1.0
REQUEST_TIMEOUT = (3.0, 5.0)  # connect, read: a request the drill counts as failed after this
REPLACEMENT_SECONDS = 300.0  # an evicted pod's replacement Ready
EVICTION_SECONDS = 300.0  # an eviction a disruption budget refuses, retried this long


def dry_run_pod(run_id: str) -> dict[str, Any]:
    """The pod the client dry-run creates: a plain sleeping pod, admitted by every tenant's
    rules (tests/policies/test_acceptance_pods_through_admission.py sends it through them)."""
    return pod_body("tc21-dry-run", run_id)


class TenantClient:
    """Lists pods and dry-run creates one in ``namespace`` every ``REQUEST_INTERVAL``, in a
    thread, recording each request as a ``Sample`` timed from ``started``."""

    def __init__(self, cluster: Cluster, namespace: str, run_id: str, started: float) -> None:
        self._cluster, self._namespace, self._started = cluster, namespace, started
        self._body = dry_run_pod(run_id)
        self._stop = threading.Event()
        self.samples: list[Sample] = []
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _request(self, op: str) -> None:
        at = time.monotonic() - self._started
        try:
            if op == "list":
                self._cluster.core.list_namespaced_pod(
                    self._namespace, limit=1, _request_timeout=REQUEST_TIMEOUT
                )
            else:
                self._cluster.core.create_namespaced_pod(
                    self._namespace, self._body, dry_run="All", _request_timeout=REQUEST_TIMEOUT
                )
        except API_ERRORS as exc:
            self.samples.append(Sample(at, op, False, describe_error(exc)[:200]))
        else:
            self.samples.append(Sample(at, op, True))

    def _run(self) -> None:
        while not self._stop.is_set():
            for op in ("list", "create"):
                self._request(op)
            self._stop.wait(REQUEST_INTERVAL)

    def __enter__(self) -> TenantClient:
        self._thread.start()
        return self

    def __exit__(self, *_: object) -> None:
        self._stop.set()
        self._thread.join(timeout=30)


def _ready(pod: k8s.V1Pod) -> bool:
    conditions = (pod.status.conditions if pod.status else None) or []
    return pod.metadata.deletion_timestamp is None and any(
        c.type == "Ready" and c.status == "True" for c in conditions
    )


def _pods(management: Cluster, namespace: str, labels: str) -> list[k8s.V1Pod]:
    return list(management.core.list_namespaced_pod(namespace, label_selector=labels).items)


def _evict(management: Cluster, namespace: str, name: str) -> None:
    """Evict one pod, retrying while a disruption budget refuses (429) for EVICTION_SECONDS."""
    body = k8s.V1Eviction(metadata=k8s.V1ObjectMeta(name=name, namespace=namespace))
    deadline = time.monotonic() + EVICTION_SECONDS
    while True:
        try:
            management.core.create_namespaced_pod_eviction(name, namespace, body)
            return
        except k8s.ApiException as exc:
            if exc.status == 404:
                return
            if exc.status != 429 or time.monotonic() > deadline:
                pytest.fail(
                    f"evicting {namespace}/{name}: {describe_error(exc)} (a drain would stop "
                    "here too)",
                    pytrace=False,
                )
        time.sleep(5)


def roll(management: Cluster, namespace: str, labels: Mapping[str, str]) -> dict[str, Any]:
    """Evict every pod matching ``labels``, one at a time, each after the last one's replacement
    is Ready: the pods evicted and how long each replacement took."""
    wanted = selector(labels)
    pods = _pods(management, namespace, wanted)
    if not pods:
        pytest.fail(f"no pod in {namespace} matches {wanted}", pytrace=False)
    count, evicted, waits = len(pods), [], []
    for pod in pods:
        name = pod.metadata.name
        started = time.monotonic()
        _evict(management, namespace, name)
        evicted.append(name)
        while True:
            fresh = [
                p
                for p in _pods(management, namespace, wanted)
                if p.metadata.name not in evicted and _ready(p)
            ]
            if len(fresh) >= count:  # the evicted pod's replacement and every other one
                break
            if time.monotonic() - started > REPLACEMENT_SECONDS:
                pytest.fail(
                    f"{namespace}: {len(fresh)} of {count} pods matching {wanted} Ready "
                    f"{REPLACEMENT_SECONDS:.0f} s after evicting {name}",
                    pytrace=False,
                )
            time.sleep(2)
        waits.append(round(time.monotonic() - started, 1))
    return {"pods": evicted, "replacementSeconds": waits}


@pytest.mark.tc("TC-21")
def test_a_tenant_rides_out_a_management_disruption(live: LiveStack, evidence: Evidence) -> None:
    if live.platform.mode != "lab" and os.environ.get(DISRUPTIVE_ENV) != "1":
        pytest.skip(
            f"TC-21 restarts Kamaji and a tenant's API servers: on a {live.platform.mode} stack "
            f"it runs only with {DISRUPTIVE_ENV}=1"
        )
    # The tenant with the most control-plane replicas: the one that must show no failure.
    tenant = max(live.platform.tenants, key=lambda t: t.control_plane.replicas)
    out = live.outputs.tenants[tenant.name]
    management = live.management_cluster()
    cluster = live.tenant(tenant.name)
    phases: list[Phase] = []
    rolled: dict[str, Any] = {}
    with scratch_namespace(cluster, live.run_id) as namespace:
        started = time.monotonic()
        with TenantClient(cluster, namespace, live.run_id, started) as client:
            time.sleep(TAIL_SECONDS)  # a baseline: the API answered before the drill
            phases.append(Phase("kamaji", time.monotonic() - started, replicas=0))
            rolled["kamaji"] = roll(management, KAMAJI_NAMESPACE, KAMAJI_CONTROLLER_LABELS)
            phases.append(
                Phase("control-plane", time.monotonic() - started, tenant.control_plane.replicas)
            )
            rolled["control-plane"] = roll(
                management, out.namespace, {CONTROL_PLANE_POD_LABEL: out.control_plane}
            )
            time.sleep(TAIL_SECONDS)
        end = time.monotonic() - started
    baseline = [s for s in client.samples if s.at < phases[0].start]
    verdict = judge_drill(phases, client.samples, end)
    if baseline and not any(s.ok for s in baseline):
        verdict.problems.insert(0, f"{tenant.name}: the API did not answer before the drill")
    evidence.record("tenant", tenant.name)
    evidence.record("rolled", rolled)
    evidence.record("drill", verdict.facts)
    rows = verdict.facts["phases"]
    evidence.summary(
        f"{tenant.name} ({tenant.control_plane.replicas} control-plane replicas): "
        + "; ".join(
            f"{name} {row['failed']}/{row['requests']} failed, recovered in "
            f"{row['recoverySeconds']} s"
            for name, row in rows.items()
        )
    )
    assert verdict.ok, verdict.explain()
