"""The messages an :class:`AgentHandle` sends to its agent process (private protocol).

The kernel answers most of them itself. A :class:`Routed` request is a
feature's: the capabilities' ``answer`` hooks get it (approvals answer
``Decide`` and ``GetApprovals``), and it says itself what the reply is when
no capability takes it.
"""

from __future__ import annotations

from typing import Any, final

import attrs
import trio

from ..messages import DocumentBlock, ImageBlock
from ..schema import Schema
from ._errors import UnknownApproval, UnknownInputRequest

__all__ = [
    "AbortRun",
    "AttachRun",
    "CancelRun",
    "Clear",
    "Compact",
    "Decide",
    "FollowUp",
    "GetApprovals",
    "GetInputs",
    "GetHistory",
    "GetLastResult",
    "Respond",
    "Routed",
    "RunRequest",
    "Steer",
]


@final
@attrs.define(eq=False)
class RunRequest:
    """Start a run (or queue it). ``sink`` receives its events; a stream run is answered with its id at once.

    ``output`` is the result schema, compiled by the handle (a
    :class:`~condukt.schema.Schema`), or ``None``. ``attachments`` are the images and documents sent after the
    prompt's text. Arguments are checked by the handle before this is sent.
    """

    prompt: str
    attachments: tuple[ImageBlock | DocumentBlock, ...] = ()
    timeout: float | None = None
    max_turns: int | None = None
    sink: trio.MemorySendChannel[Any] | None = None
    output: Schema[Any] | None = None
    on_event: Any = None
    #: The run's :class:`~condukt.ModelSettings` (over the agent's), or ``None``.
    model_settings: Any = None
    #: Capabilities of this run only (``capabilities=``), hooked in after the agent's own.
    capabilities: tuple[Any, ...] = ()
    #: A detached run (``submit``): the agent logs its events; the reply is its id.
    detached: bool = False


@final
@attrs.frozen
class AbortRun:
    """Stop a run and wait until it has stopped.

    ``run`` is the request of the run to stop, ``run_id`` its id; both
    ``None``: whatever runs now. ``from_run`` is set when the caller is the
    run itself (an event callback, a tool): then the reply cannot wait for
    the run to stop, since the caller is part of it.
    """

    run: RunRequest | None = None
    run_id: str | None = None
    from_run: bool = False


@final
@attrs.frozen
class AttachRun:
    """Ask for a detached run's record (:class:`~condukt.agent._detached.RunRecord`); ``UnknownRun`` if none."""

    run_id: str


@final
@attrs.frozen
class CancelRun:
    """Fire-and-forget abort of one run whose caller went away (running or still queued)."""

    run: RunRequest


@final
@attrs.frozen
class Steer:
    """Add a user message before the next model request of the active run."""

    text: str


@final
@attrs.frozen
class FollowUp:
    """Queue a prompt to run after the current run."""

    text: str


@final
@attrs.frozen
class GetHistory:
    """Ask for the conversation."""


@final
@attrs.frozen
class Clear:
    """Forget the conversation (after the runs queued before it)."""


@final
@attrs.frozen
class Compact:
    """Run the compactor now (after the runs queued before it)."""


class Routed:
    """A request a capability answers (its ``answer`` hook), not the kernel."""

    __slots__ = ()

    def unanswered(self) -> Any:
        """The reply when no capability answered (or raise what the caller gets)."""
        return NotImplemented


@final
@attrs.frozen
class Decide(Routed):
    """Approve or deny a tool call waiting for approval (the approvals capability answers)."""

    call_id: str
    approved: bool
    reason: str = ""

    def unanswered(self) -> Any:
        """No agent without approvals has a call waiting."""
        raise UnknownApproval(self.call_id)


@final
@attrs.frozen
class GetApprovals(Routed):
    """Ask for the tool calls waiting for approval (the approvals capability answers)."""

    def unanswered(self) -> Any:
        """Nothing waits."""
        return ()


@final
@attrs.frozen
class Respond(Routed):
    """Answer a deferred tool call waiting for its result (the deferred capability answers)."""

    call_id: str
    value: Any

    def unanswered(self) -> Any:
        """No agent without deferred tools has a call waiting."""
        raise UnknownInputRequest(self.call_id)


@final
@attrs.frozen
class GetInputs(Routed):
    """Ask for the deferred tool calls waiting for an answer (the deferred capability answers)."""

    def unanswered(self) -> Any:
        """Nothing waits."""
        return ()


@final
@attrs.frozen
class GetLastResult:
    """Ask for the outcome of the last run that ended."""
