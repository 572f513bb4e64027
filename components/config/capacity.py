"""``capacity``: how full the management cluster may get before a preview warns (docs/prod.md,
"Capacity of the management cluster")."""

from __future__ import annotations

from typing import Annotated

from pydantic import Field

from components.config.base import _Model


class CapacitySettings(_Model):
    """What the stack may ask of the management cluster: above its allocatable CPU or memory a
    preview is refused; above ``100 - headroomPercent`` % of it, warned."""

    headroom_percent: Annotated[int, Field(ge=0, le=90)] = Field(
        default=20,
        description="the share of the management cluster's allocatable CPU and memory to keep "
        "free (for node loss, rollouts and what the program does not count): a stack whose "
        "requests reach into it is warned at preview; one above the allocatable is refused",
    )
