"""One run inside the agent process: what it was asked, where it stands, who hears of it."""

from __future__ import annotations

import logging
import warnings
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, final

import trio

from ..events import AgentEvent, Event
from ..messages import AssistantMessage, DocumentBlock, ImageBlock, Message, Usage
from ..otp import Caller
from ._context import AgentContext
from ._requests import RunRequest

if TYPE_CHECKING:
    from ..sessions import RunCheckpoint

__all__ = ["NO_USAGE", "Listeners", "Run", "resumed_turn"]

logger = logging.getLogger("condukt.agent")

#: The scope of every run that has not started (never entered, never cancelled).
_NOT_STARTED = trio.CancelScope()
#: A new run's usage (frozen: shared; the loop takes the first response's usage as it is).
NO_USAGE = Usage()


class Listeners:
    """Who hears every run of one agent besides the run's own stream and callback.

    Node subscribers (``node.subscribe``) and the agent's ``handle_event``
    (when its class overrides it): one per agent incarnation.
    """

    __slots__ = ("context", "handle_event", "pubsub", "subscribed")

    def __init__(self, context: AgentContext, handle_event: Callable[[Event], Awaitable[None]] | None) -> None:
        self.context = context
        #: The agent's ``handle_event``, or None when its class leaves it as it is.
        self.handle_event = handle_event
        self.pubsub = context.node.pubsub
        #: The node's topics with subscribers (empty: nobody to publish events to): a live view.
        self.subscribed = self.pubsub.topics


