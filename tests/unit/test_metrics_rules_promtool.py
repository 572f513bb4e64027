"""The chargeback recording rules under Prometheus' own rule tester, ``promtool test rules``.

The input series are HAMi v2.10.0's exact shapes as the agents label them
(``tests/support/metrics_scenario.py``); the expected values are computed here from the
scenario's numbers, not from ``components.metrics.rules``. ``promtool`` comes from Debian's
``prometheus`` package (.ci/run installs it); without it the module skips, naming the package.
Two meta-tests prove the net can fail: a wrong expectation, and a rule with a wrong unit.
"""

from __future__ import annotations

import os
import shutil
import subprocess
from pathlib import Path
from typing import Any

import pytest
import yaml

from components.metrics import backup_alerts, rules, usage
from tests.support import metrics_scenario as scenario

PROMTOOL = shutil.which("promtool")
# In CI (.ci/run installs it, and sets CI) a missing promtool fails instead of skipping.
pytestmark = pytest.mark.skipif(
    PROMTOOL is None and not os.environ.get("CI"),
    reason="promtool not installed (Debian: apt-get install -y prometheus)",
)

# Every series appears at minute 10, holds its value for 40 minutes (minutes 10..49), then goes
# stale at minute 50, as a pod that ends does. Before and after, the rules record nothing.
FIRST, SAMPLES = 10, 40


def _values(value: float) -> str:
    return " ".join(["_"] * FIRST + [repr(float(value))] * SAMPLES + ["stale"] + ["_"] * 20)


def _input_series(extra: tuple[tuple[str, float], ...] = ()) -> list[dict[str, str]]:
    series = [
        {"series": name, "values": _values(value)}
        for name, value in (*scenario.all_series(), *extra)
    ]
    # A scraped process cannot pick its tenant: the agent keeps a scraped ``tenant`` label only
    # as ``exported_tenant`` (honor_labels: false); the rules must follow ``tenant`` alone.
    # (A container of its own: one container's grant is counted once, whoever exports it.)
    spoofed = series[0]["series"].replace("{", '{exported_tenant="tenant-b",', 1)
    spoofed = spoofed.replace('pod="train-0"', 'pod="spoof-0"')
    assert "spoof-0" in spoofed
    series.append({"series": spoofed, "values": _values(1024 * scenario.MIB)})
    return series


def _sample(record: str, tenant: str, value: float) -> dict[str, Any]:
    return {"labels": f'{record}{{tenant="{tenant}"}}', "value": value}


def _expected_gauges() -> list[dict[str, Any]]:
    expected = scenario.expected_per_tenant()
    spoof_gib = 1.0  # the spoofed series above: 1024 MiB, counted for its real tenant (tenant-a)
    records = {
        rules.MEMORY_ALLOCATED: lambda t, row: (
            row["mem_alloc"] + (spoof_gib if t == "tenant-a" else 0)
        ),
        rules.MEMORY_USED: lambda t, row: row["mem_used"],
        rules.CORES_ALLOCATED: lambda t, row: row["core_alloc"],
        rules.CORES_USED: lambda t, row: row["core_used"],
        rules.MEMORY_QUOTA: lambda t, row: row["mem_quota"],
        rules.CORES_QUOTA: lambda t, row: row["core_quota"],
        rules.CARDS: lambda t, row: row["cards"],
        rules.CARDS_SHARED: lambda t, row: row["cards_shared"],
    }
    tests = []
    for record, value in records.items():
        tests.append(
            {
                "expr": record,
                "eval_time": "30m",
                "exp_samples": [
                    _sample(record, tenant, value(tenant, row)) for tenant, row in expected.items()
                ],
            }
        )
        # Nothing before the pods run, nothing once their series are stale.
        tests.append({"expr": record, "eval_time": "5m", "exp_samples": []})
        tests.append({"expr": record, "eval_time": "55m", "exp_samples": []})
    return tests


