"""Capabilities: features that plug into the agent's loop through hooks.

The turn loop knows nothing of persistence, compaction, redaction,
structured output, sub-agents or telemetry: each is a :class:`Capability`
whose hooks the loop calls at fixed points, with the agent's
:class:`~condukt.agent.AgentContext` or the :class:`~condukt.agent.Run`
being served. A user adds their own through ``Agent.capabilities()`` or the
``capabilities=`` start option; the built-in ones (:class:`Builtin`, listed
in :mod:`condukt.agent.capabilities`) the agent makes itself from its options.

Only overridden hooks cost anything: :class:`Hooks` keeps, per hook, the
bound methods of the capabilities that override it, so the loop iterates
over empty tuples for the rest.
"""

from __future__ import annotations

import functools
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from ..messages import AssistantMessage, ToolCall, ToolResultMessage
from ..otp import ExitReason
from ..providers import ModelRequest
from ..sessions import RunCheckpoint
from ..tools import Tool
from ._context import AgentContext
from ._run import Run

__all__ = ["HOOKS", "NO_HOOKS", "Builtin", "Capability", "Hooks", "InvokeTool", "SendRequest"]

#: What ``wrap_model_request`` calls to send a request on (the next wrapper, or the model).
SendRequest = Callable[[ModelRequest], Awaitable[AssistantMessage]]
#: What ``wrap_tool_call`` calls to run the call (the next wrapper, or the tool): its result.
InvokeTool = Callable[[], Awaitable[ToolResultMessage]]


