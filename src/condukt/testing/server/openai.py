"""OpenAI Chat Completions, served: ``POST .../chat/completions`` (OpenAI and its compatibles, Azure's deployments).

Mirrors :mod:`condukt.providers.openai` and :mod:`condukt.providers.azure`;
shapes from the Chat Completions API reference and Azure OpenAI's REST
reference (``/openai/deployments/{deployment}/chat/completions`` and
``/openai/v1/chat/completions``; errors with the status as the ``code``).
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from ._protocol import RecordedRequest, WireProtocol, dumps, pieces, register
from ._steps import Reply

__all__ = ["AZURE_PROTOCOL", "PROTOCOL", "azure_error", "openai_body", "openai_error", "openai_frames"]


def openai_body(step: Reply, model: str) -> dict[str, Any]:
    """A Chat Completions response."""
    message: dict[str, Any] = {"role": "assistant", "content": step.text or None}
    if step.thinking:
        message["reasoning_content"] = step.thinking
    if step.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": json.dumps(c.arguments)}}
            for c in step.tool_calls
        ]
    return {
        "id": "chatcmpl-local",
        "object": "chat.completion",
        "created": 1700000000,
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if step.tool_calls else "stop"}],
        "usage": {"prompt_tokens": step.usage[0], "completion_tokens": step.usage[1], "total_tokens": sum(step.usage)},
    }


def openai_frames(step: Reply, model: str) -> list[bytes]:
    """A Chat Completions chunk stream, usage chunk and ``[DONE]`` included."""

    def chunk(delta: dict[str, Any], finish: str | None = None) -> bytes:
        data = {
            "id": "chatcmpl-local",
            "object": "chat.completion.chunk",
            "created": 1700000000,
            "model": model,
            "choices": [{"index": 0, "delta": delta, "finish_reason": finish}],
        }
        return b"data: " + dumps(data) + b"\n\n"

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"reasoning_content": p}) for p in pieces(step.thinking, step.chunk)] if step.thinking else []
    frames += [chunk({"content": p}) for p in pieces(step.text, step.chunk)] if step.text else []
    for index, call in enumerate(step.tool_calls):
        frames.append(
            chunk(
                {
                    "tool_calls": [
                        {
                            "index": index,
                            "id": call.id,
                            "type": "function",
                            "function": {"name": call.name, "arguments": ""},
                        }
                    ]
                }
            )
        )
        for piece in pieces(json.dumps(call.arguments), step.chunk):
            frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    frames.append(chunk({}, "tool_calls" if step.tool_calls else "stop"))
    usage = {"prompt_tokens": step.usage[0], "completion_tokens": step.usage[1], "total_tokens": sum(step.usage)}
    frames.append(
        b"data: "
        + dumps(
            {
                "id": "chatcmpl-local",
                "object": "chat.completion.chunk",
                "created": 1700000000,
                "model": model,
                "choices": [],
                "usage": usage,
            }
        )
        + b"\n\n"
    )
    frames.append(b"data: [DONE]\n\n")
    return frames


def openai_error(status: int, error_type: str | None, message: str) -> dict[str, Any]:
    """A Chat Completions error body."""
    default = {400: "invalid_request_error", 401: "invalid_request_error", 429: "rate_limit_exceeded"}
    return {
        "error": {
            "message": message,
            "type": error_type or default.get(status, "server_error"),
            "param": None,
            "code": None,
        }
    }


def azure_error(status: int, error_type: str | None, message: str) -> dict[str, Any]:
    """An Azure OpenAI error body: ``code`` is Azure's (``"DeploymentNotFound"``) or the status as a string."""
    return {"error": {"code": error_type or str(status or 500), "message": message}}


class _ChatCompletions(WireProtocol):
    name = "openai"
    provider = "openai"
    base_path = "/v1"
    document_types = ("file",)

    def matches(self, route: str) -> bool:
        return route.endswith("/chat/completions")

    def last_is_tool_result(self, request: RecordedRequest) -> bool:
        # Tool messages (and a user message with their images) follow the last assistant message.
        after = list(itertools.takewhile(lambda m: m.get("role") != "assistant", reversed(request.messages)))
        return any(m.get("role") == "tool" for m in after)

    def body(self, step: Reply, request: RecordedRequest, server: Any) -> bytes:
        return dumps(openai_body(step, request.model))

    def frames(self, step: Reply, request: RecordedRequest, server: Any) -> list[bytes]:
        return openai_frames(step, request.model)

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        return dumps(openai_error(status, error_type, message))

    def stream_error(self, error_type: str, message: str) -> bytes:
        return b"data: " + dumps(openai_error(0, error_type, message)) + b"\n\n"


class _AzureChat(_ChatCompletions):
    name = "azure"
    provider = "azure"
    base_path = ""

    def matches(self, route: str) -> bool:
        return route.endswith("/chat/completions") and "/openai/" in route

    def model(self, request: RecordedRequest) -> str:
        deployment = request.path.partition("/deployments/")[2].partition("/")[0]
        return deployment or super().model(request)

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        return dumps(azure_error(status, error_type, message))


#: Chat Completions on Azure OpenAI (before the plain one: its paths end alike).
AZURE_PROTOCOL = register(_AzureChat())
#: Chat Completions.
PROTOCOL = register(_ChatCompletions())
