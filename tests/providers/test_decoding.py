"""Malformed but parseable responses, refusals, empty prompts, stop reasons and error signals, end to end.

Each protocol, streamed and not, through a real agent and the local server
(:class:`~tests.providers.server.Raw` bodies built from the server's own
responses with one field broken). Before total decoding most of these
killed the agent with a ``TypeError``/``ValueError``/``OverflowError``/
``RecursionError`` instead of failing the run with a typed error.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import pytest

import condukt
from condukt.events import Retry
from condukt.messages import StopReason
from condukt.providers import (
    AnthropicModel,
    EmptyPrompt,
    InvalidRequest,
    InvalidResponse,
    ModelRefused,
    OpenAIModel,
    ProviderError,
    ProviderUnavailable,
    RateLimited,
)
from condukt.testing.server import (
    ProtocolServer,
    Raw,
    Reply,
    Status,
    anthropic_body,
    anthropic_frames,
    openai_body,
    openai_frames,
    reply,
    tool_use,
)

from . import shapes
from .helpers import PROTOCOLS, Weather, collect, spawn

both = pytest.mark.parametrize("protocol", PROTOCOLS)
each = pytest.mark.parametrize(
    "protocol,stream", [(p, s) for p in PROTOCOLS for s in (False, True)], ids=lambda v: str(v)
)

Entries = list[tuple[str, Any]]


def entries(protocol: str, stream: bool, step: Reply) -> Entries:
    """The response for ``step`` as ``[(event, JSON)]``: one entry for a body, one per SSE frame."""
    if not stream:
        return [("", (anthropic_body if protocol == "anthropic" else openai_body)(step, "test-model"))]
    out: Entries = []
    for frame in (anthropic_frames if protocol == "anthropic" else openai_frames)(step, "test-model"):
        text = frame.decode()
        event = text.split("\n", 1)[0].removeprefix("event: ") if text.startswith("event: ") else ""
        data = text.split("data: ", 1)[1].strip()
        out.append((event, data if data == "[DONE]" else json.loads(data)))
    return out


def render(protocol: str, stream: bool, items: Entries) -> Raw:
    if not stream:
        return Raw(shapes.dumps(items[0][1]), "application/json")
    return Raw(shapes.stream(protocol, items))


def broken(
    protocol: str,
    stream: bool,
    pick: Callable[[str, Any], tuple[Any, ...] | None],
    value: Any,
    step: Reply | None = None,
) -> Raw:
    """The response with ``value`` at the path ``pick(event, document)`` gives in every entry it picks."""
    items = entries(protocol, stream, step or reply("Hello there", chunk=4))
    for index, (event, document) in enumerate(items):
        path = pick(event, document) if isinstance(document, dict) else None
        if path is not None:
            items[index] = (event, shapes.mutate(document, path, value))
    return render(protocol, stream, items)


def usage_field(event: str, document: Any) -> tuple[Any, ...] | None:
    if "choices" in document or "object" in document:  # OpenAI: the body, or the usage chunk
        return ("usage", "completion_tokens") if document.get("usage") else None
    if document.get("type") == "message_delta":
        return ("usage", "output_tokens")
    return ("usage", "output_tokens") if document.get("type") == "message" else None


def text_field(event: str, document: Any) -> tuple[Any, ...] | None:
    if document.get("type") == "message":
        return ("content", 0, "text")
    if document.get("type") == "content_block_delta":
        return ("delta", "text")
    if document.get("object") == "chat.completion":
        return ("choices", 0, "message", "content")
    choices = document.get("choices")
    if choices and choices[0]["delta"].get("content"):
        return ("choices", 0, "delta", "content")
    return None


# ---------------------------------------------------------------------------- malformed responses


@each
@pytest.mark.parametrize("value", ["abc", shapes.Raw("Infinity"), shapes.Raw("1e999"), -3, 2.5], ids=repr)
async def test_a_bad_usage_count_is_an_invalid_response(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool, value: Any
) -> None:
    server.add(broken(protocol, stream, usage_field, value))
    agent = await spawn(node, server, protocol, stream=stream, model_options={"retry": False})
    with pytest.raises(InvalidResponse, match=r"usage\.(output|completion)_tokens: expected a token count"):
        await agent.run("hi")
    assert agent.alive
    server.add(reply("still here"))
    assert await agent.run("again") == "still here"


@each
@pytest.mark.parametrize("value", [42, 1.5, ["a"], {"text": "a"}], ids=repr)
async def test_text_that_is_not_a_string_is_an_invalid_response(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool, value: Any
) -> None:
    server.add(broken(protocol, stream, text_field, value))
    agent = await spawn(node, server, protocol, stream=stream, model_options={"retry": False})
    with pytest.raises(InvalidResponse, match="expected (a string|an object)"):
        await agent.run("hi")
    assert agent.alive


@each
async def test_deeply_nested_json_is_an_invalid_response(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool
) -> None:
    server.add(broken(protocol, stream, text_field, shapes.deep(100_000)))
    agent = await spawn(node, server, protocol, stream=stream, model_options={"retry": False})
    with pytest.raises(InvalidResponse, match="nested too deeply"):
        await agent.run("hi")
    assert agent.alive


@each
async def test_tool_arguments_nested_too_deep_are_an_invalid_response(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool
) -> None:
    # Deep enough to break re-encoding and validation later, shallow enough to parse.
    arguments: Any = {"location": "Paris"}
    for _ in range(900):
        arguments = {"a": arguments}
    server.add(render(protocol, stream, entries(protocol, stream, reply(tools=tool_use("get_weather", arguments)))))
    agent = await spawn(node, server, protocol, stream=stream, tools=[Weather], model_options={"retry": False})
    with pytest.raises(InvalidResponse, match="nested deeper than 64 levels"):
        await agent.run("hi")
    assert agent.alive


@pytest.mark.parametrize("stream", [False, True])
async def test_openai_tool_arguments_sent_as_an_object_are_taken_as_they_are(
    node: condukt.Node, server: ProtocolServer, stream: bool
) -> None:
    items = entries("openai", stream, reply(tools=tool_use("get_weather", {"location": "Paris"}, id="call_1")))
    for index, (event, document) in enumerate(items):
        choice = document["choices"][0] if isinstance(document, dict) and document.get("choices") else {}
        key = "message" if "message" in choice else "delta"
        calls = choice.get(key, {}).get("tool_calls")
        if calls:
            # The whole call (or its first fragment) carries an object; the string fragments after it go.
            value = {"location": "Paris"} if "id" in calls[0] else ""
            path = ("choices", 0, key, "tool_calls", 0, "function", "arguments")
            items[index] = (event, shapes.mutate(document, path, value))
    server.add(render("openai", stream, items), reply("It is warm."))
    agent = await spawn(node, server, "openai", stream=stream, tools=[Weather])
    assert await agent.run("Weather in Paris?") == "It is warm."
    tool_message = [m for m in server.requests[1].messages if m.get("role") == "tool"]
    assert tool_message[0]["content"] == "Temperature: 70F in Paris"


# ---------------------------------------------------------------------------- refusals


def _openai_refusal(stream: bool, refusal: str) -> Raw:
    if not stream:
        body = openai_body(reply(), "test-model")
        body["choices"][0]["message"] = {"role": "assistant", "content": None, "refusal": refusal}
        return Raw(shapes.dumps(body), "application/json")
    frames: Entries = [
        ("", {"choices": [{"index": 0, "delta": {"role": "assistant", "content": None, "refusal": ""}}]})
    ]
    for piece in (refusal[:10], refusal[10:]):
        frames.append(("", {"choices": [{"index": 0, "delta": {"refusal": piece}, "finish_reason": None}]}))
    frames.append(("", {"choices": [{"index": 0, "delta": {}, "finish_reason": "stop"}]}))
    frames.append(("", "[DONE]"))
    return Raw(shapes.stream("openai", frames))


@pytest.mark.parametrize("stream", [False, True])
async def test_an_openai_refusal_fails_the_run_with_the_refusal(
    node: condukt.Node, server: ProtocolServer, stream: bool
) -> None:
    server.add(_openai_refusal(stream, "I'm sorry, I can't help with that."))
    agent = await spawn(node, server, "openai", stream=stream)
    with pytest.raises(ModelRefused, match="refused to answer: I'm sorry, I can't help with that.") as info:
        await agent.run("Something bad")
    assert info.value.stop_reason == StopReason.REFUSAL and not info.value.retryable
    assert info.value.response.text == "I'm sorry, I can't help with that."
    assert len(server.requests) == 1


@pytest.mark.parametrize("stream", [False, True])
async def test_a_structured_run_refused_says_so(node: condukt.Node, server: ProtocolServer, stream: bool) -> None:
    server.add(_openai_refusal(stream, "No."))
    agent = await spawn(node, server, "openai", stream=stream)
    with pytest.raises(ModelRefused, match="No."):
        await agent.run("Review it", output={"type": "object", "properties": {"ok": {"type": "boolean"}}})


@each
async def test_a_content_filter_or_refusal_stop_reason_fails_the_run(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool
) -> None:
    reason = "refusal" if protocol == "anthropic" else "content_filter"

    def stop(event: str, document: Any) -> tuple[Any, ...] | None:
        if document.get("type") == "message":
            return ("stop_reason",)
        if document.get("type") == "message_delta":
            return ("delta", "stop_reason")
        choices = document.get("choices")
        return ("choices", 0, "finish_reason") if choices and choices[0].get("finish_reason") else None

    server.add(broken(protocol, stream, stop, reason))
    agent = await spawn(node, server, protocol, stream=stream)
    with pytest.raises(ModelRefused) as info:
        await agent.run("hi")
    assert info.value.stop_reason == reason
    assert info.value.response.text == "Hello there"  # what came before the filter, kept on the error only


# ---------------------------------------------------------------------------- empty prompts


@each
@pytest.mark.parametrize("prompt", ["", "  \n"], ids=repr)
async def test_an_empty_prompt_is_refused_before_any_request(
    node: condukt.Node, server: ProtocolServer, protocol: str, stream: bool, prompt: str
) -> None:
    # "" is refused by the handle already; whitespace (a 400 from Anthropic) by the model.
    agent = await spawn(node, server, protocol, stream=stream)
    with pytest.raises(ValueError, match="empty"):
        await agent.run(prompt)
    assert server.requests == []
    assert await agent.run("now something") == "ok"


@both
async def test_an_empty_steer_or_request_is_an_empty_prompt(protocol: str) -> None:
    model = _anthropic() if protocol == "anthropic" else _openai()

    async def emit(event: Any) -> None:
        raise AssertionError("nothing is sent")

    for messages in [(), (condukt.messages.UserMessage.from_text(" "),)]:
        with pytest.raises(EmptyPrompt, match="the prompt is empty") as info:
            await model.complete(condukt.ModelRequest(None, messages), emit)
        assert isinstance(info.value, ValueError) and isinstance(info.value, InvalidRequest)


# ---------------------------------------------------------------------------- stop reasons


def _anthropic() -> AnthropicModel:
    return AnthropicModel("m", api_key="k", base_url="http://127.0.0.1:9")


def _openai() -> OpenAIModel:
    return OpenAIModel("m", api_key="k", base_url="http://127.0.0.1:9/v1")


@pytest.mark.parametrize(
    "wire,expected",
    [
        ("end_turn", StopReason.END_TURN),
        ("tool_use", StopReason.TOOL_USE),
        ("max_tokens", StopReason.MAX_TOKENS),
        ("stop_sequence", StopReason.STOP_SEQUENCE),
        ("pause_turn", StopReason.PAUSE_TURN),
        ("refusal", StopReason.REFUSAL),
        ("model_context_window_exceeded", StopReason.MAX_TOKENS),
        ("something_new", StopReason.OTHER),
        (None, StopReason.END_TURN),
    ],
)
def test_anthropic_stop_reasons(wire: str | None, expected: StopReason) -> None:
    body = anthropic_body(reply("x"), "m")
    body["stop_reason"] = wire
    message = _anthropic().decode_response(json.dumps(body).encode())
    assert message.stop_reason is expected
    frames = [
        f.replace(b'"stop_reason":"end_turn"', json.dumps({"stop_reason": wire}).encode()[1:-1])
        for f in anthropic_frames(reply("x"), "m")
    ]
    assert _anthropic().decode_stream(frames)[1].stop_reason is expected


@pytest.mark.parametrize(
    "wire,expected",
    [
        ("stop", StopReason.END_TURN),
        ("tool_calls", StopReason.TOOL_USE),
        ("function_call", StopReason.TOOL_USE),
        ("length", StopReason.MAX_TOKENS),
        ("content_filter", StopReason.CONTENT_FILTER),
        ("abort", StopReason.OTHER),
        (None, StopReason.END_TURN),
    ],
)
def test_openai_finish_reasons(wire: str | None, expected: StopReason) -> None:
    body = openai_body(reply("x"), "m")
    body["choices"][0]["finish_reason"] = wire
    assert _openai().decode_response(json.dumps(body).encode()).stop_reason is expected
    frames = [
        f.replace(b'"finish_reason":"stop"', json.dumps({"finish_reason": wire}).encode()[1:-1])
        for f in openai_frames(reply("x"), "m")
    ]
    assert _openai().decode_stream(frames)[1].stop_reason is expected


def test_stop_reasons_are_strings_that_serialise_as_their_value() -> None:
    message = _openai().decode_response(json.dumps(openai_body(reply("x"), "m")).encode())
    assert message.stop_reason == "end_turn"
    restored = condukt.serialization.loads(condukt.serialization.dumps(message), condukt.messages.AssistantMessage)
    assert restored == message


# ---------------------------------------------------------------------------- error signals


def _sse_error(protocol: str, error: dict[str, Any]) -> Raw:
    event = "error" if protocol == "anthropic" else ""
    return Raw(shapes.frame(protocol, event, error))


@pytest.mark.parametrize(
    "error",
    [
        {"error": {"message": "boom", "type": "server_error", "param": None, "code": None}},  # OpenAI
        {"error": {"message": "boom", "code": 503}},  # OpenRouter: the status as a numeric code
        {"error": {"message": "boom", "type": "None", "param": "None", "code": "500"}},  # LiteLLM
        {"object": "error", "message": "boom", "type": "InternalServerError", "param": None, "code": 500},  # vLLM < 0.9
        {"error": {"message": "boom", "type": "ServiceUnavailableError", "code": None}},  # LiteLLM class names
    ],
    ids=["openai", "numeric-code", "litellm", "vllm", "class-name"],
)
async def test_a_retryable_error_chunk_in_an_openai_stream_is_retried(
    node: condukt.Node, server: ProtocolServer, error: dict[str, Any]
) -> None:
    server.add(_sse_error("openai", error), reply("ok"))
    agent = await spawn(node, server, "openai")
    events, stream = await collect(agent, "hi")
    assert stream.result == "ok"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert "boom" in retry.reason


async def test_an_anthropic_overloaded_event_after_message_start_is_retried(
    node: condukt.Node, server: ProtocolServer
) -> None:
    start = anthropic_frames(reply("x"), "test-model")[0]
    error = shapes.frame(
        "anthropic", "error", {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    )
    server.add(Raw(start + error), reply("ok"))
    agent = await spawn(node, server, "anthropic")
    events, stream = await collect(agent, "hi")
    assert stream.result == "ok"
    assert [e.attempt for e in events if isinstance(e, Retry)] == [1]


@both
async def test_a_rate_limit_code_in_a_stream_is_rate_limited(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    error = {"type": "error", "error": {"message": "slow down", "code": "429"}}
    server.add(_sse_error(protocol, error))
    agent = await spawn(node, server, protocol, model_options={"retry": False})
    with pytest.raises(RateLimited, match="slow down"):
        await agent.run("hi")


@both
async def test_an_exhausted_quota_is_not_retried(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Status(429, "You exceeded your current quota", "insufficient_quota"), reply("never"))
    agent = await spawn(node, server, protocol)
    with pytest.raises(ProviderError, match="quota") as info:
        await agent.run("hi")
    assert not info.value.retryable and not isinstance(info.value, RateLimited)
    assert len(server.requests) == 1


@both
async def test_a_404_is_not_retried_whatever_its_error_type(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    # Ollama: {"error": {"type": "api_error", "message": "model \"x\" not found"}} with a 404.
    server.add(Status(404, 'model "x" not found', "api_error"), reply("never"))
    agent = await spawn(node, server, protocol)
    with pytest.raises(InvalidRequest, match="not found"):
        await agent.run("hi")
    assert len(server.requests) == 1


@both
async def test_an_error_body_with_a_200_is_typed(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    body = {"type": "error", "error": {"type": "overloaded_error", "message": "Overloaded"}}
    server.add(Raw(json.dumps(body).encode(), "application/json"), reply("ok"))
    agent = await spawn(node, server, protocol, stream=False)
    assert await agent.run("hi") == "ok"
    assert len(server.requests) == 2


def test_error_bodies_of_any_shape_give_a_typed_error() -> None:
    model = _openai()
    for payload in [
        None,
        1,
        "x",
        [],
        {"error": None},
        {"error": [1]},
        {"error": {"message": {"deep": [1]}}},
        {"detail": 5},
    ]:
        assert isinstance(model.error_event(payload), ProviderError)
    assert isinstance(model.error_event({"error": {"code": 503}}), ProviderUnavailable)


def test_openai_content_sent_as_parts_is_joined() -> None:
    body = openai_body(reply(), "m")
    parts = [
        {"type": "text", "text": "Hel"},
        {"type": "image_url", "image_url": {"url": "x"}},
        {"type": "text", "text": "lo"},
    ]
    body["choices"][0]["message"]["content"] = parts
    assert _openai().decode_response(json.dumps(body).encode()).text == "Hello"
