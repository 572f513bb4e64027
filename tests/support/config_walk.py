"""Walk the configuration models and a valid stack config side by side: every key of every model,
where it sits in the config, and values that are wrong for it, derived from the models' own
annotations and constraints (so a key another change adds is covered without a line here).

``rich_base(stack)`` is the shipped stack with every optional section present and valid, so that
each model of the tree appears in at least one of the two stacks.
"""

from __future__ import annotations

import copy
import types
import typing
from collections.abc import Iterator
from dataclasses import dataclass
from typing import Any, Literal

import annotated_types
from pydantic import BaseModel
from pydantic.fields import FieldInfo

from components.config import PlatformConfig
from components.config.annotations import field_annotation, is_model, models_in, strip
from tests.support.harness import load_stack_config

PLATFORM_KEY = "gpu-platform:platform"
Path = tuple[int | str, ...]


def rich_base(stack: str) -> dict[str, Any]:
    """The shipped ``stack`` with the optional sections it leaves out written in, all valid."""
    raw = copy.deepcopy(load_stack_config(stack)[PLATFORM_KEY])
    if stack == "lab":
        # One worker image serves every tenant, so every tenant runs the platform's version
        # (Pulumi.lab.yaml ships tenant-a one minor behind, for the upgrade drill).
        raw["workerImage"] = f"kindest/node:{raw['kubernetesVersion']}"
        for tenant in raw["tenants"]:
            tenant.pop("kubernetesVersion", None)
        raw["hami"].update(gpuSchedulerPolicy="spread", nodeSchedulerPolicy="binpack")
        raw["management"]["kind"].update(
            nodeImage="kindest/node:v1.35.0",
            podSubnet="10.244.0.0/16",
            serviceSubnet="10.96.0.0/12",
        )
        raw["dataStores"] = [
            {
                "name": "shared-postgres",
                "driver": "PostgreSQL",
                "endpoints": ["pg.example.internal:5432"],
                "credentialsConfigKey": "sharedPostgresCredentials",
            }
        ]
        tenant = raw["tenants"][0]
        tenant["controlPlane"] = {
            "replicas": 1,
            "serviceType": "LoadBalancer",
            "address": "172.18.255.254",
            "admissionControllers": ["MutatingAdmissionWebhook", "ValidatingAdmissionWebhook"],
            "resources": {
                "apiServer": {"requests": {"cpu": "250m"}, "limits": {"memory": "1Gi"}},
                "controllerManager": {"requests": {"cpu": "125m"}},
                "scheduler": {"requests": {"memory": "128Mi"}},
            },
        }
        tenant["managementNamespace"] = {"name": "tenant-a-home", "existing": False}
        tenant["workerPools"][0]["deviceMode"] = "mock"
        tenant["workerPools"][0]["cards"] = [
            {"model": "A100-80GB", "memoryMiB": 81920, "coreUnits": 100, "product": "NVIDIA-A100"}
        ]
        tenant["workloads"] = [
            {
                "name": "trainer",
                "namespace": "default",
                "replicas": 1,
                "image": "busybox:1.37.0",
                "command": ["sleep", "infinity"],
                "gpu": {"cards": 1, "memoryPercentage": 100, "cores": 100},
            }
        ]
        # The walk reaches the first tenant's keys: tenant-a shares its card with DRA here, so
        # deviceQuotas are reached (prod's first tenant reaches gpuQuotas).
        tenant.pop("gpuQuotas", None)
        tenant["gpuSharing"] = "dra"
        tenant["deviceQuotas"] = [{"namespace": "default", "devices": 1}]
    else:
        existing = raw["management"]["existing"]
        existing["clusterApi"]["githubTokenConfigKey"] = "capiGithubToken"
        existing["clusterApi"]["fetch"] = {
            "core": {"oci": "registry.example.internal/capi/core"},
            "bootstrapKubeadm": {"configMapLabels": {"provider-components": "kubeadm"}},
            "controlPlaneKamaji": {"oci": "registry.example.internal/capi/kamaji"},
            "infrastructure": {"oci": "registry.example.internal/capi/metal3"},
        }
        raw["gpuDriver"] = {
            "source": "runtime-built",
            "version": "595.91.07",
            "autoUpgrade": False,
            "packageRepositories": {"mirror.list": "deb http://mirror.example.internal/u noble"},
        }
        raw["hami"]["gpuSchedulerPolicy"] = "binpack"
        vision = raw["tenants"][0]
        vision["dataStore"]["dedicated"]["storageClassName"] = "local-nvme"
        vision["managementNamespace"]["name"] = "team-vision"
        vision["workloads"] = [
            {
                "name": "trainer",
                "namespace": "training",
                "replicas": 2,
                "image": "busybox:1.37.0",
                "gpu": {"cards": 1, "memoryMiB": 40000, "cores": 50},
            }
        ]
        pool = vision["workerPools"][0]
        pool["deviceMode"] = "nvidia"
        pool["machine"]["healthCheck"].update(unhealthyAfter="300s", maxUnhealthy="40%")
        raw["metrics"] = {
            "prometheusOperator": {
                "remoteWriteUrl": "http://prometheus-operated.monitoring.svc:9090/api/v1/write",
                "labels": {"release": "kube-prometheus-stack"},
            }
        }
    return raw


