"""Tool parameters as classes, and argument validation that never takes the agent down."""

from __future__ import annotations

import dataclasses
import json
import re
from pathlib import Path
from typing import Any, Literal, NotRequired, TypedDict

import attrs
import pydantic
import pytest

import condukt
from condukt.schema import Schema
from condukt.testing import call

from .helpers import through_agent


@attrs.frozen
class AttrsArgs:
    """Where to look."""

    city: str
    unit: Literal["C", "F"] = "C"


@dataclasses.dataclass
class DataArgs:
    city: str
    unit: Literal["C", "F"] = "C"


class DictArgs(TypedDict):
    city: str
    unit: NotRequired[Literal["C", "F"]]


class PydanticArgs(pydantic.BaseModel):
    city: str
    unit: Literal["C", "F"] = "C"


def weather_tool(params: type) -> type[condukt.Tool]:
    class Weather(condukt.Tool):
        name = "weather"
        description = "Gets the weather."
        parameters = params

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            return {"args": args, "is_dict": type(args) is dict, "as": type(Schema.of(params).convert(args)).__name__}

    return Weather


@pytest.mark.parametrize("params", [AttrsArgs, DataArgs, DictArgs, PydanticArgs], ids=lambda p: p.__name__)
async def test_parameters_may_be_a_class(params: type, tmp_path: Path) -> None:
    tool = weather_tool(params)
    calls = [call("weather", {"city": "Paris"}), call("weather", {"city": 5})]
    (good, bad), model = await through_agent([tool], calls, tmp_path)
    sent = model.requests[0].tools[0].parameters
    assert sent == Schema.of(params).json and sent["type"] == "object"
    assert set(sent["properties"]) == {"city", "unit"} and sent["required"] == ["city"]
    converted = "dict" if params is DictArgs else params.__name__  # a TypedDict instance is a dict
    assert not good.is_error and good.text == f'{{"args": {{"city": "Paris"}}, "is_dict": true, "as": "{converted}"}}'
    assert bad.is_error and bad.text == "Error: invalid arguments for weather: city: 5 is not of type 'string'"


class Money(condukt.Tool):
    name = "pay"
    description = "Pays an amount."
    parameters = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.01}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return f"paid {args['x']}"


class Tree(condukt.Tool):
    name = "tree"
    description = "Takes a tree."
    parameters = {
        "$defs": {"node": {"type": "array", "items": {"$ref": "#/$defs/node"}}},
        "type": "object",
        "properties": {"root": {"$ref": "#/$defs/node"}},
    }

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "ok"


def deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


def test_validate_never_raises() -> None:
    assert Money().validate({"x": 1.5}) is None
    assert Money().validate(json.loads('{"x": 1e999}')) == "x: inf is not a finite number"  # as a provider parses it
    assert Money().validate({"x": 1.001}) == "x: 1.001 is not a multiple of 0.01"
    assert Tree().validate({"root": deep(5)}) is None
    assert Tree().validate({"root": deep(100_000)}) == "the value is nested too deeply to validate"


async def test_arguments_jsonschema_cannot_handle_are_error_results_and_the_agent_goes_on(tmp_path: Path) -> None:
    calls = [call("pay", {"x": float("inf")}), call("tree", {"root": deep(100_000)}), call("pay", {"x": 2.5})]
    (money, tree, fine), _ = await through_agent([Money, Tree], calls, tmp_path)
    assert money.is_error and money.text == "Error: invalid arguments for pay: x: inf is not a finite number"
    assert tree.is_error and "nested too deeply" in tree.text
    assert not fine.is_error and fine.text == "paid 2.5"


class NotASchema(condukt.Tool):
    name = "bad"
    description = "Has a class without fields as parameters."
    parameters = Path

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return ""


def test_parameters_that_are_not_a_schema_fail_the_check() -> None:
    expected = f"tool 'bad': invalid parameters schema: cannot use {Path!r} as a schema"
    with pytest.raises(ValueError, match=re.escape(expected)):
        NotASchema().check()
    assert NotASchema().validate({}) == "the tool's parameters are not a usable schema: TypeError"


@condukt.tool
def book(where: DictArgs, who: PydanticArgs, extra: list[PydanticArgs] | None = None) -> dict[str, Any]:
    """Books a trip.

    Parameters
    ----------
    where : DictArgs
        The destination.
    who : PydanticArgs
        The traveller's home,
        as a city.
    """
    return {
        "where": where,
        "who": type(who).__name__,
        "unit": who.unit,
        "extra": [type(e).__name__ for e in extra or []],
    }


async def test_function_tools_convert_typed_dict_and_pydantic_parameters(tmp_path: Path) -> None:
    properties = book.parameters["properties"]
    assert properties["where"]["description"] == "The destination."
    assert properties["who"]["description"] == "The traveller's home, as a city."
    assert book.description == "Books a trip."
    arguments = {"where": {"city": "Oslo"}, "who": {"city": "Lyon", "unit": "F"}, "extra": [{"city": "Rome"}]}
    (result,), _ = await through_agent([book], call("book", arguments), tmp_path)
    assert not result.is_error, result.text
    assert result.text == '{"where": {"city": "Oslo"}, "who": "PydanticArgs", "unit": "F", "extra": ["PydanticArgs"]}'


@attrs.frozen
class Positive:
    n: int = attrs.field(validator=attrs.validators.gt(0))


async def test_a_parameter_that_validates_but_does_not_convert_is_an_error_result(tmp_path: Path) -> None:
    @condukt.tool
    def count(what: Positive) -> int:
        """Counts."""
        return what.n

    (result,), _ = await through_agent([count], call("count", {"what": {"n": -1}}), tmp_path)
    assert result.is_error
    assert result.text.startswith("Error: argument 'what': could not convert the value to")
    assert "'n' must be > 0" in result.text


class Plain(condukt.Tool):
    name = "plain"
    description = "A tool described by its class."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "ok"


def test_an_instance_with_its_own_description_is_not_described_by_its_class() -> None:
    # The class's check is done once and shared by its instances; one that
    # sets its own name, description or parameters must still be checked on its own.
    (first,) = condukt.tools.resolve_tools([Plain])
    own = Plain()
    own.name = "renamed"
    own.description = "Its own."
    own.parameters = {"type": "object", "properties": {"y": {"type": "string"}}, "required": ["y"]}
    (second,) = condukt.tools.resolve_tools([own])
    assert first.definition().name == "plain" and first.validate({"x": 1}) is None
    assert second.definition().name == "renamed" and second.definition().description == "Its own."
    assert second.validate({"y": "a"}) is None and second.validate({"x": 1}) is not None
    same = Plain()
    same.parameters = Plain.parameters  # the class's own object: described alike
    (third,) = condukt.tools.resolve_tools([same])
    assert third.definition() == first.definition()

    bad = Plain()
    bad.parameters = {"type": "no such type"}
    with pytest.raises(ValueError):
        condukt.tools.resolve_tools([bad])
