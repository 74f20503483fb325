"""The Agent behaviour and the agent process: the turn loop, tools, events."""

from __future__ import annotations

import functools
import json
import logging
import os
import time
import traceback
from collections import deque
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar, Literal

import trio

from .. import telemetry
from ..compaction import Compactor, compact_with
from ..events import (
    AgentEnd,
    AgentEvent,
    AgentStart,
    Done,
    Error,
    Event,
    MaxTurnsReached,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)
from ..instructions import load_project_instructions
from ..messages import (
    AssistantMessage,
    ImageBlock,
    Message,
    TextBlock,
    ToolCall,
    ToolDefinition,
    ToolResultMessage,
    Usage,
    UserMessage,
)
from ..otp import NO_REPLY, Caller, ChildSpec, Server
from ..providers import Model, ModelError, ModelRequest, resolve_model, validate_thinking_level
from ..redaction import Redactor
from ..secrets import resolve_secrets
from ..serialization import unstructure
from ..tools import AGENT_DEFAULT, Tool, ToolContext, ToolError, render_result, resolve_tools
from ._errors import Aborted, Busy, InvalidOutput, NoResultSubmitted, NotRunning, RunTimeout
from ._handle import AgentHandle
from ._ids import uuid7
from ._requests import AbortRun, CancelRun, Clear, Compact, FollowUp, GetHistory, RunRequest, Steer
from ._structured import SUBMIT_RESULT, OutputSpec, Submission
from ._subagents import SubagentSupervisor, SubagentTool, resolve_roles

__all__ = ["Agent", "AGENT_OPTIONS"]

logger = logging.getLogger("condukt.agent")

#: Start options the Agent itself understands; anything else is left for ``init``.
AGENT_OPTIONS = frozenset(
    {
        "model",
        "api_key",
        "base_url",
        "system_prompt",
        "thinking_level",
        "cwd",
        "tools",
        "id",
        "max_turns",
        "tool_timeout",
        "run_timeout",
        "confine_to_cwd",
        "max_tokens",
        "model_options",
        "output_retries",
        "subagents",
        "max_concurrent_subagents",
        "load_project_instructions",
        "secrets",
        "redactor",
        "compactor",
        "session_store",
        "session_store_key",
    }
)

_OUTPUT_SPECS: dict[Any, OutputSpec] = {}


def output_spec(output: Any) -> OutputSpec:
    """The (cached) :class:`OutputSpec` for an ``output=`` argument."""
    key = output if isinstance(output, type) else repr(output)
    spec = _OUTPUT_SPECS.get(key)
    if spec is None:
        spec = _OUTPUT_SPECS[key] = OutputSpec.of(output)
    return spec


class _RunState:
    """One run in progress inside the agent process."""

    __slots__ = (
        "abort_waiters",
        "caller",
        "request",
        "run_id",
        "scope",
        "sink",
        "steer",
        "submission",
        "turn",
    )

    def __init__(self, request: RunRequest, caller: Caller | None, submission: Submission | None) -> None:
        self.request = request
        self.caller = caller
        self.scope = trio.CancelScope()  # abort() cancels it, even before the task starts
        self.steer: list[str] = []
        self.abort_waiters: list[Caller] = []
        self.sink = request.sink
        self.submission = submission
        self.run_id = ""
        self.turn = 0


