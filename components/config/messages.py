"""The program's words for pydantic's errors: what shape to write, with an example of it, and
the key that was probably meant.

One builder for every model (``problem_lines``): it resolves an error's location against the
models' schema (fields, their aliases and annotations), so a key added to any model later gets
the same messages without a line here. ``did_you_mean`` is shared with the check of the stack
file's config keys (``components.config.keys``).
"""

from __future__ import annotations

import difflib
import re
import types
import typing
from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo
from pydantic_core import ErrorDetails, PydanticUndefined

from components.config.annotations import field_annotation, is_model, strip

# Example values for keys whose type alone says too little (a string): what a user would write.
# Keys not listed take their default, their first allowed value, or a placeholder.
_EXAMPLES: Mapping[str, object] = types.MappingProxyType(
    {
        "name": "team-a",
        "mode": "lab",
        "kubernetesVersion": "v1.35.0",
        "podCidr": "10.10.0.0/16",
        "serviceCidr": "10.11.0.0/16",
        "address": "10.0.100.10",
        "schema": "team_a",
        "username": "team_a",
        "namespace": "training",
        "model": "A100-80GB",
        "endpoints": "db.example.internal:5432",
        "credentialsConfigKey": "teamDatastoreCredentials",
        "githubTokenConfigKey": "capiGithubToken",
        "oci": "registry.example.internal/capi/metal3",
        "memoryMiB": 20000,
        "gpuMemoryMiB": 81920,
        "gpuCores": 100,
        "gpus": 10,
        "cores": 30,
        "maxSurge": 0,
        "maxUnavailable": 1,
        "product": "NVIDIA-A100-SXM4-80GB",
        "version": "v1.13.2",
        "admissionControllers": "MutatingAdmissionWebhook",
        "privilegedNamespaces": "node-agents",
        "command": "sleep",
        # Model.key: where one model's key wants another example than the same key elsewhere.
        "WorkerPool.name": "a100",
        "Workload.name": "inference",
        "DataStoreSpec.name": "shared-postgres",
        "KindManagement.clusterName": "gpu-lab",
    }
)
# One entry of a mapping key whose default is empty.
_MAPPING_EXAMPLES: Mapping[str, tuple[str, str]] = types.MappingProxyType(
    {
        "requests": ("cpu", "250m"),
        "limits": ("memory", "512Mi"),
        "packageRepositories": ("mirror.list", '"deb http://mirror.example.internal/ubuntu noble"'),
        "configMapLabels": ("provider-components", "kamaji"),
        "template": ("hostSelector", "{matchLabels: {gpu-model: a100-80gb}}"),
    }
)
# A size with a unit, written where a key counts MiB: the message gives the MiB figure.
_QUANTITY = re.compile(r"^\s*(\d+(?:\.\d+)?)\s*([KkMGT]i?B?)\s*$")

# Where a key sits in the models: the annotation of its value and the model that holds it.
_UNKNOWN = object()


@dataclass(frozen=True)
class Place:
    """An error's location resolved against the models."""

    path: str  # tenants[0].network.podCidr (union tags dropped)
    key: str  # the YAML key the value sits under (podCidr), the parent's for a list item
    annotation: Any  # the expected type there, or _UNKNOWN
    parent: type[BaseModel] | None  # the model holding the key (for unknown keys)
    item: bool  # the value is a list item or a mapping value, not a key's own value


def _members(annotation: Any) -> list[Any]:
    stripped = strip(annotation).annotation
    if typing.get_origin(stripped) in (typing.Union, types.UnionType):
        return [a for a in typing.get_args(stripped) if a is not type(None)]
    return [stripped]


def field_by_key(model: type[BaseModel], key: str) -> tuple[str, FieldInfo] | None:
    """The field a YAML key names (by alias, or by name: the models populate by name)."""
    for name, info in model.model_fields.items():
        if key in (info.alias, name):
            return name, info
    return None


def aliases(model: type[BaseModel]) -> list[str]:
    """The keys a model takes, as the stack file writes them."""
    return [info.alias or name for name, info in model.model_fields.items()]


