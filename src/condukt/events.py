"""Events an agent emits while it runs; ``Done`` is always the last one of a run."""

from __future__ import annotations

from typing import Any, Literal, Union, final

import attrs

from .messages import AssistantMessage, Usage

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
    "ApprovalDecided",
    "ApprovalRequested",
    "Done",
    "Error",
    "Event",
    "MaxTurnsReached",
    "Retry",
    "SubagentEvent",
    "TextDelta",
    "ThinkingDelta",
    "ToolCallEnd",
    "ToolCallStart",
    "ToolProgress",
    "TurnEnd",
    "TurnStart",
    "to_json",
]


@final
@attrs.frozen
class AgentStart:
    """A run began. ``session_id`` identifies the agent's conversation, ``run_id`` the run.

    ``run_id`` is what ``agent.abort(run_id)`` takes; it is unique within the node.
    """

    session_id: str
    prompt: str
    run_id: str = ""


@final
@attrs.frozen
class TurnStart:
    """A model request is about to be made (turns count from 1)."""

    turn: int


@final
@attrs.frozen
class TextDelta:
    """A piece of the answer, as it streams in."""

    text: str


@final
@attrs.frozen
class ThinkingDelta:
    """A piece of the model's reasoning, as it streams in."""

    text: str


@final
@attrs.frozen
class ToolCallStart:
    """A tool call is about to run."""

    id: str
    name: str
    arguments: Any


@final
@attrs.frozen
class ToolCallEnd:
    """A tool call finished; ``result`` is the text the model sees."""

    id: str
    name: str
    result: str
    is_error: bool
    duration: float


@final
@attrs.frozen
class ToolProgress:
    """A running tool call reports how far it got (an MCP server's progress, a remote agent's task state).

    ``call_id`` is the call's id (its :class:`ToolCallStart`'s ``id``);
    ``progress`` and ``total`` are numbers when the tool counts (``total``
    None when unknown); ``message`` says what it is doing, scrubbed like
    the tool's result. A tool emits it with ``await context.emit(...)``.
    """

    call_id: str
    message: str = ""
    progress: float | None = None
    total: float | None = None


@final
@attrs.frozen
class ApprovalRequested:
    """A tool call waits for a person: ``agent.approve(call_id)`` or ``agent.deny(call_id, reason)``.

    ``arguments`` are scrubbed like every event (secret values and redactor
    matches replaced). ``expires_at`` is the unix time the request is denied
    at (``approval_timeout``), or None. See ``docs/approvals.md``.
    """

    call_id: str
    tool: str
    arguments: Any
    expires_at: float | None = None


@final
@attrs.frozen
class ApprovalDecided:
    """A pending approval was decided: approved, denied (``reason`` goes to the model) or expired."""

    call_id: str
    tool: str
    approved: bool
    reason: str = ""


@final
@attrs.frozen
class TurnEnd:
    """A turn (model response and its tool calls) completed."""

    turn: int
    message: AssistantMessage


@final
@attrs.frozen
class Retry:
    """A model request failed and will be retried after ``delay`` seconds."""

    provider: str
    attempt: int
    reason: str
    delay: float


@final
@attrs.frozen
class MaxTurnsReached:
    """The run stopped because it used ``max_turns`` model requests."""

    max_turns: int


@final
@attrs.frozen
class AgentEnd:
    """A run completed: its final text, summed usage and number of turns."""

    text: str
    usage: Usage
    turns: int


@final
@attrs.frozen
class Error:
    """A run failed; ``error_type`` is the exception class name."""

    error_type: str
    message: str


@final
@attrs.frozen
class Done:
    """Always the last event of a run."""

    status: Literal["completed", "failed", "aborted", "timeout"]


@final
@attrs.frozen
class AgentEvent:
    """An event as published to node subscribers: which agent (session id) emitted it."""

    agent_id: str
    event: Event


@final
@attrs.frozen
class SubagentEvent:
    """An event of a sub-agent, forwarded to its parent's stream."""

    role: str
    agent_id: str
    event: Event


Event = Union[
    AgentStart,
    TurnStart,
    TextDelta,
    ThinkingDelta,
    ToolCallStart,
    ToolCallEnd,
    ToolProgress,
    ApprovalRequested,
    ApprovalDecided,
    TurnEnd,
    Retry,
    MaxTurnsReached,
    AgentEnd,
    Error,
    Done,
    SubagentEvent,
    AgentEvent,
]


def to_json(event: Event) -> dict[str, Any]:
    """The JSON shape of ``event``: its fields, plus ``"type"`` naming its class in snake case.

    ``{"type": "text_delta", "text": "Hel"}``, ``{"type": "done", "status":
    "completed"}``... (every shape is listed in ``docs/http.md``). This is
    what the HTTP endpoint sends as each SSE event's data, the ``type``
    being the SSE event name; it is produced by the one cattrs converter of
    :mod:`condukt.serialization`, so ``condukt.serialization.structure(data,
    condukt.events.Event)`` reads it back. Never raises for an event.
    """
    from .serialization import unstructure  # serialization imports this module

    data: dict[str, Any] = unstructure(event, Event)
    return data
