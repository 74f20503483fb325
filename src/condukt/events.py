"""Events an agent emits while it runs; ``Done`` is always the last one of a run."""

from __future__ import annotations

from typing import Any, Literal, Union

import attrs

from .messages import AssistantMessage, Usage

__all__ = [
    "AgentEnd",
    "AgentEvent",
    "AgentStart",
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
    "TurnEnd",
    "TurnStart",
    "to_json",
]


@attrs.frozen
class AgentStart:
    """A run began. ``session_id`` identifies the agent's conversation, ``run_id`` the run.

    ``run_id`` is what ``agent.abort(run_id)`` takes; it is unique within the node.
    """

    session_id: str
    prompt: str
    run_id: str = ""


@attrs.frozen
class TurnStart:
    """A model request is about to be made (turns count from 1)."""

    turn: int


@attrs.frozen
class TextDelta:
    """A piece of the answer, as it streams in."""

    text: str


@attrs.frozen
class ThinkingDelta:
    """A piece of the model's reasoning, as it streams in."""

    text: str


@attrs.frozen
class ToolCallStart:
    """A tool call is about to run."""

    id: str
    name: str
    arguments: Any


@attrs.frozen
class ToolCallEnd:
    """A tool call finished; ``result`` is the text the model sees."""

    id: str
    name: str
    result: str
    is_error: bool
    duration: float


@attrs.frozen
class TurnEnd:
    """A turn (model response and its tool calls) completed."""

    turn: int
    message: AssistantMessage


@attrs.frozen
class Retry:
    """A model request failed and will be retried after ``delay`` seconds."""

    provider: str
    attempt: int
    reason: str
    delay: float


@attrs.frozen
class MaxTurnsReached:
    """The run stopped because it used ``max_turns`` model requests."""

    max_turns: int


@attrs.frozen
class AgentEnd:
    """A run completed: its final text, summed usage and number of turns."""

    text: str
    usage: Usage
    turns: int


@attrs.frozen
class Error:
    """A run failed; ``error_type`` is the exception class name."""

    error_type: str
    message: str


@attrs.frozen
class Done:
    """Always the last event of a run."""

    status: Literal["completed", "failed", "aborted", "timeout"]


@attrs.frozen
class AgentEvent:
    """An event as published to node subscribers: which agent (session id) emitted it."""

    agent_id: str
    event: Event


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
    TurnEnd,
    Retry,
    MaxTurnsReached,
    AgentEnd,
    Error,
    Done,
    SubagentEvent,
    AgentEvent,
]


def to_json(event: Event) -> str:
    """One line of JSON for ``event``: its fields plus a ``"type"`` tag (``"text_delta"``, ``"done"``...).

    The one event format of condukt's surfaces (``condukt run --json``, the
    HTTP endpoint's event streams): written by the one cattrs converter of
    :mod:`condukt.serialization`, so ``serialization.loads(line, Event)``
    reads it back into the same class. Nested events (``SubagentEvent``,
    ``AgentEvent``) are tagged the same way.
    """
    from .serialization import dumps  # serialization imports this module

    return dumps(event, Event)
