"""The metrics stack's objects: valid for the clusters' Kubernetes version, the platform's
``tenant`` label on everything an agent writes, the tenant reader's minimal RBAC, and the lab
budget measured from the objects' requests."""

from __future__ import annotations

import copy
import functools
import hashlib
import http.server
import json
import os
import re
import socket
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.config import MetricsSettings
from components.metrics import auth, objects, rules, scrape
from components.metrics.dashboards import platform_dashboard
from components.metrics.scrape import HAMI_SOURCES, dcgm_source
from components.versions import HAMI_DASHBOARD, PINNED
from tests.support.kube_schemas import builtin_violations

VERSION = "v1.35.0"
API = objects.tenant_api_server("tenant-a", "tenant-a", 6443)
SOURCES = (*HAMI_SOURCES, dcgm_source("gpu-operator"))
CENTRAL_CONFIG = objects.prometheus_config("30s", "kamaji-system")
PROVISIONING = objects.grafana_provisioning()
DASHBOARDS = objects.grafana_dashboards(platform_dashboard())
AGENT_CONFIG = objects.agent_config_map("tenant-a", "tenant-a", API, SOURCES, "30s")
PASSWORD = "5e" * 32  # what the fake new-secret.sh prints
WEB = objects.web_config(auth.password_hash(PASSWORD))


def _grafana() -> dict[str, Any]:
    return objects.grafana_deployment(PROVISIONING, DASHBOARDS, WEB)


def _agent(namespace: str = "tenant-a") -> dict[str, Any]:
    return objects.agent_deployment(namespace, AGENT_CONFIG)


def _central() -> list[dict[str, Any]]:
    return [
        objects.namespace(),
        *objects.network_policies(),
        CENTRAL_CONFIG,
        WEB,
        objects.auth_secret(),
        objects.prometheus_deployment(
            "15d", {"emptyDir": {"sizeLimit": "2Gi"}}, CENTRAL_CONFIG, WEB
        ),
        objects.prometheus_service(),
        objects.prometheus_claim("20Gi"),
        PROVISIONING,
        DASHBOARDS,
        _grafana(),
        objects.grafana_service(),
    ]


def _tenant() -> list[dict[str, Any]]:
    return [
        AGENT_CONFIG,
        objects.agent_token_secret("tenant-a"),
        _agent(),
        *objects.tenant_reader("hami-system", SOURCES),
        objects.tenant_reader_token("hami-system"),
    ]


@pytest.mark.parametrize("manifest", [*_central(), *_tenant()], ids=lambda m: m["kind"])
def test_every_object_validates_against_the_clusters_openapi_schema(
    manifest: dict[str, Any],
) -> None:
    assert builtin_violations(VERSION, manifest) == []


def test_the_schema_check_can_fail() -> None:
    broken = _agent()
    broken["spec"]["template"]["spec"]["containers"][0]["resource"] = {}
    assert builtin_violations(VERSION, broken)


def _agent_config() -> dict[str, Any]:
    data = objects.agent_config_map("tenant-a", "tenant-a", API, SOURCES, "30s")["data"]
    config: dict[str, Any] = yaml.safe_load(data["prometheus.yml"])
    return config


def _pod_jobs(config: dict[str, Any]) -> list[dict[str, Any]]:
    """The jobs that discover pods in the tenant (all but the agent's own)."""
    return [j for j in config["scrape_configs"] if j["job_name"] != scrape.AGENT_JOB]


