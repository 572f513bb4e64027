"""Custom resources against their CRD: the structural schema and the CEL validation rules.

The API server validates a custom resource against the ``openAPIV3Schema`` of the served version
(unknown fields are pruned, or refused with ``fieldValidation=Strict`` — here they are errors, so
a misspelt field cannot disappear silently) and then evaluates every ``x-kubernetes-validations``
rule whose field is present. Rules are evaluated with ``cel-python``. Two kinds cannot be
evaluated offline and are counted, never hidden: transition rules (they read ``oldSelf`` and only
run on update) and rules that call a function of Kubernetes' CEL libraries cel-python lacks.
"""

from __future__ import annotations

import copy
import functools
from collections.abc import Iterable, Mapping
from dataclasses import dataclass
from pathlib import Path
from types import MappingProxyType
from typing import Any

import jsonschema
import yaml
from gpu_platform_policies.cel import FUNCTIONS as PACK_CEL_FUNCTIONS

from tests.support.cel_tally import CelTally


@dataclass(frozen=True)
class CrdVersion:
    """One served version of a CRD."""

    group: str
    version: str
    kind: str
    plural: str
    scope: str
    schema: dict[str, Any]
    source: str

    @property
    def api_version(self) -> str:
        return f"{self.group}/{self.version}"

    @property
    def crd_name(self) -> str:
        return f"{self.plural}.{self.group}"


def served_versions(crd: Mapping[str, Any], source: str) -> list[CrdVersion]:
    """The served versions of a CustomResourceDefinition object."""
    spec = crd.get("spec") or {}
    names = spec.get("names") or {}
    found = []
    for version in spec.get("versions") or []:
        if not version.get("served", False):
            continue
        schema = (version.get("schema") or {}).get("openAPIV3Schema")
        found.append(
            CrdVersion(
                group=spec["group"],
                version=version["name"],
                kind=names["kind"],
                plural=names.get("plural", ""),
                scope=spec.get("scope", "Namespaced"),
                schema=schema or {"type": "object", "x-kubernetes-preserve-unknown-fields": True},
                source=source,
            )
        )
    return found


def strict_schema(schema: Any) -> Any:
    """A structural OpenAPI v3 schema as a JSON schema the way the API server applies it:
    nullable honoured, int-or-string accepted, unknown fields rejected (instead of pruned)."""
    if isinstance(schema, list):
        return [strict_schema(item) for item in schema]
    if not isinstance(schema, dict):
        return schema
    result = {key: strict_schema(value) for key, value in schema.items()}
    if result.pop("x-kubernetes-int-or-string", False):
        result.pop("type", None)
        result["anyOf"] = [{"type": "integer"}, {"type": "string"}]
    if result.pop("nullable", False) and "type" in result:
        result["type"] = [result["type"], "null"]
    preserve = result.pop("x-kubernetes-preserve-unknown-fields", False)
    if (
        result.get("type") == "object"
        and "properties" in result
        and "additionalProperties" not in result
        and not preserve
    ):
        result["additionalProperties"] = False
    for key in list(result):
        if key.startswith("x-kubernetes-"):
            del result[key]
    return result


def crd_violations(
    crd: CrdVersion, obj: Mapping[str, Any], tally: CelTally | None = None
) -> list[str]:
    """Schema and CEL violations of a whole custom resource, one line each."""
    schema = strict_schema(copy.deepcopy(crd.schema))
    # metadata is validated by the API server itself, not by the CRD schema.
    schema.setdefault("properties", {})["metadata"] = {"type": "object"}
    # Everything a create may carry but the status (a subresource): a misspelt top-level key
    # (``sepc``) is an unknown field like any other. The API server defaults before it validates
    # (structural schema defaulting), so defaults are applied first.
    body = apply_defaults(
        crd.schema, {k: copy.deepcopy(v) for k, v in obj.items() if k != "status"}
    )
    validator = jsonschema.Draft7Validator(schema)
    problems = [
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message[:300]}"
        for error in sorted(validator.iter_errors(body), key=lambda e: list(e.absolute_path))
    ]
    local = CelTally()
    problems.extend(cel_violations(crd.schema, body, local))
    if tally is not None:
        tally.add(local)
    return problems


