"""``python -m benchmarks``: speed and scale of the program, measured (a benchmark, not a test).

Full run (default): synthetic stacks of 2, 10, 50 and 100 tenants (two pools each) evaluated
under mocks next to the bare-SDK floor and the typed floor (``benchmarks.typed_floor``: what the
program's resource types cost before the program adds anything), the deployment critical path,
and the control-plane footprint of the lab and prod stack files. Prints plain-text tables, writes
``reports/benchmark.json``, exits 0 unless an evaluation fails (goals are reported, not enforced).

``--ci``: 2 and 20 tenants, best of 5, writes ``reports/benchmark-ci.json``; exits 1 only on a
structural regression — the critical path grows with the number of tenants, a tenant (or pool)
waits for a sibling, the program costs more than ``--max-ratio`` (5) x the floor or more than
``--max-overhead`` (2) x its typed floor per resource in CPU time at the largest size — never on
absolute seconds (and on a program that does not evaluate at all).
"""

from __future__ import annotations

import argparse
import json
import os
import platform as host
import sys
from collections.abc import Sequence
from importlib import metadata
from pathlib import Path
from typing import Any

from benchmarks import bringup, graph, report, synthetic
from benchmarks.floor import ShapeJson, floor_shape, shape_to_json
from benchmarks.footprint import stack_footprint
from benchmarks.runner import REPO_ROOT, Kind, Measurement, measure
from benchmarks.typed_floor import check_supported

FOOTPRINT_STACKS = ("lab", "prod")


def _sizes(text: str) -> tuple[int, ...]:
    try:
        sizes = tuple(sorted({int(part) for part in text.split(",") if part.strip()}))
    except ValueError:
        raise argparse.ArgumentTypeError(f"{text!r}: give tenant counts like 2,10,50") from None
    if not sizes or sizes[0] < 1:
        raise argparse.ArgumentTypeError("tenant counts must be positive")
    return sizes