def test_every_sample_an_agent_writes_carries_the_platforms_tenant_label() -> None:
    config = _agent_config()
    assert config["global"]["external_labels"] == {"tenant": "tenant-a"}
    assert config["remote_write"] == [
        {
            "url": objects.remote_write_url(),
            "basic_auth": {
                "username": auth.USERNAME,
                "password_file": objects.AGENT_PASSWORD_FILE,
            },
        }
    ]
    jobs = {job["job_name"] for job in config["scrape_configs"]}
    assert jobs == {s.job for s in SOURCES} | {scrape.AGENT_JOB}
    own = next(j for j in config["scrape_configs"] if j["job_name"] == scrape.AGENT_JOB)
    assert own["static_configs"] == [
        {
            "targets": ["localhost:9090"],
            "labels": {"source": scrape.AGENT_JOB, "tenant": "tenant-a"},
        }
    ]
    for job in _pod_jobs(config):
        # honor_labels false: a scraped ``tenant`` label becomes ``exported_tenant``.
        assert job["honor_labels"] is False
        last = job["relabel_configs"][-1]
        assert last == {"target_label": "tenant", "replacement": "tenant-a"}


def test_only_a_dra_tenants_agent_says_so_on_its_own_up() -> None:
    """GpuDraClaimsNotScraped selects the agents that must have a claims exporter scraped by
    ``gpu_sharing="dra"`` on the agent's own target; a hami tenant's agent has no such label."""

    def own_labels(sources: tuple[scrape.TenantSource, ...]) -> dict[str, str]:
        config = scrape.agent_config("tenant-a", "https://x:6443", "http://c/w", sources, "30s")
        (own,) = [j for j in config["scrape_configs"] if j["job_name"] == scrape.AGENT_JOB]
        labels: dict[str, str] = own["static_configs"][0]["labels"]
        return labels

    assert "gpu_sharing" not in own_labels(tuple(SOURCES))
    dra = own_labels((*SOURCES, scrape.DRA_CLAIMS_SOURCE))
    assert dra == {"source": scrape.AGENT_JOB, "tenant": "tenant-a", "gpu_sharing": "dra"}


def test_agents_scrape_through_the_tenants_api_server_pod_proxy() -> None:
    for job, source in zip(_pod_jobs(_agent_config()), SOURCES, strict=True):
        sd = job["kubernetes_sd_configs"][0]
        assert sd["api_server"] == "https://tenant-a.tenant-a.svc:6443"
        assert sd["namespaces"] == {"names": [source.namespace]}
        relabel = {r.get("target_label"): r for r in job["relabel_configs"]}
        assert relabel["__address__"]["replacement"] == "tenant-a.tenant-a.svc:6443"
        assert relabel["__metrics_path__"]["replacement"] == (
            "/api/v1/namespaces/${1}/pods/${2}:${3}/proxy/metrics"
        )
        keep = job["relabel_configs"][0]
        assert keep["action"] == "keep"
        assert keep["regex"] == str(source.port)
        assert job["authorization"] == {"credentials_file": scrape.TOKEN_FILE}


def test_agents_keep_only_the_series_their_source_is_traced_to_export() -> None:
    """Issue 40: a pod matching a job's selector cannot add a series named like a recorded rule
    or another source's; Prometheus anchors the keep regex (``^(?s:…)$``)."""
    for job, source in zip(_pod_jobs(_agent_config()), SOURCES, strict=True):
        (keep,) = job["metric_relabel_configs"]
        assert keep["source_labels"] == ["__name__"]
        assert keep["action"] == "keep"
        kept = re.compile(f"^(?s:{keep['regex']})$")
        names = source.kept_names()
        assert names
        assert all(kept.match(name) for name in names)
        for forged in (
            *rules.recorded_names(),
            "kamaji_datastore_status",
            f"{names[0]}_total",
            f"x{names[0]}",
        ):
            assert not kept.match(forged), forged
    scheduler = dict(zip([s.job for s in SOURCES], SOURCES, strict=True))["hami-scheduler"]
    assert "hami_vgpu_memory_allocated_bytes" in scheduler.kept_names()
    assert "hami_vgpu_memory_used_bytes" not in scheduler.kept_names()


def _digest(deployment: dict[str, Any]) -> str:
    annotations = deployment["spec"]["template"]["metadata"]["annotations"]
    digest: str = annotations[objects.CONFIG_DIGEST_ANNOTATION]
    return digest


