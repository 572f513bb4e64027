"""The capacity model (components.capacity): what each tenant costs the management cluster from
the requests the program sets, the allocatable of the schedulable nodes, the verdict and
``make capacity``'s table; the nodes' read (components.management_nodes); the config key."""

from __future__ import annotations

import copy
import json
import subprocess
import sys
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
from pulumi import RunError

from components import capacity
from components.capacity import Resources
from components.config import ConfigError
from components.management_nodes import NODES_ENV, read_nodes
from components.management_values import DefaultEtcd
from components.stack import parse_platform
from tests.support.harness import REPO_ROOT, load_stack_config

MIB = 2**20


def _platform(stack: str, **capacity_settings: Any):
    raw = load_stack_config(stack)["gpu-platform:platform"]
    if capacity_settings:
        raw = {**raw, "capacity": capacity_settings}
    return parse_platform(raw)


def _node(cpu: str, memory: str, **spec: Any) -> dict[str, Any]:
    return {
        "metadata": {"name": "n"},
        "spec": spec,
        "status": {"allocatable": {"cpu": cpu, "memory": memory}},
    }


@pytest.mark.parametrize(
    ("quantity", "millis"), [("250m", 250), ("2", 2000), ("1.5", 1500), ("0.1", 100)]
)
def test_cpu_quantities(quantity: str, millis: int) -> None:
    assert capacity.cpu_millis(quantity) == millis


@pytest.mark.parametrize(
    ("quantity", "size"),
    [("512Mi", 512 * MIB), ("1Gi", 1024 * MIB), ("1G", 10**9), ("1048576", MIB), ("1e3", 1000)],
)
def test_memory_quantities(quantity: str, size: int) -> None:
    assert capacity.memory_bytes(quantity) == size


@pytest.mark.parametrize(
    ("quantity", "millis"),
    [(".5", 500), ("1.", 1000), ("500000u", 500), ("2000000000n", 2000), ("1e0", 1000)],
)
def test_every_cpu_quantity_the_config_accepts_is_read(quantity: str, millis: int) -> None:
    """The config takes any Kubernetes quantity (components.config.base.RESOURCE_QUANTITY): the
    model reads each, instead of a traceback at preview (review of issue 44's first version)."""
    assert capacity.cpu_millis(quantity) == millis


@pytest.mark.parametrize(("quantity", "size"), [("500k", 500_000), (".5Gi", 512 * MIB)])
def test_every_memory_quantity_the_config_accepts_is_read(quantity: str, size: int) -> None:
    assert capacity.memory_bytes(quantity) == size


def test_a_suffix_kubernetes_refuses_is_refused() -> None:
    with pytest.raises(ValueError, match="'1K'"):
        capacity.memory_bytes("1K")  # "K" is no suffix of resource.Quantity; "k" is


def test_a_limit_without_a_request_counts_as_its_request() -> None:
    """The API server defaults a missing request to the limit (kubernetes v1.35.0
    pkg/apis/core/v1/defaults.go:170-177)."""
    asked = {"limits": {"cpu": "1", "memory": "1Gi"}, "requests": {"cpu": "250m"}}
    assert capacity.requests(asked) == Resources(250, 1024 * MIB)


def test_a_bad_quantity_is_named() -> None:
    with pytest.raises(ValueError, match="'12x'"):
        capacity.memory_bytes("12x")


