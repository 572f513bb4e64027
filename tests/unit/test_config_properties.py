"""Property-based proof that every wrong value is refused, naming its key (issue 26, item 2).

The models are walked generically (``tests.support.config_walk``): every key of every model, at a
place in a valid lab or prod stack, gets values that are wrong for its annotation and
constraints — another shape (a list where a mapping belongs, a mapping where a list belongs, a
scalar where either belongs), another YAML type (true or 2.0 for a whole number, a number for a
string), a number out of its bounds, a choice that is not offered, a string that is nothing in
particular — and each must be refused by the validation phase with a ``pulumi.RunError`` that
names the key. A key another change adds is covered without a line here; a model that neither
rich stack reaches fails ``test_every_key_of_every_model_is_reached``.

Bounded for CI: hypothesis derandomized, 12 examples per key (about 2,400 in all, 30 s on a
busy 2-CPU machine), every wrong shape of every key (about 630 cases, 15 s), and every 15th
shape case through the program under the mocks (42 evaluations, about 100 s).
"""

from __future__ import annotations

import typing
from typing import Any

import annotated_types
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from pulumi import RunError

from components.config import ConfigError, GpuDriver, Workload
from components.config.annotations import strip
from components.stack import parse_stack
from tests.support.config_walk import (
    PLATFORM_KEY,
    Target,
    all_fields,
    bounds,
    key_text,
    rich_base,
    scalar_kind,
    shape_of,
    targets,
    with_value,
    wrong_shapes,
)
from tests.support.harness import evaluate, load_stack_config

STACKS = ("lab", "prod")
BASES = {stack: rich_base(stack) for stack in STACKS}
TARGETS = [target for stack in STACKS for target in targets(stack)]
# Items whose text is the user's own (a command's words, a package repository file's content):
# any string is right there, so only wrong types and shapes are generated for them.
FREE_TEXT = frozenset({(Workload, "command"), (GpuDriver, "package_repositories")})
EXAMPLES_PER_KEY = 12
PROPERTY_SETTINGS = settings(
    max_examples=EXAMPLES_PER_KEY,
    derandomize=True,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.filter_too_much],
)


def refusal(raw: Any) -> str:
    """The validation phase's message for ``raw``; fails the test when it is accepted or the
    failure is not a RunError (the CLI would print a traceback)."""
    with pytest.raises(ConfigError) as caught:
        parse_stack(raw)
    assert isinstance(caught.value, RunError)
    return str(caught.value)


def names_key(message: str, target: Target) -> bool:
    """The message names the key: its whole path, or the path of the mapping that holds it and
    the key's own name (a check across a model's keys reports at the model), or the path with
    the list indices left out (a check across the tenants)."""
    path = target.path
    if target.key in message:
        return True
    leaf_at = max(i for i, part in enumerate(path) if isinstance(part, str))
    if target.item:
        leaf_at = max(i for i, part in enumerate(path[:-1]) if isinstance(part, str))
    leaf, parent = str(path[leaf_at]), key_text(path[:leaf_at])
    if (not parent or parent in message) and leaf in message:
        return True
    collapsed = "".join("[]" if isinstance(p, int) else f".{p}" for p in path).lstrip(".")
    return collapsed in message


def _assert_refused(target: Target, value: Any) -> None:
    message = refusal(with_value(BASES[target.stack], target.path, value))
    assert names_key(message, target), f"{target.id} = {value!r}:\n{message}"


# ------------------------------------------------------------------------ the walk itself


@pytest.mark.parametrize("stack", STACKS)
def test_the_rich_stacks_are_valid(stack: str) -> None:
    """Every wrong value is the only thing wrong with the config it is put into."""
    parse_stack(BASES[stack])


def test_every_key_of_every_model_is_reached() -> None:
    reached = {(target.model, target.field) for target in TARGETS}
    missing = sorted(f"{model.__name__}.{name}" for model, name in all_fields() - reached)
    assert not missing, (
        "keys no rich stack reaches (give their model a valid place in "
        f"tests/support/config_walk.rich_base): {missing}"
    )


# ------------------------------------------------------------------------- wrong shapes

SHAPE_CASES = [(target, value) for target in TARGETS for value in wrong_shapes(target)]


@pytest.mark.parametrize(
    ("target", "value"),
    SHAPE_CASES,
    ids=[f"{target.id}={type(value).__name__}" for target, value in SHAPE_CASES],
)
def test_a_wrong_shape_anywhere_is_refused_naming_the_key(target: Target, value: Any) -> None:
    _assert_refused(target, value)


# ------------------------------------------------------------------------- wrong values

_JUNK = st.builds(
    lambda head, mark, tail: head + mark + tail,
    st.text("abcxyz019", max_size=4),
    st.sampled_from([" ", "!", "?", "#", "<", ">", "{", "}", " x ", "\t", "é"]),
    st.text("abcxyz019", max_size=4),
)
_FLOATS = st.floats(allow_nan=False, allow_infinity=False)


def _min_length(target: Target) -> int:
    for constraint in target.info.metadata:
        if isinstance(constraint, annotated_types.MinLen):
            return int(constraint.min_length)
    return 0


