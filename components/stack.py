"""The stack: its validated configuration and the environment it runs in, chosen once."""

from __future__ import annotations

from dataclasses import dataclass

from components.config import PlatformConfig, load_platform_config
from components.lab.substrate import LabSubstrate
from components.prod.substrate import ProdSubstrate
from components.substrate import Substrate


def substrate_for(platform: PlatformConfig) -> Substrate:
    """The one place that reads the stack's mode: every difference between the environments is
    asked of what this returns."""
    if platform.mode == "lab":
        return LabSubstrate()
    return ProdSubstrate()


@dataclass(frozen=True)
class Stack:
    platform: PlatformConfig
    substrate: Substrate


def load_stack() -> Stack:
    """Read and validate the stack config (before anything is registered) and pick its
    environment."""
    platform = load_platform_config()
    return Stack(platform=platform, substrate=substrate_for(platform))