@dataclass(frozen=True)
class Target:
    """One key (or one item of a list or mapping) of one model, at one place in a stack."""

    stack: str
    path: Path  # into the raw config: ("tenants", 0, "network", "podCidr")
    model: type[BaseModel]  # the model the key belongs to
    field: str  # its field name
    annotation: Any  # what belongs there (a list item's or mapping value's type for items)
    info: FieldInfo
    item: bool = False  # a list item or mapping value, not the key's whole value

    @property
    def key(self) -> str:
        """The path as the program's messages write it: tenants[0].network.podCidr."""
        return key_text(self.path)

    @property
    def id(self) -> str:
        return f"{self.stack}:{self.key}"


def key_text(path: Path) -> str:
    text = ""
    for part in path:
        text += f"[{part}]" if isinstance(part, int) else ("." if text else "") + str(part)
    return text


def all_fields(root: type[BaseModel] = PlatformConfig) -> set[tuple[type[BaseModel], str]]:
    """Every (model, field) reachable from ``root``."""
    found: set[tuple[type[BaseModel], str]] = set()
    todo, seen = [root], set()
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        for name, info in model.model_fields.items():
            found.add((model, name))
            todo.extend(models_in(info.annotation))
    return found


def targets(stack: str) -> Iterator[Target]:
    """Every key of every model present in the stack's rich base, with the first item of every
    list and mapping it holds. A model the base leaves out is walked too when an empty mapping
    is valid in its place (a section whose keys all have defaults: one another change adds)."""
    base = rich_base(stack)
    yield from _walk(stack, PlatformConfig, base, (), base)


def _empty_is_valid(base: dict[str, Any], path: Path) -> bool:
    from components.config import ConfigError
    from components.stack import parse_stack

    try:
        parse_stack(with_value(base, path, {}))
    except ConfigError:
        return False
    return True


