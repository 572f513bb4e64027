"""Reading the configuration models' annotations: one place for what the error messages
(``components.config.messages``), the configuration reference (``components.config_reference``)
and the tests' model walk (``tests/support/config_walk.py``) all need to know of a field's type.

Pure: typing introspection only.
"""

from __future__ import annotations

import types
import typing
from dataclasses import dataclass
from typing import Any

from pydantic import BaseModel
from pydantic.fields import FieldInfo


@dataclass(frozen=True)
class Stripped:
    """An annotation without ``Annotated`` and without ``| None``."""

    annotation: Any
    metadata: tuple[Any, ...]  # the constraints ``Annotated`` carried (Ge, Le, MinLen, ...)
    optional: bool  # whether None fits


def strip(annotation: Any) -> Stripped:
    """``annotation`` unwrapped from ``Annotated`` (its metadata kept) and ``| None``; a union of
    several non-None members stays as written (``None`` included), for the caller to pick a
    member of."""
    metadata: list[Any] = []
    optional = False
    while True:
        origin = typing.get_origin(annotation)
        if origin is typing.Annotated:
            args = typing.get_args(annotation)
            annotation, metadata = args[0], [*metadata, *args[1:]]
            continue
        if origin in (typing.Union, types.UnionType):
            args = typing.get_args(annotation)
            members = [a for a in args if a is not type(None)]
            optional = optional or len(members) < len(args)
            if len(members) == 1:
                annotation = members[0]
                continue
        return Stripped(annotation, tuple(metadata), optional)


def is_model(annotation: Any) -> bool:
    """Whether ``annotation`` is a configuration model (a pydantic model class)."""
    return isinstance(annotation, type) and issubclass(annotation, BaseModel)


def models_in(annotation: Any) -> list[type[BaseModel]]:
    """Every model an annotation names, at any depth (``list[X] | None`` -> ``[X]``)."""
    if is_model(annotation):
        return [annotation]
    return [model for arg in typing.get_args(annotation) for model in models_in(arg)]


def field_annotation(info: FieldInfo) -> Any:
    """A field's annotation with the constraints pydantic moved into ``info.metadata`` put
    back, as the model's source wrote them."""
    if info.metadata:
        return typing.Annotated[(info.annotation, *info.metadata)]
    return info.annotation
