"""The program's words for wrong shapes and misspelled keys (issue 26, "Unclear"): every wrong
shape says which shape to write with a YAML example of it, every unknown key names the key that
was probably meant, and the stack file's config keys are checked for misspelled namespaces."""

from __future__ import annotations

import copy
import typing
from collections.abc import Iterator
from typing import Any

import pytest
import yaml
from pydantic import BaseModel, ConfigDict, TypeAdapter

from components.config import ConfigError, PlatformConfig
from components.config.annotations import field_annotation, strip
from components.config.keys import config_key_problems
from components.config.messages import Place, aliases, did_you_mean, example
from components.stack import parse_platform
from tests.support.harness import load_stack_config

PLATFORM_KEY = "gpu-platform:platform"


def stack_platform(stack: str) -> dict[str, Any]:
    return copy.deepcopy(load_stack_config(stack)[PLATFORM_KEY])


def refusal(raw: Any) -> str:
    with pytest.raises(ConfigError) as caught:
        parse_platform(raw)
    return str(caught.value)


def models(root: type[BaseModel] = PlatformConfig) -> Iterator[type[BaseModel]]:
    """Every model reachable from ``root`` (through lists, mappings, unions)."""
    seen: set[type[BaseModel]] = set()
    todo = [root]
    while todo:
        model = todo.pop()
        if model in seen:
            continue
        seen.add(model)
        yield model
        for info in model.model_fields.values():
            todo.extend(_inner_models(info.annotation))


def _inner_models(annotation: Any) -> list[type[BaseModel]]:
    if isinstance(annotation, type) and issubclass(annotation, BaseModel):
        return [annotation]
    found: list[type[BaseModel]] = []
    for arg in typing.get_args(annotation):
        found.extend(_inner_models(arg))
    return found


FIELDS = [
    (model, name)
    for model in sorted(models(), key=lambda m: m.__name__)
    for name in model.model_fields
]


@pytest.mark.parametrize(("model", "name"), FIELDS, ids=[f"{m.__name__}.{n}" for m, n in FIELDS])
def test_every_keys_example_has_the_keys_shape(model: type[BaseModel], name: str) -> None:
    """The example a message shows for a key parses, as YAML, into a value of that key's type
    (a mapping's example names one of its keys): an example of the wrong shape would mislead."""
    info = model.model_fields[name]
    key = info.alias or name
    annotation = field_annotation(info)
    lines = example(Place(path=key, key=key, annotation=annotation, parent=model, item=False))
    assert 1 <= len(lines) <= 2, lines
    parsed = yaml.safe_load("\n".join(lines))
    assert list(parsed) == [key], lines
    value = parsed[key]
    inner = strip(info.annotation).annotation
    if isinstance(inner, type) and issubclass(inner, BaseModel):
        assert isinstance(value, dict), lines
        assert set(value) <= set(aliases(inner)), lines
        return
    members = typing.get_args(inner) if typing.get_origin(inner) in (typing.Union,) else ()
    if any(isinstance(m, type) and issubclass(m, BaseModel) for m in members):
        return
    if typing.get_origin(inner) is list:
        item = typing.get_args(inner)[0]
        if isinstance(item, type) and issubclass(item, BaseModel):
            assert isinstance(value, list), lines
            assert set(value[0]) <= set(aliases(item)), lines
            return
    TypeAdapter(annotation, config=ConfigDict(strict=True)).validate_python(value)


@pytest.mark.parametrize(
    ("where", "value", "shape", "first_line"),
    [
        (lambda r: r["tenants"][0], ["10.10.0.0/16"], "a mapping", "network:"),
        (lambda r: r["tenants"][0], {"a100": {"replicas": 1}}, "a list", "workerPools:"),
        (lambda r: r["management"], "kind", "a mapping", "kind:"),
        (lambda r: r["tenants"][0]["workerPools"][0], {"model": "A100-80GB"}, "a list", "cards:"),
        (lambda r: r["tenants"][0]["workerPools"][0], [1], "a whole number", "replicas:"),
    ],
    ids=[
        "list-for-map",
        "map-for-list",
        "scalar-for-object",
        "map-for-list-of-maps",
        "list-for-int",
    ],
)
def test_a_wrong_shape_says_which_shape_to_write_with_an_example(
    where: Any, value: Any, shape: str, first_line: str
) -> None:
    raw = stack_platform("lab")
    key = first_line.removesuffix(":")
    target = where(raw)
    target[key] = value
    message = refusal(raw)
    assert f"belongs; write that, like:\n      {first_line}" in message, message
    assert shape in message.split("belongs")[0].split("where")[1], message
    assert "Input should be" not in message
    assert "valid dictionary" not in message


