"""schema_for: JSON Schemas derived from types, including TypedDicts and pydantic models."""

from __future__ import annotations

import dataclasses
from typing import Annotated, Any, Optional, Required, TypedDict

import attrs
import pydantic
import pytest

from condukt.schema import is_structured_type, schema_for

from .models import DictComment, PydanticComment, PydanticReview


class Partial(TypedDict, total=False):
    name: Required[str]
    note: str


class Child(DictComment):
    extra: bool


@attrs.frozen
class Node:
    value: int
    children: list[Node]


@dataclasses.dataclass
class Holder:
    thing: Any
    label: Annotated[str, "ignored metadata"] = ""
    hidden: int = dataclasses.field(default=0, init=False)


class Tree(pydantic.BaseModel):
    value: int
    children: list[Tree] = []


def test_typed_dicts_follow_totality_and_inheritance() -> None:
    partial = schema_for(Partial)
    assert partial["required"] == ["name"]
    assert set(partial["properties"]) == {"name", "note"}
    child = schema_for(Child)
    assert child["required"] == ["line", "text", "extra"]
    assert child["properties"]["extra"] == {"type": "boolean"}


def test_a_pydantic_model_uses_pydantic_s_schema_with_references_inlined() -> None:
    original = PydanticReview.model_json_schema()
    assert set(original["$defs"]) == {"PydanticComment", "Priority"}
    schema = schema_for(PydanticReview)
    assert "$defs" not in schema and "$ref" not in repr(schema)
    assert schema["properties"]["comments"]["items"] == original["$defs"]["PydanticComment"]
    assert schema["properties"]["priority"] == {**original["$defs"]["Priority"], "default": "low"}
    assert {k: v for k, v in schema.items() if k != "properties"} == {
        k: v for k, v in original.items() if k not in ("properties", "$defs")
    }
    assert schema_for(Optional[PydanticComment])["anyOf"][0] == PydanticComment.model_json_schema()


def test_a_recursive_pydantic_model_keeps_its_definitions_at_the_top_only() -> None:
    assert schema_for(Tree) == Tree.model_json_schema()
    with pytest.raises(TypeError, match="Tree inside another type: it is recursive"):
        schema_for(list[Tree])


def test_a_class_that_contains_itself_is_refused_clearly() -> None:
    with pytest.raises(TypeError, match=r"Node.children: cannot derive a JSON Schema for Node: it contains itself"):
        schema_for(Node)


def test_an_unsupported_field_type_is_named_with_its_field() -> None:
    @dataclasses.dataclass
    class Bad:
        when: complex

    with pytest.raises(TypeError, match=r"Bad.when: cannot derive a JSON Schema for <class 'complex'>"):
        schema_for(Bad)


def test_annotated_is_unwrapped_and_fields_not_in_the_constructor_are_left_out() -> None:
    schema = schema_for(Holder)
    assert schema["properties"] == {"thing": {}, "label": {"type": "string"}}
    assert schema["required"] == ["thing"]


def test_structured_types_are_classes_with_fields() -> None:
    for tp in (Partial, Node, Holder, Tree, PydanticReview):
        assert is_structured_type(tp)
    for tp in (dict, int, list[int], pydantic.BaseModel, Partial(name="x"), None):
        assert not is_structured_type(tp)
