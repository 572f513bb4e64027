"""Built-in Kubernetes objects against the OpenAPI schema of the cluster's version.

The schemas are the ones ``kubernetes-validate`` ships (JSON schemas generated from each
Kubernetes release's OpenAPI document, in a "strict" flavour where unknown fields are errors —
the API server would drop them, or refuse them with ``fieldValidation=Strict``). This module
loads them once per version and keeps one validator per kind, and also answers which API
versions a cluster of that version serves before any CRD is installed (for
``.Capabilities.APIVersions``).
"""

from __future__ import annotations

import functools
import json
import re
from collections.abc import Mapping
from pathlib import Path
from typing import Any

import jsonschema
import kubernetes_validate
from referencing import Registry, Resource

SCHEMA_ROOT = Path(kubernetes_validate.__file__).parent / "kubernetes-json-schema"
_ALPHA = re.compile(r"/v\d+alpha\d+$")


def minor(version: str) -> tuple[int, int]:
    major, minor_part = version.lstrip("v").split(".")[:2]
    return int(major), int(minor_part)


@functools.cache
def schema_dir(version: str) -> Path:
    """The newest shipped schema set not newer than ``version`` (same rule as
    kubernetes-validate); a version newer than every shipped set is an error, not a guess."""
    shipped = sorted(
        (minor(p.name.split("-")[0]), p)
        for p in SCHEMA_ROOT.iterdir()
        if p.name.endswith("-local-strict")
    )
    wanted = minor(version)
    if wanted > shipped[-1][0]:
        raise LookupError(f"kubernetes-validate ships no schema for Kubernetes {version}")
    return [p for v, p in shipped if v <= wanted][-1]


@functools.cache
def _definitions(version: str) -> dict[str, Any]:
    data: dict[str, Any] = json.loads((schema_dir(version) / "_definitions.json").read_text())
    return data


@functools.cache
def builtin_kinds(version: str) -> frozenset[tuple[str, str]]:
    """Every (apiVersion, kind) of a top-level object the version's API server serves."""
    found: set[tuple[str, str]] = set()
    for definition in _definitions(version)["$defs"].values():
        props = definition.get("properties") or {}
        api = (props.get("apiVersion") or {}).get("enum")
        kind = (props.get("kind") or {}).get("enum")
        if api and kind and "metadata" in props and not kind[0].endswith("List"):
            # The OpenAPI document lists every compiled-in version; alpha ones are off unless a
            # cluster enables them (kube-apiserver --runtime-config), and neither kind nor
            # Kamaji's tenants do. Betas are kept (the older ones are on by default).
            if _ALPHA.search(api[0]):
                continue
            found.add((api[0], kind[0]))
    return frozenset(found)


def builtin_api_versions(version: str) -> frozenset[str]:
    """``.Capabilities.APIVersions`` of a fresh cluster: "group/version" and
    "group/version/Kind" (Helm's ``GetVersionSet`` lists both forms)."""
    result: set[str] = set()
    for api, kind in builtin_kinds(version):
        result.add(api)
        result.add(f"{api}/{kind}")
    return frozenset(result)


def is_builtin(version: str, api_version: str, kind: str) -> bool:
    return (api_version, kind) in builtin_kinds(version)


@functools.cache
def _validator(version: str, api_version: str, kind: str) -> jsonschema.protocols.Validator:
    group_version = api_version.split("/")
    short_group = group_version[0].split(".")[0] if len(group_version) == 2 else ""
    name = f"{kind.lower()}-{short_group + '-' if short_group else ''}{group_version[-1]}.json"
    schema = json.loads((schema_dir(version) / name).read_text())
    registry: Registry = Resource.from_contents(schema) @ Registry()
    registry = Resource.from_contents(_definitions(version)) @ registry
    validator_class = jsonschema.validators.Draft202012Validator
    return validator_class(schema, registry=registry)


def builtin_violations(version: str, obj: Mapping[str, Any]) -> list[str]:
    """Schema violations of a built-in object, one line each (empty when it validates)."""
    validator = _validator(version, str(obj["apiVersion"]), str(obj["kind"]))
    return [
        f"{'.'.join(str(p) for p in error.absolute_path) or '<root>'}: {error.message[:300]}"
        for error in sorted(validator.iter_errors(dict(obj)), key=lambda e: list(e.absolute_path))
    ]
