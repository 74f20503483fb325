"""Each protocol end to end, through a real Agent and the local server: answers, tools, streaming,
thinking, images, usage."""

from __future__ import annotations

import base64
import json
from pathlib import Path
from typing import Any

import pytest
import trio

import condukt
from condukt.events import AgentEnd, TextDelta, ThinkingDelta, ToolCallEnd, ToolCallStart
from condukt.messages import AssistantMessage, ThinkingBlock, ToolCall, Usage
from condukt.testing.server import Fault, ProtocolServer, reply, tool_use

from .helpers import API_KEY, PROTOCOLS, Weather, collect, spawn

both = pytest.mark.parametrize("protocol", PROTOCOLS)
both_streaming = pytest.mark.parametrize(
    "protocol,stream", [(p, s) for p in PROTOCOLS for s in (True, False)], ids=lambda v: str(v)
)


@both_streaming
async def test_plain_answer(node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool) -> None:
    server.add(reply("Hello there, human."))
    agent = await spawn(node, server, protocol, stream=stream, system_prompt="Be brief.")
    assert await agent.run("Say hello") == "Hello there, human."

    [request] = server.requests
    body = request.body
    assert body["model"] == "test-model"
    assert body.get("stream", False) is stream
    if protocol == "anthropic":
        assert request.path == "/v1/messages"
        assert request.headers["x-api-key"] == API_KEY
        assert request.headers["anthropic-version"] == "2023-06-01"
        # Prompt caching (on by default): breakpoints on the system prompt and the last block.
        assert body["system"] == [{"type": "text", "text": "Be brief.", "cache_control": {"type": "ephemeral"}}]
        assert body["max_tokens"] == 8192
        assert body["messages"] == [
            {"role": "user", "content": [{"type": "text", "text": "Say hello", "cache_control": {"type": "ephemeral"}}]}
        ]
    else:
        assert request.path == "/v1/chat/completions"
        assert request.headers["authorization"] == f"Bearer {API_KEY}"
        assert body["messages"] == [
            {"role": "system", "content": "Be brief."},
            {"role": "user", "content": "Say hello"},
        ]
        if stream:
            assert body["stream_options"] == {"include_usage": True}
    history = await agent.history()
    assert isinstance(history[-1], AssistantMessage)
    assert history[-1].text == "Hello there, human."


