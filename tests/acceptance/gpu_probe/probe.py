#!/usr/bin/env python3
"""The acceptance suite's GPU probe (TC-11 ... TC-15): one JSON line per measurement on stdout.

Shipped to the pods as a ConfigMap and run by the pinned Python image's ``python3``. It needs
nothing but the standard library: CUDA is the driver API (``libcuda.so.1``, which the NVIDIA
Container Toolkit mounts with the ``compute`` capability) called through ``ctypes``, and the
compute kernel is a few lines of PTX that the driver compiles at load time. So no CUDA toolkit
or runtime in the image can disagree with the host's driver, and every call goes through the
same door HAMi-core guards: ``ctypes`` resolves each ``cu*`` function with ``dlsym``, which
HAMi-core's ``libvgpu.so`` (preloaded through ``/etc/ld.so.preload`` by HAMi's device plugin)
replaces with its own and answers with its hooked functions (HAMi-core src/libvgpu.c:74-140).

Modes (``python3 probe.py <mode> [options]``), each starting with an ``env`` and a ``device``
line:

* ``memory``: allocate (``cuMemAlloc_v2``) in coarse, then fine steps until the driver - or
  HAMi-core - refuses; one ``alloc`` line per attempt, then HAMi-core's view
  (``cuMemGetInfo_v2``), ``nvidia-smi``'s, and a ``memory-result`` line.
* ``compute``: launch a fixed kernel in batches for a fixed time; one ``rate`` line per window
  (wall-clock ``t0``/``t1``, kernels completed), then ``compute-result``.
* ``hold``: allocate and keep memory, touching it with a kernel every interval (``hold`` lines);
  ``--seconds 0`` holds until the pod is deleted, or until ``--release-key`` appears in the
  downward-API annotations file ``--release-file`` (then a ``released`` line and exit 0).
* ``info``: the ``env``, ``device`` and ``smi`` lines only.

The suite's judges read only these lines (``tests/acceptance/gpu_judges.py``). Exit code 0 when
the mode ran to its end (a refusal in ``memory`` mode is a result, not an error), 1 on any other
CUDA error (an ``error`` line says which call failed).
"""

from __future__ import annotations

import argparse
import ctypes
import json
import os
import platform
import subprocess
import sys
import time
from collections.abc import Callable, Iterator
from typing import Any

PROBE_VERSION = 1
MIB = 1 << 20

# cuda.h (driver API): result codes and device attributes the probe uses.
CUDA_SUCCESS = 0
CUDA_ERROR_OUT_OF_MEMORY = 2
CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT = 16
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR = 75
CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR = 76

# What HAMi's device plugin and webhook set in the container (HAMi v2.10.0
# pkg/device-plugin/nvidiadevice/nvinternal/plugin/server.go:832-847, pkg/device/nvidia/device.go
# MutateAdmission), and what decides whether HAMi-core is active at all.
WATCHED_ENV = (
    "CUDA_DEVICE_MEMORY_LIMIT",
    "CUDA_DEVICE_MEMORY_LIMIT_0",
    "CUDA_DEVICE_SM_LIMIT",
    "GPU_CORE_UTILIZATION_POLICY",
    "CUDA_DISABLE_CONTROL",
    "CUDA_OVERSUBSCRIBE",
    "CUDA_TASK_PRIORITY",
    "NVIDIA_VISIBLE_DEVICES",
    "NVIDIA_DRIVER_CAPABILITIES",
    "LD_PRELOAD",
    # HAMi-core's log level (src/include/log_utils.h): the compute probes ask for 3 so that its
    # limiter's lines reach the log (tests/acceptance/gpu_plan.py HAMI_CORE_LOG_ENV).
    "LIBCUDA_LOG_LEVEL",
)
LIBVGPU = "libvgpu.so"
PRELOAD_FILE = "/etc/ld.so.preload"

