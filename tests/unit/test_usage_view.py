"""A tenant's own usage, published into its own cluster (docs/metrics.md, "Your own usage, as a
tenant"): the windows, the queries (``make usage TENANT=``'s), the ConfigMap of one tenant's rows
only, and the publisher's two scripts run as its CronJob lays them out — the Python step with
``python -I -S`` on the files of its ConfigMap alone, against a local Prometheus, then the apply
step with a stand-in ``kubectl`` — for several tenants, each writing to its own cluster."""

from __future__ import annotations

import base64
import json
import os
import re
import subprocess
import sys
import threading
from collections.abc import Iterator, Mapping
from datetime import UTC, datetime
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path
from typing import Any

import pytest

from components.metrics import rules, self_view, usage, usage_publisher, usage_rows
from components.metrics.usage_rows import TenantUsage
from components.tenant_specs import admin_kubeconfig_secret
from tests.support.kube_schemas import builtin_violations
from tests.unit.test_metrics_objects import VERSION
from tests.unit.test_usage import RECORDED, recorded_query

END = datetime(2026, 12, 6, 5, 17, 0, tzinfo=UTC)
# GiB and cards each tenant holds the whole time, per recorded gauge (the fake Prometheus).
HELD = {
    "tenant-a": {
        rules.MEMORY_ALLOCATED: 40.0,
        rules.MEMORY_USED: 10.0,
        rules.CORES_ALLOCATED: 2.0,
        rules.CORES_USED: 0.5,
    },
    "tenant-b": {
        rules.MEMORY_ALLOCATED: 8.0,
        rules.MEMORY_USED: 8.0,
        rules.CORES_ALLOCATED: 1.0,
        rules.CORES_USED: 1.0,
    },
    "tenant-c": {},  # nothing at all
}


# ---------------------------------------------------------------------------- windows, queries


def test_the_windows_end_at_the_run_and_the_month_starts_on_the_first_utc() -> None:
    windows = {w.name: w for w in self_view.windows(END.replace(microsecond=123456))}
    assert list(windows) == ["24h", "7d", "month"]
    assert windows["24h"].seconds == 86400
    assert windows["7d"].seconds == 7 * 86400
    assert windows["month"].start == datetime(2026, 12, 1, tzinfo=UTC)
    assert all(w.end == END for w in windows.values())
    first = self_view.windows(datetime(2027, 1, 1, tzinfo=UTC))
    assert first[2].seconds == 0


@pytest.mark.parametrize("window", ["3h", "24h", "7d", "1s", "2678400s"])
@pytest.mark.parametrize("tenant", ["tenant-a", "team-vision"])
def test_the_published_queries_are_make_usage_tenants(window: str, tenant: str) -> None:
    templates = usage_publisher.query_templates(tenant)
    seconds = usage.window_seconds(window)
    assert {q: self_view.query_for(t, seconds) for q, t in templates.items()} == usage.queries(
        window, tenant
    )


def test_a_template_without_its_one_range_is_refused() -> None:
    with pytest.raises(usage_rows.UsageError, match="exactly one"):
        self_view.query_for("sum(x[5m])", 60)


def test_the_same_rows_as_make_usage_tenant_on_a_real_prometheus_answers() -> None:
    """The recorded answers of a real Prometheus (tests/unit/test_usage.py): the publisher's
    pipeline (templates, one window's length put in, ``report_from``) gives the row
    ``make usage TENANT=tenant-b WINDOW=3h`` prints."""
    seconds = usage.window_seconds(RECORDED["window"])

    def one_tenant(expr: str) -> Mapping[str, Any]:
        answer = json.loads(json.dumps(recorded_query(expr.replace(', tenant="tenant-b"', ""))))
        result = answer["data"]["result"]
        answer["data"]["result"] = [s for s in result if s["metric"]["tenant"] == "tenant-b"]
        return answer

    templates = usage_publisher.query_templates("tenant-b")
    prepared = {q: self_view.query_for(t, seconds) for q, t in templates.items()}
    published = usage_rows.report_from(prepared, one_tenant, "tenant-b")
    assert published == usage.report(RECORDED["window"], one_tenant, "tenant-b")
    assert published[0].memory_allocated_gib_hours > 0


# ------------------------------------------------------------------------------ the ConfigMap


def _row(tenant: str, mem: float) -> TenantUsage:
    return TenantUsage(tenant, mem, mem / 2, 0.5, 1.0, 0.25, 0.25)


