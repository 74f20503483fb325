"""Handoffs: the model hands the conversation to another agent, whose answer ends the run.

``condukt.handoff(Specialist)`` in an agent's tools offers the model a
``transfer_to_specialist`` tool. When the model calls it, the
:class:`Handoffs` capability (in ``gate_tool_call``) starts the target
agent under the same kind of supervisor as sub-agents (monitored, stopped
with the agent that started it), with the conversation so far as its
``history`` (through the handoff's ``input_filter`` if any), and runs it:
the target's own tools, system prompt and instructions apply. Its events
are forwarded (:class:`~condukt.events.HandedOff`, then
:class:`~condukt.events.SubagentEvent` s), and its answer is the result of
the handing-off run (and the handoff call's result in its history).

The chain of agent classes a conversation went through travels with the
target's run (a run-scoped capability): handing it to a class already in the
chain fails the run with :class:`~condukt.agent.HandoffCycle`, so loops
between agents are bounded. A target that crashes, or whose run fails,
fails the run with :class:`~condukt.agent.HandoffFailed`; the agent that
handed off survives.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any

from ...events import HandedOff, SubagentEvent
from ...messages import DocumentBlock, ImageBlock, Message, TextBlock, ToolCall, ToolResultMessage, UserMessage
from ...otp import CallError, ChildSpec, ConduktError, ExitReason
from ...tools import Tool, ToolContext, ToolError
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._errors import AgentError, HandoffCycle, HandoffFailed
from .._handle import run_request, submit_run
from .._run import Run
from .._transient import stop_quietly
from .subagents import Children, child_options

__all__ = ["Handoff", "Handoffs", "handoff"]

#: Where a run keeps the chain of agent classes its conversation went through.
_CHAIN = "condukt.handoff.chain"
#: Where a run keeps the outcome of its handoff (the answer, or the failure).
_OUTCOME = "condukt.handoff.outcome"

HistoryFilter = Callable[[Sequence[Message]], Sequence[Message]]


def _snake(name: str) -> str:
    return re.sub(r"(?<!^)(?=[A-Z])", "_", name).lower()


class Handoff(Tool):
    """The tool that hands the conversation to ``agent`` (made by :func:`handoff`; its calls never run it).

    The model may give a ``reason``: the target's prompt says it when the
    conversation does not end with the user's message.
    """

    timeout = None  # the handing-off run's own timeout bounds the target's run

    def __init__(
        self,
        agent: type[Any],
        *,
        name: str | None = None,
        description: str | None = None,
        input_filter: HistoryFilter | None = None,
        **options: Any,
    ) -> None:
        super().__init__()
        if not isinstance(agent, type):
            raise TypeError(f"handoff needs an Agent class, got {agent!r}")
        if input_filter is not None and not callable(input_filter):
            raise TypeError(f"input_filter must be a function of the history, got {input_filter!r}")
        #: The agent class the conversation goes to.
        self.agent = agent
        #: Its start options (on top of what it inherits, as a sub-agent does).
        self.options = dict(options)
        #: Maps the history to what the target gets, or None (all of it).
        self.input_filter = input_filter
        self._name = name or f"transfer_to_{_snake(agent.__name__)}"
        summary = (agent.__doc__ or "").strip().split("\n")[0]
        self._description = description or (
            f"Hand the conversation over to {agent.__name__}, which answers the user from here on"
            + (f": {summary}" if summary else ".")
        )

    @property
    def name(self) -> str:  # type: ignore[override]
        """``transfer_to_<agent class in snake case>``, unless named."""
        return self._name

    @property
    def description(self) -> str:  # type: ignore[override]
        """Says who takes over (the class's docstring's first line), unless given."""
        return self._description

    parameters = {
        "type": "object",
        "properties": {"reason": {"type": "string", "description": "Why the conversation is handed over"}},
        "additionalProperties": False,
    }

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Never run: the agent's :class:`Handoffs` capability answers its calls (raises :class:`ToolError` if called).

        Nothing to cancel: it returns at once.
        """
        raise ToolError(f"{self.name} hands the conversation over; it is not called directly")


def handoff(
    agent: type[Any],
    *,
    name: str | None = None,
    description: str | None = None,
    input_filter: HistoryFilter | None = None,
    **options: Any,
) -> Handoff:
    """A tool (for ``tools()``) with which the model hands the conversation to ``agent``; its answer ends the run.

    ``options`` are the target's start options (over what it inherits from
    the handing-off agent, as a sub-agent: cwd, provider settings, secrets,
    confinement, sandbox, redactor). ``input_filter(history)`` returns the
    messages the target gets (default: all of them, the turn that hands off
    excluded); the user's last message becomes the target's prompt. The
    target runs under the handing-off run's cancel scope: an abort or the
    run's timeout stops it (it is stopped after its answer in any case).
    Raises ``TypeError`` for a non-class ``agent`` or a non-callable filter.
    """
    return Handoff(agent, name=name, description=description, input_filter=input_filter, **options)


class _Chain(Capability):
    """Run-scoped in a target's run: the chain of agent classes the conversation went through."""

    def __init__(self, chain: tuple[str, ...]) -> None:
        self.chain = chain

    def run_started(self, run: Run) -> None:
        """Put the chain where this agent's :class:`Handoffs` looks for it."""
        run.state[_CHAIN] = self.chain


