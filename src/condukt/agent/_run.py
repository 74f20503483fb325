"""One run inside the agent process: what it was asked, where it stands, who waits for it."""

from __future__ import annotations

from collections.abc import Awaitable, Sequence
from typing import TYPE_CHECKING, Any, Literal

import attrs
import trio

from ..messages import DocumentBlock, ImageBlock, Usage
from ..otp import Caller

if TYPE_CHECKING:
    from ..events import Event
    from ..sessions import RunCheckpoint
    from ._capability import Hooks
    from ._requests import RunRequest
    from ._session import Session

__all__ = ["NO_USAGE", "Run", "RunResult"]

#: The scope of every run that has not started (never entered, never cancelled).
_NOT_STARTED = trio.CancelScope()
#: A new run's usage (frozen: shared; the loop takes the first response's usage as it is).
NO_USAGE = Usage()


@attrs.frozen
class RunResult:
    """How a run ended: what ``agent.last_result()`` returns.

    ``status`` is that of its :class:`~condukt.events.Done`; ``value`` the
    result (final text or structured result) when it completed; ``error``
    the exception it failed with (the one its caller got), else None. A run
    whose caller is gone (resumed after a restart, a follow-up) ends here
    too, and in the events its subscribers receive.
    """

    run_id: str
    status: Literal["completed", "failed", "aborted", "timeout"]
    value: Any = None
    error: BaseException | None = None

class Run:
    """The state of one run, from the moment the agent accepted it until its ``Done``.

    Capabilities receive it in their hooks. Read-only for them, except
    ``state``, a dict a capability may keep per-run data in (under a key of
    its own). ``session`` is the agent's :class:`Session`; ``id`` is unique within the node; ``turn`` counts model
    requests from 1; ``usage`` sums the responses' usage so far; ``text`` is
    the latest non-empty answer text; ``resumed`` the
    :class:`~condukt.sessions.RunCheckpoint` a run restarted after a crash
    continues from (None for a new run).
    """

    __slots__ = (
        "abort_waiters",
        "aborted",
        "caller",
        "ending",
        "hooks",
        "hosted",
        "id",
        "attachments",
        "max_turns",
        "on_event",
        "prompt",
        "request",
        "resumed",
        "scope",
        "session",
        "sink",
        "start",
        "started_at",
        "_state",
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
        session: Session,
        run_id: str,
        request: RunRequest,
        caller: Caller | None,
        hooks: Hooks,
    ) -> None:
        self.session = session
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
        self.hooks = hooks
        #: Cancelled by :meth:`abort` and at the run's deadline; made when the run starts.
        self.scope = _NOT_STARTED
        self.aborted = False
        # Sequences that are usually empty start as (): a run makes few
        # objects, which is what keeps 10,000 runs in flight cheap (the
        # cyclic GC's cost grows with every live container).
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
        self.resumed: RunCheckpoint | None = None

    def emit(self, event: Event) -> Awaitable[None]:
        """Deliver ``event`` to the run's listeners (await the result).

        A method rather than a ``functools.partial`` made per run: no
        reference cycle between the run and its emitter, so a finished run
        is freed by reference counting, not left to the cyclic GC.
        """
        return self.session._emit(self, event)

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
