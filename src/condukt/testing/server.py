"""A local HTTP/1.1 server speaking the Anthropic Messages, OpenAI Chat Completions and Gemini wire formats.

For your own tests of agents on real providers' wire formats, without a
network: ``from condukt.testing.server import ProtocolServer, reply, Status``.
condukt's own provider tests run on it.

Real sockets on 127.0.0.1, HTTP/1.1 read by httptools (llhttp, a core
dependency), kept alive unless the client asks to close, streams sent
chunked, one chunk per event. Each request takes the next step of
``server.script`` (or ``server.responder(request)`` once the script is
empty) and renders it in the protocol of the path it came to
(``.../v1/messages``, ``.../chat/completions``, OpenAI's ``.../responses``
or Gemini's ``.../models/{model}:generateContent``), streamed as server-sent events
when the body says ``"stream": true`` (Gemini: the path asks for
``:streamGenerateContent``). Responses are built from the
providers' public API references (condukt's repository keeps
recorded-format samples in ``tests/fixtures/``).

Steps: :class:`Reply` (text, thinking, tool calls, usage), :class:`Status`
(an HTTP error with the provider's error body and headers), :class:`Fault`
(a stream that drops, hangs until the client leaves, sends an SSE error
event or garbage, or waits on a gate), :class:`Malformed` (a 200 whose body
is not JSON), :class:`Disconnect` (close without answering), :class:`Slow`
(delay the first byte of another step), :class:`Raw` (a recorded body).

Every request is recorded (headers, JSON body, time; its document parts,
of whatever protocol, in :attr:`RecordedRequest.documents`) and concurrent
requests are counted. Run as a script (``python -m condukt.testing.server
--latency 0.05``) it serves in its own process and prints its port.
"""

from __future__ import annotations

import argparse
import functools
import hashlib
import heapq
import itertools
import json
import math
import os
import sys
import time
from collections import deque
from collections.abc import Callable
from http import HTTPStatus
from typing import Any, Literal

import attrs
import httptools
import trio

__all__ = [
    "Disconnect", "Fault", "Malformed", "PromptCache", "ProtocolServer", "Raw", "RecordedRequest", "Reply", "Slow",
    "Status",
    "ToolUse", "anthropic_body", "anthropic_error", "anthropic_frames", "gemini_body", "gemini_error",
    "gemini_frames", "openai_body", "openai_error", "openai_frames", "reply", "responses_body", "responses_frames",
    "tool_then_answer", "tool_use",
]  # fmt: skip

# ---------------------------------------------------------------------------- steps


@attrs.frozen
class ToolUse:
    """A tool call the scripted model makes."""

    id: str
    name: str
    arguments: Any


_ids = itertools.count(1)


def tool_use(name: str, arguments: Any = None, id: str | None = None) -> ToolUse:
    """A tool call; ids are generated (``toolu_N``) unless given."""
    return ToolUse(id or f"toolu_{next(_ids)}", name, {} if arguments is None else arguments)


@attrs.frozen
class Reply:
    """A successful answer: thinking, text, tool calls, usage ``(input, output)``.

    Streamed text is cut into ``chunk``-character deltas; tool arguments into
    ``chunk``-character JSON fragments.
    """

    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolUse, ...] = ()
    usage: tuple[int, int] = (10, 5)
    chunk: int = 8
    signature: str = "sig-abc"
    #: Prompt tokens ``(read from, written to)`` the provider's cache (Anthropic's usage fields).
    cache: tuple[int, int] = (0, 0)


def reply(
    text: str = "", *, thinking: str = "", tools: Any = (), usage: tuple[int, int] = (10, 5), chunk: int = 8
) -> Reply:
    """A :class:`Reply`; ``tools`` is a :class:`ToolUse` or a list of them."""
    calls = (tools,) if isinstance(tools, ToolUse) else tuple(tools)
    return Reply(text, thinking, calls, usage, chunk)


@attrs.frozen
class Status:
    """An HTTP error with the protocol's error body (and e.g. ``Retry-After`` headers)."""

    code: int
    message: str = "error"
    error_type: str | None = None
    headers: tuple[tuple[str, str], ...] = ()


