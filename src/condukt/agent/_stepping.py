"""Stepping through a run as its caller: ``agent.iter()``, one step per model response and per batch of tool results.

A run started by :meth:`~condukt.agent.AgentHandle.iter` carries a
:class:`Stepping` capability of its own (``RunRequest.capabilities``: the
run-scoped extension point, whose capabilities take the place of the
agent's own, after them). It lives beside the handle, not in the
capabilities wing, because the handle makes it (and the wing imports the
handle); it has the shape of a :class:`~condukt.agent.Capability` (its
hooks), which is all the loop looks at. It hands each step to the caller through the
run's event channel and holds the run until the caller asks for the next
step (or leaves): the model's response in ``wrap_model_request``, before its
tool calls run (the caller may edit them there), and the turn's tool results
in ``between_turns``, before the next request (a steer given there is taken
by it). Runs that do not step carry nothing of this: the loop has no branch
for it.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Sequence
from typing import Any, final

import trio

from ..events import Done, Error
from ..messages import AssistantMessage, StopReason, ToolCall, ToolResultMessage
from ..providers import ModelRequest
from ._errors import AgentError

__all__ = ["ModelStep", "StepError", "Stepping", "Steps", "ToolsStep"]


class StepError(AgentError, ValueError):
    """A step was used wrongly: edited after the run moved on, edited with bad calls, or a result asked too early."""


class _Step:
    """What both kinds of step share: the turn, and the hold on the run."""

    __slots__ = ("_released", "turn")

    def __init__(self, turn: int) -> None:
        #: The turn this step belongs to (turns count from 1).
        self.turn = turn
        self._released = trio.Event()

    def _release(self) -> None:
        self._released.set()

    @property
    def pending(self) -> bool:
        """Whether the run still waits on this step (the caller has not asked for the next one)."""
        return not self._released.is_set()


@final
class ModelStep(_Step):
    """The model answered: ``message`` (an :class:`~condukt.messages.AssistantMessage`), not yet in the history.

    ``tool_calls`` are the calls that will run when the caller asks for the
    next step. Before that, :meth:`replace_tool_calls` may change them; the
    history then holds the edited response, so it stays consistent with the
    results that follow.
    """

    __slots__ = ("_calls", "message")

    def __init__(self, turn: int, message: AssistantMessage) -> None:
        super().__init__(turn)
        #: The model's response as the model gave it.
        self.message = message
        self._calls: tuple[ToolCall, ...] | None = None

    @property
    def tool_calls(self) -> tuple[ToolCall, ...]:
        """The calls that will run (the model's, or what :meth:`replace_tool_calls` set)."""
        return self.message.tool_calls if self._calls is None else self._calls

    def replace_tool_calls(self, calls: Sequence[ToolCall]) -> None:
        """Run ``calls`` instead of the model's calls of this turn.

        Allowed: dropping calls, reordering them, changing a call's name or
        arguments, adding calls (each a :class:`~condukt.messages.ToolCall`
        with an id of its own). The ids must be non-empty strings, unique in
        the list. An empty list makes the turn a final answer (the run ends
        with the response's text unless a steer follows). Calls to unknown
        tools or with bad arguments are reported to the model as any such
        call is. Only while the step is pending: afterwards (the caller asked
        for the next step, or left) it raises :class:`StepError`, as it does
        for a bad list. Synchronous: nothing to cancel.
        """
        if not self.pending:
            raise StepError(f"turn {self.turn}'s tool calls already ran: edit a step before asking for the next one")
        if isinstance(calls, (str, bytes)) or not isinstance(calls, Sequence):
            raise StepError(f"tool calls must be a list of ToolCall, got {type(calls).__name__}")
        seen: set[str] = set()
        for call in calls:
            if type(call) is not ToolCall:
                raise StepError(f"tool calls must be condukt.messages.ToolCall objects, got {call!r}")
            if not isinstance(call.id, str) or not call.id:
                raise StepError(f"a tool call needs a non-empty string id, got {call.id!r}")
            if not isinstance(call.name, str) or not call.name:
                raise StepError(f"a tool call needs a non-empty string name, got {call.name!r}")
            if call.id in seen:
                raise StepError(f"tool call id {call.id!r} appears twice")
            seen.add(call.id)
        self._calls = tuple(calls)

    def _response(self) -> AssistantMessage:
        """The response the loop goes on with: the model's, or the edited one."""
        calls = self._calls
        message = self.message
        if calls is None:
            return message
        content = (*(block for block in message.content if type(block) is not ToolCall), *calls)
        stop_reason = message.stop_reason
        if not calls and stop_reason == StopReason.TOOL_USE:
            stop_reason = StopReason.END_TURN
        return AssistantMessage(content, message.usage, stop_reason, message.model)

    def __repr__(self) -> str:
        return f"<ModelStep turn {self.turn}: {len(self.tool_calls)} tool call(s)>"


@final
class ToolsStep(_Step):
    """The turn's tool calls ran: ``results`` (their :class:`~condukt.messages.ToolResultMessage` s, in call order).

    The turn is complete and in the history. A steer given now
    (``steps.steer``) is taken before the next request.
    """

    __slots__ = ("results",)

    def __init__(self, turn: int, results: tuple[ToolResultMessage, ...]) -> None:
        super().__init__(turn)
        #: The results, as the model will see them.
        self.results = results

    def __repr__(self) -> str:
        return f"<ToolsStep turn {self.turn}: {len(self.results)} result(s)>"


#: A step of :meth:`AgentHandle.iter <condukt.agent.AgentHandle.iter>`.
Step = ModelStep | ToolsStep

_NO_VALUE: Any = object()


class Stepping:
    """The run-scoped capability behind ``agent.iter()``: hands steps to the caller, waits for it.

    Made by :meth:`AgentHandle.iter <condukt.agent.AgentHandle.iter>`, one
    per run, never shared; its steps travel in the run's event channel.
    """

    def __init__(self) -> None:
        self.value: Any = _NO_VALUE
        self.failure: BaseException | None = None

    async def _hand_over(self, run: Any, step: _Step) -> None:
        """Give ``step`` to the caller and wait until it asks for the next one (or leaves).

        Runs in the run: an abort (the caller left) or the run's timeout cancels the wait.
        """
        sink = run.sink
        if sink is None:  # the reader left: the abort is on its way
            return
        try:
            await sink.send(step)
        except (trio.BrokenResourceError, trio.ClosedResourceError):
            return
        await step._released.wait()

    async def wrap_model_request(
        self, run: Any, request: ModelRequest, send: Callable[[ModelRequest], Awaitable[AssistantMessage]]
    ) -> AssistantMessage:
        """The model's response, handed over as a :class:`ModelStep`; what the caller left of its calls goes on."""
        response = await send(request)
        step = ModelStep(run.turn, response)
        await self._hand_over(run, step)
        step._release()  # edits end here, whoever let the run go on
        return step._response()

    async def between_turns(self, run: Any, message: AssistantMessage) -> bool:
        """The turn's results, handed over as a :class:`ToolsStep` (a turn without calls has none)."""
        if not message.tool_calls:
            return False
        messages = run.context.messages
        index = len(messages) - 1
        while index >= 0 and messages[index] is not message:
            index -= 1
        results = tuple(m for m in messages[index + 1 :] if type(m) is ToolResultMessage) if index >= 0 else ()
        step = ToolsStep(run.turn, results)
        await self._hand_over(run, step)
        step._release()
        return False

    def ended(self) -> bool:
        """Whether the run settled (its result or failure is known)."""
        return self.value is not _NO_VALUE or self.failure is not None

    async def review_result(self, run: Any, value: Any) -> Any:
        """Keep the run's result for ``steps.result`` (the run-scoped capabilities' review comes last)."""
        self.value = value
        return value

    async def after_run(self, run: Any, failure: BaseException | None) -> None:
        """Keep the failure for ``steps.result``; never waits."""
        self.failure = failure


class Steps:
    """The steps of one run (``async for step in steps``), from ``agent.iter()``.

    The iteration ends when the run has ended (after its ``Done``); then
    :attr:`result` is the run's result. ``run_id`` identifies the run.
    """

    def __init__(self, handle: Any, events: Any, stepping: Stepping) -> None:
        self._handle = handle
        self._events = events
        self._stepping = stepping
        self._current: ModelStep | ToolsStep | None = None
        #: The run's id (what ``agent.abort(run_id)`` takes).
        self.run_id: str = events.run_id
        #: The :class:`~condukt.events.Done` event once the run ended.
        self.done: Done | None = None
        #: The :class:`~condukt.events.Error` event if the run failed.
        self.error: Error | None = None

    def __aiter__(self) -> Steps:
        return self

    async def __anext__(self) -> Step:
        """The next step; asking for it lets the run go on from the current one.

        Cancelling the caller leaves the current step pending (the run keeps
        waiting); leaving the ``async with`` block then aborts the run.
        Raises :class:`~condukt.CallError` if the agent crashed.
        """
        current = self._current  # the step the caller holds (not one still in the channel)
        if current is not None:
            self._current = None
            current._release()
        async for event in self._events:
            if isinstance(event, (ModelStep, ToolsStep)):
                self._current = event
                return event
            if type(event) is Error:
                self.error = event
            elif type(event) is Done:
                self.done = event
        raise StopAsyncIteration

    @property
    def result(self) -> Any:
        """The run's result (final text, or structured result with ``output=``) once the iteration ended.

        Raises what the run failed with (:class:`~condukt.agent.Aborted` after
        leaving the block early, :class:`~condukt.agent.RunTimeout`, a
        :class:`~condukt.providers.ModelError`...), and :class:`StepError`
        while the run has not ended.
        """
        stepping = self._stepping
        if stepping.failure is not None:
            raise stepping.failure
        if self.done is None or stepping.value is _NO_VALUE:
            raise StepError("the run has not ended: iterate over its steps first")
        return stepping.value

    async def steer(self, text: str) -> None:
        """Add ``text`` as a user message before the run's next model request (as ``agent.steer``).

        Given at a :class:`ModelStep`, it is taken after that turn's tools
        ran; at a :class:`ToolsStep`, before the next request; at the final
        answer's step, the run takes one more turn to answer it. Raises what
        :meth:`AgentHandle.steer <condukt.agent.AgentHandle.steer>` raises.
        Cancelling the caller may leave the steer delivered or not.
        """
        await self._handle.steer(text)
