"""The compiled fast path never disagrees with jsonschema on what is valid."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from condukt.tools._schema_check import compile_schema

SCHEMAS: list[dict[str, Any]] = [
    {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]},
    {
        "type": "object",
        "properties": {
            "path": {"type": "string", "minLength": 1, "maxLength": 5},
            "offset": {"type": "integer", "minimum": 1},
            "ratio": {"type": "number", "exclusiveMinimum": 0, "exclusiveMaximum": 1},
            "flag": {"type": "boolean"},
            "mode": {"enum": ["a", "b", 1]},
            "tags": {"type": "array", "items": {"type": "string"}, "minItems": 1, "maxItems": 2},
            "maybe": {"type": ["string", "null"]},
            "fixed": {"const": True},
        },
        "required": ["path"],
        "additionalProperties": False,
    },
    # Unsupported keywords: compiled without a fast path, jsonschema decides.
    {"type": "object", "properties": {"a": {"pattern": "^x"}}, "oneOf": [{"required": ["a"]}]},
]

VALUES: list[Any] = [
    None, True, False, 0, 1, 1.0, 2.5, -1, "", "x", "abcdef", [], ["a"], ["a", "b", "c"], [1], {},
    {"x": 1}, {"x": 1.0}, {"x": True}, {"x": "1"}, {"y": 1},
    {"path": "a"}, {"path": ""}, {"path": "abcdef"}, {"path": "a", "offset": 0}, {"path": "a", "offset": 3},
    {"path": "a", "ratio": 0}, {"path": "a", "ratio": 0.5}, {"path": "a", "flag": 1}, {"path": "a", "flag": True},
    {"path": "a", "mode": "a"}, {"path": "a", "mode": 1.0}, {"path": "a", "mode": True}, {"path": "a", "mode": "c"},
    {"path": "a", "tags": []}, {"path": "a", "tags": ["t"]}, {"path": "a", "tags": [1]},
    {"path": "a", "maybe": None}, {"path": "a", "maybe": 3}, {"path": "a", "fixed": True},
    {"path": "a", "fixed": 1}, {"path": "a", "extra": 1}, {"a": "xyz"}, {"a": "abc"},
]  # fmt: skip


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fast_path_agrees_with_jsonschema(schema: dict[str, Any]) -> None:
    compiled = compile_schema(schema)
    reference = jsonschema.validators.validator_for(schema)(schema)
    for value in VALUES:
        assert compiled.is_valid(value) == reference.is_valid(value), value
        if compiled.fast is not None and compiled.fast(value):
            assert reference.is_valid(value), value  # the fast path only ever says "certainly valid"


def test_simple_schemas_get_a_fast_path_and_unsupported_ones_do_not() -> None:
    assert compile_schema(SCHEMAS[0]).fast is not None
    assert compile_schema(SCHEMAS[1]).fast is not None
    assert compile_schema(SCHEMAS[2]).fast is None


def test_equal_schemas_share_one_compilation() -> None:
    a = {"type": "object", "properties": {"q": {"type": "string"}}}
    b = {"properties": {"q": {"type": "string"}}, "type": "object"}
    assert compile_schema(a) is compile_schema(b)


def test_an_invalid_schema_is_refused() -> None:
    with pytest.raises(jsonschema.SchemaError):
        compile_schema({"type": "object", "properties": {"x": {"type": "nope"}}})


def test_values_cover_every_type() -> None:
    kinds = {type(v) for v in VALUES}
    assert kinds >= {type(None), bool, int, float, str, list, dict}
    assert len(list(itertools.product(SCHEMAS, VALUES))) > 100