def _tag_matches(member: Any, tag: str) -> bool:
    stripped = strip(member).annotation
    name = getattr(stripped, "__name__", str(stripped))
    return tag == name or tag.startswith(f"{name}[") or tag.endswith(f"[{name}]")


def resolve(root: type[BaseModel], loc: Sequence[int | str]) -> Place:
    """Walk ``loc`` down from ``root`` through models, lists, mappings and unions."""
    annotation: Any = root
    parent: type[BaseModel] | None = None
    path, key, item = "", "platform", False
    for position, part in enumerate(loc):
        stripped = strip(annotation).annotation
        members = _members(stripped)
        if isinstance(part, str) and len(members) > 1:
            tagged = [m for m in members if _tag_matches(m, part)]
            if tagged:  # a union member's tag, not a key: the union is what belongs here
                if position < len(loc) - 1:
                    annotation = tagged[0]
                continue
        if isinstance(part, int):
            path += f"[{part}]"
            item = True
            args = typing.get_args(stripped)
            annotation = args[0] if typing.get_origin(stripped) is list and args else _UNKNOWN
            continue
        path += ("." if path else "") + part
        if is_model(stripped):
            found = field_by_key(stripped, part)
            parent, key, item = stripped, part, False
            annotation = field_annotation(found[1]) if found is not None else _UNKNOWN
            continue
        if typing.get_origin(stripped) is dict:
            args = typing.get_args(stripped)
            annotation, item = (args[1] if args else _UNKNOWN), True
            key = part
            continue
        annotation = _UNKNOWN
    return Place(path=path or "platform", key=key, annotation=annotation, parent=parent, item=item)


# ------------------------------------------------------------------------------- shapes


def _shape(annotation: Any) -> str:
    """What belongs at a key: mapping, list, string, whole number, number, true/false, one of."""
    stripped = strip(annotation).annotation
    origin = typing.get_origin(stripped)
    if is_model(stripped) or origin is dict:
        return "mapping"
    if origin is list:
        return "list"
    if origin is Literal:
        return "choice"
    if stripped is bool:
        return "boolean"
    if stripped is int:
        return "integer"
    if stripped is float:
        return "number"
    if stripped is str:
        return "string"
    return "value"


_SHAPE_WORDS = types.MappingProxyType(
    {
        "mapping": "a mapping (indented 'key: value' lines)",
        "list": "a list (indented lines starting with '- ')",
        "choice": "one of the listed values",
        "boolean": "true or false (unquoted)",
        "integer": "a whole number (unquoted; true, false and 2.0 are not whole numbers here)",
        "number": "a number (unquoted)",
        "string": "a string (quote it if YAML would read it as a number or true/false)",
        "value": "a value of the documented type",
    }
)


def written(value: object) -> str:
    """What the user wrote, in YAML's words (never the value itself: it may be a secret)."""
    if value is None:
        return "nothing (null)"
    if isinstance(value, bool):
        return "true/false"
    if isinstance(value, int):
        return "a whole number"
    if isinstance(value, float):
        return "a decimal number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, Mapping):
        return "a mapping"
    if isinstance(value, (list, tuple)):
        return "a list"
    return "a value of another type"


def expected(annotation: Any) -> str:
    """The shapes that fit ``annotation``, in words (a union: each member's)."""
    words = []
    for member in _members(annotation):
        shape = _shape(member)
        if shape == "choice":
            quoted = [repr(option) for option in typing.get_args(strip(member).annotation)]
            words.append(
                " or ".join([", ".join(quoted[:-1]), quoted[-1]] if quoted[1:] else quoted)
            )
        else:
            words.append(_SHAPE_WORDS[shape])
    return " or ".join(dict.fromkeys(words))


def _scalar(value: object) -> str:
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, str):
        if value == "" or value.strip() != value or value.lower() in ("true", "false", "null"):
            return repr(value)
        try:
            float(value)
        except ValueError:
            return value
        return f'"{value}"'
    return str(value)


