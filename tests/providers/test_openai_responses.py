"""The OpenAI Responses API wire format end to end, through a real Agent and the local server.

Shapes from the public API reference (``POST /v1/responses`` and its
streaming events); retries, stalls and in-stream errors are covered with
the other protocols in test_faults.py.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import condukt
from condukt.events import TextDelta, ThinkingDelta, ToolCallStart
from condukt.messages import AssistantMessage, Citation, StopReason, ThinkingBlock, Usage
from condukt.providers import MissingApiKey, ModelRefused, ProviderUnavailable
from condukt.testing.server import ProtocolServer, Raw, reply, tool_use

from .helpers import API_KEY, Weather, collect, spawn

PROTOCOL = "openai-responses"
streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


def response(output: list[dict[str, object]], **fields: object) -> Raw:
    body = {"id": "resp_1", "object": "response", "status": "completed", "model": "gpt-test", "output": output, **fields}
    return Raw(json.dumps(body).encode(), content_type="application/json")


@streaming
async def test_plain_answer(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(reply("Hello there, human."))
    agent = await spawn(node, server, PROTOCOL, stream=stream, system_prompt="Be brief.")
    assert await agent.run("Say hello") == "Hello there, human."
    [request] = server.requests
    assert request.path == "/v1/responses"
    assert request.headers["authorization"] == f"Bearer {API_KEY}"
    expected = {
        "model": "test-model",
        "store": False,  # stateless: the whole conversation goes each turn
        "instructions": "Be brief.",
        "input": [{"role": "user", "content": [{"type": "input_text", "text": "Say hello"}]}],
    }
    if stream:
        expected["stream"] = True
    assert request.body == expected
    [*_, answer] = await agent.history()
    assert isinstance(answer, AssistantMessage) and answer.stop_reason == StopReason.END_TURN


@streaming
async def test_tool_call_round_trip(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(reply("Let me check.", tools=tool_use("get_weather", {"location": "Paris"}, id="call_1")), reply("70F."))
    agent = await spawn(node, server, PROTOCOL, stream=stream, tools=[Weather])
    assert await agent.run("Weather in Paris?") == "70F."
    first, second = server.requests
    assert first.body["tools"] == [
        {"type": "function", "name": "get_weather", "description": Weather.description, "parameters": Weather.parameters, "strict": False}
    ]
    assistant, call, output = second.body["input"][1:]
    assert assistant == {"role": "assistant", "content": "Let me check."}
    assert call["type"] == "function_call" and call["call_id"] == "call_1" and call["name"] == "get_weather"
    assert json.loads(call["arguments"]) == {"location": "Paris"}
    assert output == {"type": "function_call_output", "call_id": "call_1", "output": "Temperature: 70F in Paris"}
    history = await agent.history()
    assert history[1].stop_reason == StopReason.TOOL_USE


@streaming
async def test_parallel_calls(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(
        reply(tools=[tool_use("get_weather", {"location": "Paris"}, id="a1"), tool_use("get_weather", {"location": "Oslo"}, id="a2")]),
        reply("Both 70F."),
    )
    agent = await spawn(node, server, PROTOCOL, stream=stream, tools=[Weather])
    events, result = await collect(agent, "Paris and Oslo?")
    assert result.result == "Both 70F."
    assert sorted(e.id for e in events if isinstance(e, ToolCallStart)) == ["a1", "a2"]
    items = server.requests[1].body["input"][1:]
    assert [(i["type"], i["call_id"]) for i in items] == [
        ("function_call", "a1"),
        ("function_call", "a2"),
        ("function_call_output", "a1"),
        ("function_call_output", "a2"),
    ]


async def test_reasoning_summaries_stream_and_encrypted_reasoning_goes_back(node: condukt.Node, server: ProtocolServer) -> None:
    thinking = "The tool knows the weather."
    server.add(reply(thinking=thinking, tools=tool_use("get_weather", {"location": "Rome"}, id="c1")), reply("Warm."))
    agent = await spawn(node, server, PROTOCOL, tools=[Weather], thinking_level="high")
    events, result = await collect(agent, "Rome?")
    assert result.result == "Warm."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == thinking
    first, second = server.requests
    assert first.body["reasoning"] == {"effort": "high", "summary": "auto"}
    assert first.body["include"] == ["reasoning.encrypted_content"]
    history = await agent.history()
    assert history[1].content[0] == ThinkingBlock(thinking, "rs_local", "sig-abc", PROTOCOL)
    assert second.body["input"][1] == {
        "type": "reasoning",
        "id": "rs_local",
        "summary": [{"type": "summary_text", "text": thinking}],
        "encrypted_content": "sig-abc",
    }
    assert second.body["input"][2]["type"] == "function_call"


async def test_text_streams_as_deltas(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("Hello streaming world", chunk=6))
    agent = await spawn(node, server, PROTOCOL)
    events, result = await collect(agent, "hi")
    assert [e.text for e in events if isinstance(e, TextDelta)] == ["Hello ", "stream", "ing wo", "rld"]
    assert result.result == "Hello streaming world"


async def test_a_refusal_raises_model_refused(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(
        response([{"type": "message", "role": "assistant", "content": [{"type": "refusal", "refusal": "I can't help with that."}]}])
    )
    agent = await spawn(node, server, PROTOCOL, stream=False)
    with pytest.raises(ModelRefused, match="I can't help with that") as info:
        await agent.run("something bad")
    assert info.value.stop_reason == StopReason.REFUSAL
    assert not await agent.history()


async def test_an_incomplete_answer_reports_max_tokens(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(
        response(
            [{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Once upon a"}]}],
            status="incomplete",
            incomplete_details={"reason": "max_output_tokens"},
            usage={"input_tokens": 1000, "input_tokens_details": {"cached_tokens": 800}, "output_tokens": 16},
        )
    )
    agent = await spawn(node, server, PROTOCOL, stream=False)
    assert await agent.run("A long story") == "Once upon a"
    [*_, answer] = await agent.history()
    assert answer.stop_reason == StopReason.MAX_TOKENS
    assert answer.usage == Usage(input_tokens=200, output_tokens=16, cache_read_tokens=800)


async def test_a_failed_response_raises_its_error(node: condukt.Node, server: ProtocolServer) -> None:
    body = {"type": "response.failed", "response": {"status": "failed", "error": {"code": "server_error", "message": "The model crashed"}, "output": []}}
    frame = b"event: response.failed\ndata: " + json.dumps(body).encode() + b"\n\n"
    server.add(Raw(frame), Raw(frame), Raw(frame))
    agent = await spawn(node, server, PROTOCOL, model_options={"retry": {"attempts": 3, "base": 0.01}})
    with pytest.raises(ProviderUnavailable, match="The model crashed"):
        await agent.run("hi")
    assert len(server.requests) == 3  # a server error is retried


async def test_images_from_a_tool_follow_its_output(node: condukt.Node, server: ProtocolServer, tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(16))
    (tmp_path / "pixel.png").write_bytes(png)
    server.add(reply(tools=tool_use("read", {"path": "pixel.png"}, id="r1")), reply("A tiny image."))
    agent = await spawn(node, server, PROTOCOL, tools=[condukt.tools.Read], cwd=str(tmp_path))
    assert await agent.run("What is in pixel.png?") == "A tiny image."
    output, images = server.requests[1].body["input"][-2:]
    assert output["type"] == "function_call_output" and output["call_id"] == "r1"
    assert images["role"] == "user"
    assert {"type": "input_image", "image_url": f"data:image/png;base64,{base64.b64encode(png).decode()}"} in images["content"]


async def test_the_key_is_openais(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingApiKey, match="OPENAI_API_KEY"):
        await node.spawn(condukt.Agent, model="openai-responses:gpt-4.1", base_url=server.url + "/v1")
    monkeypatch.setenv("OPENAI_API_KEY", "from-env")
    model = condukt.providers.resolve_model("openai-responses:gpt-4.1", node=node)
    assert model.base_url == "https://api.openai.com/v1"  # type: ignore[attr-defined]


async def test_url_citations_are_kept(node: condukt.Node, server: ProtocolServer) -> None:
    annotation = {"type": "url_citation", "start_index": 0, "end_index": 4, "url": "https://trio.readthedocs.io", "title": "Trio"}
    server.add(response([{"type": "message", "role": "assistant", "content": [{"type": "output_text", "text": "Trio is async.", "annotations": [annotation]}]}]))
    agent = await spawn(node, server, PROTOCOL, stream=False)
    assert await agent.run("What is trio?") == "Trio is async."
    [_, answer] = await agent.history()
    assert answer.content[0].citations == (Citation("url_citation", None, "https://trio.readthedocs.io", "Trio"),)  # type: ignore[union-attr]
