"""What every check returns, and the policy-config keys the policies share."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any, Final

ENVIRONMENT_KEY: Final = "environment"
ENVIRONMENTS: Final = ("lab", "prod")
DEFAULT_ENVIRONMENT: Final = "lab"
ENVIRONMENT_SCHEMA: Final[dict[str, Any]] = {
    "type": "string",
    "enum": list(ENVIRONMENTS),
    "default": DEFAULT_ENVIRONMENT,
    "description": "prod turns on the production-only rules of this policy",
}


@dataclass(frozen=True)
class Violation:
    """One finding: the message (what is wrong and how to fix it) and the resource it is about
    (None: the stack as a whole)."""

    message: str
    urn: str | None = None


def environment(config: Mapping[str, Any]) -> str:
    """The ``environment`` policy-config value (``lab`` unless the config says otherwise)."""
    value = config.get(ENVIRONMENT_KEY, DEFAULT_ENVIRONMENT)
    return value.strip().lower() if isinstance(value, str) else DEFAULT_ENVIRONMENT


def is_prod(config: Mapping[str, Any]) -> bool:
    return environment(config) == "prod"


def flag(config: Mapping[str, Any], key: str, default: bool = False) -> bool:
    """A boolean policy-config value (accepts JSON booleans and "true"/"false")."""
    value = config.get(key, default)
    if isinstance(value, str):
        return value.strip().lower() in ("true", "1", "yes")
    return bool(value)


def string_list(config: Mapping[str, Any], key: str, default: tuple[str, ...]) -> tuple[str, ...]:
    value = config.get(key)
    if isinstance(value, list) and all(isinstance(v, str) for v in value):
        return tuple(value)
    return default
