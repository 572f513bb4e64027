"""``components.config.annotations``: what the messages, the reference and the model walk read
of a field's type."""

from __future__ import annotations

from typing import Annotated, Literal

import annotated_types
from pydantic import BaseModel, Field

from components.config import PlatformConfig, Tenant, WorkerPool
from components.config.annotations import field_annotation, is_model, models_in, strip


class _Inner(BaseModel):
    size: int = 1


class _Outer(BaseModel):
    count: int = Field(default=1, ge=1, le=8)
    inner: _Inner | None = None
    inners: list[_Inner] = []


def test_strip_unwraps_annotated_and_optional_keeping_constraints() -> None:
    stripped = strip(Annotated[int, annotated_types.Ge(1)] | None)
    assert stripped.annotation is int
    assert stripped.metadata == (annotated_types.Ge(1),)
    assert stripped.optional is True
    plain = strip(str)
    assert (plain.annotation, plain.metadata, plain.optional) == (str, (), False)


def test_strip_leaves_a_union_of_several_members_whole() -> None:
    stripped = strip(int | str | None)
    assert stripped.annotation == int | str | None  # as written: the callers pick a member
    assert stripped.optional is True
    literal = strip(Literal["a", "b"])
    assert literal.annotation == Literal["a", "b"]


def test_models_are_found_at_any_depth() -> None:
    assert is_model(_Inner)
    assert not is_model(int)
    assert not is_model(list[_Inner])
    assert models_in(list[_Inner] | None) == [_Inner]
    assert models_in(dict[str, _Inner]) == [_Inner]
    assert models_in(int) == []
    tenants = PlatformConfig.model_fields["tenants"].annotation
    assert Tenant in models_in(tenants)
    assert WorkerPool in models_in(Tenant.model_fields["worker_pools"].annotation)


def test_field_annotation_puts_the_constraints_back() -> None:
    info = _Outer.model_fields["count"]
    assert info.annotation is int  # pydantic moved the bounds into info.metadata
    stripped = strip(field_annotation(info))
    assert stripped.annotation is int
    assert {type(m) for m in stripped.metadata} == {annotated_types.Ge, annotated_types.Le}
    assert field_annotation(_Outer.model_fields["inner"]) == _Inner | None
