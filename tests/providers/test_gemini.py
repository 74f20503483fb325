"""Gemini's generateContent wire format end to end, through a real Agent and the local server.

The request and response shapes are those of the public API reference
(``models.generateContent`` / ``models.streamGenerateContent``); retries,
stalls and in-stream errors are covered with the other protocols in
test_faults.py.
"""

from __future__ import annotations

import base64
import json
from pathlib import Path

import pytest

import condukt
from condukt.events import TextDelta, ThinkingDelta, ToolCallStart
from condukt.messages import AssistantMessage, ImageBlock, StopReason, ThinkingBlock, ToolCall, Usage
from condukt.providers import AuthenticationFailed, InvalidResponse, MissingApiKey, ModelRefused, StreamError
from condukt.testing.server import Fault, ProtocolServer, Raw, Status, reply, tool_use

from .helpers import API_KEY, Weather, collect, spawn

streaming = pytest.mark.parametrize("stream", [True, False], ids=["stream", "plain"])


@streaming
async def test_plain_answer(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(reply("Hello there, human."))
    agent = await spawn(node, server, "gemini", stream=stream, system_prompt="Be brief.")
    assert await agent.run("Say hello") == "Hello there, human."
    [request] = server.requests
    method = "streamGenerateContent?alt=sse" if stream else "generateContent"
    assert request.path == f"/v1beta/models/test-model:{method}"
    assert request.headers["x-goog-api-key"] == API_KEY
    assert "authorization" not in request.headers
    assert request.body == {
        "systemInstruction": {"parts": [{"text": "Be brief."}]},
        "contents": [{"role": "user", "parts": [{"text": "Say hello"}]}],
    }
    [*_, answer] = await agent.history()
    assert isinstance(answer, AssistantMessage)
    assert answer.text == "Hello there, human." and answer.stop_reason == StopReason.END_TURN
    assert answer.model == "test-model"


@streaming
async def test_tool_call_round_trip(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Paris"}, id="fc_1")), reply("It is 70F in Paris."))
    agent = await spawn(node, server, "gemini", stream=stream, tools=[Weather])
    assert await agent.run("Weather in Paris?") == "It is 70F in Paris."
    first, second = server.requests
    assert first.body["tools"] == [
        {
            "functionDeclarations": [
                {"name": "get_weather", "description": Weather.description, "parametersJsonSchema": Weather.parameters}
            ]
        }
    ]
    assert second.body["contents"][1:] == [
        {
            "role": "model",
            # The thought signature goes back on the part it came with.
            "parts": [
                {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}, "id": "fc_1"}, "thoughtSignature": "sig-abc"}
            ],
        },
        {
            "role": "user",
            "parts": [{"functionResponse": {"name": "get_weather", "response": {"output": "Temperature: 70F in Paris"}, "id": "fc_1"}}],
        },
    ]
    history = await agent.history()
    assert history[1].stop_reason == StopReason.TOOL_USE


