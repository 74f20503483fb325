"""@condukt.tool: the schema from type hints and docstring, context injection, sync and async."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any, Literal, Optional

import attrs
import pytest

import condukt
from condukt.testing import call

from .helpers import through_agent


@attrs.frozen
class Filter:
    """Which rows to keep."""

    field: str
    value: int = 0


@condukt.tool
async def search(
    query: str,
    limit: int = 10,
    mode: Literal["fast", "deep"] = "fast",
    tags: list[int] | None = None,
    owner: Optional[str] = None,
    where: Filter | None = None,
    *,
    context: condukt.ToolContext,
) -> dict[str, Any]:
    """Search the index.

    Finds documents matching a query.

    Args:
        query: What to look for.
        limit: At most this many results,
            counted after filtering.
        mode: How hard to look.
        where: An optional filter.
    """
    return {
        "query": query,
        "limit": limit,
        "mode": mode,
        "tags": tags,
        "owner": owner,
        "where": repr(where),
        "where_is_filter": isinstance(where, Filter),
        "cwd": str(context.cwd),
        "session": context.session_id,
    }


@condukt.tool(name="add_numbers", description="Adds numbers.")
def add(numbers: list[int], ctx: condukt.ToolContext) -> int:
    """Ignored summary."""
    return sum(numbers)


@condukt.tool
def shout(text: str) -> str:
    """
    :param text: Text to shout.
    """
    return text.upper()


def test_schema_from_type_hints_and_docstring() -> None:
    assert isinstance(search, condukt.Tool)
    assert search.name == "search"
    assert search.description == "Search the index.\n\nFinds documents matching a query."
    schema = search.parameters
    assert schema["type"] == "object"
    assert schema["required"] == ["query"]
    assert schema["additionalProperties"] is False
    props = schema["properties"]
    assert list(props) == ["query", "limit", "mode", "tags", "owner", "where"]  # no context
    assert props["query"] == {"type": "string", "description": "What to look for."}
    assert props["limit"] == {
        "type": "integer",
        "default": 10,
        "description": "At most this many results, counted after filtering.",
    }
    assert props["mode"] == {"enum": ["fast", "deep"], "default": "fast", "description": "How hard to look."}
    assert props["tags"] == {
        "anyOf": [{"type": "array", "items": {"type": "integer"}}, {"type": "null"}],
        "default": None,
    }
    assert props["owner"] == {"anyOf": [{"type": "string"}, {"type": "null"}], "default": None}
    where_object, null = props["where"]["anyOf"]
    assert null == {"type": "null"}
    assert where_object["type"] == "object"
    assert where_object["properties"] == {"field": {"type": "string"}, "value": {"type": "integer"}}
    assert where_object["required"] == ["field"]
    assert props["where"]["description"] == "An optional filter."


def test_name_description_overrides_and_sphinx_docstrings() -> None:
    assert (add.name, add.description) == ("add_numbers", "Adds numbers.")
    assert add.parameters["properties"] == {"numbers": {"type": "array", "items": {"type": "integer"}}}
    assert add.parameters["required"] == ["numbers"]
    assert shout.parameters["properties"]["text"] == {"type": "string", "description": "Text to shout."}
    assert shout.description == "Calls shout."


def test_schema_validation_uses_the_derived_schema() -> None:
    assert search.validate({"query": "x"}) is None
    assert search.validate({"query": "x", "mode": "slow"}) is not None
    assert search.validate({"query": "x", "tags": ["a"]}) is not None
    assert search.validate({"query": "x", "unknown": 1}) is not None
    assert search.validate({"limit": 3}) is not None
    assert search.validate({"query": "x", "where": {"value": 1}}) is not None


async def test_async_tool_gets_converted_arguments_and_context(tmp_path: Path) -> None:
    calls = [
        call("search", {"query": "cats"}),
        call(
            "search", {"query": "dogs", "limit": 3, "mode": "deep", "tags": [1, 2], "where": {"field": "age"}}
        ),
    ]
    (plain, full), model = await through_agent([search], calls, tmp_path, id="session-1")
    assert json.loads(plain.text) == {
        "query": "cats",
        "limit": 10,
        "mode": "fast",
        "tags": None,
        "owner": None,
        "where": "None",
        "where_is_filter": False,
        "cwd": str(tmp_path),
        "session": "session-1",
    }
    result = json.loads(full.text)
    assert result["where"] == "Filter(field='age', value=0)" and result["where_is_filter"]
    assert (result["limit"], result["mode"], result["tags"]) == (3, "deep", [1, 2])
    assert model.requests[0].tools[0].parameters == search.parameters


async def test_sync_tools_run_and_results_are_json_encoded(tmp_path: Path) -> None:
    calls = [call("add_numbers", {"numbers": [1, 2, 3]}), call("shout", {"text": "hi"})]
    (total, loud), _ = await through_agent([add, shout], calls, tmp_path)
    assert (total.text, loud.text) == ("6", "HI")


async def test_invalid_arguments_never_reach_the_function(tmp_path: Path) -> None:
    seen: list[int] = []

    @condukt.tool
    def record(n: int) -> str:
        """Records n."""
        seen.append(n)
        return "ok"

    (bad,), _ = await through_agent([record], call("record", {"n": "three"}), tmp_path)
    assert bad.is_error and "invalid arguments for record" in bad.text
    assert seen == []


async def test_exceptions_in_function_tools_are_reported(tmp_path: Path) -> None:
    @condukt.tool
    async def fail(reason: str) -> str:
        """Fails."""
        if reason == "tool":
            raise condukt.ToolError("expected failure")
        raise ZeroDivisionError("bug")

    (expected, bug), _ = await through_agent(
        [fail], [call("fail", {"reason": "tool"}), call("fail", {"reason": "bug"})], tmp_path
    )
    assert expected.text == "Error: expected failure" and expected.is_error
    assert bug.text == "Error: ZeroDivisionError: bug" and bug.is_error


def test_var_args_cannot_become_parameters() -> None:
    with pytest.raises(TypeError, match="kwargs"):

        @condukt.tool
        def bad(**kwargs: Any) -> str:
            return ""


def test_a_module_level_tool_pickles_by_name_and_a_local_one_says_why_not() -> None:
    import pickle

    from ._process_tools import write_later

    assert pickle.loads(pickle.dumps(write_later)) is write_later

    @condukt.tool
    def local(x: int) -> int:
        """Local."""
        return x

    with pytest.raises(TypeError, match="only a tool defined with @tool at module level"):
        pickle.dumps(local)
