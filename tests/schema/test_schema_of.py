"""Schema.of: every kind of spec, its JSON Schema, caching, and the errors for what is not a schema."""

from __future__ import annotations

import pickle
from types import MappingProxyType
from typing import Any, Literal

import pytest

from condukt.schema import Schema, is_structured_type
from condukt.schema._schema import CACHE_SIZE

from .models import (
    DICT_REVIEW,
    INVALID,
    SPECS,
    VALID,
    AttrsReview,
    DataReview,
    DictReview,
    PydanticReview,
)


@pytest.mark.parametrize("spec", SPECS, ids=lambda s: getattr(s, "__name__", "dict"))
def test_every_kind_of_spec_validates_the_same_data(spec: Any) -> None:
    schema = Schema.of(spec)
    assert schema.json["type"] == "object"
    assert schema.is_valid(VALID)
    assert schema.errors(VALID) == []
    assert not schema.is_valid(INVALID)
    assert not schema.is_valid("not an object")
    errors = schema.errors(INVALID)
    assert any("'maybe' is not one of" in e for e in errors), errors
    assert any(e.startswith("comments/0/line: 'three'") for e in errors), errors


@pytest.mark.parametrize("spec", SPECS[1:], ids=lambda s: s.__name__)
def test_classes_are_structured_and_become_their_target(spec: type) -> None:
    assert is_structured_type(spec)
    assert Schema.of(spec).target is spec


def test_a_dict_schema_has_no_target_and_is_copied() -> None:
    spec = {"type": "object", "properties": {"q": {"type": "string"}}, "required": ["q"]}
    schema = Schema.of(spec)
    assert schema.target is None
    assert schema.json == spec and schema.json is not spec
    spec["required"] = []  # the caller changing its dict afterwards changes nothing
    assert not schema.is_valid({})
    assert list(schema.json) == ["type", "properties", "required"]  # the caller's order, as the model sees it


def test_any_mapping_is_a_schema_dict() -> None:
    schema = Schema.of(MappingProxyType({"type": "object", "properties": MappingProxyType({"q": {"type": "string"}})}))
    assert schema.json == {"type": "object", "properties": {"q": {"type": "string"}}}
    assert type(schema.json["properties"]) is dict
    assert not schema.is_valid({"q": 1})


def test_derived_schemas_keep_descriptions_and_are_closed() -> None:
    for spec in (AttrsReview, DataReview, PydanticReview):
        schema = Schema.of(spec).json
        assert schema["description"] == "A code review."
        comment = schema["properties"]["comments"]["items"]
        assert comment["properties"]["text"]["description"] == "What to change"
        assert "$ref" not in repr(schema)  # pydantic's $defs are inlined
    for spec in (AttrsReview, DataReview, DictReview):  # pydantic models say for themselves (model_config)
        assert Schema.of(spec).errors({"verdict": "approve", "comments": [], "extra": 1}) == [
            "Additional properties are not allowed ('extra' was unexpected)"
        ]
    typed = Schema.of(DictReview).json
    assert typed["required"] == ["verdict", "comments"]  # NotRequired, even under `from __future__ import annotations`
    assert typed["additionalProperties"] is False


def test_plain_types_are_schemas_too() -> None:
    assert Schema.of(int).json == {"type": "integer"}
    assert Schema.of(list[str]).is_valid(["a"]) and not Schema.of(list[str]).is_valid([1])
    assert Schema.of(Literal["a", "b"]).errors("c") == ["'c' is not one of ['a', 'b']"]
    assert Schema.of(int | None).is_valid(None)


def test_the_same_class_or_an_equal_dict_gives_the_same_schema() -> None:
    assert Schema.of(AttrsReview) is Schema.of(AttrsReview)
    a = {"type": "object", "properties": {"q": {"type": "string"}}}
    b = {"properties": {"q": {"type": "string"}}, "type": "object"}
    assert Schema.of(a) is Schema.of(b)
    assert Schema.of(list[int]) is Schema.of(list[int])
    assert Schema.of(Schema.of(a)) is Schema.of(a)


def test_the_cache_is_bounded() -> None:
    first = Schema.of({"const": "first"})
    for i in range(CACHE_SIZE):
        Schema.of({"const": i})
    latest = Schema.of({"const": CACHE_SIZE - 1})
    assert Schema.of({"const": CACHE_SIZE - 1}) is latest
    assert Schema.of({"const": "first"}) is not first  # evicted, rebuilt
    assert Schema.of({"const": "first"}).is_valid("first")


@pytest.mark.parametrize(
    ("spec", "match"),
    [
        (
            {"type": "object", "properties": {"x": {"type": "nope"}}},
            r"invalid JSON Schema at properties/x/type: 'nope'",
        ),
        ({"type": "object", "required": "x"}, r"invalid JSON Schema at required: 'x' is not of type 'array'"),
        ({"minimum": float("inf")}, "not JSON data"),
        ({"enum": [object()]}, "not JSON data"),
    ],
)
def test_an_invalid_schema_dict_is_a_value_error_naming_the_problem(spec: dict[str, Any], match: str) -> None:
    with pytest.raises(ValueError, match=match):
        Schema.of(spec)


def test_a_schema_nested_too_deeply_is_a_value_error() -> None:
    deep: dict[str, Any] = {"type": "array"}
    for _ in range(100_000):
        deep = {"type": "array", "items": deep}
    with pytest.raises(ValueError, match="nested too deeply"):
        Schema.of(deep)


class Plain:
    pass


@pytest.mark.parametrize("spec", [None, 42, "int", ["a"], Plain, list[Plain]])
def test_anything_else_is_a_type_error_naming_what_is_accepted(spec: Any) -> None:
    with pytest.raises(TypeError, match="a schema is a JSON Schema dict, an attrs class, a dataclass, a TypedDict"):
        Schema.of(spec)


def test_a_schema_pickles_by_rebuilding() -> None:
    for spec in (DICT_REVIEW, AttrsReview):
        schema = Schema.of(spec)
        assert pickle.loads(pickle.dumps(schema)) is schema  # same process: the cache answers