@streaming
async def test_parallel_calls_answer_in_one_turn_in_call_order(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(
        reply(tools=[tool_use("get_weather", {"location": "Paris"}, id="a1"), tool_use("get_weather", {"location": "Oslo"}, id="a2")]),
        reply("Both 70F."),
    )
    agent = await spawn(node, server, "gemini", stream=stream, tools=[Weather])
    events, result = await collect(agent, "Paris and Oslo?")
    assert result.result == "Both 70F."
    assert sorted(e.id for e in events if isinstance(e, ToolCallStart)) == ["a1", "a2"]
    contents = server.requests[1].body["contents"]
    assert [c["role"] for c in contents] == ["user", "model", "user"]
    assert [p["functionCall"]["id"] for p in contents[1]["parts"]] == ["a1", "a2"]
    assert [(p["functionResponse"]["id"], p["functionResponse"]["response"]["output"]) for p in contents[2]["parts"]] == [
        ("a1", "Temperature: 70F in Paris"),
        ("a2", "Temperature: 70F in Oslo"),
    ]


async def test_calls_without_ids_get_local_ids_that_are_not_sent_back(node: condukt.Node, server: ProtocolServer) -> None:
    server.gemini_call_ids = False  # as older Gemini models answer
    server.add(
        reply(tools=[tool_use("get_weather", {"location": "Rome"}), tool_use("get_weather", {"location": "Bern"})]),
        reply("Done."),
    )
    agent = await spawn(node, server, "gemini", tools=[Weather])
    events, result = await collect(agent, "Rome and Bern?")
    assert result.result == "Done."
    ids = [e.id for e in events if isinstance(e, ToolCallStart)]
    assert len(set(ids)) == 2 and all(ids)
    contents = server.requests[1].body["contents"]
    assert [p["functionCall"] for p in contents[1]["parts"]] == [
        {"name": "get_weather", "args": {"location": "Rome"}},
        {"name": "get_weather", "args": {"location": "Bern"}},
    ]
    assert [p["functionResponse"] for p in contents[2]["parts"]] == [
        {"name": "get_weather", "response": {"output": "Temperature: 70F in Rome"}},
        {"name": "get_weather", "response": {"output": "Temperature: 70F in Bern"}},
    ]


async def test_a_failing_tool_is_reported_as_an_error_response(node: condukt.Node, server: ProtocolServer) -> None:
    @condukt.tool
    async def explode(reason: str) -> str:
        """Always fails."""
        raise RuntimeError(f"boom: {reason}")

    server.add(reply(tools=tool_use("explode", {"reason": "test"}, id="e1")), reply("It failed."))
    agent = await spawn(node, server, "gemini", tools=[explode])
    assert await agent.run("Try it") == "It failed."
    [part] = server.requests[1].body["contents"][2]["parts"]
    response = part["functionResponse"]["response"]
    assert list(response) == ["error"] and "boom: test" in response["error"]


async def test_thinking_streams_and_only_the_signature_goes_back(node: condukt.Node, server: ProtocolServer) -> None:
    thinking = "The user asks about Paris; the tool knows."
    server.add(
        reply("Checking.", thinking=thinking, tools=tool_use("get_weather", {"location": "Paris"}, id="t1")),
        reply("70F."),
    )
    agent = await spawn(node, server, "gemini", tools=[Weather], thinking_level="medium")
    events, result = await collect(agent, "Weather?")
    assert result.result == "70F."
    assert "".join(e.text for e in events if isinstance(e, ThinkingDelta)) == thinking
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "Checking.70F."
    first, second = server.requests
    assert first.body["generationConfig"] == {"thinkingConfig": {"thinkingBudget": 8192, "includeThoughts": True}}
    history = await agent.history()
    blocks = history[1].content
    assert blocks[0] == ThinkingBlock(thinking, None, None, "gemini")
    assert [type(b).__name__ for b in blocks] == ["ThinkingBlock", "TextBlock", "ThinkingBlock", "ToolCall"]
    assert second.body["contents"][1]["parts"] == [
        {"text": "Checking."},
        {"functionCall": {"name": "get_weather", "args": {"location": "Paris"}, "id": "t1"}, "thoughtSignature": "sig-abc"},
    ]


async def test_gemini_3_models_take_a_thinking_level_and_max_tokens(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("ok"))
    agent: condukt.AgentHandle = await node.spawn(
        condukt.Agent,
        model="gemini:gemini-3-pro-preview",
        api_key=API_KEY,
        base_url=server.url,
        thinking_level="low",
        model_options={"max_tokens": 1000},
    )
    assert await agent.run("hi") == "ok"
    [request] = server.requests
    assert request.path.startswith("/v1beta/models/gemini-3-pro-preview:")
    assert request.body["generationConfig"] == {"maxOutputTokens": 1000, "thinkingConfig": {"thinkingLevel": "low", "includeThoughts": True}}


async def test_images_from_a_tool_follow_its_response(node: condukt.Node, server: ProtocolServer, tmp_path: Path) -> None:
    png = b"\x89PNG\r\n\x1a\n" + bytes(range(32))
    (tmp_path / "pixel.png").write_bytes(png)
    server.add(reply(tools=tool_use("read", {"path": "pixel.png"}, id="r1")), reply("A tiny image."))
    agent = await spawn(node, server, "gemini", tools=[condukt.tools.Read], cwd=str(tmp_path))
    assert await agent.run("What is in pixel.png?") == "A tiny image."
    response, image = server.requests[1].body["contents"][2]["parts"]
    assert response["functionResponse"]["id"] == "r1"
    assert image == {"inlineData": {"mimeType": "image/png", "data": base64.b64encode(png).decode()}}


async def test_an_image_the_model_answers_with_is_kept_and_sent_back(node: condukt.Node, server: ProtocolServer) -> None:
    image = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}
    body = {"candidates": [{"content": {"role": "model", "parts": [{"text": "Here:"}, image]}, "finishReason": "STOP"}]}
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"), reply("Done."))
    agent = await spawn(node, server, "gemini", stream=False)
    assert await agent.run("Draw a pixel") == "Here:"
    [_, answer] = await agent.history()
    assert answer.content[1] == ImageBlock("image/png", "iVBORw0KGgo=")
    await agent.run("Thanks")
    assert server.requests[1].body["contents"][1]["parts"] == [{"text": "Here:"}, image]


