"""The deployed stack the live tests share (built by the ``live`` fixture in conftest.py)."""

from __future__ import annotations

from dataclasses import dataclass, field

import pytest

from components.config import PlatformConfig
from tests.acceptance.hami_evidence import RegisteredCard
from tests.acceptance.kube import Cluster
from tests.acceptance.stack import StackOutputs

MANAGEMENT = "management cluster"  # not a DNS label, so never a tenant name


@dataclass
class LiveStack:
    """The deployed stack: config, outputs, and one client per cluster."""

    stack: str
    platform: PlatformConfig
    outputs: StackOutputs
    management: Cluster
    tenants: dict[str, Cluster]
    run_id: str
    versions_seen: dict[str, str] = field(default_factory=dict)
    unreachable: dict[str, str] = field(default_factory=dict)

    def tenant(self, name: str) -> Cluster:
        if name in self.unreachable:
            pytest.fail(f"{name}'s API server is unreachable: {self.unreachable[name]}")
        return self.tenants[name]

    def management_cluster(self) -> Cluster:
        if MANAGEMENT in self.unreachable:
            pytest.fail(f"the management cluster is unreachable: {self.unreachable[MANAGEMENT]}")
        return self.management


@dataclass(frozen=True)
class Marker:
    """A namespace and a pod the suite created in one tenant under unique names."""

    namespace: str
    pod: str  # namespace/name


@dataclass
class Target:
    """The node and card the sharing scenario (TC-04 ... TC-06) runs on."""

    cluster: Cluster
    node: str
    node_selector: dict[str, str] | None
    cards: list[RegisteredCard]

    @property
    def card(self) -> RegisteredCard:
        return self.cards[0]
