"""The runtime state of one agent incarnation, and what runs need from it.

An :class:`Agent` instance is the user's behaviour object (a subclass may
define any attribute it likes); everything the runtime keeps about the
incarnation lives here instead: the frozen config, the history, the
resolved tools and model, the capabilities, the lifecycle. Capabilities
receive the session in their hooks.
"""

from __future__ import annotations

import base64
import functools
import json
import logging
import time
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import trio

from .. import telemetry
from ..events import AgentEnd, AgentEvent, Done, Error, Event
from ..messages import AssistantMessage, DocumentBlock, ImageBlock, Message, TextBlock, ToolDefinition, UserMessage
from ..otp import NO_REPLY, Caller, ExitReason
from ..otp.lowlevel import process_of
from ..providers import Model, ModelRequest
from ..secrets import NO_SECRETS, Secrets, resolve_secrets
from ..sessions import RunCheckpoint
from ..tools import Tool, ToolSource, resolve_tools
from ._approvals import Approvals
from ._capability import NO_HOOKS, Capability, Hooks, SendRequest
from ._compaction import Compaction
from ._config import AgentConfig
from ._errors import Aborted, Busy, NotRunning, RunTimeout, UnknownApproval
from ._ids import uuid7
from ._instructions import ProjectInstructions
from ._lifecycle import Lifecycle, State
from ._persistence import Persistence
from ._requests import (
    AbortRun,
    CancelRun,
    Clear,
    Compact,
    Decide,
    FollowUp,
    GetApprovals,
    GetHistory,
    GetLastResult,
    RunRequest,
    Steer,
)
from ._resume import ResumeCheckpoints, Resumption
from ._run import Run, RunResult
from ._scrubbing import Scrubbing
from ._structured import SUBMIT_RESULT, StructuredOutput
from ._subagents import Subagents
from ._telemetry import Telemetry
from ._tool_calls import describe
from ._tool_sources import ToolSources

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["Session"]

logger = logging.getLogger("condukt.agent")


_NO_ENV: Mapping[str, str] = MappingProxyType({})


def _same(text: str) -> str:
    return text


