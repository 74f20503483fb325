"""The kernel's state of one agent incarnation, and its mailbox: :class:`AgentState`.

An :class:`~condukt.Agent` instance is the user's behaviour object (a
subclass may define any attribute it likes); what the runtime keeps about
the incarnation lives here: the :class:`~condukt.agent.AgentContext`
capabilities see, the capabilities in their order, the lifecycle, and the
answers to the agent's calls. Starting (secrets, capabilities, tools,
model) and stopping are here too; what a run does is :mod:`._loop`'s.
"""

from __future__ import annotations

import functools
import logging
from collections.abc import Awaitable, Callable, Mapping
from types import MappingProxyType
from typing import Any

import trio
from trio.lowlevel import Task

from ..events import Event
from ..messages import AssistantMessage, UserMessage
from ..otp import NO_REPLY, Caller, ExitReason, Server
from ..secrets import Secrets, resolve_secrets
from ..sessions import RunCheckpoint
from ..tools import resolve_tools
from ._capability import NO_HOOKS, Capability, Hooks
from ._config import AgentConfig
from ._context import NO_ENV, AgentContext, Behaviour
from ._errors import AgentError, Busy, NotRunning
from ._info import AgentInfo, RunInfo, ToolCallInfo
from ._lifecycle import Lifecycle, State
from ._plan import Lineup, at_start, once_resolved, run_hooks
from ._requests import (
    AbortRun,
    CancelRun,
    Clear,
    Compact,
    FollowUp,
    GetHistory,
    GetLastResult,
    Routed,
    RunRequest,
    Steer,
)
from ._run import Listeners, Run

__all__ = ["AgentState"]

logger = logging.getLogger("condukt.agent")


def _same(text: str) -> str:
    return text