def wrong_values(target: Target) -> st.SearchStrategy[Any]:
    """Values wrong for the key's annotation and constraints."""
    options: list[st.SearchStrategy[Any]] = []
    shapes = wrong_shapes(target)
    if shapes:
        options.append(st.sampled_from(shapes))
    kind = scalar_kind(target.annotation)
    free = (target.model, target.field) in FREE_TEXT
    if kind == "int":
        low, high = bounds(target.annotation)
        options += [st.booleans(), _FLOATS, st.integers(-5, 500).map(str)]
        if low is not None:
            options.append(st.integers(max_value=low - 1))
        if high is not None:
            options.append(st.integers(min_value=high + 1))
    elif kind == "bool":
        options += [st.integers(), _FLOATS, st.sampled_from(["yes", "no", "true", "on", "1"])]
    elif kind == "str":
        options += [st.integers(), st.booleans(), _FLOATS]
        if not free:
            options.append(_JUNK)
    elif kind == "literal":
        inner = strip(target.annotation).annotation
        allowed = typing.get_args(inner)
        options += [
            st.integers(),
            st.booleans(),
            st.text(max_size=12).filter(lambda text: text not in allowed),
            st.sampled_from([str(a).swapcase() for a in allowed if str(a).swapcase() != a]),
        ]
    elif kind == "int|str":
        options += [st.booleans(), _FLOATS, _JUNK, st.integers(max_value=-1)]
    if _min_length(target) and not target.item:
        options.append(st.just([]))
    return st.one_of(options)


VALUE_TARGETS = TARGETS


@pytest.mark.parametrize("target", VALUE_TARGETS, ids=[t.id for t in VALUE_TARGETS])
def test_a_wrong_value_for_any_key_is_refused_naming_the_key(target: Target) -> None:
    @PROPERTY_SETTINGS
    @given(value=wrong_values(target))
    def check(value: Any) -> None:
        _assert_refused(target, value)

    check()


# --------------------------------------------------------- through the program, sampled

# Every 15th shape case (both stacks, every container and scalar kind) through __main__.py under
# the mocks: nothing registered, a RunError, the key named. The rich bases name secrets the
# shipped files do not hold; the harness gives every secret key a placeholder.
PROGRAM_CASES = SHAPE_CASES[::15]


@pytest.mark.parametrize(
    ("target", "value"),
    PROGRAM_CASES,
    ids=[f"{target.id}={type(value).__name__}" for target, value in PROGRAM_CASES],
)
def test_the_program_registers_nothing_for_a_wrong_shape(target: Target, value: Any) -> None:
    config = dict(load_stack_config(target.stack))
    config[PLATFORM_KEY] = with_value(BASES[target.stack], target.path, value)
    recording = evaluate(target.stack, preview=False, config=config)
    assert recording.resources == [], f"{target.id}: registered before failing"
    assert recording.run_error, recording.error
    assert recording.error is not None
    assert names_key(recording.error, target), recording.error


def test_each_wrong_value_kind_is_generated() -> None:
    """The generator is not vacuous: every scalar kind of the models is exercised."""
    kinds: set[str | None] = {scalar_kind(target.annotation) for target in VALUE_TARGETS}
    assert kinds >= {"int", "bool", "str", "literal", "int|str"}
    shapes = {shape_of(target.annotation) for target in TARGETS}
    assert shapes == {"mapping", "list", "scalar"}
    assert any(_min_length(target) for target in TARGETS)


# ------------------------------------------- what the checks the walk found must keep taking

TAKEN = [
    (("tenants", 0, "workloads", 0, "image"), "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"),
    (("tenants", 0, "workloads", 0, "image"), "localhost:5000/team/app@sha256:" + "a" * 64),
    (("dataStores", 0, "endpoints", 0), "10.0.0.5:5432"),
    (("dataStores", 0, "endpoints", 0), "[fd00::5]:2379"),
    (("dataStores", 0, "credentialsConfigKey"), "shared.postgres-credentials_v2"),
    (("tenants", 0, "controlPlane", "resources", "apiServer", "requests", "cpu"), "1.5"),
    (("tenants", 0, "controlPlane", "resources", "apiServer", "requests", "cpu"), "100m"),
    (("tenants", 0, "controlPlane", "resources", "apiServer", "limits", "memory"), "2G"),
    (("tenants", 0, "controlPlane", "admissionControllers", 2), "NodeRestriction"),
    (("tenants", 0, "workerPools", 0, "cards", 0, "model"), "RTX-6000_Ada.48GB"),
    (("management", "kind", "nodeImage"), "registry.example.internal:5000/kindest/node:v1.35.0"),
    (("management", "kind", "dockerNetwork"), "kind_lab.2"),
    (("management", "kind", "podSubnet"), "fd00:10:244::/56"),
]


@pytest.mark.parametrize(("path", "value"), TAKEN, ids=[f"{key_text(p)}={v}" for p, v in TAKEN])
def test_values_users_write_are_still_taken(path: tuple[Any, ...], value: Any) -> None:
    raw = BASES["lab"]
    if path[-1] == 2:  # appended to the list
        raw = with_value(raw, path[:-1], [*_at(raw, path[:-1]), value])
    else:
        raw = with_value(raw, path, value)
    parse_stack(raw)


def _at(raw: Any, path: tuple[Any, ...]) -> Any:
    for part in path:
        raw = raw[part]
    return raw
