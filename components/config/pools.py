"""GPU cards and worker pools: what each node carries and where its machines come from."""

from __future__ import annotations

import re
from typing import Any, Literal

from pydantic import (
    Field,
    PositiveInt,
    field_validator,
    model_validator,
)

from components.catalog import CARD_CATALOG, CardModel
from components.config.base import LABEL_VALUE, WHOLE_DURATION, _dns1123, _matching, _Model


class CardSpec(_Model):
    """Cards of one kind on each node: a catalog model, or explicit MiB and compute units."""

    model: str | None = Field(
        default=None, description=f"a catalog model: {', '.join(CARD_CATALOG)}"
    )
    memory_mib: PositiveInt | None = Field(
        default=None, alias="memoryMiB", description="MiB per card (explicit)"
    )
    core_units: PositiveInt | None = Field(
        default=None, description="HAMi compute units per card (explicit; 100 = one card)"
    )
    product: str | None = Field(
        default=None, description="model string the node registers; must contain NVIDIA"
    )
    count: PositiveInt = Field(default=1, description="cards of this kind per node")

    @field_validator("model")
    @classmethod
    def _model_name(cls, value: str | None) -> str | None:
        # With explicit memoryMiB and coreUnits the model is a free name, but it still names
        # the card in labels and the inventory: keep it to a label value's characters.
        if value is not None and (len(value) > 63 or not LABEL_VALUE.match(value) or not value):
            raise ValueError(
                f"card model {value!r}: write a catalog model ({', '.join(CARD_CATALOG)}) or a "
                "name of letters, digits, '-', '_' and '.'"
            )
        return value

    @model_validator(mode="after")
    def _catalog_or_explicit(self) -> CardSpec:
        explicit = self.memory_mib is not None or self.core_units is not None
        if self.model is None and not explicit:
            raise ValueError(
                "name a catalog model (model: A100-80GB) or give memoryMiB and coreUnits"
            )
        if self.model is not None and self.model not in CARD_CATALOG and not explicit:
            raise ValueError(
                f"unknown card model {self.model!r}: use one of {', '.join(CARD_CATALOG)} "
                "or give memoryMiB and coreUnits explicitly"
            )
        if explicit and (self.memory_mib is None or self.core_units is None):
            raise ValueError("explicit cards need both memoryMiB and coreUnits")
        if self.product is not None and "NVIDIA" not in self.product:
            raise ValueError(
                f"product {self.product!r} must contain 'NVIDIA': HAMi ignores other card types"
            )
        return self

    def resolved(self) -> CardModel:
        """The card as HAMi will see it, catalog values overridden by explicit ones."""
        base = CARD_CATALOG.get(self.model or "")
        memory = self.memory_mib if self.memory_mib is not None else base.memory_mib  # type: ignore[union-attr]
        cores = self.core_units if self.core_units is not None else base.core_units  # type: ignore[union-attr]
        name = self.model or f"custom-{memory}MiB"
        product = self.product or (base.product if base else f"NVIDIA-{name}")
        return CardModel(name=name, memory_mib=memory, core_units=cores, product=product)


class MachineHealthCheckSpec(_Model):
    """Cluster API remediation for a prod pool (off unless enabled)."""

    enabled: bool = Field(default=False, description="create a MachineHealthCheck")
    unhealthy_after: str = Field(default="300s", description="NotReady/Unknown for this long")

    @field_validator("unhealthy_after")
    @classmethod
    def _unhealthy_after(cls, value: str) -> str:
        return _matching(value, WHOLE_DURATION, "a duration of whole units", "300s, 5m or 1h30m")

    max_unhealthy: str = Field(
        default="1",
        pattern=r"^(\d+|\d{1,3}%)$",
        description="remediate only while at most this many (or this % of) machines are "
        "unhealthy; a % of a 1-2 machine pool rounds down to 0 and never remediates",
    )


_ROLLOUT_AMOUNT = re.compile(r"^(100|[1-9]?\d)%$")


class RollingUpdate(_Model):
    """How a pool replaces its machines when its templates change (Cluster API RollingUpdate)."""

    max_surge: int | str = Field(
        description="machines above replicas during a rollout (a number or a %); each needs a "
        "free host"
    )
    max_unavailable: int | str = Field(
        description="machines below replicas during a rollout (a number or a %)"
    )

    @field_validator("max_surge", "max_unavailable")
    @classmethod
    def _amount(cls, value: int | str) -> int | str:
        if isinstance(value, int) and value >= 0:
            return value
        if isinstance(value, str) and _ROLLOUT_AMOUNT.match(value):
            return value
        raise ValueError(f"{value!r} is not a whole number >= 0 or a percentage like 25%")

    @model_validator(mode="after")
    def _not_both_zero(self) -> RollingUpdate:
        # Cluster API v1.13.5 internal/webhooks/machinedeployment.go:270-276 refuses both 0.
        zero = {0, "0%"}
        if self.max_surge in zero and self.max_unavailable in zero:
            raise ValueError(
                "maxSurge and maxUnavailable cannot both be 0: the rollout could never replace "
                "a machine (on bare metal without spare hosts use maxSurge: 0, maxUnavailable: 1)"
            )
        return self


class MachineSpec(_Model):
    """Prod only: how Cluster API builds the pool's machines (pluggable infrastructure)."""

    provider: Literal["metal3", "docker"] = Field(
        default="metal3", description="infrastructure provider of the machine template"
    )
    template: dict[str, Any] = Field(
        default_factory=dict,
        description="the infrastructure machine template's spec.template.spec, verbatim",
    )
    health_check: MachineHealthCheckSpec = Field(
        default=MachineHealthCheckSpec(), description="remediation of unhealthy machines"
    )
    rollout: RollingUpdate | None = Field(
        default=None,
        description="rolling update of the pool's machines; default for metal3: maxSurge 0, "
        "maxUnavailable 1 (no spare host needed); docker: Cluster API's 1 and 0",
    )


class WorkerPool(_Model):
    """One pool of identical GPU nodes in one tenant."""

    name: str = Field(description="DNS-1123 label, unique in the tenant")
    replicas: PositiveInt = Field(default=1, description="nodes")
    cards: list[CardSpec] = Field(min_length=1, description="the cards on each node")
    slots_per_card: PositiveInt = Field(
        default=10, description="pods that may share one card (HAMi deviceSplitCount)"
    )
    device_mode: Literal["mock", "nvidia"] | None = Field(
        default=None, description="mock (lab default) or nvidia (prod default)"
    )
    machine: MachineSpec | None = Field(default=None, description="prod only")

    @field_validator("name")
    @classmethod
    def _name(cls, value: str) -> str:
        return _dns1123(value, "pool name")

    def resolved_cards(self) -> list[tuple[CardModel, int]]:
        """Each card kind on one node with its count."""
        return [(spec.resolved(), spec.count) for spec in self.cards]
