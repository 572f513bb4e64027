"""The DRA claims exporter (``components.metrics.dra_claims``): what it writes for the claims and
slices of a ``gpuSharing: dra`` tenant, on the DRA acceptance samples (constructed in the
resource.k8s.io/v1 format of k8s.io/api v0.35.0, ``tests/acceptance/samples/dra.yaml``)."""

from __future__ import annotations

import copy
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.metrics import dra_claims, scrape, series
from tests.acceptance.hami_metrics import parse_exposition

SAMPLE = Path(__file__).resolve().parents[1] / "acceptance" / "samples" / "dra.yaml"
CARD = 80 * 1024**3
DRIVERS = ("gpu.example.com",)  # the lab's dra-example-driver v0.4.0


@pytest.fixture(scope="module")
def sample() -> dict[str, Any]:
    return yaml.safe_load(SAMPLE.read_text())


def _page(claims: list[dict[str, Any]], slices: list[dict[str, Any]]) -> dict[str, Any]:
    return {
        (s.name, s.labels["device"], s.labels["claim"]): (dict(s.labels), s.value)
        for s in parse_exposition(dra_claims.render(claims, slices, DRIVERS))
    }


def test_a_whole_card_claim_writes_one_card_and_its_memory(sample: dict[str, Any]) -> None:
    page = _page([sample["claim"]], sample["slices"])
    labels = {
        "namespace": "acceptance-q7m2xa",
        "claim": "dra-whole-gpu-5xk8d",
        "pod": "dra-whole",
        "driver": "gpu.example.com",
        "pool": "tenant-a-a100-0",
        "device": "gpu-0",
        "share": "",
    }
    assert page == {
        (dra_claims.CARDS, "gpu-0", "dra-whole-gpu-5xk8d"): (labels, 1.0),
        (dra_claims.MEMORY, "gpu-0", "dra-whole-gpu-5xk8d"): (labels, float(CARD)),
    }


def test_an_unallocated_or_deleted_claim_writes_nothing(sample: dict[str, Any]) -> None:
    pending = copy.deepcopy(sample["claim"])
    pending["status"] = {}
    assert _page([pending], sample["slices"]) == {}
    assert _page([], sample["slices"]) == {}


def test_only_the_tenants_gpu_driver_is_billed_and_admin_access_is_not(
    sample: dict[str, Any],
) -> None:
    """Another driver's device (NVIDIA's compute-domain.nvidia.com) is not a GPU card, and an
    adminAccess result reaches a device another claim may hold (k8s.io/api v0.35.0
    resource/v1/types.go:1626-1636): neither is billed; the GPU device beside them still is."""
    claim = copy.deepcopy(sample["claim"])
    results = claim["status"]["allocation"]["devices"]["results"]
    gpu = results[0]
    results.append({**gpu, "driver": "compute-domain.nvidia.com", "device": "channel-0"})
    results.append({**gpu, "device": "gpu-1", "adminAccess": True})
    page = _page([claim], sample["slices"])
    assert set(page) == {
        (dra_claims.CARDS, "gpu-0", "dra-whole-gpu-5xk8d"),
        (dra_claims.MEMORY, "gpu-0", "dra-whole-gpu-5xk8d"),
    }
    admin = copy.deepcopy(sample["claim"])
    admin["status"]["allocation"]["devices"]["results"][0]["adminAccess"] = True
    assert _page([admin], sample["slices"]) == {}
    assert dra_claims.render([sample["claim"]], sample["slices"], ()) == dra_claims.render(
        [], [], DRIVERS
    )


def test_the_billed_drivers_are_read_from_the_environment_text() -> None:
    assert dra_claims.drivers_of("gpu.nvidia.com") == ("gpu.nvidia.com",)
    assert dra_claims.drivers_of(" b.x , a.x,,b.x ") == ("a.x", "b.x")
    assert dra_claims.drivers_of("") == ()


def test_a_consumed_share_is_billed_as_its_fraction(sample: dict[str, Any]) -> None:
    """With DRAConsumableCapacity (alpha, off at v1.35) a result carries consumedCapacity."""
    claim = copy.deepcopy(sample["claim"])
    result = claim["status"]["allocation"]["devices"]["results"][0]
    result["consumedCapacity"] = {"compute": "30", "memory": "20000Mi"}
    page = _page([claim], sample["slices"])
    assert page[(dra_claims.CARDS, "gpu-0", "dra-whole-gpu-5xk8d")][1] == pytest.approx(0.3)
    assert page[(dra_claims.MEMORY, "gpu-0", "dra-whole-gpu-5xk8d")][1] == 20000 * 1024**2


