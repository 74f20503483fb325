"""Approvals as a capability: tool calls that wait for a person's decision.

A call of a tool whose ``requires_approval`` says so waits in the
``gate_tool_call`` hook, in its own task: the turn's other calls run
meanwhile, and the agent's mailbox keeps being served, so ``approve`` and
``deny`` are ordinary messages to the process. Nothing else waits: no
thread, no worker slot. The wait is part of the run's checkpoint (saved
with the session snapshot as it begins), so an agent that crashes, or a
whole node that restarts, comes back with the call still pending.
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Mapping
from typing import Any

import attrs
import trio

from ...events import ApprovalDecided, ApprovalRequested
from ...messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage
from ...sessions import PendingApproval, RunCheckpoint
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._errors import UnknownApproval
from .._requests import Decide, GetApprovals
from .._run import Run
from ._waits import TurnWaits, Waiter

__all__ = ["Approvals", "scrub_value"]


def scrub_value(scrub: Callable[[str], str], value: Any) -> Any:
    """``value`` (JSON data) with ``scrub`` applied to every string in it, keys included."""
    if isinstance(value, str):
        return scrub(value)
    if isinstance(value, Mapping):
        return {scrub(str(k)): scrub_value(scrub, v) for k, v in value.items()}
    if isinstance(value, (list, tuple)):
        return [scrub_value(scrub, v) for v in value]
    return value


class _Waiting(Waiter):
    """One call waiting for its decision."""

    __slots__ = ("approved", "decided", "reason", "record")

    def __init__(self, record: PendingApproval) -> None:
        super().__init__()
        self.record = record
        self.decided = False
        self.approved = False
        self.reason = ""

    def decide(self, approved: bool, reason: str) -> None:
        self.approved, self.reason, self.decided = approved, reason, True
        self.wake.set()


class Approvals(Builtin):
    """Holds tool calls until ``agent.approve(call_id)`` or ``agent.deny(call_id, reason)``.

    Built into an agent whose tools ask for approvals (or whose restored
    checkpoint has some); one per agent incarnation. A denial's reason
    reaches the model as the call's (error) result; an ``approval_timeout``
    denies the call when it expires. Time spent waiting does not count
    against the run's timeout: the run's deadline moves on by the wait.
    ``approve``/``deny``/``pending_approvals`` reach it through its
    ``answer`` hook.
    """

    def __init__(self, ctx: AgentContext, restored: RunCheckpoint | None) -> None:
        self.ctx = ctx
        #: Calls waiting now, by call id.
        self.waiting: dict[str, _Waiting] = {}
        #: Calls a restored checkpoint holds that the resumed run has not reached yet.
        self.restored: dict[str, PendingApproval] = {a.call_id: a for a in restored.approvals} if restored else {}
        #: Decisions taken for restored calls before the resumed run reached them.
        self.early: dict[str, tuple[bool, str]] = {}

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """One when a tool may ask for approval, or the restored run has calls waiting for one."""
        restored = ctx.restored_run
        if restored is not None and restored.approvals:
            return cls(ctx, restored)
        for tool in ctx.tools:  # a plain loop, not any(): every agent's start asks
            if tool.requires_approval is not False:
                return cls(ctx, restored)
        return None

    # ------------------------------------------------------------------ the mailbox side

    def answer(self, request: Any) -> Any:
        """``Decide`` (approve, deny; :class:`UnknownApproval` if no such call waits) and ``GetApprovals``."""
        kind = type(request)
        if kind is Decide:
            self.decide(request.call_id, request.approved, request.reason)
            return None
        if kind is GetApprovals:
            return self.pending()
        return NotImplemented

    def pending(self) -> tuple[PendingApproval, ...]:
        """The calls waiting for a decision, in the order they were requested."""
        return (*(w.record for w in self.waiting.values()), *self.restored.values())

    def decide(self, call_id: str, approved: bool, reason: str) -> None:
        """Approve or deny ``call_id``; :class:`UnknownApproval` if it does not wait."""
        waiting = self.waiting.get(call_id)
        if waiting is not None and not waiting.decided:
            waiting.decide(approved, reason)
            return
        if call_id in self.restored and call_id not in self.early:
            self.early[call_id] = (approved, reason)
            return
        raise UnknownApproval(call_id)

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint | None:
        """``checkpoint`` with the results and waiting calls of ``run``'s turn in flight."""
        messages = self.ctx.messages
        last = messages[-1] if messages else None
        if type(last) is not AssistantMessage or not last.tool_calls:
            return checkpoint
        ids = {call.id for call in last.tool_calls}
        approvals = tuple(p for p in self.pending() if p.call_id in ids)
        return attrs.evolve(TurnWaits.of(run).checkpoint(run, checkpoint), approvals=approvals)

    # ------------------------------------------------------------------ hooks

    async def gate_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Wait for the decision on ``call`` if its tool asks for one; a denial answers it.

        The wait is cancelled with the run (an abort; not the run's timeout, paused meanwhile).
        """
        ctx = self.ctx
        record = self.restored.get(call.id)
        if record is None:
            tool = ctx.tools_by_name.get(call.name)
            arguments = call.arguments
            if tool is None or not isinstance(arguments, dict) or tool.validate(arguments) is not None:
                return None  # the call fails on its own; nothing to approve
            if not tool.needs_approval(arguments):
                return None
            now = time.time()
            timeout = ctx.config.approval_timeout
            record = PendingApproval(
                call.id,
                call.name,
                scrub_value(ctx.scrub, arguments),
                run.id,
                now,
                None if timeout is None else now + timeout,
            )
        waiting = _Waiting(record)
        self.waiting[call.id] = waiting
        self.restored.pop(call.id, None)
        early = self.early.pop(call.id, None)
        if early is not None:
            waiting.decide(*early)
        try:
            await self._save(run)  # the wait is in the snapshot before anyone hears of it
            await run.emit(ApprovalRequested(call.id, call.name, record.arguments, record.expires_at))
            # Wall-clock expiry (it survives restarts), waited for on trio's clock.
            expires = math.inf if record.expires_at is None else max(0.0, record.expires_at - time.time())
            with trio.move_on_after(expires):
                await TurnWaits.of(run).wait(run, waiting, lambda: waiting.decided)
        finally:
            del self.waiting[call.id]
        await self._save(run)  # decided: no longer pending after a restart
        if not waiting.decided:
            timeout = ctx.config.approval_timeout
            waiting.reason = "no decision within the approval timeout" + (f" ({timeout:g}s)" if timeout else "")
        reason = ctx.scrub(waiting.reason)
        await run.emit(ApprovalDecided(call.id, call.name, waiting.approved, reason))
        if waiting.approved:
            return None
        text = f"The user denied this call to {call.name}." + (f" Reason: {reason}" if reason else "")
        return ToolResultMessage(call.id, call.name, (TextBlock(text),), True)

    def tool_finished(
        self,
        run: Run,
        call: ToolCall,
        result: ToolResultMessage | None,
        error: BaseException | None,
        duration: float,
    ) -> None:
        """Keep the result for the checkpoint of the turn in flight."""
        if result is not None:
            TurnWaits.of(run).record(result)

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """The turn is in the history: its results no longer need keeping."""
        TurnWaits.of(run).turn_ended()
        return False

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """Forget what the run left (restored calls of a run that ended another way); never waits: never cancelled."""
        self.restored.clear()
        self.early.clear()

    async def _save(self, run: Run) -> None:
        await run.history_changed()
