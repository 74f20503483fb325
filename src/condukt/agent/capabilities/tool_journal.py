"""Tool calls journaled through the agent's lease: what a restarted agent needs to run each call at most once.

Before the first call of a turn runs, the turn in flight (the model's
response with its calls) is saved with the run's checkpoint; then each call
is journaled as started (:meth:`Lease.tool_started
<condukt.sessions.Lease.tool_started>`, durable before the tool runs) and,
once it ended, with its result (:meth:`Lease.tool_finished
<condukt.sessions.Lease.tool_finished>`). After a crash the stored
checkpoint therefore tells, for every call of the turn in flight, whether it
finished (its result is kept), started without a result (it may or may not
have taken effect) or never started; :class:`~.resume.Resumption` applies
the rules of ``docs/sessions.md`` ("Tool calls at most once").
"""

from __future__ import annotations

import attrs
import trio

from ...messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage
from ...sessions import Lease, RunCheckpoint, SessionOwned, StoreUnavailable
from .._capability import Builtin, Capability, InvokeTool
from .._context import AgentContext
from .._errors import SessionLost
from .._run import Run
from .persistence import retrying

__all__ = ["NOT_RUN", "ToolJournal"]

#: What the model is told about a call that was not run because the session could not be written.
NOT_RUN = "Error: this call was not run: {why}."


class ToolJournal(Builtin):
    """Journals every tool call as started, then with its result, through the agent's lease.

    Built in when persistence owns the session key (``ctx.lease``: every
    shipped store). A call is never run unless its start is journaled: when
    the store refuses the write (the key was taken over) or stays unreachable,
    the call gets an error result and does not run. Its hooks run in the
    call's own task (``wrap_tool_call``); cancelled with the run.
    """

    def __init__(self, ctx: AgentContext, lease: Lease) -> None:
        self.ctx = ctx
        self.lease = lease
        self._saving = trio.Lock()
        #: The response whose turn in flight was saved (before its first call ran).
        self._saved: AssistantMessage | None = None
        #: The turn in flight's calls journaled as started and not finished, and its results journaled.
        self.started: set[str] = set()
        self.results: dict[str, ToolResultMessage] = {}
        restored = ctx.restored_run
        if restored is not None:
            self.started.update(restored.started)
            self.results.update((r.tool_call_id, r) for r in restored.results)

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """One when the agent owns its session key through a lease."""
        lease = ctx.lease
        return None if lease is None else cls(ctx, lease)

    async def wrap_tool_call(self, run: Run, call: ToolCall, invoke: InvokeTool) -> ToolResultMessage:
        """Save the turn in flight (once per turn), journal the start, run the call, journal its result.

        Cancelled with the run (an abort, its timeout): a call cancelled after
        its start was journaled stays "started" (it may have taken effect).
        """
        ctx = self.ctx
        lease = self.lease
        store = lease.store
        message = ctx.messages[-1]
        try:
            if self._saved is not message:
                async with self._saving:
                    if self._saved is not message:
                        await run.history_changed()
                        self._saved = message if type(message) is AssistantMessage else None
            await retrying(store, lease.tool_started, run.id, call)
        except (SessionOwned, SessionLost, StoreUnavailable) as exc:
            # Not journaled, so not run: running it could not be undone, and a
            # new owner could not know. The turn's save fails the run next.
            why = "the session store is unavailable"
            if not isinstance(exc, StoreUnavailable):
                why = "another owner took this session over"
            return ToolResultMessage(call.id, call.name, (TextBlock(NOT_RUN.format(why=why)),), True)
        self.started.add(call.id)
        result = await invoke()
        self.started.discard(call.id)
        self.results[call.id] = result
        try:
            await retrying(store, lease.tool_finished, run.id, result)
        except (SessionOwned, StoreUnavailable):
            pass  # the turn's save carries the result, or fails the run (a lost key)
        return result

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint | None:
        """``checkpoint`` with the results and the started calls of the turn in flight."""
        messages = self.ctx.messages
        last = messages[-1] if messages else None
        if type(last) is not AssistantMessage or not last.tool_calls:
            return checkpoint
        ids = {call.id for call in last.tool_calls}
        known = {r.tool_call_id for r in checkpoint.results}
        extra = tuple(r for i, r in self.results.items() if i in ids and i not in known)
        started = tuple(i for i in self.started if i in ids and i not in known and i not in self.results)
        if not extra and not started:
            return checkpoint
        return attrs.evolve(
            checkpoint,
            results=(*checkpoint.results, *extra),
            started=(*checkpoint.started, *(i for i in started if i not in checkpoint.started)),
        )

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """The turn is in the history: its calls no longer need keeping."""
        self.started.clear()
        self.results.clear()
        self._saved = None
        return False

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """Forget what the run left; never waits: never cancelled."""
        self.started.clear()
        self.results.clear()
        self._saved = None