def apply_defaults(schema: Mapping[str, Any], value: Any) -> Any:
    """``value`` with the schema's ``default``s filled in where a field is absent, as the API
    server does before validation (apiextensions-apiserver pkg/apiserver/schema/defaulting)."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        for key, child in props.items():
            if key not in value and "default" in child:
                value[key] = copy.deepcopy(child["default"])
        extra = schema.get("additionalProperties")
        for key in list(value):
            child_schema = props.get(key) if key in props else extra
            if isinstance(child_schema, dict):
                value[key] = apply_defaults(child_schema, value[key])
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        return [apply_defaults(schema["items"], item) for item in value]
    return value


# ---------------------------------------------------------------------------------- CEL

# Kubernetes escapes property names that are not CEL identifiers
# (k8s.io/apiextensions-apiserver pkg/apiserver/schema/cel/model: Escape).
_CEL_RESERVED = {
    "true", "false", "null", "in", "as", "break", "const", "continue", "else", "for",
    "function", "if", "import", "let", "loop", "package", "namespace", "return", "var",
    "void", "while",
}  # fmt: skip


def escape_property(name: str) -> str:
    if name in _CEL_RESERVED:
        return f"__{name}__"
    return (
        name.replace("__", "__underscores__")
        .replace(".", "__dot__")
        .replace("-", "__dash__")
        .replace("/", "__slash__")
    )


def _cel_value(schema: Mapping[str, Any], value: Any) -> Any:
    """The JSON value as CEL sees it under ``schema``: declared properties escaped."""
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        out: dict[str, Any] = {}
        for key, child in value.items():
            if key in props:
                out[escape_property(key)] = _cel_value(props[key], child)
            else:
                out[key] = _cel_value(extra if isinstance(extra, dict) else {}, child)
        return out
    if isinstance(value, list):
        items = schema.get("items") or {}
        return [_cel_value(items, child) for child in value]
    # JSON numbers reach here as floats (the recording's inputs came through protobuf Struct);
    # the API server decodes an integer field as int64, and CEL keeps int and double apart.
    if schema.get("type") == "integer" and isinstance(value, float) and value.is_integer():
        return int(value)
    return value


def cel_violations(
    schema: Mapping[str, Any], value: Any, tally: CelTally, path: str = ""
) -> list[str]:
    """Evaluate every ``x-kubernetes-validations`` rule at and below ``schema`` whose value is
    present, as the API server does on create."""
    if value is None:
        return []
    problems: list[str] = []
    for rule in schema.get("x-kubernetes-validations") or []:
        problems.extend(_evaluate_rule(rule, schema, value, tally, path or "<root>"))
    if isinstance(value, dict):
        props = schema.get("properties") or {}
        extra = schema.get("additionalProperties")
        for key, child in value.items():
            child_schema = props.get(key) if key in props else extra
            if isinstance(child_schema, dict):
                problems.extend(
                    cel_violations(child_schema, child, tally, f"{path}.{key}" if path else key)
                )
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for index, child in enumerate(value):
            problems.extend(cel_violations(schema["items"], child, tally, f"{path}[{index}]"))
    return problems


def _evaluate_rule(
    rule: Mapping[str, Any], schema: Mapping[str, Any], value: Any, tally: CelTally, path: str
) -> list[str]:
    import celpy
    from celpy import CELEvalError, CELParseError

    text = str(rule.get("rule", ""))
    if "oldSelf" in text:
        tally.transition_rules += 1
        return []
    env = celpy.Environment()
    try:
        program = env.program(env.compile(text), functions=_FUNCTIONS)
    except CELParseError:
        tally.unsupported["syntax cel-python cannot parse"] += 1
        return []
    try:
        result = program.evaluate({"self": celpy.json_to_cel(_cel_value(schema, value))})
    except CELEvalError as error:
        reason = _unsupported_reason(error)
        if reason is not None:
            tally.unsupported[reason] += 1
            return []
        return [f"{path}: CEL rule {text!r} failed to evaluate: {error.args[0]}"]
    if isinstance(result, CELEvalError):
        reason = _unsupported_reason(result)
        if reason is not None:
            tally.unsupported[reason] += 1
            return []
        return [f"{path}: CEL rule {text!r} failed to evaluate: {result.args[0]}"]
    tally.evaluated += 1
    if bool(result):
        return []
    message = rule.get("message") or rule.get("messageExpression") or f"failed rule: {text}"
    return [f"{path}: {message}"]


def _is_cidr(value: Any) -> Any:
    """Kubernetes' CEL ``isCIDR`` (k8s.io/apiserver pkg/cel/library/cidr.go: netip.ParsePrefix,
    which accepts host bits)."""
    import ipaddress

    from celpy import celtypes

    try:
        ipaddress.ip_network(str(value), strict=False)
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType("/" in str(value))


def _is_ip(value: Any) -> Any:
    """Kubernetes' CEL ``isIP`` (pkg/cel/library/ip.go: netip.ParseAddr, no zone)."""
    import ipaddress

    from celpy import celtypes

    try:
        ipaddress.ip_address(str(value))
    except ValueError:
        return celtypes.BoolType(False)
    return celtypes.BoolType(True)