def test_a_changed_configuration_changes_the_pod_template_it_is_read_by() -> None:
    """Issue 40: Prometheus and Grafana read their files only at start, so every Deployment's
    pod template carries the digest of the ConfigMaps it mounts, and a changed rule, scrape
    setting or dashboard rolls its pods."""
    volume = {"emptyDir": {}}
    central = objects.prometheus_deployment("15d", volume, CENTRAL_CONFIG, WEB)
    assert _digest(central) == _digest(
        objects.prometheus_deployment("15d", volume, CENTRAL_CONFIG, WEB)
    )
    slower = objects.prometheus_config("60s", "kamaji-system")
    assert _digest(objects.prometheus_deployment("15d", volume, slower, WEB)) != _digest(central)
    other_rules = copy.deepcopy(CENTRAL_CONFIG)
    other_rules["data"][scrape.RULES_FILE_NAME] += "\n# changed"
    assert _digest(objects.prometheus_deployment("15d", volume, other_rules, WEB)) != _digest(
        central
    )
    agent = _agent()
    other_agent = objects.agent_config_map("tenant-a", "tenant-a", API, SOURCES[:2], "30s")
    assert _digest(objects.agent_deployment("tenant-a", other_agent)) != _digest(agent)
    other_dashboards = copy.deepcopy(DASHBOARDS)
    other_dashboards["data"] = {"x.json": "{}"}
    assert _digest(objects.grafana_deployment(PROVISIONING, other_dashboards, WEB)) != _digest(
        _grafana()
    )


def test_the_tenant_reader_may_only_list_pods_and_proxy_to_them_in_scraped_namespaces() -> None:
    reader = objects.tenant_reader("hami-system", SOURCES)
    kinds = [m["kind"] for m in reader]
    assert "ClusterRole" not in kinds
    assert "ClusterRoleBinding" not in kinds
    roles = [m for m in reader if m["kind"] == "Role"]
    assert {r["metadata"]["namespace"] for r in roles} == {"hami-system", "gpu-operator"}
    for role in roles:
        granted = {
            (resource, verb)
            for rule in role["rules"]
            for resource in rule["resources"]
            for verb in rule["verbs"]
        }
        assert granted == {
            ("pods", "get"),
            ("pods", "list"),
            ("pods", "watch"),
            ("pods/proxy", "get"),
        }


def test_the_central_prometheus_receives_remote_writes_and_evaluates_the_rules() -> None:
    deployment = objects.prometheus_deployment("15d", {"emptyDir": {}}, CENTRAL_CONFIG, WEB)
    args = deployment["spec"]["template"]["spec"]["containers"][0]["args"]
    assert "--web.enable-remote-write-receiver" in args
    assert "--storage.tsdb.retention.time=15d" in args
    config = yaml.safe_load(
        objects.prometheus_config("30s", "kamaji-system")["data"]["prometheus.yml"]
    )
    assert config["rule_files"] == [f"{scrape.CONFIG_DIR}/{scrape.RULES_FILE_NAME}"]
    kamaji = config["scrape_configs"][0]
    assert kamaji["static_configs"][0]["targets"] == [
        "kamaji-metrics-service.kamaji-system.svc:8080"
    ]
    assert kamaji["metric_relabel_configs"][0]["source_labels"] == ["tcp_name"]


# --------------------------------------------------------------- who reaches what (point 7)

_AGENT_POD = objects._labels(objects.AGENT)


def _selects(selector: dict[str, Any], labels: dict[str, str]) -> bool:
    assert set(selector) <= {"matchLabels"}, selector  # the only form these policies use
    return all(labels.get(k) == v for k, v in selector.get("matchLabels", {}).items())


