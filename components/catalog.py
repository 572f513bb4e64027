"""GPU card catalog: the card models a worker pool may name instead of raw MiB and compute units.

Memory is in MiB as HAMi registers it: ``devmem = NVML memory.Total / 1 MiB`` (HAMi v2.10.0
``pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go:120-148``, with the default
``deviceMemoryScaling`` of 1), which is what ``nvidia-smi --query-gpu=memory.total`` prints and
less than the marketing size (80 GB is not 81,920 MiB on every card). A catalog figure above
what the node registers would let the preview's capacity policy approve a pod that HAMi then
refuses with CardInsufficientMemory, so each figure below is the NVML total seen on real cards
with current drivers (R535 and later; the GPU Operator v26.7.0 installs 595.91.07), with its
public source. Compute is in HAMi's units, 100 per card (``devcore`` with the default
``deviceCoreScaling`` of 1).

``product`` is the type string a node registers for the card, which ``nvidia.com/use-gputype``
and ``nouse-gputype`` are matched against (a case-insensitive substring test, HAMi v2.10.0
``pkg/device/devices.go:719-737`` CheckType via ``pkg/device/nvidia/device.go:478-503``). HAMi's
device plugin registers NVML's name as is - with spaces, ``NVIDIA H100 80GB HBM3`` - and only
prefixes ``NVIDIA-`` to a name that does not start with ``NVIDIA`` (``Tesla T4`` becomes
``NVIDIA-Tesla T4``; ``pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go:142-185``).
So each product below is that registered string, from the same public ``nvidia-smi`` output as
its memory; the lab's simulated nodes register it too, the declared inventory carries it, and a
pod's ``use-gputype`` that matches at preview matches on a real node. The names are the SXM
boards; a pool of other boards (``NVIDIA A100 80GB PCIe``, ``NVIDIA H100 PCIe``) sets ``product``.
"""

from __future__ import annotations

from dataclasses import dataclass
from types import MappingProxyType


@dataclass(frozen=True)
class CardModel:
    """One GPU model: what a single physical card offers to HAMi."""

    name: str
    memory_mib: int
    core_units: int
    product: str


# NVML memory totals (MiB) and where each was read. "modal" is modal-labs/modal-client#2797
# (https://github.com/modal-labs/modal-client/pull/2797, Jan 2025), which lists the nvidia-smi
# totals of every GPU type in Modal's fleet: H100 81559, A100 80GB 81920, A100 40GB 40960,
# L40S 46068, L4 23034, T4 15360.
#
# * A100-80GB 81,920 — modal; the same-board A800-SXM4-80GB prints 81920MiB with driver
#   535.86.10 (https://github.com/dexmal/dexbotic/issues/41). Drivers before R510 printed 81,252
#   (450.191.01, https://github.com/keyu-tian/SparK/issues/8).
# * A100-40GB 40,960 — NVIDIA A100-SXM4-40GB, driver 595.71.05
#   (https://github.com/bottlerocket-os/bottlerocket-kernel-kit/pull/424) and 580.126.09
#   (https://github.com/bottlerocket-os/bottlerocket-core-kit/pull/834); modal.
# * H100-80GB 81,559 — NVIDIA H100 80GB HBM3 (SXM5), driver 550.54.15
#   (https://github.com/NVIDIA/nccl/issues/1264) and 550.90.07
#   (https://github.com/wilicc/gpu-burn/issues/114); modal (85,520,809,984 bytes = 81,559 MiB).
# * L4-24GB 23,034 — NVIDIA L4, driver 570.133.20
#   (https://github.com/speaches-ai/speaches/pull/438); modal.
# * L40S-48GB 46,068 — NVIDIA L40S, driver 595.71.05, ``nvidia-smi --query-gpu=memory.total``
#   (https://github.com/akash-network/provider-configs/pull/99); modal.
# * T4-16GB 15,360 — modal only (driver not stated); older drivers printed about 15,109.
# NVML names (nvidia-smi's "name"), from the same sources: NVIDIA A100-SXM4-80GB and
# NVIDIA A100-SXM4-40GB (modal-labs/modal-client#2797; bottlerocket-kernel-kit#424), NVIDIA H100
# 80GB HBM3 (NVIDIA/nccl#1264, wilicc/gpu-burn#114), NVIDIA L4 (speaches-ai/speaches#438), NVIDIA
# L40S (akash-network/provider-configs#99), Tesla T4 (modal-labs/modal-client#2797), which HAMi
# registers as NVIDIA-Tesla T4.
CARD_CATALOG: MappingProxyType[str, CardModel] = MappingProxyType(
    {
        model.name: model
        for model in (
            CardModel("A100-80GB", 81_920, 100, "NVIDIA A100-SXM4-80GB"),
            CardModel("A100-40GB", 40_960, 100, "NVIDIA A100-SXM4-40GB"),
            CardModel("H100-80GB", 81_559, 100, "NVIDIA H100 80GB HBM3"),
            CardModel("L4-24GB", 23_034, 100, "NVIDIA L4"),
            CardModel("L40S-48GB", 46_068, 100, "NVIDIA L40S"),
            CardModel("T4-16GB", 15_360, 100, "NVIDIA-Tesla T4"),
        )
    }
)
