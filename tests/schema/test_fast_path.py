"""The fast path never disagrees with jsonschema on what is valid, and simple schemas get one."""

from __future__ import annotations

import itertools
from typing import Any

import jsonschema
import pytest

from condukt.schema import Schema
from condukt.schema._fast import compile_check

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
    # Keywords for another type than the one required, and for several types.
    {"type": "integer", "minLength": 3, "maximum": 5},
    {"type": ["string", "integer", "array"], "minLength": 2, "minimum": 1, "maxItems": 1, "items": {"type": "string"}},
    {"enum": ["a", "b"], "minLength": 1},
    {"type": ["number", "null"], "minimum": 0, "exclusiveMaximum": 10},
    {"type": ["boolean", "number"]},
    {"type": ["integer", "string"], "maxLength": 1, "maximum": 3},
    {"type": "number", "exclusiveMinimum": 0, "maximum": 1},
    {"type": "array", "minItems": 1, "items": {"type": "integer", "minimum": 2}},
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
    10, 10.0, 3.0, 3.5, -0.5, 0.0, "ab", [2, 3.0], [2, 1], float("inf"), float("-inf"), float("nan"),
]  # fmt: skip


@pytest.mark.parametrize("schema", SCHEMAS)
def test_fast_path_agrees_with_jsonschema(schema: dict[str, Any]) -> None:
    compiled = Schema.of(schema)
    fast = compile_check(schema)
    reference = jsonschema.validators.validator_for(schema)(schema)
    for value in VALUES:
        assert compiled.is_valid(value) == reference.is_valid(value), value
        if fast is not None and fast(value):
            assert reference.is_valid(value), value  # the fast path only ever says "certainly valid"


def test_simple_schemas_get_a_fast_path_and_unsupported_ones_do_not() -> None:
    assert compile_check(SCHEMAS[0]) is not None
    assert compile_check(SCHEMAS[1]) is not None
    assert compile_check(SCHEMAS[2]) is None


def test_the_fast_path_accepts_every_valid_value_of_a_simple_schema() -> None:
    # Valid values must not fall through to jsonschema: that is what makes tool calls cheap.
    fast = compile_check(SCHEMAS[1])
    assert fast is not None
    reference = jsonschema.validators.validator_for(SCHEMAS[1])(SCHEMAS[1])
    for value in VALUES:
        if reference.is_valid(value):
            assert fast(value), value


def test_values_cover_every_type() -> None:
    kinds = {type(v) for v in VALUES}
    assert kinds >= {type(None), bool, int, float, str, list, dict}
    assert len(list(itertools.product(SCHEMAS, VALUES))) > 100
