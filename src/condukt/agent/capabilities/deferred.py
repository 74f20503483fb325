"""Deferred tools as a capability: tool calls whose result comes from outside (``agent.respond``).

A call of a :class:`~condukt.tools.DeferredTool` (``AskUser`` among them)
waits in the ``gate_tool_call`` hook, in its own task, as an approval does
(:mod:`.approvals`), and shares its persistence (:mod:`._waits`): the wait
is in the run's checkpoint, saved with the session snapshot before
:class:`~condukt.events.InputRequested` goes out, so an agent that crashes,
or a node that restarts (``resume=True`` with a session store), comes back
with the call still waiting; the answer is saved with the turn's results
before the run goes on, so a restart after it does not ask again.
``respond`` and ``pending_inputs`` are ordinary messages to the process.
"""

from __future__ import annotations

import time
from collections import deque
from typing import Any

import attrs

from ...events import InputReceived, InputRequested
from ...messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage
from ...sessions import PendingInput, RunCheckpoint
from ...tools import ToolError, render_result
from ...tools.deferred import DeferredTool
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._errors import InputAlreadyAnswered, UnknownInputRequest
from .._requests import GetInputs, Respond
from .._run import Run
from ._waits import TurnWaits, Waiter
from .approvals import scrub_value

__all__ = ["Deferred"]

#: Ids of calls answered by this incarnation remembered for :class:`InputAlreadyAnswered`
#: (older ones are found in the history, where their results are).
_REMEMBERED = 1024


class _Input(Waiter):
    """One call waiting for its answer."""

    __slots__ = ("answered", "record", "value")

    def __init__(self, record: PendingInput) -> None:
        super().__init__()
        self.record = record
        self.answered = False
        self.value: Any = None

    def answer(self, value: Any) -> None:
        self.value, self.answered = value, True
        self.wake.set()


class Deferred(Builtin):
    """Holds deferred tools' calls until ``agent.respond(call_id, value)``; one per agent incarnation.

    Built in when a tool is a :class:`~condukt.tools.DeferredTool` (or the
    restored run has calls waiting for an answer). Waiting does not count
    against the run's timeout nor the tool's; an abort ends it.
    """

    def __init__(self, ctx: AgentContext, restored: RunCheckpoint | None) -> None:
        self.ctx = ctx
        #: Calls waiting now, by call id.
        self.waiting: dict[str, _Input] = {}
        #: Calls a restored checkpoint holds that the resumed run has not reached yet.
        self.restored: dict[str, PendingInput] = {i.call_id: i for i in restored.inputs} if restored else {}
        #: Answers given for restored calls before the resumed run reached them.
        self.early: dict[str, Any] = {}
        self.answered: deque[str] = deque(maxlen=_REMEMBERED)

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """One when a tool is deferred, or the restored run has calls waiting for an answer."""
        restored = ctx.restored_run
        if restored is not None and restored.inputs:
            return cls(ctx, restored)
        for tool in ctx.tools:
            if isinstance(tool, DeferredTool):
                return cls(ctx, restored)
        return None

    # ------------------------------------------------------------------ the mailbox side

    def answer(self, request: Any) -> Any:
        """``Respond`` and ``GetInputs``."""
        kind = type(request)
        if kind is Respond:
            self.respond(request.call_id, request.value)
            return None
        if kind is GetInputs:
            return self.pending()
        return NotImplemented

    def pending(self) -> tuple[PendingInput, ...]:
        """The calls waiting for an answer, in the order they were asked."""
        return (*(w.record for w in self.waiting.values()), *self.restored.values())

    def respond(self, call_id: str, value: Any) -> None:
        """Answer ``call_id``; :class:`InputAlreadyAnswered` or :class:`UnknownInputRequest` if it does not wait."""
        waiting = self.waiting.get(call_id)
        if waiting is not None and not waiting.answered:
            waiting.answer(value)
            return
        if call_id in self.restored and call_id not in self.early:
            self.early[call_id] = value
            return
        if waiting is not None or call_id in self.early or call_id in self.answered or _has_result(self.ctx, call_id):
            raise InputAlreadyAnswered(call_id)
        raise UnknownInputRequest(call_id)

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint | None:
        """``checkpoint`` with the results and the calls waiting for an answer of ``run``'s turn in flight."""
        messages = self.ctx.messages
        last = messages[-1] if messages else None
        if type(last) is not AssistantMessage or not last.tool_calls:
            return checkpoint
        ids = {call.id for call in last.tool_calls}
        inputs = tuple(p for p in self.pending() if p.call_id in ids)
        return attrs.evolve(TurnWaits.of(run).checkpoint(run, checkpoint), inputs=inputs)

    # ------------------------------------------------------------------ hooks

    async def gate_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Wait for the answer to ``call`` if its tool is deferred; the answer is the call's result.

        The wait is cancelled with the run (an abort; not the run's timeout, paused meanwhile).
        """
        ctx = self.ctx
        tool = ctx.tools_by_name.get(call.name)
        record = self.restored.get(call.id)
        if record is None:
            arguments = call.arguments
            if not isinstance(tool, DeferredTool) or not isinstance(arguments, dict):
                return None
            if tool.validate(arguments) is not None:
                return None  # the call fails on its own, with the validation error
            question = ctx.scrub(tool.question(dict(arguments)))
            record = PendingInput(call.id, call.name, question, scrub_value(ctx.scrub, arguments), run.id, time.time())
        waiting = _Input(record)
        self.waiting[call.id] = waiting
        self.restored.pop(call.id, None)
        if call.id in self.early:
            waiting.answer(self.early.pop(call.id))
        waits = TurnWaits.of(run)
        try:
            await run.history_changed()  # the wait is in the snapshot before anyone hears of it
            await run.emit(InputRequested(call.id, record.question, call.name, record.arguments))
            await waits.wait(run, waiting, lambda: waiting.answered)
        finally:
            del self.waiting[call.id]
        self.answered.append(call.id)
        result = self._result(tool, call, waiting.value)
        waits.record(result)
        await run.history_changed()  # answered: the answer is saved, no longer pending after a restart
        await run.emit(InputReceived(call.id, call.name))
        return result

    def _result(self, tool: Any, call: ToolCall, value: Any) -> ToolResultMessage:
        """The call's result for ``value``, scrubbed (it is saved before the loop sees it)."""
        is_error = False
        try:
            made = tool.result(value) if isinstance(tool, DeferredTool) else value
            content = (TextBlock(made),) if type(made) is str else render_result(made)
        except ToolError as exc:
            content, is_error = (TextBlock(f"Error: {exc}"),), True
        ctx = self.ctx
        if ctx.scrubs:
            content = ctx.scrub_blocks(content)
        return ToolResultMessage(call.id, call.name, content, is_error)

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


def _has_result(ctx: AgentContext, call_id: str) -> bool:
    """Whether the history holds a result for ``call_id`` (answered before this incarnation)."""
    for message in reversed(ctx.messages):
        if type(message) is ToolResultMessage and message.tool_call_id == call_id:
            return True
    return False
