"""Anthropic prompt caching: breakpoints placed automatically, cache reads reported in usage."""

from __future__ import annotations

import json
from typing import Any

import pytest

import condukt
from condukt import telemetry
from condukt.events import AgentEnd
from condukt.messages import AssistantMessage
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
