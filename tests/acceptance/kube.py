"""Live helpers: one cluster reached through its own kubeconfig (kubernetes Python client).

Every call carries a bounded timeout; waits poll with a deadline. Conversions from API objects
to the judges' plain values (``placement``, ``node_facts``, ``event_record``) are pure and are
unit-tested on hand-built client objects.
"""

from __future__ import annotations

import contextlib
import json
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from dataclasses import dataclass, field
from decimal import Decimal
from typing import Any, TypeVar, cast

import urllib3
import yaml
from kubernetes import client as k8s
from kubernetes.client.exceptions import ApiException
from kubernetes.config import new_client_from_config_dict
from kubernetes.utils import parse_quantity

from components.labels import POOL_LABEL, TENANT_LABEL
from tests.acceptance.hami_evidence import (
    HAMI_NODE_LOCK,
    CardUsage,
    EventRecord,
    EvidenceError,
    ObjectRef,
    PodPlacement,
    card_usage,
    hami_reasons,
)
from tests.acceptance.hami_metrics import Sample, parse_exposition
from tests.acceptance.lookups import (
    HAMI_METRICS_PATH,
    HAMI_METRICS_PORT_NAME,
    HAMI_NAMESPACE,
    HAMI_SCHEDULER_SERVICE,
)
from tests.acceptance.workloads import namespace_body, namespace_name

CONNECT_SECONDS = 3.0
REQUEST_TIMEOUT = (CONNECT_SECONDS, 30.0)
PROBE_TIMEOUT = (CONNECT_SECONDS, 5.0)
POLL_SECONDS = 0.5
BIND_TIMEOUT = 120.0  # per pod; the lab's completer makes a bind take seconds
EVENT_TIMEOUT = 90.0  # for a refused pod's Warning event
CLEANUP_TIMEOUT = 90.0
KAMAJI_GROUP = "kamaji.clastix.io"
KAMAJI_VERSION = "v1alpha1"
RETRY_TIMEOUT = 20.0  # a single read retried through transient errors
LOG_TAIL = 20
# What a call through an unreachable or failing API server raises.
NETWORK_ERRORS: tuple[type[Exception], ...] = (urllib3.exceptions.HTTPError, OSError)
API_ERRORS: tuple[type[Exception], ...] = (ApiException, *NETWORK_ERRORS)
# Reading HAMi's metrics: the API call, or a page that is not the text format.
METRICS_ERRORS: tuple[type[Exception], ...] = (*API_ERRORS, EvidenceError)


def is_transient(exc: BaseException) -> bool:
    """A network error, or an API answer worth retrying (no answer, throttled, 5xx); a 404,
    403, 409 or 422 is an answer and is never retried."""
    if isinstance(exc, ApiException):
        status = int(exc.status or 0)
        return status == 0 or status == 429 or status >= 500
    return isinstance(exc, NETWORK_ERRORS)


T = TypeVar("T")


class UnreachableError(Exception):
    """The API server did not answer; the message says which and why (one line)."""


class CleanupError(Exception):
    """Objects the suite created could not be removed."""


_NETWORK_REASONS = (
    ("Connection refused", "connection refused"),
    ("timed out", "timed out"),
    ("CERTIFICATE_VERIFY_FAILED", "TLS certificate not trusted"),
    ("Name or service not known", "unknown host"),
    ("No route to host", "no route to host"),
    ("Network is unreachable", "network unreachable"),
)


def network_reason(exc: BaseException) -> str:
    """Why a connection failed, in a few words (urllib3's own text is a paragraph)."""
    text = f"{exc} {getattr(exc, 'reason', '')}"
    for pattern, short in _NETWORK_REASONS:
        if pattern in text:
            return short
    return type(getattr(exc, "reason", None) or exc).__name__


def describe_error(exc: BaseException) -> str:
    """A one-line description of an API or network error (no response bodies with secrets)."""
    if isinstance(exc, ApiException):
        message = api_message(exc)
        return f"HTTP {exc.status} {exc.reason or ''}".strip() + (f": {message}" if message else "")
    text = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    return f"{type(exc).__name__}: {text}"[:300]


