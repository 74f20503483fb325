"""The Agent behaviour: what a user subclasses. The runtime state lives in its :class:`AgentState`."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, ClassVar

from ..events import Event
from ..otp import Caller, ExitReason, Node
from ..redaction import Redactor
from ..sandbox import Sandbox
from ._capability import Capability
from ._config import AgentConfig
from ._handle import AgentHandle
from ._requests import RunRequest
from ._server import AgentServer, bind_status
from ._state import AgentState
from .capabilities.compaction import Compactor

__all__ = ["Agent"]


class Agent(AgentServer):
    """An LLM agent: an OTP process holding a conversation, a model and tools.

    Subclass and set class attributes, override :meth:`tools`, optionally
    :meth:`init` and :meth:`handle_event`::

        class ReviewAgent(condukt.Agent):
            model = "anthropic:claude-sonnet-4-5"
            system_prompt = "You review pull requests."
            thinking_level = "medium"

            def tools(self):
                return [condukt.tools.Read, condukt.tools.Command(command="git")]

        agent = await node.spawn(ReviewAgent, cwd=".")
        text = await agent.run("Review the last commit")

    Start options (``node.spawn(ReviewAgent, **options)`` or a ``ChildSpec``'s
    ``kwargs``) override the class attributes below; see ``docs/agents.md``
    for the full list. They are checked before the agent starts: a bad
    value makes ``spawn`` raise ``TypeError``/``ValueError`` naming it, and
    an unknown option is refused unless declared in :attr:`extra_options`.
    The checked settings are :attr:`config` (frozen). ``name`` (given to
    ``spawn``) registers the agent.

    The agent's own state (history, lifecycle, tools, model) is not kept on
    this object: a subclass may define any attribute it likes (``cwd``,
    ``messages``, ...) without affecting the agent.

    The mailbox stays responsive during a run: each run is a task inside
    the agent process. Runs submitted while one is in progress queue behind
    it, in order. A crash in the loop itself (not in a tool, not a
    :class:`~condukt.providers.ModelError`) crashes the process, so its
    supervisor restarts it.
    """

    handle_class = AgentHandle
    # Every run is a task in the agent's nursery: open it at start, and let
    # its cancel scope be the process's: spawn + run + stop costs fewer
    # instructions, an agent stopped without a run a few more
    # (benchmarks/agent_instructions.py).
    nursery_at_start = True

    #: ``"provider:model"`` or a :class:`~condukt.providers.Model`.
    model: ClassVar[Any] = None
    #: The system prompt.
    system_prompt: ClassVar[str | None] = None
    #: ``off``, ``minimal``, ``low``, ``medium`` or ``high``.
    thinking_level: ClassVar[str] = "off"
    #: Model requests per run before it stops (returning the last text).
    max_turns: ClassVar[int] = 50
    #: Seconds each tool call may take (tools may set their own ``timeout``); ``None``: no limit.
    tool_timeout: ClassVar[float | None] = 300.0
    #: Seconds a follow-up run may take; ``None``: no limit.
    run_timeout: ClassVar[float | None] = 300.0
    #: Seconds a tool call waits for ``approve``/``deny`` before it is denied; ``None``: no limit.
    approval_timeout: ClassVar[float | None] = None
    #: With a ``session_store``: a run interrupted by a crash continues when the agent restarts.
    resume: ClassVar[bool] = False
    #: Refuse file-tool paths outside ``cwd`` (after resolving ``..`` and symlinks).
    confine_to_cwd: ClassVar[bool] = False
    #: Where tools run commands and which paths they may touch
    #: (:mod:`condukt.sandbox`); ``None``: :class:`condukt.sandbox.Local`.
    sandbox: ClassVar[Sandbox | None] = None
    #: Output token cap per response (``None``: the provider's default).
    max_tokens: ClassVar[int | None] = None
    #: Sampling settings (:class:`~condukt.ModelSettings` or a dict of its fields); a run's override them.
    model_settings: ClassVar[Any] = None
    #: Invalid ``submit_result`` calls a structured run tolerates before ``InvalidOutput``.
    output_retries: ClassVar[int] = 2
    #: Sub-agents of one agent that may run at the same time.
    max_concurrent_subagents: ClassVar[int] = 4
    #: Runs (and ``clear``/``compact`` calls) that may wait behind the current one; more raise :class:`Busy`.
    max_queued_runs: ClassVar[int] = 64
    #: Follow-ups that may wait behind a run; more raise :class:`Busy` (bounded like a mailbox).
    max_follow_ups: ClassVar[int] = 100
    #: Start options a subclass understands beyond the agent's own (read them in ``init``).
    #: Any other option is refused at start, so a typo never passes silently.
    extra_options: ClassVar[frozenset[str]] = frozenset()
    #: Append ``AGENTS.md`` / ``CLAUDE.md`` / skills from ``cwd`` to the system prompt.
    load_project_instructions: ClassVar[bool] = True
    #: A :class:`~condukt.sessions.SessionStore`: save after every turn, reload on restart.
    session_store: ClassVar[Any] = None
    #: A :class:`~condukt.compaction.Compactor`, run after every run and on ``compact()``.
    compactor: ClassVar[Compactor | None] = None
    #: A :class:`~condukt.redaction.Redactor` for prompts and tool results.
    redactor: ClassVar[Redactor | None] = None
    #: Seconds idle before the agent hibernates (history serialized, task gone)
    #: until its next message; ``None``: the node's ``open_node(hibernate_after=)``
    #: (off unless set); ``math.inf``: never. A start's ``hibernate_after=`` overrides it.
    hibernate_after: ClassVar[float | None] = None

    handle: AgentHandle
    __state: AgentState

    # ------------------------------------------------------------------ behaviour

    def tools(self) -> Sequence[Any]:
        """The agent's tools: classes (no options) and instances (with options)."""
        return []

    def capabilities(self) -> Sequence[Capability]:
        """Extra :class:`Capability` objects plugged into this agent's loop (see ``docs/capabilities.md``).

        The ``capabilities=`` start option replaces this.
        """
        return []

    async def init(self, options: Mapping[str, Any]) -> None:
        """Called once at start with every start option, before tools and model resolve.

        Set attributes here that :meth:`tools` needs. An exception fails the
        start; cancelling the task that spawns the agent cancels it (nothing
        is left running).
        """

    async def handle_event(self, event: Event) -> None:
        """Called for every event of every run (in order). An exception crashes the agent.

        It runs in the run itself: an abort or the run's timeout cancels it
        like the rest of the run (events after the loop, ``AgentEnd`` to
        ``Done``, are out of their reach).
        """

    def secrets(self) -> Mapping[str, Any]:
        """Secrets by environment-variable name: providers from :mod:`condukt.secrets`.

        Resolved at start; given to ``Bash``/``Command`` subprocesses, redacted
        from everything the agent reports. The ``secrets=`` start option
        replaces this.
        """
        return {}

    def subagents(self) -> Mapping[str, Any]:
        """Roles this agent may delegate to: ``{"role": AgentClass | (AgentClass, options) | Subagent(...)}``.

        When not empty, a ``subagent`` tool is added; see ``docs/subagents.md``.
        """
        return {}

    @property
    def config(self) -> AgentConfig:
        """The checked, frozen settings of this incarnation (available from :meth:`init` on)."""
        return self.__state.context.config

    async def terminate(self, reason: ExitReason) -> None:
        """Stops this agent's capabilities (its sub-agents...). Call ``super().terminate(reason)`` when overriding.

        Bounded by the agent's shutdown budget, after which it is cancelled.
        """
        await self.__state.stop(reason)

    # ------------------------------------------------------------------ the process (low-level hooks)

    async def boot(self, **options: Any) -> None:
        """Check the options, run :meth:`init`, then set up capabilities, tools and model.

        Runs in the task that spawns the agent; cancelling it cancels the start.
        """
        cls = type(self)
        state = self.__state = AgentState(
            self,
            AgentConfig.build(cls, options),
            plain_agent=Agent,
            handle_event=self.handle_event if cls.handle_event is not Agent.handle_event else None,
        )
        bind_status(self, state)
        await self.init(options)
        await state.start()

    @classmethod
    def default_hibernate_after(cls, node: Node) -> float | None:
        """The class's :attr:`hibernate_after`, else the node's default (``open_node(hibernate_after=)``)."""
        after = cls.hibernate_after
        return node.hibernate_after if after is None else after

    def on_hibernate(self) -> bool:
        """Compact this idle agent (history serialized, caches dropped); see ``docs/agents.md``.

        Low-level hook the runtime calls; override only to drop state of
        your own too, calling ``super().on_hibernate()``. Synchronous.
        """
        return self.__state.hibernate()

    def on_wake(self) -> None:
        """Restore what :meth:`on_hibernate` compacted, before the agent handles its next message. Synchronous."""
        self.__state.wake()

    def needs_terminate(self) -> bool:
        """Whether the exit has work: capabilities to stop, queued streams to end, or a user ``terminate``."""
        return self.__state.needs_stop() or type(self).terminate is not Agent.terminate

    def handle_call_now(self, request: Any, caller: Caller) -> Any:
        """A run asked of an idle agent starts at once, in the caller's task (see ``Server.handle_call_now``).

        Only for :meth:`handle_call`'s own handling of runs: a subclass that
        overrides ``handle_call`` gets every call through its mailbox.
        """
        if type(request) is RunRequest and type(self).handle_call is Agent.handle_call:
            return self.__state.submit_run(request, caller)
        return NotImplemented

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        """The agent's protocol (run, abort, steer...); other calls go to ``Server``.

        Never waits on a run (the mailbox stays responsive), so it is not
        cancelled by one; the process stopping cancels it.
        """
        state = self.__state
        if type(request) is RunRequest:  # the common message, without a coroutine in between
            return state.submit_run(request, caller)
        reply = await state.handle_call(request, caller)
        if reply is NotImplemented:
            return await super().handle_call(request, caller)
        return reply

    async def handle_info(self, message: Any) -> None:
        """Runtime notices of the agent; others go to ``Server``.

        It never waits, so nothing cancels it midway (the process stopping ends the loop around it).
        """
        if not self.__state.handle_info(message):
            await super().handle_info(message)