# One thread does KERNEL_ITERATIONS dependent fused multiply-adds and stores the result (so the
# loop cannot be optimised away). PTX ISA 7.0 / sm_70: any driver since R450 compiles it for
# any card from Volta on.
KERNEL_NAME = "spin"
KERNEL_PTX = r"""
.version 7.0
.target sm_70
.address_size 64

.visible .entry spin(
	.param .u64 spin_param_out,
	.param .u32 spin_param_iters
)
{
	.reg .pred 	%p<2>;
	.reg .b32 	%r<6>;
	.reg .f32 	%f<2>;
	.reg .b64 	%rd<4>;

	ld.param.u64 	%rd1, [spin_param_out];
	ld.param.u32 	%r1, [spin_param_iters];
	mov.u32 	%r2, %ctaid.x;
	mov.u32 	%r3, %ntid.x;
	mov.u32 	%r4, %tid.x;
	mad.lo.s32 	%r5, %r2, %r3, %r4;
	cvt.rn.f32.u32 	%f1, %r5;
	mov.u32 	%r2, 0;
LOOP:
	setp.ge.u32 	%p1, %r2, %r1;
	@%p1 bra 	DONE;
	fma.rn.f32 	%f1, %f1, 0f3F7FFFFF, 0f3C23D70A;
	add.s32 	%r2, %r2, 1;
	bra.uni 	LOOP;
DONE:
	cvta.to.global.u64 	%rd2, %rd1;
	mul.wide.u32 	%rd3, %r5, 4;
	add.s64 	%rd2, %rd2, %rd3;
	st.global.f32 	[%rd2], %f1;
	ret;
}
"""
# A kernel of ~1-3 ms on a data-centre card: short against HAMi-core's 120 ms limiter period
# (it throttles by holding back launches, never by preempting a running kernel), long against a
# launch's few microseconds.
KERNEL_ITERATIONS = 65_536
THREADS_PER_BLOCK = 256
BLOCKS_PER_SM = 4  # 1024 threads per SM: every SM busy, one wave on Volta ... Hopper
BATCH = 16  # kernels launched between two synchronisations
WINDOW_SECONDS = 1.0


class CudaError(Exception):
    """A driver call returned an error; ``name`` is the driver's own name for the code."""

    def __init__(self, call: str, code: int, name: str) -> None:
        super().__init__(f"{call}: {name} ({code})")
        self.call = call
        self.code = code
        self.name = name


def emit(record: dict[str, Any], out: Any = None) -> None:
    """One JSON line, flushed at once (the suite reads the pod log while the probe runs)."""
    stream = out if out is not None else sys.stdout
    stream.write(json.dumps(record, sort_keys=True) + "\n")
    stream.flush()


# ----------------------------------------------------------------------------- the driver