@attrs.frozen
class Fault:
    """A streamed ``reply`` that goes wrong after ``after`` SSE frames.

    ``drop``: the connection is cut (no end of body); ``hang``: nothing more
    is sent until the client closes the connection; ``error``: an SSE error
    event ends the body; ``garbage``: a frame of malformed JSON follows;
    ``gate``: the rest is sent once ``server.gate`` is set.
    """

    reply: Reply
    after: int
    kind: Literal["drop", "hang", "error", "garbage", "gate"]
    error_type: str = "overloaded_error"
    message: str = "Overloaded"


@attrs.frozen
class Malformed:
    """A 200 response whose body is not JSON."""

    body: bytes = b'{"id": "msg_1", "content": [{"type": "text", "te'


@attrs.frozen
class Disconnect:
    """Close the connection without answering."""


@attrs.frozen
class Slow:
    """``step``, after ``delay`` seconds without a single byte."""

    step: Any
    delay: float


@attrs.frozen
class Raw:
    """A body sent verbatim (a recorded sample)."""

    body: bytes
    content_type: str = "text/event-stream"
    status: int = 200


Step = Reply | Status | Fault | Malformed | Disconnect | Slow | Raw

#: The part types that carry a document, by protocol (Gemini's are ``inlineData`` parts).
_DOCUMENT_PARTS = {"anthropic": ("document",), "openai": ("file",), "responses": ("input_file",)}


@attrs.define
class RecordedRequest:
    """One request the server received."""

    method: str
    path: str
    headers: dict[str, str]
    raw: bytes
    body: Any
    time: float
    protocol: str
    client_closed: bool = False

    @property
    def streaming(self) -> bool:
        """Whether the client asked for server-sent events."""
        if self.protocol == "gemini":
            return ":streamGenerateContent" in self.path
        return isinstance(self.body, dict) and bool(self.body.get("stream"))

    @property
    def messages(self) -> list[Any]:
        """The body's ``messages`` (Gemini: its ``contents``; the Responses API: its ``input``)."""
        key = {"gemini": "contents", "responses": "input"}.get(self.protocol, "messages")
        return list(self.body.get(key, [])) if isinstance(self.body, dict) else []

    @property
    def documents(self) -> list[dict[str, Any]]:
        """The document parts of the body's messages, in order, as sent.

        Anthropic's ``document`` blocks (tool results' included), Chat
        Completions' ``file`` parts, the Responses API's ``input_file`` parts,
        Gemini's ``inlineData`` parts whose ``mimeType`` is not an image's.
        """
        found: list[dict[str, Any]] = []

        def visit(value: Any) -> None:
            if isinstance(value, list):
                for item in value:
                    visit(item)
            elif isinstance(value, dict):
                inline = value.get("inlineData")
                if value.get("type") in _DOCUMENT_PARTS.get(self.protocol, ()) or (
                    self.protocol == "gemini"
                    and isinstance(inline, dict)
                    and not str(inline.get("mimeType", "")).startswith("image/")
                ):
                    found.append(value)
                    return
                for key in ("content", "parts"):
                    visit(value.get(key))

        visit(self.messages)
        return found

    @property
    def model(self) -> str:
        """The model asked for: the body's ``model`` (Gemini: the one in the path)."""
        if self.protocol == "gemini":
            return self.path.partition("/models/")[2].partition(":")[0] or "model"
        return self.body.get("model", "model") if isinstance(self.body, dict) else "model"


# ---------------------------------------------------------------------------- rendering


def _dumps(value: Any) -> bytes:
    return json.dumps(value, separators=(",", ":")).encode()


def _pieces(text: str, size: int) -> list[str]:
    return [text[i : i + size] for i in range(0, len(text), size)] or [""]


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


def _sse(event: str, data: dict[str, Any]) -> bytes:
    return b"event: " + event.encode() + b"\ndata: " + _dumps(data) + b"\n\n"


