"""GPU card catalog: the card models a worker pool may name instead of raw MiB and compute units.

Memory is in MiB as HAMi counts it (``devmem``); compute is in HAMi's units, 100 per card
(``devcore`` with the default ``deviceCoreScaling`` of 1). ``product`` is the model string a real
node registers (NVML's name with spaces as dashes); it always contains ``NVIDIA`` because HAMi's
scheduler filters cards by that substring.
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


CARD_CATALOG: MappingProxyType[str, CardModel] = MappingProxyType(
    {
        model.name: model
        for model in (
            CardModel("A100-80GB", 81_920, 100, "NVIDIA-A100-SXM4-80GB"),
            CardModel("A100-40GB", 40_960, 100, "NVIDIA-A100-SXM4-40GB"),
            CardModel("H100-80GB", 81_920, 100, "NVIDIA-H100-80GB-HBM3"),
            CardModel("L4-24GB", 24_576, 100, "NVIDIA-L4"),
            CardModel("L40S-48GB", 49_152, 100, "NVIDIA-L40S"),
            CardModel("T4-16GB", 16_384, 100, "NVIDIA-Tesla-T4"),
        )
    }
)
