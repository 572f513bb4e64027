"""The card catalog holds what HAMi registers for each model: NVML's total memory in MiB
(HAMi v2.10.0 register.go: ``devmem = memory.Total / MiB``), not the marketing size.

The expected figures are public ``nvidia-smi`` readings (``memory.total``, the same NVML value),
written out here with their sources, independently of ``components/catalog.py``.
"""

from __future__ import annotations

import pytest

from components.catalog import CARD_CATALOG

# model: (MiB NVML reports, nominal GB, where it was read)
NVML_OBSERVED = {
    "A100-80GB": (81_920, 80, "modal-labs/modal-client#2797; A800-SXM4-80GB in dexmal/dexbotic#41"),
    "A100-40GB": (40_960, 40, "bottlerocket-os/bottlerocket-kernel-kit#424 (driver 595.71.05)"),
    "H100-80GB": (81_559, 80, "NVIDIA/nccl#1264 (550.54.15), wilicc/gpu-burn#114 (550.90.07)"),
    "L4-24GB": (23_034, 24, "speaches-ai/speaches#438 (570.133.20), modal-labs/modal-client#2797"),
    "L40S-48GB": (46_068, 48, "akash-network/provider-configs#99 (595.71.05)"),
    "T4-16GB": (15_360, 16, "modal-labs/modal-client#2797"),
}


def test_the_catalog_covers_the_observed_models() -> None:
    assert set(CARD_CATALOG) == set(NVML_OBSERVED)


@pytest.mark.parametrize("model", sorted(NVML_OBSERVED))
def test_each_card_holds_what_nvml_reports(model: str) -> None:
    """A figure above the registered one lets the preview's capacity policy approve a pod that
    HAMi then refuses with CardInsufficientMemory."""
    mib, _, source = NVML_OBSERVED[model]
    assert CARD_CATALOG[model].memory_mib == mib, source


@pytest.mark.parametrize("model", sorted(NVML_OBSERVED))
def test_no_card_registers_more_than_its_nominal_size(model: str) -> None:
    _, nominal_gb, _ = NVML_OBSERVED[model]
    assert CARD_CATALOG[model].memory_mib <= nominal_gb * 1024
    assert CARD_CATALOG[model].core_units == 100