def parse_args(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(
        prog="python -m benchmarks",
        description="Speed and scale of the program, measured (a benchmark, not a test).",
    )
    parser.add_argument("--ci", action="store_true", help="small sizes; fail on structure only")
    parser.add_argument("--sizes", type=_sizes, help="tenant counts, e.g. 2,10,50,100")
    parser.add_argument("--repeat", type=int, help="runs per size, best kept (full 1, --ci 5)")
    parser.add_argument("--stack", default="lab", help="stack file the tenants are derived from")
    parser.add_argument("--preview", action="store_true", help="evaluate like pulumi preview")
    parser.add_argument("--json", type=Path, help="where to write the JSON report")
    parser.add_argument(
        "--max-ratio",
        type=float,
        default=report.RATIO_CI_LIMIT,
        help="--ci fails above this program/floor ratio (default %(default)s)",
    )
    parser.add_argument(
        "--max-overhead",
        type=float,
        default=report.OVERHEAD_CI_LIMIT,
        help="--ci fails above this program/typed-floor ratio (default %(default)s)",
    )
    parser.add_argument("--timeout", type=float, default=1800.0, help="seconds per evaluation")
    parser.add_argument(
        "--durations", action="store_true", help="print the duration estimates table and exit"
    )
    parser.add_argument(
        "--bringup",
        action="store_true",
        help="print only make lab's critical paths and pulls, with and without caches, and exit",
    )
    parser.add_argument(
        "--profile",
        action="store_true",
        help="also profile the largest size (program and floors): self time by code group",
    )
    args = parser.parse_args(argv)
    if args.sizes is None:
        args.sizes = synthetic.CI_SIZES if args.ci else synthetic.FULL_SIZES
    if args.repeat is None:
        args.repeat = 5 if args.ci else 1
    if args.repeat < 1:
        parser.error("--repeat must be at least 1")
    if args.json is None:
        name = "benchmark-ci.json" if args.ci else "benchmark.json"
        args.json = REPO_ROOT / "reports" / name
    return args


def _progress(text: str) -> None:
    print(text, file=sys.stderr, flush=True)


def _best(runs: Sequence[Measurement]) -> report.Cost:
    """The run that took the least CPU time (all of its numbers, so that they agree)."""
    best = min(runs, key=lambda r: r.eval_cpu_seconds)
    return report.Cost(
        eval_seconds=best.eval_seconds,
        eval_cpu_seconds=best.eval_cpu_seconds,
        engine_cpu_seconds=best.engine_cpu_seconds,
        gc_cpu_seconds=best.gc_cpu_seconds,
        import_seconds=best.import_seconds,
        process_seconds=best.process_seconds,
        peak_rss_mib=best.peak_rss_mib,
        graph_rss_mib=best.graph_rss_mib,
    )


class EvaluationFailedError(RuntimeError):
    """The program did not evaluate: nothing to measure."""


def _checked(run: Measurement) -> Measurement:
    if run.error is not None:
        raise EvaluationFailedError(
            f"the program failed to evaluate with {run.tenants} tenants ({run.kind}):\n{run.error}"
        )
    if run.duplicate_urns:
        raise EvaluationFailedError(
            f"{run.tenants} tenants: duplicate URNs, e.g. {run.duplicate_urns[:3]}"
        )
    return run


def floor_shapes(program: Measurement) -> ShapeJson:
    """The floors' shape from a program run; a type the typed floor cannot build fails here."""
    shape = floor_shape(graph.nodes_from(program.resources))
    try:
        check_supported(shape)
    except ValueError as exc:
        raise EvaluationFailedError(str(exc)) from None
    return shape_to_json(shape)


def warm_up(args: argparse.Namespace, base: dict[str, Any]) -> list[str]:
    """Modules the program loads lazily while it evaluates (one untimed 1-tenant run): every
    measured run imports them before its clock starts."""
    _progress("  warm-up: 1 tenant (untimed), to find the modules the program loads lazily")
    run = _checked(
        measure(
            "program",
            args.stack,
            synthetic.synthetic_config(base, 1),
            1,
            preview=args.preview,
            timeout=args.timeout,
        )
    )
    return run.loaded_modules


def measure_size(
    args: argparse.Namespace, base: dict[str, Any], tenants: int, preload: list[str]
) -> report.SizeResult:
    config = synthetic.synthetic_config(base, tenants)
    runs: dict[Kind, list[Measurement]] = {"program": [], "floor": [], "typed-floor": []}
    shape: ShapeJson | None = None
    for attempt in range(args.repeat):
        _progress(
            f"  {tenants} tenants: run {attempt + 1}/{args.repeat} (program, floor, typed floor)"
        )
        for kind in runs:
            run = _checked(
                measure(
                    kind,
                    args.stack,
                    config,
                    tenants,
                    preview=args.preview,
                    shape=shape,
                    timeout=args.timeout,
                    preload=preload,
                )
            )
            runs[kind].append(run)
            if shape is None:
                shape = floor_shapes(run)
    nodes = graph.nodes_from(runs["program"][0].resources)
    for kind in ("floor", "typed-floor"):
        if runs[kind][0].count != len(nodes):
            raise EvaluationFailedError(
                f"the {kind} registered {runs[kind][0].count}, not {len(nodes)}"
            )
    timed = graph.schedule(nodes, graph.duration_weight)
    tenants_by_name = sorted((n.name, n.urn) for n in nodes if n.type.endswith(graph.TENANT_SUFFIX))
    first_tenant = tenants_by_name[0][1] if tenants_by_name else None
    index = {n.urn: n for n in nodes}
    pool_spans = tuple(
        span
        for span in graph.spans(nodes, timed, graph.POOL_SUFFIX)
        if first_tenant and graph.owner(index, span.urn, graph.TENANT_SUFFIX) == first_tenant
    )
    return report.SizeResult(
        tenants=tenants,
        resources=len(nodes),
        custom=sum(1 for n in nodes if n.custom),
        program=_best(runs["program"]),
        floor=_best(runs["floor"]),
        typed_floor=_best(runs["typed-floor"]),
        by_duration=timed.path,
        by_count=graph.critical_path(nodes, graph.count_weight),
        independence=graph.independence(nodes),
        pool_spans=pool_spans,
    )


def profile_largest(
    args: argparse.Namespace, base: dict[str, Any], tenants: int, preload: list[str]
) -> report.Profile:
    """One extra, profiled evaluation of the program and of its floors (profiling slows all
    down; the shares are what matters)."""
    _progress(f"  profile: {tenants} tenants (program, floor, typed floor)")
    config = synthetic.synthetic_config(base, tenants)
    program = _checked(
        measure(
            "program", args.stack, config, tenants, args.preview, None, args.timeout, preload, True
        )
    )
    shape = floor_shapes(program)
    floors = {
        kind: _checked(
            measure(
                kind, args.stack, config, tenants, args.preview, shape, args.timeout, preload, True
            )
        ).profile
        for kind in ("floor", "typed-floor")
    }
    return report.Profile(
        tenants=tenants,
        program=program.profile,
        floor=floors["floor"],
        typed_floor=floors["typed-floor"],
    )


def lab_bring_up() -> bringup.BringUp:
    """make lab's estimated critical paths and pulls for the lab stack file itself."""
    from tests.support.harness import evaluate

    recording = evaluate("lab", False)
    if recording.error is not None:
        raise EvaluationFailedError(f"the lab stack failed to evaluate:\n{recording.error}")
    return bringup.bring_up("lab", graph.nodes_from(recording.resources))


def _machine() -> dict[str, Any]:
    return {
        "python": host.python_version(),
        "platform": f"{host.system()} {host.machine()}",
        "cpus": os.cpu_count(),
        "pulumi": metadata.version("pulumi"),
    }


def main(argv: Sequence[str] | None = None) -> int:
    args = parse_args(argv)
    if args.durations:
        print(report.render_durations(graph.DURATIONS))
        return 0

    from components.stack import parse_platform
    from tests.support.harness import load_stack_config

    if args.bringup:
        found = lab_bring_up()
        print("\n".join(bringup.render(found)))
        return 0

    base = load_stack_config(args.stack)
    sizes: list[report.SizeResult] = []
    _progress(
        f"benchmark ({'ci' if args.ci else 'full'}): {args.stack}, tenants "
        f"{', '.join(map(str, args.sizes))}, best of {args.repeat}"
    )
    try:
        preload = warm_up(args, base)
        for tenants in args.sizes:
            sizes.append(measure_size(args, base, tenants, preload))
        profile = profile_largest(args, base, max(args.sizes), preload) if args.profile else None
    except EvaluationFailedError as exc:
        print(f"FAIL: {exc}", file=sys.stderr)
        return 1
    footprints = [
        stack_footprint(stack, parse_platform(load_stack_config(stack)[synthetic.PLATFORM_KEY]))
        for stack in FOOTPRINT_STACKS
    ]
    bring_up = lab_bring_up() if args.stack == "lab" else None
    result = report.Report(
        mode="ci" if args.ci else "full",
        stack=args.stack,
        preview=args.preview,
        repeat=args.repeat,
        machine=_machine(),
        sizes=sizes,
        footprints=footprints,
        durations=graph.DURATIONS,
        profile=profile,
        bring_up=bring_up,
    )
    if args.ci:
        result.checks = report.ci_checks(
            sizes, ratio_limit=args.max_ratio, overhead_limit=args.max_overhead
        )
    else:
        result.goals = report.goal_checks(sizes)
        if bring_up is not None:
            result.goals.append(bringup.goal_check(bring_up))
    print(report.render(result))
    args.json.parent.mkdir(parents=True, exist_ok=True)
    args.json.write_text(json.dumps(report.to_json(result), indent=2) + "\n")
    print(f"\nJSON report: {args.json}")
    failed = [c for c in result.checks if not c.ok]
    if failed:
        print(
            "FAIL: structural regression: " + "; ".join(f"{c.name} ({c.detail})" for c in failed),
            file=sys.stderr,
        )
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