@both_streaming
async def test_tool_call_round_trip(node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Paris"}, id="call_1")), reply("It is 70F in Paris."))
    agent = await spawn(node, server, protocol, stream=stream, tools=[Weather])
    assert await agent.run("Weather in Paris?") == "It is 70F in Paris."

    first, second = server.requests
    if protocol == "anthropic":
        assert first.body["tools"] == [  # the last tool carries the tools' cache breakpoint
            {
                "name": "get_weather",
                "description": Weather.description,
                "input_schema": Weather.parameters,
                "cache_control": {"type": "ephemeral"},
            }
        ]
        assert second.body["messages"][1:] == [
            {
                "role": "assistant",
                "content": [{"type": "tool_use", "id": "call_1", "name": "get_weather", "input": {"location": "Paris"}}],
            },
            {
                "role": "user",
                "content": [
                    {
                        "type": "tool_result",
                        "tool_use_id": "call_1",
                        "content": [{"type": "text", "text": "Temperature: 70F in Paris"}],
                        "cache_control": {"type": "ephemeral"},  # the conversation's breakpoint
                    }
                ],
            },
        ]
    else:
        assert first.body["tools"] == [
            {
                "type": "function",
                "function": {"name": "get_weather", "description": Weather.description, "parameters": Weather.parameters},
            }
        ]
        assistant, result = second.body["messages"][1:]
        assert assistant["role"] == "assistant" and assistant["content"] is None
        [call] = assistant["tool_calls"]
        assert call["id"] == "call_1" and call["type"] == "function"
        assert call["function"]["name"] == "get_weather"
        assert json.loads(call["function"]["arguments"]) == {"location": "Paris"}
        assert result == {"role": "tool", "tool_call_id": "call_1", "content": "Temperature: 70F in Paris"}


@both_streaming
async def test_two_parallel_tool_calls(node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool) -> None:
    server.add(
        reply(tools=[tool_use("get_weather", {"location": "Paris"}, id="a1"), tool_use("get_weather", {"location": "Oslo"}, id="a2")]),
        reply("Paris 70F, Oslo 70F."),
    )
    agent = await spawn(node, server, protocol, stream=stream, tools=[Weather])
    events, result = await collect(agent, "Weather in Paris and Oslo?")
    assert result.result == "Paris 70F, Oslo 70F."
    # The calls run concurrently: their events come in either order.
    assert sorted((e.id, e.arguments) for e in events if isinstance(e, ToolCallStart)) == [
        ("a1", {"location": "Paris"}),
        ("a2", {"location": "Oslo"}),
    ]
    assert sorted(e.result for e in events if isinstance(e, ToolCallEnd)) == [
        "Temperature: 70F in Oslo",
        "Temperature: 70F in Paris",
    ]
    messages = server.requests[1].body["messages"]
    if protocol == "anthropic":
        # Both results in one user message, in call order.
        assert [m["role"] for m in messages] == ["user", "assistant", "user"]
        assert [b["id"] for b in messages[1]["content"]] == ["a1", "a2"]
        assert [(b["type"], b["tool_use_id"]) for b in messages[2]["content"]] == [("tool_result", "a1"), ("tool_result", "a2")]
    else:
        assert [m["role"] for m in messages] == ["user", "assistant", "tool", "tool"]
        assert [c["id"] for c in messages[1]["tool_calls"]] == ["a1", "a2"]
        assert [m["tool_call_id"] for m in messages[2:]] == ["a1", "a2"]


@both
async def test_text_deltas_arrive_before_the_stream_ends(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    # The server holds the rest of the stream back until the test saw the first delta.
    after = 4 if protocol == "anthropic" else 2  # frames up to and including the first text delta
    server.add(Fault(reply("Hello streaming world", chunk=6), after=after, kind="gate"))
    agent = await spawn(node, server, protocol)
    deltas = []
    async with agent.stream("Stream please") as events:
        async for event in events:
            if isinstance(event, TextDelta):
                if not deltas:
                    assert not server.gate.is_set()
                    assert server.in_flight == 1  # the response is still being sent
                    server.gate.set()
                deltas.append(event.text)
    assert events.result == "Hello streaming world"
    assert deltas == ["Hello ", "stream", "ing wo", "rld"]


@both
async def test_thinking_deltas(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    thinking = "The user asks about Paris; the tool knows the weather."
    server.add(
        reply("Checking.", thinking=thinking, tools=tool_use("get_weather", {"location": "Paris"}, id="t1")),
        reply("It is 70F."),
    )
    agent = await spawn(node, server, protocol, tools=[Weather], thinking_level="medium")
    events, result = await collect(agent, "Weather?")
    assert result.result == "It is 70F."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == thinking
    first, second = server.requests
    history = await agent.history()
    blocks = history[1].content
    assert isinstance(blocks[0], ThinkingBlock) and blocks[0].thinking == thinking
    if protocol == "anthropic":
        assert first.body["thinking"] == {"type": "enabled", "budget_tokens": 10240}
        assert first.body["max_tokens"] == 10240 + 8192
        assert blocks[0].signature == "sig-abc"
        # Thinking goes back, signed, ahead of the tool call it led to.
        assert second.body["messages"][1]["content"][0] == {"type": "thinking", "thinking": thinking, "signature": "sig-abc"}
    else:
        assert first.body["reasoning_effort"] == "medium"
        assert "thinking" not in json.dumps(second.body["messages"][1])


@both_streaming
async def test_image_from_the_read_tool_reaches_the_request(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool, tmp_path: Path
) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(64))
    (tmp_path / "pixel.png").write_bytes(png)
    encoded = base64.b64encode(png).decode()
    server.add(reply(tools=tool_use("read", {"path": "pixel.png"}, id="r1")), reply("A tiny image."))
    agent = await spawn(node, server, protocol, stream=stream, tools=[condukt.tools.Read], cwd=str(tmp_path))
    assert await agent.run("What is in pixel.png?") == "A tiny image."
    messages = server.requests[1].body["messages"]
    if protocol == "anthropic":
        [result] = messages[-1]["content"]
        assert result["type"] == "tool_result" and result["tool_use_id"] == "r1"
        assert {"type": "image", "source": {"type": "base64", "media_type": "image/png", "data": encoded}} in result["content"]
    else:
        tool_message, image_message = messages[-2:]
        assert tool_message["role"] == "tool" and tool_message["tool_call_id"] == "r1"
        assert image_message["role"] == "user"
        assert {"type": "image_url", "image_url": {"url": f"data:image/png;base64,{encoded}"}} in image_message["content"]


@both_streaming
async def test_usage_is_summed_per_run(node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Rome"}), usage=(100, 20)), reply("Warm.", usage=(150, 30)))
    agent = await spawn(node, server, protocol, stream=stream, tools=[Weather])
    events, _ = await collect(agent, "Rome?")
    [end] = [e for e in events if isinstance(e, AgentEnd)]
    assert end.usage == Usage(input_tokens=250, output_tokens=50)
    assert end.turns == 2
    history = await agent.history()
    assert [m.usage for m in history if isinstance(m, AssistantMessage)] == [Usage(100, 20), Usage(150, 30)]


@both
async def test_user_images_and_steered_text(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    image = condukt.messages.ImageBlock.from_bytes(b"GIF89a-bytes", "image/gif")
    server.add(reply("An image."))
    agent = await spawn(node, server, protocol)
    assert await agent.run("Look", images=[image]) == "An image."
    [message] = without_cache_marks(server.requests[0].body["messages"])
    if protocol == "anthropic":
        assert message["content"][1] == {"type": "image", "source": {"type": "base64", "media_type": "image/gif", "data": image.data}}
    else:
        assert message["content"][1] == {"type": "image_url", "image_url": {"url": f"data:image/gif;base64,{image.data}"}}


@both
async def test_history_is_encoded_once(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    # Three runs on one agent: each request carries the whole history, byte-identical
    # to what was sent before for the messages that did not change.
    server.add(reply("one"), reply("two"), reply("three"))
    agent = await spawn(node, server, protocol)
    for prompt in ("a", "b", "c"):
        await agent.run(prompt)
    raws = [r.raw for r in server.requests]
    # (Anthropic's cache breakpoint moves to the newest block each turn.)
    first_messages = json.dumps(without_cache_marks(server.requests[0].body["messages"]))
    assert json.dumps(without_cache_marks(server.requests[2].body["messages"])).startswith(first_messages[:-1])
    assert len(raws[0]) < len(raws[1]) < len(raws[2])


def without_cache_marks(value: Any) -> Any:
    """``value`` without Anthropic's ``cache_control`` breakpoints."""
    if isinstance(value, dict):
        return {k: without_cache_marks(v) for k, v in value.items() if k != "cache_control"}
    if isinstance(value, list):
        return [without_cache_marks(v) for v in value]
    return value


async def test_models_resolve_by_prefix(monkeypatch: pytest.MonkeyPatch) -> None:
    keyed = ("anthropic", "openai", "openrouter", "groq", "together", "gemini", "mistral", "xai", "deepseek")
    for prefix in keyed:
        monkeypatch.setenv(f"{prefix.upper()}_API_KEY", "from-env")
    prefixes = (*keyed, "ollama", "vllm", "openai-responses")
    models = {prefix: condukt.providers.resolve_model(f"{prefix}:m") for prefix in prefixes}
    assert models["anthropic"].base_url == "https://api.anthropic.com"
    assert models["openai"].base_url == "https://api.openai.com/v1"
    assert models["ollama"].base_url == "http://localhost:11434/v1"
    assert models["openrouter"].base_url == "https://openrouter.ai/api/v1"
    assert models["groq"].base_url == "https://api.groq.com/openai/v1"
    assert models["together"].base_url == "https://api.together.xyz/v1"
    assert models["vllm"].base_url == "http://localhost:8000/v1"
    assert models["gemini"].base_url == "https://generativelanguage.googleapis.com"
    assert models["mistral"].base_url == "https://api.mistral.ai/v1"
    assert models["xai"].base_url == "https://api.x.ai/v1"
    assert models["deepseek"].base_url == "https://api.deepseek.com/v1"
    assert all(model.name == f"{prefix}:m" for prefix, model in models.items())
    monkeypatch.setenv("VLLM_BASE_URL", "http://gpu-box:9000/v1")
    assert condukt.providers.resolve_model("vllm:m").base_url == "http://gpu-box:9000/v1"


@pytest.mark.parametrize(
    "prefix,level,field,value",
    [
        ("openai", "minimal", "reasoning_effort", "minimal"),
        ("groq", "minimal", "reasoning_effort", "low"),
        ("ollama", "high", "reasoning_effort", "high"),
        ("openrouter", "low", "reasoning", {"effort": "low"}),
    ],
)
async def test_reasoning_parameter_per_preset(
    node: condukt.Node, server: ProtocolServer, prefix: str, level: str, field: str, value: object
) -> None:
    server.add(reply("ok"))
    agent = await node.spawn(
        condukt.Agent, model=f"{prefix}:m", api_key="k", base_url=server.url + "/v1", thinking_level=level
    )
    await agent.run("hi")
    assert server.requests[0].body[field] == value
    max_field = "max_completion_tokens" if prefix == "openai" else "max_tokens"
    await agent.clear()
    server.add(reply("ok"))
    await agent.run("hi", max_turns=1)
    assert max_field not in server.requests[1].body  # no cap unless one is set


async def test_max_tokens_and_thinking_budget(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("a"), reply("b"))
    small = await spawn(node, server, "anthropic", thinking_level="high", max_tokens=4000)
    await small.run("x")
    assert server.requests[0].body["max_tokens"] == 4000
    assert server.requests[0].body["thinking"] == {"type": "enabled", "budget_tokens": 3999}
    tiny = await spawn(node, server, "anthropic", thinking_level="low", max_tokens=800)
    await tiny.run("x")
    assert server.requests[1].body["max_tokens"] == 800
    assert "thinking" not in server.requests[1].body


async def test_invalid_tool_arguments_reach_the_model_as_an_error(node: condukt.Node, server: ProtocolServer) -> None:
    # OpenAI sends arguments as a JSON string: a broken one is reported to the model, not raised.
    broken = tool_use("get_weather", "{not json", id="bad")
    server.add(reply(tools=broken), reply("Sorry."))
    agent = await spawn(node, server, "openai", stream=False, tools=[Weather])
    # The server JSON-encodes the string, so the model sees the raw text back.
    assert await agent.run("?") == "Sorry."
    history = await agent.history()
    call = history[1].content[0]
    assert isinstance(call, ToolCall) and call.arguments == "{not json"
    assert history[2].is_error


async def test_many_agents_share_one_connection_pool(node: condukt.Node, server: ProtocolServer) -> None:
    agents = [await spawn(node, server, "openai") for _ in range(5)]
    for _ in range(2):
        server.add(*[reply("hi")] * 5)
        async with trio.open_nursery() as nursery:
            for agent in agents:
                nursery.start_soon(agent.run, "hello")
    assert len(server.requests) == 10
    assert server.connections <= 5  # the second round reused the first round's connections
