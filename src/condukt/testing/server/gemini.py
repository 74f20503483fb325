"""Google Gemini's ``generateContent``, served: ``.../models/{model}:generateContent`` and ``:streamGenerateContent``.

Mirrors :mod:`condukt.providers.gemini`; shapes from the Gemini API reference.
"""

from __future__ import annotations

from typing import Any

from ._protocol import RecordedRequest, WireProtocol, dumps, pieces, register
from ._steps import Reply

__all__ = ["GEMINI_STATUSES", "PROTOCOL", "gemini_body", "gemini_error", "gemini_frames"]


#: Gemini's ``status`` name for each HTTP status.
GEMINI_STATUSES = {
    400: "INVALID_ARGUMENT",
    401: "UNAUTHENTICATED",
    403: "PERMISSION_DENIED",
    404: "NOT_FOUND",
    429: "RESOURCE_EXHAUSTED",
    500: "INTERNAL",
    503: "UNAVAILABLE",
    504: "DEADLINE_EXCEEDED",
}


def _gemini_usage(step: Reply) -> dict[str, int]:
    prompt, output = step.usage
    return {"promptTokenCount": prompt, "candidatesTokenCount": output, "totalTokenCount": prompt + output}


def _gemini_calls(step: Reply, ids: bool) -> list[dict[str, Any]]:
    parts = []
    for index, call in enumerate(step.tool_calls):
        function: dict[str, Any] = {"name": call.name, "args": call.arguments}
        if ids:
            function["id"] = call.id
        part: dict[str, Any] = {"functionCall": function}
        if index == 0:  # the first call of a turn carries the thought signature
            part["thoughtSignature"] = step.signature
        parts.append(part)
    return parts


def gemini_body(step: Reply, model: str, *, ids: bool = True) -> dict[str, Any]:
    """A ``GenerateContentResponse``; ``ids``: whether function calls carry their ``id``."""
    parts: list[dict[str, Any]] = []
    if step.thinking:
        parts.append({"text": step.thinking, "thought": True})
    if step.text:
        parts.append({"text": step.text})
    parts.extend(_gemini_calls(step, ids))
    return {
        "candidates": [{"content": {"role": "model", "parts": parts}, "finishReason": "STOP", "index": 0}],
        "usageMetadata": _gemini_usage(step),
        "modelVersion": model,
        "responseId": "resp-local",
    }


def gemini_frames(step: Reply, model: str, *, ids: bool = True) -> list[bytes]:
    """A ``streamGenerateContent?alt=sse`` stream: one response per frame, the last with the finish reason."""

    def chunk(parts: list[dict[str, Any]], finish: str | None = None) -> bytes:
        candidate: dict[str, Any] = {"content": {"role": "model", "parts": parts}, "index": 0}
        data: dict[str, Any] = {"candidates": [candidate], "modelVersion": model, "responseId": "resp-local"}
        if finish:
            candidate["finishReason"] = finish
            data["usageMetadata"] = _gemini_usage(step)
        return b"data: " + dumps(data) + b"\r\n\r\n"

    thoughts = pieces(step.thinking, step.chunk) if step.thinking else []
    frames = [chunk([{"text": p, "thought": True}]) for p in thoughts]
    frames += [chunk([{"text": p}]) for p in pieces(step.text, step.chunk)] if step.text else []
    calls = _gemini_calls(step, ids)
    if calls:
        frames.append(chunk(calls))
    frames.append(chunk([{"text": ""}], "STOP"))
    return frames


def gemini_error(status: int, error_type: str | None, message: str) -> dict[str, Any]:
    """A Google API error body (``status`` 0: an error inside a stream, reported as a 503)."""
    code = status or 503
    name = error_type if error_type and error_type.isupper() else GEMINI_STATUSES.get(code, "INTERNAL")
    return {"error": {"code": code, "message": message, "status": name}}


class _Gemini(WireProtocol):
    name = "gemini"
    provider = "gemini"
    messages_key = "contents"

    def matches(self, route: str) -> bool:
        return "/models/" in route and route.endswith((":generateContent", ":streamGenerateContent"))

    def streaming(self, request: RecordedRequest) -> bool:
        return ":streamGenerateContent" in request.path

    def model(self, request: RecordedRequest) -> str:
        return request.path.partition("/models/")[2].partition(":")[0] or "model"

    def is_document(self, part: dict[str, Any]) -> bool:
        inline = part.get("inlineData")
        return isinstance(inline, dict) and not str(inline.get("mimeType", "")).startswith("image/")

    def last_is_tool_result(self, request: RecordedRequest) -> bool:
        messages = request.messages
        last = messages[-1] if messages else {}
        return any("functionResponse" in part for part in last.get("parts", []))

    def body(self, step: Reply, request: RecordedRequest, server: Any) -> bytes:
        return dumps(gemini_body(step, request.model, ids=server.gemini_call_ids))

    def frames(self, step: Reply, request: RecordedRequest, server: Any) -> list[bytes]:
        return gemini_frames(step, request.model, ids=server.gemini_call_ids)

    def error_body(self, status: int, error_type: str | None, message: str) -> bytes:
        return dumps(gemini_error(status, error_type, message))

    def stream_error(self, error_type: str, message: str) -> bytes:
        return b"data: " + dumps(gemini_error(0, error_type, message)) + b"\n\n"


#: ``generateContent``.
PROTOCOL = register(_Gemini())
