"""The probe pods of TC-11 ... TC-15 and their image (pure builders).

The probe (``gpu_probe/probe.py``, project code) reaches the pods as a ConfigMap and runs in one
pinned image, referenced by tag **and** digest: a tag alone can be rebuilt under the same name
(a Python base image is, with every Debian point release), and the C library it brings decides
whether HAMi-core's interception works at all (``/etc/ld.so.preload`` is a glibc feature; musl
ignores it). The image needs nothing but ``python3`` with ``ctypes`` on glibc: CUDA comes from
the host driver through the NVIDIA Container Toolkit.

Each probe pod asks HAMi for one card share (``nvidia.com/gpu: 1`` with ``gpumem`` and
``gpucores``) and names the card it must land on with HAMi's ``nvidia.com/use-gpuuuid``
annotation (HAMi v2.10.0 pkg/device/nvidia/device.go:49-50, 755), so every measurement of one
test is taken on the same physical card.
"""

from __future__ import annotations

import os
import re
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

from tests.acceptance.gpu_plan import (
    COMPUTE_POD_MEMORY_MIB,
    CORE_POLICY_ENV,
    HAMI_CORE_LOG_ENV,
)
from tests.acceptance.hami_evidence import GPU_USE_UUID
from tests.acceptance.workloads import gpu_limits, pod_body

# python:3.12-slim by digest, exactly as HAMi v2.10.0 pins it for its own benchmark client
# (Project-HAMi/HAMi v2.10.0 benchmarks/ai-benchmark/Dockerfile.client:1, pinned 2026-07-28 in
# commit 37730dd7 "ci: pin actions, images and install scripts by hash (#2147)"). Not pulled
# here (no registry access): that the digest resolves is taken from HAMi's own pin. The tag is
# Docker's moving 3.12-slim; by then its base was Debian 13 (trixie, glibc 2.41) - the probe
# records the base and glibc it actually finds. Override (also by digest) with env
# GPU_PLATFORM_PROBE_IMAGE to measure a platform team's own glibc base instead.
PROBE_IMAGE = (
    "python:3.12-slim@sha256:57cd7c3a7a273101a6485ba99423ee568157882804b1124b4dd04266317710de"
)
PROBE_IMAGE_ENV = "GPU_PLATFORM_PROBE_IMAGE"
_PINNED = re.compile(
    r"^(?P<name>[a-z0-9][a-z0-9._/:-]*?):(?P<tag>[\w][\w.-]{0,127})@sha256:[0-9a-f]{64}$"
)

PROBE_SOURCE = Path(__file__).resolve().parent / "gpu_probe" / "probe.py"
PROBE_CONFIGMAP = "gpu-probe"
PROBE_KEY = "probe.py"
PROBE_MOUNT = "/probe"
PROBE_VOLUME = "probe"
PROBE_CONTAINER = "main"  # workloads.pod_body's container name
# The NVIDIA Container Toolkit mounts the driver's CUDA library only with "compute", nvidia-smi
# and NVML only with "utility". The probe image is not a CUDA image, so it does not set them.
DRIVER_CAPABILITIES = {"NVIDIA_DRIVER_CAPABILITIES": "compute,utility"}


def pinned_image(reference: str) -> str:
    """``reference`` when it names a tag and a digest (``name:tag@sha256:<64 hex>``); a tag-only
    or digest-only reference raises ValueError naming the fix."""
    text = reference.strip()
    if not _PINNED.match(text):
        raise ValueError(
            f"probe image {reference!r} is not pinned by tag and digest: write it as "
            "name:tag@sha256:<64 hex digits> (a tag alone can be rebuilt, and its C library "
            "decides whether HAMi-core intercepts at all)"
        )
    return text


def probe_image(environ: Mapping[str, str] | None = None) -> str:
    """The probe image: env ``GPU_PLATFORM_PROBE_IMAGE`` when set, else ``PROBE_IMAGE``; pinned
    either way."""
    env = os.environ if environ is None else environ
    return pinned_image(env.get(PROBE_IMAGE_ENV, "").strip() or PROBE_IMAGE)


def probe_source() -> str:
    return PROBE_SOURCE.read_text(encoding="utf-8")


def probe_configmap(run_id: str, source: str) -> dict[str, Any]:
    """The ConfigMap that carries the probe into the namespace."""
    return {
        "apiVersion": "v1",
        "kind": "ConfigMap",
        "metadata": {
            "name": PROBE_CONFIGMAP,
            "labels": {"gpu-platform.io/acceptance-run": run_id},
        },
        "data": {PROBE_KEY: source},
    }


