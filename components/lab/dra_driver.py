"""The lab's DRA driver: kubernetes-sigs/dra-example-driver, a fake driver publishing simulated
cards as ResourceSlices, in place of HAMi's mock device plugin for a ``gpuSharing: dra`` tenant.

Pure facts and builders (no Pulumi). Traced at kubernetes-sigs/dra-example-driver v0.4.0
(chart 0.4.0, appVersion v0.4.0):

* Its ``gpu`` profile publishes ``numDevices`` cards per node, every one alike:
  ``memory`` capacity 80Gi and ``compute`` 100, attributes ``index``, ``uuid``, ``model``
  ("LATEST-GPU-MODEL") and ``driverVersion`` (internal/profiles/gpu/gpu.go:70-71, 81-94,
  172-181); ``numDevices`` is one chart value for every node
  (deployments/helm/dra-example-driver/templates/kubeletplugin.yaml:87-88, values.yaml
  ``kubeletPlugin.numDevices``). It therefore publishes a declared inventory exactly when every
  card is 81,920 MiB and 100 compute units (the catalog's A100-80GB) and every node of the
  tenant carries the same number of cards.
* Its driver name, the DeviceClass it installs and the attribute domain are
  ``<deviceProfile>.example.com``: ``gpu.example.com`` (templates/_helpers.tpl:128-130,
  templates/deviceclass.yaml).
* With ``gpuAllowMultipleAllocations`` it marks every card ``allowMultipleAllocations`` with a
  request policy of 1Gi steps for memory and 1 for compute (gpu.go:208-260); that needs
  ``DRAConsumableCapacity``, which the platform does not enable, so the lab leaves it off.
"""

from __future__ import annotations

from collections.abc import Sequence

from components.catalog import CardModel

DRIVER_RELEASE = "v0.4.0"
DRIVER_NAME = "gpu.example.com"
DEVICE_CLASS = DRIVER_NAME
CARD_MEMORY_MIB = 80 * 1024
CARD_COMPUTE = 100


def publishable(cards: Sequence[tuple[CardModel, int]]) -> bool:
    """Whether the driver can publish these cards of one node as they are declared."""
    return all(m.memory_mib == CARD_MEMORY_MIB and m.core_units == CARD_COMPUTE for m, _ in cards)


def cards_per_node(pools: Sequence[Sequence[tuple[CardModel, int]]]) -> set[int]:
    """The card counts per node across a tenant's pools (the driver takes one)."""
    return {sum(count for _, count in cards) for cards in pools}


def driver_values(num_devices: int) -> dict[str, object]:
    """The chart values for a tenant whose nodes each carry ``num_devices`` cards."""
    if num_devices < 1:
        raise ValueError(f"num_devices must be at least 1, got {num_devices}")
    return {
        "deviceProfile": "gpu",
        "gpuAllowMultipleAllocations": False,
        "kubeletPlugin": {"numDevices": num_devices},
    }
