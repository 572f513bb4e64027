"""One measured evaluation in a fresh process: the program (``__main__.py``), the floor or the
typed floor.

``measure(...)`` starts ``python -m benchmarks.runner`` and reads back a ``Measurement``. The
child does what ``tests.support.harness_runner`` does — same ``FakeMocks``, same
``RecordingMonitor``, same config handling (its classes are reused) — and in addition:

* imports the modules ``__main__.py`` imports, those an earlier (warm-up) evaluation loaded
  lazily (``pulumi_kubernetes`` loads each API group on first use) and those the typed floor
  takes its classes from, *before* the clock starts — for every kind of run, so all start from
  the same interpreter state. Import time is reported
  on its own as a one-off cost, not per resource;
* times the evaluation (from running the program to the engine having every registration and
  the stack's outputs) by wall clock (``eval_seconds``) and by the process's CPU time
  (``eval_cpu_seconds``, all threads). Under mocks nothing waits on I/O, so the two agree on an
  idle machine; CPU time is what other load on the machine does not inflate;
* measures the CPU time spent inside the mock monitor (``engine_cpu_seconds``): the stand-in
  for the Pulumi engine, which (de)serializes every registration's inputs and outputs once more
  than a real deployment's Python process would — in a real ``pulumi up`` the Go engine does it;
* measures the time the garbage collector takes during the evaluation (``gc_cpu_seconds``, by
  ``gc.callbacks``): about half of the CPU time of all three kinds of run at 50 tenants, and it
  grows with the number of live objects, so it is reported next to the ratios that it sways;
* reports its own peak resident memory (``getrusage(RUSAGE_SELF).ru_maxrss``) after the
  evaluation, and before it (``baseline``). Every measurement is its own process, so the peak
  belongs to that one evaluation (``RUSAGE_CHILDREN`` in the parent would be a maximum over all
  children so far, which hides every size but the largest).

The recording keeps only what the graph needs (no inputs or outputs): in a real deployment the
engine holds those in its own process, and copies of them in the measured one would only add to
the garbage collector's work — more for the program than for the floors, whose inputs are tiny.
"""

from __future__ import annotations

import ast
import cProfile
import gc
import importlib
import json
import logging
import os
import pstats
import resource
import runpy
import sys
import time
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal

from benchmarks.floor import ShapeJson
from tests.support.harness import run_child

REPO_ROOT = Path(__file__).resolve().parents[1]
PROGRAM = REPO_ROOT / "__main__.py"
Kind = Literal["program", "floor", "typed-floor"]


@dataclass(frozen=True)
class Registered:
    """A recorded registration, graph fields only (duck-types ``harness.Registration``)."""

    urn: str
    type: str
    name: str
    custom: bool
    parent: str
    provider: str
    dependencies: list[str]
    property_dependencies: dict[str, list[str]]
    read: bool = False


@dataclass(frozen=True)
class Measurement:
    kind: Kind
    tenants: int
    eval_seconds: float  # wall clock
    eval_cpu_seconds: float  # CPU time of the process (all threads) over the same span
    engine_cpu_seconds: float  # of which: inside the mock monitor (the engine's stand-in)
    gc_cpu_seconds: float  # of which: in the garbage collector
    import_seconds: float
    process_seconds: float
    peak_rss_kib: int
    baseline_rss_kib: int
    resources: list[Registered] = field(repr=False)
    error: str | None = None
    duplicate_urns: list[str] = field(default_factory=list)
    loaded_modules: list[str] = field(default_factory=list, repr=False)
    profile: dict[str, float] = field(default_factory=dict)  # self seconds by code group

    @property
    def count(self) -> int:
        return len(self.resources)

    @property
    def peak_rss_mib(self) -> float:
        return self.peak_rss_kib / 1024

    @property
    def graph_rss_mib(self) -> float:
        """Peak memory above what the interpreter held before evaluating."""
        return max(0, self.peak_rss_kib - self.baseline_rss_kib) / 1024


def _max_rss_kib() -> int:
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    return peak // 1024 if sys.platform == "darwin" else peak  # macOS reports bytes


def program_imports(program: Path = PROGRAM) -> list[str]:
    """Top-level modules ``program`` imports (``import x`` / ``from x import y``)."""
    tree = ast.parse(program.read_text(), filename=str(program))
    modules: list[str] = []
    for statement in tree.body:
        if isinstance(statement, ast.Import):
            modules += [alias.name for alias in statement.names]
        elif isinstance(statement, ast.ImportFrom) and statement.module and not statement.level:
            modules.append(statement.module)
    return list(dict.fromkeys(modules))