def example_value(
    key: str, info: FieldInfo | None, annotation: Any, model: type[BaseModel] | None = None
) -> object:
    """A value a user would write for ``key``: the table's, the field's default, the first
    allowed value, or the smallest number the constraints allow."""
    unwrapped = strip(annotation)
    stripped, metadata = unwrapped.annotation, list(unwrapped.metadata)
    if info is not None:
        metadata = [*metadata, *info.metadata]
    if typing.get_origin(stripped) is Literal:
        return typing.get_args(stripped)[0]
    table_key = f"{model.__name__}.{key}" if model is not None else key
    if table_key not in _EXAMPLES:
        table_key = key
    if table_key in _EXAMPLES:
        candidate = _EXAMPLES[table_key]
        if _shape(stripped) != "integer" or isinstance(candidate, int):
            return candidate
    if info is not None and info.default not in (PydanticUndefined, None):
        default = info.default
        if isinstance(default, (str, int, float, bool)):
            return default
    shape = _shape(stripped)
    if shape == "integer" or (shape == "value" and int in _members(stripped)):
        low = 1
        for constraint in metadata:
            if isinstance(constraint, annotated_types.Ge):
                low = int(constraint.ge)  # type: ignore[call-overload]
            if isinstance(constraint, annotated_types.Gt):
                low = int(constraint.gt) + 1  # type: ignore[call-overload]
        return low
    if shape == "boolean":
        return True
    if shape == "number":
        return 1.5
    return f"<{key}>"


def _first_key(model: type[BaseModel]) -> tuple[str, FieldInfo]:
    """The key an example of ``model`` shows: its first required one, else its first."""
    required = [(n, i) for n, i in model.model_fields.items() if i.is_required()]
    name, info = (required or list(model.model_fields.items()))[0]
    return info.alias or name, info


def _inline(
    annotation: Any, key: str, info: FieldInfo | None, model: type[BaseModel] | None = None
) -> str:
    """A value for one line of YAML: a scalar, or a flow-style mapping or list."""
    stripped = strip(annotation).annotation
    members = _members(stripped)
    if len(members) > 1:
        stripped = members[0]
    origin = typing.get_origin(stripped)
    if is_model(stripped):
        child, child_info = _first_key(stripped)
        value = _inline(child_info.annotation, child, child_info, stripped)
        return "{" + f"{child}: {value}" + "}"
    if origin is list:
        inner = typing.get_args(stripped)[0] if typing.get_args(stripped) else str
        return f"[{_inline(inner, key, None)}]"
    if origin is dict:
        inner = typing.get_args(stripped)[1] if typing.get_args(stripped) else str
        return "{" + f"<name>: {_inline(inner, key, None)}" + "}"
    return _scalar(example_value(key, info, stripped, model))


def _dict_example(key: str, info: FieldInfo | None) -> tuple[str, str] | None:
    """A mapping field's own default entry, when it has one (``requests: {cpu: 250m}``)."""
    if key in _MAPPING_EXAMPLES:
        return _MAPPING_EXAMPLES[key]
    if info is None:
        return None
    default = info.default
    if info.default_factory is not None:
        try:
            default = info.default_factory()  # type: ignore[call-arg]
        except TypeError:
            return None
    if isinstance(default, Mapping) and default:
        name, value = next(iter(default.items()))
        return str(name), _scalar(value)
    return None


