"""Record the usage command's query results from a real Prometheus, for tests/unit/test_usage.py.

Run by hand (``python -m tests.support.record_usage_samples``) where Debian's ``prometheus``
package is installed: it writes the scenario's HAMi-shaped series (tests/support/
metrics_scenario.py) as OpenMetrics for three hours, turns them into TSDB blocks
(``promtool tsdb create-blocks-from openmetrics``), starts ``prometheus`` on them, backfills the
recording rules (``promtool tsdb create-blocks-from rules``), restarts it with the rule blocks,
asks it every query ``scripts/usage.py`` sends for a 3h window, and stores each response as
Prometheus returned it in ``tests/unit/samples/metrics/usage-3h.json``.
"""

from __future__ import annotations

import json
import shutil
import subprocess
import tempfile
import time
import urllib.parse
import urllib.request
from pathlib import Path

import yaml

from components.metrics import rules, usage
from tests.support import metrics_scenario as scenario

# A fixed, minute-aligned start; the window ends 30 s after a rule evaluation so that no
# sample sits on its left edge (Prometheus 2.x includes that edge, 3.x does not).
T0 = 1_790_000_000 - 1_790_000_000 % 3600
HOURS = 3
WINDOW = f"{HOURS}h"
END = T0 + HOURS * 3600 + 30
OUT = Path(__file__).resolve().parents[1] / "unit" / "samples" / "metrics" / "usage-3h.json"
PORT = 19090


def _openmetrics() -> str:
    lines: list[str] = []
    families: dict[str, list[str]] = {}
    for series, value in scenario.all_series():
        name = series.split("{", 1)[0]
        for t in range(T0 - 900, T0 + HOURS * 3600 + 900, 30):
            families.setdefault(name, []).append(f"{series} {value} {t}")
    for name, samples in families.items():
        lines.append(f"# TYPE {name} gauge")
        lines.extend(samples)
    lines.append("# EOF")
    return "\n".join(lines) + "\n"


def _wait(url: str) -> None:
    for _ in range(100):
        try:
            urllib.request.urlopen(url, timeout=1).read()
            return
        except OSError:
            time.sleep(0.2)
    raise RuntimeError(f"{url} never answered")


def _start(config: Path, data: Path) -> subprocess.Popen[bytes]:
    process = subprocess.Popen(
        [
            "prometheus",
            f"--config.file={config}",
            f"--storage.tsdb.path={data}",
            "--storage.tsdb.retention.time=100y",
            f"--web.listen-address=127.0.0.1:{PORT}",
        ],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    _wait(f"http://127.0.0.1:{PORT}/-/ready")
    return process


def main() -> None:
    work = Path(tempfile.mkdtemp(prefix="usage-record-"))
    data, rule_blocks = work / "data", work / "rule-blocks"
    (work / "input.om").write_text(_openmetrics())
    subprocess.run(
        [
            "promtool",
            "tsdb",
            "create-blocks-from",
            "openmetrics",
            str(work / "input.om"),
            str(data),
        ],
        check=True,
        stdout=subprocess.DEVNULL,
    )
    gauges = {"groups": [rules.rule_groups()["groups"][0]]}
    (work / "rules.yml").write_text(yaml.safe_dump(gauges))
    (work / "prometheus.yml").write_text(yaml.safe_dump({"global": {"scrape_interval": "30s"}}))
    process = _start(work / "prometheus.yml", data)
    try:
        subprocess.run(
            [
                "promtool",
                "tsdb",
                "create-blocks-from",
                "rules",
                f"--start={T0 - 600}",
                f"--end={T0 + HOURS * 3600 + 600}",
                f"--url=http://127.0.0.1:{PORT}",
                f"--output-dir={rule_blocks}",
                f"--eval-interval={rules.RULE_INTERVAL_SECONDS}s",
                str(work / "rules.yml"),
            ],
            check=True,
            stdout=subprocess.DEVNULL,
        )
    finally:
        process.terminate()
        process.wait()
    for block in rule_blocks.iterdir():
        if block.is_dir():
            shutil.move(str(block), data / block.name)
    process = _start(work / "prometheus.yml", data)
    recorded = {}
    try:
        for quantity, expr in usage.queries(WINDOW).items():
            params = urllib.parse.urlencode({"query": expr, "time": str(END)})
            url = f"http://127.0.0.1:{PORT}/api/v1/query?{params}"
            recorded[expr] = json.load(urllib.request.urlopen(url, timeout=10))
            print(quantity, json.dumps(recorded[expr]["data"]["result"]))
    finally:
        process.terminate()
        process.wait()
        shutil.rmtree(work)
    version = subprocess.run(
        ["prometheus", "--version"], capture_output=True, text=True, check=True
    ).stdout.splitlines()[0]
    OUT.parent.mkdir(parents=True, exist_ok=True)
    OUT.write_text(
        json.dumps(
            {"recorded_with": version, "window": WINDOW, "end": END, "responses": recorded},
            indent=1,
        )
        + "\n"
    )


if __name__ == "__main__":
    main()