class Session:
    """One agent incarnation's state: config, history, tools, model, capabilities, lifecycle.

    What capabilities may use: ``agent`` (the user's :class:`Agent`
    instance), ``handle``, ``node``, ``config`` (:class:`AgentConfig`;
    replaceable during ``setup`` only), ``id`` (the session id), ``cwd``,
    ``messages`` (the history, a list), ``system_prompt`` (what the model
    gets, the project instructions included; changeable during ``setup``),
    ``secrets`` (:class:`~condukt.secrets.Secrets`), ``scrub(text)`` (and
    ``scrubs``, whether it changes anything), ``secret_env``,
    ``created_at``; after setup also ``model``, ``tools`` and
    ``tool_definitions``; ``checkpoint()`` (the run in progress, as a
    snapshot stores it), ``restored_run`` (the checkpoint to resume after a
    restart) and ``last_result`` (how the last run ended).
    """

    def __init__(self, agent: Agent, config: AgentConfig) -> None:
        self.agent = agent
        self.handle = agent.handle
        self.node = agent.handle.node
        self.config = config
        self.id: str = config.id or uuid7()
        self.cwd = config.cwd
        self.messages: list[Message] = []
        self.system_prompt: str | None = config.system_prompt
        self.secrets = NO_SECRETS
        #: The secrets as environment variables for tools (read-only, shared by every call).
        self.secret_env: Mapping[str, str] = _NO_ENV
        self.created_at = time.time()
        self.scrub: Callable[[str], str] = _same
        self.capabilities: list[Capability] = []
        self.hooks = NO_HOOKS
        self._traced: Hooks | None = None
        self.model: Model
        self.tools: tuple[Tool, ...] = ()
        self.tools_by_name: dict[str, Tool] = {}
        self.tool_definitions: tuple[ToolDefinition, ...] = ()
        self._lifecycle = Lifecycle(self)
        self.pubsub = self.node.pubsub
        #: The node's topics with subscribers (empty: nobody to publish events to).
        self.subscribed = self.pubsub.topics
        self._runs = 0
        self._event_hook = False
        self.scrubs = False
        #: The run in progress when the restored snapshot was saved, to resume (set by persistence's setup).
        self.restored_run: RunCheckpoint | None = None
        self._approvals: Approvals | None = None
        #: How the last run that ended, ended.
        self.last_result: RunResult | None = None

    # ------------------------------------------------------------------ start and stop

    async def _start(self) -> None:
        """Resolve secrets, set up the capabilities, then the tools and the model."""
        agent, config = self.agent, self.config
        own = await resolve_secrets(config.secrets if config.secrets is not None else agent.secrets())
        secrets = Secrets({**config.inherited_secrets, **own.env}) if config.inherited_secrets else own
        if config.api_key is not None:
            secrets = secrets.hiding({"API_KEY": config.api_key})
        self.secrets = secrets
        self.secret_env = MappingProxyType(secrets.env) if secrets.names() else _NO_ENV
        builtin: list[Capability] = []
        if secrets or config.redactor is not None:
            builtin.append(Scrubbing(secrets, config.redactor))
        if config.session_store is not None:
            builtin.append(Persistence(config.session_store))
        if config.load_project_instructions:
            builtin.append(ProjectInstructions())
        roles = config.subagents if config.subagents is not None else agent.subagents()
        if roles:
            builtin.append(Subagents(roles))
        if config.compactor is not None:
            builtin.append(Compaction(config.compactor))
        tools = list(config.tools if config.tools is not None else agent.tools())
        # A class is never a ToolSource instance: the ABC's isinstance check only for the rest.
        sources = [entry for entry in tools if not isinstance(entry, type) and isinstance(entry, ToolSource)]
        if sources:
            tools = [entry for entry in tools if not isinstance(entry, ToolSource)]
            builtin.append(ToolSources(sources))
        extra = config.capabilities if config.capabilities is not None else agent.capabilities()
        for capability in extra:
            if not isinstance(capability, Capability):
                raise TypeError(f"capabilities must be condukt.agent.Capability instances, got {capability!r}")
        self.capabilities = capabilities = [*builtin, *extra]
        try:
            for capability in capabilities:
                await capability.setup(self)
            self.hooks = Hooks(capabilities) if capabilities else NO_HOOKS
            self._set_scrub()
            for offer in self.hooks.tools:
                tools.extend(offer(self))
            resolved = resolve_tools(tools)
            # One plain loop rather than a generator per question (every start runs this).
            by_name: dict[str, Tool] = {}
            definitions = []
            asks_approval = False
            for tool in resolved:
                if tool.name == SUBMIT_RESULT:
                    raise ValueError(f"the tool name {SUBMIT_RESULT!r} is reserved for structured output")
                by_name[tool.name] = tool
                definitions.append(tool.definition())
                if tool.requires_approval is not False:
                    asks_approval = True
            self.tools = tuple(resolved)
            self.tools_by_name = by_name
            self.tool_definitions = tuple(definitions)
            self.model = self.config.resolved_model(self.node)
        except BaseException:
            # Tool sources hold connections (MCP servers): a failed start releases them.
            for capability in builtin:
                if isinstance(capability, ToolSources):
                    with trio.CancelScope(shield=True):
                        await capability.close()
            raise
        self._event_hook = type(agent).handle_event is not _base_handle_event()
        restored = self.restored_run
        if asks_approval or (restored and restored.approvals):
            # Known only once the tools resolve: added last, the hooks rebuilt.
            self._approvals = Approvals(self, restored)
            capabilities.append(self._approvals)
            self.hooks = Hooks(capabilities)
        if config.resume and config.session_store is not None:
            capabilities.append(ResumeCheckpoints())
            self.hooks = Hooks(capabilities)
        if restored is not None:
            self._lifecycle.submit(self._resumed_run(restored))
        if telemetry.enabled():
            Telemetry.agent_started(self)

    def _traced_hooks(self) -> Hooks:
        """The hooks with telemetry added (built the first time telemetry is on for a run)."""
        traced = self._traced
        if traced is None:
            traced = self._traced = Hooks([*self.capabilities, Telemetry(self)])
        return traced

    def _set_scrub(self) -> None:
        scrubs = self.hooks.scrub
        self.scrubs = bool(scrubs)
        if not scrubs:
            self.scrub = _same
        elif len(scrubs) == 1:
            self.scrub = scrubs[0]
        else:
            self.scrub = functools.reduce(lambda f, g: lambda text: g(f(text)), scrubs)

    def _needs_stop(self) -> bool:
        """Whether :meth:`stop` has work to do when the process exits."""
        return bool(self.hooks.stop) or bool(self._lifecycle.queue) or telemetry.enabled()

    async def _stop(self, reason: ExitReason) -> None:
        """The process is exiting: queued streams end, capabilities stop."""
        self._lifecycle.close()
        for stop in self.hooks.stop:
            await stop(self, reason)
        if telemetry.enabled():
            Telemetry.agent_stopped(self, reason)

    # ------------------------------------------------------------------ mailbox

    async def _handle_call(self, request: Any, caller: Caller) -> Any:
        """Answer a message from an :class:`AgentHandle` (see :mod:`._requests`)."""
        kind = type(request)
        lifecycle = self._lifecycle
        try:
            if kind is RunRequest:
                return self._submit_run(request, caller)
            if kind is AbortRun:
                return lifecycle.abort(request.run, request.run_id, request.from_run, caller)
            if kind is Steer:
                lifecycle.steer(request.text)
                return None
            if kind is FollowUp:
                lifecycle.follow_up(request.text)
                return None
            if kind is GetHistory:
                return tuple(self.messages)
            if kind is Clear:
                if lifecycle.state is State.IDLE:
                    return await self._clear()  # nothing to wait for: at once
                return lifecycle.submit_operation(self._clear, caller)
            if kind is Compact:
                return lifecycle.submit_operation(self._compact, caller)
            if kind is Decide:
                if self._approvals is None:
                    raise UnknownApproval(request.call_id)
                self._approvals.decide(request.call_id, request.approved, request.reason)
                return None
            if kind is GetApprovals:
                return () if self._approvals is None else self._approvals.pending()
            if kind is GetLastResult:
                return self.last_result
        except (Busy, NotRunning, UnknownApproval) as exc:
            caller.reply_error(exc)
            return NO_REPLY
        return NotImplemented

    def _submit_run(self, request: RunRequest, caller: Caller) -> Any:
        """Start or queue the run ``request`` asks for; the reply (a stream's run id) or ``NO_REPLY``."""
        stream = request.sink is not None
        run = self._new_run(request, None if stream else caller)
        try:
            self._lifecycle.submit(run)
        except Busy as exc:
            caller.reply_error(exc)
            return NO_REPLY
        return run.id if stream else NO_REPLY

    def _handle_info(self, message: Any) -> bool:
        """Handle a runtime notice; False if it is not the agent's."""
        if type(message) is CancelRun:
            self._lifecycle.cancel(message.run)
            return True
        return False

    # ------------------------------------------------------------------ runs

    def _new_run(self, request: RunRequest, caller: Caller | None) -> Run:
        """A :class:`Run` for ``request``, with its id, hooks and event fan-out."""
        self._runs += 1
        traced = telemetry.enabled()
        hooks = self._traced_hooks() if traced else self.hooks
        if request.output is not None:
            extra = StructuredOutput(request.output, self.config.output_retries)
            hooks = Hooks([extra, *self.capabilities, *([Telemetry(self)] if traced else [])])
        return Run(self, f"{self.id}/{self._runs}", request, caller, hooks)

    def _resumed_run(self, checkpoint: RunCheckpoint) -> Run:
        """The run a restored checkpoint describes, continued by this incarnation (nobody waits for it)."""
        prompt = self.messages[checkpoint.prompt_index]
        text = prompt.text if type(prompt) is UserMessage else ""
        run = self._new_run(RunRequest(text, timeout=self.config.run_timeout), None)
        run.id = checkpoint.run_id
        run.resumed = checkpoint
        run.hooks = Hooks([Resumption(checkpoint), *self.capabilities])
        return run

    def checkpoint(self) -> RunCheckpoint | None:
        """The run in progress as a :class:`~condukt.sessions.RunCheckpoint` (None: no run, or a structured one).

        A structured run (``output=``) is not checkpointed: its schema is
        code, which a snapshot cannot hold.
        """
        lifecycle = self._lifecycle
        run = lifecycle.current
        if run is None or lifecycle.state is not State.RUNNING or run.start < 0 or run.structured:
            return None
        results, approvals = self._approvals.checkpoint(run) if self._approvals is not None else ((), ())
        messages = self.messages
        turns = sum(1 for i in range(run.start + 1, len(messages)) if type(messages[i]) is AssistantMessage)
        return RunCheckpoint(run.id, run.start, turns, results, approvals)

    def _follow_up_run(self, text: str) -> Run:
        """A run for a follow-up (or a late steer): nobody waits for its answer."""
        return self._new_run(RunRequest(text, timeout=self.config.run_timeout), None)

    async def _settle(self, run: Run, value: Any, failure: BaseException | None) -> None:
        """After the loop: capabilities' ``after_run``, save, then the last events (``Done`` last)."""
        hooks = run.hooks
        for after in hooks.after_run:
            await after(run, failure)
        for changed in hooks.history_changed:
            await changed(self)
        self.last_result = RunResult(
            run.id, "completed" if failure is None else _status_of(failure), value if failure is None else None, failure
        )
        emit = run.emit
        if not self._listened(run):
            return
        if failure is not None:
            await emit(Error(type(failure).__name__, self.scrub(describe(failure))))
            await emit(Done(_status_of(failure)))
            return
        text = _as_json(run.request.output.dump(value)) if run.structured else value
        await emit(AgentEnd(text, run.usage, run.turn))
        await emit(Done("completed"))

    def _model_request(self, run: Run) -> ModelRequest:
        """The request for ``run``'s next turn, as the capabilities' ``prepare_request`` hooks make it."""
        config = self.config
        settings = config.model_settings
        override = run.request.model_settings
        if override is not None:
            settings = override if settings is None else settings.merged(override)
        max_tokens = config.max_tokens
        if settings is not None and settings.max_tokens is not None:
            max_tokens = settings.max_tokens
        request = ModelRequest(
            self.system_prompt,
            tuple(self.messages),
            self.tool_definitions,
            config.thinking_level,
            max_tokens,
            settings,
        )
        for prepare in run.hooks.prepare_request:
            request = prepare(run, request)
        return request

    async def _ask_model_watched(self, run: Run, request: ModelRequest) -> AssistantMessage:
        """Send ``request`` through the ``wrap_model_request`` hooks, telling ``model_started``/``model_finished``."""
        hooks = run.hooks
        for started in hooks.model_started:
            started(run)
        try:
            if hooks.wrap_model_request:
                response = await _wrapped(run, hooks.wrap_model_request, self._send(run))(request)
            else:
                response = await self.model.complete(request, run.emit)
        except BaseException as exc:
            for finished in hooks.model_finished:
                finished(run, None, exc)
            raise
        for finished in hooks.model_finished:
            finished(run, response, None)
        return response

    def _send(self, run: Run) -> SendRequest:
        """The innermost ``send`` of the wrappers: the model itself."""
        model, emit = self.model, run.emit

        async def send(request: ModelRequest) -> AssistantMessage:
            return await model.complete(request, emit)

        return send

    def _caller_left(self, run: Run) -> bool:
        """For a cancelled hosted run: whether its caller went away (else the process is exiting)."""
        process = process_of(self.handle)
        return process is not None and not process.exiting

    def _settle_waits(self, run: Run) -> bool:
        """Whether :meth:`_settle` awaits anything for ``run`` (hooks to run, listeners to tell)."""
        hooks = run.hooks
        return bool(hooks.after_run or hooks.history_changed) or self._listened(run)

    def _listened(self, run: Run) -> bool:
        """Whether anyone receives ``run``'s events (else per-call events need not be built)."""
        return run.sink is not None or run.on_event is not None or self._event_hook or bool(self.subscribed)

    async def _emit(self, run: Run, event: Event) -> None:
        """Deliver ``event`` to node subscribers, the run's stream and callback, and ``handle_event``."""
        if self.subscribed:
            self.pubsub.publish(self.id, AgentEvent(self.id, event))
        sink = run.sink
        if sink is not None:
            try:
                await sink.send(event)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                run.sink = None  # the reader left; the run is being aborted
        callback = run.on_event
        if callback is not None:
            try:
                await callback(event)
            except Exception as exc:
                logger.error("on_event callback raised; dropping it", exc_info=exc)
                run.on_event = None
        if self._event_hook:
            await self.agent.handle_event(event)
        if run.aborted:
            await trio.lowlevel.checkpoint()  # a callback aborted its own run: stop here

    def scrub_blocks(self, blocks: tuple[_Block, ...]) -> tuple[_Block, ...]:
        """``blocks`` with their text, text documents and document titles scrubbed (images, PDF bytes as they are)."""
        if not self.scrubs:
            return blocks
        scrub = self.scrub
        return tuple(
            TextBlock(scrub(b.text))
            if type(b) is TextBlock
            else _scrub_document(b, scrub)
            if type(b) is DocumentBlock
            else b
            for b in blocks
        )

    # ------------------------------------------------------------------ maintenance

    async def _clear(self) -> None:
        """Forget the conversation (the capabilities hear of it: a store deletes its snapshot)."""
        self.messages.clear()
        for changed in self.hooks.history_changed:
            await changed(self)

    async def _compact(self) -> int:
        """Run the compactor now; how many messages it removed (0 without one)."""
        before = len(self.messages)
        for capability in self.capabilities:
            if isinstance(capability, Compaction):
                await capability.compact(self, strict=True)
        for changed in self.hooks.history_changed:
            await changed(self)
        return before - len(self.messages)


