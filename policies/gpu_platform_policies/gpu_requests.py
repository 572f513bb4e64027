"""hami-gpu-requests: every container that asks for an NVIDIA resource asks the HAMi way.

Why: HAMi schedules by ``nvidia.com/gpu`` (whole cards, an integer), ``nvidia.com/gpumem`` (MiB
per card, a plain integer) or ``nvidia.com/gpumem-percentage``, and ``nvidia.com/gpucores``
(percent of one card). A request HAMi cannot read fails only at runtime: ``gpumem: 20Gi`` makes
HAMi drop the container's whole GPU request, a bare ``nvidia.com/gpu: 1`` becomes an exclusive
card, HAMi 2.10's webhook denies a GPU pod with a privileged container ("container X is
privileged") or a ``nodeName`` ("pod has node assigned"), and another ``schedulerName`` makes the
webhook leave the pod alone, bypassing hami-scheduler (platform.md §3, pitfall 7).
"""

from __future__ import annotations

import re
from collections.abc import Mapping
from typing import Any, Final

from gpu_platform_policies.hami_fit import parse_quantity
from gpu_platform_policies.kube import ContainerRef, containers, is_workload, pod_specs
from gpu_platform_policies.model import Resource
from gpu_platform_policies.props import UNKNOWN, get, quantity_text, whole_number

NVIDIA_PREFIX: Final = "nvidia.com/"
GPU: Final = "nvidia.com/gpu"
GPUMEM: Final = "nvidia.com/gpumem"
GPUMEM_PERCENTAGE: Final = "nvidia.com/gpumem-percentage"
GPUCORES: Final = "nvidia.com/gpucores"
PRIORITY: Final = "nvidia.com/priority"
HAMI_RESOURCES: Final = (GPU, GPUMEM, GPUMEM_PERCENTAGE, GPUCORES, PRIORITY)
HAMI_SCHEDULER: Final = "hami-scheduler"
# Kubernetes defaults an unset schedulerName to this before admission, so HAMi's webhook
# (``--force-overwrite-default-scheduler``, on in chart 2.10.0 and never turned off here)
# rewrites it exactly like an absent one: writing it out does not bypass HAMi.
DEFAULT_SCHEDULER: Final = "default-scheduler"
_MIB: Final = 1 << 20

REMEDIATION: Final = (
    "Ask the HAMi way: nvidia.com/gpu: <cards> with nvidia.com/gpumem: <MiB> (a plain integer) or "
    "nvidia.com/gpumem-percentage: <1..100>, and nvidia.com/gpucores: <1..100>; no privileged "
    "GPU containers, no added SYS_ADMIN/SYS_RAWIO/SYS_MODULE/SYS_PTRACE/ALL capabilities, no "
    "hostPID/hostIPC, no nodeName, schedulerName absent, default-scheduler or hami-scheduler."
)


_DECIMAL_WHOLE: Final = re.compile(r"^([0-9]+)([kMG])$")
_DECIMAL_FACTOR: Final = {"k": 10**3, "M": 10**6, "G": 10**9}
INT32_MAX: Final = 2147483647


def hami_whole(value: Any) -> int | None:
    """A HAMi quantity as the shared admission rules read it: a plain whole number, or one with a
    decimal suffix (``20k``): the API server stores ``20000`` as ``20k`` (apimachinery
    ``CanonicalizeBytes``) and HAMi reads the value either way. None for binary suffixes
    (``20Gi``), fractions and anything else."""
    number = whole_number(value)
    if number is not None:
        return number
    if isinstance(value, str):
        match = _DECIMAL_WHOLE.match(value.strip())
        if match:
            return int(match[1]) * _DECIMAL_FACTOR[match[2]]
    return None


def _percentage_problem(
    where: str, resource: str, asked: Mapping[str, Any], of_what: str
) -> list[str]:
    """The message for a percentage resource that is not a whole number from 1 to 100."""
    value = asked[resource]
    percent = hami_whole(value)
    if percent is not None and 1 <= percent <= 100:
        return []
    return [
        f"{where}: {resource} is {_show(value)}; give a whole percentage of {of_what} from 1 to 100"
    ]


def _show(value: Any) -> str:
    """A value as the user wrote it: numbers without JSON's trailing ``.0``, strings quoted."""
    if isinstance(value, str):
        return repr(value)
    text = quantity_text(value)
    return text if text is not None else repr(value)


def _mib_hint(text: str) -> str:
    """' (write 20480)' for '20Gi': the MiB a unit-suffixed quantity stands for, if whole."""
    try:
        value = parse_quantity(text)
    except ValueError:
        return ""
    whole = value // _MIB
    if whole < 1:
        return ""
    exact = "" if value % _MIB == 0 else "about "
    return f"; {text} is {exact}{whole} MiB, so write {whole}"


