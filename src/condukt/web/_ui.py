"""What the UI stream adapters (AG-UI, the Vercel AI SDK) share: a run's events as message parts.

Both protocols describe an answer as blocks that open, stream and close:
text, reasoning, tool calls (with their arguments whole, as condukt has
them when the call starts) and tool results. :class:`UiParts` turns an
agent's events into that sequence, closing an open text or reasoning
block before anything else starts, and telling the client's tools (which
the client runs) from the agent's own (whose results it sends).
"""

from __future__ import annotations

import uuid
from typing import Any, Literal

import attrs

from .. import events
from ._protocol import Conversation

__all__ = ["UiPart", "UiParts"]

Kind = Literal[
    "step-start", "step-end", "text-start", "text-delta", "text-end", "reasoning-start", "reasoning-delta",
    "reasoning-end", "tool-call", "tool-result", "error", "finish",
]
_END: dict[str, Kind] = {"text": "text-end", "reasoning": "reasoning-end"}


@attrs.frozen
class UiPart:
    """One step of an answer. ``id`` names the text or reasoning block, or the tool call."""

    kind: Kind
    id: str = ""
    text: str = ""
    name: str = ""
    arguments: Any = None
    is_error: bool = False
    #: For ``tool-call``: whether the client runs it (the run ended for the client to answer it).
    client: bool = False
    #: For ``error``: the failed run's error type; for ``finish``: why the run stopped.
    reason: str = ""


def _new_id(prefix: str) -> str:
    return f"{prefix}_{uuid.uuid4().hex}"


class UiParts:
    """Turns a run's events into :class:`UiPart` s: ``parts = translate(event)`` for each event, in order.

    Synchronous (called from the adapter's own loop over ``agent.stream``),
    so a stream pays no async generator in between. Each model response (a
    turn: its text and the results of its tool calls) is between
    ``step-start`` and ``step-end``. The last parts are a ``finish`` part
    (``reason`` ``"tool-calls"`` when the client's tools were called,
    ``"length"`` after ``max_turns``, else ``"stop"``) or an ``error`` part
    (a failed run: ``reason`` is its error type, ``text`` its message);
    ``done`` is then set.
    """

    __slots__ = ("client_names", "conversation", "done", "held", "max_turns", "open_id", "open_kind")

    def __init__(self, conversation: Conversation) -> None:
        self.conversation = conversation
        self.client_names = conversation.client
        self.open_kind: str | None = None  # "text" or "reasoning"
        self.open_id = ""
        self.held: set[str] = set()  # client calls whose result is the placeholder: never sent
        self.max_turns = False
        self.done = False

    def __call__(self, event: Any) -> list[UiPart]:
        if self.done:
            return []
        kind = type(event)
        parts: list[UiPart] = []
        if kind is events.TextDelta or kind is events.ThinkingDelta:
            text = kind is events.TextDelta
            wanted = "text" if text else "reasoning"
            if self.open_kind != wanted:
                if self.open_kind is not None:
                    parts.append(UiPart(_END[self.open_kind], self.open_id))
                self.open_kind, self.open_id = wanted, _new_id("msg" if text else "rs")
                parts.append(UiPart("text-start" if text else "reasoning-start", self.open_id))
            parts.append(UiPart("text-delta" if text else "reasoning-delta", self.open_id, event.text))
            return parts
        if self.open_kind is not None and kind in _CLOSING:
            parts.append(UiPart(_END[self.open_kind], self.open_id))
            self.open_kind = None
        if kind is events.TurnStart:
            parts.append(UiPart("step-start"))
        elif kind is events.TurnEnd:
            parts.append(UiPart("step-end"))
        elif kind is events.ToolCallStart:
            call_id, name = event.id, event.name
            client = name in self.client_names
            if client:
                if not any(call.id == call_id for call in self.conversation.client_calls):
                    return parts  # invalid arguments: the model gets an error result and tries again
                self.held.add(call_id)
            parts.append(UiPart("tool-call", call_id, name=name, arguments=event.arguments, client=client))
        elif kind is events.ToolCallEnd:
            if event.id not in self.held and event.name not in self.client_names:
                parts.append(UiPart("tool-result", event.id, event.result, name=event.name, is_error=event.is_error))
        elif kind is events.MaxTurnsReached:
            self.max_turns = True
        elif kind is events.Error:
            self.done = True
            parts.append(UiPart("error", text=event.message, reason=event.error_type))
        elif kind is events.Done:
            self.done = True
            if event.status == "completed":
                reason = "tool-calls" if self.held else "length" if self.max_turns else "stop"
                parts.append(UiPart("finish", reason=reason))
            else:
                reason = "RunTimeout" if event.status == "timeout" else "Aborted"
                parts.append(UiPart("error", text=f"the run ended: {event.status}", reason=reason))
        return parts


_CLOSING = frozenset({events.ToolCallStart, events.TurnEnd, events.Error, events.Done})