def api_message(exc: ApiException) -> str:
    """The ``message`` of a Kubernetes Status body, else the raw body's first line."""
    body = exc.body
    if isinstance(body, bytes):
        body = body.decode("utf-8", "replace")
    if not body:
        return ""
    try:
        data = yaml.safe_load(body)
    except yaml.YAMLError:
        return str(body).splitlines()[0][:500]
    if isinstance(data, dict) and isinstance(data.get("message"), str):
        return str(data["message"])
    return str(body).splitlines()[0][:500]


@dataclass
class Cluster:
    """A cluster reached through one kubeconfig."""

    name: str
    api: k8s.ApiClient

    @property
    def host(self) -> str:
        return str(self.api.configuration.host)

    @property
    def core(self) -> k8s.CoreV1Api:
        return k8s.CoreV1Api(self.api)

    @property
    def custom(self) -> k8s.CustomObjectsApi:
        return k8s.CustomObjectsApi(self.api)

    def git_version(self, timeout: tuple[float, float] = REQUEST_TIMEOUT) -> str:
        info = k8s.VersionApi(self.api).get_code(_request_timeout=timeout)
        return str(info.git_version)

    def close(self) -> None:
        with contextlib.suppress(Exception):
            self.api.close()  # type: ignore[no-untyped-call]


def connect(name: str, kubeconfig: str) -> Cluster:
    """An ApiClient for this kubeconfig only (no global config, nothing written to disk except
    the client library's temporary certificate files)."""
    try:
        config_dict = yaml.safe_load(kubeconfig)
    except yaml.YAMLError:
        raise ValueError(f"the kubeconfig for {name} is not YAML") from None
    if not isinstance(config_dict, dict):
        raise ValueError(f"the kubeconfig for {name} is not a kubeconfig mapping")
    configuration = type.__call__(k8s.Configuration)
    configuration.retries = 1  # fail fast on an unreachable address
    api = new_client_from_config_dict(  # type: ignore[no-untyped-call]
        config_dict=config_dict, persist_config=False, client_configuration=configuration
    )
    return Cluster(name=name, api=api)


def probe(cluster: Cluster) -> str:
    """``/version`` with a short timeout; UnreachableError when the network path fails. An
    HTTP error means the server is there (the tests will report what is wrong)."""
    try:
        return cluster.git_version(PROBE_TIMEOUT)
    except ApiException as exc:
        if exc.status == 0:  # the client wraps TLS failures as status 0: no answer
            raise UnreachableError(
                f"{cluster.name} {cluster.host}: {network_reason(exc)}"
            ) from None
        return f"answered {describe_error(exc)}"
    except NETWORK_ERRORS as exc:
        raise UnreachableError(f"{cluster.name} {cluster.host}: {network_reason(exc)}") from None


# -------------------------------------------------------------------------------- waiting


def poll_until(
    check: Callable[[], T | None], *, timeout: float, interval: float = POLL_SECONDS
) -> T | None:
    """Call ``check`` until it returns something other than None or the deadline passes.

    A transient API error inside ``check`` (``is_transient``: one 5xx or socket timeout through
    the LoadBalancer and Kamaji) counts as "not yet" and polling goes on; when the deadline passes
    right after such an error, that error is raised (it is the best explanation). Any other error
    (e.g. a 404 for the pod itself) is raised at once."""
    deadline = time.monotonic() + timeout
    while True:
        last_error: BaseException | None = None
        try:
            result = check()
        except API_ERRORS as exc:
            if not is_transient(exc):
                raise
            last_error, result = exc, None
        if result is not None:
            return result
        if time.monotonic() >= deadline:
            if last_error is not None:
                raise last_error
            return None
        time.sleep(interval)


def retrying(call: Callable[[], T], *, timeout: float = RETRY_TIMEOUT) -> T:
    """One read, retried through transient errors until ``timeout``."""
    box: list[T] = []

    def attempt() -> bool:
        box.append(call())
        return True

    poll_until(attempt, timeout=timeout, interval=1.0)
    return box[-1]


# ---------------------------------------------------------------------- namespaces / pods


def create_namespace(cluster: Cluster, run_id: str, name: str | None = None) -> str:
    name = name or namespace_name()
    body = cast(Any, namespace_body(name, run_id))  # the client takes plain dicts too
    cluster.core.create_namespace(body, _request_timeout=REQUEST_TIMEOUT)
    return name


