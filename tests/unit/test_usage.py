"""``make usage`` on recorded query results.

``samples/metrics/usage-3h.json`` holds the answers a real Prometheus (Debian's 2.42) gave to
every query the usage command sends, over the rules' outputs for the HAMi-shaped scenario of
``tests/support/metrics_scenario.py`` (recorded by ``tests/support/record_usage_samples.py``).
The expected numbers are the scenario's by hand: every pod ran the whole 3 h window.
"""

from __future__ import annotations

import base64
import csv
import io
import json
import os
import threading
import urllib.parse
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.metrics import auth, usage
from tests.support import metrics_scenario as scenario

SAMPLE = Path(__file__).with_name("samples") / "metrics" / "usage-3h.json"
RECORDED: dict[str, Any] = json.loads(SAMPLE.read_text())
HOURS = 3


def recorded_query(expr: str) -> Mapping[str, Any]:
    responses = RECORDED["responses"]
    assert expr in responses, (
        f"no recorded answer for {expr!r}: the usage queries changed, re-record with "
        "python -m tests.support.record_usage_samples"
    )
    answer: Mapping[str, Any] = responses[expr]
    return answer


def test_the_report_integrates_allocation_and_use_per_tenant() -> None:
    rows = {row.tenant: row for row in usage.report(RECORDED["window"], recorded_query)}
    expected = scenario.expected_per_tenant()
    assert set(rows) == set(expected) == {"tenant-a", "tenant-b"}
    for tenant, want in expected.items():
        row = rows[tenant]
        assert row.memory_allocated_gib_hours == pytest.approx(want["mem_alloc"] * HOURS)
        assert row.memory_used_gib_hours == pytest.approx(want["mem_used"] * HOURS)
        assert row.cores_allocated_card_hours == pytest.approx(want["core_alloc"] * HOURS)
        assert row.cores_used_card_hours == pytest.approx(want["core_used"] * HOURS)
        assert row.memory_efficiency == pytest.approx(want["mem_used"] / want["mem_alloc"])
        assert row.cores_efficiency == pytest.approx(want["core_used"] / want["core_alloc"])
    # tenant-a: 3 pods x 20000 MiB for 3 h = 175.78125 GiB-hours, half of it used.
    assert rows["tenant-a"].memory_allocated_gib_hours == pytest.approx(3 * 20000 / 1024 * 3)


def test_a_tenant_that_only_used_has_no_efficiency() -> None:
    def query(expr: str) -> Mapping[str, Any]:
        answer = json.loads(json.dumps(recorded_query(expr)))
        if "allocated" in expr:
            answer["data"]["result"] = []
        return answer

    rows = usage.report(RECORDED["window"], query)
    assert rows
    assert all(r.memory_efficiency is None for r in rows)
    assert all(r.cores_efficiency is None for r in rows)


def test_an_error_or_a_sample_without_tenant_is_refused() -> None:
    with pytest.raises(usage.UsageError, match="error"):
        usage.vector({"status": "error", "error": "bad query"})
    with pytest.raises(usage.UsageError, match="tenant"):
        usage.vector(
            {
                "status": "success",
                "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0, "1"]}]},
            }
        )


@pytest.mark.parametrize("window", ["0d", "7", "1y", "-1h", "1.5h"])
def test_a_bad_window_is_refused(window: str) -> None:
    with pytest.raises(usage.UsageError):
        usage.window_seconds(window)


def test_table_csv_and_json_carry_the_same_rows() -> None:
    rows = usage.report(RECORDED["window"], recorded_query)
    end = datetime.fromtimestamp(RECORDED["end"], UTC)
    table = usage.as_table(rows, "3h", end)
    assert "tenant-a" in table
    assert "175.78" in table
    assert "50.0%" in table
    parsed = list(csv.DictReader(io.StringIO(usage.as_csv(rows))))
    assert [r["tenant"] for r in parsed] == ["tenant-a", "tenant-b"]
    assert float(parsed[1]["memory_allocated_gib_hours"]) == pytest.approx(12000 / 1024 * 3)
    document = json.loads(usage.as_json(rows, "3h", end))
    assert document["units"]["memory"] == "GiB-hours"
    assert document["tenants"][0]["cores_allocated_card_hours"] == pytest.approx(0.9 * 3)


