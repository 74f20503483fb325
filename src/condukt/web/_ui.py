"""What the UI stream adapters (AG-UI, the Vercel AI SDK) share: a run's events as message parts.

Both protocols describe an answer as blocks that open, stream and close:
text, reasoning, tool calls (with their arguments whole, as condukt has
them when the call starts) and tool results. :func:`ui_parts` turns an
agent's event stream into that sequence, closing an open text or reasoning
block before anything else starts, and telling the client's tools (which
the client runs) from the agent's own (whose results it sends).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator
from typing import Any, Literal

import attrs

from .. import events
from ._protocol import Conversation

__all__ = ["UiPart", "ui_parts"]

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


async def ui_parts(stream: Any, conversation: Conversation) -> AsyncIterator[UiPart]:
    """The parts of the run whose events ``stream`` yields (``agent.stream(...)``, entered).

    Each model response (a turn: its text and the results of its tool
    calls) is between ``step-start`` and ``step-end``. Ends with a ``finish`` part (``reason`` ``"tool-calls"`` when the
    client's tools were called, ``"length"`` after ``max_turns``, else
    ``"stop"``) or an ``error`` part (a failed run: ``reason`` is its error
    type, ``text`` its message).
    """
    open_kind: str | None = None  # "text" or "reasoning"
    open_id = ""
    client_names = conversation.client
    held: set[str] = set()  # client calls whose result is the placeholder: never sent
    max_turns = False
    async for event in stream:
        kind = type(event)
        if kind is events.TextDelta or kind is events.ThinkingDelta:
            wanted = "text" if kind is events.TextDelta else "reasoning"
            if open_kind != wanted:
                if open_kind is not None:
                    yield UiPart(_END[open_kind], open_id)
                open_kind, open_id = wanted, _new_id("msg" if wanted == "text" else "rs")
                yield UiPart("text-start" if wanted == "text" else "reasoning-start", open_id)
            yield UiPart("text-delta" if wanted == "text" else "reasoning-delta", open_id, event.text)
            continue
        if open_kind is not None and kind in (events.ToolCallStart, events.TurnEnd, events.Error, events.Done):
            yield UiPart(_END[open_kind], open_id)
            open_kind = None
        if kind is events.TurnStart:
            yield UiPart("step-start")
        elif kind is events.TurnEnd:
            yield UiPart("step-end")
        elif kind is events.ToolCallStart:
            call_id, name = event.id, event.name
            if name in client_names:
                accepted = any(call.id == call_id for call in conversation.client_calls)
                if not accepted:  # invalid arguments: the model gets an error result and tries again
                    continue
                held.add(call_id)
            yield UiPart("tool-call", call_id, name=name, arguments=event.arguments,
                         client=call_id in held)
        elif kind is events.ToolCallEnd:
            call_id = event.id
            if call_id in held or event.name in client_names:
                continue
            yield UiPart("tool-result", call_id, event.result, name=event.name,
                         is_error=event.is_error)
        elif kind is events.MaxTurnsReached:
            max_turns = True
        elif kind is events.Error:
            yield UiPart("error", text=event.message, reason=event.error_type)
            return
        elif kind is events.Done:
            if event.status == "completed":
                reason = "tool-calls" if held else "length" if max_turns else "stop"
                yield UiPart("finish", reason=reason)
            else:
                status = event.status
                yield UiPart("error", text=f"the run ended: {status}", reason="RunTimeout" if status == "timeout"
                             else "Aborted")
            return