def _expected_hours() -> list[dict[str, Any]]:
    """At 1h the hour held the 40 one-minute samples of minutes 10..49: 40/60 of an hour."""
    expected = scenario.expected_per_tenant()
    hours = SAMPLES / 60
    gauges = {
        rules.MEMORY_ALLOCATED: ("mem_alloc", 1.0),
        rules.MEMORY_USED: ("mem_used", 0.0),
        rules.CORES_ALLOCATED: ("core_alloc", 0.0),
        rules.CORES_USED: ("core_used", 0.0),
    }
    tests = []
    for gauge, (key, spoof) in gauges.items():
        record = rules.hours_name(gauge)
        samples = []
        for tenant, row in expected.items():
            level = row[key] + (spoof if tenant == "tenant-a" else 0)
            samples.append(_sample(record, tenant, level * hours))
        tests.append({"expr": record, "eval_time": "60m", "exp_samples": samples})
    return tests


def _test_file(
    tmp_path: Path,
    rule_groups: dict[str, Any],
    tests: list[dict[str, Any]],
    extra: tuple[tuple[str, float], ...] = (),
) -> Path:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rule_groups, sort_keys=False))
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": f"{rules.RULE_INTERVAL_SECONDS}s",
        "tests": [
            {"interval": "1m", "input_series": _input_series(extra), "promql_expr_test": tests}
        ],
    }
    path = tmp_path / "test.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def _promtool(path: Path) -> subprocess.CompletedProcess[str]:
    assert PROMTOOL is not None, "promtool is missing: apt-get install -y prometheus"
    return subprocess.run(
        [PROMTOOL, "test", "rules", path.name],
        cwd=path.parent,
        capture_output=True,
        text=True,
        check=False,
    )


def test_promtool_checks_the_rule_file(tmp_path: Path) -> None:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules.rule_groups()))
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "rules", str(tmp_path / "rules.yml")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_per_tenant_gauges_record_what_hami_granted_and_measured(tmp_path: Path) -> None:
    result = _promtool(_test_file(tmp_path, rules.rule_groups(), _expected_gauges()))
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_hourly_integrals_are_gib_hours_and_card_hours(tmp_path: Path) -> None:
    result = _promtool(_test_file(tmp_path, rules.rule_groups(), _expected_hours()))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_wrong_expectation_fails(tmp_path: Path) -> None:
    tests = _expected_gauges()
    tests[0]["exp_samples"][0]["value"] += 1
    assert _promtool(_test_file(tmp_path, rules.rule_groups(), tests)).returncode != 0


def test_a_rule_with_the_wrong_unit_fails(tmp_path: Path) -> None:
    groups = rules.rule_groups()
    first = groups["groups"][0]["rules"][0]
    assert first["record"] == rules.MEMORY_ALLOCATED
    first["expr"] = first["expr"].replace(str(rules.GIB), str(1000**3))  # GB, not GiB
    assert _promtool(_test_file(tmp_path, groups, _expected_gauges())).returncode != 0


# ---------------------------------------------------------------- where a bill is disputed


def _second_exporter(series: list[tuple[str, float]], job: str) -> tuple[tuple[str, float], ...]:
    """Every series of ``job`` once more, as a second pod of it exports them (a rollout or a
    restart of HAMi's scheduler, or its device plugin replaced on a node)."""
    copies = []
    for name, value in series:
        if f'job="{job}"' in name:
            labels = name.split('instance="', 1)
            rest = labels[1].split('"', 1)[1]
            copies.append((f'{labels[0]}instance="{job}-second-pod"{rest}', value))
    assert copies
    return tuple(copies)


def test_two_hami_pods_exporting_the_same_grants_do_not_double_the_bill(tmp_path: Path) -> None:
    """Issue 40: two scheduler pods (and two device-plugin pods) visible at once, each with
    every grant, record what one would."""
    extra = (
        *_second_exporter(scenario.scheduler_series(), "hami-scheduler"),
        *_second_exporter(scenario.monitor_series(), "hami-device-plugin"),
    )
    path = _test_file(tmp_path, rules.rule_groups(), _expected_gauges(), extra)
    result = _promtool(path)
    assert result.returncode == 0, result.stdout + result.stderr


UNCAPPED_POD = (
    'namespace="speech",node="tenant-b-l4-0",pod="uncapped-0",container_index="0",'
    'device_uuid="GPU-l4-1",zone="vGPU",tenant="tenant-b",job="hami-scheduler",'
    'instance="hami-scheduler-7d9c5-abcde",source="hami-scheduler"'
)