@pytest.mark.parametrize(
    "inline",
    [{}, {"mimeType": "", "data": "iVBORw0KGgo="}, {"mimeType": "image/png"}, {"mimeType": "image/png", "data": 7}, []],
    ids=["empty", "empty-type", "no-data", "data-not-a-string", "not-an-object"],
)
async def test_a_malformed_image_part_is_an_invalid_response(node: condukt.Node, server: ProtocolServer, inline: object) -> None:
    # Never an ImageBlock with empty fields that the next request would send back.
    body = {"candidates": [{"content": {"role": "model", "parts": [{"inlineData": inline}]}, "finishReason": "STOP"}]}
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"))
    agent = await spawn(node, server, "gemini", model_options={"stream": False, "retry": False})
    with pytest.raises(InvalidResponse, match="inlineData"):
        await agent.run("Draw a pixel")
    assert not await agent.history()


async def test_usage_counts_cached_and_thought_tokens(node: condukt.Node, server: ProtocolServer) -> None:
    body = {
        "candidates": [{"content": {"role": "model", "parts": [{"text": "Cached."}]}, "finishReason": "STOP"}],
        "usageMetadata": {"promptTokenCount": 1200, "cachedContentTokenCount": 1000, "candidatesTokenCount": 7, "thoughtsTokenCount": 30},
        "modelVersion": "gemini-2.5-flash-001",
    }
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"))
    agent = await spawn(node, server, "gemini", stream=False)
    assert await agent.run("hi") == "Cached."
    [*_, answer] = await agent.history()
    assert answer.usage == Usage(input_tokens=200, output_tokens=37, cache_read_tokens=1000)
    assert answer.model == "gemini-2.5-flash-001"


@pytest.mark.parametrize(
    "body",
    [
        {"candidates": [{"finishReason": "SAFETY", "safetyRatings": [{"category": "HARM_CATEGORY_DANGEROUS_CONTENT", "probability": "HIGH"}]}]},
        {"promptFeedback": {"blockReason": "PROHIBITED_CONTENT"}, "usageMetadata": {"promptTokenCount": 5}},
    ],
    ids=["answer-blocked", "prompt-blocked"],
)
async def test_blocked_answers_raise_model_refused(node: condukt.Node, server: ProtocolServer, body: dict[str, object]) -> None:
    server.add(Raw(json.dumps(body).encode(), content_type="application/json"))
    agent = await spawn(node, server, "gemini", stream=False)
    with pytest.raises(ModelRefused) as info:
        await agent.run("something dangerous")
    assert info.value.stop_reason == StopReason.CONTENT_FILTER
    assert len(server.requests) == 1  # not retried
    assert not await agent.history()  # the refused run left nothing behind


