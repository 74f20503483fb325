"""The Anthropic Messages API, served: ``POST .../v1/messages``, and Claude on Vertex AI's ``:rawPredict``.

Mirrors :mod:`condukt.providers.anthropic` and :mod:`condukt.providers.vertex`;
shapes from the Messages API reference and Vertex AI's (``rawPredict`` and
``streamRawPredict`` take the Messages API body without ``model``, with
``anthropic_version``; Vertex AI answers quota and permission errors in
Google's error shape).
"""

from __future__ import annotations

import json
from typing import Any

from ._protocol import RecordedRequest, WireProtocol, dumps, pieces, register, sse
from ._steps import Reply
from .gemini import gemini_error

__all__ = ["PROTOCOL", "VERTEX_PROTOCOL", "anthropic_body", "anthropic_error", "anthropic_frames"]


def anthropic_body(step: Reply, model: str) -> dict[str, Any]:
    """A Messages API response."""
    content: list[dict[str, Any]] = []
    if step.thinking:
        content.append({"type": "thinking", "thinking": step.thinking, "signature": step.signature})
    if step.text:
        content.append({"type": "text", "text": step.text})
    for call in step.tool_calls:
        content.append({"type": "tool_use", "id": call.id, "name": call.name, "input": call.arguments})
    return {
        "id": "msg_01local",
        "type": "message",
        "role": "assistant",
        "model": model,
        "content": content,
        "stop_reason": "tool_use" if step.tool_calls else "end_turn",
        "stop_sequence": None,
        "usage": _anthropic_usage(step),
    }


def _anthropic_usage(step: Reply) -> dict[str, int]:
    usage = {"input_tokens": step.usage[0], "output_tokens": step.usage[1]}
    if step.cache != (0, 0):
        usage["cache_read_input_tokens"], usage["cache_creation_input_tokens"] = step.cache
    return usage


def anthropic_frames(step: Reply, model: str) -> list[bytes]:
    """A Messages API event stream."""
    start = anthropic_body(Reply(usage=(step.usage[0], 1), cache=step.cache), model)
    start["stop_reason"] = None
    frames = [sse("message_start", {"type": "message_start", "message": start}), sse("ping", {"type": "ping"})]
    index = 0

    def block(start_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        frames.append(
            sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start_block})
        )
        for delta in deltas:
            frames.append(sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        frames.append(sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if step.thinking:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in pieces(step.thinking, step.chunk)]
        deltas.append({"type": "signature_delta", "signature": step.signature})
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if step.text:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in pieces(step.text, step.chunk)])
    for call in step.tool_calls:
        arguments = json.dumps(call.arguments)
        block(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in pieces(arguments, step.chunk)],
        )
    frames.append(
        sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if step.tool_calls else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": step.usage[1]},
            },
        )
    )
    frames.append(sse("message_stop", {"type": "message_stop"}))
    return frames


def anthropic_error(status: int, error_type: str | None, message: str) -> dict[str, Any]:
    """A Messages API error body."""
    default = {
        400: "invalid_request_error",
        401: "authentication_error",
        429: "rate_limit_error",
        529: "overloaded_error",
    }
    return {"type": "error", "error": {"type": error_type or default.get(status, "api_error"), "message": message}}


class _Anthropic(WireProtocol):
    name = "anthropic"
    provider = "anthropic"
    document_types = ("document",)

    def matches(self, route: str) -> bool:
        return route.endswith("/v1/messages")

    def last_is_tool_result(self, request: RecordedRequest) -> bool:
        messages = request.messages
        content = messages[-1].get("content") if messages else None
        return isinstance(content, list) and any(block.get("type") == "tool_result" for block in content)

    def body(self, step: Reply, request: RecordedRequest, server: Any) -> bytes:
        return dumps(anthropic_body(step, request.model))

    def frames(self, step: Reply, request: RecordedRequest, server: Any) -> list[bytes]:
        return anthropic_frames(step, request.model)

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        return dumps(anthropic_error(status, error_type, message))

    def stream_error(self, error_type: str, message: str) -> bytes:
        return sse("error", anthropic_error(0, error_type, message))


#: The Messages API.
PROTOCOL = register(_Anthropic())


class _VertexAnthropic(_Anthropic):
    name = "vertex-anthropic"
    provider = "vertex-anthropic"

    def matches(self, route: str) -> bool:
        return "/publishers/anthropic/models/" in route and route.endswith((":rawPredict", ":streamRawPredict"))

    def model(self, request: RecordedRequest) -> str:
        return request.path.partition("/models/")[2].partition(":")[0] or "model"

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        if status in (401, 403, 404, 429):  # Vertex AI's own checks: Google's shape
            return dumps(gemini_error(status, error_type, message))
        return super().error_body(status, error_type, message)


#: Claude on Vertex AI.
VERTEX_PROTOCOL = register(_VertexAnthropic())