class _Prometheus(BaseHTTPRequestHandler):
    def do_GET(self) -> None:
        query = urllib.parse.parse_qs(urllib.parse.urlparse(self.path).query)
        body = json.dumps(RECORDED["responses"].get(query["query"][0], {"status": "error"}))
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body.encode())

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _Prometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _script() -> Any:
    import importlib.util

    path = Path(__file__).resolve().parents[2] / "scripts" / "usage.py"
    spec = importlib.util.spec_from_file_location("usage_script", path)
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_the_command_prints_the_table_and_writes_csv(
    prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    assert script.main(["--prometheus", prometheus, "--window", "3h"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].startswith("GPU usage per tenant, 3h ending")
    assert "tenant-b" in out
    target = tmp_path / "usage.csv"
    assert (
        script.main(
            [
                "--prometheus",
                prometheus,
                "--window",
                "3h",
                "--format",
                "csv",
                "--output",
                str(target),
            ]
        )
        == 0
    )
    assert target.read_text().startswith("tenant,memory_allocated_gib_hours")


def test_the_command_refuses_a_bad_window(
    prometheus: str, capsys: pytest.CaptureFixture[str]
) -> None:
    assert _script().main(["--prometheus", prometheus, "--window", "soon"]) == 2
    assert "window" in capsys.readouterr().err


def _oldest(value: float | None) -> Any:
    def query(expr: str) -> Mapping[str, Any]:
        assert expr == usage.OLDEST_SAMPLE_QUERY
        result = [] if value is None else [{"metric": {}, "value": [0, str(value)]}]
        return {"status": "success", "data": {"resultType": "vector", "result": result}}

    return query


def test_a_window_reaching_past_the_stores_oldest_sample_is_warned_about() -> None:
    """Issue 40: a 30-day bill on a store that keeps 15 days silently billed half a month."""
    end = datetime(2026, 12, 1, tzinfo=UTC)
    fifteen_days_ago = end.timestamp() - 15 * 86400
    oldest = usage.oldest_sample(_oldest(fifteen_days_ago))
    warning = usage.coverage_warning("30d", end, oldest)
    assert warning is not None
    assert "holds samples from 2026-11-16T00:00:00Z only" in warning
    assert "the first 360.0 h of the 30d window are not in this report" in warning
    assert usage.coverage_warning("7d", end, oldest) is None
    unknown = usage.coverage_warning("7d", end, usage.oldest_sample(_oldest(None)))
    assert unknown is not None
    assert "does not say" in unknown


# ------------------------------------------------------------------- one tenant's report


def _one_tenant_server(honest: bool) -> Any:
    """A query function answering a tenant-scoped query with the recorded unscoped answer,
    reduced to the tenant the query names (``honest``) or not (a server that ignored the
    matcher)."""

    def query(expr: str) -> Mapping[str, Any]:
        unscoped = expr.replace(', tenant="tenant-b"', "")
        answer = json.loads(json.dumps(recorded_query(unscoped)))
        if unscoped != expr and honest:
            answer["data"]["result"] = [
                s for s in answer["data"]["result"] if s["metric"]["tenant"] == "tenant-b"
            ]
        return answer

    return query


def test_a_tenants_report_selects_that_tenant_in_every_query_and_holds_nothing_else() -> None:
    for expr in usage.queries("3h", "tenant-b").values():
        assert 'tenant="tenant-b"' in expr
    rows = usage.report(RECORDED["window"], _one_tenant_server(honest=True), "tenant-b")
    assert [row.tenant for row in rows] == ["tenant-b"]
    everyone = {r.tenant: r for r in usage.report(RECORDED["window"], recorded_query)}
    assert rows[0] == everyone["tenant-b"]
    # A sample of another tenant in a one-tenant answer is refused, never printed.
    with pytest.raises(usage.UsageError, match="a report for tenant-b received a sample of"):
        usage.report(RECORDED["window"], _one_tenant_server(honest=False), "tenant-b")


@pytest.mark.parametrize("name", ['a"} or vector(1) #', "Tenant-A", "-a", ""])
def test_a_tenant_name_that_could_end_the_selector_is_refused(name: str) -> None:
    with pytest.raises(usage.UsageError, match="write a tenant's name"):
        usage.queries("3h", name)


def test_the_command_prints_one_tenant(prometheus: str, capsys: pytest.CaptureFixture[str]) -> None:
    script = _script()
    # A name that could end the PromQL selector is refused before any query is sent.
    assert script.main(["--prometheus", prometheus, "--window", "3h", "--tenant", 'x"']) == 2
    assert "write a tenant's name" in capsys.readouterr().err


def _stub_kubectl(tmp_path: Path, first_line: str, calls: Path, *, tunnel_up: bool = True) -> str:
    """A kubectl that records its arguments, prints ``first_line`` and then, as
    ``kubectl port-forward`` does, holds the tunnel open until it is terminated or, when the
    tunnel does not come up, says why on stderr and exits."""
    stub = tmp_path / "kubectl"
    ending = "exec sleep 60\n" if tunnel_up else "echo 'error: no such service' >&2\nexit 1\n"
    record = f'printf "%s\\n" "$@" > "{calls}"\n'
    stub.write_text("#!/bin/sh\n" + record + f"echo '{first_line}'\n" + ending)
    stub.chmod(0o755)
    return str(stub)


def test_the_management_path_reads_through_a_port_forward_not_the_service_proxy(
    prometheus: str, tmp_path: Path
) -> None:
    """docs/metrics.md: the metrics namespace admits no address from outside the pod network, so
    make usage tunnels to the Service with kubectl port-forward (on 127.0.0.1)."""
    script = _script()
    port = prometheus.rsplit(":", 1)[1]
    calls = tmp_path / "args"
    kubectl = _stub_kubectl(tmp_path, f"Forwarding from 127.0.0.1:{port} -> 9090", calls)
    kubeconfig = tmp_path / "kubeconfig"
    kubeconfig.write_text("apiVersion: v1\n")
    with script.port_forward(kubeconfig, kubectl) as base_url:
        assert base_url == prometheus
        answer = script.http_query(base_url, datetime(2026, 12, 1, tzinfo=UTC))("up")
    assert answer == {"status": "error"}  # the recorded server's answer to an unknown query
    args = calls.read_text().split()
    assert args[args.index("port-forward") + 1 :] == [
        "--namespace",
        "gpu-platform-metrics",
        "service/gpu-metrics",
        ":9090",
        "--address",
        "127.0.0.1",
    ]


def test_a_tunnel_that_does_not_come_up_is_one_line(tmp_path: Path) -> None:
    script = _script()
    kubectl = _stub_kubectl(tmp_path, "Unable to connect", tmp_path / "args", tunnel_up=False)
    with (
        pytest.raises(script.usage.UsageError, match="error: no such service"),
        script.port_forward(tmp_path / "kubeconfig", kubectl),
    ):
        pass


PASSWORD = "5e" * 32


class _AuthenticatedPrometheus(_Prometheus):
    """The recorded server behind the central Prometheus' basic auth (metrics/auth.py)."""

    def do_GET(self) -> None:
        pair = base64.b64encode(f"{auth.USERNAME}:{PASSWORD}".encode()).decode()
        if self.headers.get("Authorization") != f"Basic {pair}":
            self.send_response(401)
            self.send_header("WWW-Authenticate", "Basic")
            self.end_headers()
            return
        super().do_GET()


@pytest.fixture
def authenticated_prometheus() -> Iterator[str]:
    server = HTTPServer(("127.0.0.1", 0), _AuthenticatedPrometheus)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def _stub_kubectl_with_secret(tmp_path: Path, port: str, calls: Path, secret: str) -> Path:
    """A kubectl on PATH that prints ``secret`` (base64) for ``get secret`` and holds a tunnel
    for ``port-forward``; it appends each call's arguments to ``calls``."""
    folder = tmp_path / "bin"
    folder.mkdir()
    stub = folder / "kubectl"
    stub.write_text(
        "#!/bin/sh\n"
        f'printf "%s\\n" "$*" >> "{calls}"\n'
        'case "$*" in\n'
        f"  *' get secret '*) printf '%s' '{secret}' ;;\n"
        f"  *port-forward*) echo 'Forwarding from 127.0.0.1:{port} -> 9090'; exec sleep 60 ;;\n"
        "esac\n"
    )
    stub.chmod(0o755)
    return folder


def test_make_usage_sends_the_password_read_from_its_secret_never_on_a_command_line(
    authenticated_prometheus: str,
    tmp_path: Path,
    monkeypatch: pytest.MonkeyPatch,
    capsys: pytest.CaptureFixture[str],
) -> None:
    """Issue 40 point 7: the central Prometheus asks for basic auth; make usage reads the
    password from the metrics namespace's Secret (kubectl's output, captured) and sends it."""
    port = authenticated_prometheus.rsplit(":", 1)[1]
    calls = tmp_path / "calls"
    encoded = base64.b64encode(PASSWORD.encode()).decode()
    folder = _stub_kubectl_with_secret(tmp_path, port, calls, encoded)
    monkeypatch.setenv("PATH", f"{folder}:{os.environ['PATH']}")
    monkeypatch.setattr("sys.stdin", io.StringIO("apiVersion: v1\n"))
    assert _script().main(["--kubeconfig-stdin", "--window", "3h"]) == 0
    captured = capsys.readouterr()
    assert "tenant-b" in captured.out
    recorded = calls.read_text()
    assert "get secret --namespace gpu-platform-metrics gpu-metrics-auth" in recorded
    for text in (recorded, captured.out, captured.err):
        assert PASSWORD not in text
        assert encoded not in text


def test_without_the_password_the_store_refuses_and_usage_says_so(
    authenticated_prometheus: str, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    script = _script()
    assert script.main(["--prometheus", authenticated_prometheus, "--window", "3h"]) == 2
    assert "refused the credential (401): no password given" in capsys.readouterr().err
    wrong = tmp_path / "wrong"
    wrong.write_text("a1" * 32 + "\n")
    args = ["--prometheus", authenticated_prometheus, "--password-file", str(wrong)]
    assert script.main([*args, "--window", "3h"]) == 2
    assert "a wrong password" in capsys.readouterr().err
    right = tmp_path / "right"
    right.write_text(PASSWORD + "\n")
    args = ["--prometheus", authenticated_prometheus, "--password-file", str(right)]
    assert script.main([*args, "--window", "3h"]) == 0


def test_a_secret_without_the_password_is_one_line(tmp_path: Path) -> None:
    calls = tmp_path / "calls"
    folder = _stub_kubectl_with_secret(tmp_path, "1", calls, "")
    with pytest.raises(usage.UsageError, match="holds no password"):
        _script().read_password(tmp_path / "kubeconfig", str(folder / "kubectl"))


def test_a_tenant_without_a_series_of_use_has_no_efficiency_not_zero() -> None:
    """A dra tenant (the claims exporter bills allocation only) or the lab's mock devices have no
    "used" series: their efficiency is unknown, shown blank, while a measured 0 stays 0 %."""
    from components.metrics import usage_rows

    def answer(samples: dict[str, float]) -> dict[str, Any]:
        result = [{"metric": {"tenant": t}, "value": [0, str(v)]} for t, v in samples.items()]
        return {"status": "success", "data": {"resultType": "vector", "result": result}}

    answers = {
        "memory_allocated_gib_hours": {"dra": 80.0, "idle": 10.0},
        "memory_used_gib_hours": {"idle": 0.0},
        "cores_allocated_card_hours": {"dra": 1.0, "idle": 1.0},
        "cores_used_card_hours": {"idle": 0.0},
    }
    queries = {quantity: quantity for quantity in answers}
    rows = {r.tenant: r for r in usage_rows.report_from(queries, lambda q: answer(answers[q]))}
    assert rows["dra"].memory_efficiency is None
    assert rows["dra"].cores_efficiency is None
    assert rows["idle"].memory_efficiency == 0.0
    assert rows["idle"].cores_efficiency == 0.0


def test_a_password_file_without_prometheus_is_refused(capsys: pytest.CaptureFixture[str]) -> None:
    """Through the kubeconfig the password comes from its Secret: a --password-file given there
    would be silently ignored, so it is refused in one line."""
    script = _script()
    assert script.main(["--kubeconfig-stdin", "--password-file", "/nonexistent"]) == 2
    assert "--password-file goes with --prometheus" in capsys.readouterr().err
