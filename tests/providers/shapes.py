"""Response shapes for the decoding tests: valid templates from the local server, and ways to break them.

A template is a real response of one protocol (``server.anthropic_body``,
``server.openai_frames``...) as JSON values; :func:`mutate` puts another
value, or raw JSON text (``1e999``, ``Infinity``, deep nesting), at any path
of it; :func:`body` and :func:`frames` give the bytes back.
"""

from __future__ import annotations

import copy
import json
from typing import Any

from condukt.testing.server import (
    Reply,
    ToolUse,
    anthropic_body,
    anthropic_frames,
    gemini_body,
    gemini_frames,
    openai_body,
    openai_frames,
    responses_body,
    responses_frames,
)

Path = tuple[Any, ...]

#: A reply that exercises every block kind: thinking, text and two tool calls.
FULL = Reply(
    "Hello there, world",
    "Let me think",
    (ToolUse("toolu_1", "get_weather", {"location": "Paris", "units": ["c"]}), ToolUse("toolu_2", "noop", {})),
    usage=(12, 7),
    chunk=5,
)


#: An image part, as image-capable Gemini models answer with (after the text, before the calls).
GEMINI_IMAGE = {"inlineData": {"mimeType": "image/png", "data": "iVBORw0KGgo="}}


class Raw:
    """JSON text put in a document verbatim (what ``json.dumps`` cannot produce: ``1e999``, deep nesting)."""

    def __init__(self, text: str) -> None:
        self.text = text

    def __repr__(self) -> str:
        return f"Raw({self.text[:30]!r}{'...' if len(self.text) > 30 else ''})"


class _Delete:
    def __repr__(self) -> str:
        return "DELETE"


#: Put at a path, removes the key (or list item) there.
DELETE = _Delete()


def anthropic_template(streamed: bool) -> list[tuple[str, Any]]:
    """``[(event name, JSON value)]``: one entry for a plain body, one per SSE frame for a stream."""
    if not streamed:
        return [("", anthropic_body(FULL, "claude-test"))]
    out = []
    for frame in anthropic_frames(FULL, "claude-test"):
        head, data = frame.decode().split("\ndata: ", 1)
        out.append((head.removeprefix("event: "), json.loads(data)))
    return out


def openai_template(streamed: bool) -> list[tuple[str, Any]]:
    """As :func:`anthropic_template`; ``"[DONE]"`` stays a string."""
    if not streamed:
        body = openai_body(FULL, "gpt-test")
        body["choices"][0]["message"]["refusal"] = None
        body["usage"]["prompt_tokens_details"] = {"cached_tokens": 2}
        return [("", body)]
    out = []
    for frame in openai_frames(FULL, "gpt-test"):
        data = frame.decode().removeprefix("data: ").strip()
        out.append(("", data if data == "[DONE]" else json.loads(data)))
    return out


def gemini_template(streamed: bool) -> list[tuple[str, Any]]:
    """As :func:`anthropic_template`, for Gemini's ``generateContent`` (usage with cached and thought tokens)."""
    if not streamed:
        body = gemini_body(FULL, "gemini-test")
        body["usageMetadata"].update(cachedContentTokenCount=2, thoughtsTokenCount=3)
        body["candidates"][0]["content"]["parts"].insert(2, copy.deepcopy(GEMINI_IMAGE))
        return [("", body)]
    out = [("", json.loads(frame.decode().removeprefix("data: "))) for frame in gemini_frames(FULL, "gemini-test")]
    image = copy.deepcopy(out[-2][1])  # the frame with the function calls, before the last one
    image["candidates"][0]["content"]["parts"] = [copy.deepcopy(GEMINI_IMAGE)]
    out.insert(len(out) - 2, ("", image))
    return out


def responses_template(streamed: bool) -> list[tuple[str, Any]]:
    """As :func:`anthropic_template`, for the OpenAI Responses API (cached tokens in the usage)."""
    if not streamed:
        body = responses_body(FULL, "gpt-test")
        body["usage"]["input_tokens_details"]["cached_tokens"] = 2
        return [("", body)]
    out = []
    for frame in responses_frames(FULL, "gpt-test"):
        head, data = frame.decode().split("\ndata: ", 1)
        out.append((head.removeprefix("event: "), json.loads(data)))
    return out


def paths(value: Any, prefix: Path = ()) -> list[Path]:
    """Every path in ``value``: the root, each key of each object and each index of each array."""
    out = [prefix]
    if isinstance(value, dict):
        for key, item in value.items():
            out.extend(paths(item, (*prefix, key)))
    elif isinstance(value, list):
        for index, item in enumerate(value):
            out.extend(paths(item, (*prefix, index)))
    return out


def mutate(document: Any, path: Path, replacement: Any) -> Any:
    """A copy of ``document`` with ``replacement`` (a JSON value, :class:`Raw` or :data:`DELETE`) at ``path``."""
    if not path:
        return {} if replacement is DELETE else replacement
    document = copy.deepcopy(document)
    parent = document
    for step in path[:-1]:
        parent = parent[step]
    if replacement is DELETE:
        del parent[path[-1]]
    else:
        parent[path[-1]] = replacement
    return document


def dumps(document: Any) -> bytes:
    """JSON text for ``document``, :class:`Raw` parts spliced in as they are."""
    raws: list[str] = []

    def default(value: Any) -> Any:
        if isinstance(value, Raw):
            raws.append(value.text)
            return f"\x00raw{len(raws) - 1}\x00"
        raise TypeError(type(value).__name__)

    text = json.dumps(document, default=default)
    for index, raw in enumerate(raws):
        text = text.replace(json.dumps(f"\x00raw{index}\x00"), raw, 1)
    return text.encode("utf-8", "surrogatepass")


def frame(protocol: str, event: str, document: Any) -> bytes:
    """One SSE frame (``document`` may be ``"[DONE]"`` or a :class:`Raw` body)."""
    data = document.encode() if isinstance(document, str) else dumps(document)
    head = b"event: " + event.encode() + b"\n" if protocol in ("anthropic", "openai-responses") and event else b""
    return head + b"data: " + data + b"\n\n"


def stream(protocol: str, entries: list[tuple[str, Any]]) -> bytes:
    """A whole ``text/event-stream`` body."""
    return b"".join(frame(protocol, event, document) for event, document in entries)


def deep(depth: int) -> Raw:
    """Arrays nested ``depth`` deep."""
    return Raw("[" * depth + "]" * depth)