def test_a_pod_reserves_its_containers_or_its_largest_init_container() -> None:
    pod = {
        "initContainers": [{"resources": {"requests": {"cpu": "500m", "memory": "64Mi"}}}],
        "containers": [
            {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
            {"resources": {"requests": {"cpu": "100m", "memory": "128Mi"}}},
        ],
    }
    assert capacity.pod_requests(pod) == Resources(500, 256 * MIB)


def test_each_prod_tenant_costs_what_the_program_requests() -> None:
    """team-vision: 3 control-plane pods of 250m+125m+125m / 512+256+128 MiB, 3 etcd members
    of 100m / 256 MiB, the metrics agent's 25m / 64 MiB and its usage publisher's 10m / 64 MiB,
    a backup job's 50m / 64 MiB. team-speech: 2 pods, an external PostgreSQL (nothing here), no
    backups."""
    costs = {
        cost.tenant: cost
        for cost in (capacity.tenant_cost(p, t) for p in [_platform("prod")] for t in p.tenants)
    }
    vision = costs["team-vision"]
    assert vision.control_plane == Resources(1500, 3 * 896 * MIB)
    assert vision.datastore == Resources(300, 3 * 256 * MIB)
    assert vision.metrics_agent == Resources(25 + 10, (64 + 64) * MIB)
    assert vision.backups == Resources(50, 64 * MIB)
    assert vision.total == Resources(1885, 3648 * MIB)
    speech = costs["team-speech"]
    assert speech.datastore == Resources()
    assert speech.backups == Resources()
    assert speech.total == Resources(1035, (2 * 896 + 128) * MIB)


def test_the_platform_overhead_counts_kamaji_the_default_etcd_and_the_central_metrics() -> None:
    platform = _platform("prod")
    # Two Kamaji (100m / 128 MiB each), Prometheus (100m / 256 MiB), Grafana (50m / 128 MiB),
    # the backup alerts' kube-state-metrics (10m / 32 MiB).
    assert capacity.platform_overhead(platform, 2, None) == Resources(360, 672 * MIB)
    etcd = DefaultEtcd(3, "cluster.local", own_release=False)
    assert capacity.platform_overhead(platform, 2, etcd) == Resources(660, 1440 * MIB)


def test_only_schedulable_nodes_count() -> None:
    nodes = {
        "items": [
            _node("8", "32Gi"),
            _node("4", "16Gi", unschedulable=True),
            _node(
                "4",
                "16Gi",
                taints=[{"key": "node-role.kubernetes.io/control-plane", "effect": "NoSchedule"}],
            ),
            _node("2", "8Gi", taints=[{"key": "x", "effect": "PreferNoSchedule"}]),
        ]
    }
    assert capacity.allocatable(nodes) == Resources(10000, 40 * 1024 * MIB)


def test_the_verdict_refuses_above_the_allocatable_and_warns_within_the_headroom() -> None:
    available = Resources(10000, 10 * 1024 * MIB)
    fits = capacity.verdict(Resources(5000, 5 * 1024 * MIB), available, 20)
    assert fits == capacity.Verdict(None, None)
    close = capacity.verdict(Resources(8500, 5 * 1024 * MIB), available, 20)
    assert close.refusal is None
    assert close.warning is not None
    assert "headroomPercent (20)" in close.warning
    over = capacity.verdict(Resources(5000, 11 * 1024 * MIB), available, 20)
    assert over.warning is None
    assert over.refusal is not None
    assert "5000m CPU, 11264 MiB" in over.refusal
    assert "10000m CPU, 10240 MiB" in over.refusal


def test_how_many_more_tenants_fit() -> None:
    available = Resources(10000, 10 * 1024 * MIB)
    total = Resources(4000, 2 * 1024 * MIB)
    assert capacity.how_many_more(Resources(1000, 512 * MIB), total, available) == 6
    assert capacity.how_many_more(Resources(100, 4 * 1024 * MIB), total, available) == 2
    assert capacity.how_many_more(Resources(), total, available) is None
    assert capacity.how_many_more(Resources(1000, 0), Resources(11000, 0), available) == 0


def test_the_report_lists_every_tenant_the_total_and_what_fits() -> None:
    platform = _platform("prod")
    cost = capacity.stack_cost(platform, 2, None)
    lines = capacity.report(cost, Resources(20000, 64 * 1024 * MIB), 20)
    text = "\n".join(lines)
    for tenant in ("team-vision", "team-llm", "team-speech"):
        assert tenant in text
    assert "stack total" in text
    assert "5165m" in text  # 1885 + 1885 + 1035 + 360
    assert "more tenants shaped like team-vision: 5 within the headroom, 7 at most" in text
    unknown = capacity.report(cost, None, 20)
    assert unknown[-1].startswith("management cluster: allocatable not known")


def test_headroom_is_a_bounded_percentage_and_unknown_keys_are_refused() -> None:
    assert _platform("lab").capacity.headroom_percent == 20
    assert _platform("lab", headroomPercent=35).capacity.headroom_percent == 35
    with pytest.raises(ConfigError, match=r"capacity\.headroomPercent"):
        _platform("lab", headroomPercent=95)
    with pytest.raises(ConfigError, match=r"capacity\.headroom"):
        _platform("lab", headroom=10)


# ------------------------------------------------------------------------ reading the nodes


def _completed(code: int, stdout: str = "", stderr: str = "") -> subprocess.CompletedProcess[str]:
    return subprocess.CompletedProcess([], code, stdout, stderr)


def test_a_recorded_file_stands_in_for_the_cluster(tmp_path: Path) -> None:
    path = tmp_path / "nodes.json"
    path.write_text(json.dumps({"items": [_node("1", "1Gi")]}))

    def never(_: Mapping[str, str]) -> subprocess.CompletedProcess[str]:
        raise AssertionError("the cluster was asked")

    environ = {NODES_ENV: str(path), "GPU_PLATFORM_SKIP_PREFLIGHT": "1"}
    assert read_nodes({}, environ=environ, run=never) == {"items": [_node("1", "1Gi")]}
    path.write_text("[]")
    with pytest.raises(RunError, match=NODES_ENV):
        read_nodes({}, environ=environ, run=never)


def test_the_read_is_skipped_with_the_preflight_switch() -> None:
    assert read_nodes({}, environ={"GPU_PLATFORM_SKIP_PREFLIGHT": "1"}, run=None) is None  # type: ignore[arg-type]


def test_the_live_read_and_its_failures() -> None:
    listed = json.dumps({"items": []})
    assert read_nodes({}, environ={}, run=lambda _: _completed(0, listed)) == {"items": []}
    # The lab before its kind cluster exists: nothing printed, nothing checked.
    assert read_nodes({}, environ={}, run=lambda _: _completed(0, "")) is None
    with pytest.raises(RunError, match="not `kubectl get nodes -o json` output"):
        read_nodes({}, environ={}, run=lambda _: _completed(0, "namespace/-o"))
    with pytest.raises(RunError, match="Unauthorized"):
        read_nodes({}, environ={}, run=lambda _: _completed(1, "", "error: Unauthorized"))


def _capacity(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, str(REPO_ROOT / "scripts" / "capacity.py"), *args],
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )


def test_make_capacity_prints_the_table_and_fails_a_stack_that_does_not_fit(
    tmp_path: Path,
) -> None:
    roomy = tmp_path / "roomy.json"
    roomy.write_text(json.dumps({"items": [_node("32", "128Gi")]}))
    result = _capacity("--stack", "prod", "--nodes", str(roomy))
    assert result.returncode == 0, result.stderr
    assert "team-llm" in result.stdout
    assert "more tenants shaped like team-speech" in result.stdout
    small = tmp_path / "small.json"
    small.write_text(json.dumps({"items": [_node("2", "4Gi")]}))
    result = _capacity("--stack", "prod", "--nodes", str(small))
    assert result.returncode == 1
    assert "refused: the stack requests 5165m CPU, 9888 MiB" in result.stdout


def test_with_the_prometheus_operator_the_central_stack_costs_nothing() -> None:
    """metrics.prometheusOperator deploys no Prometheus, Grafana or kube-state-metrics of the
    platform's (components/metrics/deploy.py): only Kamaji is counted."""
    raw = copy.deepcopy(load_stack_config("prod")["gpu-platform:platform"])
    raw["metrics"] = {
        **raw.get("metrics", {}),
        "prometheusOperator": {
            "remoteWriteUrl": "http://prometheus-k8s-0.prometheus-operated.monitoring.svc:9090/api/v1/write"
        },
    }
    raw["metrics"].pop("alertmanagers", None)
    platform = parse_platform(raw)
    assert capacity.platform_overhead(platform, 2, None) == Resources(200, 256 * MIB)