class Driver:
    """The few driver-API calls the probe makes, through ctypes (``libcuda.so.1``)."""

    def __init__(self, lib: Any = None) -> None:
        self.lib = lib if lib is not None else ctypes.CDLL("libcuda.so.1")
        self._keep: list[Any] = []  # the module image must outlive the module

    def _call(self, name: str, *args: Any) -> None:
        code = int(getattr(self.lib, name)(*args))
        if code != CUDA_SUCCESS:
            raise CudaError(name, code, self.error_name(code))

    def error_name(self, code: int) -> str:
        text = ctypes.c_char_p()
        if int(self.lib.cuGetErrorName(code, ctypes.byref(text))) != CUDA_SUCCESS or not text.value:
            return f"CUDA error {code}"
        return text.value.decode()

    def init(self) -> None:
        self._call("cuInit", 0)

    def driver_version(self) -> int:
        version = ctypes.c_int()
        self._call("cuDriverGetVersion", ctypes.byref(version))
        return version.value

    def device_count(self) -> int:
        count = ctypes.c_int()
        self._call("cuDeviceGetCount", ctypes.byref(count))
        return count.value

    def device(self, ordinal: int = 0) -> int:
        handle = ctypes.c_int()
        self._call("cuDeviceGet", ctypes.byref(handle), ordinal)
        return handle.value

    def name(self, device: int) -> str:
        buffer = ctypes.create_string_buffer(256)
        self._call("cuDeviceGetName", buffer, 256, device)
        return buffer.value.decode(errors="replace")

    def uuid(self, device: int) -> str:
        raw = (ctypes.c_ubyte * 16)()
        self._call("cuDeviceGetUuid", raw, device)
        return format_uuid(bytes(raw))

    def attribute(self, attribute: int, device: int) -> int:
        value = ctypes.c_int()
        self._call("cuDeviceGetAttribute", ctypes.byref(value), attribute, device)
        return value.value

    def retain_primary_context(self, device: int) -> None:
        """The primary context, as the CUDA runtime uses it (HAMi-core counts its size at
        ``cuDevicePrimaryCtxRetain``: src/cuda/context.c:14-25)."""
        context = ctypes.c_void_p()
        self._call("cuDevicePrimaryCtxRetain", ctypes.byref(context), device)
        self._call("cuCtxSetCurrent", context)

    def memory_info(self) -> tuple[int, int]:
        free, total = ctypes.c_size_t(), ctypes.c_size_t()
        self._call("cuMemGetInfo_v2", ctypes.byref(free), ctypes.byref(total))
        return free.value, total.value

    def alloc(self, nbytes: int) -> int:
        pointer = ctypes.c_uint64()
        self._call("cuMemAlloc_v2", ctypes.byref(pointer), ctypes.c_size_t(nbytes))
        return pointer.value

    def free(self, pointer: int) -> None:
        self._call("cuMemFree_v2", ctypes.c_uint64(pointer))

    def fill(self, pointer: int, nbytes: int) -> None:
        """Write every byte, so the allocation is backed by real device memory."""
        self._call(
            "cuMemsetD8_v2", ctypes.c_uint64(pointer), ctypes.c_ubyte(0x5A), ctypes.c_size_t(nbytes)
        )

    def load_kernel(self, ptx: str, name: str) -> Any:
        image = ctypes.create_string_buffer(ptx.encode())
        self._keep.append(image)
        module, function = ctypes.c_void_p(), ctypes.c_void_p()
        self._call("cuModuleLoadData", ctypes.byref(module), image)
        self._call("cuModuleGetFunction", ctypes.byref(function), module, name.encode())
        return function

    def launch(self, function: Any, blocks: int, threads: int, out: int, iterations: int) -> None:
        pointer, count = ctypes.c_uint64(out), ctypes.c_uint32(iterations)
        params = (ctypes.c_void_p * 2)(ctypes.addressof(pointer), ctypes.addressof(count))
        one = ctypes.c_uint(1)
        self._call(
            "cuLaunchKernel",
            function,
            ctypes.c_uint(blocks),
            one,
            one,
            ctypes.c_uint(threads),
            one,
            one,
            ctypes.c_uint(0),
            None,
            params,
            None,
        )

    def synchronize(self) -> None:
        self._call("cuCtxSynchronize")


def format_uuid(raw: bytes) -> str:
    """16 bytes -> ``GPU-xxxxxxxx-xxxx-xxxx-xxxx-xxxxxxxxxxxx`` (as nvidia-smi and HAMi print)."""
    text = raw.hex()
    return f"GPU-{text[:8]}-{text[8:12]}-{text[12:16]}-{text[16:20]}-{text[20:32]}"


# ------------------------------------------------------------------------- the container


def libc_version() -> str:
    """``glibc 2.36``, or why it is not glibc (musl ignores /etc/ld.so.preload)."""
    try:
        text = os.confstr("CS_GNU_LIBC_VERSION")
    except (ValueError, OSError):
        text = None
    if text:
        return text
    name, version = platform.libc_ver()
    return f"{name} {version}".strip() or "not glibc"