def _admits(
    policies: list[dict[str, Any]],
    target: dict[str, str],
    port: int,
    source: dict[str, Any],
) -> bool:
    """Whether ``policies`` (NetworkPolicy ingress semantics) let ``source`` reach the pod
    labelled ``target`` in the metrics namespace on ``port``. ``source``: ``namespace`` and
    ``labels`` of a pod (with its ``ip`` in the pod CIDR), or only an ``ip`` (a node)."""
    import ipaddress

    selecting = [p["spec"] for p in policies if _selects(p["spec"]["podSelector"], target)]
    assert selecting, "a pod no policy selects is not isolated"
    for spec in selecting:
        for rule in spec.get("ingress", []):
            if rule.get("ports") and port not in [p["port"] for p in rule["ports"]]:
                continue
            for peer in rule.get("from", []):
                if "ipBlock" in peer:
                    block = peer["ipBlock"]
                    ip = ipaddress.ip_address(source["ip"])
                    if ip in ipaddress.ip_network(block["cidr"]) and not any(
                        ip in ipaddress.ip_network(cidr) for cidr in block.get("except", [])
                    ):
                        return True
                    continue
                if "labels" not in source:
                    continue  # a node is never matched by a pod or namespace selector
                if "namespaceSelector" in peer:
                    ns_ok = _selects(
                        peer["namespaceSelector"],
                        {"kubernetes.io/metadata.name": source["namespace"]},
                    )
                else:
                    ns_ok = source["namespace"] == objects.METRICS_NAMESPACE
                if ns_ok and _selects(peer.get("podSelector", {}), source["labels"]):
                    return True
    return False


def test_the_metrics_namespace_admits_only_agents_grafana_and_prometheus_scrapes() -> None:
    policies = objects.network_policies()
    prometheus = objects._labels(objects.PROMETHEUS)
    grafana = objects._labels(objects.GRAFANA)
    port = scrape.PROMETHEUS_PORT
    agent = {"namespace": "tenant-a", "labels": _AGENT_POD, "ip": "10.244.1.7"}
    grafana_pod = {"namespace": objects.METRICS_NAMESPACE, "labels": grafana, "ip": "10.244.0.9"}
    server = {"namespace": objects.METRICS_NAMESPACE, "labels": prometheus, "ip": "10.244.0.5"}
    # Remote write from every tenant's agent, queries from Grafana.
    assert _admits(policies, prometheus, port, agent)
    assert _admits(policies, prometheus, port, {**agent, "namespace": "tenant-b"})
    assert _admits(policies, prometheus, port, grafana_pod)
    # No address from outside the pod network: not the management node, not a lab worker on
    # the kind network or a prod tenant's machine, which could route to the pod themselves
    # (make usage and TC-18 read through a port-forward, which no NetworkPolicy filters).
    for host in ("172.18.0.2", "172.18.0.7", "192.168.10.21"):
        assert not _admits(policies, prometheus, port, {"ip": host}), host
    # Any other pod, in a tenant's namespace (its control plane) or here, is refused.
    control_plane = {"namespace": "tenant-a", "labels": {"kamaji.clastix.io/name": "tenant-a"}}
    for other in (
        {**control_plane, "ip": "10.244.1.8"},
        {"namespace": objects.METRICS_NAMESPACE, "labels": {"x": "y"}, "ip": "10.244.0.3"},
        {"namespace": "default", "labels": {}, "ip": "10.244.2.3"},
    ):
        assert not _admits(policies, prometheus, port, other), other
    # Only the server's port; Grafana is closed to everyone but Prometheus (port-forward only).
    assert not _admits(policies, prometheus, 9091, agent)
    for source in (agent, grafana_pod, {"ip": "172.18.0.2"}, {**control_plane, "ip": "10.244.1.8"}):
        assert not _admits(policies, grafana, objects.GRAFANA_PORT, source)
    # An exporter beside the server (the backups' kube-state-metrics on 8080) is scraped by it
    # and by nothing else.
    exporter = {"app.kubernetes.io/name": "kube-state-metrics"}
    assert _admits(policies, exporter, 8080, server)
    assert not _admits(policies, exporter, 8080, agent)
    assert not _admits(policies, exporter, 8080, grafana_pod)


