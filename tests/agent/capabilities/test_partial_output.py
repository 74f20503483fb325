"""PartialOutput: a structured result as the model writes it, from the streamed submit_result arguments."""

from __future__ import annotations

import json
from typing import Any

import pytest
import trio

import condukt
from condukt.agent.capabilities.structured_output import PartialResult, relaxed_schema
from condukt.events import Event, PartialOutput, ToolCallDelta
from condukt.schema import Schema
from condukt.testing import ScriptedModel, call, reply
from condukt.testing.server import ProtocolServer, tool_use
from condukt.testing.server import reply as server_reply

REPORT = {
    "type": "object",
    "properties": {
        "title": {"type": "string"},
        "status": {"type": "string", "enum": ["draft", "published"]},
        "tags": {"type": "array", "items": {"type": "string"}, "minItems": 2},
        "score": {"type": "integer", "minimum": 0, "maximum": 10},
        "author": {
            "type": "object",
            "properties": {"name": {"type": "string"}, "email": {"type": "string"}},
            "required": ["name", "email"],
        },
    },
    "required": ["title", "status", "tags", "score", "author"],
    "additionalProperties": False,
}
FINAL = {
    "title": "Quarterly report on the northern region",
    "status": "published",
    "tags": ["finance", "north", "q3"],
    "score": 8,
    "author": {"name": "Ada Lovelace", "email": "ada@example.com"},
}


def grows_toward(values: list[dict[str, Any]], final: dict[str, Any]) -> None:
    """Every field gets a PartialOutput; each value is a prefix of the next, the last one the final value."""
    assert values[-1] == final
    for field in final:
        assert any(field in v for v in values), f"no PartialOutput with {field!r}"
    for earlier, later in zip(values, values[1:], strict=False):
        assert prefix_of(earlier, later), (earlier, later)


def prefix_of(earlier: Any, later: Any) -> bool:
    if isinstance(earlier, dict):
        return isinstance(later, dict) and all(k in later and prefix_of(v, later[k]) for k, v in earlier.items())
    if isinstance(earlier, list):
        return isinstance(later, list) and len(earlier) <= len(later) and all(
            prefix_of(a, b) for a, b in zip(earlier, later, strict=False)
        )
    if isinstance(earlier, str):
        return isinstance(later, str) and later.startswith(earlier)
    return bool(earlier == later)


@pytest.mark.parametrize("protocol", ["anthropic", "openai", "openai-responses"])
async def test_a_streaming_provider_gives_partial_outputs_growing_to_the_result(
    nursery: trio.Nursery, protocol: str
) -> None:
    server = ProtocolServer()
    await nursery.start(server.run)
    server.script.append(server_reply(tools=tool_use("submit_result", FINAL), chunk=5))
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=f"{protocol}:test-model",
            api_key="sk-test",
            base_url=server.url + "/v1" if protocol.startswith("openai") else server.url,
        )
        events: list[Event] = []
        async with agent.stream("Write the report", output=REPORT) as stream:
            async for event in stream:
                events.append(event)
        assert json.loads(stream.result) == FINAL
    partials = [e.value for e in events if isinstance(e, PartialOutput)]
    assert len(partials) > len(FINAL)
    grows_toward(partials, FINAL)
    assert not any(isinstance(e, ToolCallDelta) for e in events)  # turned into PartialOutput, not passed on
    # Strings grow while written: the title shows up half written first.
    assert any("title" in v and v["title"] != FINAL["title"] for v in partials)


async def test_other_tools_arguments_are_not_streamed_as_events(nursery: trio.Nursery) -> None:
    server = ProtocolServer()
    await nursery.start(server.run)
    server.script.extend(
        [server_reply(tools=tool_use("lookup", {"key": "a" * 50})), server_reply(tools=tool_use("submit_result", {"n": 3}))]
    )

    @condukt.tool
    async def lookup(key: str) -> str:
        """Look a key up."""
        return "found"

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model="anthropic:test-model", api_key="sk-test", base_url=server.url, tools=[lookup]
        )
        events: list[Event] = []
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        async with agent.stream("Go", output=schema) as stream:
            async for event in stream:
                events.append(event)
        async with agent.stream("Plain run") as stream:
            async for event in stream:
                events.append(event)
    assert [e.value for e in events if isinstance(e, PartialOutput)] == [{"n": 3}]
    assert not any(isinstance(e, ToolCallDelta) for e in events)


async def test_partial_outputs_are_checked_against_the_relaxed_schema(autojump_clock: Any) -> None:
    # The model writes a score above the maximum: that value is never shown as partial output.
    bad = {**FINAL, "score": 99}
    model = ScriptedModel([call("submit_result", bad), call("submit_result", FINAL)])
    events: list[Event] = []

    async def on_event(event: Event) -> None:
        events.append(event)

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        result = await agent.run("Write the report", output=REPORT, on_event=on_event)
    assert result == FINAL
    partials = [e.value for e in events if isinstance(e, PartialOutput)]
    assert partials and all(v.get("score", 0) <= 10 for v in partials)
    # Fields before the bad score were shown as the first submission streamed.
    assert any(v.get("status") == "published" and "score" not in v for v in partials)


def test_partial_json_that_never_closes_gives_what_it_holds_and_nothing_invalid() -> None:
    partial = PartialResult(Schema.of(relaxed_schema(REPORT)))
    pieces = ['{"title": "Half', " writ", 'ten", "tags": ["a", "b', '"], "sc', "ore"]
    assert [partial.feed(piece) for piece in pieces] == [
        {"title": "Half"},
        {"title": "Half writ"},
        {"title": "Half written", "tags": ["a", "b"]},
        None,  # the list closed: nothing new
        None,  # a key still being written adds nothing
    ]
    assert partial.feed(': "ten"') is None  # "score" must be an integer: a string is never shown
    assert partial.feed("garbage that is not JSON }}}") is None  # never raises
    assert partial.feed('') is None


def test_the_relaxed_schema_keeps_types_and_bounds_and_drops_what_a_prefix_cannot_meet() -> None:
    relaxed = relaxed_schema(REPORT)
    assert "required" not in relaxed
    assert relaxed["properties"]["tags"] == {"type": "array", "items": {"type": "string"}}
    assert relaxed["properties"]["status"] == {"type": "string"}  # "pub" may become "published"
    assert relaxed["properties"]["score"] == {"type": "integer", "minimum": 0, "maximum": 10}
    assert relaxed["additionalProperties"] is False
    check = Schema.of(relaxed)
    assert check.is_valid({"title": "x", "author": {"name": "A"}})
    assert not check.is_valid({"score": "eight"})
    assert not check.is_valid({"unknown": 1})


async def test_a_run_without_output_gets_no_partial_outputs_and_scripted_models_stream_only_when_asked(
    autojump_clock: Any,
) -> None:
    model = ScriptedModel([call("submit_result", {"n": 1}), reply("plain")])
    events: list[Event] = []

    async def on_event(event: Event) -> None:
        events.append(event)

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        schema = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}
        await agent.run("structured", output=schema, on_event=on_event)
        count = len([e for e in events if isinstance(e, PartialOutput)])
        await agent.run("plain", on_event=on_event)
    assert count == 1
    assert len([e for e in events if isinstance(e, PartialOutput)]) == 1
    assert model.requests[0].stream_arguments == ("submit_result",)
    assert model.requests[1].stream_arguments == ()