def test_a_container_without_gpucores_is_billed_as_a_whole_card(tmp_path: Path) -> None:
    """Issue 40: HAMi grants ``gpumem`` without ``gpucores`` 0 % of the card and HAMi-core then
    limits nothing, so the container is billed one card (100 %), not 0."""
    extra = (
        (f"hami_vgpu_memory_allocated_bytes{{{UNCAPPED_POD}}}", 4000 * scenario.MIB),
        (f"hami_vgpu_core_allocated_ratio{{{UNCAPPED_POD}}}", 0.0),
    )
    expected = scenario.expected_per_tenant()["tenant-b"]["core_alloc"] + 1.0
    test = {
        "expr": f'{rules.CORES_ALLOCATED}{{tenant="tenant-b"}}',
        "eval_time": "30m",
        "exp_samples": [_sample(rules.CORES_ALLOCATED, "tenant-b", expected)],
    }
    result = _promtool(_test_file(tmp_path, rules.rule_groups(), [test], extra))
    assert result.returncode == 0, result.stdout + result.stderr


FORGED = (
    'tenant="tenant-a",job="hami-scheduler",instance="hami-scheduler-forged",'
    'source="hami-scheduler"'
)


def test_a_series_named_like_a_recorded_rule_is_not_billed(tmp_path: Path) -> None:
    """Issue 40: a series a pod exposes under a recorded rule's name (``tenant:…``) reaches
    neither the hourly integrals nor ``make usage``'s queries (which read the rules' own
    series only), so it cannot drive a bill down or up."""
    forged = tuple((f"{gauge}{{{FORGED}}}", -1000.0) for gauge in usage.QUANTITIES.values())
    expected = scenario.expected_per_tenant()
    hours = SAMPLES / 60
    spoof = {"memory_allocated_gib_hours": 1.0}  # the spoofed container of _input_series
    keys = {
        "memory_allocated_gib_hours": "mem_alloc",
        "memory_used_gib_hours": "mem_used",
        "cores_allocated_card_hours": "core_alloc",
        "cores_used_card_hours": "core_used",
    }
    tests = [
        {
            "expr": query,
            "eval_time": "60m",
            "exp_samples": [
                {
                    "labels": f'{{tenant="{tenant}"}}',
                    "value": (
                        row[keys[quantity]]
                        + (spoof.get(quantity, 0.0) if tenant == "tenant-a" else 0.0)
                    )
                    * hours,
                }
                for tenant, row in expected.items()
            ],
        }
        for quantity, query in usage.queries("1h").items()
    ]
    result = _promtool(
        _test_file(tmp_path, rules.rule_groups(), [*tests, *_expected_hours()], forged)
    )
    assert result.returncode == 0, result.stdout + result.stderr


# ------------------------------------------------------------------- alerts: gaps in the bill


def _render(summary: str, labels: dict[str, str]) -> str:
    for key, value in labels.items():
        summary = summary.replace(f"{{{{ $labels.{key} }}}}", value)
    assert "{{" not in summary, summary
    return summary


def _firing(name: str, labels: dict[str, str]) -> dict[str, Any]:
    alert = next(a for a in rules.ALERTS if a.name == name)
    with_severity = {**labels, "severity": "warning"}
    return {
        "exp_labels": with_severity,
        "exp_annotations": {"summary": _render(alert.summary, labels)},
    }


def _series(name: str, labels: dict[str, str], values: str) -> dict[str, str]:
    text = ",".join(f'{key}="{value}"' for key, value in labels.items())
    return {"series": f"{name}{{{text}}}", "values": values}


SCHEDULER_A = {
    "job": "hami-scheduler",
    "instance": "hami-scheduler-7d9c5-abcde",
    "source": "hami-scheduler",
    "tenant": "tenant-a",
}


def _agent(tenant: str) -> dict[str, str]:
    return {
        "job": "gpu-metrics-agent",
        "instance": "localhost:9090",
        "source": "gpu-metrics-agent",
        "tenant": tenant,
    }


