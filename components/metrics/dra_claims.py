"""Which DRA devices each claim of a tenant holds, as Prometheus series: the chargeback source of
the ``gpuSharing: dra`` path (docs/metrics.md, "DRA claims").

**Why our own.** kube-state-metrics v2.20.0 (the platform's, for the backup alerts) has no
ResourceClaim store, only ``kube_pod_resourceclaim_info`` (pod -> claim name, no device:
internal/store/pod.go:673-700), and its custom-resource-state feature resolves a configured
group/version/kind only from the CustomResourceDefinitions it watches
(internal/discovery/discovery.go:129-186 informs on ``customresourcedefinitions``;
ResolveGVKToGVKPs :188-270 answers from that cache alone), so a built-in
``resource.k8s.io/v1 ResourceClaim`` yields no metric at all (kubernetes/kube-state-metrics
issue #2681; the fix, PR #2953, is an unmerged draft). Neither kube-scheduler, the kubelet
(``dra_resource_claims_in_use`` counts claims per driver and node, not devices or tenants:
kubernetes v1.35.0 pkg/kubelet/metrics/metrics.go:1081-1086) nor dra-example-driver v0.4.0
(prepare/unprepare counters only, pkg/metrics/driver.go:31-70) export who holds which device.

**What it reads** (k8s.io/api v0.35.0 resource/v1/types.go): every ResourceClaim's
``status.allocation.devices.results[]`` (``driver``, ``pool``, ``device``, ``consumedCapacity``:
:1563, 1585-1699) and ``status.reservedFor[]`` (:1475, 1509-1530), and every ResourceSlice's
``spec.driver``, ``spec.pool.name``, ``spec.devices[].capacity`` (:113, 160, 309, 455-470).

**What it bills**: only the results of the tenant's GPU driver(s), which the program passes in
``DRA_CLAIMS_DRIVERS`` (comma-separated; the substrate's ``dra_driver(...).driver``:
dra-example-driver's ``gpu.example.com`` in the lab, NVIDIA's ``gpu.nvidia.com`` in prod): a
device of another driver in the tenant (NVIDIA's ``compute-domain.nvidia.com``, a NIC) is not a
GPU card. A result with ``adminAccess: true`` is skipped: admin access reaches a device without
taking it, and another claim may hold the same device (k8s.io/api v0.35.0
resource/v1/types.go:1626-1636; the DRAAdminAccess gate is on by default from v1.34, kubernetes
v1.35.0 pkg/features/kube_features.go:1227-1230). The acceptance suite's TC-18 reference
(tests/acceptance/dra_evidence.py ``dra_granted``) counts the same way.

**What it writes**, per billed device (or share of one) of a claim (labels ``namespace``,
``claim``, ``pod`` (the pods it is reserved for, comma-separated), ``driver``, ``pool``,
``device``, ``share``: the result's ``shareID``, empty for a whole device; with
``DRAConsumableCapacity`` one claim may hold two shares of one device, told apart by it:
resource/v1/types.go:1678-1686):

* ``gpu_platform_dra_device_allocated_cards``: the share of the device the claim holds, 1 for a
  whole device (every DRA allocation at v1.35 with its default gates); with
  ``DRAConsumableCapacity`` a result's ``consumedCapacity.compute`` over the device's
  ``compute`` capacity (the share, as HAMi's ``gpucores`` / 100);
* ``gpu_platform_dra_device_memory_allocated_bytes``: ``consumedCapacity.memory`` when present,
  else, for a whole device (no ``shareID``), the device's whole ``memory`` capacity (none when
  the device publishes no ``memory``). A share without a memory amount writes no memory:
  billing each of N sharers the whole memory would bill it N times.

A claim the scheduler allocated holds its devices until it is deallocated, which the
resourceclaim controller does once no pod uses it (kubernetes v1.35.0
pkg/controller/resourceclaim/controller.go:843-872); a claim generated for a pod that is gone is
then removed by the garbage collector, the pod being its owner (the controller deletes it itself
only while the pod still exists, :902-925): so an allocated claim is a held card, billed like
HAMi's grant to a bound pod.

Standard library only: the file is also the container's program (``main``), run by a pinned
Python image inside the tenant, where it lists both kinds through the API server with its
ServiceAccount when scraped. **Its memory stays bounded** (64Mi limit): each list is read
``PAGE`` (500) items at a time with the ``continue`` token, and each page is cut to the fields
``samples`` reads (``slim_claim``, ``slim_slice``: no managedFields) before the next is read.
**Its time too**: both lists must finish within ``DEADLINE_SECONDS`` (8 s, under Prometheus'
default 10 s scrape timeout, which the agent keeps), and scrapes that overlap or come within
``FRESH_SECONDS`` of a listing share it (one listing in flight), so a slow API server never
piles up threads. ``render`` is pure and unit-tested.
"""

