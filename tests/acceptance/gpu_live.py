"""Live helpers of TC-11 ... TC-15: run probe pods through the tenant API, read their output,
watch what HAMi counts on the card, restart HAMi's device plugin.

Built on ``kube.py`` (bounded waits that ride out transient API errors, throw-away namespaces);
every wait here is bounded too. What they return goes to the pure judges in ``gpu_judges.py``.
"""

from __future__ import annotations

import contextlib
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from typing import Any, cast

from kubernetes.client.exceptions import ApiException

from tests.acceptance.gpu_judges import (
    CardLoad,
    LoadView,
    ProbeRun,
    annotation_load,
    metrics_load,
    parse_probe_log,
)
from tests.acceptance.gpu_plan import (
    COMPUTE_SECONDS,
    PROBE_SLACK_SECONDS,
    PROBE_START_SECONDS,
    UNRESTRICTED_CORES,
)
from tests.acceptance.gpu_workloads import (
    compute_pod,
    probe_configmap,
    probe_pod,
    probe_source,
)
from tests.acceptance.hami_evidence import PodPlacement, RegisteredCard
from tests.acceptance.kube import (
    METRICS_ERRORS,
    REQUEST_TIMEOUT,
    Cluster,
    NodeFacts,
    create_pod,
    describe_error,
    hami_allocations,
    hami_samples,
    is_bound,
    node_facts,
    placement,
    pod_log,
    pods_raw,
    poll_until,
    read_pod,
    retrying,
    scratch_namespace,
)
from tests.acceptance.live import Target
from tests.acceptance.lookups import HAMI_DEVICE_PLUGIN_SELECTOR, HAMI_NAMESPACE

LOG_LINES = 20_000  # a probe prints a few hundred lines at most
VIEW_SETTLE_SECONDS = 30.0  # for HAMi's scheduler cache to follow a pod event


@dataclass
class GpuTarget:
    """Where the GPU probes run: a node of the GPU pool, one card on it, the probe image."""

    where: Target
    card: RegisteredCard
    image: str

    @property
    def cluster(self) -> Cluster:
        return self.where.cluster

    @property
    def node(self) -> str:
        return self.where.node

    def as_dict(self) -> dict[str, Any]:
        return {
            "node": self.node,
            "card": {
                "uuid": self.card.uuid,
                "type": self.card.type,
                "memoryMiB": self.card.memory_mib,
                "coreUnits": self.card.core_units,
                "slots": self.card.slots,
            },
            "image": self.image,
        }


def choose_card(cards: Sequence[RegisteredCard]) -> RegisteredCard | None:
    """The first healthy NVIDIA card by index (HAMi skips cards without "nvidia" in the type)."""
    usable = [c for c in cards if c.health and "nvidia" in c.type.lower()]
    return sorted(usable, key=lambda c: (c.index, c.uuid))[0] if usable else None


@contextlib.contextmanager
def probe_namespace(cluster: Cluster, run_id: str) -> Iterator[str]:
    """A throw-away namespace holding the probe's ConfigMap (removed afterwards, also on
    failure)."""
    with scratch_namespace(cluster, run_id) as namespace:
        cluster.core.create_namespaced_config_map(
            namespace,
            cast(Any, probe_configmap(run_id, probe_source())),
            _request_timeout=REQUEST_TIMEOUT,
        )
        yield namespace