def example(place: Place) -> list[str]:
    """A short YAML example of the right shape at ``place``: two lines for a mapping or a
    list (the key, then one entry), one line for a scalar."""
    annotation = place.annotation
    if annotation is _UNKNOWN:
        return []
    info = None
    if place.parent is not None and not place.item:
        found = field_by_key(place.parent, place.key)
        info = found[1] if found is not None else None
    stripped = strip(annotation).annotation
    members = _members(stripped)
    if len(members) > 1:
        stripped = members[0]
    origin = typing.get_origin(stripped)
    head = f"{place.key}:" if not place.item else None
    if is_model(stripped):
        child, child_info = _first_key(stripped)
        body = f"{child}: {_inline(child_info.annotation, child, child_info, stripped)}"
        if head is None:
            return [f"- {body}"] if place.path.endswith("]") else [f"{place.key}:", f"  {body}"]
        return [head, f"  {body}"]
    if origin is list:
        inner = typing.get_args(stripped)[0] if typing.get_args(stripped) else str
        inner_stripped = strip(inner).annotation
        if is_model(inner_stripped):
            child, child_info = _first_key(inner_stripped)
            value = _inline(child_info.annotation, child, child_info, inner_stripped)
            entry = f"- {child}: {value}"
        else:
            entry = f"- {_inline(inner, place.key, None)}"
        return [head or f"{place.key}:", f"  {entry}"]
    if origin is dict:
        entry_pair = _dict_example(place.key, info)
        if entry_pair is None:
            inner = typing.get_args(stripped)[1] if typing.get_args(stripped) else str
            entry_pair = ("<name>", _inline(inner, place.key, None))
        return [head or f"{place.key}:", f"  {entry_pair[0]}: {entry_pair[1]}"]
    value = _inline(stripped, place.key, info, place.parent)
    if place.item:
        return [f"- {value}"] if place.path.endswith("]") else [f"{place.key}: {value}"]
    return [f"{place.key}: {value}"]


# --------------------------------------------------------------------------- did you mean


def did_you_mean(word: str, candidates: Iterable[str]) -> str | None:
    """The candidate ``word`` was probably meant as (spelling, case, '-'/'_'), or None."""
    options = list(dict.fromkeys(candidates))
    folded = {_fold(option): option for option in options}
    if _fold(word) in folded:
        return folded[_fold(word)]
    close = difflib.get_close_matches(word, options, n=1, cutoff=0.6)
    if close:
        return close[0]
    close = difflib.get_close_matches(_fold(word), list(folded), n=1, cutoff=0.6)
    return folded[close[0]] if close else None


def _fold(word: str) -> str:
    return word.lower().replace("-", "").replace("_", "")


# ------------------------------------------------------------------------------ messages

_CONTAINER_TYPES = frozenset(
    {"model_type", "model_attributes_type", "dict_type", "list_type", "mapping_type"}
)
_SCALAR_TYPES = frozenset(
    {
        "int_type",
        "int_parsing",
        "int_from_float",
        "bool_type",
        "bool_parsing",
        "float_type",
        "float_parsing",
        "string_type",
        "literal_error",
        "none_required",
    }
)


def _with_example(problem: str, place: Place) -> list[str]:
    lines = example(place)
    if not lines:
        return [problem]
    return [f"{problem}, like:", *(f"    {line}" for line in lines)]


def _shape_problem(place: Place, value: object, fix_only: bool = False) -> list[str]:
    want = expected(place.annotation)
    if fix_only:
        return _with_example(f"{place.path}: write {want}", place)
    return _with_example(
        f"{place.path}: {written(value)} was written where {want} belongs; write that", place
    )


def problem_lines(
    root: type[BaseModel], errors: Sequence[ErrorDetails], fixes: Mapping[str, str]
) -> list[str]:
    """One problem per (union-merged) error location, each naming the key and the fix; shape
    errors carry a YAML example and unknown keys the key probably meant."""
    lines: list[str] = []
    seen: set[str] = set()
    # A misspelt required key is one slip, told once: its "did you mean" line, not also a
    # "required key is missing" line for the key meant.
    renamed = {
        _meant_path(resolve(root, e["loc"])) for e in errors if e["type"] == "extra_forbidden"
    }
    for error in errors:
        place = resolve(root, error["loc"])
        kind = error["type"]
        value = error.get("input")
        if kind in _CONTAINER_TYPES or kind in _SCALAR_TYPES:
            if place.path in seen:  # another member of the same union: one line says it all
                continue
            seen.add(place.path)
            shape_mismatch = isinstance(value, (Mapping, list)) or _shape(place.annotation) in (
                "mapping",
                "list",
            )
            if shape_mismatch or value is None:
                lines.extend(_shape_problem(place, value))
                continue
            unit = _unit_fix(place.key, value)
            want = expected(place.annotation)
            if unit is not None:
                lines.append(f"{place.path}: {unit}")
            elif kind == "literal_error":
                offered = f"{value!r} is not offered" if isinstance(value, str) else written(value)
                lines.extend(_with_example(f"{place.path}: {offered}: write {want}", place))
            else:
                problem = f"{written(value)} was written where {want} belongs; write that"
                lines.extend(_with_example(f"{place.path}: {problem}", place))
            continue
        if kind == "extra_forbidden":
            lines.append(_unknown_key(place))
            continue
        if kind == "missing":
            if place.path in renamed:
                continue
            lines.extend(_with_example(f"{place.path}: required key is missing: add it", place))
            continue
        message = error["msg"].removeprefix("Value error, ")
        if kind in fixes:
            message = f"{message}: {fixes[kind]}"
        if not error["loc"]:
            lines.extend(message.split("\n"))
            continue
        lines.extend(f"{place.path}: {part}" for part in message.split("\n"))
    return lines


