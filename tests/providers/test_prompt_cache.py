"""Anthropic prompt caching: breakpoints placed automatically or by hand, cache reads reported in usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

import condukt
from condukt import telemetry
from condukt.events import AgentEnd
from condukt.messages import (
    AssistantMessage,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from condukt.providers import AnthropicModel, ModelRequest
from condukt.testing.server import PromptCache, ProtocolServer, Raw, reply, tool_use

from .helpers import Weather, collect, spawn

MARK = {"type": "ephemeral"}


def marks(value: Any, path: str = "") -> list[str]:
    """Where ``cache_control`` appears in a request body."""
    found = []
    if isinstance(value, dict):
        if value.get("cache_control") == MARK:
            found.append(path)
        for key, item in value.items():
            found += marks(item, f"{path}.{key}")
    elif isinstance(value, list):
        for index, item in enumerate(value):
            found += marks(item, f"{path}[{index}]")
    return found


async def test_the_second_turn_marks_the_cached_prefix(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("one"), reply("two"))
    agent = await spawn(node, server, "anthropic", system_prompt="You are terse.", tools=[Weather])
    await agent.run("first")
    await agent.run("second")
    first, second = (r.body for r in server.requests)
    assert marks(first) == [".system[0]", ".tools[0]", ".messages[0].content[0]"]
    # Turn two: the same system and tools marks, and the breakpoint moved to the newest block,
    # so the provider reads everything before it (turn one's prompt and answer) from its cache.
    assert marks(second) == [".system[0]", ".tools[0]", ".messages[2].content[0]"]
    assert second["messages"][2]["content"][0]["text"] == "second"


async def test_caching_can_be_turned_off(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("one"))
    agent = await spawn(
        node, server, "anthropic", system_prompt="You are terse.", tools=[Weather],
        model_options={"prompt_cache": False},
    )
    await agent.run("first")
    body = server.requests[0].body
    assert marks(body) == []
    assert body["system"] == "You are terse."


async def test_usage_reports_cache_reads_and_writes(node: condukt.Node, server: ProtocolServer) -> None:
    body = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
        "content": [{"type": "text", "text": "cached"}], "stop_reason": "end_turn", "stop_sequence": None,
        "usage": {
            "input_tokens": 12, "output_tokens": 3,
            "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 256,
        },
    }  # fmt: skip
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"))
    agent = await spawn(node, server, "anthropic", stream=False)
    events, stream = await collect(agent, "go")
    [end] = [e for e in events if isinstance(e, AgentEnd)]
    assert stream.result == "cached"
    assert (end.usage.cache_read_tokens, end.usage.cache_write_tokens) == (2048, 256)


async def test_telemetry_reports_cache_reads_and_writes(node: condukt.Node, server: ProtocolServer) -> None:
    body = {
        "id": "msg_1", "type": "message", "role": "assistant", "model": "test-model",
        "content": [{"type": "text", "text": "cached"}], "stop_reason": "end_turn",
        "usage": {"input_tokens": 12, "output_tokens": 3, "cache_read_input_tokens": 2048, "cache_creation_input_tokens": 256},
    }  # fmt: skip
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"))
    agent = await spawn(node, server, "anthropic", stream=False)
    seen: list[telemetry.TelemetryEvent] = []
    with telemetry.attached(seen.append):
        await agent.run("go")
    stops = {e.name[1]: e.measurements for e in seen if e.name[2] == "stop" and e.name[1] in ("llm", "run")}
    for kind in ("llm", "run"):
        assert (stops[kind]["input_tokens"], stops[kind]["cache_read_tokens"], stops[kind]["cache_write_tokens"]) == (12, 2048, 256)


@pytest.mark.parametrize("prefix", ["openai", "openai-responses"])
async def test_openai_prompt_cache_key(node: condukt.Node, server: ProtocolServer, prefix: str) -> None:
    server.add(reply("one"), reply("two"))
    agent = await spawn(node, server, prefix, model_options={"prompt_cache_key": "conversation-42"})
    await agent.run("first")
    plain = await spawn(node, server, prefix)
    await plain.run("second")
    assert server.requests[0].body["prompt_cache_key"] == "conversation-42"
    assert "prompt_cache_key" not in server.requests[1].body
    with pytest.raises(TypeError):
        await spawn(node, server, prefix, model_options={"prompt_cache_key": 42})


LONG_SYSTEM = "You review code carefully. " * 400  # about 2,700 tokens: above the cacheable minimum


async def test_a_tool_loop_reads_each_turns_prefix_from_the_cache(node: condukt.Node, server: ProtocolServer) -> None:
    # The server simulates Anthropic's cache (testing.server.PromptCache): what the breakpoints save is measurable.
    server.prompt_cache = PromptCache()
    server.add(reply(tools=tool_use("get_weather", {"location": "Paris"})), reply(tools=tool_use("get_weather", {"location": "Oslo"})), reply("Done."))
    agent = await spawn(node, server, "anthropic", system_prompt=LONG_SYSTEM, tools=[Weather])
    events, _ = await collect(agent, "Weather in Paris and Oslo?")
    history = await agent.history()
    usages = [m.usage for m in history if isinstance(m, AssistantMessage)]
    assert usages[0].cache_write_tokens > 2500 and usages[0].cache_read_tokens == 0
    # Each later turn reads everything the previous turn wrote, and writes only what is new.
    for before, after in zip(usages, usages[1:], strict=False):
        assert after.cache_read_tokens == before.cache_read_tokens + before.cache_write_tokens
        assert 0 < after.cache_write_tokens < 200 and after.input_tokens < 50
    [end] = [e for e in events if isinstance(e, AgentEnd)]
    assert end.usage.cache_read_tokens == sum(u.cache_read_tokens for u in usages)


async def test_without_breakpoints_nothing_is_read_from_the_cache(node: condukt.Node, server: ProtocolServer) -> None:
    server.prompt_cache = PromptCache()
    server.add(reply(tools=tool_use("get_weather", {"location": "Paris"})), reply("Done."))
    agent = await spawn(node, server, "anthropic", system_prompt=LONG_SYSTEM, tools=[Weather], model_options={"prompt_cache": False})
    await agent.run("Weather in Paris?")
    usages = [m.usage for m in await agent.history() if isinstance(m, AssistantMessage)]
    assert all(u.cache_read_tokens == u.cache_write_tokens == 0 for u in usages)
    assert usages[1].input_tokens > usages[0].input_tokens > 2500  # the whole prompt billed every turn


DOCUMENT = "Clause: the supplier delivers on time and in full. " * 250  # about 3,200 tokens


async def test_breakpoints_placed_by_hand(node: condukt.Node, server: ProtocolServer) -> None:
    # The system prompt and the first prompt (a long document) only: no tools mark, no moving mark.
    server.add(reply("one"), reply("two"))
    agent = await spawn(
        node, server, "anthropic", system_prompt="You are terse.", tools=[Weather],
        model_options={"prompt_cache": {"system", 0}},
    )  # fmt: skip
    await agent.run(DOCUMENT)
    await agent.run("Who delivers?")
    first, second = (r.body for r in server.requests)
    assert marks(first) == [".system[0]", ".messages[0].content[0]"]
    assert marks(second) == [".system[0]", ".messages[0].content[0]"]
    assert second["messages"][0]["content"][0]["text"] == DOCUMENT
    assert "cache_control" not in second["tools"][0] and len(second["messages"]) == 3


async def test_a_breakpoint_by_hand_reads_the_first_prompt_from_the_cache(node: condukt.Node, server: ProtocolServer) -> None:
    server.prompt_cache = PromptCache()
    server.add(reply("one"), reply("two"), reply("three"))
    agent = await spawn(node, server, "anthropic", stream=False, model_options={"prompt_cache": [0]})
    await agent.run(DOCUMENT)
    await agent.run("Who delivers?")
    await agent.run("When?")
    usages = [m.usage for m in await agent.history() if isinstance(m, AssistantMessage)]
    assert usages[0].cache_write_tokens > 3000 and usages[0].cache_read_tokens == 0
    # Later runs read the document's prefix and, without a moving mark, write nothing more.
    for usage in usages[1:]:
        assert (usage.cache_read_tokens, usage.cache_write_tokens) == (usages[0].cache_write_tokens, 0)
        assert 0 < usage.input_tokens < 100


def encode(places: object, messages: tuple[object, ...]) -> dict[str, Any]:
    model = AnthropicModel("claude-test", api_key="k", base_url="http://127.0.0.1:9", prompt_cache=places)
    return json.loads(model.encode_request(ModelRequest("sys", messages)))  # type: ignore[arg-type]


CALL = AssistantMessage((TextBlock("Looking."), ToolCall("c1", "get_weather", {})), Usage(), StopReason.TOOL_USE)
THOUGHT = AssistantMessage((ThinkingBlock("hmm", "sig"),), Usage(), StopReason.MAX_TOKENS)
CONVERSATION = (
    UserMessage.from_text("one"), CALL, ToolResultMessage("c1", "get_weather", (TextBlock("70F"),)),
    AssistantMessage((TextBlock("Warm."),), Usage(), StopReason.END_TURN), UserMessage.from_text("two"),
)  # fmt: skip


@pytest.mark.parametrize(
    ("places", "messages", "expected"),
    [
        # Message i's last block; the API merges the tool result into the user turn after the call.
        ({1, 2}, CONVERSATION, [".messages[1].content[1]", ".messages[2].content[0]"]),
        ({-2, "messages"}, CONVERSATION, [".messages[3].content[0]", ".messages[4].content[0]"]),
        ({0, -5, "system"}, CONVERSATION, [".system[0]", ".messages[0].content[0]"]),  # one place, marked once
        ({7, -9}, CONVERSATION, []),  # outside the conversation: nothing
        # Thinking cannot hold a breakpoint: the nearest block before it that can.
        ({"messages"}, (UserMessage.from_text("one"), THOUGHT), [".messages[0].content[0]"]),
        ({0, 1}, (UserMessage.from_text("one"), THOUGHT), [".messages[0].content[0]"]),
        (True, (UserMessage.from_text("one"),), [".system[0]", ".messages[0].content[0]"]),
        (set(), (UserMessage.from_text("one"),), []),
    ],
)
def test_where_each_place_puts_its_breakpoint(places: object, messages: tuple[object, ...], expected: list[str]) -> None:
    body = encode(places, messages)
    assert marks(body) == expected
    if "system" not in str(expected):
        assert body["system"] == "sys"


@pytest.mark.parametrize(
    ("places", "error", "match"),
    [
        ({"system", "tools", "messages", 0, 1}, ValueError, "at most 4"),
        ({"sytem"}, ValueError, "unknown place 'sytem'"),
        ("system", TypeError, "collection of places"),
        (1, TypeError, "collection of places"),
        ({1.5}, TypeError, "message index"),
        ([True], TypeError, "message index"),
    ],
)
async def test_places_are_checked_when_the_agent_starts(
    node: condukt.Node, server: ProtocolServer, places: object, error: type[Exception], match: str
) -> None:
    with pytest.raises(error, match=match):
        await spawn(node, server, "anthropic", model_options={"prompt_cache": places})
    # "messages" and -1 are the same place: four distinct places are fine.
    model = AnthropicModel("claude-test", api_key="k", base_url=server.url, prompt_cache={"system", "tools", "messages", -1, 0})
    assert model.prompt_cache == {"system", "tools", "messages", 0}