def delete_pods(cluster: Cluster, namespace: str, names: list[str], timeout: float) -> list[str]:
    """Delete pods at once (grace 0) and wait until they are gone; the names still present."""
    for name in names:
        with contextlib.suppress(ApiException):
            cluster.core.delete_namespaced_pod(
                name,
                namespace,
                grace_period_seconds=0,
                _request_timeout=REQUEST_TIMEOUT,
                _preload_content=False,  # the answer is not needed (and not always a Pod)
            )

    def gone() -> bool | None:
        present = [n for n in names if read_pod_or_none(cluster, namespace, n) is not None]
        return True if not present else None

    if poll_until(gone, timeout=timeout) is None:
        return [n for n in names if read_pod_or_none(cluster, namespace, n) is not None]
    return []


def cleanup_namespace(cluster: Cluster, namespace: str, timeout: float = CLEANUP_TIMEOUT) -> None:
    """Remove every pod at once (so HAMi frees the card shares), then the namespace; wait until
    the pods are gone. Raises CleanupError when that does not happen within ``timeout``."""
    problems: list[str] = []
    try:
        cluster.core.delete_collection_namespaced_pod(
            namespace,
            grace_period_seconds=0,
            _request_timeout=REQUEST_TIMEOUT,
            _preload_content=False,
        )
    except ApiException as exc:
        if exc.status != 404:
            problems.append(f"delete pods: {describe_error(exc)}")
    except NETWORK_ERRORS as exc:
        problems.append(f"delete pods: {describe_error(exc)}")
    try:
        cluster.core.delete_namespace(
            namespace, _request_timeout=REQUEST_TIMEOUT, _preload_content=False
        )
    except ApiException as exc:
        if exc.status != 404:
            problems.append(f"delete namespace: {describe_error(exc)}")
    except NETWORK_ERRORS as exc:
        problems.append(f"delete namespace: {describe_error(exc)}")

    def pods_gone() -> bool | None:
        try:
            items = cluster.core.list_namespaced_pod(
                namespace, _request_timeout=REQUEST_TIMEOUT
            ).items
        except API_ERRORS:
            return None
        return True if not items else None

    if poll_until(pods_gone, timeout=timeout) is None:
        problems.append(f"pods still present after {timeout:.0f} s")
    if problems:
        raise CleanupError(f"{cluster.name}: namespace {namespace}: {'; '.join(problems)}")


@contextlib.contextmanager
def scratch_namespace(cluster: Cluster, run_id: str) -> Iterator[str]:
    """A fresh ``acceptance-<random>`` namespace, removed afterwards (also on failure)."""
    name = create_namespace(cluster, run_id)
    try:
        yield name
    finally:
        cleanup_namespace(cluster, name)


def create_pod(cluster: Cluster, namespace: str, body: Mapping[str, Any]) -> k8s.V1Pod:
    return cluster.core.create_namespaced_pod(
        namespace, cast(Any, body), _request_timeout=REQUEST_TIMEOUT
    )


def read_pod(cluster: Cluster, namespace: str, name: str) -> k8s.V1Pod:
    return cluster.core.read_namespaced_pod(name, namespace, _request_timeout=REQUEST_TIMEOUT)


def read_pod_or_none(cluster: Cluster, namespace: str, name: str) -> k8s.V1Pod | None:
    try:
        return read_pod(cluster, namespace, name)
    except ApiException as exc:
        if exc.status == 404:
            return None
        raise


# ----------------------------------------------------------------------------- conversions


def meta(obj: Any) -> k8s.V1ObjectMeta:
    """An API object's metadata (typed optional by the client; the API server always sets it)."""
    metadata = obj.metadata
    return metadata if isinstance(metadata, k8s.V1ObjectMeta) else k8s.V1ObjectMeta()


def pod_spec(pod: k8s.V1Pod) -> k8s.V1PodSpec:
    return pod.spec if pod.spec is not None else k8s.V1PodSpec(containers=[])


def placement(pod: k8s.V1Pod) -> PodPlacement:
    """What the judges read of a pod."""
    metadata = meta(pod)
    spec = pod_spec(pod)
    status = pod.status
    return PodPlacement(
        name=str(metadata.name),
        node=str(spec.node_name or ""),
        phase=str((status.phase if status else None) or ""),
        scheduler_name=str(spec.scheduler_name or ""),
        annotations=dict(metadata.annotations or {}),
        reason=str((status.reason if status else None) or ""),
        message=str((status.message if status else None) or ""),
    )