class Agent(Server):
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
    ``kwargs``) override the class attributes: ``model``, ``api_key``,
    ``base_url``, ``system_prompt``, ``thinking_level``, ``cwd``, ``tools``,
    ``id`` (the session id, a UUIDv7 by default), ``max_turns``,
    ``tool_timeout``, ``run_timeout`` (for follow-ups), ``confine_to_cwd``,
    ``max_tokens``, ``model_options``. Other options are passed to
    :meth:`init` untouched. ``name`` (given to ``spawn``) registers the agent.

    The mailbox stays responsive during a run: each run is a task inside the
    agent process, and its caller's reply is deferred until it ends. A crash
    in the loop itself (not in a tool, not a :class:`ModelError`) crashes the
    process, so its supervisor restarts it.
    """

    handle_class = AgentHandle

    #: ``"provider:model"`` or a :class:`~condukt.providers.Model`.
    model: ClassVar[Any] = None
    #: The system prompt.
    system_prompt: ClassVar[str | None] = None
    #: ``off``, ``minimal``, ``low``, ``medium`` or ``high``.
    thinking_level: ClassVar[str] = "off"
    #: Model requests per run before it stops (returning the last text).
    max_turns: ClassVar[int] = 50
    #: Seconds each tool call may take (tools may set their own ``timeout``).
    tool_timeout: ClassVar[float] = 300.0
    #: Seconds a follow-up run may take.
    run_timeout: ClassVar[float | None] = 300.0
    #: Refuse file-tool paths outside ``cwd`` (after resolving ``..`` and symlinks).
    confine_to_cwd: ClassVar[bool] = False
    #: Output token cap per response (``None``: the provider's default).
    max_tokens: ClassVar[int | None] = None
    #: Invalid ``submit_result`` calls a structured run tolerates before ``InvalidOutput``.
    output_retries: ClassVar[int] = 2
    #: Sub-agents of one agent that may run at the same time.
    max_concurrent_subagents: ClassVar[int] = 4
    #: Follow-ups that may wait behind a run; more raise :class:`Busy` (bounded like a mailbox).
    max_follow_ups: ClassVar[int] = 100
    #: Start options a subclass understands beyond :data:`AGENT_OPTIONS` (read them in ``init``).
    #: Any other option is refused at start, so a typo never passes silently.
    extra_options: ClassVar[frozenset[str]] = frozenset()
    #: Append ``AGENTS.md`` / ``CLAUDE.md`` / skills from ``cwd`` to the system prompt.
    load_project_instructions: ClassVar[bool] = True
    #: A :class:`~condukt.sessions.SessionStore`: save after every turn, reload on restart.
    session_store: ClassVar[Any] = None
    #: A :class:`~condukt.compaction.Compactor`, run after every run and on ``compact()``.
    compactor: ClassVar[Any] = None
    #: A :class:`~condukt.redaction.Redactor` for prompts and tool results.
    redactor: ClassVar[Any] = None

    handle: AgentHandle

    # ------------------------------------------------------------------ behaviour

    def tools(self) -> Sequence[Any]:
        """The agent's tools: classes (no options) and instances (with options)."""
        return []

    async def init(self, options: Mapping[str, Any]) -> None:
        """Called once at start with every start option, before tools and model resolve.

        Set attributes here that :meth:`tools` needs. An exception fails the start.
        """

    async def handle_event(self, event: Event) -> None:
        """Called for every event of every run (in order). An exception crashes the agent."""

    def secrets(self) -> Mapping[str, Any]:
        """Secrets by environment-variable name: providers from :mod:`condukt.secrets`.

        Resolved at start; given to ``Bash``/``Command`` subprocesses, redacted
        from tool results. The ``secrets=`` start option replaces this.
        """
        return {}

    def subagents(self) -> Mapping[str, Any]:
        """Roles this agent may delegate to: ``{"role": AgentClass | (AgentClass, options) | Subagent(...)}``.

        When not empty, a ``subagent`` tool is added; see ``docs/subagents.md``.
        """
        return {}

    def needs_terminate(self) -> bool:
        return (
            self._subagent_sup is not None
            or telemetry.enabled()
            or type(self).terminate is not Agent.terminate
        )

    async def terminate(self, reason: Any) -> None:
        """Stops this agent's sub-agents. Call ``super().terminate(reason)`` when overriding."""
        supervisor = self._subagent_sup
        if supervisor is not None and supervisor.alive:
            await supervisor.stop("shutdown", timeout=None)
        if telemetry.enabled():
            shown = reason if isinstance(reason, str) else type(reason).__name__
            telemetry.emit(("condukt", "agent", "stop"), {}, {**self._tel_meta, "reason": shown})

    # ------------------------------------------------------------------ start

    async def boot(self, **options: Any) -> None:  # type: ignore[override]
        unknown = set(options) - AGENT_OPTIONS - type(self).extra_options
        if unknown:
            raise TypeError(
                f"{type(self).__name__} got unknown start option(s) {', '.join(sorted(unknown))}; "
                f"declare custom ones in {type(self).__name__}.extra_options"
            )
        self.options: dict[str, Any] = options
        self.session_id: str = str(options.get("id") or uuid7())
        # abspath, not resolve(): no symlink walk on every start (confinement
        # compares real paths itself).
        cwd = os.path.abspath(os.path.expanduser(options.get("cwd") or "."))
        if not os.path.isdir(cwd):
            raise ValueError(f"cwd {cwd} is not a directory")
        self.cwd: Path = Path(cwd)
        self.messages: list[Message] = []
        self._active: _RunState | None = None
        self._follow_ups: deque[str] = deque()
        self._subagent_sup: Any = None
        self._subagent_lock: trio.Lock | None = None
        self._created_at = time.time()
        await self.init(options)
        cls = type(self)
        self._secrets = await resolve_secrets(options["secrets"] if "secrets" in options else self.secrets())
        if isinstance(options.get("api_key"), str):
            self._secrets = self._secrets.hiding({"API_KEY": options["api_key"]})
        self._redactor = options.get("redactor", cls.redactor)
        if self._redactor is not None and (
            isinstance(self._redactor, type) or not isinstance(self._redactor, Redactor)
        ):
            raise TypeError(
                f"redactor must have a redact(text) method (an instance, not a class), got {self._redactor!r}"
            )
        self._compactor = options.get("compactor", cls.compactor)
        if self._compactor is not None and (
            isinstance(self._compactor, type) or not isinstance(self._compactor, Compactor)
        ):
            raise TypeError(
                f"compactor must have an async compact(messages) method (an instance, not a class), "
                f"got {self._compactor!r}"
            )
        restored = await self._restore(options)
        self._configure({**restored, **options})
        self._runs = 0
        if telemetry.enabled():
            telemetry.emit(("condukt", "agent", "start"), {}, self._tel_meta)
        self.system_prompt_text = self.config_system_prompt
        if options.get("load_project_instructions", cls.load_project_instructions):
            extra = await trio.to_thread.run_sync(load_project_instructions, self.cwd)
            if extra:
                base = self.config_system_prompt
                self.system_prompt_text = f"{base}\n\n{extra}" if base else extra

    async def _restore(self, options: Mapping[str, Any]) -> dict[str, Any]:
        """Bind the session store and reload a saved conversation; returns restored settings."""
        store = options.get("session_store", type(self).session_store)
        self._store: Any = None
        if store is None:
            return {}
        self._store = store.bind(self.cwd)
        name = self.handle.name
        self._store_key = str(
            options.get("session_store_key") or options.get("id") or (name if name is not None else self.session_id)
        )
        snapshot = await self._store.load(self._store_key)
        if snapshot is None:
            return {}
        self.messages = list(snapshot.messages)
        if not options.get("id"):
            self.session_id = snapshot.id
        self._created_at = snapshot.created_at or self._created_at
        restored: dict[str, Any] = {"thinking_level": snapshot.thinking_level}
        if snapshot.system_prompt is not None:
            restored["system_prompt"] = snapshot.system_prompt
        if snapshot.model is not None:
            restored["model"] = snapshot.model
        return restored

    async def _save(self) -> None:
        """Write the conversation to the session store (file I/O runs in a thread)."""
        store = self._store
        if store is None:
            return
        from ..sessions import Snapshot

        model = self.options.get("model", type(self).model)
        await store.save(
            self._store_key,
            Snapshot(
                id=self.session_id,
                messages=tuple(self.messages),
                model=model if isinstance(model, str) else None,
                thinking_level=self.config_thinking_level,
                system_prompt=self.config_system_prompt,
                created_at=self._created_at,
                updated_at=time.time(),
            ),
        )

    def _scrub(self, text: str) -> str:
        """Secrets and redactor patterns removed from text bound for the model."""
        text = self._secrets.redact(text)
        if self._redactor is not None:
            text = self._redactor.redact(text)
        return text

    def _scrub_blocks(self, blocks: tuple[TextBlock | ImageBlock, ...]) -> tuple[TextBlock | ImageBlock, ...]:
        if not self._secrets and self._redactor is None:
            return blocks
        return tuple(TextBlock(self._scrub(b.text)) if type(b) is TextBlock else b for b in blocks)

    async def _compact(self) -> None:
        if self._compactor is not None:
            self.messages[:] = await compact_with(self._compactor, self.messages)

    def _configure(self, options: Mapping[str, Any]) -> None:
        cls = type(self)
        self.config_system_prompt: str | None = options.get("system_prompt", cls.system_prompt)
        self.config_thinking_level = validate_thinking_level(options.get("thinking_level", cls.thinking_level))
        self.config_max_turns = _positive_int("max_turns", options.get("max_turns", cls.max_turns))
        self.config_tool_timeout = float(options.get("tool_timeout", cls.tool_timeout))
        self.config_run_timeout: float | None = options.get("run_timeout", cls.run_timeout)
        self.config_confine = bool(options.get("confine_to_cwd", cls.confine_to_cwd))
        self.config_max_tokens: int | None = options.get("max_tokens", cls.max_tokens)
        self.config_output_retries = int(options.get("output_retries", cls.output_retries))
        tools = list(options["tools"] if "tools" in options else self.tools())
        roles = resolve_roles(options["subagents"] if "subagents" in options else self.subagents())
        if roles:
            limit = _positive_int(
                "max_concurrent_subagents", options.get("max_concurrent_subagents", cls.max_concurrent_subagents)
            )
            tools.append(SubagentTool(self, roles, limit))
        self.tool_list: list[Tool] = resolve_tools(tools)
        if SUBMIT_RESULT in {tool.name for tool in self.tool_list}:
            raise ValueError(f"the tool name {SUBMIT_RESULT!r} is reserved for structured output")
        self._tools_by_name: dict[str, Tool] = {tool.name: tool for tool in self.tool_list}
        self.tool_definitions: tuple[ToolDefinition, ...] = tuple(t.definition() for t in self.tool_list)
        model = options.get("model", cls.model)
        if model is None:
            raise ValueError(f"{cls.__name__} has no model: set the model class attribute or pass model=")
        self.model_instance: Model = resolve_model(
            model,
            api_key=options.get("api_key"),
            base_url=options.get("base_url"),
            node=self.handle.node,
            **dict(options.get("model_options") or {}),
        )
        self._event_hook = type(self).handle_event is not Agent.handle_event
        model_name = self.model_instance.name
        self._provider = model_name.partition(":")[0] if ":" in model_name else model_name
        self._tel_meta = {"agent_id": self.session_id, "agent": cls.__name__, "model": model_name}

    async def _subagent_supervisor(self) -> Any:
        """This agent's sub-agent supervisor, started on first use."""
        if self._subagent_lock is None:
            self._subagent_lock = trio.Lock()
        async with self._subagent_lock:
            supervisor = self._subagent_sup
            if supervisor is None or not supervisor.alive:
                supervisor = self._subagent_sup = await self.handle.node.root.start_child(
                    ChildSpec(None, SubagentSupervisor, kwargs={"owner": self.handle}, restart="temporary")
                )
        return supervisor

    # ------------------------------------------------------------------ mailbox

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        kind = type(request)
        if kind is RunRequest:
            if self._active is not None:
                caller.reply_error(Busy(f"{self.handle!r} is already running; use follow_up() to queue"))
                return NO_REPLY
            try:
                submission = (
                    None
                    if request.output is None
                    else Submission(output_spec(request.output), self.config_output_retries)
                )
            except (TypeError, ValueError) as exc:
                caller.reply_error(exc)
                return NO_REPLY
            if request.sink is not None:
                self._start_run(request, None, submission)
                return None  # a stream run: its events are the answer
            self._start_run(request, caller, submission)
            return NO_REPLY
        if kind is AbortRun:
            return self._abort(request.run, caller)
        if kind is Steer:
            if self._active is None:
                caller.reply_error(NotRunning(f"{self.handle!r} has no run to steer"))
                return NO_REPLY
            self._active.steer.append(request.text)
            return None
        if kind is FollowUp:
            if self._active is None and not self._follow_ups:
                self._start_run(RunRequest(request.text, timeout=self.config_run_timeout), None, None)
            elif len(self._follow_ups) >= type(self).max_follow_ups:
                caller.reply_error(Busy(f"{len(self._follow_ups)} follow-ups are already queued"))
                return NO_REPLY
            else:
                self._follow_ups.append(request.text)
            return None
        if kind is GetHistory:
            return tuple(self.messages)
        if kind is Clear:
            if self._active is not None:
                caller.reply_error(Busy("cannot clear the history during a run"))
                return NO_REPLY
            self.messages.clear()
            if self._store is not None:
                await self._store.delete(self._store_key)
            return None
        if kind is Compact:
            if self._active is not None:
                caller.reply_error(Busy("cannot compact the history during a run"))
                return NO_REPLY
            before = len(self.messages)
            try:
                await self._compact()
            except Exception as exc:  # a broken compactor: the caller's problem, history unchanged
                caller.reply_error(exc)
                return NO_REPLY
            await self._save()
            return before - len(self.messages)
        return await super().handle_call(request, caller)

    async def handle_info(self, message: Any) -> None:
        if type(message) is CancelRun:
            active = self._active
            if active is not None and active.request is message.run:
                active.scope.cancel()
            return
        await super().handle_info(message)

    def _abort(self, run: RunRequest | None, caller: Caller) -> Any:
        active = self._active
        if run is None:
            self._follow_ups.clear()
        if active is None or (run is not None and active.request is not run):
            return False
        active.scope.cancel()
        active.abort_waiters.append(caller)
        return NO_REPLY

    # ------------------------------------------------------------------ runs

    def _start_run(self, request: RunRequest, caller: Caller | None, submission: Submission | None) -> None:
        state = _RunState(request, caller, submission)
        self._active = state
        self.start_soon(self._run_task, state)

    async def _run_task(self, state: _RunState) -> None:
        try:
            try:
                result = await self._execute(state)
            except (Aborted, RunTimeout, ModelError, InvalidOutput, NoResultSubmitted) as exc:
                if not isinstance(exc, Aborted):
                    self._keep_steers(state)
                await self._after_run()
                if state.caller is not None:
                    state.caller.reply_error(exc)
            else:
                self._keep_steers(state)
                await self._after_run()
                if state.caller is not None:
                    state.caller.reply(result)
        finally:
            if state.sink is not None:
                state.sink.close()
            self._active = None
            for waiter in state.abort_waiters:
                waiter.reply(True)
        if self._follow_ups:
            text = self._follow_ups.popleft()
            self._start_run(RunRequest(text, timeout=self.config_run_timeout), None, None)

    def _keep_steers(self, state: _RunState) -> None:
        """Steers that arrived too late for the run (it ended first) become follow-ups, not losses."""
        if state.steer:
            self._follow_ups.extendleft(reversed(state.steer))
            state.steer.clear()

    async def _after_run(self) -> None:
        try:
            await self._compact()
        except Exception as exc:
            # The run itself succeeded or failed on its own; a broken
            # compactor must not turn that into a crash (or a restart loop).
            logger.error("%r: compaction failed; history left as is", self.handle, exc_info=exc)
        await self._save()

    def _listened(self, state: _RunState) -> bool:
        """Whether anyone receives this run's events (else per-call events need not be built)."""
        return (
            state.sink is not None
            or state.request.on_event is not None
            or self._event_hook
            or bool(self.handle.node.pubsub)
        )

    async def _emit(self, state: _RunState, event: Event) -> None:
        pubsub = self.handle.node.pubsub
        if pubsub:
            pubsub.publish(self.session_id, AgentEvent(self.session_id, event))
        sink = state.sink
        if sink is not None:
            try:
                await sink.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                state.sink = None  # the reader left; the run is being aborted
        callback = state.request.on_event
        if callback is not None:
            try:
                await callback(event)
            except Exception as exc:
                logger.error("on_event callback raised; dropping it", exc_info=exc)
                state.request.on_event = None
        if self._event_hook:
            await self.handle_event(event)

    async def _execute(self, state: _RunState) -> Any:
        request = state.request
        max_turns = _positive_int("max_turns", request.max_turns or self.config_max_turns)

        emit = functools.partial(self._emit, state)  # cheaper per event than a closure

        await emit(AgentStart(self.session_id, self._scrub(request.prompt)))
        self._runs += 1
        run_id = f"{self.session_id}/{self._runs}"
        state.run_id = run_id
        run_started = trio.current_time()
        if telemetry.enabled():
            telemetry.emit(("condukt", "run", "start"), {}, {**self._tel_meta, "run_id": run_id})
        messages = self.messages
        messages.append(UserMessage((TextBlock(self._scrub(request.prompt)), *request.images)))
        committed = len(messages)
        usage = Usage()
        turn = 0
        text = ""
        failure: BaseException | None = None
        submission = state.submission
        model_request = self._request_builder(submission)
        try:
            with state.scope:
                with trio.move_on_after(request.timeout if request.timeout is not None else float("inf")) as clock:
                    while True:
                        if state.steer:
                            messages.extend(UserMessage((TextBlock(self._scrub(t)),)) for t in state.steer)
                            state.steer.clear()
                            committed = len(messages)
                        turn += 1
                        state.turn = turn
                        await emit(TurnStart(turn))
                        response = await self._complete(model_request(messages), emit, run_id, turn)
                        usage = usage + response.usage
                        if response.text:
                            text = response.text
                        messages.append(response)
                        calls = response.tool_calls
                        if calls:
                            messages.extend(await self._run_tools(calls, state, emit))
                        committed = len(messages)
                        await self._save()
                        await emit(TurnEnd(turn, response))
                        if submission is not None:
                            if submission.accepted:
                                break
                            if submission.exhausted:
                                failure = InvalidOutput(
                                    f"the model submitted {submission.failures} invalid result(s): "
                                    + "; ".join(submission.last_errors),
                                    submission.last_errors,
                                )
                                break
                        if not calls:
                            if state.steer:
                                continue
                            break
                        if turn >= max_turns:
                            await emit(MaxTurnsReached(max_turns))
                            break
            if clock.cancelled_caught:
                failure = RunTimeout(f"run did not finish within {request.timeout:g}s")
            elif state.scope.cancelled_caught:
                failure = Aborted("run aborted")
            elif failure is None and submission is not None and not submission.accepted:
                failure = NoResultSubmitted("the run ended without a call to submit_result")
        except ModelError as exc:
            failure = exc
        except BaseException:
            del messages[committed:]
            raise
        if telemetry.enabled():
            measurements = {
                "duration": trio.current_time() - run_started,
                "input_tokens": usage.input_tokens,
                "output_tokens": usage.output_tokens,
                "turns": turn,
            }
            meta = {**self._tel_meta, "run_id": run_id}
            if failure is None:
                telemetry.emit(("condukt", "run", "stop"), measurements, meta)
            else:
                meta.update(error_type=type(failure).__name__, error=self._scrub(str(failure)))
                telemetry.emit(("condukt", "run", "exception"), measurements, meta)
        if failure is not None:
            del messages[committed:]  # no half-finished turn
            await emit(Error(type(failure).__name__, self._scrub(str(failure))))
            await emit(Done(_status_of(failure)))
            raise failure
        if submission is not None:
            result = submission.value
            await emit(AgentEnd(json.dumps(unstructure(result), ensure_ascii=False, default=str), usage, turn))
        else:
            result = text
            await emit(AgentEnd(text, usage, turn))
        await emit(Done("completed"))
        return result

    async def _complete(self, request: ModelRequest, emit: Any, run_id: str, turn: int) -> AssistantMessage:
        """One model request, with telemetry around it."""
        if not telemetry.enabled():
            return await self.model_instance.complete(request, emit)
        meta = {**self._tel_meta, "run_id": run_id, "turn": turn, "provider": self._provider}
        telemetry.emit(("condukt", "llm", "start"), {}, meta)
        started = trio.current_time()
        try:
            response = await self.model_instance.complete(request, emit)
        except BaseException as exc:
            telemetry.emit(
                ("condukt", "llm", "exception"),
                {"duration": trio.current_time() - started},
                {**meta, "error_type": type(exc).__name__, "error": self._scrub(str(exc))},
            )
            raise
        telemetry.emit(
            ("condukt", "llm", "stop"),
            {
                "duration": trio.current_time() - started,
                "input_tokens": response.usage.input_tokens,
                "output_tokens": response.usage.output_tokens,
            },
            {**meta, "stop_reason": response.stop_reason},
        )
        return response

    def _request_builder(self, submission: Submission | None) -> Any:
        system_prompt = self.system_prompt_text
        tools = self.tool_definitions
        if submission is not None:
            instruction = submission.spec.instruction
            system_prompt = f"{system_prompt}\n\n{instruction}" if system_prompt else instruction
            tools = (*tools, submission.spec.definition())
        thinking, max_tokens = self.config_thinking_level, self.config_max_tokens

        def build(messages: list[Message]) -> ModelRequest:
            return ModelRequest(system_prompt, tuple(messages), tools, thinking, max_tokens)

        return build

    # ------------------------------------------------------------------ tools

    def _timeout_of(self, call: ToolCall) -> float | None:
        tool = self._tools_by_name.get(call.name)
        if tool is None or tool.timeout is AGENT_DEFAULT:
            return self.config_tool_timeout
        return tool.timeout  # type: ignore[return-value]

    async def _run_tools(self, calls: Sequence[ToolCall], state: _RunState, emit: Any) -> list[ToolResultMessage]:
        """Run a turn's calls concurrently; results in call order.

        Calls that start together with the same timeout share one deadline
        (one nursery's cancel scope) instead of a cancel scope each: the
        deadlines are identical, and a scope per call is the dominant cost
        of a wide fan-out.
        """
        if len(calls) == 1:
            return [await self._run_tool(calls[0], state, emit)]
        results: list[Any] = [None] * len(calls)
        groups: dict[float | None, list[int]] = {}
        for index, call in enumerate(calls):
            if state.submission is not None and call.name == SUBMIT_RESULT:
                # Submissions are judged in call order (the first valid one
                # wins), not in whatever order concurrent tasks happen to start.
                results[index] = await self._run_tool(call, state, emit)
            else:
                groups.setdefault(self._timeout_of(call), []).append(index)
        if not groups:
            return results
        if len(groups) == 1:
            ((timeout, indices),) = groups.items()
            await self._run_group(timeout, indices, calls, results, state, emit)
        else:
            async with trio.open_nursery() as nursery:
                for timeout, indices in groups.items():
                    nursery.start_soon(self._run_group, timeout, indices, calls, results, state, emit)
        return results

    async def _run_group(
        self,
        timeout: float | None,
        indices: list[int],
        calls: Sequence[ToolCall],
        results: list[Any],
        state: _RunState,
        emit: Any,
    ) -> None:
        starts: dict[int, tuple[float, Any]] = {}

        async def run_one(index: int) -> None:
            call = calls[index]
            starts[index] = await self._tool_started(call, state, emit)
            outcome = await self._tool_outcome(call, state, emit, scoped=False)
            results[index] = await self._tool_finished(call, state, emit, starts[index], *outcome)

        try:
            async with trio.open_nursery() as group:
                if timeout is not None:
                    group.cancel_scope.deadline = trio.current_time() + timeout
                for index in indices:
                    group.start_soon(run_one, index)
        except BaseException as exc:  # aborted: close what started and did not finish
            for index in indices:
                if results[index] is None and index in starts:
                    self._tool_interrupted(starts[index], _unwrap_cancel(exc))
            raise
        for index in indices:
            if results[index] is None:  # cut off by the shared deadline
                call = calls[index]
                began = starts.get(index) or await self._tool_started(call, state, emit)
                timed_out = (*_error(f"tool {call.name!r} timed out after {timeout:g} seconds"), None)
                results[index] = await self._tool_finished(call, state, emit, began, *timed_out)

    async def _run_tool(self, call: ToolCall, state: _RunState, emit: Any) -> ToolResultMessage:
        """One tool call, start to finish, under its own timeout."""
        began = await self._tool_started(call, state, emit)
        try:
            outcome = await self._tool_outcome(call, state, emit, scoped=True)
        except BaseException as exc:  # cancelled by an abort or the run's timeout
            self._tool_interrupted(began, exc)
            raise
        return await self._tool_finished(call, state, emit, began, *outcome)

    def _tool_interrupted(self, began: tuple[float, Any], exc: BaseException) -> None:
        """Close the telemetry of a tool call that never finished (synchronous: we are cancelled)."""
        started, meta = began
        if meta is not None:
            error = {"error_type": type(exc).__name__, "error": self._scrub(str(exc))}
            telemetry.emit(
                ("condukt", "tool", "exception"), {"duration": trio.current_time() - started}, {**meta, **error}
            )

    async def _tool_started(self, call: ToolCall, state: _RunState, emit: Any) -> tuple[float, Any]:
        if self._listened(state):
            await emit(ToolCallStart(call.id, call.name, call.arguments))
        meta = None
        if telemetry.enabled():
            meta = {
                **self._tel_meta,
                "run_id": state.run_id,
                "turn": state.turn,
                "tool": call.name,
                "tool_call_id": call.id,
            }
            telemetry.emit(("condukt", "tool", "start"), {}, meta)
        return trio.current_time(), meta

    async def _tool_outcome(
        self, call: ToolCall, state: _RunState, emit: Any, *, scoped: bool
    ) -> tuple[tuple[TextBlock | ImageBlock, ...], bool, BaseException | None]:
        if state.submission is not None and call.name == SUBMIT_RESULT:
            return (*state.submission.submit(call.arguments), None)
        return await self._call_tool(call, emit, scoped=scoped)

    async def _tool_finished(
        self,
        call: ToolCall,
        state: _RunState,
        emit: Any,
        began: tuple[float, Any],
        content: tuple[TextBlock | ImageBlock, ...],
        is_error: bool,
        crash: BaseException | None,
    ) -> ToolResultMessage:
        started, meta = began
        content = self._scrub_blocks(content)
        elapsed = trio.current_time() - started
        if meta is not None:
            if crash is None:
                telemetry.emit(("condukt", "tool", "stop"), {"duration": elapsed}, {**meta, "is_error": is_error})
            else:
                error = {"error_type": type(crash).__name__, "error": self._scrub(str(crash))}
                telemetry.emit(("condukt", "tool", "exception"), {"duration": elapsed}, {**meta, **error})
        if self._listened(state):
            await emit(ToolCallEnd(call.id, call.name, _display(content), is_error, elapsed))
        return ToolResultMessage(call.id, call.name, content, is_error)

    def _tool_context(self, tool: Tool, call: ToolCall, emit: Any) -> ToolContext:
        return ToolContext(
            self.handle,
            self.cwd,
            tool.opts,
            self.session_id,
            call.id,
            self.config_confine,
            secrets=self._secrets.env,
            emit=emit,
        )

    async def _call_tool(
        self, call: ToolCall, emit: Any, *, scoped: bool = True
    ) -> tuple[tuple[TextBlock | ImageBlock, ...], bool, BaseException | None]:
        """Run one tool: (content, is_error, the exception if it crashed).

        ``scoped=False``: the caller enforces the timeout (a shared deadline).
        """
        tool = self._tools_by_name.get(call.name)
        if tool is None:
            known = ", ".join(sorted(self._tools_by_name)) or "none"
            return (*_error(f"unknown tool {call.name!r}. Available tools: {known}"), None)
        problem = tool.validate(call.arguments)
        if problem is not None:
            return (*_error(f"invalid arguments for {call.name}: {problem}"), None)
        context = self._tool_context(tool, call, emit)
        timeout = None
        try:
            if not scoped:
                return render_result(await tool.call(dict(call.arguments), context)), False, None
            timeout = self._timeout_of(call)
            with trio.move_on_after(timeout if timeout is not None else float("inf")) as scope:
                value = await tool.call(dict(call.arguments), context)
                return render_result(value), False, None
        except ToolError as exc:
            return (*_error(str(exc)), None)
        except Exception as exc:
            # Scrubbed: the traceback carries the exception's message, which may hold a secret.
            trace = "".join(traceback.format_exception(exc))
            logger.warning("tool %r raised:\n%s", call.name, self._scrub(trace))
            return (*_error(f"{type(exc).__name__}: {exc}"), exc)
        assert scope.cancelled_caught
        return (*_error(f"tool {call.name!r} timed out after {timeout:g} seconds"), None)


def _unwrap_cancel(exc: BaseException) -> BaseException:
    while isinstance(exc, BaseExceptionGroup) and len(exc.exceptions) == 1:
        exc = exc.exceptions[0]
    return exc


def _status_of(failure: BaseException) -> Literal["aborted", "timeout", "failed"]:
    if isinstance(failure, Aborted):
        return "aborted"
    if isinstance(failure, RunTimeout):
        return "timeout"
    return "failed"


def _display(content: tuple[TextBlock | ImageBlock, ...]) -> str:
    """A tool result as text for events: images shown as a placeholder."""
    if len(content) == 1 and type(content[0]) is TextBlock:
        return content[0].text
    return "".join(
        b.text if type(b) is TextBlock else f"[image {b.media_type}, {len(b.data) * 3 // 4} bytes]"  # type: ignore[union-attr]
        for b in content
    )


def _error(message: str) -> tuple[tuple[TextBlock], bool]:
    return (TextBlock(f"Error: {message}"),), True


def _positive_int(what: str, value: Any) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{what} must be a positive int, got {value!r}")
    return value