def test_the_config_map_holds_one_tenants_windows_and_refuses_anothers_row() -> None:
    windows = self_view.windows(END)
    entries = [
        self_view.window_usage("tenant-a", w, [_row("tenant-a", 1.0)], None) for w in windows
    ]
    manifest = self_view.config_map("tenant-a", END, entries)
    assert manifest["metadata"]["name"] == self_view.CONFIG_MAP
    assert manifest["metadata"]["namespace"] == self_view.NAMESPACE
    document = json.loads(manifest["data"][self_view.JSON_KEY])
    assert document["tenant"] == "tenant-a"
    assert [w["window"] for w in document["windows"]] == ["24h", "7d", "month"]
    assert document["windows"][2]["start"] == "2026-12-01T00:00:00Z"
    assert document["windows"][0]["memory_allocated_gib_hours"] == 1.0
    assert "tenant-a" in manifest["data"][self_view.TABLE_KEY]
    # No store age known: each window says so.
    assert all("does not say" in (w["warning"] or "") for w in document["windows"])
    with pytest.raises(usage_rows.UsageError, match="tenant-a's usage received a row of tenant-b"):
        self_view.window_usage("tenant-a", windows[0], [_row("tenant-b", 1.0)], None)
    smuggled = [self_view.WindowUsage(windows[0], _row("tenant-b", 1.0))]
    with pytest.raises(usage_rows.UsageError, match="ConfigMap received a row of tenant-b"):
        self_view.config_map("tenant-a", END, smuggled)


def test_a_window_with_nothing_used_reads_zero_not_missing() -> None:
    entries = [
        self_view.window_usage("tenant-c", w, [], END.timestamp() - 90 * 86400)
        for w in self_view.windows(END)
    ]
    document = json.loads(
        self_view.config_map("tenant-c", END, entries)["data"][self_view.JSON_KEY]
    )
    for window in document["windows"]:
        assert window["memory_allocated_gib_hours"] == 0.0
        assert window["cores_efficiency"] is None
        assert window["warning"] is None  # the store reaches back past every window
    young = END.timestamp() - 3 * 86400
    entries = [self_view.window_usage("tenant-c", w, [], young) for w in self_view.windows(END)]
    document = json.loads(
        self_view.config_map("tenant-c", END, entries)["data"][self_view.JSON_KEY]
    )
    assert document["windows"][0]["warning"] is None
    assert "the first 96.0 h of the 7d window" in document["windows"][1]["warning"]
    assert "h of the month window are not in this report" in document["windows"][2]["warning"]


# ------------------------------------------------------------------ a local Prometheus, stubbed


def _answer(expr: str, honest: bool) -> dict[str, Any]:
    """An instant query's answer for gauges held constantly (``HELD``): the integral over
    ``[Ns]`` of a gauge held at v is v * N / 3600; only the named tenant's, unless not
    ``honest`` (a server that ignores the matcher)."""
    if expr == usage_rows.OLDEST_SAMPLE_QUERY:
        oldest = END.timestamp() - 40 * 86400
        return {
            "status": "success",
            "data": {"resultType": "vector", "result": [{"metric": {}, "value": [0, str(oldest)]}]},
        }
    gauge = re.search(r"sum_over_time\(([a-z_:]+)\{", expr)
    span = re.search(r"\[(\d+)s\]", expr)
    named = re.search(r'tenant="([a-z0-9-]+)"', expr)
    assert gauge, expr
    assert span, expr
    assert named, expr
    result = [
        {
            "metric": {"tenant": tenant},
            "value": [0, str(held[gauge.group(1)] * int(span.group(1)) / 3600)],
        }
        for tenant, held in HELD.items()
        if gauge.group(1) in held and (tenant == named.group(1) or not honest)
    ]
    return {"status": "success", "data": {"resultType": "vector", "result": result}}


class _Prometheus(BaseHTTPRequestHandler):
    seen: list[tuple[str, str | None]]
    honest = True

    def do_GET(self) -> None:
        from urllib.parse import parse_qs, urlparse

        expr = parse_qs(urlparse(self.path).query)["query"][0]
        self.seen.append((expr, self.headers.get("Authorization")))
        body = json.dumps(_answer(expr, self.honest)).encode()
        self.send_response(200)
        self.send_header("Content-Type", "application/json")
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *args: object) -> None:
        pass


@pytest.fixture
def prometheus() -> Iterator[tuple[str, type[_Prometheus]]]:
    handler = type("Handler", (_Prometheus,), {"seen": [], "honest": True})
    server = HTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}", handler
    server.shutdown()
    server.server_close()


# --------------------------------------------------------- the publisher, as its CronJob runs it