def os_release(path: str = "/etc/os-release") -> str:
    try:
        with open(path, encoding="utf-8") as handle:
            for line in handle:
                if line.startswith("PRETTY_NAME="):
                    return line.split("=", 1)[1].strip().strip('"')
    except OSError:
        pass
    return "unknown"


def mapped(library: str, maps: str = "/proc/self/maps") -> bool:
    """Whether ``library`` is loaded in this process (the proof that interception can happen)."""
    try:
        with open(maps, encoding="utf-8", errors="replace") as handle:
            return any(library in line for line in handle)
    except OSError:
        return False


def read_text(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read().strip()
    except OSError:
        return None


def environment() -> dict[str, Any]:
    return {
        "kind": "env",
        "probe": PROBE_VERSION,
        "python": platform.python_version(),
        "libc": libc_version(),
        "os": os_release(),
        "libvgpuLoaded": mapped(LIBVGPU),
        "preload": read_text(PRELOAD_FILE),
        "env": {key: os.environ.get(key) for key in WATCHED_ENV},
    }


def describe_device(driver: Driver, device: int) -> dict[str, Any]:
    major = driver.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MAJOR, device)
    minor = driver.attribute(CU_DEVICE_ATTRIBUTE_COMPUTE_CAPABILITY_MINOR, device)
    return {
        "kind": "device",
        "name": driver.name(device),
        "uuid": driver.uuid(device),
        "devices": driver.device_count(),
        "sms": driver.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device),
        "computeCapability": f"{major}.{minor}",
        "driver": driver.driver_version(),
    }


Runner = Callable[..., "subprocess.CompletedProcess[str]"]