def code_group(filename: str, root: Path = REPO_ROOT) -> str:
    """Who a profiled function belongs to: the program, the harness, an SDK package, asyncio,
    typing, other standard library, or C built-ins."""
    if filename.startswith("~") or filename.startswith("<"):
        return "builtins (C) / generated"
    path = filename.replace(os.sep, "/")
    marker = "/site-packages/"
    if marker in path:
        package = path.split(marker, 1)[1].split("/", 1)[0]
        if package == "pulumi" and "/pulumi/runtime/mocks.py" in path:
            return "pulumi mocks (MockMonitor)"
        return package.removesuffix(".py")
    local = str(root).replace(os.sep, "/") + "/"
    if path.startswith(local):
        relative = path[len(local) :]
        if relative.startswith("tests/support/"):
            return "harness (recording, fakes)"
        if relative.startswith("benchmarks/"):
            return "benchmark (floor program)"
        return "program (" + relative.split("/", 1)[0] + ")"
    for stdlib in ("asyncio", "typing", "json", "copy", "pathlib"):
        if f"/{stdlib}/" in path or path.endswith(f"/{stdlib}.py"):
            return f"stdlib {stdlib}"
    return "stdlib other"


# ---------------------------------------------------------------------------------- parent


def measure(
    kind: Kind,
    stack: str,
    config: dict[str, Any],
    tenants: int,
    preview: bool = False,
    shape: ShapeJson | None = None,
    timeout: float = 1800.0,
    preload: list[str] | None = None,
    profile: bool = False,
) -> Measurement:
    """Evaluate the program (or a floor of ``shape``) in a fresh child process, after
    importing ``preload`` (modules an earlier evaluation loaded lazily) outside the clock."""
    request = {
        "kind": kind,
        "stack": stack,
        "preview": preview,
        "config": config,
        "shape": shape,
        "preload": preload or [],
        "profile": profile,
    }
    started = time.perf_counter()
    try:
        payload = run_child("benchmarks.runner", request, timeout)
    except RuntimeError as exc:
        raise RuntimeError(f"benchmark runner crashed ({kind}, {tenants} tenants): {exc}") from exc
    elapsed = time.perf_counter() - started
    return Measurement(
        kind=kind,
        tenants=tenants,
        eval_seconds=payload["eval_seconds"],
        eval_cpu_seconds=payload["eval_cpu_seconds"],
        engine_cpu_seconds=payload["engine_cpu_seconds"],
        gc_cpu_seconds=payload["gc_cpu_seconds"],
        import_seconds=payload["import_seconds"],
        process_seconds=elapsed,
        peak_rss_kib=payload["peak_rss_kib"],
        baseline_rss_kib=payload["baseline_rss_kib"],
        resources=[Registered(**r) for r in payload["resources"]],
        error=payload["error"],
        duplicate_urns=payload["duplicate_urns"],
        loaded_modules=payload["loaded_modules"],
        profile=payload["profile"],
    )


# ----------------------------------------------------------------------------------- child


def _graph_monitor(base: type[Any]) -> type[Any]:
    """The harness's RecordingMonitor, timing the CPU its calls take and keeping only what the
    graph needs of each registration."""

    class GraphMonitor(base):  # type: ignore[misc]
        # CPU seconds spent in the monitor (the stand-in for the engine), per call: the SDK
        # calls it from executor threads, so each call measures its own thread's CPU time.
        engine_cpu: list[float]

        def _record(self, request: Any, read: bool, **_: Any) -> None:
            # No copy of inputs and outputs: in a real deployment the engine keeps them in its
            # own process, and here they would only add to the garbage collector's work in the
            # measured one (more for the program than for the floors, whose inputs are tiny).
            self.records.append(self._graph_record(request, read))

        def _timed(self, method: Any, request: Any) -> Any:
            started = time.thread_time()
            try:
                return method(request)
            finally:
                self.engine_cpu.append(time.thread_time() - started)

        def RegisterResource(self, request: Any) -> Any:  # noqa: N802 - gRPC method names
            return self._timed(super().RegisterResource, request)

        def RegisterResourceOutputs(self, request: Any) -> Any:  # noqa: N802
            return self._timed(super().RegisterResourceOutputs, request)

        def ReadResource(self, request: Any) -> Any:  # noqa: N802
            return self._timed(super().ReadResource, request)

    return GraphMonitor