def test_no_metrics_policy_admits_an_address_block() -> None:
    """An ipBlock cannot tell the management API server's node from a tenant-controlled host on
    the same network: none is used (the review of the first version of these policies)."""
    for policy in objects.network_policies():
        for rule in policy["spec"].get("ingress", []):
            assert all("ipBlock" not in peer for peer in rule.get("from", [])), policy


def test_grafana_fetches_hamis_dashboard_at_the_pinned_tag_and_digest() -> None:
    spec = _grafana()["spec"]["template"]["spec"]
    env = {e["name"]: e["value"] for e in spec["initContainers"][0]["env"]}
    assert env["URL"] == HAMI_DASHBOARD.url
    assert "/v2.10.0/" in env["URL"]
    assert env["SHA256"] == HAMI_DASHBOARD.sha256
    assert PINNED.hami.version in HAMI_DASHBOARD.url
    grafana = {e["name"]: e["value"] for e in spec["containers"][0]["env"]}
    assert grafana["GF_AUTH_ANONYMOUS_ORG_ROLE"] == "Viewer"
    assert grafana["GF_AUTH_DISABLE_LOGIN_FORM"] == "true"
    # Issue 40: no admin/admin created at first start, waiting for a login to be turned on.
    assert grafana["GF_SECURITY_DISABLE_INITIAL_ADMIN_CREATION"] == "true"


def test_images_are_pinned() -> None:
    images = [
        c["image"]
        for m in [*_central(), *_tenant()]
        if m["kind"] == "Deployment"
        for c in (
            *m["spec"]["template"]["spec"]["containers"],
            *m["spec"]["template"]["spec"].get("initContainers", []),
        )
    ]
    assert images
    assert all(":" in i and not i.endswith(":latest") for i in images)


# The machine the README names for the lab: at least 4 CPUs and 8 GB free memory. The metrics
# stack may take at most a tenth of it in requests, or it is off by default in the lab.
LAB_CPU_MILLIS, LAB_MEMORY = 4000, 8 * 10**9


def lab_footprint(tenants: int) -> tuple[int, int]:
    central = [
        objects.prometheus_deployment("15d", {"emptyDir": {}}, CENTRAL_CONFIG, WEB),
        _grafana(),
    ]
    agents = [_agent(f"tenant-{i}") for i in range(tenants)]
    return objects.requests_of([*central, *agents])


def test_the_lab_footprint_fits_a_tenth_of_the_machine_the_readme_names() -> None:
    # The lab stack has two tenants.
    cpu, memory = lab_footprint(2)
    assert (cpu, memory) == (100 + 50 + 2 * 25, (256 + 128 + 2 * 64) * 2**20)
    assert cpu <= LAB_CPU_MILLIS // 10
    assert memory <= LAB_MEMORY // 10
    assert MetricsSettings().enabled is True


# --------------------------------------------------- Grafana's HAMi dashboard, online and offline


def _fetch(tmp_path: Path, url: str, sha256: str) -> subprocess.CompletedProcess[str]:
    """objects.FETCH_SCRIPT as Grafana's init container runs it (python3 -c, URL/SHA256/DEST)."""
    return subprocess.run(
        [sys.executable, "-c", objects.FETCH_SCRIPT],
        env={
            **os.environ,
            "URL": url,
            "SHA256": sha256,
            "DEST": str(tmp_path / "dashboard.json"),
        },
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )


@pytest.fixture
def served(tmp_path: Path) -> Iterator[str]:
    """A local HTTP server with one file, ``/dashboard.json``; yields its base URL."""
    root = tmp_path / "served"
    root.mkdir()
    (root / "dashboard.json").write_bytes(b'{"title": "HAMi"}')
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


def test_the_pinned_dashboard_is_written(tmp_path: Path, served: str) -> None:
    digest = hashlib.sha256(b'{"title": "HAMi"}').hexdigest()
    done = _fetch(tmp_path, f"{served}/dashboard.json", digest)
    assert done.returncode == 0, done.stderr
    # What HAMi published, scoped to one tenant (components.metrics.hami_dashboard).
    written = json.loads((tmp_path / "dashboard.json").read_text())
    assert written["title"] == "HAMi"
    assert [v["name"] for v in written["templating"]["list"]] == ["tenant"]


