"""Offline tests of the GPU probe (``tests/acceptance/gpu_probe/probe.py``) and its image pin.

No GPU here: the probe's modes run against a fake driver that behaves like the CUDA driver under
HAMi-core (a cap that refuses with ``CUDA_ERROR_OUT_OF_MEMORY`` once usage - context included -
would pass it; a launch budget that slows kernels), and its output goes to the same judges the
live suite uses - so a probe that printed the wrong thing, or a judge that accepted a cap being
exceeded, fails here. The ctypes layer is exercised with a fake library; the PTX kernel is
assembled with ``ptxas`` when one is on PATH (or at ``GPU_PLATFORM_PTXAS``), else that one test
skips.
"""

from __future__ import annotations

import ast
import ctypes
import io
import os
import shutil
import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest

from tests.acceptance import gpu_judges as gj
from tests.acceptance import gpu_plan, gpu_workloads
from tests.acceptance.gpu_probe import probe
from tests.support.harness import load_stack_config

MIB = 1 << 20
UUID_BYTES = bytes.fromhex("ed11da7447654d2898b72432437f14cb")
UUID = "GPU-ed11da74-4765-4d28-98b7-2432437f14cb"


class FakeClock:
    def __init__(self, start: float = 1_790_000_000.0) -> None:
        self.now = start

    def __call__(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.now += seconds


class FakeDriver:
    """The driver as the probe sees it under HAMi-core: ``cap_mib`` None means no HAMi-core."""

    def __init__(
        self,
        *,
        cap_mib: int | None,
        context_mib: int = 500,
        physical_mib: int = 81_920,
        kernel_seconds: float = 0.0025,
        clock: FakeClock | None = None,
        fail_on: str = "",
    ) -> None:
        self.cap = cap_mib
        self.context = context_mib
        self.physical = physical_mib
        self.used = 0
        self.kernel_seconds = kernel_seconds
        self.clock = clock or FakeClock()
        self.fail_on = fail_on
        self.launches = 0
        self.pointers: dict[int, int] = {}

    def _maybe_fail(self, call: str) -> None:
        if call == self.fail_on:
            raise probe.CudaError(call, 999, "CUDA_ERROR_UNKNOWN")

    def init(self) -> None:
        self._maybe_fail("cuInit")

    def device(self, ordinal: int = 0) -> int:
        return ordinal

    def retain_primary_context(self, device: int) -> None:
        self.used = self.context * MIB  # HAMi-core counts the context (context.c:14-25)

    def name(self, device: int) -> str:
        return "NVIDIA A100-SXM4-80GB"

    def uuid(self, device: int) -> str:
        return probe.format_uuid(UUID_BYTES)

    def device_count(self) -> int:
        return 1

    def driver_version(self) -> int:
        return 12080

    def attribute(self, attribute: int, device: int) -> int:
        return {probe.CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT: 108}.get(attribute, 8)

    def limit(self) -> int:
        return (self.cap if self.cap is not None else self.physical) * MIB

    def alloc(self, nbytes: int) -> int:
        self._maybe_fail("cuMemAlloc_v2")
        if self.used + nbytes > self.limit():
            raise probe.CudaError("cuMemAlloc_v2", 2, "CUDA_ERROR_OUT_OF_MEMORY")
        self.used += nbytes
        pointer = 0x7F00_0000_0000 + len(self.pointers) * (1 << 32)
        self.pointers[pointer] = nbytes
        return pointer

    def free(self, pointer: int) -> None:
        self.used -= self.pointers.pop(pointer)

    def fill(self, pointer: int, nbytes: int) -> None:
        assert self.pointers[pointer] >= nbytes

    def memory_info(self) -> tuple[int, int]:
        return self.limit() - self.used, self.limit()

    def load_kernel(self, ptx: str, name: str) -> str:
        assert f".entry {name}(" in ptx
        return name

    def launch(self, function: Any, blocks: int, threads: int, out: int, iterations: int) -> None:
        self._maybe_fail("cuLaunchKernel")
        assert (blocks, threads) == (108 * probe.BLOCKS_PER_SM, probe.THREADS_PER_BLOCK)
        self.launches += 1
        self.clock.now += self.kernel_seconds

    def synchronize(self) -> None:
        self._maybe_fail("cuCtxSynchronize")


def smi_for(driver: FakeDriver) -> Any:
    """nvidia-smi as HAMi-core answers it inside the container: the limit as the total."""

    def run(command: list[str], **_: Any) -> subprocess.CompletedProcess[str]:
        assert command[0] == "nvidia-smi"
        line = f"{UUID}, {driver.limit() // MIB}, {driver.used // MIB}\n"
        return subprocess.CompletedProcess(command, 0, line, "")

    return run


@pytest.fixture
def under_hami(monkeypatch: pytest.MonkeyPatch) -> None:
    """The container as HAMi's device plugin leaves it: libvgpu.so mapped, the limits set."""
    monkeypatch.setattr(probe, "mapped", lambda library, maps="/proc/self/maps": True)
    monkeypatch.setattr(probe, "read_text", lambda path: "/usr/local/vgpu/libvgpu.so")
    monkeypatch.setenv("CUDA_DEVICE_MEMORY_LIMIT_0", "4096m")
    monkeypatch.setenv("CUDA_DEVICE_SM_LIMIT", "10")


def run_main(argv: list[str], driver: FakeDriver) -> tuple[int, gj.ProbeRun]:
    out = io.StringIO()
    code = probe.main(argv, driver_factory=lambda: driver, out=out, run=smi_for(driver))  # type: ignore[arg-type, return-value]
    return code, gj.parse_probe_log("probe", out.getvalue())


MEMORY_ARGV = gpu_workloads.memory_args(
    gpu_plan.memory_guard_mib(81_920), gpu_plan.MEMORY_STEPS_MIB
)


# ---------------------------------------------------------------------------- memory mode


@pytest.mark.usefixtures("under_hami")
def test_memory_probe_under_a_cap_passes_the_judge() -> None:
    driver = FakeDriver(cap_mib=4096)
    code, run = run_main(MEMORY_ARGV, driver)
    assert code == 0
    result = run.last("memory-result")
    assert result is not None
    # 500 MiB context: 14 steps of 256 MiB fit (500 + 3584 = 4084), then 16 MiB does not.
    assert (result["allocatedMiB"], result["stopped"]) == (3584, "refused")
    verdict = gj.judge_memory_cap(run, cap_mib=4096)
    assert verdict.ok, verdict.explain()
    assert driver.used == 500 * MIB  # everything it allocated was freed again


@pytest.mark.usefixtures("under_hami")
def test_memory_probe_without_a_cap_stops_at_its_guard_and_fails_the_judge() -> None:
    driver = FakeDriver(cap_mib=None)
    code, run = run_main(MEMORY_ARGV, driver)
    assert code == 0
    result = run.last("memory-result")
    assert result is not None
    assert (result["allocatedMiB"], result["stopped"]) == (6144, "guard")
    verdict = gj.judge_memory_cap(run, cap_mib=4096)
    assert "cap exceeded" in verdict.explain()
    assert "nvidia-smi inside shows 81920 MiB total" in verdict.explain()


@pytest.mark.usefixtures("under_hami")
def test_memory_probe_reports_another_cuda_error_and_the_judge_fails_it() -> None:
    code, run = run_main(MEMORY_ARGV, FakeDriver(cap_mib=4096, fail_on="cuMemAlloc_v2"))
    assert code == 0
    result = run.last("memory-result")
    assert result is not None
    assert result["stopped"] == "error"
    assert "not CUDA_ERROR_OUT_OF_MEMORY" in gj.judge_memory_cap(run, cap_mib=4096).explain()


class PastTheLimit(FakeDriver):
    """HAMi-core's cuMemGetInfo_v2 answers CUDA_ERROR_INVALID_VALUE once usage passed the limit
    (src/cuda/memory.c:499-501)."""

    def memory_info(self) -> tuple[int, int]:
        raise probe.CudaError("cuMemGetInfo_v2", 1, "CUDA_ERROR_INVALID_VALUE")


@pytest.mark.usefixtures("under_hami")
def test_memory_probe_still_reports_when_hami_core_refuses_the_memory_query() -> None:
    code, run = run_main(MEMORY_ARGV, PastTheLimit(cap_mib=None))
    assert code == 0
    assert run.last("meminfo") == {
        "kind": "meminfo",
        "error": "CUDA_ERROR_INVALID_VALUE",
        "code": 1,
    }
    text = gj.judge_memory_cap(run, cap_mib=4096).explain()
    assert "cuMemGetInfo inside failed: CUDA_ERROR_INVALID_VALUE" in text
    assert "cap exceeded" in text


def test_probe_exits_1_with_an_error_line_when_cuda_fails() -> None:
    code, run = run_main(["info"], FakeDriver(cap_mib=4096, fail_on="cuInit"))
    assert code == 1
    assert run.errors == [
        {"kind": "error", "call": "cuInit", "error": "CUDA_ERROR_UNKNOWN", "code": 999}
    ]


def test_probe_reports_a_container_without_the_driver_library() -> None:
    def no_driver() -> probe.Driver:
        raise OSError("libcuda.so.1: cannot open shared object file")

    out = io.StringIO()
    assert probe.main(["info"], driver_factory=no_driver, out=out) == 1
    run = gj.parse_probe_log("probe", out.getvalue())
    assert run.errors[0]["call"] == "dlopen libcuda.so.1"


# --------------------------------------------------------------------------- compute mode


def compute(driver: FakeDriver, seconds: float) -> gj.ProbeRun:
    out = io.StringIO()
    probe.compute_mode(driver, out, seconds=seconds, clock=driver.clock)
    return gj.parse_probe_log("compute", out.getvalue())


def test_compute_probe_prints_one_window_per_second_with_its_kernels() -> None:
    driver = FakeDriver(cap_mib=None, kernel_seconds=0.0025)
    run = compute(driver, 5.0)
    windows = gj.rate_windows(run)
    assert len(windows) == 5
    assert all(abs(w.seconds - 1.0) < 0.05 for w in windows)
    result = run.last("compute-result")
    assert result is not None
    assert result["kernels"] == sum(w.kernels for w in windows)
    assert result["kernels"] == driver.launches
    rate, _ = gj.throughput(windows)
    assert rate is not None
    assert abs(rate - 400) < 10


@pytest.mark.usefixtures("under_hami")
def test_compute_probes_at_thirty_percent_pass_and_unthrottled_fail(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    monkeypatch.setenv("CUDA_DEVICE_SM_LIMIT", "100")
    full = compute(FakeDriver(cap_mib=None, kernel_seconds=0.0025), 20.0)
    monkeypatch.setenv("CUDA_DEVICE_SM_LIMIT", "30")
    monkeypatch.setenv("GPU_CORE_UTILIZATION_POLICY", "force")
    limited = compute(FakeDriver(cap_mib=None, kernel_seconds=0.0025 / 0.3), 20.0)
    unthrottled = compute(FakeDriver(cap_mib=None, kernel_seconds=0.0025), 20.0)
    passed = gj.judge_compute_share(limited, full, cores=30)
    assert passed.ok, passed.explain()
    assert abs(passed.facts["ratio"] - 0.3) < 0.02
    assert "not limited" in gj.judge_compute_share(unthrottled, full, cores=30).explain()


def test_windows_end_exactly_at_the_run_time() -> None:
    clock = FakeClock(100.0)
    assert list(probe.windows(2.5, clock)) == [101.0, 102.0, 102.5]


# ------------------------------------------------------------------------------ hold mode


@pytest.mark.usefixtures("under_hami")
def test_hold_probe_holds_its_memory_and_beats() -> None:
    driver = FakeDriver(cap_mib=4096)
    out = io.StringIO()
    probe.hold_mode(
        driver,
        out,
        mib=1024,
        seconds=6.0,
        interval=2.0,
        clock=driver.clock,
        sleep=driver.clock.sleep,
    )
    run = gj.parse_probe_log("holder", out.getvalue())
    beats = run.of("hold")
    assert [b["beat"] for b in beats] == [1, 2, 3, 4]
    assert all(b["heldMiB"] == 1024 for b in beats)
    assert run.last("hold-result") == {"kind": "hold-result", "heldMiB": 1024, "beats": 4}
    assert driver.used == 500 * MIB


def test_a_releasable_hog_holds_without_a_timer_until_the_suite_releases_it(tmp_path: Path) -> None:
    """TC-13's exit round (issue 24): no timer; the release annotation, as the kubelet writes the
    downward-API file (key="value" lines), ends it by itself after a ``released`` line."""
    annotations = tmp_path / "annotations"
    annotations.write_text('nvidia.com/use-gpuuuid="GPU-1"\n')
    driver = FakeDriver(cap_mib=4096)
    out = io.StringIO()
    began = driver.clock()

    def sleep(seconds: float) -> None:
        driver.clock.sleep(seconds)
        if driver.clock() >= began + 7.0:  # the suite releases it after the refusal
            annotations.write_text(
                'gpu-platform.io/release-hold="after-refusal-1"\nnvidia.com/use-gpuuuid="GPU-1"\n'
            )

    args = probe.parser().parse_args(gpu_workloads.hold_args(1024, 0, 2.0, releasable=True))
    assert args.release_key == gpu_workloads.RELEASE_ANNOTATION
    assert args.release_file == "/podinfo/annotations"
    probe.hold_mode(
        driver,
        out,
        mib=1024,
        seconds=0,
        interval=2.0,
        release_file=str(annotations),
        release_key=args.release_key,
        clock=driver.clock,
        sleep=sleep,
    )
    run = gj.parse_probe_log("hog", out.getvalue())
    assert run.last("released") is not None
    assert run.last("hold-result") == {"kind": "hold-result", "heldMiB": 1024, "beats": 5}


def test_a_releasable_hog_pod_mounts_its_annotations() -> None:
    body = gpu_workloads.releasable(
        gpu_workloads.probe_pod(
            "hog-exit",
            "run",
            args=gpu_workloads.hold_args(1024, 0, 2.0, releasable=True),
            memory_mib=2048,
            cores=10,
            card_uuid="GPU-1",
            image=gpu_workloads.PROBE_IMAGE,
        )
    )
    volume = next(v for v in body["spec"]["volumes"] if v["name"] == "podinfo")
    assert volume["downwardAPI"]["items"] == [
        {"path": "annotations", "fieldRef": {"fieldPath": "metadata.annotations"}}
    ]
    mounts = body["spec"]["containers"][0]["volumeMounts"]
    assert {"name": "podinfo", "mountPath": "/podinfo", "readOnly": True} in mounts
    assert gpu_workloads.release_patch("x") == {
        "metadata": {"annotations": {"gpu-platform.io/release-hold": "x"}}
    }


# --------------------------------------------------------------------------- the container


def test_environment_line_says_whether_hami_core_is_in_the_process(tmp_path: Path) -> None:
    maps = tmp_path / "maps"
    maps.write_text("7f0000 r-xp 00000000 08:01 1 /usr/local/vgpu/libvgpu.so\n")
    assert probe.mapped("libvgpu.so", str(maps))
    assert not probe.mapped("libvgpu.so", str(tmp_path / "missing"))
    release = tmp_path / "os-release"
    release.write_text('NAME="Debian GNU/Linux"\nPRETTY_NAME="Debian GNU/Linux 13 (trixie)"\n')
    assert probe.os_release(str(release)) == "Debian GNU/Linux 13 (trixie)"
    record = probe.environment()
    assert record["kind"] == "env"
    assert set(record["env"]) == set(probe.WATCHED_ENV)
    assert isinstance(record["libc"], str)
    assert record["libc"]


def test_nvidia_smi_line_reads_the_total_or_says_why_not() -> None:
    def answer(stdout: str, code: int = 0) -> Any:
        return lambda command, **_: subprocess.CompletedProcess(command, code, stdout, "boom")

    assert probe.smi("after", answer(f"{UUID}, 4096, 4084\n")) == {
        "kind": "smi",
        "when": "after",
        "uuid": UUID,
        "totalMiB": 4096,
        "usedMiB": 4084,
    }
    assert "error" in probe.smi("after", answer("", 9))
    assert "unexpected" in probe.smi("after", answer(f"{UUID}, [N/A], 1\n"))["error"]

    def missing(command: list[str], **_: Any) -> Any:
        raise FileNotFoundError("nvidia-smi")

    assert probe.smi("after", missing)["error"].startswith("FileNotFoundError")


def test_uuid_is_formatted_as_nvidia_smi_prints_it() -> None:
    assert probe.format_uuid(UUID_BYTES) == UUID


class FakeLib:
    """libcuda.so.1 as ctypes sees it: functions returning CUresult, outputs through pointers."""

    def __init__(self) -> None:
        self.calls: list[tuple[str, tuple[Any, ...]]] = []

    def cuGetErrorName(self, code: int, text: Any) -> int:
        text._obj.value = b"CUDA_ERROR_OUT_OF_MEMORY" if code == 2 else None
        return 0 if code == 2 else 1

    def cuMemAlloc_v2(self, pointer: Any, size: Any) -> int:
        self.calls.append(("cuMemAlloc_v2", (size,)))
        if size.value > 1024:
            return 2
        pointer._obj.value = 0xDEAD0000
        return 0

    def cuMemsetD8_v2(self, pointer: Any, value: Any, size: Any) -> int:
        self.calls.append(("cuMemsetD8_v2", (pointer, value, size)))
        return 0


def test_driver_passes_sizes_as_size_t_and_names_errors() -> None:
    lib = FakeLib()
    driver = probe.Driver(lib)
    assert driver.alloc(512) == 0xDEAD0000
    with pytest.raises(probe.CudaError) as refused:
        driver.alloc(4096)
    assert (refused.value.code, refused.value.name) == (2, "CUDA_ERROR_OUT_OF_MEMORY")
    assert driver.error_name(7) == "CUDA error 7"
    driver.fill(0xDEAD0000, 512)
    _, (pointer, value, size) = lib.calls[-1]
    assert isinstance(pointer, ctypes.c_uint64)
    assert isinstance(size, ctypes.c_size_t)
    assert (pointer.value, value.value, size.value) == (0xDEAD0000, 0x5A, 512)


def test_probe_uses_only_the_standard_library() -> None:
    """The pinned image has nothing but Python: any third-party import would fail in the pod."""
    tree = ast.parse(gpu_workloads.probe_source())
    imported = {
        alias.name.split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.Import)
        for alias in node.names
    } | {
        (node.module or "").split(".")[0]
        for node in ast.walk(tree)
        if isinstance(node, ast.ImportFrom)
    }
    assert imported - set(sys.stdlib_module_names) == set()


def test_kernel_ptx_declares_the_entry_the_probe_loads() -> None:
    assert f".visible .entry {probe.KERNEL_NAME}(" in probe.KERNEL_PTX
    assert ".target sm_70" in probe.KERNEL_PTX
    assert ".version 7.0" in probe.KERNEL_PTX


def ptxas() -> str | None:
    found = os.environ.get("GPU_PLATFORM_PTXAS") or shutil.which("ptxas")
    return found if found and Path(found).is_file() else None


@pytest.mark.skipif(ptxas() is None, reason="no ptxas here (PATH or GPU_PLATFORM_PTXAS)")
@pytest.mark.parametrize("arch", ["sm_75", "sm_80", "sm_89", "sm_90"])
def test_kernel_ptx_assembles_for_turing_to_hopper(tmp_path: Path, arch: str) -> None:
    source = tmp_path / "spin.ptx"
    source.write_text(probe.KERNEL_PTX)
    done = subprocess.run(
        [str(ptxas()), "--gpu-name", arch, str(source), "-o", str(tmp_path / "spin.cubin")],
        capture_output=True,
        text=True,
        check=False,
    )
    assert done.returncode == 0, done.stderr


# ---------------------------------------------------------------------- image and pods


def test_probe_image_is_pinned_by_tag_and_digest() -> None:
    assert gpu_workloads.pinned_image(gpu_workloads.PROBE_IMAGE) == gpu_workloads.PROBE_IMAGE
    assert gpu_workloads.probe_image({}) == gpu_workloads.PROBE_IMAGE


@pytest.mark.parametrize(
    "reference",
    [
        "python:3.12-slim",
        "python@sha256:57cd7c3a7a273101a6485ba99423ee568157882804b1124b4dd04266317710de",
        "python:3.12-slim@sha256:57cd7c3a",
        "python:latest@sha256:XYZ",
        "",
    ],
)
def test_tag_only_or_digest_only_images_are_refused(reference: str) -> None:
    with pytest.raises(ValueError, match="not pinned by tag and digest"):
        gpu_workloads.pinned_image(reference)
    if reference:
        with pytest.raises(ValueError, match="not pinned"):
            gpu_workloads.probe_image({gpu_workloads.PROBE_IMAGE_ENV: reference})


def test_an_override_pinned_by_digest_is_taken() -> None:
    own = "registry.example:5000/team/py:3.11.9-bookworm@sha256:" + "a" * 64
    assert gpu_workloads.probe_image({gpu_workloads.PROBE_IMAGE_ENV: own}) == own


def test_probe_pod_asks_one_share_of_the_named_card_and_mounts_the_probe() -> None:
    body = gpu_workloads.probe_pod(
        "memory-cap",
        "run1",
        args=gpu_workloads.memory_args(6144, (256, 16)),
        memory_mib=4096,
        cores=10,
        card_uuid=UUID,
        image=gpu_workloads.PROBE_IMAGE,
        node_selector={"kubernetes.io/hostname": "gpu-a100-0"},
        env={"GPU_CORE_UTILIZATION_POLICY": "force"},
    )
    container = body["spec"]["containers"][0]
    assert container["resources"]["limits"] == {
        "nvidia.com/gpu": "1",
        "nvidia.com/gpumem": "4096",
        "nvidia.com/gpucores": "10",
    }
    assert body["metadata"]["annotations"] == {"nvidia.com/use-gpuuuid": UUID}
    assert container["command"] == [
        "python3",
        "-u",
        "/probe/probe.py",
        "memory",
        "--guard-mib",
        "6144",
        "--steps-mib",
        "256",
        "16",
    ]
    env = {e["name"]: e["value"] for e in container["env"]}
    assert env["NVIDIA_DRIVER_CAPABILITIES"] == "compute,utility"
    assert env["GPU_CORE_UTILIZATION_POLICY"] == "force"
    assert body["spec"]["volumes"] == [{"name": "probe", "configMap": {"name": "gpu-probe"}}]
    assert container["volumeMounts"][0]["mountPath"] == "/probe"
    assert body["spec"]["restartPolicy"] == "Never"
    with pytest.raises(ValueError, match="not pinned"):
        gpu_workloads.probe_pod(
            "p", "r", args=["info"], memory_mib=1, cores=1, card_uuid=UUID, image="python:3"
        )


def test_probe_arguments_parse_in_the_probe() -> None:
    parse = probe.parser()
    assert parse.parse_args(MEMORY_ARGV).steps_mib == [256, 16]
    assert parse.parse_args(gpu_workloads.compute_args(45.0)).seconds == 45.0
    hold = parse.parse_args(gpu_workloads.hold_args(1024, 0, 2.0))
    assert (hold.mib, hold.seconds, hold.interval) == (1024, 0.0, 2.0)
    assert parse.parse_args(gpu_workloads.info_args()).mode == "info"


def test_configmap_carries_the_probe_source() -> None:
    body = gpu_workloads.probe_configmap("run1", gpu_workloads.probe_source())
    assert body["metadata"]["name"] == gpu_workloads.PROBE_CONFIGMAP
    compile(body["data"]["probe.py"], "probe.py", "exec")
    assert body["data"]["probe.py"] == Path(probe.__file__).read_text()


# ------------------------------------------------------------------------------- the plan


def test_the_lab_has_no_real_gpu_pool_so_the_tests_skip() -> None:
    from components.stack import parse_platform

    lab = parse_platform(load_stack_config("lab")["gpu-platform:platform"])
    assert gpu_plan.plan_gpu(lab) is None
    reason = gpu_plan.no_gpu_pool_reason("lab")
    assert "deviceMode: nvidia" in reason
    assert "\n" not in reason


def test_prod_runs_on_its_first_nvidia_pool() -> None:
    from components.stack import parse_platform

    prod = parse_platform(load_stack_config("prod")["gpu-platform:platform"])
    plan = gpu_plan.plan_gpu(prod)
    assert plan is not None
    assert (plan.tenant, plan.pool, plan.cards_per_node, plan.slots_per_card) == (
        "team-vision",
        "a100",
        4,
        10,
    )
    assert plan.slots_per_node == 40


def test_the_reference_probe_needs_a_tenant_that_allows_whole_cards() -> None:
    """reviews/acceptance.md section 5: under admission.wholeCards: false TC-12's and TC-14's
    gpucores 100 reference is refused by tenant-whole-cards; the plan prefers a tenant that
    allows it, and where none does the tests say why in one line instead of an ApiException."""
    import copy

    from components.stack import parse_platform

    raw = copy.deepcopy(load_stack_config("prod")["gpu-platform:platform"])
    first = next(t for t in raw["tenants"] if t["name"] == "team-vision")
    first.setdefault("admission", {})["wholeCards"] = False
    plan = gpu_plan.plan_gpu(parse_platform(raw))
    assert plan is not None
    if plan.tenant == "team-vision":  # no other tenant has a real GPU pool
        reason = gpu_plan.unrestricted_reference_refused(plan)
        assert reason is not None
        assert "admission.wholeCards: false" in reason
        assert "\n" not in reason
    else:
        assert plan.whole_cards
        assert gpu_plan.unrestricted_reference_refused(plan) is None
    for tenant in raw["tenants"]:
        tenant.setdefault("admission", {})["wholeCards"] = False
    everywhere = gpu_plan.plan_gpu(parse_platform(raw))
    assert everywhere is not None
    assert gpu_plan.unrestricted_reference_refused(everywhere) is not None


def test_sizes_follow_the_card() -> None:
    assert gpu_plan.memory_cap_mib(81_920) == 4096
    assert gpu_plan.memory_cap_mib(8192) == 2048
    assert gpu_plan.memory_guard_mib(81_920) == 6144
    assert gpu_plan.memory_guard_mib(4096) == 3072  # 1024 + 2048, within the card
    sizes = gpu_plan.reclaim_sizes(81_920)
    assert (sizes.hog_mib, sizes.hog_hold_mib, sizes.waiter_mib) == (61_440, 60_416, 21_504)
    assert sizes.hog_mib + sizes.waiter_mib > 81_920 >= sizes.waiter_mib
    assert gpu_plan.sharing_problem(10, 2, "TC-14") is None
    assert "slotsPerCard is 1" in str(gpu_plan.sharing_problem(1, 2, "TC-14"))


def test_every_gpu_test_is_numbered_and_needs_the_gpu_pool() -> None:
    """TC-11 ... TC-15 each take the gpu_plan fixture (the skip without a real GPU pool) and
    carry their id in the name and in the tc marker (read from the source: the tc marker is
    registered by the acceptance suite's conftest only)."""
    folder = Path(probe.__file__).resolve().parents[1]
    for tc in gpu_plan.GPU_TEST_IDS:
        number = tc.split("-")[1]
        (path,) = folder.glob(f"test_tc{number}_*.py")
        tree = ast.parse(path.read_text())
        tests = [
            node
            for node in tree.body
            if isinstance(node, ast.FunctionDef) and node.name.startswith(f"test_tc{number}_")
        ]
        assert len(tests) == 1, path.name
        assert {"gpu_plan", "gpu_target"} <= {a.arg for a in tests[0].args.args}
        assert ast.unparse(tests[0].decorator_list[0]) == f"pytest.mark.tc('{tc}')"


@pytest.mark.parametrize("second_start", [0.0, 5.0, 40.0, gpu_plan.SECOND_START_ALLOWANCE])
def test_tc14_keeps_its_phases_when_the_second_probe_starts_late(second_start: float) -> None:
    """reviews/acceptance.md section 5, "TC-14 timing": a second probe starting up to the
    allowance late still overlaps the first long enough to be judged after the settle, and
    outlives it by the alone phase."""
    phases = gpu_plan.interference_phases(second_start)
    judged = phases["together"] - gpu_plan.SETTLE_SECONDS
    assert judged >= gpu_plan.MIN_WINDOW_SAMPLES
    assert judged >= gpu_plan.INTERFERENCE_TOGETHER_SECONDS - gpu_plan.SETTLE_SECONDS - second_start
    assert phases["secondAlone"] >= gpu_plan.INTERFERENCE_ALONE_SECONDS