def condition(pod: k8s.V1Pod, kind: str) -> k8s.V1PodCondition | None:
    for cond in (pod.status.conditions if pod.status else None) or []:
        if cond.type == kind:
            return cond
    return None


def is_bound(pod: k8s.V1Pod) -> bool:
    """Bound to a node: spec.nodeName set (PodScheduled=True follows the binding)."""
    scheduled = condition(pod, "PodScheduled")
    return bool(pod_spec(pod).node_name) or (scheduled is not None and scheduled.status == "True")


def scheduling_message(pod: k8s.V1Pod) -> str:
    scheduled = condition(pod, "PodScheduled")
    if scheduled is None or scheduled.status == "True":
        return ""
    return f"{scheduled.reason or ''}: {scheduled.message or ''}".strip(": ")


@dataclass(frozen=True)
class NodeFacts:
    """A node as the inventory and visibility checks read it."""

    name: str
    uid: str
    ready: bool
    labels: Mapping[str, str] = field(default_factory=dict)
    annotations: Mapping[str, str] = field(default_factory=dict)
    capacity: Mapping[str, int] = field(default_factory=dict)
    allocatable: Mapping[str, int] = field(default_factory=dict)

    @property
    def tenant(self) -> str:
        return self.labels.get(TENANT_LABEL, "")

    @property
    def pool(self) -> str:
        return self.labels.get(POOL_LABEL, "")

    def ref(self) -> ObjectRef:
        return ObjectRef(name=self.name, uid=self.uid, tenant=self.tenant, capacity=self.capacity)


def quantity(value: Any) -> int:
    number: Decimal = parse_quantity(value)  # type: ignore[no-untyped-call]
    return int(number)


def _nvidia(resources: Mapping[str, Any] | None) -> dict[str, int]:
    return {k: quantity(v) for k, v in (resources or {}).items() if k.startswith("nvidia.com/")}


def node_facts(node: k8s.V1Node) -> NodeFacts:
    """Name, readiness, labels, annotations and the nvidia.com/* capacity and allocatable."""
    conditions = (node.status.conditions if node.status else None) or []
    ready = any(c.type == "Ready" and c.status == "True" for c in conditions)
    return NodeFacts(
        name=str(meta(node).name),
        uid=str(meta(node).uid or ""),
        ready=ready,
        labels=dict(meta(node).labels or {}),
        annotations=dict(meta(node).annotations or {}),
        capacity=_nvidia(node.status.capacity if node.status else None),
        allocatable=_nvidia(node.status.allocatable if node.status else None),
    )


def event_record(event: k8s.CoreV1Event) -> EventRecord:
    source = ""
    if event.source is not None and event.source.component:
        source = str(event.source.component)
    elif event.reporting_component:
        source = str(event.reporting_component)
    return EventRecord(
        type=str(event.type or ""),
        reason=str(event.reason or ""),
        message=str(event.message or ""),
        source=source,
        count=int(event.count or 1),
    )


def pool_nodes(
    pool: str, named: Sequence[str], nodes: Sequence[NodeFacts]
) -> tuple[list[NodeFacts], list[str]]:
    """A pool's nodes: those the stack outputs name, else those labelled with the pool.
    Returns the nodes found and the names from the outputs that no node has."""
    by_name = {n.name: n for n in nodes}
    if named:
        return [by_name[n] for n in named if n in by_name], [n for n in named if n not in by_name]
    return [n for n in nodes if n.pool == pool], []


# --------------------------------------------------------------------------------- reads


def list_nodes(cluster: Cluster) -> list[NodeFacts]:
    items = retrying(lambda: cluster.core.list_node(_request_timeout=REQUEST_TIMEOUT).items)
    return sorted((node_facts(n) for n in items), key=lambda n: n.name)


def _json(response: Any) -> dict[str, Any]:
    data = json.loads(response.data or b"{}")
    return data if isinstance(data, dict) else {}