def _walk(
    stack: str, model: type[BaseModel], raw: Any, path: Path, base: dict[str, Any]
) -> Iterator[Target]:
    for name, info in model.model_fields.items():
        key = info.alias or name
        annotation = info.annotation
        yield Target(stack, (*path, key), model, name, field_annotation(info), info)
        value = raw.get(key) if isinstance(raw, dict) else None
        inner = strip(annotation).annotation
        origin = typing.get_origin(inner)
        if is_model(inner) and value is None and _empty_is_valid(base, (*path, key)):
            value = {}
        if is_model(inner) and isinstance(value, dict):
            yield from _walk(stack, inner, value, (*path, key), base)
        elif origin is list and isinstance(value, list) and value:
            (item,) = typing.get_args(inner)
            item_inner = strip(item).annotation
            if is_model(item_inner):
                yield from _walk(stack, item_inner, value[0], (*path, key, 0), base)
            else:
                yield Target(stack, (*path, key, 0), model, name, item, info, item=True)
        elif origin is dict and isinstance(value, dict) and value:
            item = typing.get_args(inner)[1]
            first = next(iter(value))
            if item is not Any:
                yield Target(stack, (*path, key, first), model, name, item, info, item=True)


def with_value(raw: dict[str, Any], path: Path, value: Any) -> dict[str, Any]:
    """A copy of ``raw`` with ``value`` at ``path`` (mappings missing on the way written in)."""
    out = copy.deepcopy(raw)
    node: Any = out
    for part in path[:-1]:
        node = node.setdefault(part, {}) if isinstance(node, dict) else node[part]
    node[path[-1]] = value
    return out


# ------------------------------------------------------------------------- wrong values

_SHAPES: dict[str, list[Any]] = {
    "mapping": [["an", "item"], "a string", 3],
    "list": [{"a": "mapping"}, "a string", 3],
    "scalar": [["an", "item"], {"a": "mapping"}],
}


def shape_of(annotation: Any) -> str:
    inner = strip(annotation).annotation
    origin = typing.get_origin(inner)
    if is_model(inner) or origin is dict:
        return "mapping"
    if origin is list:
        return "list"
    return "scalar"


def wrong_shapes(target: Target) -> list[Any]:
    """Values of another shape: a list or a scalar where a mapping belongs, and so on; a union
    of several shapes (a number or a string) takes only what fits none of them."""
    unwrapped = strip(target.annotation)
    inner, optional = unwrapped.annotation, unwrapped.optional
    members = (
        [m for m in typing.get_args(inner) if m is not type(None)]
        if typing.get_origin(inner) in (typing.Union, types.UnionType)
        else [inner]
    )
    shapes = {shape_of(m) for m in members}
    wrong: list[Any] = []
    for shape, values in _SHAPES.items():
        if shape not in shapes:
            continue
        for value in values:
            if not any(_fits_shape(value, m) for m in members):
                wrong.append(value)
    if not optional:
        wrong.append(None)
    return wrong


def _fits_shape(value: Any, annotation: Any) -> bool:
    inner = strip(annotation).annotation
    shape = shape_of(inner)
    if shape == "mapping":
        return isinstance(value, dict)
    if shape == "list":
        return isinstance(value, list)
    return not isinstance(value, (dict, list))


def scalar_kind(annotation: Any) -> str | None:
    inner = strip(annotation).annotation
    if typing.get_origin(inner) is Literal:
        return "literal"
    if inner is bool:
        return "bool"
    if inner is int:
        return "int"
    if inner is str:
        return "str"
    if typing.get_origin(inner) in (typing.Union, types.UnionType):
        kinds = {scalar_kind(m) for m in typing.get_args(inner)}
        if kinds == {"int", "str"}:
            return "int|str"
    return None


def bounds(annotation: Any) -> tuple[int | None, int | None]:
    """The smallest and largest whole number a field allows (None: unbounded)."""
    metadata = strip(annotation).metadata
    low = high = None
    for constraint in metadata:
        if isinstance(constraint, annotated_types.Gt):
            low = int(constraint.gt) + 1  # type: ignore[call-overload]
        if isinstance(constraint, annotated_types.Ge):
            low = int(constraint.ge)  # type: ignore[call-overload]
        if isinstance(constraint, annotated_types.Lt):
            high = int(constraint.lt) - 1  # type: ignore[call-overload]
        if isinstance(constraint, annotated_types.Le):
            high = int(constraint.le)  # type: ignore[call-overload]
    return low, high