def test_two_shares_of_one_device_are_two_series_and_bill_no_whole_memory(
    sample: dict[str, Any],
) -> None:
    """With DRAConsumableCapacity a claim may hold two shares of one device, told apart by
    their shareID (k8s.io/api v0.35.0 resource/v1/types.go:1678-1686): each is its own series
    (``share``), and a share without a memory amount bills no memory (the device's whole
    memory for each of N sharers would bill it N times); a whole device still falls back."""
    claim = copy.deepcopy(sample["claim"])
    results = claim["status"]["allocation"]["devices"]["results"]
    gpu = results[0]
    results[:] = [
        {**gpu, "shareID": "uid-1", "consumedCapacity": {"compute": "25"}},
        {**gpu, "shareID": "uid-2", "consumedCapacity": {"compute": "25", "memory": "10Gi"}},
    ]
    rows = [
        (name, labels["share"], value)
        for name, labels, value in dra_claims.samples([claim], sample["slices"], DRIVERS)
    ]
    assert sorted(rows) == [
        (dra_claims.CARDS, "uid-1", 0.25),
        (dra_claims.CARDS, "uid-2", 0.25),
        (dra_claims.MEMORY, "uid-2", float(10 * 2**30)),
    ]
    page = dra_claims.render([claim], sample["slices"], DRIVERS)
    assert len(parse_exposition(page)) == 3  # no two samples with the same labels


def test_a_device_without_a_slice_is_still_one_card_without_memory(sample: dict[str, Any]) -> None:
    page = _page([sample["claim"]], [])
    assert set(page) == {(dra_claims.CARDS, "gpu-0", "dra-whole-gpu-5xk8d")}


@pytest.mark.parametrize(
    ("text", "value"),
    [("80Gi", 80 * 2**30), ("100", 100.0), ("500m", 0.5), ("1.5G", 1.5e9), ("x", None)],
)
def test_quantities(text: str, value: float | None) -> None:
    assert dra_claims.quantity(text) == value


def test_label_values_are_escaped() -> None:
    claim = {
        "metadata": {"namespace": "n", "name": 'we"ird'},
        "status": {
            "allocation": {
                "devices": {
                    "results": [{"driver": "d", "pool": "p", "device": "g", "request": "r"}]
                }
            }
        },
    }
    (sample,) = parse_exposition(dra_claims.render([claim], [], ("d",)))
    assert sample.labels["claim"] == 'we"ird'  # escaped on the page, read back


def test_the_series_are_declared_with_their_labels() -> None:
    for name in (dra_claims.CARDS, dra_claims.MEMORY):
        assert series.TRACED[name].labels == dra_claims.LABELS
        assert series.TRACED[name].source == series.DRA_SERIES


@pytest.mark.skipif(shutil.which("promtool") is None, reason="promtool not installed")
def test_promtool_accepts_the_page(sample: dict[str, Any]) -> None:
    page = dra_claims.render([sample["claim"]], sample["slices"], DRIVERS)
    done = subprocess.run(
        ["promtool", "check", "metrics"], input=page, capture_output=True, text=True, check=False
    )
    assert done.returncode == 0, done.stdout + done.stderr


def test_the_agents_dra_job_keeps_exactly_the_exporters_series() -> None:
    source = scrape.DRA_CLAIMS_SOURCE
    assert source.kept_names() == tuple(sorted((dra_claims.CARDS, dra_claims.MEMORY)))
    assert source.port == dra_claims.PORT