def probe_pod(
    name: str,
    run_id: str,
    *,
    args: Sequence[str],
    memory_mib: int,
    cores: int,
    card_uuid: str,
    image: str,
    node_selector: dict[str, str] | None = None,
    env: Mapping[str, str] | None = None,
) -> dict[str, Any]:
    """A pod running ``python3 -u /probe/probe.py <args>`` on one share of card ``card_uuid``."""
    body = pod_body(
        name,
        run_id,
        limits=gpu_limits(1, memory_mib=memory_mib, cores=cores),
        node_selector=node_selector,
        image=pinned_image(image),
        command=["python3", "-u", f"{PROBE_MOUNT}/{PROBE_KEY}", *args],
    )
    body["metadata"]["annotations"] = {GPU_USE_UUID: card_uuid}
    container = body["spec"]["containers"][0]
    variables = {**DRIVER_CAPABILITIES, "PYTHONUNBUFFERED": "1", **(env or {})}
    container["env"] = [{"name": key, "value": value} for key, value in variables.items()]
    container["volumeMounts"] = [{"name": PROBE_VOLUME, "mountPath": PROBE_MOUNT, "readOnly": True}]
    body["spec"]["volumes"] = [{"name": PROBE_VOLUME, "configMap": {"name": PROBE_CONFIGMAP}}]
    return body


def compute_pod(
    name: str,
    run_id: str,
    *,
    seconds: float,
    cores: int,
    card_uuid: str,
    image: str,
    node_selector: dict[str, str] | None = None,
    policy: str | None = None,
) -> dict[str, Any]:
    """A compute probe (TC-12, TC-14): ``compute_args(seconds)`` on ``cores`` of the card, with
    HAMi-core's log level at 3 so its limiter's own lines reach the log (gpu_plan.HAMI_CORE_LOG_ENV)
    and, when given, the core policy HAMi-core reads (``GPU_CORE_UTILIZATION_POLICY``)."""
    env = dict(HAMI_CORE_LOG_ENV)
    if policy is not None:
        env[CORE_POLICY_ENV] = policy
    return probe_pod(
        name,
        run_id,
        args=compute_args(seconds),
        memory_mib=COMPUTE_POD_MEMORY_MIB,
        cores=cores,
        card_uuid=card_uuid,
        image=image,
        node_selector=node_selector,
        env=env,
    )


def memory_args(guard_mib: int, steps_mib: Sequence[int]) -> list[str]:
    return ["memory", "--guard-mib", str(guard_mib), "--steps-mib", *map(str, steps_mib)]


def compute_args(seconds: float) -> list[str]:
    return ["compute", "--seconds", f"{seconds:g}"]


def hold_args(mib: int, seconds: float, interval: float, *, releasable: bool = False) -> list[str]:
    args = ["hold", "--mib", str(mib), "--seconds", f"{seconds:g}", "--interval", f"{interval:g}"]
    if releasable:
        args += ["--release-file", f"{PODINFO_MOUNT}/{PODINFO_ANNOTATIONS}"]
        args += ["--release-key", RELEASE_ANNOTATION]
    return args


# TC-13's exit round: the hog holds with no timer and exits by itself once the suite, after the
# waiter's refusal, writes RELEASE_ANNOTATION on it; the probe reads its pod's annotations from a
# downward-API volume (the kubelet rewrites the file when the annotations change).
RELEASE_ANNOTATION = "gpu-platform.io/release-hold"
PODINFO_VOLUME = "podinfo"
PODINFO_MOUNT = "/podinfo"
PODINFO_ANNOTATIONS = "annotations"


def releasable(body: dict[str, Any]) -> dict[str, Any]:
    """``body`` with its annotations mounted for the probe (``hold_args(releasable=True)``)."""
    body["spec"]["volumes"].append(
        {
            "name": PODINFO_VOLUME,
            "downwardAPI": {
                "items": [
                    {"path": PODINFO_ANNOTATIONS, "fieldRef": {"fieldPath": "metadata.annotations"}}
                ]
            },
        }
    )
    container = body["spec"]["containers"][0]
    container["volumeMounts"].append(
        {"name": PODINFO_VOLUME, "mountPath": PODINFO_MOUNT, "readOnly": True}
    )
    return body


def release_patch(when: str) -> dict[str, Any]:
    """The patch that releases a releasable hog."""
    return {"metadata": {"annotations": {RELEASE_ANNOTATION: when}}}


def info_args() -> list[str]:
    return ["info"]