def test_the_whole_platform_as_a_string_gets_the_programs_words() -> None:
    message = refusal("mode: lab")
    assert "platform: a string was written where a mapping" in message
    assert "platform:\n        mode: lab" in message


@pytest.mark.parametrize(
    ("where", "wrong", "meant"),
    [
        (lambda r: r, "kubernetesVersoin", "kubernetesVersion"),
        (lambda r: r["tenants"][0]["network"], "podCIDR", "podCidr"),
        (lambda r: r["tenants"][0]["network"], "pod_cidr_range", "podCidr"),
        (lambda r: r["tenants"][0]["workerPools"][0], "slotPerCard", "slotsPerCard"),
        (lambda r: r["tenants"][0]["dataStore"], "scheme", "schema"),
        (lambda r: r["management"]["kind"], "metalLbPoolSize", "metallbPoolSize"),
    ],
)
def test_an_unknown_key_names_the_key_probably_meant(where: Any, wrong: str, meant: str) -> None:
    raw = stack_platform("lab")
    target = where(raw)
    target[wrong] = target.pop(meant, "x")
    message = refusal(raw)
    assert f"{wrong}: unknown key: did you mean {meant}?" in message, message
    # One slip, one line: not also "required key is missing" for the key meant.
    assert "required key is missing" not in message, message


def test_a_key_indented_one_level_too_high_is_told_where_it_belongs() -> None:
    """An indentation slip that keeps valid YAML (newcomer review, mistake 8b): the key exists
    below, so the fix is to indent it there, not to remove it."""
    raw = stack_platform("lab")
    tenant = raw["tenants"][1]
    tenant["slotsPerCard"] = tenant["workerPools"][0].pop("slotsPerCard")
    message = refusal(raw)
    assert (
        "tenants[1].slotsPerCard: unknown key here: slotsPerCard belongs under "
        "tenants[1].workerPools[]: indent it there"
    ) in message, message
    assert "remove it" not in message, message


def test_an_unknown_key_with_no_likely_match_lists_the_keys() -> None:
    raw = stack_platform("lab")
    raw["tenants"][0]["network"]["zzz"] = 1
    assert "network.zzz: unknown key: remove it (the keys here are podCidr, serviceCidr)" in (
        refusal(raw)
    )


def test_a_size_in_another_unit_gets_its_mib_figure() -> None:
    raw = stack_platform("lab")
    raw["tenants"][1]["workloads"][0]["gpu"]["memoryMiB"] = "20Gi"
    assert "20Gi is 20480 MiB, so write 20480" in refusal(raw)


def test_did_you_mean_folds_case_and_separators() -> None:
    assert did_you_mean("PodCidr", ["podCidr", "serviceCidr"]) == "podCidr"
    assert did_you_mean("gpu_platform", ["gpu-platform"]) == "gpu-platform"
    assert did_you_mean("zzzz", ["podCidr"]) is None


@pytest.mark.parametrize(
    ("key", "fragment"),
    [
        ("gpu-platfrom:platform", "did you mean gpu-platform:platform?"),
        ("gpuplatform:platform", "did you mean gpu-platform:platform?"),
        ("gpu-platform:platfrom", "did you mean gpu-platform:platform?"),
        ("gpu-platform:Platform", "did you mean gpu-platform:platform?"),
        ("gpu-platform:managementKubeconfg", "did you mean gpu-platform:managementKubeconfig?"),
        ("gpu-platform:somethingElse", "remove it with `pulumi config rm somethingElse`"),
    ],
)
def test_a_misspelled_config_key_names_the_key_meant(key: str, fragment: str) -> None:
    (problem,) = config_key_problems(
        ["gpu-platform:platform", key], "gpu-platform", ["platform", "managementKubeconfig"]
    )
    assert problem.startswith(f"{key}: "), problem
    assert fragment in problem, problem


def test_provider_and_unrelated_namespaces_are_left_alone() -> None:
    keys = ["gpu-platform:platform", "kubernetes:kubeconfig", "pulumi:tags", "aws:region"]
    assert config_key_problems(keys, "gpu-platform", ["platform"]) == []