class Capability:
    """A feature of an agent, plugged into its loop. Override the hooks you need.

    Hooks get the agent's :class:`~condukt.agent.AgentContext` (``ctx``) or the
    :class:`~condukt.agent.Run` being served (``run.context`` is the
    context). Hooks run in the order the capabilities are listed; every
    default does nothing. Synchronous hooks run on the loop's hot path: keep
    them quick. An exception escaping a hook is a bug: it crashes the agent
    (its supervisor restarts it), except where a hook says otherwise.

    ==========================  =====================================================================
    hook                        when, and what it may do
    ==========================  =====================================================================
    ``setup(ctx)``              once at start, before the model and tools resolve: restore state,
                                change ``ctx.config`` / ``ctx.system_prompt``, replace ``ctx.declared_tools``.
    ``tools(ctx)``              after setup: extra tools this capability offers the model.
    ``run_started(run)``        a run began (its prompt is in the history).
    ``prepare_request(run, r)`` before each model request: return the request to send.
    ``wrap_model_request(run,   async, around each model request: call ``send(request)`` (or not),
    request, send)``            return the response; raise an AgentError to fail the run.
    ``model_started(run)``      a model request is about to be made.
    ``model_finished(run, m,    it returned ``m`` (an AssistantMessage), or failed with ``error``
    error)``                    (``m`` None; cancellation included).
    ``intercept_tool_call(run,  before the turn's tool calls run, in call order: return a
    call)``                     ToolResultMessage to answer the call yourself, or None.
    ``gate_tool_call(run,       async, in the call's own task (the turn's other calls go on): may
    call)``                     wait (an approval), return a ToolResultMessage to answer it, or None.
    ``wrap_tool_call(run, call,  async, around one call the gates let run, in the call's own task:
    invoke)``                   ``await invoke()`` runs it (once, or not at all) and gives its result;
                                return the result the model sees.
    ``tool_started(run, call)`` a tool call is about to run.
    ``tool_finished(run, call,  it ended: ``result`` is what the model sees; ``error`` the
    result, error, duration)``  exception if the tool crashed or was cancelled.
    ``after_turn(run, m)``      a turn (response ``m`` and its tool results) is in the history:
                                return True to end the run now; raise an AgentError to fail it.
    ``finish(run, value)``      the run succeeded with ``value`` (the final text, or what an earlier
                                hook made of it): return the run's result.
    ``review_result(run,        async, after ``finish``: return the result (or a replacement);
    value)``                    raise an AgentError to fail the run.
    ``after_run(run, failure)`` the run ended (``failure`` None on success) and the history holds
                                only completed turns; async, before ``Done``.
    ``history_changed(ctx)``    after every turn, run, clear and compaction: persist it (also mid-turn
                                while a call waits for approval; see ``ctx.checkpoint()``).
    ``checkpoint(run, cp)``     describing the run in progress for a snapshot: return ``cp`` (a
                                RunCheckpoint) completed with what this capability keeps, or None
                                when the run cannot be resumed from a snapshot.
    ``compact(ctx)``            async, ``agent.compact()``: shorten ``ctx.messages`` now; what it
                                raises is raised in ``compact()``'s caller.
    ``answer(request)``         a call to the agent (``handle.call(request)``) the agent itself does
                                not know: return the reply, or ``NotImplemented`` to pass it on.
    ``scrub(text)``             text bound for the model, the history, events or telemetry:
                                return it without what must not leave the agent.
    ``stop(ctx, reason)``       the agent is exiting (within its shutdown budget), or its start
                                failed after this capability's ``setup``.
    ==========================  =====================================================================
    """

    async def setup(self, ctx: AgentContext) -> None:
        """Once at start, before the model and tools are resolved.

        Runs in the task that starts the agent: cancelling that start
        cancels it, and the agent does not start. What it raises fails the start.
        """

    def tools(self, ctx: AgentContext) -> Sequence[Tool]:
        """Extra tools this capability offers (resolved after ``setup``)."""
        return ()

    def run_started(self, run: Run) -> None:
        """A run began."""

    def prepare_request(self, run: Run, request: ModelRequest) -> ModelRequest:
        """The request to send instead of ``request`` (the default sends it unchanged)."""
        return request

    async def wrap_model_request(self, run: Run, request: ModelRequest, send: SendRequest) -> AssistantMessage:
        """Around one model request: ``return await send(request)`` is the default.

        Wrappers nest in capability order (the first is outermost). Runs
        inside the run: an abort or the run's timeout cancels it. An
        :class:`~condukt.agent.AgentError` it raises fails the run (the
        turn in flight is dropped).
        """
        return await send(request)

    def model_started(self, run: Run) -> None:
        """A model request is about to be made."""

    def model_finished(self, run: Run, message: AssistantMessage | None, error: BaseException | None) -> None:
        """A model request returned ``message`` or failed with ``error``."""

    def intercept_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Answer ``call`` instead of its tool (return None to let the tool run)."""
        return None

    async def gate_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Before ``call`` runs, in its own task: return a result to answer it instead, or None to run it.

        It may wait (for a person, say) while the turn's other calls run.
        The tool's timeout starts after it; the run's abort cancels it.
        """
        return None

    async def wrap_tool_call(self, run: Run, call: ToolCall, invoke: InvokeTool) -> ToolResultMessage:
        """Around one tool call that no intercept or gate answered: ``return await invoke()`` is the default.

        Runs in the call's own task, after the gates (the turn's other
        calls go on meanwhile); wrappers nest in capability order (the first
        is outermost). ``invoke()`` runs the tool under its timeout (events
        and the ``tool_started``/``tool_finished`` hooks included) and
        returns its result (an error result for a failing tool): call it at
        most once. The returned result is what the history and the model
        get. Cancellation: an abort or the run's timeout cancels it like the tool.
        """
        return await invoke()

    def tool_started(self, run: Run, call: ToolCall) -> None:
        """A tool call is about to run."""

    def tool_finished(
        self,
        run: Run,
        call: ToolCall,
        result: ToolResultMessage | None,
        error: BaseException | None,
        duration: float,
    ) -> None:
        """A tool call ended (``result`` None when it was cancelled)."""

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """True ends the run after this turn; raising an AgentError fails it."""
        return False

    def finish(self, run: Run, value: Any) -> Any:
        """The run's result, given what the loop (or an earlier capability) made of it."""
        return value

    async def review_result(self, run: Run, value: Any) -> Any:
        """The run's result after ``finish``, or a replacement; raise an AgentError to fail the run.

        Runs inside the run: an abort or the run's timeout cancels it.
        """
        return value

    async def after_run(self, run: Run, failure: BaseException | None) -> None:
        """The run ended; the history holds only completed turns.

        Runs outside the run's cancel scope (an abort or the run's timeout no
        longer reach it); it is cancelled only when the agent process stops.
        """

    async def history_changed(self, ctx: AgentContext) -> None:
        """The history changed (after a turn, a run, a clear or a compaction).

        After a turn it runs inside the run: an abort or the run's timeout
        may cancel it (the turn stays in the history; the next save carries it).
        """

    def checkpoint(self, run: Run, checkpoint: RunCheckpoint) -> RunCheckpoint | None:
        """``checkpoint`` (the run in progress, for a snapshot) with what this capability keeps of it.

        Return None when the run cannot be resumed from a snapshot: then no
        checkpoint is saved for it.
        """
        return checkpoint

    async def compact(self, ctx: AgentContext) -> None:
        """``agent.compact()`` asks to shorten the history now (in the agent's maintenance job).

        What it raises is raised in ``compact()``'s caller and the agent goes
        on. Only the agent process stopping cancels it.
        """

    def answer(self, request: Any) -> Any:
        """The reply to a call the agent does not know (``handle.call(request)``), or ``NotImplemented``.

        The first capability that answers wins. An
        :class:`~condukt.agent.AgentError` it raises is the caller's answer;
        anything else crashes the agent.
        """
        return NotImplemented

    def scrub(self, text: str) -> str:
        """``text`` without what must not leave the agent."""
        return text

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        """The agent is exiting: in its ``terminate``, so within its shutdown budget, then cancelled.

        Also when the agent's start fails after this capability's ``setup``
        (``reason`` is the exception): release what ``setup`` opened.
        """