def list_raw(call: Callable[..., Any], *args: Any, **kwargs: Any) -> list[dict[str, Any]]:
    """A list call's items as the API returns them (plain dicts: what the pure judges and the
    recorded samples use), retried through transient errors."""

    def once() -> list[dict[str, Any]]:
        response = call(*args, _preload_content=False, _request_timeout=REQUEST_TIMEOUT, **kwargs)
        return list(_json(response).get("items") or [])

    return retrying(once)


def pods_raw(cluster: Cluster, namespace: str | None, selector: str) -> list[dict[str, Any]]:
    """Pods matching a label selector, in one namespace or (None) in all."""
    if namespace is None:
        return list_raw(cluster.core.list_pod_for_all_namespaces, label_selector=selector)
    return list_raw(cluster.core.list_namespaced_pod, namespace, label_selector=selector)


def daemonsets_raw(cluster: Cluster) -> list[dict[str, Any]]:
    """Every DaemonSet of the cluster (the tenant has a handful)."""
    return list_raw(k8s.AppsV1Api(cluster.api).list_daemon_set_for_all_namespaces)


def pod_log(
    cluster: Cluster,
    namespace: str,
    name: str,
    *,
    container: str = "",
    previous: bool = False,
    lines: int = LOG_TAIL,
) -> str:
    """The last ``lines`` of a pod's log (of ``container``; required when the pod has several).
    Raises on failure: the API server fetches logs from the kubelet, in a Kamaji tenant through
    the Konnectivity tunnel."""
    extra: dict[str, Any] = {"container": container} if container else {}
    text = cluster.core.read_namespaced_pod_log(
        name,
        namespace,
        tail_lines=lines,
        previous=previous,
        _request_timeout=REQUEST_TIMEOUT,
        **extra,
    )
    return str(text or "")


def log_or_reason(
    cluster: Cluster, namespace: str, name: str, *, container: str = "", previous: bool = False
) -> str:
    """The pod's last log lines (the previous instance's after a restart), or why they could
    not be read (for failure messages)."""
    try:
        text = pod_log(cluster, namespace, name, container=container, previous=previous)
        return text or "(empty log)"
    except API_ERRORS as exc:
        if previous:
            return log_or_reason(cluster, namespace, name, container=container)
        return f"(log unreadable: {describe_error(exc)})"


def hami_samples(cluster: Cluster) -> list[Sample]:
    """HAMi's scheduler metrics (``lookups``: hami-system/hami-scheduler:monitor/metrics),
    parsed. Raises an API error when unreachable, EvidenceError when not the text format."""
    return parse_exposition(
        service_proxy_text(
            cluster,
            HAMI_NAMESPACE,
            HAMI_SCHEDULER_SERVICE,
            HAMI_METRICS_PORT_NAME,
            HAMI_METRICS_PATH,
        )
    )


def service_proxy_text(cluster: Cluster, namespace: str, service: str, port: str, path: str) -> str:
    """GET a Service's HTTP endpoint through the API server's service proxy
    (``/api/v1/namespaces/<ns>/services/<svc>:<port>/proxy/<path>``), retried through transient
    errors. The hosted API server reaches the Service's pod through Konnectivity."""

    def once() -> str:
        response: Any = cluster.core.connect_get_namespaced_service_proxy_with_path(
            f"{service}:{port}",
            namespace,
            path,
            _preload_content=False,
            _request_timeout=REQUEST_TIMEOUT,
        )
        data = response.data or b""
        return data.decode("utf-8", "replace") if isinstance(data, bytes) else str(data)

    return retrying(once)


def events_for(cluster: Cluster, namespace: str, pod: k8s.V1Pod) -> list[EventRecord]:
    """Events about this pod (this UID), oldest first."""
    name = meta(pod).name
    uid = meta(pod).uid
    items = cluster.core.list_namespaced_event(
        namespace,
        field_selector=f"involvedObject.kind=Pod,involvedObject.name={name}",
        _request_timeout=REQUEST_TIMEOUT,
    ).items
    mine = [e for e in items if not uid or e.involved_object.uid in (None, "", uid)]

    def when(event: k8s.CoreV1Event) -> float:
        stamp = event.last_timestamp or event.event_time or meta(event).creation_timestamp
        return stamp.timestamp() if stamp is not None else 0.0

    return [event_record(e) for e in sorted(mine, key=when)]