def test_other_content_or_a_missing_file_is_refused(tmp_path: Path, served: str) -> None:
    other = _fetch(tmp_path, f"{served}/dashboard.json", "0" * 64)
    assert other.returncode != 0
    assert "pinned" in other.stderr
    missing = _fetch(tmp_path, f"{served}/nope.json", "0" * 64)
    assert missing.returncode != 0
    assert not (tmp_path / "dashboard.json").exists()


def test_offline_grafana_starts_without_the_dashboard(tmp_path: Path) -> None:
    with socket.socket() as probe:  # a port nothing listens on
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    done = _fetch(tmp_path, f"http://127.0.0.1:{port}/dashboard.json", "0" * 64)
    assert done.returncode == 0, done.stderr
    assert "starts without HAMi's dashboard" in done.stderr
    assert not (tmp_path / "dashboard.json").exists()


# ------------------------------------------- metrics.prometheusOperator (the CRDs: tests/contract)


def test_the_operator_rule_carries_the_platforms_rule_groups_unchanged() -> None:
    rule = objects.operator_rule({"release": "kps"})
    assert rule["spec"]["groups"] == rules.rule_groups()["groups"]
    assert rule["metadata"]["namespace"] == objects.METRICS_NAMESPACE
    assert rule["metadata"]["labels"]["release"] == "kps"


def test_the_operator_scrape_is_the_central_servers_kamaji_job() -> None:
    central = yaml.safe_load(CENTRAL_CONFIG["data"]["prometheus.yml"])
    kamaji = next(j for j in central["scrape_configs"] if j["job_name"] == "kamaji")
    scrape_config = objects.operator_kamaji_scrape("30s", "kamaji-system", {})["spec"]
    assert scrape_config["jobName"] == "kamaji"  # not scrapeConfig/<ns>/<name>
    assert scrape_config["honorLabels"] is False
    assert scrape_config["scrapeInterval"] == "30s"
    assert scrape_config["staticConfigs"] == kamaji["static_configs"]
    assert scrape_config["metricRelabelings"] == [
        {
            "sourceLabels": ["tcp_name"],
            "regex": "(.+)",
            "targetLabel": "tenant",
            "replacement": "${1}",
        }
    ]


def test_agents_write_to_the_operators_prometheus_when_one_is_named() -> None:
    url = "http://prometheus-operated.monitoring.svc:9090/api/v1/write"
    config_map = objects.agent_config_map("tenant-a", "tenant-a", API, SOURCES, "30s", url)
    [remote] = yaml.safe_load(config_map["data"]["prometheus.yml"])["remote_write"]
    assert remote["url"] == url
    [default] = yaml.safe_load(AGENT_CONFIG["data"]["prometheus.yml"])["remote_write"]
    assert default["url"] == objects.remote_write_url()


def test_the_dcgm_job_finds_the_exporter_of_either_gpu_operator_stack() -> None:
    """A prod dra tenant's GPU Operator runs the GPUCluster, whose DCGM exporter pods are
    labelled app=nvidia-dcgm-exporter-dra (gpu-operator v26.7.0 manifests/state-dcgm-exporter/
    0700_daemonset.yaml:4-27), not the ClusterPolicy's app=nvidia-dcgm-exporter: the agent's
    selector (the discovery's labelSelector) must take both, or a dra tenant has no card use."""
    import re

    source = dcgm_source("gpu-operator")
    found = re.fullmatch(r"app in \(([^)]*)\)", source.pod_label)
    assert found is not None, source.pod_label
    assert set(found.group(1).split(",")) == {"nvidia-dcgm-exporter", "nvidia-dcgm-exporter-dra"}
    assert source.port == 9400
