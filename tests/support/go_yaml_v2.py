"""Does a YAML document decode into a Go struct with ``gopkg.in/yaml.v2``'s ``Unmarshal``?

A model of the decoder's type checks (``decode.go`` of go-yaml v2.4: ``mapping``, ``sequence``,
``scalar``), enough to say whether a program that unmarshals a config file would get an error:

* a mapping decodes into a struct (keys matched by the field's yaml tag; **unknown keys are
  ignored**, as in non-strict ``Unmarshal``; ``,inline`` fields take their keys from the parent)
  or a map; into a slice or a scalar it is an error (``cannot unmarshal !!map into []T``);
* a sequence decodes into a slice only;
* a null decodes into anything (the zero value, a nil pointer);
* any other scalar decodes into a string (its text); into an int if it resolves to an int, or to
  a float with an integral value that fits; into a bool only if it resolves to a bool; into a
  float if it resolves to an int or a float; into a struct, map or slice it is an error;
* every error is collected and ``Unmarshal`` returns them together, as yaml.v2 does.

Scalars are resolved with PyYAML's YAML 1.1 resolver, as yaml.v2 resolves them, except for
corner cases that do not occur in these configs (PyYAML reads ``1e3`` as a string, ``y``/``n``
as strings).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import TypeAlias

import yaml

NULL = "tag:yaml.org,2002:null"
BOOL = "tag:yaml.org,2002:bool"
INT = "tag:yaml.org,2002:int"
FLOAT = "tag:yaml.org,2002:float"
SHORT_TAGS = {
    "tag:yaml.org,2002:map": "!!map",
    "tag:yaml.org,2002:seq": "!!seq",
    "tag:yaml.org,2002:str": "!!str",
    NULL: "!!null",
    BOOL: "!!bool",
    INT: "!!int",
    FLOAT: "!!float",
}


@dataclass(frozen=True)
class Scalar:
    """A Go scalar kind: ``string``, ``bool``, ``int32``, ``int64``, ``uint``, ``float64``."""

    kind: str

    @property
    def go(self) -> str:
        return self.kind


@dataclass(frozen=True)
class Slice:
    elem: GoType
    name: str = ""

    @property
    def go(self) -> str:
        return self.name or f"[]{self.elem.go}"


@dataclass(frozen=True)
class Map:
    key: GoType
    elem: GoType

    @property
    def go(self) -> str:
        return f"map[{self.key.go}]{self.elem.go}"


@dataclass(frozen=True)
class Ptr:
    elem: GoType

    @property
    def go(self) -> str:
        return f"*{self.elem.go}"


@dataclass(frozen=True)
class Struct:
    """A Go struct: ``fields`` maps yaml keys to types, ``inline`` holds ``,inline`` structs."""

    name: str
    fields: dict[str, GoType] = field(default_factory=dict)
    inline: tuple[Struct, ...] = ()

    @property
    def go(self) -> str:
        return self.name

    def all_fields(self) -> dict[str, GoType]:
        merged: dict[str, GoType] = {}
        for part in self.inline:
            merged.update(part.all_fields())
        merged.update(self.fields)
        return merged


GoType: TypeAlias = "Scalar | Slice | Map | Ptr | Struct"

STRING = Scalar("string")
BOOLEAN = Scalar("bool")
INT32 = Scalar("int32")
INT64 = Scalar("int64")
UINT = Scalar("uint")
FLOAT64 = Scalar("float64")

_INT_RANGES = {
    "int32": (-(2**31), 2**31 - 1),
    "int64": (-(2**63), 2**63 - 1),
    "uint": (0, 2**64 - 1),
}


def _tag(node: yaml.Node) -> str:
    return SHORT_TAGS.get(node.tag, node.tag)


def _error(node: yaml.Node, value: str, target: GoType) -> str:
    shown = f" `{value}`" if value else ""
    return f"line {node.start_mark.line + 1}: cannot unmarshal {_tag(node)}{shown} into {target.go}"


def _scalar(node: yaml.ScalarNode, target: GoType, errors: list[str]) -> None:
    if node.tag == NULL:
        return  # the zero value, whatever the target
    if isinstance(target, Ptr):
        _scalar(node, target.elem, errors)
        return
    if not isinstance(target, Scalar):
        errors.append(_error(node, node.value, target))
        return
    if target.kind == "string":
        return
    value = yaml.safe_load(node.value) if node.tag != "tag:yaml.org,2002:str" else node.value
    if target.kind == "bool":
        if node.tag != BOOL:
            errors.append(_error(node, node.value, target))
        return
    if target.kind == "float64":
        if node.tag not in (INT, FLOAT):
            errors.append(_error(node, node.value, target))
        return
    low, high = _INT_RANGES[target.kind]
    fits = (node.tag == INT and isinstance(value, int)) or (
        node.tag == FLOAT and isinstance(value, float) and value.is_integer()
    )
    if not fits or not low <= int(value) <= high:
        errors.append(_error(node, node.value, target))


def _decode(node: yaml.Node, target: GoType, errors: list[str]) -> None:
    if isinstance(node, yaml.ScalarNode):
        _scalar(node, target, errors)
        return
    if isinstance(target, Ptr):
        _decode(node, target.elem, errors)
        return
    if isinstance(node, yaml.MappingNode):
        if isinstance(target, Struct):
            known = target.all_fields()
            for key, value in node.value:
                child = known.get(str(key.value))
                if child is not None:  # unknown keys are ignored
                    _decode(value, child, errors)
        elif isinstance(target, Map):
            for key, value in node.value:
                _decode(key, target.key, errors)
                _decode(value, target.elem, errors)
        else:
            errors.append(_error(node, "", target))
        return
    if isinstance(node, yaml.SequenceNode):
        if isinstance(target, Slice):
            for item in node.value:
                _decode(item, target.elem, errors)
        else:
            errors.append(_error(node, "", target))


def unmarshal_errors(text: str, target: Struct) -> list[str]:
    """The type errors ``yaml.Unmarshal([]byte(text), &value)`` reports for a value of
    ``target``'s type; [] when it decodes."""
    root = yaml.compose(text)
    if root is None:
        return []
    errors: list[str] = []
    _decode(root, target, errors)
    return errors