def read_tenant_control_plane(cluster: Cluster, namespace: str, name: str) -> dict[str, Any]:
    """A Kamaji TenantControlPlane (management cluster) as a plain dict."""
    obj = cluster.custom.get_namespaced_custom_object(
        KAMAJI_GROUP,
        KAMAJI_VERSION,
        namespace,
        "tenantcontrolplanes",
        name,
        _request_timeout=REQUEST_TIMEOUT,
    )
    return cast(dict[str, Any], obj)


def list_datastores(cluster: Cluster) -> list[dict[str, Any]]:
    """Kamaji DataStores (cluster-scoped) as plain dicts."""
    listed = cluster.custom.list_cluster_custom_object(
        KAMAJI_GROUP, KAMAJI_VERSION, "datastores", _request_timeout=REQUEST_TIMEOUT
    )
    return list(cast(dict[str, Any], listed).get("items") or [])


def node_lock(cluster: Cluster, node: str) -> str:
    """HAMi's node lock annotation (``<time>,<ns>,<pod>``), for timeout messages."""
    try:
        obj = cluster.core.read_node(node, _request_timeout=REQUEST_TIMEOUT)
    except API_ERRORS as exc:
        return f"unreadable ({describe_error(exc)})"
    return str((meta(obj).annotations or {}).get(HAMI_NODE_LOCK, "none"))


def object_refs_of_pods(items: list[k8s.V1Pod]) -> tuple[ObjectRef, ...]:
    return tuple(
        ObjectRef(
            name=str(meta(p).name),
            uid=str(meta(p).uid or ""),
            namespace=str(meta(p).namespace or ""),
        )
        for p in items
    )


def object_refs_of_namespaces(items: list[k8s.V1Namespace]) -> tuple[ObjectRef, ...]:
    return tuple(ObjectRef(name=str(meta(n).name), uid=str(meta(n).uid or "")) for n in items)


def hami_allocations(cluster: Cluster, node: str) -> dict[str, str]:
    """``{namespace/pod: hami.io/vgpu-devices-allocated}`` of every live pod (any namespace) that
    HAMi counts on the node: its ``hami.io/vgpu-node`` names it, bound or not (HAMi v2.10.0
    scheduler.go:137-171 onAddPod keys on that annotation; Filter adds the pod before Bind,
    scheduler.go:1125-1139); pods that ended are not counted (scheduler.go:185-189)."""
    pods = retrying(
        lambda: cluster.core.list_pod_for_all_namespaces(_request_timeout=REQUEST_TIMEOUT).items
    )
    allocations = {}
    for pod in pods:
        seen = placement(pod)
        if seen.assigned_node == node and seen.allocated and not seen.terminal:
            allocations[f"{meta(pod).namespace}/{seen.name}"] = seen.allocated
    return allocations


def node_usage(cluster: Cluster, node: str) -> dict[str, CardUsage]:
    """Card usage HAMi counts on the node, per card UUID (``hami_allocations`` summed)."""
    return card_usage(hami_allocations(cluster, node))


def refusal_seen(
    cluster: Cluster, namespace: str, name: str, reason: str
) -> tuple[Any, list[EventRecord]] | None:
    """The pod and its events once it is bound, ended, or a Warning names ``reason``; else None."""
    pod = read_pod(cluster, namespace, name)
    events = events_for(cluster, namespace, pod)
    ended = placement(pod).terminal
    if (
        ended
        or is_bound(pod)
        or any(e.type == "Warning" and reason in hami_reasons(e) for e in events)
    ):
        return pod, events
    return None


def wait_for_refusal(
    cluster: Cluster, namespace: str, name: str, reason: str
) -> tuple[Any, list[EventRecord]]:
    """Wait (bounded, through transient API errors) until the pod is bound or a Warning event
    names ``reason``; the pod and its events either way (the judge decides)."""
    seen = poll_until(
        lambda: refusal_seen(cluster, namespace, name, reason), timeout=EVENT_TIMEOUT, interval=1.0
    )
    if seen is not None:
        return seen

    def last() -> tuple[Any, list[EventRecord]]:
        pod = read_pod(cluster, namespace, name)
        return pod, events_for(cluster, namespace, pod)

    return retrying(last)
