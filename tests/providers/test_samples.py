"""The recorded-format samples in tests/fixtures/, served verbatim, through each provider."""

from __future__ import annotations

from pathlib import Path

import condukt
from condukt.events import TextDelta, ThinkingDelta
from condukt.messages import TextBlock, ThinkingBlock, ToolCall, Usage
from condukt.testing.server import ProtocolServer, Raw

from .helpers import collect, spawn, tokens

FIXTURES = Path(__file__).resolve().parent.parent / "fixtures"


def sample(name: str) -> Raw:
    content_type = "text/event-stream" if name.endswith(".sse") else "application/json"
    return Raw((FIXTURES / name).read_bytes(), content_type)


async def test_anthropic_stream_with_thinking_and_a_tool_call(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(sample("anthropic_stream_thinking_tool_use.sse"))
    agent = await spawn(node, server, "anthropic", max_turns=1)
    events, _ = await collect(agent, "Weather in San Francisco?")
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == (
        "The user wants the weather in San Francisco; I should call the tool."
    )
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Let me check the weather."
    message = (await agent.history())[1]
    thinking, text, call = message.content
    assert isinstance(thinking, ThinkingBlock) and thinking.signature == "EqQBCgIYAhIM1gbcDa9GJwZA2b3hGgxBdjrkzLoky3dl1pkiMOYds"
    assert text == TextBlock("Let me check the weather.")
    assert call == ToolCall("toolu_01T1x1fJ34qAmk2tNTrN7Up6", "get_weather", {"location": "San Francisco, CA", "unit": "fahrenheit"})
    assert tokens(message.usage) == Usage(472, 89, cache_read_tokens=128)
    assert message.stop_reason == "tool_use" and message.model == "claude-sonnet-4-5"


async def test_anthropic_message(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(sample("anthropic_message.json"))
    agent = await spawn(node, server, "anthropic", stream=False, max_turns=1)
    await agent.run("?")
    message = (await agent.history())[1]
    assert message.content == (
        TextBlock("I'll look that up."),
        ToolCall("toolu_01A09q90qw90lq917835lq9", "get_weather", {"location": "San Francisco, CA"}),
    )
    assert tokens(message.usage) == Usage(2095, 503, cache_read_tokens=100, cache_write_tokens=12)


async def test_openai_stream_with_interleaved_tool_calls(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(sample("openai_stream_tool_calls.sse"))
    agent = await spawn(node, server, "openai", max_turns=1)
    await agent.run("?")
    message = (await agent.history())[1]
    assert message.content == (
        ToolCall("call_abc", "get_weather", {"location": "Paris"}),
        ToolCall("call_def", "get_time", {"zone": "CET"}),
    )
    # Cached prompt tokens are counted apart, as Anthropic does.
    assert tokens(message.usage) == Usage(18, 40, cache_read_tokens=64)
    assert message.stop_reason == "tool_use" and message.model == "gpt-4o-2024-08-06"


async def test_openai_completion(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(sample("openai_chat_completion.json"))
    agent = await spawn(node, server, "openai", stream=False)
    assert await agent.run("hi") == "Hello! How can I assist you today?"
    message = (await agent.history())[1]
    assert tokens(message.usage) == Usage(19, 10) and message.stop_reason == "end_turn"


async def test_a_json_answer_to_a_streaming_request_still_streams(node: condukt.Node, server: ProtocolServer) -> None:
    # Some compatible servers ignore "stream": the answer arrives whole, as one delta.
    server.add(sample("openai_chat_completion.json"))
    agent = await spawn(node, server, "openai", stream=True)
    events, _ = await collect(agent, "hi")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello! How can I assist you today?"]