def probe_body(
    target: GpuTarget,
    run_id: str,
    name: str,
    args: Sequence[str],
    *,
    memory_mib: int,
    cores: int,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    return probe_pod(
        name,
        run_id,
        args=args,
        memory_mib=memory_mib,
        cores=cores,
        card_uuid=target.card.uuid,
        image=target.image,
        node_selector=target.where.node_selector,
        env=env,
    )


def output(cluster: Cluster, namespace: str, name: str) -> ProbeRun:
    """The probe's output so far (its pod log, parsed); empty when the log cannot be read yet."""
    try:
        text = pod_log(cluster, namespace, name, lines=LOG_LINES)
    except ApiException as exc:
        if exc.status in (400, 404):  # container not started yet / pod gone
            return ProbeRun(pod=name)
        raise
    return parse_probe_log(name, text)


@dataclass
class ProbeResult:
    """A probe pod as it ended (or as it was when the wait ran out) and its output."""

    pod: PodPlacement
    run: ProbeRun
    problems: list[str] = field(default_factory=list)
    restarts: int = 0

    def as_dict(self) -> dict[str, Any]:
        return {
            "pod": self.pod.name,
            "node": self.pod.node,
            "phase": self.pod.phase,
            "allocated": self.pod.allocated,
            "records": len(self.run.records),
            "hamiCoreMessages": self.run.hami_core_lines[-5:],
            "problems": self.problems,
        }


def restarts_of(pod: Any) -> int:
    statuses = (pod.status.container_statuses if pod.status else None) or []
    return sum(int(s.restart_count or 0) for s in statuses)


def result_of(cluster: Cluster, namespace: str, name: str) -> ProbeResult:
    pod = retrying(lambda: read_pod(cluster, namespace, name))
    return ProbeResult(
        pod=placement(pod), run=output(cluster, namespace, name), restarts=restarts_of(pod)
    )


def run_probe(
    cluster: Cluster, namespace: str, body: Mapping[str, Any], seconds: float
) -> ProbeResult:
    """Create a bounded probe pod and wait until it ends (within its run time, the start-up and
    the slack); a pod that did not end, or ended in Failed, is a problem on the result."""
    name = str(body["metadata"]["name"])
    create_pod(cluster, namespace, body)
    timeout = PROBE_START_SECONDS + seconds + PROBE_SLACK_SECONDS

    def ended() -> bool | None:
        return True if placement(read_pod(cluster, namespace, name)).terminal else None

    finished = poll_until(ended, timeout=timeout, interval=2.0)
    result = result_of(cluster, namespace, name)
    if finished is None:
        result.problems.append(
            f"{name} did not finish within {timeout:.0f} s ({result.pod.status_text()})"
        )
    elif result.pod.phase != "Succeeded":
        result.problems.append(f"{name} ended {result.pod.status_text()}")
    return result


def compute_body(
    target: GpuTarget,
    run_id: str,
    name: str,
    seconds: float,
    cores: int,
    policy: str | None = None,
) -> dict[str, Any]:
    """A compute probe on the target card (``gpu_workloads.compute_pod``)."""
    return compute_pod(
        name,
        run_id,
        seconds=seconds,
        cores=cores,
        card_uuid=target.card.uuid,
        image=target.image,
        node_selector=target.where.node_selector,
        policy=policy,
    )


def run_unrestricted_compute(
    cluster: Cluster, namespace: str, target: GpuTarget, run_id: str, name: str
) -> ProbeResult:
    """The compute probe at ``UNRESTRICTED_CORES`` on the target card for ``COMPUTE_SECONDS``:
    the same-run reference TC-12's and TC-14's shares are measured against."""
    return run_probe(
        cluster, namespace, unrestricted_compute_pod(target, run_id, name), COMPUTE_SECONDS
    )


def unrestricted_compute_pod(target: GpuTarget, run_id: str, name: str) -> dict[str, Any]:
    """The compute probe at ``UNRESTRICTED_CORES``, the reference TC-12 and TC-14 measure
    against."""
    return compute_body(target, run_id, name, COMPUTE_SECONDS, UNRESTRICTED_CORES)


def wait_output(
    cluster: Cluster,
    namespace: str,
    name: str,
    ready: Callable[[ProbeRun], bool],
    timeout: float,
) -> ProbeRun | None:
    """Poll the probe's log until ``ready`` holds for it (None when the wait ran out or the pod
    ended first)."""

    def check() -> ProbeRun | None:
        run = output(cluster, namespace, name)
        if ready(run):
            return run
        if placement(read_pod(cluster, namespace, name)).terminal:
            raise _EndedError(run)
        return None

    try:
        return poll_until(check, timeout=timeout, interval=2.0)
    except _EndedError:
        return None


class _EndedError(Exception):
    def __init__(self, run: ProbeRun) -> None:
        super().__init__(run.pod)
        self.run = run


def wait_bound(cluster: Cluster, namespace: str, name: str, timeout: float) -> Any:
    """The pod once bound to a node (None when not within ``timeout``)."""

    def check() -> Any:
        pod = read_pod(cluster, namespace, name)
        return pod if is_bound(pod) else None

    return poll_until(check, timeout=timeout, interval=0.5)


def wait_phase(
    cluster: Cluster, namespace: str, name: str, phases: Sequence[str], timeout: float
) -> Any:
    def check() -> Any:
        pod = read_pod(cluster, namespace, name)
        return pod if placement(pod).phase in phases else None

    return poll_until(check, timeout=timeout, interval=1.0)


# -------------------------------------------------------------------------- card load


def load_view(cluster: Cluster, node: str, uuid: str) -> tuple[LoadView, str]:
    """What HAMi counts on card ``uuid`` now, from the pods' annotations and from its scheduler's
    metrics; the second value says why the metrics are missing ("" when read)."""
    annotations = annotation_load(hami_allocations(cluster, node), uuid)
    try:
        metrics = metrics_load(hami_samples(cluster), node, uuid)
        why = "" if metrics is not None else f"the metrics list no card {uuid} on {node}"
    except METRICS_ERRORS as exc:
        metrics, why = None, f"HAMi's metrics unreadable: {describe_error(exc)}"
    return LoadView(annotations=annotations, metrics=metrics), why


def settled_view(cluster: Cluster, node: str, uuid: str, expected: CardLoad) -> LoadView:
    """The load once both views show ``expected`` - or, after VIEW_SETTLE_SECONDS, as it is (the
    judge reports the difference)."""

    def check() -> LoadView | None:
        view, _ = load_view(cluster, node, uuid)
        metrics_ok = view.metrics is not None and view.metrics.same_amounts(expected)
        return view if view.annotations.same_amounts(expected) and metrics_ok else None

    seen = poll_until(check, timeout=VIEW_SETTLE_SECONDS, interval=2.0)
    return seen if seen is not None else load_view(cluster, node, uuid)[0]


def busy_card_problem(cluster: Cluster, node: str, uuid: str) -> str | None:
    """Why the card is not free for a measurement (pods HAMi counts on it), else None."""
    load = annotation_load(hami_allocations(cluster, node), uuid)
    if load.holders == 0:
        return None
    return (
        f"card {uuid} on {node} already holds shares HAMi counts before the test: "
        f"{load.memory_mib:g} MiB / {load.cores:g} % ({', '.join(load.pods)})"
    )


# --------------------------------------------------------------------- device plugin


@dataclass(frozen=True)
class PluginPod:
    name: str
    uid: str
    ready: bool


def plugin_pod(cluster: Cluster, node: str) -> PluginPod | None:
    """HAMi's device-plugin pod on ``node`` (the newest, when a replacement is starting)."""
    found = [
        p
        for p in pods_raw(cluster, HAMI_NAMESPACE, HAMI_DEVICE_PLUGIN_SELECTOR)
        if (p.get("spec") or {}).get("nodeName") == node
        and not (p.get("metadata") or {}).get("deletionTimestamp")
    ]
    if not found:
        return None
    newest = max(found, key=lambda p: str((p.get("metadata") or {}).get("creationTimestamp", "")))
    conditions = (newest.get("status") or {}).get("conditions") or []
    metadata = newest.get("metadata") or {}
    return PluginPod(
        name=str(metadata.get("name", "")),
        uid=str(metadata.get("uid", "")),
        ready=any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
    )


def delete_plugin_pod(cluster: Cluster, pod: PluginPod) -> None:
    """Delete the plugin pod (its DaemonSet recreates it), with its normal grace period."""
    cluster.core.delete_namespaced_pod(
        pod.name, HAMI_NAMESPACE, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
    )


def read_node(cluster: Cluster, node: str) -> NodeFacts:
    return node_facts(
        retrying(lambda: cluster.core.read_node(node, _request_timeout=REQUEST_TIMEOUT))
    )