def _resource_maps(container: Any) -> tuple[Any, Any]:
    resources = get(container, "resources")
    if resources is UNKNOWN:
        return UNKNOWN, UNKNOWN
    limits = get(resources, "limits")
    requests = get(resources, "requests")
    return (limits if limits is not None else {}), (requests if requests is not None else {})


def container_nvidia_resources(container: Any) -> dict[str, Any] | None:
    """The NVIDIA resources a container asks for, limits winning over requests (as HAMi reads
    them); None when the container's resources are unknown."""
    limits, requests = _resource_maps(container)
    if limits is UNKNOWN or requests is UNKNOWN:
        return None
    merged: dict[str, Any] = {}
    for source in (requests, limits):
        if isinstance(source, dict):
            for key, value in source.items():
                if key.startswith(NVIDIA_PREFIX):
                    merged[key] = value
    return merged


def check_container(ref: ContainerRef) -> tuple[list[str], bool]:
    """Messages for one container and whether it asks for any NVIDIA resource."""
    container = ref.container
    if not isinstance(container, dict):
        return [], False
    asked = container_nvidia_resources(container)
    if not asked:
        return [], False
    where = ref.label
    messages: list[str] = []

    limits, requests = _resource_maps(container)
    for key in sorted(set(limits) & set(requests)):
        low, high = requests[key], limits[key]
        if not key.startswith(NVIDIA_PREFIX) or UNKNOWN in (low, high):
            continue
        if str(low) != str(high) and (
            whole_number(low) is None or whole_number(low) != whole_number(high)
        ):
            messages.append(
                f"{where}: requests.{key} ({low}) differs from limits.{key} ({high}); "
                "Kubernetes requires them equal for extended resources: set only limits"
            )

    for key in sorted(asked):
        if key not in HAMI_RESOURCES:
            messages.append(
                f"{where}: asks for {key}, which HAMi does not schedule; ask for {GPU} with "
                f"{GPUMEM} (MiB) and {GPUCORES} (%) instead"
            )

    def known(name: str) -> bool:
        return name in asked and asked[name] is not UNKNOWN

    # HAMi v2.10.0 pkg/device/nvidia/device.go:398-415 (mutateContainerResource) sets the card
    # count to defaultGPUNum (1, charts/hami/templates/scheduler/device-configmap.yaml:25) when a
    # container names gpumem, gpucores or gpumem-percentage without it.
    if GPU not in asked:
        others = ", ".join(k for k in sorted(asked) if k in HAMI_RESOURCES)
        if others:
            messages.append(
                f"{where}: asks for {others} without {GPU}; HAMi's webhook would add "
                f"{GPU}: 1 itself (its chart's defaultGPUNum), a card count nobody reviewed. "
                f"Add {GPU}: 1 (the number of cards)"
            )
    elif known(GPU):
        cards = hami_whole(asked[GPU])
        if cards is None or cards < 1:
            messages.append(
                f"{where}: {GPU} is {_show(asked[GPU])}; it counts whole physical cards and "
                f"must be a whole number of at least 1 (e.g. {GPU}: 1) - share a card with "
                f"{GPUMEM} and {GPUCORES}"
            )
    if known(GPUMEM):
        value = asked[GPUMEM]
        mib = hami_whole(value)
        if mib is None or not 1 <= mib <= INT32_MAX:
            hint = _mib_hint(value) if isinstance(value, str) else ""
            messages.append(
                f"{where}: {GPUMEM} is {_show(value)}; HAMi reads it as a plain number of MiB "
                f"and drops the whole GPU request when it has a unit or a fraction{hint}"
            )
    if known(GPUMEM_PERCENTAGE):
        messages += _percentage_problem(where, GPUMEM_PERCENTAGE, asked, "the card's memory")
    if GPUMEM in asked and GPUMEM_PERCENTAGE in asked:
        messages.append(
            f"{where}: gives both {GPUMEM} and {GPUMEM_PERCENTAGE}; HAMi then ignores the "
            "percentage - give only one"
        )
    if known(GPUCORES):
        messages += _percentage_problem(where, GPUCORES, asked, "one card's compute")
    if known(PRIORITY) and hami_whole(asked[PRIORITY]) is None:
        messages.append(f"{where}: {PRIORITY} is {_show(asked[PRIORITY])}; give a whole number")
    if GPU in asked and not any(k in asked for k in (GPUMEM, GPUMEM_PERCENTAGE, GPUCORES)):
        messages.append(
            f"{where}: asks for {GPU} alone, i.e. whole cards; HAMi's webhook makes that an "
            f"exclusive card (gpucores 100). Say what it needs: {GPUMEM}: <MiB> (or "
            f"{GPUMEM_PERCENTAGE}) and {GPUCORES}: <1..100>"
        )
    return messages, True


def _privileged(ref: ContainerRef) -> bool:
    value = get(ref.container, "securityContext", "privileged")
    return value is True or (isinstance(value, str) and value.lower() == "true")


