"""Resuming a run after a restart, from its checkpoint in the session snapshot.

The loop takes the restored history as it stands: the run's prompt and its
completed turns. The snapshot holds a turn in flight only when that turn
waited for approvals (it was saved then); the loop does not ask the model
again for it: :class:`Resumption` answers its calls instead. Otherwise the
turn in flight was not saved, and the resumed run asks the model again from
the last completed turn (calls it makes again run again). A call that had ended
keeps its result; a call that was still waiting for approval waits again
(:mod:`._approvals`); a call that was running when the agent went down is
**not re-issued** (it may have had its effect already, and tools are not
assumed idempotent): the model is told it was interrupted, and decides.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from ..messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage
from ..providers import ModelRequest
from ..sessions import RunCheckpoint
from ._capability import Capability, SendRequest

if TYPE_CHECKING:
    from ._run import Run

__all__ = ["INTERRUPTED", "ResumeCheckpoints", "Resumption"]

#: What the model is told about a call that was running when the agent went down.
INTERRUPTED = (
    "Error: this call was interrupted: the agent restarted while it ran. "
    "It may or may not have taken effect; check before calling it again."
)


class Resumption(Capability):
    """Answers the calls of a resumed run's turn in flight (only that run's hooks hold it)."""

    def __init__(self, checkpoint: RunCheckpoint) -> None:
        self.results = {result.tool_call_id: result for result in checkpoint.results}
        self.waiting = {approval.call_id for approval in checkpoint.approvals}
        self.done = False

    def intercept_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """The call's saved result, None for a call still waiting for approval, else "interrupted"."""
        if self.done:
            return None
        result = self.results.get(call.id)
        if result is not None:
            return result
        if call.id in self.waiting:
            return None
        return ToolResultMessage(call.id, call.name, (TextBlock(INTERRUPTED),), True)

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """The restored turn is done: later turns run normally."""
        self.done = True
        return False


class ResumeCheckpoints(Capability):
    """With ``resume=True``: the run is checkpointed before its first request too.

    Every completed turn is saved anyway; this adds one save per run, so a
    run that goes down before its first turn completes still resumes (from
    its prompt) instead of being lost.
    """

    async def wrap_model_request(self, run: Run, request: ModelRequest, send: SendRequest) -> AssistantMessage:
        """Save the checkpoint before the run's first request."""
        if run.turn == 1 and run.resumed is None:
            for changed in run.hooks.history_changed:
                await changed(run.session)
        return await send(request)
