"""Decoding is total: any response a server can send is a message or a ProviderError, never another exception.

Hypothesis takes a real response of each protocol (plain JSON, or every SSE
frame of a stream), puts arbitrary JSON values, raw JSON text (``1e999``,
``Infinity``, deep nesting) or nothing at any of its paths, for streams also
drops, repeats or garbles frames, cuts the body into arbitrary chunks, and
feeds it to the model's decoding boundary (``decode_response`` /
``decode_stream``, what ``complete`` runs on the bytes it receives).

The default suite runs the same 100 examples per test on every run
(``derandomize``): a suite that draws new ones each time fails, once in a
while, on whatever rare input it drew (a Gemini image part with empty fields
did, 1 run in 8, before the decoder refused it), which reads as a flake.
Exploring is the dedicated run's job: setting ``CONDUKT_DECODING_EXAMPLES``
draws that many fresh examples per protocol and mode, e.g.::

    CONDUKT_DECODING_EXAMPLES=10000 pytest tests/providers/test_decoding_properties.py
"""

from __future__ import annotations

import json
import os
from typing import Any

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from condukt import serialization
from condukt.events import TextDelta, ThinkingDelta, ToolCallDelta
from condukt.messages import (
    AssistantMessage,
    ImageBlock,
    ProviderBlock,
    StopReason,
    TextBlock,
    ThinkingBlock,
    ToolCall,
    ToolResultMessage,
    UserMessage,
)
from condukt.providers import (
    AnthropicModel,
    GeminiModel,
    ModelRequest,
    OpenAIModel,
    OpenAIResponsesModel,
    ProviderError,
)
from condukt.providers.lowlevel import HttpModel

from . import shapes

EXPLORING = "CONDUKT_DECODING_EXAMPLES" in os.environ
EXAMPLES = int(os.environ.get("CONDUKT_DECODING_EXAMPLES", "100"))
DECODING = settings(
    max_examples=EXAMPLES,
    derandomize=not EXPLORING,
    deadline=None,
    database=None,
    suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large],
)

#: Words of both protocols, so that mutated ``type`` fields reach every branch.
WORDS = [
    "text", "thinking", "redacted_thinking", "tool_use", "server_tool_use", "text_delta", "input_json_delta",
    "thinking_delta", "signature_delta", "message_start", "message_delta", "message_stop", "content_block_start",
    "content_block_delta", "content_block_stop", "ping", "error", "overloaded_error", "server_error",
    "rate_limit_exceeded", "insufficient_quota", "stop", "length", "tool_calls", "content_filter", "refusal",
    "pause_turn", "end_turn", "max_tokens", "[DONE]", "function", "", "429", "503", "candidates", "content",
    "parts", "functionCall", "thought", "thoughtSignature", "inlineData", "finishReason", "STOP", "SAFETY",
    "MAX_TOKENS", "promptFeedback", "blockReason", "RESOURCE_EXHAUSTED", "UNAVAILABLE", "response.completed",
    "response.incomplete", "response.failed", "response.output_item.done", "response.output_text.delta",
    "response.reasoning_summary_text.delta", "message", "function_call", "reasoning", "output_text", "completed",
    "incomplete", "failed", "max_output_tokens",
]  # fmt: skip
RAW = [
    "1e999", "-1e999", "Infinity", "-Infinity", "NaN", "9" * 5000, "-0", "1.5", "12.0", '"abc"', '"\\ud800"',
    "[" * 5000 + "]" * 5000, '{"a":' * 3000 + "1" + "}" * 3000, "[" * 70 + "]" * 70, "{}", "[]", "null",
]  # fmt: skip

scalars = (
    st.none()
    | st.booleans()
    | st.integers()
    | st.integers(min_value=-(2**80), max_value=2**80)
    | st.floats()
    | st.text(max_size=12)
    | st.sampled_from(WORDS)
)
json_values = st.recursive(
    scalars,
    lambda children: (
        st.lists(children, max_size=3)
        | st.dictionaries(st.text(max_size=6) | st.sampled_from(WORDS), children, max_size=3)
    ),
    max_leaves=8,
)
replacements = (
    json_values
    | st.sampled_from(RAW).map(shapes.Raw)
    | st.integers(min_value=0, max_value=1500).map(shapes.deep)
    | st.just(shapes.DELETE)
)


def model(protocol: str) -> HttpModel:
    if protocol == "anthropic":
        return AnthropicModel("claude-test", api_key="k", base_url="http://127.0.0.1:9", stream=True)
    if protocol == "gemini":
        return GeminiModel("gemini-test", api_key="k", base_url="http://127.0.0.1:9", stream=True)
    if protocol == "openai-responses":
        return OpenAIResponsesModel("gpt-test", api_key="k", base_url="http://127.0.0.1:9/v1", stream=True)
    return OpenAIModel("gpt-test", api_key="k", base_url="http://127.0.0.1:9/v1", stream=True)


PROTOCOLS = ("anthropic", "openai", "gemini", "openai-responses")
MODELS = {protocol: model(protocol) for protocol in PROTOCOLS}
_TEMPLATE = {
    "anthropic": shapes.anthropic_template,
    "openai": shapes.openai_template,
    "gemini": shapes.gemini_template,
    "openai-responses": shapes.responses_template,
}
TEMPLATES = {(protocol, streamed): _TEMPLATE[protocol](streamed) for protocol in PROTOCOLS for streamed in (False, True)}