# Added capabilities that reach the node's devices past what HAMi counted, refused on a GPU pod
# exactly as ``privileged`` is (capabilities(7)): SYS_ADMIN (mounts, cgroup and namespace
# control: the device cgroup that limits a container to its own /dev/nvidia* nodes can be left),
# SYS_RAWIO (raw I/O ports, /dev/mem and PCI config space: the card's registers directly),
# SYS_MODULE (loads kernel modules), SYS_PTRACE (reads other processes' memory, CUDA contexts
# included, wherever their PID namespace is shared) and ALL (every one of them). containerd
# upper-cases what the pod writes and prefixes ``CAP_`` (``ALL`` in any case adds every one:
# containerd v2.3.4 internal/cri/opts/spec_opts.go:218-231); a written ``CAP_`` prefix is
# stripped here too (other runtimes accept it), so no spelling slips past.
DEVICE_CAPABILITIES: Final = ("ALL", "SYS_ADMIN", "SYS_RAWIO", "SYS_MODULE", "SYS_PTRACE")


def capability_name(value: str) -> str:
    """``cap_sys_admin`` / ``CAP_SYS_ADMIN`` / ``sys_admin`` -> ``SYS_ADMIN``."""
    text = value.strip().upper()
    return text[4:] if text.startswith("CAP_") else text


def _added_device_capabilities(ref: ContainerRef) -> list[str]:
    added = get(ref.container, "securityContext", "capabilities", "add")
    if not isinstance(added, list):
        return []
    return [
        item
        for item in added
        if isinstance(item, str) and capability_name(item) in DEVICE_CAPABILITIES
    ]


def check_pod_spec(spec: Any) -> list[str]:
    """All hami-gpu-requests messages for one pod spec (empty: compliant or not a GPU pod)."""
    if not isinstance(spec, dict):
        return []
    messages: list[str] = []
    asks_gpu = False
    for ref in containers(spec):
        found, asks = check_container(ref)
        messages.extend(found)
        asks_gpu = asks_gpu or asks
    # A pod that references ResourceClaims (gpuSharing: dra) takes cards too: the device-access,
    # host-namespace and nodeName checks apply to it as to a HAMi pod (the shared rules'
    # ``asksDevice``); the schedulerName check is HAMi's own.
    claims = get(spec, "resourceClaims")
    claims_devices = isinstance(claims, list) and len(claims) > 0
    if not asks_gpu and not claims_devices:
        return messages
    for ref in containers(spec):
        if _privileged(ref):
            messages.append(
                f"{ref.label}: is privileged; HAMi's webhook denies a GPU pod that has a "
                "privileged container (and without the webhook it would see every card). Drop "
                "securityContext.privileged, or move the privileged part out of the GPU pod"
            )
        capabilities = _added_device_capabilities(ref)
        if capabilities:
            messages.append(
                f"{ref.label}: adds capabilities {', '.join(capabilities)}; on a GPU pod they "
                "reach the node's cards past what HAMi counted, as privileged does. Remove them "
                "from securityContext.capabilities.add (or move that part out of the GPU pod)"
            )
    for key in ("hostPID", "hostIPC"):
        value = get(spec, key)
        if value is True or (isinstance(value, str) and value.lower() == "true"):
            messages.append(
                f"pod spec sets {key}: true; a GPU pod in the node's "
                f"{'PID' if key == 'hostPID' else 'IPC'} namespace sees the GPU processes and "
                "shared memory of every other pod on its cards. Remove it (only HAMi's own "
                "device plugin runs so)"
            )
    node_name = get(spec, "nodeName")
    if isinstance(node_name, str) and node_name:
        messages.append(
            f"pod spec pins nodeName {node_name!r}; HAMi's webhook denies GPU pods with a node "
            "assigned (and without the webhook hami-scheduler is skipped, so no card is "
            "allocated). Remove nodeName (use a nodeSelector or affinity instead)"
        )
    scheduler = get(spec, "schedulerName")
    if (
        asks_gpu
        and isinstance(scheduler, str)
        and scheduler not in ("", DEFAULT_SCHEDULER, HAMI_SCHEDULER)
    ):
        messages.append(
            f"pod spec sets schedulerName {scheduler!r}; HAMi's webhook then leaves the pod "
            f"alone and it is not scheduled by {HAMI_SCHEDULER}, so no card is allocated. Remove "
            f"schedulerName (HAMi's webhook sets it) or set {HAMI_SCHEDULER}"
        )
    return messages


def check_workload(resource: Resource) -> list[str]:
    """All hami-gpu-requests messages for one registered object: every pod spec in it (found by
    shape, see ``kube.pod_specs``); outside the built-in kinds (whose one pod spec is where the
    kind puts it) each message starts with where the spec is."""
    messages: list[str] = []
    builtin = is_workload(resource.type)
    for ref in pod_specs(resource):
        prefix = "" if builtin or not ref.where else f"{ref.where}: "
        messages.extend(f"{prefix}{message}" for message in check_pod_spec(ref.spec))
    return messages
