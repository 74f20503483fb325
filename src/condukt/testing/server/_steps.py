"""The scripted steps a :class:`~condukt.testing.server.ProtocolServer` answers with, in any protocol."""

from __future__ import annotations

import itertools
from typing import Any, Literal

import attrs

__all__ = ["Disconnect", "Fault", "Malformed", "Raw", "Reply", "Slow", "Status", "Step", "ToolUse", "reply", "tool_use"]


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
    ``chunk``-character JSON fragments. ``interval`` seconds pass between
    two frames of a streamed answer (a model writing slowly; 0: at once).
    """

    text: str = ""
    thinking: str = ""
    tool_calls: tuple[ToolUse, ...] = ()
    usage: tuple[int, int] = (10, 5)
    chunk: int = 8
    signature: str = "sig-abc"
    #: Prompt tokens ``(read from, written to)`` the provider's cache (Anthropic's usage fields).
    cache: tuple[int, int] = (0, 0)
    interval: float = 0.0


def reply(
    text: str = "",
    *,
    thinking: str = "",
    tools: Any = (),
    usage: tuple[int, int] = (10, 5),
    chunk: int = 8,
    interval: float = 0.0,
) -> Reply:
    """A :class:`Reply`; ``tools`` is a :class:`ToolUse` or a list of them."""
    calls = (tools,) if isinstance(tools, ToolUse) else tuple(tools)
    return Reply(text, thinking, calls, usage, chunk, interval=interval)


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