ALERT_CASES: list[tuple[str, list[dict[str, str]], str, dict[str, list[dict[str, Any]]]]] = [
    (
        "healthy: a tenant scraped, its agent writing, nothing refused or failing",
        [
            _series("up", SCHEDULER_A, "1x40"),
            _series("up", _agent("tenant-a"), "1x40"),
            _series(
                "prometheus_remote_storage_samples_failed_total",
                {**_agent("tenant-a"), "remote_name": "1a2b3c", "url": "http://x/api/v1/write"},
                "0x40",
            ),
        ],
        "30m",
        {alert.name: [] for alert in rules.ALERTS},
    ),
    (
        "HAMi's scheduler cannot be scraped",
        [_series("up", SCHEDULER_A, "1x5 0x35"), _series("up", _agent("tenant-a"), "1x40")],
        "20m",
        {"GpuMetricsTargetDown": [_firing("GpuMetricsTargetDown", SCHEDULER_A)]},
    ),
    (
        "tenant-b's agent stops writing; tenant-a's goes on",
        [
            _series("up", _agent("tenant-b"), "1x10 stale"),
            _series("up", _agent("tenant-a"), "1x40"),
            _series("up", SCHEDULER_A, "1x40"),
        ],
        "20m",
        {
            "GpuMetricsAgentSilent": [_firing("GpuMetricsAgentSilent", {"tenant": "tenant-b"})],
            "GpuHamiSchedulerNotScraped": [],
        },
    ),
    (
        "an agent writes but no HAMi scheduler of its tenant is scraped",
        [_series("up", _agent("tenant-c"), "1x40")],
        "15m",
        {
            "GpuHamiSchedulerNotScraped": [
                _firing("GpuHamiSchedulerNotScraped", {"tenant": "tenant-c"})
            ]
        },
    ),
    (
        "a dra tenant's agent writes but its claims exporter is not scraped (Pending, deleted)",
        [
            _series("up", {**_agent("tenant-c"), "gpu_sharing": "dra"}, "1x40"),
            _series("up", {**SCHEDULER_A, "tenant": "tenant-c"}, "1x40"),
        ],
        "15m",
        {
            "GpuDraClaimsNotScraped": [_firing("GpuDraClaimsNotScraped", {"tenant": "tenant-c"})],
            "GpuMetricsTargetDown": [],
        },
    ),
    (
        "a dra tenant whose exporter is scraped, and a hami tenant without one",
        [
            _series("up", {**_agent("tenant-c"), "gpu_sharing": "dra"}, "1x40"),
            _series("up", {**SCHEDULER_A, "tenant": "tenant-c"}, "1x40"),
            _series(
                "up",
                {
                    "job": "dra-claims",
                    "instance": "gpu-platform-dra-claims-5d8f9-abcde",
                    "source": "dra-claims",
                    "tenant": "tenant-c",
                },
                "1x40",
            ),
            _series("up", _agent("tenant-a"), "1x40"),
            _series("up", SCHEDULER_A, "1x40"),
        ],
        "30m",
        {alert.name: [] for alert in rules.ALERTS},
    ),
    (
        "the central server refuses an agent's samples",
        [
            _series(
                "prometheus_remote_storage_samples_failed_total",
                {**_agent("tenant-a"), "remote_name": "1a2b3c", "url": "http://x/api/v1/write"},
                "0 0 0 500 900 900 900",
            )
        ],
        "5m",
        {
            "GpuMetricsSamplesDropped": [
                _firing(
                    "GpuMetricsSamplesDropped",
                    {**_agent("tenant-a"), "remote_name": "1a2b3c", "url": "http://x/api/v1/write"},
                )
            ]
        },
    ),
    (
        "a chargeback rule fails to evaluate",
        [
            _series(
                "prometheus_rule_evaluation_failures_total",
                {
                    "job": "prometheus",
                    "instance": "localhost:9090",
                    "source": "prometheus",
                    "rule_group": "gpu-platform-tenant-gpu",
                },
                "0 0 2 2 2 2",
            )
        ],
        "4m",
        {
            "GpuChargebackRulesFailing": [
                _firing(
                    "GpuChargebackRulesFailing",
                    {
                        "job": "prometheus",
                        "instance": "localhost:9090",
                        "source": "prometheus",
                        "rule_group": "gpu-platform-tenant-gpu",
                    },
                )
            ]
        },
    ),
]


def _alert_file(tmp_path: Path, groups: dict[str, Any]) -> Path:
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(groups, sort_keys=False))
    tests = [
        {
            "name": title,
            "interval": "1m",
            "input_series": series,
            "alert_rule_test": [
                {"eval_time": at, "alertname": name, "exp_alerts": alerts}
                for name, alerts in expected.items()
            ],
        }
        for title, series, at, expected in ALERT_CASES
    ]
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": f"{rules.RULE_INTERVAL_SECONDS}s",
        "tests": tests,
    }
    path = tmp_path / "alerts.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return path