@final
class Run:
    """The state of one run, from the moment the agent accepted it until its ``Done``.

    Capabilities receive it in their hooks. Read-only for them, except
    ``state``, a dict a capability may keep per-run data in (under a key of
    its own). ``context`` is the agent's :class:`~condukt.agent.AgentContext`;
    ``id`` is unique within the node; ``turn`` counts model requests from 1;
    ``usage`` sums the responses' usage so far; ``text`` is the latest
    non-empty answer text; ``resumed`` the
    :class:`~condukt.sessions.RunCheckpoint` a run restarted after a crash
    continues from (None for a new run).
    """

    __slots__ = (
        "_state",
        "abort_waiters",
        "aborted",
        "attachments",
        "caller",
        "context",
        "ending",
        "hooks",
        "hosted",
        "id",
        "listeners",
        "max_turns",
        "on_event",
        "prompt",
        "request",
        "resumed",
        "scope",
        "sink",
        "start",
        "started_at",
        "steers",
        "taken",
        "text",
        "timeout",
        "tool_calls",
        "turn",
        "usage",
    )

    def __init__(
        self,
        listeners: Listeners,
        run_id: str,
        request: RunRequest,
        caller: Caller | None,
        resumed: RunCheckpoint | None = None,
    ) -> None:
        self.context = listeners.context
        self.listeners = listeners
        self.id = run_id
        self.request = request
        self.prompt = request.prompt
        self.attachments = request.attachments
        self.timeout: float | None = request.timeout
        self.max_turns = request.max_turns
        self.caller = caller
        #: Whether the caller's task runs it (``Caller.host``): its cancellation then aborts the run there.
        self.hosted = False
        #: Set when the process exits during a hosted run: it ends at once, as a cancelled worker would.
        self.ending = False
        self.sink = request.sink
        self.on_event = request.on_event
        #: The run's capability hooks (a ``Hooks``), set once the agent has planned the run.
        self.hooks: Any = None
        #: Cancelled by :meth:`abort` and at the run's deadline; made when the run starts.
        self.scope = _NOT_STARTED
        self.aborted = False
        # Sequences that are usually empty start as (): a run makes few
        # objects, which is what keeps many runs in flight cheap (the cyclic
        # GC's cost grows with every live container; benchmarks/agent_loop.py).
        #: Steers waiting for the next request.
        self.steers: Sequence[str] = ()
        #: Steers added to the history since the last completed turn (given back if it is dropped).
        self.taken: Sequence[str] = ()
        self.abort_waiters: Sequence[Caller] = ()
        self._state: dict[str, Any] | None = None
        self.turn = 0
        #: The current turn's tool calls while they run (for ``AgentHandle.info``), else None.
        self.tool_calls: Any = None
        self.usage = NO_USAGE
        self.text = ""
        #: Index of the run's prompt in the history (set when it starts).
        self.start = -1
        self.started_at = 0.0
        #: The checkpoint this run resumes (after a restart), else None.
        self.resumed = resumed

    @property
    def session(self) -> AgentContext:
        """Deprecated: the agent's :class:`~condukt.agent.AgentContext` is ``run.context``."""
        warnings.warn(
            "Run.session is deprecated: use run.context (a condukt.agent.AgentContext)",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.context

    def listened(self) -> bool:
        """Whether anyone receives the run's events (else per-call events need not be built)."""
        listeners = self.listeners
        return (
            self.sink is not None
            or self.on_event is not None
            or listeners.handle_event is not None
            or bool(listeners.subscribed)
        )

    async def emit(self, event: Event) -> None:
        """Deliver ``event`` to node subscribers, the run's stream and callback, and ``handle_event``.

        Runs in the run: an abort or the run's timeout cancels a delivery
        that waits (a full stream). A callback that raises is logged and
        dropped; a stream whose reader left is dropped too.
        """
        listeners = self.listeners
        if listeners.subscribed:
            listeners.pubsub.publish(self.context.id, AgentEvent(self.context.id, event))
        sink = self.sink
        if sink is not None:
            try:
                await sink.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                self.sink = None  # the reader left; the run is being aborted
        callback = self.on_event
        if callback is not None:
            try:
                await callback(event)
            except Exception as exc:
                logger.error("on_event callback raised; dropping it", exc_info=exc)
                self.on_event = None
        handle_event = listeners.handle_event
        if handle_event is not None:
            await handle_event(event)
        if self.aborted:
            await trio.lowlevel.checkpoint()  # a callback aborted its own run: stop here

    async def history_changed(self) -> None:
        """Tell the run's capabilities the history changed (their ``history_changed`` hooks: a store saves).

        For a capability that changed what a save holds mid-turn (approvals:
        a call starts or stops waiting). Runs in the run: an abort or the
        run's timeout may cancel it.
        """
        context = self.context
        for changed in self.hooks.history_changed:
            await changed(context)

    @property
    def state(self) -> dict[str, Any]:
        """Per-run data of capabilities, each under a key of its own (made on first use)."""
        state = self._state
        if state is None:
            state = self._state = {}
        return state

    def abort(self) -> None:
        """Stop the run: its loop sees cancellation at the next checkpoint and fails with ``Aborted``."""
        self.aborted = True
        if self.scope is not _NOT_STARTED:  # else the start sees ``aborted``
            self.scope.cancel()

    def end(self) -> None:
        """The process exits during the run its caller hosts: stop at the next checkpoint, settle nothing."""
        self.ending = True
        if self.scope is not _NOT_STARTED:  # else the start sees ``ending``
            self.scope.cancel()

    @property
    def images(self) -> tuple[ImageBlock, ...]:
        """The images sent with the prompt (``images=``)."""
        return tuple(block for block in self.attachments if type(block) is ImageBlock)

    @property
    def documents(self) -> tuple[DocumentBlock, ...]:
        """The documents sent with the prompt (``documents=``)."""
        return tuple(block for block in self.attachments if type(block) is DocumentBlock)

    @property
    def structured(self) -> bool:
        """Whether the run asks for a structured result (``output=``)."""
        return self.request.output is not None

    def __repr__(self) -> str:
        return f"<Run {self.id} turn {self.turn}>"


def resumed_turn(messages: Sequence[Message]) -> AssistantMessage | None:
    """The turn in flight at the end of a restored history: an assistant message that called tools.

    A resumed run finishes it; a snapshot without a run to resume drops it.
    """
    last = messages[-1] if messages else None
    if type(last) is AssistantMessage and last.tool_calls:
        return last
    return None