class Builtin(Capability):
    """A built-in capability: the agent makes it itself, when its options ask for it.

    The built-ins and their order are listed in
    :mod:`condukt.agent.capabilities`. Each one says when it applies by
    overriding one or more of the class methods below (each returns the
    capability to add, or None; an exception fails the start, or the run):

    * :meth:`at_start`: before any capability's ``setup``;
    * :meth:`once_resolved`: after setup, once the tools and the model are
      resolved (it is not set up, and offers no tools);
    * :meth:`for_run`: for one run, in that run's hooks only.
    """

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """The capability this agent gets before setup, or None."""
        return None

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """The capability this agent gets once its tools and model are resolved, or None."""
        return None

    @classmethod
    def for_run(cls, ctx: AgentContext, run: Run) -> Capability | None:
        """The capability ``run`` gets, or None."""
        return None


#: The hook names, in the order of the table above.
HOOKS = (
    "setup",
    "tools",
    "run_started",
    "prepare_request",
    "wrap_model_request",
    "model_started",
    "model_finished",
    "intercept_tool_call",
    "gate_tool_call",
    "wrap_tool_call",
    "tool_started",
    "tool_finished",
    "after_turn",
    "finish",
    "review_result",
    "after_run",
    "history_changed",
    "checkpoint",
    "compact",
    "answer",
    "scrub",
    "stop",
)


class Hooks:
    """Per hook, the bound methods of the capabilities that override it (in order).

    Which hooks a list of capabilities overrides depends only on their
    classes: that plan is worked out once per tuple of classes (a bounded
    cache), so an agent's start binds only the hooks in use
    (``benchmarks/agent_loop.py`` measures starts).
    """

    __slots__ = HOOKS

    setup: tuple[Any, ...]
    tools: tuple[Any, ...]
    run_started: tuple[Any, ...]
    prepare_request: tuple[Any, ...]
    wrap_model_request: tuple[Any, ...]
    model_started: tuple[Any, ...]
    model_finished: tuple[Any, ...]
    intercept_tool_call: tuple[Any, ...]
    gate_tool_call: tuple[Any, ...]
    wrap_tool_call: tuple[Any, ...]
    tool_started: tuple[Any, ...]
    tool_finished: tuple[Any, ...]
    after_turn: tuple[Any, ...]
    finish: tuple[Any, ...]
    review_result: tuple[Any, ...]
    after_run: tuple[Any, ...]
    history_changed: tuple[Any, ...]
    checkpoint: tuple[Any, ...]
    compact: tuple[Any, ...]
    answer: tuple[Any, ...]
    scrub: tuple[Any, ...]
    stop: tuple[Any, ...]

    def __init__(self, capabilities: Sequence[Capability]) -> None:
        plan = _plan(tuple(type(c) for c in capabilities))
        for name, indices in plan:
            setattr(self, name, tuple([getattr(capabilities[i], name) for i in indices]) if indices else ())

    @property
    def watches_tools(self) -> bool:
        """Whether any capability wants per-call tool notifications."""
        return bool(self.tool_started or self.tool_finished)


@functools.lru_cache(maxsize=256)
def _plan(classes: tuple[type, ...]) -> tuple[tuple[str, tuple[int, ...]], ...]:
    """Per hook, the positions of the capabilities whose class overrides it."""
    plan = []
    for name in HOOKS:
        default = getattr(Capability, name)
        plan.append((name, tuple(i for i, cls in enumerate(classes) if getattr(cls, name, default) is not default)))
    return tuple(plan)


#: The hooks of an agent without capabilities (shared: they are immutable).
NO_HOOKS = Hooks(())