class AgentState(Lineup):
    """One agent incarnation's kernel state: its context, capabilities and lifecycle; its mailbox dispatch.

    Made by :meth:`Agent.boot <condukt.Agent.boot>`; the agent's handle reads
    it as an :class:`~condukt.agent._server.AgentStatus`. It is the lineup of
    the agent's capabilities (:class:`~condukt.agent._plan.Lineup`: one object
    less per agent). Capabilities never see it: they get :attr:`context`, and
    runs that point to the context and the :class:`~condukt.agent._run.Listeners`.
    """

    __slots__ = ("_runs", "agent", "context", "hooks", "lifecycle", "listeners")

    def __init__(
        self,
        agent: Behaviour,
        config: AgentConfig,
        *,
        plain_agent: type[Server],
        handle_event: Callable[[Event], Awaitable[None]] | None,
    ) -> None:
        super().__init__()
        self.agent = agent
        self.context = AgentContext(agent, config, plain_agent=plain_agent, kernel=self)
        self.listeners = Listeners(self.context, handle_event)
        self.hooks = NO_HOOKS
        self.lifecycle = Lifecycle(self.context, self)
        self._runs = 0

    # ------------------------------------------------------------------ start and stop

    async def start(self) -> None:
        """Resolve secrets, set up the capabilities, then resolve the tools and the model.

        Runs in the task that starts the agent: cancelling it cancels the
        start. A failure after some capabilities were set up stops them
        (their ``stop`` hook, shielded) before it propagates.
        """
        ctx, agent = self.context, self.agent
        config = ctx.config
        own = await resolve_secrets(config.secrets if config.secrets is not None else agent.secrets())
        secrets = Secrets({**config.inherited_secrets, **own.env}) if config.inherited_secrets else own
        if config.api_key is not None:
            secrets = secrets.hiding({"API_KEY": config.api_key})
        ctx.secrets = secrets
        ctx.secret_env = MappingProxyType(secrets.env) if secrets.names() else NO_ENV
        ctx.declared_tools = config.tools if config.tools is not None else agent.tools()
        at_start(ctx, config.capabilities if config.capabilities is not None else agent.capabilities(), self)
        set_up: list[Capability] = []
        try:
            for capability in self.capabilities:
                await capability.setup(ctx)
                set_up.append(capability)
            hooks = self.hooks = Hooks(self.capabilities) if self.capabilities else NO_HOOKS
            self._compose_scrub()
            tools = list(ctx.declared_tools)
            for offer in hooks.tools:
                tools.extend(offer(ctx))
            ctx.set_tools(resolve_tools(tools))
            ctx.declared_tools = ()  # resolved: nothing keeps the declarations alive
            ctx.model = config.resolved_model(ctx.node)
            if once_resolved(ctx, self):
                self.hooks = Hooks(self.capabilities)
                self._compose_scrub()
        except BaseException as exc:
            await self._stop_set_up(set_up, exc)
            raise
        restored = ctx.restored_run
        if restored is not None:
            self.lifecycle.submit(self._resumed_run(restored))

    async def _stop_set_up(self, set_up: list[Capability], failure: BaseException) -> None:
        """A failed start: stop the capabilities already set up (last first), shielded; a failing stop is logged."""
        default = Capability.stop
        with trio.CancelScope(shield=True):
            for capability in reversed(set_up):
                if type(capability).stop is default:
                    continue
                try:
                    await capability.stop(self.context, failure)
                except Exception:
                    logger.exception("%r: stopping %r after a failed start raised", self.context.handle, capability)

    def _compose_scrub(self) -> None:
        """``ctx.scrub``: every capability's ``scrub`` hook, in order."""
        ctx = self.context
        scrubs = self.hooks.scrub
        ctx.scrubs = bool(scrubs)
        if not scrubs:
            ctx.scrub = _same
        elif len(scrubs) == 1:
            ctx.scrub = scrubs[0]
        else:
            ctx.scrub = functools.reduce(lambda f, g: lambda text: g(f(text)), scrubs)

    def needs_stop(self) -> bool:
        """Whether :meth:`stop` has work to do when the process exits."""
        return bool(self.hooks.stop) or bool(self.lifecycle.queue)

    async def stop(self, reason: ExitReason) -> None:
        """The process is exiting: queued streams end, capabilities stop (bounded by the shutdown budget)."""
        self.lifecycle.close()
        for stop in self.hooks.stop:
            await stop(self.context, reason)

    # ------------------------------------------------------------------ mailbox

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        """Answer a message from an :class:`AgentHandle` (see :mod:`._requests`); ``NotImplemented`` if not ours.

        Never waits on a run; only ``clear`` of an idle agent awaits (its capabilities' ``history_changed``).
        """
        kind = type(request)
        lifecycle = self.lifecycle
        try:
            if kind is RunRequest:
                return self.submit_run(request, caller)
            if kind is AbortRun:
                return lifecycle.abort(request.run, request.run_id, request.from_run, caller)
            if kind is Steer:
                lifecycle.steer(request.text)
                return None
            if kind is FollowUp:
                lifecycle.follow_up(request.text)
                return None
            if kind is GetHistory:
                return tuple(self.context.messages)
            if kind is Clear:
                if lifecycle.state is State.IDLE:
                    return await self._clear()  # nothing to wait for: at once
                return lifecycle.submit_operation(self._clear, caller)
            if kind is Compact:
                return lifecycle.submit_operation(self._compact, caller)
            if kind is GetLastResult:
                return self.context.last_result
            for answer in self.hooks.answer:
                reply = answer(request)
                if reply is not NotImplemented:
                    return reply
            if isinstance(request, Routed):
                return request.unanswered()
        except (Busy, NotRunning, AgentError) as exc:
            caller.reply_error(exc)
            return NO_REPLY
        return NotImplemented

    def submit_run(self, request: RunRequest, caller: Caller) -> Any:
        """Start or queue the run ``request`` asks for; the reply (a stream's run id) or ``NO_REPLY``."""
        stream = request.sink is not None
        run = self._new_run(request, None if stream else caller)
        try:
            self.lifecycle.submit(run)
        except Busy as exc:
            caller.reply_error(exc)
            return NO_REPLY
        return run.id if stream else NO_REPLY

    def handle_info(self, message: Any) -> bool:
        """Handle a runtime notice; False if it is not the agent's."""
        if type(message) is CancelRun:
            self.lifecycle.cancel(message.run)
            return True
        return False

    # ------------------------------------------------------------------ runs

    def _new_run(self, request: RunRequest, caller: Caller | None, resumed: RunCheckpoint | None = None) -> Run:
        """A :class:`Run` for ``request``, with its id and hooks."""
        self._runs += 1
        run_id = resumed.run_id if resumed is not None else f"{self.context.id}/{self._runs}"
        run = Run(self.listeners, run_id, request, caller, resumed)
        run.hooks = run_hooks(run, self, self.hooks)
        return run

    def _resumed_run(self, checkpoint: RunCheckpoint) -> Run:
        """The run a restored checkpoint describes, continued by this incarnation (nobody waits for it)."""
        prompt = self.context.messages[checkpoint.prompt_index]
        text = prompt.text if type(prompt) is UserMessage else ""
        return self._new_run(RunRequest(text, timeout=self.context.config.run_timeout), None, checkpoint)

    def follow_up_run(self, text: str) -> Run:
        """A run for a follow-up (or a late steer): nobody waits for its answer."""
        return self._new_run(RunRequest(text, timeout=self.context.config.run_timeout), None)

    def checkpoint(self) -> RunCheckpoint | None:
        """The run in progress as a :class:`~condukt.sessions.RunCheckpoint` (``AgentContext.checkpoint``).

        None when no run is in progress, or when one of its capabilities says it cannot be resumed.
        """
        lifecycle = self.lifecycle
        run = lifecycle.current
        if run is None or lifecycle.state is not State.RUNNING or run.start < 0:
            return None
        messages = self.context.messages
        turns = sum(1 for i in range(run.start + 1, len(messages)) if type(messages[i]) is AssistantMessage)
        checkpoint: RunCheckpoint | None = RunCheckpoint(run.id, run.start, turns, (), ())
        for describe in run.hooks.checkpoint:
            checkpoint = describe(run, checkpoint)
            if checkpoint is None:
                return None
        return checkpoint

    def exit(self, reason: Any) -> None:
        """Stop the agent with ``reason`` once the job in progress has ended (``AgentContext.exit``)."""
        self.lifecycle.exit(reason)

    # ------------------------------------------------------------------ maintenance

    async def _clear(self) -> None:
        """Forget the conversation (the capabilities hear of it: a store deletes its snapshot)."""
        ctx = self.context
        ctx.messages.clear()
        for changed in self.hooks.history_changed:
            await changed(ctx)

    async def _compact(self) -> int:
        """Compact now (the capabilities' ``compact`` hooks); how many messages went (0 without a compactor)."""
        ctx = self.context
        before = len(ctx.messages)
        for compact in self.hooks.compact:
            await compact(ctx)
        for changed in self.hooks.history_changed:
            await changed(ctx)
        return before - len(ctx.messages)

    # ------------------------------------------------------------------ what the handle reads (AgentStatus)

    @property
    def session_id(self) -> str:
        """The conversation's id."""
        return self.context.id

    @property
    def lifecycle_state(self) -> str:
        """``"idle"``, ``"running"``, ``"finishing"`` or ``"maintaining"``."""
        return self.lifecycle.state.value

    @property
    def running(self) -> bool:
        """Whether a run is in progress (running or delivering its result)."""
        return self.lifecycle.current is not None

    @property
    def queued(self) -> int:
        """Runs (and maintenance jobs) waiting behind the current one."""
        return len(self.lifecycle.queue)

    @property
    def working(self) -> bool:
        """Whether a job is in progress in a task."""
        return self.lifecycle.working

    @property
    def start_options(self) -> Mapping[str, Any]:
        """The start options the agent was given."""
        return self.context.config.options

    @property
    def agent_class(self) -> type[Server]:
        """The agent's class."""
        cls: type[Server] = type(self.agent)  # type: ignore[assignment]  # an Agent subclass
        return cls

    def runs_in(self, task: Task) -> bool:
        """Whether ``task`` is part of the job in progress."""
        return self.lifecycle.runs_in(task)

    def info(self) -> AgentInfo:
        """What the agent is doing now (reads the state; never awaits)."""
        lifecycle = self.lifecycle
        run = lifecycle.current
        run_info = None
        if run is not None:
            in_flight: tuple[ToolCallInfo, ...] = ()
            calls = run.tool_calls
            if calls is not None:
                pairs = zip(calls.calls, calls.results, strict=True)
                in_flight = tuple(ToolCallInfo(call.id, call.name) for call, result in pairs if result is None)
            elapsed = trio.current_time() - run.started_at if run.started_at else 0.0
            run_info = RunInfo(run.id, self.context.scrub(run.prompt), run.turn, run.usage, in_flight, elapsed)
        return AgentInfo(self.context.id, lifecycle.state.value, len(lifecycle.queue), run_info)
