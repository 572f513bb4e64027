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


def test_the_server_lists_with_the_token_on_every_scrape_and_refuses_a_partial_page(
    sample: dict[str, Any], tmp_path: Path
) -> None:
    """The container's own path, against a fake API server (plain HTTP here; in the pod it is
    the API server over TLS with the ServiceAccount's CA): the token is sent, both kinds are
    listed, and a failing list answers 503 rather than a page without the claims."""
    import http.server
    import json
    import threading
    import urllib.error
    import urllib.request

    seen: list[tuple[str, str]] = []
    answers = {
        dra_claims.CLAIMS_PATH: {"items": [sample["claim"]]},
        dra_claims.SLICES_PATH: {"items": sample["slices"]},
    }

    class Api(http.server.BaseHTTPRequestHandler):
        def do_GET(self) -> None:
            seen.append((self.path, self.headers.get("Authorization", "")))
            if self.path not in answers:
                self.send_error(403)
                return
            body = json.dumps(answers[self.path]).encode()
            self.send_response(200)
            self.send_header("Content-Length", str(len(body)))
            self.end_headers()
            self.wfile.write(body)

        def log_message(self, format: str, *args: Any) -> None:
            return

    api = http.server.ThreadingHTTPServer(("127.0.0.1", 0), Api)
    (tmp_path / "token").write_text("t0ken\n")
    exporter = dra_claims.server(
        f"http://127.0.0.1:{api.server_port}", str(tmp_path), None, 0, DRIVERS
    )
    threads = [threading.Thread(target=s.serve_forever, daemon=True) for s in (api, exporter)]
    for thread in threads:
        thread.start()
    url = f"http://127.0.0.1:{exporter.server_port}/metrics"
    try:
        with urllib.request.urlopen(url, timeout=10) as answer:
            page = answer.read().decode()
        assert page == dra_claims.render([sample["claim"]], sample["slices"], DRIVERS)
        assert seen == [
            (dra_claims.CLAIMS_PATH, "Bearer t0ken"),
            (dra_claims.SLICES_PATH, "Bearer t0ken"),
        ]
        del answers[dra_claims.SLICES_PATH]
        with pytest.raises(urllib.error.HTTPError) as refused:
            urllib.request.urlopen(url, timeout=10)
        assert refused.value.code == 503
    finally:
        for s in (api, exporter):
            s.shutdown()
            s.server_close()
