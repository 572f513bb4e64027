"""The bare-SDK floor: a program that registers an equally large graph of trivial resources.

``floor_shape`` (pure) copies the recorded program's resource *tree* — every component becomes a
``gpu-platform:bench:Group`` ComponentResource and every custom resource (providers and reads
included) a ``gpu-platform:bench:Trivial`` CustomResource with one small input, each under the
same parent — without inputs, dependencies or providers. ``build`` registers it. Run under the
same mock monitor as the program, it measures what the Pulumi SDK alone costs for that many
resources at that parent depth; the program's cost is reported as a ratio to it.

Each node also keeps the recorded resource's type token and whether it was a read, for the typed
floor (``benchmarks.typed_floor``), which registers the same tree with the program's own types.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any

import pulumi

from benchmarks.graph import Node

GROUP_TYPE = "gpu-platform:bench:Group"
TRIVIAL_TYPE = "gpu-platform:bench:Trivial"


@dataclass(frozen=True)
class FloorNode:
    """Resource ``index`` of the floor, under floor resource ``parent`` (None: the stack);
    ``type`` and ``read`` are those of the recorded resource it stands for."""

    index: int
    parent: int | None
    custom: bool
    type: str = TRIVIAL_TYPE
    read: bool = False


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
            shape.append(
                FloorNode(len(shape), position.get(node.parent), node.custom, node.type, node.read)
            )
        if len(deferred) == len(pending):
            raise ValueError(f"parent cycle among {len(deferred)} resources")
        pending = deferred
    return shape


ShapeJson = list[tuple[int, int, str, int]]


def shape_to_json(shape: Sequence[FloorNode]) -> ShapeJson:
    """Compact form for the child process: ``[parent or -1, custom, type, read]`` per node."""
    return [
        (-1 if n.parent is None else n.parent, int(n.custom), n.type, int(n.read)) for n in shape
    ]


def shape_from_json(data: Sequence[Sequence[Any]]) -> list[FloorNode]:
    return [
        FloorNode(i, None if parent < 0 else parent, bool(custom), type_, bool(read))
        for i, (parent, custom, type_, read) in enumerate(data)
    ]


CustomFactory = Callable[[FloorNode, pulumi.ResourceOptions], pulumi.Resource]


def trivial_resource(node: FloorNode, opts: pulumi.ResourceOptions) -> pulumi.Resource:
    """The floor's custom resource: one small input, nothing else."""
    return pulumi.CustomResource(TRIVIAL_TYPE, f"trivial-{node.index}", {"index": node.index}, opts)


def build(shape: Sequence[FloorNode], custom: CustomFactory = trivial_resource) -> None:
    """Register ``shape`` (call inside a Pulumi program): a group component for every component,
    ``custom(node, opts)`` for every custom resource, each under its parent."""
    created: list[pulumi.Resource] = []
    for node in shape:
        parent = created[node.parent] if node.parent is not None else None
        opts = pulumi.ResourceOptions(parent=parent)
        resource: pulumi.Resource
        if node.custom:
            resource = custom(node, opts)
        else:
            group = pulumi.ComponentResource(GROUP_TYPE, f"group-{node.index}", None, opts)
            group.register_outputs({})
            resource = group
        created.append(resource)
