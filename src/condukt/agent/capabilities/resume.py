"""Resuming a run after a restart, from its checkpoint in the session snapshot.

The loop takes the restored history as it stands: the run's prompt and its
completed turns, and the turn in flight when the snapshot holds one (a turn
whose calls were about to run, or waited for approvals). The loop does not
ask the model again for that turn: :class:`Resumption` answers its calls,
following ``docs/sessions.md`` ("Tool calls at most once"):

- a call whose result was saved keeps it (it never runs again);
- a call still waiting for approval waits again (:mod:`.approvals`);
- a call journaled as started without a result (it may or may not have taken
  effect) runs again only when its tool is ``idempotent``; a tool that needs
  approval for it asks the person again; otherwise the model gets an error
  result saying it was interrupted, and decides;
- with a journal (the agent owns its key through a lease, see
  :mod:`.tool_journal`), a call never journaled as started never ran: it runs
  now. Without one, nothing tells it from a call that was running: it is
  reported interrupted too.
"""

from __future__ import annotations

from ...messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage
from ...providers import ModelRequest
from ...sessions import RunCheckpoint
from .._capability import Builtin, Capability, SendRequest
from .._context import AgentContext
from .._run import Run

__all__ = ["INTERRUPTED", "ResumeCheckpoints", "Resumption"]

#: What the model is told about a call that was running when the agent went down.
INTERRUPTED = (
    "Error: this call was interrupted: the agent restarted while it ran. "
    "It may or may not have taken effect; check before calling it again."
)


class Resumption(Builtin):
    """Answers the calls of a resumed run's turn in flight (only that run's hooks hold it)."""

    def __init__(self, checkpoint: RunCheckpoint, journaled: bool = False) -> None:
        self.results = {result.tool_call_id: result for result in checkpoint.results}
        self.waiting = {approval.call_id for approval in checkpoint.approvals}
        self.started = frozenset(checkpoint.started)
        #: Whether the calls' starts were journaled (a call not marked started never ran).
        self.journaled = journaled
        self.done = False

    @classmethod
    def for_run(cls, ctx: AgentContext, run: Run) -> Capability | None:
        """One for a run resumed from its checkpoint after a restart."""
        resumed = run.resumed
        return None if resumed is None else cls(resumed, journaled=ctx.lease is not None)

    def intercept_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """The call's saved result; None for a call to run (or to ask approval for) again; else "interrupted"."""
        if self.done:
            return None
        result = self.results.get(call.id)
        if result is not None:
            return result
        if call.id in self.waiting:
            return None
        if call.id in self.started or not self.journaled:
            tool = run.context.tools_by_name.get(call.name)
            if tool is not None and tool.idempotent:
                return None  # running it again has the effect of running it once
            if tool is not None and isinstance(call.arguments, dict) and tool.needs_approval(call.arguments):
                return None  # the person decides again (the approvals gate asks)
            return ToolResultMessage(call.id, call.name, (TextBlock(INTERRUPTED),), True)
        return None  # never started: it runs now, for the first time

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """The restored turn is done: later turns run normally."""
        self.done = True
        return False


class ResumeCheckpoints(Builtin):
    """With ``resume=True``: the run is checkpointed before its first request too.

    Every completed turn is saved anyway; this adds one save per run, so a
    run that goes down before its first turn completes still resumes (from
    its prompt) instead of being lost. Built in when ``resume=True`` and a
    ``session_store`` is set.
    """

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent that resumes its runs from a store."""
        config = ctx.config
        return cls() if config.resume and config.session_store is not None else None

    async def wrap_model_request(self, run: Run, request: ModelRequest, send: SendRequest) -> AssistantMessage:
        """Save the checkpoint before the run's first request (an abort or the run's timeout cancels both)."""
        if run.turn == 1 and run.resumed is None:
            await run.history_changed()
        return await send(request)