def test_the_exporters_objects_are_valid_and_may_only_list_claims_and_slices() -> None:
    from components.metrics import objects
    from tests.support.kube_schemas import builtin_violations

    manifests = objects.dra_claims_exporter("hami-system", ["gpu.example.com"])
    assert [m["kind"] for m in manifests] == [
        "ServiceAccount",
        "ClusterRole",
        "ClusterRoleBinding",
        "Deployment",
    ]
    for manifest in manifests:
        assert builtin_violations("v1.35.0", manifest) == [], manifest["kind"]
    assert manifests[1]["rules"] == [
        {
            "apiGroups": ["resource.k8s.io"],
            "resources": ["resourceclaims", "resourceslices"],
            "verbs": ["list"],
        }
    ]
    pod = manifests[3]["spec"]["template"]["spec"]
    (container,) = pod["containers"]
    assert container["command"][:2] == ["python3", "-c"]
    assert container["command"][2] == Path(dra_claims.__file__).read_text()
    assert container["ports"] == [{"name": "metrics", "containerPort": dra_claims.PORT}]
    assert container["env"] == [{"name": "DRA_CLAIMS_DRIVERS", "value": "gpu.example.com"}]
    with pytest.raises(ValueError, match="GPU driver"):
        objects.dra_claims_exporter("hami-system", [])
    assert container["securityContext"]["runAsNonRoot"] is True
    assert objects.requests_of(manifests) == (10, 32 * 2**20)


class _FakeApi:
    """A fake API server (plain HTTP here; in the pod it is the API server over TLS with the
    ServiceAccount's CA) answering LISTs in pages as kube-apiserver does: ``limit`` items, and
    ``metadata.continue`` while more remain (k8s.io/apimachinery v0.35.0
    pkg/apis/meta/v1/types.go:82, 391, 406); a token it no longer knows answers 410."""

    def __init__(self, answers: dict[str, list[dict[str, Any]]]) -> None:
        import http.server
        import json
        import time
        import urllib.parse

        self.answers = answers
        self.seen: list[tuple[str, dict[str, str], str]] = []
        self.expired: set[str] = set()
        self.delay = 0.0
        fake = self

        class Api(http.server.BaseHTTPRequestHandler):
            def do_GET(self) -> None:
                parsed = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parsed.query))
                fake.seen.append((parsed.path, query, self.headers.get("Authorization", "")))
                if parsed.path not in fake.answers:
                    self.send_error(403)
                    return
                time.sleep(fake.delay)
                if query.get("continue", "") in fake.expired:
                    self.send_error(410)
                    return
                items = fake.answers[parsed.path]
                start = int(query.get("continue") or 0)
                end = start + int(query.get("limit") or len(items))
                meta = {"continue": str(end)} if end < len(items) else {}
                body = json.dumps({"metadata": meta, "items": items[start:end]}).encode()
                self.send_response(200)
                self.send_header("Content-Length", str(len(body)))
                self.end_headers()
                self.wfile.write(body)

            def log_message(self, format: str, *args: Any) -> None:
                return

        self.server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.server.server_port}"


def _serving(*servers: Any) -> Any:
    import contextlib
    import threading

    @contextlib.contextmanager
    def running() -> Any:
        threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in servers]
        for thread in threads:
            thread.start()
        try:
            yield
        finally:
            for s in servers:
                s.shutdown()
                s.server_close()

    return running()


def _claims(sample: dict[str, Any], count: int) -> list[dict[str, Any]]:
    """``count`` claims like the sample, each with the managedFields a real LIST carries."""
    claims = []
    for index in range(count):
        claim = copy.deepcopy(sample["claim"])
        claim["metadata"]["name"] = f"claim-{index}"
        claim["metadata"]["managedFields"] = [{"manager": "kube-scheduler", "fieldsV1": {}}]
        claims.append(claim)
    return claims


def test_the_slimmed_objects_render_the_same_page(sample: dict[str, Any]) -> None:
    claims = _claims(sample, 2)
    slim = [dra_claims.slim_claim(c) for c in claims]
    slices = [dra_claims.slim_slice(s) for s in sample["slices"]]
    assert "managedFields" not in slim[0]["metadata"]
    assert dra_claims.render(slim, slices, DRIVERS) == dra_claims.render(
        claims, sample["slices"], DRIVERS
    )


def test_the_server_lists_page_by_page_with_the_token(
    sample: dict[str, Any], tmp_path: Path
) -> None:
    """The container's own path: 1,201 claims come in three pages of 500 (the ``continue``
    token followed), the slices in one, each request with the ServiceAccount's token; the page
    is the whole of both lists."""
    import urllib.request

    claims = _claims(sample, 1201)
    api = _FakeApi({dra_claims.CLAIMS_PATH: claims, dra_claims.SLICES_PATH: sample["slices"]})
    (tmp_path / "token").write_text("t0ken\n")
    exporter = dra_claims.server(api.url, str(tmp_path), None, 0, DRIVERS)
    with _serving(api.server, exporter):
        url = f"http://127.0.0.1:{exporter.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            page = answer.read().decode()
    assert page == dra_claims.render(claims, sample["slices"], DRIVERS)
    assert len(parse_exposition(page)) == 2 * 1201
    assert api.seen == [
        (dra_claims.CLAIMS_PATH, {"limit": "500"}, "Bearer t0ken"),
        (dra_claims.CLAIMS_PATH, {"limit": "500", "continue": "500"}, "Bearer t0ken"),
        (dra_claims.CLAIMS_PATH, {"limit": "500", "continue": "1000"}, "Bearer t0ken"),
        (dra_claims.SLICES_PATH, {"limit": "500"}, "Bearer t0ken"),
    ]