def _meant_path(place: Place) -> str | None:
    """The path of the key an unknown key probably meant (``tenants[2].network.podCidr`` for
    ``...podCIDR``), None when there is no close one."""
    if place.parent is None:
        return None
    meant = did_you_mean(place.key, aliases(place.parent))
    return None if meant is None else _beside(place, meant)


def _beside(place: Place, key: str) -> str:
    """The path of ``key`` in the mapping that holds ``place``."""
    holder = place.path.rsplit(".", 1)[0] if "." in place.path else ""
    return f"{holder}.{key}" if holder else key


def _unit_fix(key: str, value: object) -> str | None:
    """``memoryMiB: 20Gi``: the figure in MiB the key wants."""
    if not key.endswith("MiB") or not isinstance(value, str):
        return None
    match = _QUANTITY.match(value)
    if match is None:
        return None
    number, unit = float(match.group(1)), match.group(2)
    power = "KMGT".index(unit[0].upper()) + 1
    binary = unit.endswith("i") or unit.endswith("iB")
    mib = number * (1024**power if binary else 1000**power) / 1024**2
    return f"{key} counts MiB as a whole number: {value} is {mib:.0f} MiB, so write {mib:.0f}"


def _unknown_key(place: Place) -> str:
    keys = aliases(place.parent) if place.parent is not None else []
    meant = did_you_mean(place.key, keys)
    if meant is not None:
        return f"{place.path}: unknown key: did you mean {meant}? (rename it; keys are camelCase)"
    below = _nested_home(place.parent, place.key) if place.parent is not None else None
    if below is not None:
        # An indentation slip that kept valid YAML: the key exists, one level or more down.
        return (
            f"{place.path}: unknown key here: {place.key} belongs under {_beside(place, below)}: "
            "indent it there"
        )
    listed = ", ".join(keys) or "none"
    return f"{place.path}: unknown key: remove it (the keys here are {listed})"


def _nested_home(model: type[BaseModel], key: str, depth: int = 3) -> str | None:
    """Where under ``model`` a field keyed ``key`` is (``workerPools[]``, ``network``), the
    nearest first; None when no model within ``depth`` levels has it."""
    level: list[tuple[str, type[BaseModel]]] = [("", model)]
    for _ in range(depth):
        deeper: list[tuple[str, type[BaseModel]]] = []
        for prefix, current in level:
            for name, info in current.model_fields.items():
                here = prefix + (info.alias or name)
                for child, is_list in _child_models(field_annotation(info)):
                    path = here + ("[]" if is_list else "")
                    if field_by_key(child, key) is not None:
                        return path
                    deeper.append((path + ".", child))
        level = deeper
    return None


def _child_models(annotation: Any) -> list[tuple[type[BaseModel], bool]]:
    """The models a field's value holds: itself (False) or as list items (True)."""
    found: list[tuple[type[BaseModel], bool]] = []
    for member in _members(strip(annotation).annotation):
        stripped = strip(member).annotation
        args = typing.get_args(stripped)
        if is_model(stripped):
            found.append((stripped, False))
        elif typing.get_origin(stripped) is list and args and is_model(strip(args[0]).annotation):
            found.append((strip(args[0]).annotation, True))
    return found
