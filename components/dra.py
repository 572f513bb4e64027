"""What a ``gpuSharing: dra`` tenant asks Kubernetes for: DeviceClasses and
ResourceClaimTemplates for whole cards and fractions, and the pod fields that reference them.

Pure builders (no Pulumi), written against resource.k8s.io/v1 at kubernetes v1.35.0
(k8s.io/api v0.35.0 resource/v1/types.go):

* A DeviceClass selects its devices by CEL (``DeviceClassSpec.selectors``, :1787-1827).
* A ResourceClaimTemplate holds a ResourceClaimSpec whose one request ``gpu`` is an
  ``ExactDeviceRequest`` (:882-991): ``deviceClassName``, ``allocationMode: ExactCount``,
  ``count`` (the cards) and ``selectors``.
* **A whole card** is a request for ``count`` devices; a device without
  ``allowMultipleAllocations`` goes to one claim only (the allocator's ``deviceInUse``,
  k8s.io/dynamic-resource-allocation v0.35.0 structured/internal/experimental/
  allocator_experimental.go:1040-1043, 1533-1535). The memory the workload needs is a CEL
  selector on the device's ``memory`` capacity, so a card too small is never picked.
* **A fraction** asks ``capacity.requests`` of ``memory`` and ``compute`` (``CapacityRequirements``,
  :990-991, 1110) of a device that allows multiple allocations; several devices of one request
  must be distinct cards, which only a ``distinctAttribute`` constraint on the card's uuid
  enforces (:1312-1313): without it the allocator may pick the same shareable device twice
  for one request (allocator_experimental.go:1036-1043 checks only ``deviceInUse``, which a
  shareable device never is). Both fields need ``DRAConsumableCapacity`` (alpha at v1.35.0; the
  API server drops them with the gate off), so ``components.config`` refuses fractions on every
  version the pins allow; the builder still writes them, for when a version enables the gate.

Memory is asked in MiB (``<n>Mi``) and compute in HAMi's units (100 = one card), the same
numbers a HAMi pod asks, so the two paths' answers can be compared
(``gpu_platform_policies.dra_fit``).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

API_VERSION = "resource.k8s.io/v1"
REQUEST_NAME = "gpu"
WHOLE_CARD_COMPUTE = 100


@dataclass(frozen=True)
class CardRequest:
    """What one container asks: ``cards`` distinct cards, each with ``memory_mib`` (None: any)
    and ``compute`` units (100 = the whole card)."""

    cards: int
    memory_mib: int | None
    compute: int

    def __post_init__(self) -> None:
        if self.cards < 1:
            raise ValueError(f"cards must be at least 1, got {self.cards}")
        if not 1 <= self.compute <= WHOLE_CARD_COMPUTE:
            raise ValueError(f"compute must be 1..100, got {self.compute}")
        if self.memory_mib is not None and self.memory_mib < 1:
            raise ValueError(f"memory_mib must be positive, got {self.memory_mib}")

    @property
    def whole(self) -> bool:
        """A whole card: HAMi gives a pod asking 100 cores a card of its own."""
        return self.compute == WHOLE_CARD_COMPUTE


def device_class(name: str, driver: str) -> dict[str, Any]:
    """A DeviceClass of every device the ``driver`` publishes."""
    return {
        "apiVersion": API_VERSION,
        "kind": "DeviceClass",
        "metadata": {"name": name},
        "spec": {"selectors": [{"cel": {"expression": f"device.driver == '{driver}'"}}]},
    }


def memory_selector(driver: str, memory_mib: int) -> str:
    """CEL: the device has at least ``memory_mib`` MiB of ``memory`` capacity."""
    return f"device.capacity['{driver}'].memory.compareTo(quantity('{memory_mib}Mi')) >= 0"


def claim_spec(request: CardRequest, device_class_name: str, driver: str) -> dict[str, Any]:
    """The ResourceClaimSpec for one container's request (whole cards or a fraction)."""
    exactly: dict[str, Any] = {
        "deviceClassName": device_class_name,
        "allocationMode": "ExactCount",
        "count": request.cards,
    }
    spec: dict[str, Any] = {"devices": {"requests": [{"name": REQUEST_NAME, "exactly": exactly}]}}
    if request.whole:
        if request.memory_mib is not None:
            exactly["selectors"] = [
                {"cel": {"expression": memory_selector(driver, request.memory_mib)}}
            ]
        return spec
    capacity: dict[str, str] = {"compute": str(request.compute)}
    if request.memory_mib is not None:
        capacity["memory"] = f"{request.memory_mib}Mi"
    exactly["capacity"] = {"requests": capacity}
    if request.cards > 1:
        spec["devices"]["constraints"] = [
            {"requests": [REQUEST_NAME], "distinctAttribute": f"{driver}/uuid"}
        ]
    return spec


def claim_template(
    name: str, namespace: str, request: CardRequest, device_class_name: str, driver: str
) -> dict[str, Any]:
    """A ResourceClaimTemplate: each pod gets its own claim for ``request``."""
    return {
        "apiVersion": API_VERSION,
        "kind": "ResourceClaimTemplate",
        "metadata": {"name": name, "namespace": namespace},
        "spec": {"spec": claim_spec(request, device_class_name, driver)},
    }


def pod_claim_fields(template_name: str) -> tuple[list[dict[str, str]], dict[str, Any]]:
    """The pod's ``resourceClaims`` and its container's ``resources`` that use the template."""
    return (
        [{"name": REQUEST_NAME, "resourceClaimTemplateName": template_name}],
        {"claims": [{"name": REQUEST_NAME}]},
    )