def _child(request: dict[str, Any]) -> dict[str, Any]:
    started = time.perf_counter()
    import pulumi
    from pulumi.runtime.config import set_all_config
    from pulumi.runtime.stack import run_pulumi_func
    from pulumi.runtime.sync_await import _sync_await

    from tests.support import harness
    from tests.support.harness_runner import FakeMocks, RecordingMonitor, _ListHandler

    for module in program_imports():
        importlib.import_module(module)
    for module in request.get("preload", []):
        try:
            importlib.import_module(module)
        except Exception:  # a module that imports only in context: it loads in the run
            continue
    from benchmarks import floor, typed_floor

    # The typed floor's classes too, for every kind, so that all three start alike.
    for module in typed_floor.modules():
        importlib.import_module(module)
    import_seconds = time.perf_counter() - started

    os.environ["GPU_PLATFORM_SKIP_PREFLIGHT"] = "1"
    os.environ["GPU_PLATFORM_SKIP_CHART_CHECK"] = "1"
    os.environ.setdefault("GPU_PLATFORM_DOCKER_INFO", "")  # nor asks Docker about the host
    os.environ.setdefault("GPU_PLATFORM_KIND_NETWORK_INSPECT", "")  # nor about the kind network
    preview = bool(request["preview"])
    values, secret_keys = harness.mock_config(request["config"])
    set_all_config(values, secret_keys)
    monitor = _graph_monitor(RecordingMonitor)(FakeMocks(preview))
    monitor.engine_cpu = []
    logger = logging.getLogger("pulumi-program")
    logger.propagate = False
    logger.addHandler(_ListHandler())
    logger.setLevel(logging.DEBUG)
    pulumi.runtime.set_mocks(
        monitor.mocks,
        project=harness.PROJECT,
        stack=request["stack"],
        preview=preview,
        logger=logger,
        monitor=monitor,
    )
    if request["kind"] in ("floor", "typed-floor"):
        shape = floor.shape_from_json(request["shape"] or [])
        build = floor.build if request["kind"] == "floor" else typed_floor.build

        def body() -> None:
            build(shape)
    else:

        def body() -> None:
            runpy.run_path(str(PROGRAM), run_name="__main__")

    baseline = _max_rss_kib()
    modules_before = set(sys.modules)
    error: str | None = None
    profiler = cProfile.Profile() if request.get("profile") else None
    monitor.engine_cpu.clear()
    gc_cpu: list[float] = []
    gc_started = [0.0]

    def on_gc(phase: str, _info: dict[str, int]) -> None:  # runs in the collecting thread
        if phase == "start":
            gc_started[0] = time.thread_time()
        else:
            gc_cpu.append(time.thread_time() - gc_started[0])

    gc.callbacks.append(on_gc)
    cpu_started = time.process_time()
    started = time.perf_counter()
    try:
        if profiler is not None:
            profiler.enable()
        _sync_await(run_pulumi_func(body))
        # As in the harness: finish the root stack again so that exports are registered.
        root = pulumi.runtime.settings.get_root_resource()
        if root is not None:
            root._outputs_registered = False  # type: ignore[attr-defined]
            root._finish()  # type: ignore[attr-defined]
            _sync_await(run_pulumi_func(lambda: None))
    except Exception as exc:  # reported; the parent decides
        error = f"{type(exc).__name__}: {exc}"
    finally:
        if profiler is not None:
            profiler.disable()
        gc.callbacks.remove(on_gc)
    eval_seconds = time.perf_counter() - started
    eval_cpu_seconds = time.process_time() - cpu_started
    peak = _max_rss_kib()
    loaded = [m for m in sys.modules if m not in modules_before and not m.startswith("_")]
    return {
        "eval_seconds": eval_seconds,
        "eval_cpu_seconds": eval_cpu_seconds,
        "engine_cpu_seconds": sum(monitor.engine_cpu),
        "gc_cpu_seconds": sum(gc_cpu),
        "import_seconds": import_seconds,
        "peak_rss_kib": peak,
        "baseline_rss_kib": baseline,
        "resources": monitor.records,  # graph fields only (GraphMonitor._record)
        "error": error,
        "duplicate_urns": monitor.duplicates,
        "loaded_modules": loaded,
        "profile": _self_time_by_group(profiler) if profiler is not None else {},
    }


def _self_time_by_group(profiler: cProfile.Profile) -> dict[str, float]:
    stats = pstats.Stats(profiler)
    totals: dict[str, float] = {}
    for (filename, _line, _name), row in stats.stats.items():  # type: ignore[attr-defined]
        group = code_group(filename)
        totals[group] = totals.get(group, 0.0) + row[2]  # row[2]: self time (tottime)
    return dict(sorted(totals.items(), key=lambda item: -item[1]))


def main() -> None:
    request = json.load(sys.stdin)
    result = _child(request)
    json.dump(result, sys.stdout, default=str)


if __name__ == "__main__":
    main()