def _wrapped(run: Run, wrappers: tuple[Any, ...], send: SendRequest) -> SendRequest:
    """``send`` inside ``wrappers`` (the first one outermost)."""
    for wrap in reversed(wrappers):
        send = _bind(wrap, run, send)
    return send


def _bind(wrap: Any, run: Run, inner: SendRequest) -> SendRequest:
    async def send(request: ModelRequest) -> AssistantMessage:
        response: AssistantMessage = await wrap(run, request, inner)
        return response

    return send


def _base_handle_event() -> Any:
    global _BASE_HANDLE_EVENT
    if _BASE_HANDLE_EVENT is None:
        from ._agent import Agent  # a cycle at import time: looked up once, on first start

        _BASE_HANDLE_EVENT = Agent.handle_event
    return _BASE_HANDLE_EVENT


_BASE_HANDLE_EVENT: Any = None


def _status_of(failure: BaseException) -> Any:
    if isinstance(failure, Aborted):
        return "aborted"
    if isinstance(failure, RunTimeout):
        return "timeout"
    return "failed"


def _as_json(data: Any) -> str:
    return json.dumps(data, ensure_ascii=False, default=str)


_Block = TextBlock | ImageBlock | DocumentBlock


def _scrub_document(block: DocumentBlock, scrub: Callable[[str], str]) -> DocumentBlock:
    """A document with its title scrubbed, and its text if it is a text one (a PDF's bytes as they are).

    The title reaches the model (a ``title``, a ``filename``), the history
    and the store like any text. A text document that is not UTF-8 (Latin-1,
    say) is scrubbed too: its other bytes go through the scrubber as
    surrogate escapes and come back unchanged.
    """
    title = block.title
    if title:
        title = scrub(title)
    data = block.data
    if block.is_text:
        try:
            raw = block.to_bytes()
        except ValueError:  # not base64: nothing a scrubber could read (the protocols refuse it)
            raw = None
        if raw is not None:
            text = raw.decode("utf-8", "surrogateescape")
            scrubbed = scrub(text)
            if scrubbed != text:
                data = base64.b64encode(scrubbed.encode("utf-8", "surrogateescape")).decode("ascii")
    if title == block.title and data is block.data:
        return block
    return DocumentBlock(block.media_type, data, title)