from __future__ import annotations

import json
import os
import re
import ssl
import threading
import time
import urllib.parse
import urllib.request
from collections.abc import Callable, Iterable, Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

CARDS = "gpu_platform_dra_device_allocated_cards"
MEMORY = "gpu_platform_dra_device_memory_allocated_bytes"
LABELS = ("namespace", "claim", "pod", "driver", "pool", "device", "share")
PORT = 9102
CLAIMS_PATH = "/apis/resource.k8s.io/v1/resourceclaims"
SLICES_PATH = "/apis/resource.k8s.io/v1/resourceslices"
_SERVICE_ACCOUNT = "/var/run/secrets/kubernetes.io/serviceaccount"

_HELP = {
    CARDS: "Share of a DRA device a ResourceClaim holds (1 = the whole device).",
    MEMORY: "Bytes of a DRA device's memory a ResourceClaim holds.",
}

# apimachinery resource.Quantity suffixes (k8s.io/apimachinery v0.35.0
# pkg/api/resource/suffix.go): binary, decimal SI, and milli.
_SUFFIXES = {
    "Ki": 2**10,
    "Mi": 2**20,
    "Gi": 2**30,
    "Ti": 2**40,
    "Pi": 2**50,
    "Ei": 2**60,
    "m": 10**-3,
    "": 1,
    "k": 10**3,
    "M": 10**6,
    "G": 10**9,
    "T": 10**12,
    "P": 10**15,
    "E": 10**18,
}
_QUANTITY = re.compile(r"^([+-]?[0-9.]+(?:[eE][+-]?[0-9]+)?)(Ki|Mi|Gi|Ti|Pi|Ei|m|k|M|G|T|P|E)?$")


def quantity(text: object) -> float | None:
    """A Kubernetes quantity (``80Gi``, ``100``, ``500m``) as a number; None if unreadable."""
    matched = _QUANTITY.match(str(text).strip())
    if matched is None:
        return None
    return float(matched.group(1)) * _SUFFIXES[matched.group(2) or ""]


def _capacities(slices: Iterable[Mapping[str, Any]]) -> dict[tuple[str, str, str], dict[str, Any]]:
    """(driver, pool, device) -> the device's capacity map."""
    found: dict[tuple[str, str, str], dict[str, Any]] = {}
    for item in slices:
        spec = item.get("spec") or {}
        driver = str(spec.get("driver", ""))
        pool = str((spec.get("pool") or {}).get("name", ""))
        for device in spec.get("devices") or []:
            found[(driver, pool, str(device.get("name", "")))] = dict(device.get("capacity") or {})
    return found


def _capacity(capacity: Mapping[str, Any], name: str) -> float | None:
    entry = capacity.get(name)
    return quantity(entry.get("value")) if isinstance(entry, Mapping) else None


def _escape(value: str) -> str:
    return value.replace("\\", "\\\\").replace("\n", "\\n").replace('"', '\\"')