class Handoffs(Builtin):
    """Hands the conversation to another agent when the model calls a :class:`Handoff` tool.

    Built in when the tools hold a :func:`handoff`. One handoff per turn:
    a second handoff call of the same turn gets an error result.
    """

    def __init__(self, ctx: AgentContext) -> None:
        self.ctx = ctx
        self._children = Children()

    @classmethod
    def once_resolved(cls, ctx: AgentContext) -> Capability | None:
        """One when a tool is a :class:`Handoff`."""
        for tool in ctx.tools:
            if isinstance(tool, Handoff):
                return cls(ctx)
        return None

    async def gate_tool_call(self, run: Run, call: ToolCall) -> ToolResultMessage | None:
        """Hand the conversation over if ``call`` is a handoff's; its answer (or failure) is the call's result.

        Runs in the run: an abort or the run's timeout cancels the target's run and stops the target.
        """
        ctx = self.ctx
        tool = ctx.tools_by_name.get(call.name)
        if not isinstance(tool, Handoff) or not isinstance(call.arguments, dict) or tool.validate(call.arguments):
            return None
        state = run.state
        if _OUTCOME in state:
            return _error(call, "only one handoff per turn: the conversation was handed over already")
        state[_OUTCOME] = None  # taken: a second handoff of this turn is refused
        chain: tuple[str, ...] = state.get(_CHAIN) or (type(ctx.agent).__qualname__,)
        target = tool.agent.__qualname__
        if target in chain:
            failure: AgentError = HandoffCycle(
                (*chain, target), f"handoff cycle: {' -> '.join((*chain, target))} hands back to {target}"
            )
            state[_OUTCOME] = failure
            return _error(call, str(failure))
        try:
            answer = await self._hand_over(run, call, tool, (*chain, target))
        except AgentError as exc:
            state[_OUTCOME] = exc
            return _error(call, f"{type(exc).__name__}: {exc}")
        state[_OUTCOME] = _Answer(answer)
        text = answer if isinstance(answer, str) else str(answer)
        return ToolResultMessage(call.id, call.name, (TextBlock(text),))

    async def _hand_over(self, run: Run, call: ToolCall, tool: Handoff, chain: tuple[str, ...]) -> Any:
        """Start the target with the conversation, run it, stop it: its answer, or a :class:`HandoffFailed`."""
        ctx = self.ctx
        history: Sequence[Message] = ctx.messages[:-1]  # the turn that hands off is not the target's
        if tool.input_filter is not None:
            history = tool.input_filter(list(history))
        history = list(history)
        attachments: tuple[ImageBlock | DocumentBlock, ...] = ()
        if history and type(history[-1]) is UserMessage:
            last = history.pop()
            prompt = last.text
            attachments = tuple(b for b in last.content if type(b) is ImageBlock or type(b) is DocumentBlock)
        else:
            reason = call.arguments.get("reason")
            prompt = "The conversation was handed over to you" + (f": {reason}" if reason else ".")
        options = child_options(ctx, tool.agent, tool.options)
        if "load_project_instructions" not in tool.options:  # its own instructions apply, as its class says
            options["load_project_instructions"] = tool.agent.load_project_instructions
        options["history"] = history
        supervisor = await self._children.supervisor(ctx)
        try:
            child = await supervisor.start_child(ChildSpec(None, tool.agent, kwargs=options, restart="temporary"))
        except Exception as exc:  # its init or options failed: the target never ran
            raise HandoffFailed(
                call.name, exc, f"handoff target {tool.agent.__name__} did not start: {type(exc).__name__}: {exc}"
            ) from None
        child_id = child.session_id
        emit = run.emit
        await emit(HandedOff(call.id, call.name, child_id))

        async def forward(event: Any) -> None:
            # In the target's run task: straight into this run's listeners.
            await emit(SubagentEvent(call.name, child_id, event))

        images = [b for b in attachments if type(b) is ImageBlock]
        documents = [b for b in attachments if type(b) is DocumentBlock]
        request = run_request(
            prompt or "(continue)", None, None, images or None, None, None, None, forward, documents or None
        )
        request.capabilities = (_Chain(chain),)
        try:
            return await submit_run(child, request)
        except CallError as exc:
            reason = exc.reason if exc.reason is not None else await child.wait()
            raise HandoffFailed(
                call.name, reason, f"handoff target {tool.agent.__name__} crashed: {reason!r}"
            ) from None
        except HandoffCycle:
            raise
        except ConduktError as exc:  # the target's run failed: a timeout, a model error...
            raise HandoffFailed(
                call.name, exc, f"handoff target {tool.agent.__name__} failed: {type(exc).__name__}: {exc}"
            ) from None
        finally:
            await stop_quietly(child, "shutdown")

    def after_turn(self, run: Run, message: Any) -> bool:
        """A turn that handed off ends the run with the target's answer, or fails it with the handoff's failure."""
        state = run.state
        if _OUTCOME not in state:
            return False
        outcome = state[_OUTCOME]
        if isinstance(outcome, AgentError):
            raise outcome
        return outcome is not None

    def finish(self, run: Run, value: Any) -> Any:
        """The target's answer is the run's result."""
        outcome = run.state.get(_OUTCOME)
        return outcome.value if isinstance(outcome, _Answer) else value

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        """Stop a target still running with the agent (in its shutdown budget, then cancelled)."""
        await self._children.stop()


class _Answer:
    """The target's answer (a wrapper: the answer itself may be anything, None included)."""

    __slots__ = ("value",)

    def __init__(self, value: Any) -> None:
        self.value = value


def _error(call: ToolCall, text: str) -> ToolResultMessage:
    return ToolResultMessage(call.id, call.name, (TextBlock(f"Error: {text}"),), True)
