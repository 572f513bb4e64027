"""Offline tests of TC-00's judges (the platform health check) on recorded API objects.

Inputs are ``tests/acceptance/samples/health.yaml`` (Pods and DaemonSets as a tenant API returns
them, the probe pod's output); expected verdicts and texts are written there by hand. Every judge
is shown failing on a broken sample, naming the broken component and its last log lines.
"""

from __future__ import annotations

import dataclasses
from pathlib import Path
from typing import Any

import pytest
import yaml

from tests.acceptance import health, lookups

SAMPLES = Path(__file__).resolve().parents[1] / "acceptance" / "samples"
HEALTH = yaml.safe_load((SAMPLES / "health.yaml").read_text())


def case_id(case: dict[str, Any]) -> str:
    return str(case["name"])


def pod(pod_id: str) -> health.PodHealth:
    seen = health.pod_health(HEALTH["pods"][pod_id])
    logs = HEALTH["logs"].get(pod_id, "")
    return dataclasses.replace(seen, logs=health.tail(logs)) if logs else seen


@pytest.mark.parametrize("name", sorted(HEALTH["daemonsets"]))
def test_mock_device_plugin_is_found_by_image_or_chart_label(name: str) -> None:
    found = lookups.is_mock_device_plugin(HEALTH["daemonsets"][name])
    assert found is (name in HEALTH["mock_daemonsets"])


def test_daemonset_selector_reads_match_labels() -> None:
    labels = HEALTH["daemonsets"]["hami-chart"]["spec"]["selector"]["matchLabels"]
    assert lookups.selector_of(labels) == (
        "app.kubernetes.io/component=hami-mock-device-plugin,"
        "app.kubernetes.io/instance=hami,app.kubernetes.io/name=hami"
    )


def test_completer_lookup_matches_the_completer_pods() -> None:
    labels = {
        "app.kubernetes.io/name": "gpu-mock-allocation-completer",
        "gpu-platform.io/pool": "a100",
    }
    assert lookups.completer_selector("a100") == lookups.selector_of(labels)
    assert lookups.completer_name("a100") == HEALTH["pods"]["completer-ok"]["metadata"]["namespace"]


@pytest.mark.parametrize("pod_id", sorted(HEALTH["expect_pods"]))
def test_pod_health_reads_phase_readiness_restarts(pod_id: str) -> None:
    seen = health.pod_health(HEALTH["pods"][pod_id])
    for key, want in HEALTH["expect_pods"][pod_id].items():
        assert getattr(seen, key) == want, key


def test_only_broken_or_restarted_pods_get_their_logs_read() -> None:
    assert not health.needs_logs(pod("mock-ok"), no_restarts=True)
    assert health.needs_logs(pod("mock-crashloop"), no_restarts=False)
    assert health.needs_logs(pod("mock-restarted"), no_restarts=True)
    assert not health.needs_logs(pod("mock-restarted"), no_restarts=False)


def test_tail_keeps_the_last_lines_shortened() -> None:
    text = "\n".join(f"line {i}" for i in range(20)) + "\n" + "x" * 500 + "\n\n"
    kept = health.tail(text, lines=3)
    assert kept.startswith("line 18 | line 19 | xxx")
    assert kept.endswith("…")
    assert len(kept.split(" | ")[-1]) == health.LOG_LINE_LIMIT


@pytest.mark.parametrize("case", HEALTH["dns"], ids=case_id)
def test_dns_probe_judge(case: dict[str, Any]) -> None:
    problems = health.judge_dns_probe(health.DnsProbe(**case["probe"]))
    assert (not problems) is case["ok"], problems
    if not case["ok"]:
        assert case["problem"] in "; ".join(problems)


def test_dns_probe_script_prints_what_the_judge_reads(tmp_path: Path) -> None:
    """The probe's own lines are parsed by the judge: run it against a name that resolves here
    (the probe connects to a local listening socket instead of the Service)."""
    import socket
    import subprocess
    import sys

    with socket.socket() as server:
        server.bind(("127.0.0.1", 0))
        server.listen(1)
        port = server.getsockname()[1]
        done = subprocess.run(
            [sys.executable, "-c", health.DNS_PROBE_SCRIPT, "localhost", str(port)],
            capture_output=True,
            text=True,
            timeout=30,
            check=False,
        )
    assert done.returncode == 0, done.stdout + done.stderr
    resolved = done.stdout.splitlines()[0].split()
    assert resolved[:2] == ["resolved", "localhost"]
    assert done.stdout.splitlines()[1].startswith("connected ")
    # The judge reads the same lines for the real name.
    logs = done.stdout.replace("localhost", health.DNS_PROBE_NAME)
    probe = health.DnsProbe("Succeeded", logs, resolved[2])
    assert health.judge_dns_probe(probe) == []


def component(name: str, spec: dict[str, Any], nodes: list[str]) -> health.Component:
    every = nodes if spec.get("every_node") else []
    built = health.Component(
        name=name,
        where=spec.get("where", ""),
        pods=[pod(p) for p in spec.get("pods", [])],
        every_node=every,
        min_healthy=max(1, len(every)),
        no_restarts=spec.get("no_restarts", False),
    )
    if name == "mock device plugin":
        daemonset = HEALTH["daemonsets"].get(spec["daemonset"]) if spec["daemonset"] else None
        if daemonset is None:
            built.found = False
            built.where = f"a DaemonSet running {lookups.MOCK_PLUGIN_IMAGE}"
        else:
            meta = daemonset["metadata"]
            built.where = f"DaemonSet {meta['namespace']}/{meta['name']}"
            built.desired = daemonset["status"]["desiredNumberScheduled"]
            built.ready = spec.get("ready", daemonset["status"]["numberReady"])
    elif name == "kube-proxy":
        built.where = f"pods {lookups.KUBE_PROXY_SELECTOR} in kube-system"
    elif name == "CoreDNS":
        built.where = f"pods {lookups.COREDNS_SELECTOR} in kube-system"
    elif name == "Konnectivity agent":
        built.where = f"pods {lookups.KONNECTIVITY_SELECTOR} in kube-system"
    return built


@pytest.mark.parametrize("case", HEALTH["tenants"], ids=case_id)
def test_platform_health_judge(case: dict[str, Any]) -> None:
    components = [component(n, spec, case["nodes"]) for n, spec in case["components"].items()]
    tunnel = health.TunnelCheck(**case["tunnel"]) if case.get("tunnel") else None
    dns = health.DnsProbe(**HEALTH["dns"][case["dns"]]["probe"])
    verdict = health.judge_platform_health("tenant-a", components, tunnel=tunnel, dns=dns)
    assert verdict.ok is case["ok"], verdict.explain()
    assert verdict.facts["broken"] == case.get("broken", [])
    for fragment in case.get("problems", []):
        assert fragment in verdict.explain()
    assert all(p.startswith("tenant-a: ") for p in verdict.problems)


def test_a_missing_tunnel_check_is_a_problem() -> None:
    assert health.judge_tunnel(None)
    assert health.judge_tunnel(health.TunnelCheck("kube-system/x", ok=True)) == []