# CEL's heterogeneous equality and ``in`` as cel-go (and so the API server) implement them, from
# the policy pack, which evaluates the same way (gpu_platform_policies/cel.py: values of different
# types are unequal, numbers compare by value, ``x == null`` holds only for null; cel-python 0.5
# raises "no such overload" instead, which would turn every ``self.tlsConfig != null`` rule into
# a false violation), and the Kubernetes network functions.
_FUNCTIONS = MappingProxyType(
    {
        **{name: PACK_CEL_FUNCTIONS[name] for name in ("_==_", "_!=_", "_in_")},
        "isCIDR": _is_cidr,
        "isIP": _is_ip,
    }
)


def _unsupported_reason(error: Exception) -> str | None:
    """``undeclared reference to 'isURL'`` → the function name: a Kubernetes CEL library
    function cel-python does not implement, which the API server would evaluate."""
    text = str(error.args[0]) if error.args else str(error)
    marker = "undeclared reference to '"
    if marker in text:
        name = text.split(marker, 1)[1].split("'", 1)[0]
        return f"function {name}()"
    return None


_LOADER = getattr(yaml, "CSafeLoader", yaml.SafeLoader)


@functools.lru_cache(maxsize=256)
def _file_crds(path: str, mtime_ns: int) -> tuple[dict[str, Any], ...]:
    del mtime_ns  # part of the cache key only
    with open(path, encoding="utf-8") as handle:
        documents = list(yaml.load_all(handle, Loader=_LOADER))
    return tuple(
        d for d in documents if isinstance(d, dict) and d.get("kind") == "CustomResourceDefinition"
    )


def crds_in_file(path: Path) -> list[dict[str, Any]]:
    """The CustomResourceDefinitions of a YAML file (parsed once per session, with libyaml)."""
    return copy.deepcopy(list(_file_crds(str(path), path.stat().st_mtime_ns)))


class CrdCatalog:
    """CRD versions by (apiVersion, kind), from CRD objects of any origin."""

    def __init__(self, versions: Iterable[CrdVersion] = ()) -> None:
        self._by_key: dict[tuple[str, str], CrdVersion] = {}
        for version in versions:
            self.add(version)

    def add(self, version: CrdVersion) -> None:
        self._by_key.setdefault((version.api_version, version.kind), version)

    def add_crd(self, crd: Mapping[str, Any], source: str) -> None:
        for version in served_versions(crd, source):
            self.add(version)

    def get(self, api_version: str, kind: str) -> CrdVersion | None:
        return self._by_key.get((api_version, kind))

    def __contains__(self, key: tuple[str, str]) -> bool:
        return key in self._by_key

    def __len__(self) -> int:
        return len(self._by_key)
