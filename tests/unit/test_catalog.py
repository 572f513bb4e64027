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


# model: the name nvidia-smi prints for it (NVML's device name), from the sources above.
NVML_NAMES = {
    "A100-80GB": "NVIDIA A100-SXM4-80GB",
    "A100-40GB": "NVIDIA A100-SXM4-40GB",
    "H100-80GB": "NVIDIA H100 80GB HBM3",
    "L4-24GB": "NVIDIA L4",
    "L40S-48GB": "NVIDIA L40S",
    "T4-16GB": "Tesla T4",
}


def hami_registered_type(nvml_name: str) -> str:
    """What HAMi's device plugin registers as the card's type (HAMi v2.10.0
    pkg/device-plugin/nvidiadevice/nvinternal/plugin/register.go:142-185: NVML's name, with
    ``NVIDIA-`` in front only when it does not start with ``NVIDIA``)."""
    return nvml_name if nvml_name.startswith("NVIDIA") else f"NVIDIA-{nvml_name}"


def hami_type_matches(use_gputype: str, card_type: str) -> bool:
    """HAMi v2.10.0 pkg/device/devices.go:719-737 CheckType for nvidia.com/use-gputype: some
    comma-separated entry is a case-insensitive substring of the card type."""
    return any(t.strip() and t.strip().upper() in card_type.upper() for t in use_gputype.split(","))


@pytest.mark.parametrize("model", sorted(NVML_NAMES))
def test_each_product_is_what_a_real_node_registers(model: str) -> None:
    """Issue 24: a real node registers NVML's name with spaces, not a dashed form."""
    assert CARD_CATALOG[model].product == hami_registered_type(NVML_NAMES[model])


@pytest.mark.parametrize("model", sorted(NVML_NAMES))
def test_a_use_gputype_copied_from_nvidia_smi_matches_the_declared_product(model: str) -> None:
    """The name a user reads in nvidia-smi selects the card at preview (the declared product)
    exactly when it does on the node."""
    registered = hami_registered_type(NVML_NAMES[model])
    declared = CARD_CATALOG[model].product
    for annotation in (NVML_NAMES[model], NVML_NAMES[model].lower(), model.split("-")[0]):
        assert hami_type_matches(annotation, declared) == hami_type_matches(annotation, registered)
    assert hami_type_matches(NVML_NAMES[model], declared)
