"""Anthropic's redacted thinking is kept and sent back unchanged (the API requires it)."""

from __future__ import annotations

import json

import condukt
from condukt.messages import AssistantMessage, TextBlock, ThinkingBlock, ToolCall, ToolResultMessage, UserMessage
from condukt.providers.anthropic import AnthropicModel
from condukt.providers.lowlevel import ServerSentEvent

SECRET_REASONING = "EmwKAhgBEgy3va3pzix/LafPsn4aDFIT2Xlxh0L5L8rLVyIwxtE3rAFBa8cr3qpP"


def model() -> AnthropicModel:
    return AnthropicModel("claude-test", api_key="k", base_url="http://127.0.0.1:1")


def test_a_response_with_redacted_thinking_keeps_it() -> None:
    message = model().parse_response(
        {
            "content": [
                {"type": "redacted_thinking", "data": SECRET_REASONING},
                {"type": "tool_use", "id": "t1", "name": "read", "input": {"path": "a"}},
            ],
            "usage": {"input_tokens": 3, "output_tokens": 4},
            "stop_reason": "tool_use",
        }
    )
    assert message.content[0] == ThinkingBlock("", None, SECRET_REASONING)


async def test_a_streamed_redacted_thinking_block_is_kept() -> None:
    owner = model()
    stream = owner.stream_assembler()
    events = [
        ("message_start", {"type": "message_start", "message": {"model": "claude-test", "usage": {}}}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 0,
             "content_block": {"type": "redacted_thinking", "data": SECRET_REASONING}},
        ),
        ("content_block_stop", {"type": "content_block_stop", "index": 0}),
        (
            "content_block_start",
            {"type": "content_block_start", "index": 1, "content_block": {"type": "text", "text": ""}},
        ),
        (
            "content_block_delta",
            {"type": "content_block_delta", "index": 1, "delta": {"type": "text_delta", "text": "ok"}},
        ),
        ("message_stop", {"type": "message_stop"}),
    ]

    async def emit(event: object) -> None:
        pass

    for name, data in events:
        await stream.feed(ServerSentEvent(name, json.dumps(data)), emit)
    message = stream.finish()
    assert message.content == (ThinkingBlock("", None, SECRET_REASONING), TextBlock("ok"))


def test_redacted_thinking_goes_back_in_the_next_request() -> None:
    history = (
        UserMessage.from_text("read a"),
        AssistantMessage((ThinkingBlock("", None, SECRET_REASONING), ToolCall("t1", "read", {"path": "a"}))),
        ToolResultMessage("t1", "read", (TextBlock("contents"),)),
    )
    body = json.loads(model().encode_request(condukt.ModelRequest(None, history)))
    assistant = body["messages"][1]["content"]
    assert assistant[0] == {"type": "redacted_thinking", "data": SECRET_REASONING}
    assert assistant[1]["type"] == "tool_use"
