"""The interface between the agent loop and a model: :class:`Model` and :class:`ModelRequest`."""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Iterable
from typing import Any, Literal, Protocol, runtime_checkable

import attrs

from ..events import Event
from ..messages import AssistantMessage, Message, ToolDefinition
from ..otp import ConduktError
from ._settings import ModelSettings

__all__ = [
    "THINKING_LEVELS",
    "Emit",
    "Model",
    "ModelError",
    "ModelRequest",
    "ThinkingLevel",
    "validate_thinking_level",
]

ThinkingLevel = Literal["off", "minimal", "low", "medium", "high"]
THINKING_LEVELS: tuple[str, ...] = ("off", "minimal", "low", "medium", "high")

#: How a model streams: awaits ``emit(TextDelta(...))`` / ``emit(ThinkingDelta(...))``
#: (and ``Retry``) as pieces arrive.
Emit = Callable[[Event], Awaitable[None]]


def validate_thinking_level(level: Any) -> ThinkingLevel:
    """Return ``level`` if it is a known thinking level, else raise ``ValueError``."""
    if level not in THINKING_LEVELS:
        raise ValueError(f"unknown thinking_level {level!r}; expected one of {', '.join(THINKING_LEVELS)}")
    result: ThinkingLevel = level
    return result


class ModelError(ConduktError):
    """A model request failed (provider error, bad response, exhausted script...).

    The agent reports it as the run's error; the agent process carries on.
    Any *other* exception escaping a model is a bug and crashes the agent.
    """


def _names(names: Iterable[str]) -> tuple[str, ...]:
    return names if type(names) is tuple else tuple(names)


@attrs.frozen
class ModelRequest:
    """Everything a model needs for one turn.

    ``settings`` holds the sampling settings (:class:`~condukt.ModelSettings`)
    of the agent and the run; its ``max_tokens`` is already in ``max_tokens``.
    ``stream_arguments`` names the tools whose arguments the model streams
    as :class:`~condukt.events.ToolCallDelta` events while it writes them
    (a provider that receives a call whole sends none).
    """

    system_prompt: str | None
    messages: tuple[Message, ...]
    tools: tuple[ToolDefinition, ...] = ()
    thinking_level: ThinkingLevel = "off"
    max_tokens: int | None = None
    settings: ModelSettings | None = None
    stream_arguments: tuple[str, ...] = attrs.field(default=(), converter=_names)


@runtime_checkable
class Model(Protocol):
    """A model the agent loop can ask for one response.

    ``complete`` streams deltas through ``emit`` as they arrive and returns
    the whole :class:`AssistantMessage` (text, thinking, tool calls, usage,
    stop reason). It must raise :class:`ModelError` (or a subclass) for
    failures the run should report, and must be cancellable: an abort or a
    run timeout cancels it.
    """

    @property
    def name(self) -> str:
        """``"provider:model"`` or a descriptive name."""
        ...

    async def complete(self, request: ModelRequest, emit: Emit) -> AssistantMessage:
        """Ask for one response to ``request``.

        The agent calls it inside the run: an abort or the run's timeout
        cancels it, the run fails with :class:`~condukt.Aborted` or
        :class:`~condukt.RunTimeout` and the turn is dropped from the history
        (deltas already emitted stay emitted). An implementation must release
        what it holds and let ``trio.Cancelled`` propagate, never turning it
        into a :class:`ModelError` or a reply; an exception that is not a
        :class:`ModelError` crashes the agent.
        """
        ...