def check_message(model: HttpModel, message: AssistantMessage) -> None:
    """What the agent relies on: typed fields, and a message it can send back and store."""
    assert type(message) is AssistantMessage
    assert isinstance(message.stop_reason, StopReason)
    assert message.model is None or type(message.model) is str
    for count in (message.usage.input_tokens, message.usage.output_tokens, message.usage.cache_read_tokens):
        assert type(count) is int and count >= 0
    results = []
    for block in message.content:
        if type(block) is TextBlock:
            assert type(block.text) is str
        elif type(block) is ThinkingBlock:
            assert type(block.thinking) is str
            assert block.signature is None or type(block.signature) is str
            assert block.redacted is None or type(block.redacted) is str
        elif type(block) is ImageBlock:  # an image-capable Gemini model's output, sent back as inlineData
            assert model is MODELS["gemini"]
            assert type(block.media_type) is str and block.media_type and type(block.data) is str and block.data
        elif type(block) is ProviderBlock:  # a server tool's block, kept as JSON to send back
            assert type(block.kind) is str and block.kind and type(json.loads(block.data)) is dict
        else:
            assert type(block) is ToolCall
            assert type(block.id) is str and block.id and type(block.name) is str and block.name
            results.append(ToolResultMessage(block.id, block.name, (TextBlock("ok"),)))
    # The next turn re-encodes the message, and a session store serialises it.
    request = ModelRequest("sys", (UserMessage.from_text("hi"), message, *results, UserMessage.from_text("go on")))
    model.encode_request(request)
    serialization.dumps(message)


def decode_once(protocol: str, streamed: bool, document: Any, chunks: list[bytes] | None = None) -> None:
    decoder = MODELS[protocol]
    try:
        if streamed:
            deltas, message = decoder.decode_stream(chunks or [])
            assert all(
                type(d) in (TextDelta, ThinkingDelta)
                and type(d.text) is str
                or type(d) is ToolCallDelta
                and type(d.arguments) is str
                and type(d.name) is str
                for d in deltas
            )
        else:
            message = decoder.decode_response(shapes.dumps(document))
    except ProviderError:
        return
    check_message(decoder, message)


def split(data: bytes, cuts: list[int]) -> list[bytes]:
    points = sorted({cut % (len(data) + 1) for cut in cuts})
    return [data[a:b] for a, b in zip([0, *points], [*points, len(data)], strict=True)]


@st.composite
def broken_body(draw: st.DrawFn, protocol: str) -> Any:
    [(_, document)] = TEMPLATES[protocol, False]
    for _ in range(draw(st.integers(min_value=1, max_value=3))):
        path = draw(st.sampled_from(shapes.paths(document)))
        document = shapes.mutate(document, path, draw(replacements))
        if not isinstance(document, (dict, list)):
            break
    return document


@st.composite
def broken_stream(draw: st.DrawFn, protocol: str) -> list[bytes]:
    entries = list(TEMPLATES[protocol, True])
    for _ in range(draw(st.integers(min_value=0, max_value=3))):
        index = draw(st.integers(min_value=0, max_value=len(entries) - 1))
        event, document = entries[index]
        action = draw(st.sampled_from(["mutate", "mutate", "mutate", "drop", "repeat", "event", "garbage"]))
        if action == "mutate" and isinstance(document, (dict, list)):
            path = draw(st.sampled_from(shapes.paths(document)))
            entries[index] = (event, shapes.mutate(document, path, draw(replacements)))
        elif action == "drop":
            del entries[index]
            if not entries:
                break
        elif action == "repeat":
            entries.insert(index, entries[index])
        elif action == "event":
            entries[index] = (draw(st.sampled_from(WORDS)), document)
        elif action == "garbage":
            entries.insert(index, (event, shapes.Raw(draw(st.text(max_size=20)))))
    data = shapes.stream(protocol, entries)
    if draw(st.booleans()):
        data += draw(st.binary(max_size=16))
    cuts = draw(st.lists(st.integers(min_value=0, max_value=len(data)), max_size=8))
    return split(data, cuts)


@pytest.mark.parametrize("protocol", PROTOCOLS)
def test_the_templates_decode(protocol: str) -> None:
    [(_, body)] = TEMPLATES[protocol, False]
    message = MODELS[protocol].decode_response(shapes.dumps(body))
    assert message.text == "Hello there, world" and len(message.tool_calls) == 2
    deltas, streamed = MODELS[protocol].decode_stream([shapes.stream(protocol, TEMPLATES[protocol, True])])
    assert streamed.content == message.content and streamed.stop_reason == StopReason.TOOL_USE
    assert "".join(d.text for d in deltas if type(d) is TextDelta) == "Hello there, world"
    images = [block for block in message.content if type(block) is ImageBlock]
    assert images == ([ImageBlock("image/png", "iVBORw0KGgo=")] if protocol == "gemini" else [])


@pytest.mark.parametrize("protocol", PROTOCOLS)
@DECODING
@given(data=st.data())
def test_any_body_is_a_message_or_a_provider_error(protocol: str, data: st.DataObject) -> None:
    decode_once(protocol, False, data.draw(broken_body(protocol)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@DECODING
@given(data=st.data())
def test_any_stream_is_a_message_or_a_provider_error(protocol: str, data: st.DataObject) -> None:
    decode_once(protocol, True, None, data.draw(broken_stream(protocol)))


@pytest.mark.parametrize("protocol", PROTOCOLS)
@DECODING
@given(value=json_values)
def test_any_json_document_is_a_message_or_a_provider_error(protocol: str, value: Any) -> None:
    decode_once(protocol, False, value)
    decode_once(protocol, True, None, [shapes.frame(protocol, "message_start", value)])