def test_overlapping_scrapes_share_one_listing(sample: dict[str, Any], tmp_path: Path) -> None:
    """Scrapes that overlap, or come within the freshness window, share one listing: the API
    server is listed once for five scrapes, and each gets the same page."""
    import threading
    import urllib.request

    api = _FakeApi(
        {dra_claims.CLAIMS_PATH: [sample["claim"]], dra_claims.SLICES_PATH: sample["slices"]}
    )
    (tmp_path / "token").write_text("t0ken\n")
    exporter = dra_claims.server(api.url, str(tmp_path), None, 0, DRIVERS, fresh_seconds=60)
    pages: list[str] = []

    def scrape() -> None:
        url = f"http://127.0.0.1:{exporter.server_port}/metrics"
        with urllib.request.urlopen(url, timeout=10) as answer:
            pages.append(answer.read().decode())

    with _serving(api.server, exporter):
        scrapers = [threading.Thread(target=scrape) for _ in range(4)]
        for thread in scrapers:
            thread.start()
        for thread in scrapers:
            thread.join()
        scrape()
    assert [path for path, _, _ in api.seen] == [dra_claims.CLAIMS_PATH, dra_claims.SLICES_PATH]
    assert pages == [dra_claims.render([sample["claim"]], sample["slices"], DRIVERS)] * 5


def test_a_failed_or_expired_list_answers_503_never_a_partial_page(
    sample: dict[str, Any], tmp_path: Path
) -> None:
    """A list refused, or a continue token expired mid-list (410), answers 503: no page
    without the claims, none with only their first pages."""
    import urllib.error
    import urllib.request

    api = _FakeApi({dra_claims.CLAIMS_PATH: _claims(sample, 600), dra_claims.SLICES_PATH: []})
    (tmp_path / "token").write_text("t0ken\n")
    exporter = dra_claims.server(api.url, str(tmp_path), None, 0, DRIVERS, fresh_seconds=0)
    url = f"http://127.0.0.1:{exporter.server_port}/metrics"
    with _serving(api.server, exporter):
        with urllib.request.urlopen(url, timeout=10) as answer:
            assert answer.status == 200
        api.expired.add("500")
        with pytest.raises(urllib.error.HTTPError) as expired:
            urllib.request.urlopen(url, timeout=10)
        assert expired.value.code == 503
        api.expired.clear()
        del api.answers[dra_claims.SLICES_PATH]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 503


def test_a_list_slower_than_the_deadline_answers_503_in_time(
    sample: dict[str, Any], tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Both lists must end within the deadline (8 s, under the 10 s scrape timeout; 0.3 s
    here): an API server answering each page in 0.2 s fails a three-page listing with 503 by
    then, rather than a thread that outlives the scrape."""
    import time
    import urllib.error
    import urllib.request

    monkeypatch.setattr(dra_claims, "DEADLINE_SECONDS", 0.3)
    api = _FakeApi({dra_claims.CLAIMS_PATH: _claims(sample, 1201), dra_claims.SLICES_PATH: []})
    api.delay = 0.2
    (tmp_path / "token").write_text("t0ken\n")
    exporter = dra_claims.server(api.url, str(tmp_path), None, 0, DRIVERS, fresh_seconds=0)
    url = f"http://127.0.0.1:{exporter.server_port}/metrics"
    with _serving(api.server, exporter):
        began = time.monotonic()
        with pytest.raises(urllib.error.HTTPError) as late:
            urllib.request.urlopen(url, timeout=10)
        took = time.monotonic() - began
    assert late.value.code == 503
    assert took < 1.5, took  # never the whole listing (>= 0.6 s)
    assert len(api.seen) <= 2  # no third page was asked for