def test_the_alerts_fire_exactly_where_the_bill_has_a_gap(tmp_path: Path) -> None:
    """Issue 40: a scrape that fails, an agent that stops writing, a tenant whose HAMi is not
    scraped, a dra tenant whose claims exporter is not scraped, samples the central server
    refused, rules that fail: each fires its alert for the tenant concerned, and a healthy
    tenant (hami or dra) fires none."""
    result = _promtool(_alert_file(tmp_path, rules.rule_groups()))
    assert result.returncode == 0, result.stdout + result.stderr


def test_an_alert_that_cannot_fire_fails(tmp_path: Path) -> None:
    groups = rules.rule_groups()
    alerts = next(g for g in groups["groups"] if g["name"] == "gpu-platform-metering-alerts")
    alerts["rules"][0]["expr"] += " and on() vector(0) > 1"  # never true
    assert _promtool(_alert_file(tmp_path, groups)).returncode != 0


def test_the_central_configuration_with_alertmanagers_passes_promtools_check(
    tmp_path: Path,
) -> None:
    """The central server's prometheus.yml as deployed (its own job, Kamaji's, an Alertmanager
    from ``metrics.alertmanagers``) and its rule file, under ``promtool check config``. (Debian's
    promtool lacks Kubernetes service discovery, so the agents' files cannot be checked here.)"""
    from components.metrics import objects, scrape

    data = objects.prometheus_config(
        "30s", "kamaji-system", ["http://alertmanager.monitoring.svc:9093", "https://am.x/p"]
    )["data"]
    central = yaml.safe_load(data["prometheus.yml"])
    assert central["alerting"]["alertmanagers"] == [
        {"scheme": "http", "static_configs": [{"targets": ["alertmanager.monitoring.svc:9093"]}]},
        {"scheme": "https", "static_configs": [{"targets": ["am.x"]}], "path_prefix": "/p"},
    ]
    assert [job["job_name"] for job in central["scrape_configs"]] == [
        "kamaji",
        scrape.CENTRAL_JOB,
        "backup-state-metrics",
    ]
    central["rule_files"] = ["rules.yml"]
    (tmp_path / "rules.yml").write_text(data[scrape.RULES_FILE_NAME])
    (tmp_path / "prometheus.yml").write_text(yaml.safe_dump(central))
    assert PROMTOOL is not None
    result = subprocess.run(
        [PROMTOOL, "check", "config", "prometheus.yml"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        check=False,
    )
    assert result.returncode == 0, result.stdout + result.stderr
    assert f"SUCCESS: {18 + len(backup_alerts.ALERTS)} rules found" in result.stdout


# ------------------------------------------- the error bounds of a bill (docs/metrics.md)

SCRAPE_SECONDS = 30  # metrics.scrapeInterval's default
SEND_DELAY_SECONDS = 5  # the agents' batch_send_deadline (prometheus v3.5.0 config/config.go:232)
BOUND_SECONDS = SCRAPE_SECONDS + SEND_DELAY_SECONDS + rules.RULE_INTERVAL_SECONDS  # 95 s
ONE_CARD = (
    'namespace="batch",node="tenant-b-l4-0",pod="job-0",container_index="0",'
    'device_uuid="GPU-l4-0",zone="vGPU",tenant="tenant-b",job="hami-scheduler",'
    'instance="hami-scheduler-7d9c5-abcde",source="hami-scheduler"'
)


def _one_grant_bill(tmp_path: Path, first: int, end: int, billed_minutes: int) -> bool:
    """Whether ``make usage``'s card-hours over the last hour, at 60 min, equal
    ``billed_minutes`` / 60 for one container granted a whole card from scrape ``first`` to
    scrape ``end`` (stale there; scrapes every 30 s), under promtool."""
    values = " ".join(["_"] * first + ["100"] * (end - first) + ["stale"])
    query = usage.queries("1h")["cores_allocated_card_hours"]
    samples = (
        [{"labels": '{tenant="tenant-b"}', "value": billed_minutes / 60}] if billed_minutes else []
    )
    (tmp_path / "rules.yml").write_text(yaml.safe_dump(rules.rule_groups(), sort_keys=False))
    document = {
        "rule_files": ["rules.yml"],
        "evaluation_interval": f"{rules.RULE_INTERVAL_SECONDS}s",
        "tests": [
            {
                "interval": f"{SCRAPE_SECONDS}s",
                "input_series": [
                    {"series": f"hami_vgpu_core_allocated_ratio{{{ONE_CARD}}}", "values": values}
                ],
                "promql_expr_test": [{"expr": query, "eval_time": "60m", "exp_samples": samples}],
            }
        ],
    }
    path = tmp_path / "bound.yml"
    path.write_text(yaml.safe_dump(document, sort_keys=False))
    return _promtool(path).returncode == 0


@pytest.mark.parametrize(
    ("first", "end"),
    [(20, 30), (21, 31), (21, 22), (20, 21), (3, 117), (4, 117)],
    ids=["5min-even", "5min-odd", "30s-odd", "30s-even", "57min-odd", "56.5min-even"],
)
def test_a_grant_is_billed_within_the_documented_sampling_bound(
    tmp_path: Path, first: int, end: int
) -> None:
    """docs/metrics.md "Error bounds of a bill": a grant held for d seconds is billed
    d ± 95 s (scrape interval + send delay + rule interval), whatever its length and its
    phase against the rule evaluations. promtool has no send delay, so the bound holds with
    5 s to spare. Exactly one whole number of rule intervals within the bound is what
    Prometheus' evaluator bills (the others fail: the check can fail)."""
    held = (end - first) * SCRAPE_SECONDS
    interval = rules.RULE_INTERVAL_SECONDS
    candidates = [n for n in range(0, 61) if abs(n * interval - held) <= BOUND_SECONDS]
    billed = [n for n in candidates if _one_grant_bill(tmp_path, first, end, n)]
    assert len(billed) == 1, (held, candidates, billed)


# ------------------------------------------------------------- a gpuSharing: dra tenant's claims

# One whole card of dra-example-driver (80Gi, components.metrics.dra_claims) held by a claim of
# tenant-c, as the tenant's agent labels the exporter's series.
DRA_CLAIM = (
    'namespace="ml",claim="train-0-gpu-x7k2p",pod="train-0",driver="gpu.example.com",'
    'pool="tenant-c-a100-0",device="gpu-0",tenant="tenant-c",job="dra-claims",'
    'instance="gpu-platform-dra-claims-5d8f9-abcde",source="dra-claims"'
)
DRA_CARD_BYTES = 80 * 1024**3


def _dra_series(labels: str = DRA_CLAIM, cards: float = 1.0) -> tuple[tuple[str, float], ...]:
    return (
        (f"gpu_platform_dra_device_allocated_cards{{{labels}}}", cards),
        (f"gpu_platform_dra_device_memory_allocated_bytes{{{labels}}}", DRA_CARD_BYTES * cards),
    )


def _dra_tests(cards: float = 1.0) -> list[dict[str, Any]]:
    """HAMi's tenants exactly as without DRA, and tenant-c's claim: ``cards`` cards and its
    memory while held (30 min), nothing once the claim's series are stale (55 min), and
    40 minutes of it in the hour's integral."""
    expected = scenario.expected_per_tenant()
    gauges = {
        rules.MEMORY_ALLOCATED: ("mem_alloc", 1.0, 80.0 * cards),
        rules.CORES_ALLOCATED: ("core_alloc", 0.0, cards),
    }
    tests: list[dict[str, Any]] = []
    for gauge, (key, spoof, dra) in gauges.items():
        hami = {
            tenant: row[key] + (spoof if tenant == "tenant-a" else 0.0)
            for tenant, row in expected.items()
        }
        samples = [_sample(gauge, tenant, value) for tenant, value in hami.items()]
        tests.append(
            {
                "expr": gauge,
                "eval_time": "30m",
                "exp_samples": [*samples, _sample(gauge, "tenant-c", dra)],
            }
        )
        tests.append({"expr": gauge, "eval_time": "55m", "exp_samples": []})
        record = rules.hours_name(gauge)
        hours = SAMPLES / 60
        tests.append(
            {
                "expr": record,
                "eval_time": "60m",
                "exp_samples": [
                    *(_sample(record, t, v * hours) for t, v in hami.items()),
                    # as the rule sums it: 40 samples, then * 60 / 3600
                    _sample(
                        record,
                        "tenant-c",
                        dra * SAMPLES * rules.RULE_INTERVAL_SECONDS / 3600,
                    ),
                ],
            }
        )
    return tests


def test_a_dra_tenants_claim_is_billed_and_hamis_bill_is_unchanged(tmp_path: Path) -> None:
    """Issue 43: a whole DRA card held 40 minutes bills 1 card and 80 GiB while held, 40/60
    card-hours and GiB-hours in the hour, nothing once released (its series stale); HAMi's
    tenants get the values they get without it."""
    path = _test_file(tmp_path, rules.rule_groups(), _dra_tests(), _dra_series())
    result = _promtool(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_dra_exporter_pods_bill_a_claim_once(tmp_path: Path) -> None:
    second = DRA_CLAIM.replace("5d8f9-abcde", "5d8f9-fghij").replace('pod="train-0"', 'pod=""')
    extra = (*_dra_series(), *_dra_series(second))
    result = _promtool(_test_file(tmp_path, rules.rule_groups(), _dra_tests(), extra))
    assert result.returncode == 0, result.stdout + result.stderr


def test_a_dra_share_bills_its_fraction(tmp_path: Path) -> None:
    """With DRAConsumableCapacity (off at v1.35) the exporter writes the consumed share."""
    path = _test_file(tmp_path, rules.rule_groups(), _dra_tests(0.25), _dra_series(cards=0.25))
    result = _promtool(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_two_shares_of_one_device_in_one_claim_are_both_billed(tmp_path: Path) -> None:
    """With DRAConsumableCapacity one claim may hold two shares of one device (k8s.io/api
    v0.35.0 resource/v1/types.go:1678-1686): the exporter tells them apart by ``share`` (their
    shareID), and the dedupe keeps it, so 0.25 + 0.25 bills 0.5 (not 0.25, one of them lost),
    and two exporter pods writing both still bill them once."""
    shares = [
        DRA_CLAIM.replace('device="gpu-0"', f'device="gpu-0",share="{uid}"')
        for uid in ("0f8e1c2a-1111-4a4a-9b9b-000000000001", "0f8e1c2a-2222-4a4a-9b9b-000000000002")
    ]
    second_pod = [s.replace("5d8f9-abcde", "5d8f9-fghij") for s in shares]
    extra = tuple(item for labels in (*shares, *second_pod) for item in _dra_series(labels, 0.25))
    path = _test_file(tmp_path, rules.rule_groups(), _dra_tests(0.5), extra)
    result = _promtool(path)
    assert result.returncode == 0, result.stdout + result.stderr


def test_the_rules_of_before_did_not_bill_a_dra_claim(tmp_path: Path) -> None:
    """The check can fail: HAMi's rules alone (as they were) leave tenant-c out."""
    groups = rules.rule_groups()
    for rule in groups["groups"][0]["rules"]:
        if rule["record"] == rules.MEMORY_ALLOCATED:
            granted = rules.once("hami_vgpu_memory_allocated_bytes", rules.CONTAINER_GRANT)
            rule["expr"] = f"sum by (tenant) ({granted}) / {rules.GIB}"
        if rule["record"] == rules.CORES_ALLOCATED:
            rule["expr"] = f"sum by (tenant) ({rules._CORES_BILLED}) / 100"
    assert _promtool(_test_file(tmp_path, groups, _dra_tests(), _dra_series())).returncode != 0


def test_make_usage_reports_the_dra_tenant(tmp_path: Path) -> None:
    """``make usage``'s own queries (usage.queries, over the last hour at 60 min) give tenant-c
    its 40 minutes of one card (and its 80 GiB), beside HAMi's tenants."""
    wanted = {"cores_allocated_card_hours": 1.0, "memory_allocated_gib_hours": 80.0}
    tests = [
        {
            "expr": f'{query} and on (tenant) {{tenant="tenant-c"}}',
            "eval_time": "60m",
            # the summed samples, then * 60 / 3600, as the query computes it
            "exp_samples": [
                {
                    "labels": '{tenant="tenant-c"}',
                    "value": wanted[quantity] * SAMPLES * rules.RULE_INTERVAL_SECONDS / 3600,
                }
            ],
        }
        for quantity, query in usage.queries("1h").items()
        if quantity in wanted
    ]
    result = _promtool(_test_file(tmp_path, rules.rule_groups(), tests, _dra_series()))
    assert result.returncode == 0, result.stdout + result.stderr