def smi(when: str, run: Runner = subprocess.run) -> dict[str, Any]:
    """What ``nvidia-smi`` shows inside the container (HAMi-core answers NVML's memory query with
    the limit as the total: src/nvml/hook.c:318-370)."""
    command = [
        "nvidia-smi",
        "--query-gpu=uuid,memory.total,memory.used",
        "--format=csv,noheader,nounits",
    ]
    record: dict[str, Any] = {"kind": "smi", "when": when}
    try:
        done = run(command, capture_output=True, text=True, timeout=60, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        record["error"] = f"{type(exc).__name__}: {exc}"
        return record
    rows = [line for line in (done.stdout or "").splitlines() if line.strip()]
    fields = [part.strip() for part in rows[0].split(",")] if rows else []
    if done.returncode != 0 or len(fields) < 3:
        record["error"] = (done.stderr or done.stdout or f"exit {done.returncode}").strip()[:300]
        return record
    try:
        record.update(uuid=fields[0], totalMiB=int(fields[1]), usedMiB=int(fields[2]))
    except ValueError:
        record["error"] = f"unexpected nvidia-smi output: {rows[0][:200]}"
    return record


# ---------------------------------------------------------------------------------- modes


def start(driver: Driver, out: Any) -> int:
    """The ``env`` and ``device`` lines; the current device (primary context) on return."""
    emit(environment(), out)
    driver.init()
    device = driver.device(0)
    driver.retain_primary_context(device)
    emit(describe_device(driver, device), out)
    return device


def memory_mode(
    driver: Driver, out: Any, *, steps_mib: list[int], guard_mib: int, run: Runner
) -> None:
    """Allocate in each step size in turn until refused; stop at ``guard_mib`` in any case (a
    probe that gets past its cap must not take the whole card)."""
    start(driver, out)
    emit(smi("before", run), out)
    held: list[int] = []
    total_mib = 0
    stopped = "guard"
    refusal: dict[str, Any] | None = None
    for step in steps_mib:
        stopped = "guard"  # what ended this step size: the guard, a refusal, another error
        while total_mib + step <= guard_mib:
            try:
                pointer = driver.alloc(step * MIB)
            except CudaError as exc:
                emit(alloc_line(step, total_mib, exc), out)
                refusal = {"error": exc.name, "code": exc.code, "stepMiB": step}
                stopped = "refused" if exc.code == CUDA_ERROR_OUT_OF_MEMORY else "error"
                break
            driver.fill(pointer, step * MIB)
            held.append(pointer)
            total_mib += step
            emit(alloc_line(step, total_mib, None), out)
        if stopped == "error":
            break
    try:
        free, total = driver.memory_info()
        emit({"kind": "meminfo", "freeMiB": free / MIB, "totalMiB": total / MIB}, out)
    except CudaError as exc:  # HAMi-core answers INVALID_VALUE when usage is past the limit
        emit({"kind": "meminfo", "error": exc.name, "code": exc.code}, out)
    emit(smi("after", run), out)
    emit(
        {
            "kind": "memory-result",
            "allocatedMiB": total_mib,
            "guardMiB": guard_mib,
            "stepsMiB": steps_mib,
            "stopped": stopped,
            "refusal": refusal,
        },
        out,
    )
    for pointer in held:
        driver.free(pointer)


def alloc_line(step: int, total: int, error: CudaError | None) -> dict[str, Any]:
    line: dict[str, Any] = {"kind": "alloc", "stepMiB": step, "totalMiB": total}
    line["ok"] = error is None
    if error is not None:
        line.update(error=error.name, code=error.code)
    return line


def kernel_setup(driver: Driver, device: int) -> tuple[Any, int, int]:
    """The loaded kernel, its grid (blocks) and its output buffer."""
    function = driver.load_kernel(KERNEL_PTX, KERNEL_NAME)
    blocks = driver.attribute(CU_DEVICE_ATTRIBUTE_MULTIPROCESSOR_COUNT, device) * BLOCKS_PER_SM
    out = driver.alloc(blocks * THREADS_PER_BLOCK * 4)
    return function, blocks, out


def windows(
    seconds: float, clock: Callable[[], float], window: float = WINDOW_SECONDS
) -> Iterator[float]:
    """Window deadlines until ``seconds`` have passed (the last one may be shorter)."""
    end = clock() + seconds
    deadline = clock() + window
    while deadline < end:
        yield deadline
        deadline += window
    yield end


def compute_mode(
    driver: Driver,
    out: Any,
    *,
    seconds: float,
    iterations: int = KERNEL_ITERATIONS,
    clock: Callable[[], float] = time.time,
) -> None:
    """Batches of ``BATCH`` kernels for ``seconds``; one ``rate`` line per window of wall-clock
    time (so two probes on one node can be compared window by window)."""
    device = start(driver, out)
    function, blocks, buffer = kernel_setup(driver, device)
    total_kernels = 0
    began = clock()
    window_start = began
    for deadline in windows(seconds, clock):
        kernels = 0
        while clock() < deadline:
            for _ in range(BATCH):
                driver.launch(function, blocks, THREADS_PER_BLOCK, buffer, iterations)
            driver.synchronize()
            kernels += BATCH
        now = clock()
        emit(
            {
                "kind": "rate",
                "t0": round(window_start, 3),
                "t1": round(now, 3),
                "kernels": kernels,
                "blocks": blocks,
                "iterations": iterations,
            },
            out,
        )
        total_kernels += kernels
        window_start = now
    elapsed = clock() - began
    emit(
        {
            "kind": "compute-result",
            "kernels": total_kernels,
            "seconds": round(elapsed, 3),
            "blocks": blocks,
            "iterations": iterations,
        },
        out,
    )
    driver.free(buffer)


def released(path: str | None, key: str | None) -> bool:
    """Whether the downward-API annotations file at ``path`` holds ``key`` (the kubelet writes one
    ``key="value"`` line per annotation)."""
    if not path or not key:
        return False
    text = read_text(path) or ""
    return any(line.startswith(f"{key}=") for line in text.splitlines())


def hold_mode(
    driver: Driver,
    out: Any,
    *,
    mib: int,
    seconds: float,
    interval: float,
    release_file: str | None = None,
    release_key: str | None = None,
    clock: Callable[[], float] = time.time,
    sleep: Callable[[float], None] = time.sleep,
) -> None:
    """Hold ``mib`` MiB (256 MiB chunks), touch them with a kernel every ``interval`` and report;
    ``seconds`` 0 holds until the pod is deleted - or, with ``release_file``/``release_key``,
    until the suite writes that annotation on the pod (read through a downward-API volume): the
    process then frees its memory and exits 0 by itself, after a ``released`` line."""
    device = start(driver, out)
    function, blocks, buffer = kernel_setup(driver, device)
    held: list[int] = []
    remaining = mib
    while remaining > 0:
        chunk = min(256, remaining)
        pointer = driver.alloc(chunk * MIB)
        driver.fill(pointer, chunk * MIB)
        held.append(pointer)
        remaining -= chunk
    began = clock()
    beats = 0
    while True:
        driver.launch(function, blocks, THREADS_PER_BLOCK, buffer, 1024)
        driver.synchronize()
        beats += 1
        emit({"kind": "hold", "t": round(clock(), 3), "heldMiB": mib, "beat": beats}, out)
        if seconds and clock() - began >= seconds:
            break
        if released(release_file, release_key):
            emit({"kind": "released", "t": round(clock(), 3), "beat": beats}, out)
            break
        sleep(interval)
    for pointer in held:
        driver.free(pointer)
    driver.free(buffer)
    emit({"kind": "hold-result", "heldMiB": mib, "beats": beats}, out)


def info_mode(driver: Driver, out: Any, *, run: Runner) -> None:
    start(driver, out)
    emit(smi("now", run), out)


# ----------------------------------------------------------------------------------- main


def parser() -> argparse.ArgumentParser:
    parse = argparse.ArgumentParser(description=__doc__.splitlines()[0] if __doc__ else None)
    modes = parse.add_subparsers(dest="mode", required=True)
    memory = modes.add_parser("memory")
    memory.add_argument("--steps-mib", type=int, nargs="+", default=[256, 16])
    memory.add_argument("--guard-mib", type=int, required=True)
    compute = modes.add_parser("compute")
    compute.add_argument("--seconds", type=float, required=True)
    compute.add_argument("--iterations", type=int, default=KERNEL_ITERATIONS)
    hold = modes.add_parser("hold")
    hold.add_argument("--mib", type=int, required=True)
    hold.add_argument("--seconds", type=float, default=0.0)
    hold.add_argument("--interval", type=float, default=2.0)
    hold.add_argument("--release-file", default=None)
    hold.add_argument("--release-key", default=None)
    modes.add_parser("info")
    return parse


def main(
    argv: list[str] | None = None,
    *,
    driver_factory: Callable[[], Driver] = Driver,
    out: Any = None,
    run: Runner = subprocess.run,
) -> int:
    args = parser().parse_args(argv)
    try:
        driver = driver_factory()
        if args.mode == "memory":
            memory_mode(driver, out, steps_mib=args.steps_mib, guard_mib=args.guard_mib, run=run)
        elif args.mode == "compute":
            compute_mode(driver, out, seconds=args.seconds, iterations=args.iterations)
        elif args.mode == "hold":
            hold_mode(
                driver,
                out,
                mib=args.mib,
                seconds=args.seconds,
                interval=args.interval,
                release_file=args.release_file,
                release_key=args.release_key,
            )
        else:
            info_mode(driver, out, run=run)
    except CudaError as exc:
        emit({"kind": "error", "call": exc.call, "error": exc.name, "code": exc.code}, out)
        return 1
    except OSError as exc:  # no libcuda.so.1: the container got no GPU driver
        emit({"kind": "error", "call": "dlopen libcuda.so.1", "error": str(exc), "code": -1}, out)
        return 1
    return 0


if __name__ == "__main__":
    sys.exit(main())
