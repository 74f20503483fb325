"""Schema.errors and is_valid: readable messages, most relevant first, and never an exception."""

from __future__ import annotations

from typing import Any

import pytest

from condukt.schema import Schema

MONEY = Schema.of({"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.01}}})
TREE = Schema.of({"$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}}, "$ref": "#/$defs/node"})


class Unprintable:
    def __repr__(self) -> str:
        raise RuntimeError("no repr for you")

    __str__ = __repr__


def nested(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_messages_have_a_path_and_the_most_relevant_comes_first() -> None:
    schema = Schema.of(
        {
            "type": "object",
            "properties": {
                "verdict": {"enum": ["approve", "reject"]},
                "tags": {"type": "array", "items": {"type": "string"}},
            },
            "required": ["verdict", "summary"],
        }
    )
    errors = schema.errors({"verdict": "maybe", "tags": ["ok", 3]})
    assert errors[0] == "'summary' is a required property"
    assert set(errors[1:]) == {
        "verdict: 'maybe' is not one of ['approve', 'reject']",
        "tags/1: 3 is not of type 'string'",
    }
    assert schema.errors({"verdict": "maybe", "tags": ["ok", 3]}, limit=1) == ["'summary' is a required property"]


def test_an_infinite_number_against_multiple_of_is_an_error_not_a_crash() -> None:
    # json.loads('{"x": 1e999}') gives inf, and jsonschema's multipleOf raises OverflowError on it.
    assert MONEY.is_valid({"x": 1.25})
    assert not MONEY.is_valid({"x": float("inf")})
    assert MONEY.errors({"x": float("inf")}) == ["x: inf is not a finite number"]
    assert MONEY.errors({"x": float("nan")}) == ["x: nan is not a finite number"]
    assert MONEY.errors({"x": 1.255}) == ["x: 1.255 is not a multiple of 0.01"]


def test_a_value_nested_too_deeply_is_an_error_not_a_crash() -> None:
    assert TREE.is_valid(nested(10))
    deep = nested(100_000)
    assert not TREE.is_valid(deep)
    assert TREE.errors(deep) == ["the value is nested too deeply to validate"]


def test_a_cyclic_value_is_an_error_not_a_crash() -> None:
    cycle: list[Any] = []
    cycle.append(cycle)
    assert not TREE.is_valid(cycle)
    assert TREE.errors(cycle) == ["the value is nested too deeply to validate"]


def test_values_whose_repr_raises_are_described_safely() -> None:
    schema = Schema.of({"type": "object", "properties": {"when": {"type": "string"}}})
    assert not schema.is_valid({"when": Unprintable()})
    assert schema.errors({"when": Unprintable()}) == ["when: <unprintable Unprintable> is not JSON data"]
    closed = Schema.of({"type": "object", "additionalProperties": False})
    assert closed.errors({Unprintable(): 1}) == ["key <unprintable Unprintable> is not a string"]


def test_long_values_are_shortened_in_messages() -> None:
    schema = Schema.of({"type": "object", "properties": {"name": {"type": "integer"}}})
    (message,) = schema.errors({"name": "x" * 100_000})
    assert message.startswith("name: 'xxxx") and message.endswith("is not of type 'integer'")
    assert len(message) < 200


def test_limit_bounds_the_list_and_huge_values_stay_cheap() -> None:
    schema = Schema.of({"type": "array", "items": {"type": "integer"}})
    errors = schema.errors(["a"] * 100_000, limit=3)
    assert len(errors) == 3
    assert all(e.endswith(": 'a' is not of type 'integer'") for e in errors)


@pytest.mark.parametrize(
    "value",
    [float("inf"), nested(100_000), Unprintable(), {1: 2}, {"a": {Unprintable()}}, b"bytes", object()],
    ids=["inf", "deep", "unprintable", "int-key", "set", "bytes", "object"],
)
def test_is_valid_and_errors_never_raise(value: Any) -> None:
    for schema in (MONEY, TREE, Schema.of({"type": "object", "properties": {"a": {"type": "string"}}})):
        valid = schema.is_valid(value)
        errors = schema.errors(value)
        assert isinstance(valid, bool)
        assert (errors == []) == valid
        assert all(isinstance(e, str) and e for e in errors)
