"""Resource properties as plain Python data, with preview-time unknowns made explicit.

pulumi-policy hands a policy its resource properties wrapped in proxies that raise
``UnknownValueError`` as soon as an unknown value (a computed output during ``pulumi preview``) is
read; the engine marshals those values as sentinel strings (``UNKNOWN_STRING_VALUE`` and friends).
An exception would abort the whole policy (pulumi-policy then reports one advisory "can't run
policy during preview" diagnostic), so the pack first copies the properties into plain dicts and
lists in which every unknown value is the :data:`UNKNOWN` singleton, and each check decides what an
unknown means for it (never a violation).

Numbers arrive as floats (``20000.0``): :func:`whole_number` coerces them.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any, Final

from pulumi_policy import Secret
from pulumi_policy.proxy import (
    UNKNOWN_ARCHIVE_VALUE,
    UNKNOWN_ARRAY_VALUE,
    UNKNOWN_ASSET_VALUE,
    UNKNOWN_BOOLEAN_VALUE,
    UNKNOWN_NUMBER_VALUE,
    UNKNOWN_OBJECT_VALUE,
    UNKNOWN_STRING_VALUE,
    UnknownValueError,
)


class Unknown:
    """The type of :data:`UNKNOWN`: a value that is only known after the update."""

    _instance: Unknown | None = None

    def __new__(cls) -> Unknown:
        if cls._instance is None:
            cls._instance = super().__new__(cls)
        return cls._instance

    def __repr__(self) -> str:
        return "UNKNOWN"

    def __bool__(self) -> bool:
        return False


UNKNOWN: Final = Unknown()
"""A property value that is unknown during preview."""

UNKNOWN_SENTINELS: Final = frozenset(
    {
        UNKNOWN_BOOLEAN_VALUE,
        UNKNOWN_NUMBER_VALUE,
        UNKNOWN_STRING_VALUE,
        UNKNOWN_ARRAY_VALUE,
        UNKNOWN_ASSET_VALUE,
        UNKNOWN_ARCHIVE_VALUE,
        UNKNOWN_OBJECT_VALUE,
    }
)


def is_unknown(value: object) -> bool:
    """True for :data:`UNKNOWN` and for the engine's raw unknown sentinel strings."""
    return value is UNKNOWN or (isinstance(value, str) and value in UNKNOWN_SENTINELS)


def plain(value: Any) -> Any:
    """A deep copy of ``value`` as dicts, lists and scalars; unknowns become :data:`UNKNOWN`.

    Works on pulumi-policy's proxies (whose item access raises for unknown values), on secrets
    (unwrapped: the checks only read them) and on ordinary JSON-like data.
    """
    if isinstance(value, Secret):
        return plain(value.value)
    if isinstance(value, str):
        return UNKNOWN if value in UNKNOWN_SENTINELS else value
    if isinstance(value, Mapping):
        result: dict[str, Any] = {}
        for key in value:
            try:
                item = value[key]
            except UnknownValueError:
                item = UNKNOWN
            result[str(key)] = plain(item)
        return result
    if isinstance(value, Sequence) and not isinstance(value, bytes | bytearray):
        items: list[Any] = []
        for index in range(len(value)):
            try:
                item = value[index]
            except UnknownValueError:
                item = UNKNOWN
            items.append(plain(item))
        return items
    return value


def get(value: Any, *path: str | int) -> Any:
    """The value at ``path`` (dict keys and list indexes), None when absent, :data:`UNKNOWN` when
    the walk meets an unknown value on the way."""
    current = value
    for step in path:
        if current is UNKNOWN:
            return UNKNOWN
        if isinstance(step, int):
            if not isinstance(current, list) or not -len(current) <= step < len(current):
                return None
            current = current[step]
        else:
            if not isinstance(current, dict):
                return None
            current = current.get(step)
    return current


def mapping(value: Any) -> dict[str, Any]:
    """``value`` if it is a dict, else an empty dict (absent, unknown or malformed)."""
    return value if isinstance(value, dict) else {}


def contains_unknown(value: Any) -> bool:
    """True when ``value`` is unknown or holds an unknown anywhere inside."""
    if value is UNKNOWN:
        return True
    if isinstance(value, dict):
        return any(contains_unknown(v) for v in value.values())
    if isinstance(value, list):
        return any(contains_unknown(v) for v in value)
    return False


_DIGITS: Final = re.compile(r"^[0-9]+$")


def whole_number(value: Any) -> int | None:
    """A plain non-negative whole number: ``3``, ``3.0`` (JSON numbers arrive as floats) or
    ``"3"``. None for anything else (``"3Gi"``, ``"1.5"``, ``"500m"``, booleans, unknowns)."""
    if isinstance(value, bool):
        return None
    if isinstance(value, int):
        return value if value >= 0 else None
    if isinstance(value, float):
        return int(value) if value.is_integer() and value >= 0 else None
    if isinstance(value, str) and _DIGITS.match(value.strip()):
        return int(value.strip())
    return None


def quantity_text(value: Any) -> str | None:
    """A resource quantity as Kubernetes writes it: numbers without a trailing ``.0``."""
    if isinstance(value, bool):
        return None
    if isinstance(value, float) and value.is_integer():
        return str(int(value))
    if isinstance(value, int | float):
        return str(value)
    if isinstance(value, str):
        return value.strip()
    return None


Path = tuple[str | int, ...]


def walk_strings(value: Any, path: Path = ()) -> list[tuple[Path, str]]:
    """Every string inside ``value`` with its path, skipping any mapping that says
    ``enabled: false`` (a disabled part of Helm values is not deployed)."""
    found: list[tuple[Path, str]] = []
    if isinstance(value, str):
        found.append((path, value))
    elif isinstance(value, dict):
        if value.get("enabled") is False:
            return found
        for key, item in value.items():
            found.extend(walk_strings(item, (*path, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found.extend(walk_strings(item, (*path, index)))
    return found


def dotted(path: Sequence[str | int]) -> str:
    """``("spec", "containers", 0, "image")`` -> ``spec.containers[0].image``."""
    text = ""
    for step in path:
        if isinstance(step, int):
            text += f"[{step}]"
        else:
            text += ("." if text else "") + step
    return text