def anthropic_frames(step: Reply, model: str) -> list[bytes]:
    """A Messages API event stream."""
    start = anthropic_body(Reply(usage=(step.usage[0], 1), cache=step.cache), model)
    start["stop_reason"] = None
    frames = [_sse("message_start", {"type": "message_start", "message": start}), _sse("ping", {"type": "ping"})]
    index = 0

    def block(start_block: dict[str, Any], deltas: list[dict[str, Any]]) -> None:
        nonlocal index
        frames.append(
            _sse("content_block_start", {"type": "content_block_start", "index": index, "content_block": start_block})
        )
        for delta in deltas:
            frames.append(_sse("content_block_delta", {"type": "content_block_delta", "index": index, "delta": delta}))
        frames.append(_sse("content_block_stop", {"type": "content_block_stop", "index": index}))
        index += 1

    if step.thinking:
        deltas = [{"type": "thinking_delta", "thinking": p} for p in _pieces(step.thinking, step.chunk)]
        deltas.append({"type": "signature_delta", "signature": step.signature})
        block({"type": "thinking", "thinking": "", "signature": ""}, deltas)
    if step.text:
        block({"type": "text", "text": ""}, [{"type": "text_delta", "text": p} for p in _pieces(step.text, step.chunk)])
    for call in step.tool_calls:
        arguments = json.dumps(call.arguments)
        block(
            {"type": "tool_use", "id": call.id, "name": call.name, "input": {}},
            [{"type": "input_json_delta", "partial_json": p} for p in _pieces(arguments, step.chunk)],
        )
    frames.append(
        _sse(
            "message_delta",
            {
                "type": "message_delta",
                "delta": {"stop_reason": "tool_use" if step.tool_calls else "end_turn", "stop_sequence": None},
                "usage": {"output_tokens": step.usage[1]},
            },
        )
    )
    frames.append(_sse("message_stop", {"type": "message_stop"}))
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
        return b"data: " + _dumps(data) + b"\n\n"

    frames = [chunk({"role": "assistant", "content": ""})]
    frames += [chunk({"reasoning_content": p}) for p in _pieces(step.thinking, step.chunk)] if step.thinking else []
    frames += [chunk({"content": p}) for p in _pieces(step.text, step.chunk)] if step.text else []
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
        for piece in _pieces(json.dumps(call.arguments), step.chunk):
            frames.append(chunk({"tool_calls": [{"index": index, "function": {"arguments": piece}}]}))
    frames.append(chunk({}, "tool_calls" if step.tool_calls else "stop"))
    usage = {"prompt_tokens": step.usage[0], "completion_tokens": step.usage[1], "total_tokens": sum(step.usage)}
    frames.append(
        b"data: "
        + _dumps(
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
        return _sse(kind, {"type": kind, "sequence_number": next(sequence), **data})

    final = responses_body(step, model)
    started = {**final, "status": "in_progress", "output": [], "usage": None}
    frames = [event("response.created", response=started)]
    for index, item in enumerate(final["output"]):
        kind = item["type"]
        empty = {**item, "summary": []} if kind == "reasoning" else {**item, "content": []} if kind == "message" else {
            **item, "arguments": ""
        }
        frames.append(event("response.output_item.added", output_index=index, item=empty))
        if kind == "reasoning":
            for piece in _pieces(step.thinking, step.chunk):
                frames.append(
                    event("response.reasoning_summary_text.delta", item_id=item["id"], output_index=index,
                          summary_index=0, delta=piece)
                )  # fmt: skip
        elif kind == "message":
            for piece in _pieces(step.text, step.chunk):
                frames.append(
                    event("response.output_text.delta", item_id=item["id"], output_index=index, content_index=0,
                          delta=piece)
                )  # fmt: skip
        else:
            for piece in _pieces(item["arguments"], step.chunk):
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
        return b"data: " + _dumps(data) + b"\r\n\r\n"

    thoughts = _pieces(step.thinking, step.chunk) if step.thinking else []
    frames = [chunk([{"text": p, "thought": True}]) for p in thoughts]
    frames += [chunk([{"text": p}]) for p in _pieces(step.text, step.chunk)] if step.text else []
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


# ---------------------------------------------------------------------------- prompt caching


class PromptCache:
    """Anthropic's prompt caching, simulated, for tests and benchmarks of what caching saves.

    A request's prompt is its blocks in Anthropic's order (each tool, the
    system prompt's blocks, each message's content blocks), each counted as
    ``ceil(bytes / 4)`` tokens of its JSON. A block marked ``cache_control``
    writes the prefix ending there to the cache (when it holds at least
    ``min_tokens``); a later request reads the longest cached prefix that
    ends at a block boundary at most ``lookback`` blocks before one of its
    own breakpoints, as the API documents. :meth:`account` returns
    ``(uncached input, cache read, cache write)`` tokens; the server reports
    them in the response's ``usage`` when ``server.prompt_cache`` is set.
    Entries never expire (the API's five-minute lifetime is not modelled).
    """

    def __init__(self, *, min_tokens: int = 1024, lookback: int = 20) -> None:
        self.min_tokens = min_tokens
        self.lookback = lookback
        self._prefixes: set[bytes] = set()

    @staticmethod
    def _blocks(body: Any) -> list[tuple[bytes, bool]]:
        """``(canonical JSON, marked)`` for each block of the prompt, in order."""

        def entry(where: str, block: Any) -> tuple[bytes, bool]:
            marked = isinstance(block, dict) and "cache_control" in block
            if marked:
                block = {k: v for k, v in block.items() if k != "cache_control"}
            return where.encode() + json.dumps(block, sort_keys=True, separators=(",", ":")).encode(), marked

        if not isinstance(body, dict):
            return []
        blocks = [entry("tool", tool) for tool in body.get("tools") or []]
        system = body.get("system")
        if isinstance(system, str):
            blocks.append(entry("system", {"type": "text", "text": system}))
        elif isinstance(system, list):
            blocks.extend(entry("system", block) for block in system)
        for message in body.get("messages") or []:
            content = message.get("content") if isinstance(message, dict) else None
            role = message.get("role", "?") if isinstance(message, dict) else "?"
            if isinstance(content, str):
                content = [{"type": "text", "text": content}]
            blocks.extend(entry(role, block) for block in content or [])
        return blocks

    def account(self, body: Any) -> tuple[int, int, int]:
        """``(uncached input, cache read, cache write)`` tokens for a request body, updating the cache."""
        blocks = self._blocks(body)
        digests: list[bytes] = []
        sizes: list[int] = []
        digest, total = b"", 0
        for data, _ in blocks:
            digest = hashlib.sha256(digest + data).digest()
            total += -(-len(data) // 4)
            digests.append(digest)
            sizes.append(total)
        marks = [index for index, (_, marked) in enumerate(blocks) if marked]
        read = 0
        for mark in marks:
            for index in range(mark, max(-1, mark - self.lookback), -1):
                if digests[index] in self._prefixes:
                    read = max(read, sizes[index])
                    break
        write = 0
        for mark in marks:
            if sizes[mark] >= self.min_tokens and digests[mark] not in self._prefixes:
                self._prefixes.add(digests[mark])
                write = max(write, sizes[mark] - read)
        return total - read - write, read, write


# ---------------------------------------------------------------------------- responders


def _last_is_tool_result(request: RecordedRequest) -> bool:
    messages = request.messages
    if request.protocol == "gemini":
        last = messages[-1] if messages else {}
        return any("functionResponse" in part for part in last.get("parts", []))
    if request.protocol == "responses":
        after = list(
            itertools.takewhile(
                lambda m: m.get("type") != "function_call" and m.get("role") != "assistant", reversed(messages)
            )
        )
        return any(m.get("type") == "function_call_output" for m in after)
    if request.protocol == "openai":
        # Tool messages (and a user message with their images) follow the last assistant message.
        after = list(itertools.takewhile(lambda m: m.get("role") != "assistant", reversed(messages)))
        return any(m.get("role") == "tool" for m in after)
    content = messages[-1].get("content") if messages else None
    return isinstance(content, list) and any(block.get("type") == "tool_result" for block in content)


def tool_then_answer(request: RecordedRequest) -> Step:
    """Call the ``noop`` tool first, then answer: two model turns and one tool call per run."""
    if _last_is_tool_result(request):
        return Reply("done", usage=(20, 3))
    return Reply(tool_calls=(tool_use("noop", {}),), usage=(10, 2))


# ---------------------------------------------------------------------------- server


class ProtocolServer:
    """The server; start it with ``await nursery.start(server.run)``."""

    def __init__(self, *, latency: float = 0.0, responder: Callable[[RecordedRequest], Step] | None = None) -> None:
        #: Seconds added to every request before its first byte.
        self.latency = latency
        self.script: deque[Step] = deque()
        #: Answers requests once the script is empty (default: ``Reply("ok")``).
        self.responder = responder
        self.requests: list[RecordedRequest] = []
        self.in_flight = 0
        self.peak_in_flight = 0
        #: Connections accepted so far, and those still open.
        self.connections = 0
        self.open_connections = 0
        #: Set when a hanging response sees its client close the connection.
        self.client_closed = trio.Event()
        #: Releases ``Fault(kind="gate")`` responses.
        self.gate = trio.Event()
        self.port = 0
        self.record = True
        #: Whether Gemini function calls carry an ``id`` (older Gemini models send none).
        self.gemini_call_ids = True
        #: When set, Anthropic requests' usage reports what this simulated prompt cache read and wrote.
        self.prompt_cache: PromptCache | None = None
        self._timer = _Timer()

    def add(self, *steps: Step) -> None:
        """Queue responses, in order."""
        self.script.extend(steps)

    @property
    def url(self) -> str:
        """``http://127.0.0.1:<port>``."""
        return f"http://127.0.0.1:{self.port}"

    async def run(self, *, task_status: Any = trio.TASK_STATUS_IGNORED) -> None:
        """Listen on an ephemeral port of 127.0.0.1 until cancelled."""
        async with trio.open_nursery() as nursery:
            nursery.start_soon(self._timer.run)
            listeners = await nursery.start(functools.partial(trio.serve_tcp, self._connection, 0, host="127.0.0.1"))
            self.port = listeners[0].socket.getsockname()[1]
            task_status.started(self)

    async def _connection(self, stream: trio.SocketStream) -> None:
        self.connections += 1
        self.open_connections += 1
        requests = _Requests()
        try:
            while True:
                while not requests.complete:
                    data = await _receive(stream)
                    if not data:
                        return
                    requests.parser.feed_data(data)
                method, target, headers, raw, keep_alive = requests.complete.popleft()
                request = self._record(method, target, headers, raw)
                if not await self._respond(stream, request, keep_alive):
                    return
                if not keep_alive:
                    return
        except (
            trio.BrokenResourceError, trio.ClosedResourceError,
            httptools.HttpParserError, httptools.HttpParserUpgrade,
        ):
            pass
        finally:
            self.open_connections -= 1
            await trio.aclose_forcefully(stream)

    def _record(self, method: bytes, target: bytes, headers: list[tuple[bytes, bytes]], raw: bytes) -> RecordedRequest:
        try:
            body = json.loads(raw) if raw else None
        except ValueError:
            body = None
        path = target.decode()
        route = path.partition("?")[0]
        if route.endswith("/v1/messages"):
            protocol = "anthropic"
        elif route.endswith("/chat/completions"):
            protocol = "openai"
        elif route.endswith("/responses"):
            protocol = "responses"
        elif "/models/" in route and route.endswith((":generateContent", ":streamGenerateContent")):
            protocol = "gemini"
        else:
            protocol = "?"
        recorded = RecordedRequest(
            method.decode(),
            path,
            {k.decode().lower(): v.decode() for k, v in headers},
            raw,
            body,
            time.monotonic(),
            protocol,
        )
        if self.record:
            self.requests.append(recorded)
        return recorded

    async def _respond(self, stream: trio.SocketStream, request: RecordedRequest, keep_alive: bool = True) -> bool:
        self.in_flight += 1
        self.peak_in_flight = max(self.peak_in_flight, self.in_flight)
        close = () if keep_alive else (_CLOSE,)
        try:
            if request.protocol == "?":
                return await self._send_body(stream, 404, b'{"error":{"message":"no such endpoint"}}', close)
            if self.script:
                step: Any = self.script.popleft()
            elif self.responder is not None:
                step = self.responder(request)
            else:
                step = Reply("ok")
            delay = self.latency
            while isinstance(step, Slow):
                delay += step.delay
                step = step.step
            if delay:
                await self._timer.sleep(delay)
            return await self._render(stream, request, step, close)
        finally:
            self.in_flight -= 1

    async def _render(
        self, stream: trio.SocketStream, request: RecordedRequest, step: Any, close: tuple[tuple[str, str], ...] = ()
    ) -> bool:
        protocol = request.protocol
        anthropic = protocol == "anthropic"
        model = request.model
        ids = self.gemini_call_ids
        if isinstance(step, Disconnect):
            return False
        if isinstance(step, Status):
            errors = {"anthropic": anthropic_error, "gemini": gemini_error}.get(protocol, openai_error)
            body = errors(step.code, step.error_type, step.message)
            return await self._send_body(stream, step.code, _dumps(body), (*step.headers, *close))
        if isinstance(step, Malformed):
            return await self._send_body(stream, 200, step.body, close)
        if isinstance(step, Raw):
            return await self._send_body(stream, step.status, step.body, close, content_type=step.content_type)
        fault = step if isinstance(step, Fault) else None
        answer: Reply = fault.reply if fault else step
        if anthropic and self.prompt_cache is not None:
            uncached, read, write = self.prompt_cache.account(request.body)
            answer = attrs.evolve(answer, usage=(uncached, answer.usage[1]), cache=(read, write))
        if not request.streaming:
            if protocol == "gemini":
                body = gemini_body(answer, model, ids=ids)
            elif protocol == "responses":
                body = responses_body(answer, model)
            else:
                body = anthropic_body(answer, model) if anthropic else openai_body(answer, model)
            return await self._send_body(stream, 200, _dumps(body), close)
        if protocol == "gemini":
            frames = gemini_frames(answer, model, ids=ids)
        elif protocol == "responses":
            frames = responses_frames(answer, model)
        else:
            frames = anthropic_frames(answer, model) if anthropic else openai_frames(answer, model)
        head = _head(200, (("content-type", "text/event-stream"), ("cache-control", "no-cache"), *close, _CHUNKED))
        cut = len(frames) if fault is None else fault.after
        # The head goes with the first frame (as a server flushing its first chunk does).
        await _send(stream, head + b"".join(map(_chunk, frames[:1])) if cut else head)
        for frame in frames[1:cut]:
            await _send(stream, _chunk(frame))
        if fault is not None:
            if fault.kind == "drop":
                return False
            if fault.kind == "hang":
                await self._wait_for_close(stream, request)
                return False
            if fault.kind == "error":
                in_stream = {"anthropic": anthropic_error, "gemini": gemini_error, "responses": responses_error}
                error = in_stream.get(protocol, openai_error)(0, fault.error_type, fault.message)
                named = protocol in ("anthropic", "responses")  # SSE events with an event name
                frame = _sse("error", error) if named else b"data: " + _dumps(error) + b"\n\n"
                await _send(stream, _chunk(frame))
                frames = []
            elif fault.kind == "garbage":
                await _send(stream, _chunk(b'event: content_block_delta\ndata: {"type": "content_bl\n\n'))
                frames = []
            elif fault.kind == "gate":
                await self.gate.wait()
            for frame in frames[cut:]:
                await _send(stream, _chunk(frame))
        await _send(stream, b"0\r\n\r\n")
        return True

    async def _wait_for_close(self, stream: trio.SocketStream, request: RecordedRequest) -> None:
        try:
            while await stream.receive_some(65536):
                pass
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            pass
        request.client_closed = True
        self.client_closed.set()

    async def _send_body(
        self,
        stream: trio.SocketStream,
        status: int,
        body: bytes,
        headers: tuple[tuple[str, str], ...] = (),
        *,
        content_type: str = "application/json",
    ) -> bool:
        head = _head(
            status,
            (("content-type", content_type), ("content-length", str(len(body))), ("request-id", "req_local"), *headers),
        )
        await _send(stream, head + body)
        return True


class _Timer:
    """Sleeps for the server's requests: one task wakes every sleeper whose time came.

    A ``trio.sleep`` per request costs the server a cancel scope, a deadline
    and a delivered cancellation each (about a quarter of its CPU per
    request at 1,000 concurrent requests, which bounds the makespans the
    benchmarks measure); here a sleeper parks until the timer task, woken at
    the earliest deadline, reschedules every sleeper that is due.
    """

    __slots__ = ("_heap", "_order", "_scope")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, list[Any]]] = []
        self._order = itertools.count()
        self._scope: trio.CancelScope | None = None

    async def sleep(self, delay: float) -> None:
        """Return after ``delay`` seconds (cancellable); needs :meth:`run` running."""
        deadline = trio.current_time() + delay
        sleeper: list[Any] = [trio.lowlevel.current_task()]
        heapq.heappush(self._heap, (deadline, next(self._order), sleeper))
        scope = self._scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

        def abort(_: Any) -> trio.lowlevel.Abort:
            sleeper[0] = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    async def run(self) -> None:
        """Wake sleepers as their deadlines pass, until cancelled."""
        heap = self._heap
        while True:
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as self._scope:
                await trio.sleep_forever()
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                task = heapq.heappop(heap)[2][0]
                if task is not None:
                    trio.lowlevel.reschedule(task)


_CLOSE = ("connection", "close")
_CHUNKED = ("transfer-encoding", "chunked")


#: Whether sockets are read and written through their descriptors (POSIX; see :func:`_send`).
_DIRECT = os.name == "posix"


async def _send(stream: trio.abc.Stream, data: bytes) -> None:
    """``stream.send_all(data)``: on POSIX and plain TCP, first one non-blocking ``os.write`` and a checkpoint.

    What the socket does not take at once goes through ``send_all``. The
    checkpoint after each write keeps a server's turn-taking between
    frames (a client reads a stream's events one by one, as from a
    provider flushing each event), without ``send_all``'s layers.
    """
    sent = 0
    if _DIRECT and type(stream) is trio.SocketStream:
        try:
            sent = os.write(stream.socket.fileno(), data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"{type(exc).__name__}: {exc}") from exc
    if sent < len(data):
        await stream.send_all(memoryview(data)[sent:] if sent else data)
    else:
        await trio.lowlevel.checkpoint()


async def _receive(stream: trio.abc.Stream) -> bytes:
    """``stream.receive_some()``: on POSIX and plain TCP, ``trio.lowlevel.wait_readable`` and ``os.read``."""
    if not _DIRECT or type(stream) is not trio.SocketStream:  # (a TLS stream, in some tests)
        return bytes(await stream.receive_some(65536))
    fd = stream.socket.fileno()
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, 65536)
        except BlockingIOError:  # woken without data after all: wait again
            pass
        except OSError as exc:
            raise trio.BrokenResourceError(f"{type(exc).__name__}: {exc}") from exc


