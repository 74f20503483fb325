"""The OpenAI Responses API, served: ``POST .../responses``.

Mirrors :mod:`condukt.providers.openai_responses`; shapes from the Responses API reference.
"""

from __future__ import annotations

import itertools
import json
from typing import Any

from ._protocol import RecordedRequest, WireProtocol, dumps, pieces, register, sse
from ._steps import Reply
from .openai import openai_error

__all__ = ["PROTOCOL", "responses_body", "responses_error", "responses_frames"]


def _responses_output(step: Reply) -> list[dict[str, Any]]:
    output: list[dict[str, Any]] = []
    if step.thinking:
        output.append(
            {
                "type": "reasoning",
                "id": "rs_local",
                "summary": [{"type": "summary_text", "text": step.thinking}],
                "encrypted_content": step.signature,
            }
        )
    if step.text:
        output.append(
            {
                "type": "message",
                "id": "msg_local",
                "role": "assistant",
                "status": "completed",
                "content": [{"type": "output_text", "text": step.text, "annotations": []}],
            }
        )
    for call in step.tool_calls:
        output.append(
            {
                "type": "function_call",
                "id": f"fc_{call.id}",
                "call_id": call.id,
                "name": call.name,
                "arguments": json.dumps(call.arguments),
                "status": "completed",
            }
        )
    return output


def responses_body(step: Reply, model: str) -> dict[str, Any]:
    """An OpenAI Responses API ``response`` object."""
    return {
        "id": "resp_local",
        "object": "response",
        "created_at": 1700000000,
        "status": "completed",
        "error": None,
        "incomplete_details": None,
        "model": model,
        "output": _responses_output(step),
        "usage": {
            "input_tokens": step.usage[0],
            "input_tokens_details": {"cached_tokens": 0},
            "output_tokens": step.usage[1],
            "output_tokens_details": {"reasoning_tokens": 0},
            "total_tokens": sum(step.usage),
        },
    }


def responses_frames(step: Reply, model: str) -> list[bytes]:
    """A Responses API event stream: created, each item added, its deltas and done, then completed."""
    sequence = itertools.count()

    def event(kind: str, **data: Any) -> bytes:
        return sse(kind, {"type": kind, "sequence_number": next(sequence), **data})

    final = responses_body(step, model)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    frames = [event("response.created", response=started)]
    for index, item in enumerate(final["output"]):
        kind = item["type"]
        empty = (
            {**item, "summary": []}
            if kind == "reasoning"
            else {**item, "content": []}
            if kind == "message"
            else {**item, "arguments": ""}
        )
        frames.append(event("response.output_item.added", output_index=index, item=empty))
        if kind == "reasoning":
            for piece in pieces(step.thinking, step.chunk):
                frames.append(
                    event("response.reasoning_summary_text.delta", item_id=item["id"], output_index=index,
                          summary_index=0, delta=piece)
                )  # fmt: skip
        elif kind == "message":
            for piece in pieces(step.text, step.chunk):
                frames.append(
                    event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                          delta=piece)
                )  # fmt: skip
        else:
            for piece in pieces(item["arguments"], step.chunk):
                frames.append(
                    event("response.function_call_arguments.delta", item_id=item["id"], output_index=index,
                          delta=piece)
                )  # fmt: skip
        frames.append(event("response.output_item.done", output_index=index, item=item))
    frames.append(event("response.completed", response=final))
    return frames


def responses_error(status: int, error_type: str | None, message: str) -> dict[str, Any]:
    """A Responses API error body (``status`` 0: the data of an ``error`` event in a stream)."""
    if status == 0:
        return {"type": "error", "code": error_type or "server_error", "message": message, "param": None}
    return openai_error(status, error_type, message)


class _Responses(WireProtocol):
    name = "responses"
    provider = "openai-responses"
    base_path = "/v1"
    messages_key = "input"
    document_types = ("input_file",)

    def matches(self, route: str) -> bool:
        return route.endswith("/responses")

    def last_is_tool_result(self, request: RecordedRequest) -> bool:
        after = list(
            itertools.takewhile(
                lambda m: m.get("type") != "function_call" and m.get("role") != "assistant", reversed(request.messages)
            )
        )
        return any(m.get("type") == "function_call_output" for m in after)

    def body(self, step: Reply, request: RecordedRequest, server: Any) -> bytes:
        return dumps(responses_body(step, request.model))

    def frames(self, step: Reply, request: RecordedRequest, server: Any) -> list[bytes]:
        return responses_frames(step, request.model)

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        return dumps(responses_error(status, error_type, message))

    def stream_error(self, error_type: str, message: str) -> bytes:
        return sse("error", responses_error(0, error_type, message))


#: The Responses API.
PROTOCOL = register(_Responses())
