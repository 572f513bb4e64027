"""What each tenant of a stack costs the management cluster, and how many more fit
(``make capacity``; docs/prod.md, "Capacity of the management cluster").

Prints, from the stack file (no Pulumi run): per tenant the CPU and memory its pods on the
management cluster request (control plane, datastore, metrics agent, backups), the platform's
overhead and the stack's total (``components.capacity``); then, where the cluster's nodes are
known, their allocatable, the share the headroom leaves (``capacity.headroomPercent``) and how
many more tenants shaped like each one fit. The nodes come from ``--nodes`` (a ``kubectl get
nodes -o json`` file; ``GPU_PLATFORM_MANAGEMENT_NODES`` likewise), else the live cluster: the
lab's kind cluster, or prod's through the kubeconfig in the stack's secret config key
(``pulumi config get``). Exit status 1 when the stack does not fit, 0 otherwise.

Usage: ``python scripts/capacity.py --stack lab|prod [--file Pulumi.x.yaml] [--nodes nodes.json]``
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
from pathlib import Path
from typing import Any

import yaml

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from components import capacity
from components.management_nodes import NODES_ENV, read_nodes, recorded_nodes
from components.stack import parse_platform, substrate_for

PLATFORM_KEY = "gpu-platform:platform"


def _platform_raw(stack: str, path: Path | None) -> Any:
    file = path or Path(__file__).resolve().parents[1] / f"Pulumi.{stack}.yaml"
    data = yaml.safe_load(file.read_text()) or {}
    return ((data.get("config") or {}) if isinstance(data, dict) else {}).get(PLATFORM_KEY)


def _live_nodes(platform: Any, stack: str) -> dict[str, Any] | None:
    environ = {
        key: value for key, value in os.environ.items() if key != "GPU_PLATFORM_SKIP_PREFLIGHT"
    }
    if platform.management.kind is not None:
        return read_nodes({"KIND_CLUSTER_NAME": platform.kind.cluster_name}, environ=environ)
    key = platform.existing.kubeconfig_config_key
    try:
        result = subprocess.run(
            ["pulumi", "config", "get", "--stack", stack, key],
            capture_output=True,
            text=True,
            check=False,
        )
    except FileNotFoundError:
        result = subprocess.CompletedProcess([], 127, "", "pulumi is not on PATH")
    if result.returncode != 0:
        print(
            f"{stack}: cannot read the secret config key {key} (pulumi config get): "
            "give the nodes with NODES=<kubectl get nodes -o json file>",
            file=sys.stderr,
        )
        return None
    return read_nodes({"KUBECONFIG_CONTENT": result.stdout}, environ=environ)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--stack", default="lab")
    parser.add_argument("--file", type=Path)
    parser.add_argument("--nodes", type=Path)
    args = parser.parse_args(argv)
    platform = parse_platform(_platform_raw(args.stack, args.file))
    substrate = substrate_for(platform)
    cost = capacity.stack_cost(
        platform, substrate.kamaji_replicas, substrate.default_etcd(platform)
    )
    if args.nodes is not None:
        nodes = recorded_nodes({NODES_ENV: str(args.nodes)})
    else:
        nodes = recorded_nodes(os.environ) or _live_nodes(platform, args.stack)
    available = capacity.allocatable(nodes) if nodes is not None else None
    headroom = platform.capacity.headroom_percent
    for line in capacity.report(cost, available, headroom):
        print(line)
    if available is None:
        return 0
    verdict = capacity.verdict(cost.total, available, headroom)
    if verdict.warning:
        print(f"warning: {verdict.warning}")
    if verdict.refusal:
        print(f"refused: {verdict.refusal}")
        return 1
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