def samples(
    claims: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    drivers: Iterable[str],
) -> list[tuple[str, dict[str, str], float]]:
    """``(series, labels, value)`` for every device of ``drivers`` every claim holds, admin
    access left out (pure)."""
    billed = frozenset(drivers)
    capacities = _capacities(slices)
    out: list[tuple[str, dict[str, str], float]] = []
    for claim in claims:
        meta = claim.get("metadata") or {}
        status = claim.get("status") or {}
        results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
        pods = sorted(
            str(r.get("name", ""))
            for r in status.get("reservedFor") or []
            if r.get("resource") == "pods"
        )
        for result in results:
            if result.get("driver") not in billed or result.get("adminAccess") is True:
                continue
            key = (str(result.get("driver", "")), str(result.get("pool", "")))
            key3 = (*key, str(result.get("device", "")))
            names = (str(meta.get("namespace", "")), str(meta.get("name", "")), ",".join(pods))
            share_id = str(result.get("shareID") or "")
            labels = dict(zip(LABELS, (*names, *key3, share_id), strict=True))
            capacity = capacities.get(key3, {})
            consumed = result.get("consumedCapacity") or {}
            share = 1.0
            if "compute" in consumed:
                whole = _capacity(capacity, "compute")
                used = quantity(consumed["compute"])
                if whole and used is not None:
                    share = used / whole
            out.append((CARDS, labels, share))
            memory = quantity(consumed["memory"]) if "memory" in consumed else None
            if memory is None and not share_id:
                memory = _capacity(capacity, "memory")
            if memory is not None:
                out.append((MEMORY, labels, memory))
    return out


def render(
    claims: Iterable[Mapping[str, Any]],
    slices: Iterable[Mapping[str, Any]],
    drivers: Iterable[str],
) -> str:
    """The Prometheus text exposition (format 0.0.4) of ``samples``."""
    rows = samples(claims, slices, drivers)
    lines: list[str] = []
    for name in (CARDS, MEMORY):
        lines += [f"# HELP {name} {_HELP[name]}", f"# TYPE {name} gauge"]
        for series, labels, value in rows:
            if series == name:
                text = ",".join(f'{k}="{_escape(v)}"' for k, v in labels.items())
                lines.append(f"{name}{{{text}}} {value!r}")
    return "\n".join(lines) + "\n"


# ----------------------------------------------------------------------------- the container


def drivers_of(text: str) -> tuple[str, ...]:
    """The billed drivers from ``DRA_CLAIMS_DRIVERS`` (comma-separated)."""
    return tuple(sorted({name.strip() for name in text.split(",") if name.strip()}))


PAGE = 500  # items per list request
DEADLINE_SECONDS = 8.0  # every page of both lists, within the agent's 10 s scrape timeout
FRESH_SECONDS = 5.0  # scrapes within this share one listing (and one outcome)


