"""AWS Bedrock's Converse API, served: ``POST .../model/{modelId}/converse`` and ``/converse-stream``.

Mirrors :mod:`condukt.providers.bedrock`; shapes from the Bedrock API
reference (``Converse``, ``ConverseStream``) and AWS's event stream encoding:
each streamed event is a binary frame of a prelude (total length, headers
length, prelude CRC32), headers (``:event-type``, ``:content-type``,
``:message-type``), a JSON payload and a message CRC32, all big-endian.
Errors carry their type in ``x-amzn-ErrorType`` and a ``{"message"}`` body.
The server does not check signatures: tests verify the recorded headers.
"""

from __future__ import annotations

import json
import struct
import zlib
from typing import Any
from urllib.parse import unquote

from ._protocol import RecordedRequest, WireProtocol, dumps, pieces, register
from ._steps import Reply

__all__ = [
    "BEDROCK_ERRORS",
    "PROTOCOL",
    "bedrock_body",
    "bedrock_error",
    "bedrock_frames",
    "event_frame",
]

#: Bedrock's exception name for each HTTP status the server is asked to answer.
BEDROCK_ERRORS = {
    400: "ValidationException",
    401: "UnrecognizedClientException",
    403: "AccessDeniedException",
    404: "ResourceNotFoundException",
    408: "ModelTimeoutException",
    424: "ModelErrorException",
    429: "ThrottlingException",
    500: "InternalServerException",
    503: "ServiceUnavailableException",
}


def _header(name: str, value: str) -> bytes:
    """One header of type 7 (a string): name length, name, type, value length, value."""
    raw_name, raw_value = name.encode(), value.encode()
    return struct.pack(">B", len(raw_name)) + raw_name + struct.pack(">BH", 7, len(raw_value)) + raw_value


def event_frame(headers: dict[str, str], payload: bytes) -> bytes:
    """One ``application/vnd.amazon.eventstream`` message: prelude, prelude CRC, headers, payload, message CRC."""
    encoded = b"".join(_header(name, value) for name, value in headers.items())
    total = 12 + len(encoded) + len(payload) + 4
    prelude = struct.pack(">II", total, len(encoded))
    prelude += struct.pack(">I", zlib.crc32(prelude))
    message = prelude + encoded + payload
    return message + struct.pack(">I", zlib.crc32(message))


def _event(kind: str, data: dict[str, Any]) -> bytes:
    headers = {":event-type": kind, ":content-type": "application/json", ":message-type": "event"}
    return event_frame(headers, dumps(data))


def _usage(step: Reply) -> dict[str, int]:
    usage = {"inputTokens": step.usage[0], "outputTokens": step.usage[1], "totalTokens": sum(step.usage)}
    if step.cache != (0, 0):
        usage["cacheReadInputTokens"], usage["cacheWriteInputTokens"] = step.cache
    return usage


def bedrock_body(step: Reply) -> dict[str, Any]:
    """A ``Converse`` response."""
    content: list[dict[str, Any]] = []
    if step.thinking:
        content.append({"reasoningContent": {"reasoningText": {"text": step.thinking, "signature": step.signature}}})
    if step.text:
        content.append({"text": step.text})
    for call in step.tool_calls:
        content.append({"toolUse": {"toolUseId": call.id, "name": call.name, "input": call.arguments}})
    return {
        "output": {"message": {"role": "assistant", "content": content}},
        "stopReason": "tool_use" if step.tool_calls else "end_turn",
        "usage": _usage(step),
        "metrics": {"latencyMs": 1},
    }


def bedrock_frames(step: Reply) -> list[bytes]:
    """A ``ConverseStream`` body: messageStart, the blocks' starts, deltas and stops, messageStop, metadata."""
    frames = [_event("messageStart", {"role": "assistant"})]
    index = 0
    if step.thinking:
        for piece in pieces(step.thinking, step.chunk):
            frames.append(
                _event(
                    "contentBlockDelta",
                    {"contentBlockIndex": index, "delta": {"reasoningContent": {"text": piece}}},
                )
            )
        signature = {"contentBlockIndex": index, "delta": {"reasoningContent": {"signature": step.signature}}}
        frames.append(_event("contentBlockDelta", signature))
        frames.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    if step.text:
        for piece in pieces(step.text, step.chunk):
            frames.append(_event("contentBlockDelta", {"contentBlockIndex": index, "delta": {"text": piece}}))
        frames.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    for call in step.tool_calls:
        start = {"toolUse": {"toolUseId": call.id, "name": call.name}}
        frames.append(_event("contentBlockStart", {"contentBlockIndex": index, "start": start}))
        for piece in pieces(json.dumps(call.arguments), step.chunk):
            delta = {"contentBlockIndex": index, "delta": {"toolUse": {"input": piece}}}
            frames.append(_event("contentBlockDelta", delta))
        frames.append(_event("contentBlockStop", {"contentBlockIndex": index}))
        index += 1
    frames.append(_event("messageStop", {"stopReason": "tool_use" if step.tool_calls else "end_turn"}))
    frames.append(_event("metadata", {"usage": _usage(step), "metrics": {"latencyMs": 1}}))
    return frames


def bedrock_error(message: str) -> dict[str, Any]:
    """A Bedrock error body (the type travels in ``x-amzn-ErrorType``)."""
    return {"message": message}


class _Converse(WireProtocol):
    name = "bedrock"
    provider = "bedrock"
    stream_content_type = "application/vnd.amazon.eventstream"

    def matches(self, route: str) -> bool:
        return route.startswith("/model/") and route.endswith(("/converse", "/converse-stream"))

    def streaming(self, request: RecordedRequest) -> bool:
        return request.path.partition("?")[0].endswith("/converse-stream")

    def model(self, request: RecordedRequest) -> str:
        return unquote(request.path.partition("?")[0][len("/model/") :].rpartition("/")[0]) or "model"

    def is_document(self, part: dict[str, Any]) -> bool:
        return "document" in part

    def last_is_tool_result(self, request: RecordedRequest) -> bool:
        messages = request.messages
        content = messages[-1].get("content") if messages else None
        return isinstance(content, list) and any("toolResult" in block for block in content)

    def body(self, step: Reply, request: RecordedRequest, server: Any) -> bytes:
        return dumps(bedrock_body(step))

    def frames(self, step: Reply, request: RecordedRequest, server: Any) -> list[bytes]:
        return bedrock_frames(step)

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        return dumps(bedrock_error(message))

    def error_headers(self, status: int, error_type: str | None) -> tuple[tuple[str, str], ...]:
        kind = error_type or BEDROCK_ERRORS.get(status, "InternalServerException")
        return (("x-amzn-ErrorType", f"{kind}:http://internal.amazon.com/coral/com.amazon.bedrock/"),)

    def stream_error(self, error_type: str, message: str) -> bytes:
        headers = {":exception-type": error_type, ":content-type": "application/json", ":message-type": "exception"}
        return event_frame(headers, dumps(bedrock_error(message)))

    def garbage(self) -> bytes:
        """A frame whose message CRC does not match its bytes (one payload byte flipped after the CRC)."""
        frame = bytearray(_event("contentBlockDelta", {"contentBlockIndex": 0, "delta": {"text": "corrupt"}}))
        frame[-6] ^= 0x01
        return bytes(frame)


#: ``Converse`` and ``ConverseStream``.
PROTOCOL = register(_Converse())
