"""Values keys that change nothing Helm renders.

A key the chart does not read is ignored by Helm without a word (platform.md pitfall 8); so is a
key set to the chart's own default. ``dead_keys`` renders a release once per key it sets, with
that key removed (so the chart's default applies), and names every key whose removal leaves the
installed objects unchanged. ``chart_reads`` tells the two cases apart: it renders with the key
set to another value, which changes the output (or makes the chart refuse it) only when the
chart reads the key.
"""

from __future__ import annotations

import copy
import json
from collections.abc import Iterator, Mapping
from typing import Any

from tests.support.charts import RenderedRelease, RenderError, render_release
from tests.support.harness import Registration
from tests.support.rendered_stack import RenderedStack, release_inputs


def leaf_paths(values: Any, prefix: tuple[str, ...] = ()) -> Iterator[tuple[str, ...]]:
    """Every set key, as a path; a list or a scalar is one leaf, an empty map too."""
    if isinstance(values, Mapping) and values:
        for key, child in values.items():
            yield from leaf_paths(child, (*prefix, str(key)))
    elif prefix:
        yield prefix


def without(values: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """``values`` with the key at ``path`` removed (and maps it leaves empty)."""
    result = copy.deepcopy(dict(values))
    parents = [result]
    for key in path[:-1]:
        parents.append(parents[-1][key])
    del parents[-1][path[-1]]
    for depth in range(len(path) - 1, 0, -1):
        if not parents[depth]:
            del parents[depth - 1][path[depth - 1]]
    return result


def fingerprint(rendered: RenderedRelease) -> str:
    return json.dumps(sorted(json.dumps(o, sort_keys=True) for o in rendered.all_objects()))


def dead_keys(stack: RenderedStack, reg: Registration) -> list[tuple[str, ...]]:
    """Keys (as paths) of the release's values whose removal changes nothing it installs."""
    inputs = release_inputs(reg)
    values = inputs.get("values") or {}
    caps = stack.capabilities[reg.urn]
    source = stack.sources[reg.urn]
    baseline = fingerprint(stack.releases[reg.urn])
    dead = []
    for path in leaf_paths(values):
        altered = render_release(inputs, caps, values=without(values, path), source=source)
        if fingerprint(altered) == baseline:
            dead.append(path)
    return dead


def perturbed(values: Mapping[str, Any], path: tuple[str, ...]) -> dict[str, Any]:
    """``values`` with the leaf at ``path`` replaced by a different value of the same shape."""
    result = copy.deepcopy(dict(values))
    node = result
    for key in path[:-1]:
        node = node[key]
    old = node[path[-1]]
    if isinstance(old, bool):
        new: Any = not old
    elif isinstance(old, int | float):
        new = old + 1
    elif isinstance(old, str):
        new = old + "1" if old.isdigit() else old + "-probe"
    elif isinstance(old, list):
        new = [*old, old[-1] if old else "probe"]
    elif isinstance(old, Mapping):
        new = {**old, "probe": "probe"}
    else:
        new = "probe"
    node[path[-1]] = new
    return result


def chart_reads(stack: RenderedStack, reg: Registration, path: tuple[str, ...]) -> bool:
    """True when another value at ``path`` changes what the release renders (or the chart
    refuses it): the chart reads the key, even if the program sets it to the default."""
    inputs = release_inputs(reg)
    values = inputs.get("values") or {}
    try:
        altered = render_release(
            inputs,
            stack.capabilities[reg.urn],
            values=perturbed(values, path),
            source=stack.sources[reg.urn],
        )
    except RenderError:
        return True
    return fingerprint(altered) != fingerprint(stack.releases[reg.urn])