@functools.lru_cache(maxsize=256)
def _head(status: int, headers: tuple[tuple[str, str], ...]) -> bytes:
    """A response head: status line (with the standard reason phrase) and ``headers``."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def _chunk(frame: bytes) -> bytes:
    """``frame`` as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(frame), frame)


class _Requests:
    """httptools' callbacks for one connection's requests: each complete one joins :attr:`complete`."""

    __slots__ = ("_body", "_headers", "_target", "complete", "parser")

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        #: ``(method, target, headers, body, keep_alive)`` of each request read whole, oldest first.
        self.complete: deque[tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes, bool]] = deque()
        self._target = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []

    def on_message_begin(self) -> None:
        self._target = b""
        self._headers = []
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self.parser
        self.complete.append(
            (parser.get_method(), self._target, self._headers, b"".join(self._body), parser.should_keep_alive())
        )


# ---------------------------------------------------------------------------- as a process


async def _serve_forever(latency: float) -> None:
    server = ProtocolServer(latency=latency, responder=tool_then_answer)
    server.record = False
    async with trio.open_nursery() as nursery:
        await nursery.start(server.run)
        print(server.port, flush=True)
        # Exit when the parent closes our stdin (or dies).
        await trio.to_thread.run_sync(sys.stdin.read, abandon_on_cancel=True)
        nursery.cancel_scope.cancel()


def main() -> None:
    """``python server.py --latency 0.05``: serve until stdin closes; prints the port first."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--latency", type=float, default=0.0, help="seconds added to every request")
    args = parser.parse_args()
    trio.run(_serve_forever, args.latency)


if __name__ == "__main__":
    main()