def _mount(
    pod_spec: Mapping[str, Any],
    root: Path,
    namespace: str,
    secrets: Mapping[tuple[str, str], Mapping[str, str]],
    config_maps: Mapping[tuple[str, str], Mapping[str, str]],
) -> dict[str, Path]:
    """The pod's volumes as the kubelet would lay them out under ``root``: each ConfigMap and
    Secret of the pod's own ``namespace`` with its ``items``; an optional one that is missing
    mounts nothing. Returns volume name -> its directory."""
    dirs: dict[str, Path] = {}
    for volume in pod_spec["volumes"]:
        target = root / volume["name"]
        target.mkdir(parents=True)
        dirs[volume["name"]] = target
        if "emptyDir" in volume:
            continue
        kind, source = ("configMap", config_maps) if "configMap" in volume else ("secret", secrets)
        spec = volume[kind]
        data = source.get((namespace, spec.get("name") or spec.get("secretName")))
        items = spec.get("items") or [{"key": k, "path": k} for k in (data or {})]
        for item in items:
            if data is None or item["key"] not in data:
                assert spec.get("optional"), f"{volume['name']}: {item['key']} missing"
                continue
            path = target / item["path"]
            path.parent.mkdir(parents=True, exist_ok=True)
            path.write_text(data[item["key"]])
    return dirs


def _container_env(
    container: Mapping[str, Any], dirs: Mapping[str, Path], mounts: Mapping[str, str]
) -> dict[str, str]:
    """The container's environment with every mount path moved to its volume's directory."""
    env = {e["name"]: e["value"] for e in container["env"]}
    for mount in container["volumeMounts"]:
        for key, value in env.items():
            if value.startswith(mount["mountPath"]):
                env[key] = str(dirs[mount["name"]]) + value[len(mount["mountPath"]) :]
    return env


KUBECTL_STUB = """#!/bin/sh
# Stand-in kubectl: the cluster is named by the kubeconfig's content; the applied manifest is
# kept under $CLUSTERS/<cluster>/ with the arguments.
set -eu
mkdir -p "$CLUSTERS"
kubeconfig=""; manifest=""
while [ $# -gt 0 ]; do
  case "$1" in
    --kubeconfig) kubeconfig="$2"; shift 2 ;;
    --filename) manifest="$2"; shift 2 ;;
    *) echo "$1" >> "$CLUSTERS/args"; shift ;;
  esac
done
cluster="$(cat "$kubeconfig")"
mkdir -p "$CLUSTERS/$cluster"
cp "$manifest" "$CLUSTERS/$cluster/$(date +%s%N).json"
"""


