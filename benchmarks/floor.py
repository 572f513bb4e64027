"""The bare-SDK floor: a program that registers an equally large graph of trivial resources.

``floor_shape`` (pure) copies the recorded program's resource *tree* — every component becomes a
``gpu-platform:bench:Group`` ComponentResource and every custom resource (providers and reads
included) a ``gpu-platform:bench:Trivial`` CustomResource with one small input, each under the
same parent — without inputs, dependencies or providers. ``build`` registers it. Run under the
same mock monitor as the program, it measures what the Pulumi SDK alone costs for that many
resources at that parent depth; the program's cost is reported as a ratio to it.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from benchmarks.graph import Node

GROUP_TYPE = "gpu-platform:bench:Group"
TRIVIAL_TYPE = "gpu-platform:bench:Trivial"


@dataclass(frozen=True)
class FloorNode:
    """Resource ``index`` of the floor, under floor resource ``parent`` (None: the stack)."""

    index: int
    parent: int | None
    custom: bool


def floor_shape(nodes: Sequence[Node]) -> list[FloorNode]:
    """The recorded tree as floor nodes, every parent before its children."""
    by_urn = {n.urn: n for n in nodes}
    position: dict[str, int] = {}
    shape: list[FloorNode] = []
    pending = list(nodes)
    while pending:
        deferred: list[Node] = []
        for node in pending:
            if node.parent in by_urn and node.parent not in position:
                deferred.append(node)
                continue
            position[node.urn] = len(shape)
            shape.append(FloorNode(len(shape), position.get(node.parent), node.custom))
        if len(deferred) == len(pending):
            raise ValueError(f"parent cycle among {len(deferred)} resources")
        pending = deferred
    return shape


def shape_to_json(shape: Sequence[FloorNode]) -> list[list[int]]:
    """Compact form for the child process: ``[parent or -1, custom as 0/1]`` per node."""
    return [[-1 if n.parent is None else n.parent, int(n.custom)] for n in shape]


def shape_from_json(data: Sequence[Sequence[int]]) -> list[FloorNode]:
    return [
        FloorNode(i, None if parent < 0 else parent, bool(custom))
        for i, (parent, custom) in enumerate(data)
    ]


def build(shape: Sequence[FloorNode]) -> None:
    """Register the floor program's resources (call inside a Pulumi program)."""
    import pulumi

    created: list[pulumi.Resource] = []
    for node in shape:
        parent = created[node.parent] if node.parent is not None else None
        opts = pulumi.ResourceOptions(parent=parent)
        resource: pulumi.Resource
        if node.custom:
            resource = pulumi.CustomResource(
                TRIVIAL_TYPE, f"trivial-{node.index}", {"index": node.index}, opts
            )
        else:
            group = pulumi.ComponentResource(GROUP_TYPE, f"group-{node.index}", None, opts)
            group.register_outputs({})
            resource = group
        created.append(resource)