def slim_claim(item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ResourceClaim ``samples`` reads, nothing else (no managedFields, specs)."""
    meta = item.get("metadata") or {}
    status = item.get("status") or {}
    results = ((status.get("allocation") or {}).get("devices") or {}).get("results") or []
    return {
        "metadata": {"namespace": meta.get("namespace") or "", "name": meta.get("name") or ""},
        "status": {
            "allocation": {"devices": {"results": [dict(r) for r in results]}},
            "reservedFor": [
                {"resource": r.get("resource"), "name": r.get("name")}
                for r in status.get("reservedFor") or []
            ],
        },
    }


def slim_slice(item: Mapping[str, Any]) -> dict[str, Any]:
    """The fields of a ResourceSlice ``samples`` reads: driver, pool and devices' capacities."""
    spec = item.get("spec") or {}
    return {
        "spec": {
            "driver": spec.get("driver") or "",
            "pool": {"name": (spec.get("pool") or {}).get("name") or ""},
            "devices": [
                {"name": d.get("name") or "", "capacity": d.get("capacity") or {}}
                for d in spec.get("devices") or []
            ],
        }
    }


def _list(
    api: str,
    path: str,
    token: str,
    context: ssl.SSLContext | None,
    slim: Callable[[Mapping[str, Any]], dict[str, Any]],
    deadline: float,
) -> list[dict[str, Any]]:
    """Every item at ``path``, ``PAGE`` at a time (``limit`` and the ``continue`` token of the
    answer's ListMeta: k8s.io/apimachinery v0.35.0 pkg/apis/meta/v1/types.go:82, 391, 406),
    each page cut to what ``slim`` keeps before the next is read; past ``deadline``
    (``time.monotonic``) it raises. An expired token (410) fails the list: never a partial
    one."""
    items: list[dict[str, Any]] = []
    token_continue = ""
    while True:
        query = {"limit": str(PAGE), **({"continue": token_continue} if token_continue else {})}
        url = f"{api}{path}?{urllib.parse.urlencode(query)}"
        remaining = deadline - time.monotonic()
        if remaining <= 0:
            raise TimeoutError(f"listing {path} took longer than {DEADLINE_SECONDS} s")
        request = urllib.request.Request(url, headers={"Authorization": f"Bearer {token}"})
        with urllib.request.urlopen(request, context=context, timeout=remaining) as answer:
            page = json.load(answer)
        items += [slim(item) for item in page.get("items") or []]
        token_continue = str((page.get("metadata") or {}).get("continue") or "")
        del page
        if not token_continue:
            return items


def server(
    api: str,
    account: str,
    context: ssl.SSLContext | None,
    port: int,
    drivers: Iterable[str],
    fresh_seconds: float = FRESH_SECONDS,
) -> ThreadingHTTPServer:
    """The ``/metrics`` server: a scrape lists claims and slices at ``api`` with the token in
    ``account`` (read each time: the kubelet rotates it) and bills the devices of ``drivers``;
    a failed list answers 503, never a partial page. Concurrent scrapes, and any within
    ``fresh_seconds`` of a listing, share its outcome: one listing in flight at a time."""
    billed = tuple(drivers)
    lock = threading.Lock()
    last: list[tuple[float, bytes | Exception]] = []  # the latest (when, page or failure)

    def page() -> bytes:
        with lock:
            now = time.monotonic()
            if not last or now - last[0][0] >= fresh_seconds:
                outcome: bytes | Exception
                try:
                    with open(f"{account}/token", encoding="utf-8") as handle:
                        token = handle.read().strip()
                    deadline = now + DEADLINE_SECONDS
                    outcome = render(
                        _list(api, CLAIMS_PATH, token, context, slim_claim, deadline),
                        _list(api, SLICES_PATH, token, context, slim_slice, deadline),
                        billed,
                    ).encode()
                except Exception as exc:
                    outcome = exc
                last[:] = [(time.monotonic(), outcome)]
            result = last[0][1]
        if isinstance(result, Exception):
            raise result
        return result

    class Handler(BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            if self.path != "/metrics":
                self.send_error(404)
                return
            try:
                body = page()
            except Exception as exc:
                self.send_error(503, f"listing ResourceClaims failed: {type(exc).__name__}")
                return
            self.send_response(200)
            self.send_header("Content-Type", "text/plain; version=0.0.4")
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    return ThreadingHTTPServer(("", port), Handler)


def main() -> None:  # pragma: no cover - in the container: the API server the kubelet names
    """Serve ``/metrics`` on ``PORT`` with the pod's ServiceAccount, through the API server the
    kubelet names to every pod (its CA from the ServiceAccount volume), billing the drivers the
    program names in ``DRA_CLAIMS_DRIVERS``."""
    drivers = drivers_of(os.environ["DRA_CLAIMS_DRIVERS"])
    api = f"https://{os.environ['KUBERNETES_SERVICE_HOST']}:{os.environ['KUBERNETES_SERVICE_PORT']}"
    context = ssl.create_default_context(cafile=f"{_SERVICE_ACCOUNT}/ca.crt")
    server(api, _SERVICE_ACCOUNT, context, PORT, drivers).serve_forever()


if __name__ == "__main__":  # pragma: no cover
    main()