async def test_a_streamed_safety_stop_raises_model_refused(node: condukt.Node, server: ProtocolServer) -> None:
    frames = [
        {"candidates": [{"content": {"role": "model", "parts": [{"text": "Here is how to"}]}}]},
        {"candidates": [{"content": {"role": "model", "parts": []}, "finishReason": "SAFETY"}]},
    ]
    server.add(Raw(b"".join(b"data: " + json.dumps(f).encode() + b"\r\n\r\n" for f in frames)))
    agent = await spawn(node, server, "gemini")
    with pytest.raises(ModelRefused):
        await agent.run("something dangerous")


async def test_a_stream_without_a_finish_reason_is_a_stream_error(node: condukt.Node, server: ProtocolServer) -> None:
    # The whole body arrived but stopped short of the last chunk: not an answer.
    server.add(Fault(reply("Half an answer"), after=1, kind="drop"))
    agent = await spawn(node, server, "gemini", model_options={"stream": True, "retry": False})
    with pytest.raises(StreamError):
        await agent.run("hi")


async def test_an_invalid_key_is_an_authentication_error(node: condukt.Node, server: ProtocolServer) -> None:
    # Google answers a bad key with a 400 whose ErrorInfo reason says so.
    body = {
        "error": {
            "code": 400,
            "message": "API key not valid. Please pass a valid API key.",
            "status": "INVALID_ARGUMENT",
            "details": [{"@type": "type.googleapis.com/google.rpc.ErrorInfo", "reason": "API_KEY_INVALID", "domain": "googleapis.com"}],
        }
    }
    server.add(Raw(json.dumps(body).encode(), content_type="application/json", status=400))
    agent = await spawn(node, server, "gemini")
    with pytest.raises(AuthenticationFailed) as info:
        await agent.run("hi")
    assert "API key not valid" in str(info.value) and len(server.requests) == 1


async def test_rate_limits_are_retried(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(429, "Resource has been exhausted", headers=(("retry-after", "0.1"),)), reply("Made it."))
    agent = await spawn(node, server, "gemini")
    assert await agent.run("hi") == "Made it."
    assert len(server.requests) == 2


async def test_the_key_comes_from_either_environment_variable(node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("GEMINI_API_KEY", raising=False)
    monkeypatch.delenv("GOOGLE_API_KEY", raising=False)
    with pytest.raises(MissingApiKey, match="GEMINI_API_KEY"):
        await node.spawn(condukt.Agent, model="gemini:gemini-2.5-flash", base_url=server.url)
    monkeypatch.setenv("GOOGLE_API_KEY", "google-key")
    agent: condukt.AgentHandle = await node.spawn(condukt.Agent, model="gemini:gemini-2.5-flash", base_url=server.url)
    await agent.run("hi")
    assert server.requests[-1].headers["x-goog-api-key"] == "google-key"
    monkeypatch.setenv("GEMINI_API_KEY", "gemini-key")
    agent = await node.spawn(condukt.Agent, model="gemini:gemini-2.5-flash", base_url=server.url)
    await agent.run("hi")
    assert server.requests[-1].headers["x-goog-api-key"] == "gemini-key"


async def test_a_gemini_history_sent_to_anthropic_drops_gemini_signatures(node: condukt.Node, server: ProtocolServer) -> None:
    # A fallback from Gemini to Claude mid-conversation: Claude must not get Gemini's tokens as its own.
    server.add(reply("Checking.", thinking="hm", tools=tool_use("get_weather", {"location": "Oslo"}, id="x1")), reply("Cold."))
    gemini = await spawn(node, server, "gemini", tools=[Weather], thinking_level="low")
    await gemini.run("Oslo?")
    history = await gemini.history()
    assert any(isinstance(b, ThinkingBlock) and b.signature == "sig-abc" for b in history[1].content)
    assert any(isinstance(b, ToolCall) for b in history[1].content)
    model = condukt.providers.resolve_model("anthropic:claude-test", api_key=API_KEY, base_url=server.url, node=node)
    body = json.loads(model.encode_request(condukt.providers.ModelRequest(None, tuple(history))))  # type: ignore[attr-defined]
    assistant = body["messages"][1]["content"]
    assert [b["type"] for b in assistant] == ["text", "tool_use"]