def _run_publisher(
    tmp_path: Path, tenant: str, url: str, password: str | None = None
) -> subprocess.CompletedProcess[str]:
    """One run of ``tenant``'s CronJob: both containers, on the volumes its pod spec names."""
    cron = usage_publisher.publisher_cron_job(tenant, tenant)
    pod = cron["spec"]["jobTemplate"]["spec"]["template"]["spec"]
    # The management cluster: every tenant's admin kubeconfig in its own namespace, each naming
    # its own cluster; the publisher's ConfigMap in this tenant's namespace.
    secrets: dict[tuple[str, str], dict[str, str]] = {
        (t, admin_kubeconfig_secret(t)): {"admin.svc": f"cluster-{t}", "admin.conf": "public"}
        for t in HELD
    }
    if password is not None:
        secrets[(tenant, usage_publisher.PASSWORD_SECRET)] = {
            usage_publisher.PASSWORD_KEY: password
        }
    scripts = usage_publisher.scripts_config_map(tenant, tenant)
    config_maps = {(tenant, scripts["metadata"]["name"]): scripts["data"]}
    run_dir = tmp_path / tenant
    dirs = _mount(pod, run_dir, tenant, secrets, config_maps)
    publish, apply = pod["initContainers"][0], pod["containers"][0]
    env = _container_env(publish, dirs, {})
    env["PROMETHEUS_URL"] = url
    script = publish["command"][1].replace(usage_publisher.SCRIPTS_DIR, str(dirs["scripts"]))
    # -I -S: no site-packages, no PYTHONPATH, no current directory: only the ConfigMap's files.
    done = subprocess.run(
        [sys.executable, "-I", "-S", script],
        env={"PATH": os.environ["PATH"], **env},
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    if done.returncode != 0:
        return done
    stub = tmp_path / "bin" / "kubectl"
    stub.parent.mkdir(exist_ok=True)
    stub.write_text(KUBECTL_STUB)
    stub.chmod(0o755)
    apply_env = _container_env(apply, dirs, {})
    apply_script = apply["command"][1].replace(usage_publisher.SCRIPTS_DIR, str(dirs["scripts"]))
    return subprocess.run(
        [apply["command"][0], apply_script],
        env={
            **apply_env,
            "PATH": f"{stub.parent}:{os.environ['PATH']}",
            "CLUSTERS": str(tmp_path / "clusters"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


def _published(tmp_path: Path, cluster: str) -> list[dict[str, Any]]:
    return [
        json.loads(p.read_text()) for p in sorted((tmp_path / "clusters" / cluster).glob("*.json"))
    ]


def test_each_tenants_publisher_writes_its_own_usage_into_its_own_cluster(
    tmp_path: Path, prometheus: tuple[str, type[_Prometheus]]
) -> None:
    url, handler = prometheus
    for tenant in HELD:
        done = _run_publisher(tmp_path, tenant, url)
        assert done.returncode == 0, done.stderr
    for tenant, held in HELD.items():
        manifests = _published(tmp_path, f"cluster-{tenant}")
        assert len(manifests) == 1, tenant
        manifest = manifests[0]
        assert (
            manifest["kind"],
            manifest["metadata"]["name"],
            manifest["metadata"]["namespace"],
        ) == (
            "ConfigMap",
            self_view.CONFIG_MAP,
            self_view.NAMESPACE,
        )
        document = json.loads(manifest["data"][self_view.JSON_KEY])
        assert document["tenant"] == tenant
        day = document["windows"][0]
        assert day["window"] == "24h"
        assert day["memory_allocated_gib_hours"] == pytest.approx(
            held.get(rules.MEMORY_ALLOCATED, 0) * 24
        )
        assert day["cores_used_card_hours"] == pytest.approx(held.get(rules.CORES_USED, 0) * 24)
        week = document["windows"][1]
        assert week["cores_allocated_card_hours"] == pytest.approx(
            held.get(rules.CORES_ALLOCATED, 0) * 168
        )
        text = json.dumps(manifest)
        for other in HELD:
            if other != tenant:
                assert other not in text, (tenant, other)
    # Every query named the tenant it was for; none went without one.
    assert all('tenant="' in expr for expr, _ in handler.seen if "sum_over_time" in expr)
    # No password mounted (the Prometheus of today's main): no credential sent.
    assert {auth for _, auth in handler.seen} == {None}
    args = (tmp_path / "clusters" / "args").read_text().split()
    assert args[:4] == ["apply", "--server-side", "--force-conflicts", "--field-manager"]


def test_a_server_answering_for_another_tenant_publishes_nothing(
    tmp_path: Path, prometheus: tuple[str, type[_Prometheus]]
) -> None:
    url, handler = prometheus
    handler.honest = False
    done = _run_publisher(tmp_path, "tenant-b", url)
    assert done.returncode == 1
    assert "a report for tenant-b received a sample of tenant-a" in done.stderr
    assert not (tmp_path / "clusters").exists()


def test_the_mounted_password_is_sent_as_basic_auth(
    tmp_path: Path, prometheus: tuple[str, type[_Prometheus]]
) -> None:
    url, handler = prometheus
    done = _run_publisher(tmp_path, "tenant-a", url, password="s3cret\n")
    assert done.returncode == 0, done.stderr
    pair = base64.b64encode(f"{usage_publisher.PROMETHEUS_USERNAME}:s3cret".encode()).decode()
    assert {auth for _, auth in handler.seen} == {f"Basic {pair}"}
    assert "s3cret" not in done.stdout + done.stderr


def test_the_cron_job_spreads_the_tenants_over_the_hour() -> None:
    minutes = {usage_publisher.schedule(f"tenant-{i}").split()[0] for i in range(20)}
    assert len(minutes) > 10
    assert all(0 <= int(m) < 60 for m in minutes)


def _published_objects() -> list[dict[str, Any]]:
    entries = [self_view.window_usage("tenant-a", w, [], None) for w in self_view.windows(END)]
    return [
        usage_publisher.scripts_config_map("tenant-a", "tenant-a"),
        usage_publisher.publisher_cron_job("tenant-a", "tenant-a"),
        *usage_publisher.tenant_reader("tenant-a"),
        self_view.config_map("tenant-a", END, entries),
    ]


@pytest.mark.parametrize("manifest", _published_objects(), ids=lambda m: m["kind"])
def test_every_object_validates_against_the_clusters_openapi_schema(
    manifest: dict[str, Any],
) -> None:
    assert builtin_violations(VERSION, manifest) == []
