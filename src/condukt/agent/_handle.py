"""The :class:`AgentHandle`: how callers talk to an agent process."""

from __future__ import annotations

import math
import os
from collections.abc import Awaitable, Callable, Iterable, Mapping
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import trio

from ..events import AgentEnd, Done, Error, Event
from ..messages import DocumentBlock, ImageBlock, Message
from ..otp import CallError, CallingSelf, CallTimeout, ConduktError, Handle, NoProc
from ..otp.lowlevel import send_system, server_of, start_call
from ..providers import ModelSettings
from ..providers.lowlevel import model_settings as check_model_settings
from ..schema import Schema
from ..tools.read import IMAGE_TYPES
from ._errors import Aborted
from ._info import AgentInfo, DetachedRunInfo
from ._input import render_input
from ._operations import run_operation
from ._requests import (
    AbortRun,
    AttachRun,
    CancelRun,
    Clear,
    Compact,
    Decide,
    FollowUp,
    GetApprovals,
    GetHistory,
    GetInputs,
    GetLastResult,
    Respond,
    RunRequest,
    Steer,
)
from ._result import RunResult
from ._server import AgentStatus, status_of
from ._stepping import Stepping, Steps
from ._validate import check_callable, check_count, check_seconds, check_str

if TYPE_CHECKING:
    from ..sessions import PendingApproval, PendingInput

__all__ = [
    "STREAM_BUFFER",
    "AgentHandle",
    "AttachedStream",
    "EventStream",
    "refuse_inside_own_run",
    "run_request",
    "submit_run",
]

#: Events buffered between a streaming run and its reader; a slower reader
#: holds the run back rather than letting memory grow.
STREAM_BUFFER = 256

#: Start options of a live agent that :meth:`AgentHandle.operation` does not
#: pass on: they name this agent's conversation, which an operation must not touch.
_NOT_FOR_OPERATIONS = frozenset({"id", "name", "session_store", "session_store_key"})


def _load_images(images: Iterable[ImageBlock | str | os.PathLike[str]] | None) -> tuple[ImageBlock, ...]:
    blocks: list[ImageBlock] = []
    for image in images or ():
        if isinstance(image, ImageBlock):
            blocks.append(image)
            continue
        path = Path(image)
        media_type = IMAGE_TYPES.get(path.suffix.lower())
        if media_type is None:
            raise ValueError(f"{path} is not a supported image (png, jpg, gif, webp)")
        blocks.append(ImageBlock.from_bytes(path.read_bytes(), media_type))
    return tuple(blocks)


def _load_documents(
    documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None,
) -> tuple[DocumentBlock, ...]:
    if isinstance(documents, (str, os.PathLike, DocumentBlock, bytes)):
        raise TypeError(f"documents must be a list of documents, got one {type(documents).__name__}: wrap it in a list")
    if documents is not None and not isinstance(documents, Iterable):
        raise TypeError(f"documents must be a list of DocumentBlocks or paths, got {type(documents).__name__}")
    blocks: list[DocumentBlock] = []
    for document in documents or ():
        if isinstance(document, DocumentBlock):
            if not isinstance(document.media_type, str) or not document.media_type:
                raise ValueError(f"a DocumentBlock needs a media type, got {document.media_type!r}")
            if not isinstance(document.data, str):
                raise TypeError(f"a DocumentBlock's data is base64 text, got {type(document.data).__name__}")
            if not document.is_base64:
                raise ValueError(
                    "a DocumentBlock's data is not base64 (standard alphabet, no line breaks):"
                    " build it with DocumentBlock.from_bytes or from_text"
                )
            if document.title is not None and not isinstance(document.title, str):
                raise TypeError(f"a DocumentBlock's title is a str or None, got {type(document.title).__name__}")
            blocks.append(document)
        elif isinstance(document, bytes):
            raise TypeError("a document as bytes needs a media type: use DocumentBlock.from_bytes(data, media_type)")
        else:
            blocks.append(DocumentBlock.from_path(document))  # TypeError/ValueError/OSError for a bad one
    return tuple(blocks)


def run_request(
    prompt: str,
    timeout: float | None,
    max_turns: int | None,
    images: Any,
    output: Any,
    input: Any,
    input_schema: Any,
    on_event: Any = None,
    documents: Any = None,
    settings: Any = None,
) -> RunRequest:
    """A checked :class:`RunRequest`: every argument error is raised here, in the caller."""
    # The checks are called only where they have something to check: each call
    # is a measurable part of a run on an in-process model (benchmarks/agent_loop.py).
    if not isinstance(prompt, str):
        check_str("prompt", prompt, optional=False)
    if timeout is not None:
        kind = type(timeout)
        if (kind is int or kind is float) and 0 < timeout < math.inf:
            timeout = float(timeout)  # what check_seconds gives for it
        else:
            timeout = check_seconds("timeout", timeout)
    if max_turns is not None:
        max_turns = check_count("max_turns", max_turns, optional=True)
    if on_event is not None:
        check_callable("on_event", on_event)
    schema = None if output is None else Schema.of(output)
    if input is not None or input_schema is not None:
        rendered = render_input(input, input_schema)
        prompt = f"{prompt}\n\n{rendered}" if prompt else rendered
    if not prompt and not images and not documents:
        raise ValueError("prompt must not be empty (give a prompt, images, documents or an input)")
    attachments: tuple[ImageBlock | DocumentBlock, ...] = () if images is None else _load_images(images)
    if documents is not None:
        attachments += _load_documents(documents)
    if settings is not None:
        settings = check_model_settings(settings)
    # Positional, in RunRequest's field order (prompt, attachments, timeout, max_turns, sink, output, on_event...).
    return RunRequest(prompt, attachments, timeout, max_turns, None, schema, on_event, settings)


class AgentHandle(Handle):
    """The handle of an agent process: run prompts, stream events, steer, abort.

    Every method is a message to the agent process, so a handle may be used
    from any task, including a tool running inside that same agent
    (``context.agent``): the agent's mailbox keeps being served while a run
    is in progress.
    """

    __slots__ = ()

    def _status(self) -> AgentStatus:
        status = status_of(server_of(self))
        if status is None:
            raise NoProc(f"{self!r} is not alive")
        return status

    def _inside_own_run(self) -> bool:
        """Whether the calling task is part of one of this agent's runs (a tool, an event callback)."""
        status = status_of(server_of(self))
        if status is None or not status.working:  # no job in progress (the common case): nothing to look up
            return False
        try:
            task = trio.lowlevel.current_task()
        except RuntimeError:  # no task: a guest run's host loop, between trio's ticks (``start_run`` from asyncio)
            return False
        return status.runs_in(task)

    @property
    def session_id(self) -> str:
        """The id of the agent's conversation (a UUIDv7 unless given as ``id=``).

        Raises :class:`NoProc` once the agent exited.
        """
        return self._status().session_id

    @property
    def running(self) -> bool:
        """Whether a run is in progress (running or delivering its result)."""
        return self._status().running

    @property
    def state(self) -> str:
        """The lifecycle state: ``"idle"``, ``"running"``, ``"finishing"``, ``"maintaining"``, or ``"hibernated"``.

        ``"hibernated"``: idle, its state compacted after ``hibernate_after``
        seconds without a message; any call wakes it (it is then ``"idle"``).
        """
        return self._status().lifecycle_state

    def info(self) -> AgentInfo:
        """What the agent is doing now: state, queue, and the run in progress (turn, tokens, tool calls in flight).

        A snapshot for dashboards (the observer, ``docs/observer.md``).
        Synchronous; raises :class:`NoProc` once the agent exited.
        """
        return self._status().info()

    @property
    def queued(self) -> int:
        """How many runs (and ``clear``/``compact`` calls) wait behind the current one."""
        return self._status().queued

    async def run(
        self,
        prompt: str,
        *,
        timeout: float | None = 300,
        max_turns: int | None = None,
        images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
        output: Any = None,
        input: Any = None,
        input_schema: Any = None,
        on_event: Callable[[Event], Awaitable[None]] | None = None,
        documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> Any:
        """Run ``prompt`` to completion and return the final text (or structured result).

        The loop asks the model, runs the tools it calls (concurrently), and
        repeats until the model answers without tools or ``max_turns`` model
        requests were made (then the last text is returned and a
        :class:`~condukt.events.MaxTurnsReached` event says so).

        With ``output=`` (a JSON Schema dict, an attrs class or a dataclass)
        the model must call a ``submit_result`` tool with a result matching
        it, and ``run`` returns that result (a dict, or an instance of the
        class); see ``docs/structured-output.md``. ``input=`` is rendered into
        the prompt as JSON, validated first against ``input_schema`` if given
        (:class:`InvalidInput`, before any model request). ``on_event`` is
        awaited with each event of the run, in order, from inside the agent
        (a lighter alternative to :meth:`stream`; an exception in it is
        logged and the callback dropped).

        ``images`` (:class:`~condukt.messages.ImageBlock` s or paths to png,
        jpg, gif or webp files) and ``documents``
        (:class:`~condukt.messages.DocumentBlock` s or paths to PDF and text
        files, see :data:`~condukt.messages.DOCUMENT_TYPES`) are sent after
        the prompt's text, in that order; a path is read here, in the caller.
        A document type the agent's provider cannot take fails the run with
        :class:`~condukt.providers.UnsupportedContent` before any request.
        ``model_settings`` (a :class:`~condukt.ModelSettings` or a dict of its
        fields) overrides the agent's sampling settings for this run; one the
        provider's protocol cannot take fails the run with
        :class:`~condukt.providers.UnsupportedSetting` before any request.

        If the agent is busy, the run waits its turn behind the runs queued
        before it (OTP mailbox order); ``timeout`` counts from when it
        starts. Bad arguments raise ``TypeError``/``ValueError`` here, before
        anything reaches the agent.

        Raises :class:`Busy` only if ``max_queued_runs`` runs already wait,
        :class:`Aborted` if ``abort()`` stopped it, :class:`RunTimeout` after
        ``timeout`` seconds, a :class:`~condukt.providers.ModelError` if the
        model failed, :class:`InvalidOutput` / :class:`NoResultSubmitted` for
        a structured run without a valid result, :class:`~condukt.CallError`
        if the agent crashed, and :class:`~condukt.CallingSelf` when called
        from inside this agent's own run (it would wait for itself).
        Cancelling the caller aborts the run (or takes it out of the queue).
        A run asked of an idle agent usually runs in the calling task (see
        docs/agents.md): cancelled, it raises once the run's tools are
        cancelled and its history is rolled back.
        In every case the history holds only completed turns; a run that
        completed none leaves no trace of its prompt in it.
        """
        request = run_request(
            prompt, timeout, max_turns, images, output, input, input_schema, on_event, documents, model_settings
        )
        refuse_inside_own_run(self, "run()")
        # As submit_run, inlined: a coroutine frame less per run (benchmarks/agent_loop.py).
        # A cancelled caller starts nothing: an idle agent would start the run
        # right here (``handle_call_now``), where the mailbox skips a withdrawn call.
        await trio.lowlevel.checkpoint_if_cancelled()
        try:
            return await start_call(self, request, None)  # self.call, a coroutine frame less
        except trio.Cancelled:
            # Whoever wanted the answer is gone: do not leave the run going.
            send_system(self, CancelRun(request))
            raise

    def stream(
        self,
        prompt: str,
        *,
        timeout: float | None = 300,
        max_turns: int | None = None,
        images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
        output: Any = None,
        input: Any = None,
        input_schema: Any = None,
        documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> _StreamContext:
        """Run ``prompt`` and iterate over its events as they happen.

        ::

            async with agent.stream("Review the last commit") as events:
                async for event in events:
                    ...

        The iteration ends after :class:`~condukt.events.Done`; then
        ``events.result`` holds the final text (or ``events.error`` the
        failure). ``events.run_id`` identifies the run. A stream submitted
        while the agent is busy queues like :meth:`run` (its events start
        when its turn comes). Leaving the block early, or cancelling the
        reader, aborts the run. Raises on entry what :meth:`run` raises for
        its arguments, :class:`Busy` when the queue is full and
        :class:`~condukt.CallingSelf` from inside the agent's own run; raises
        :class:`~condukt.CallError` while iterating if the agent crashed.
        """
        request = run_request(
            prompt, timeout, max_turns, images, output, input, input_schema, None, documents, model_settings
        )
        refuse_inside_own_run(self, "stream()")
        return _StreamContext(self, request)

    def iter(
        self,
        prompt: str,
        *,
        timeout: float | None = 300,
        max_turns: int | None = None,
        images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
        output: Any = None,
        input: Any = None,
        input_schema: Any = None,
        documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> _StepsContext:
        """Run ``prompt`` one step at a time, the caller deciding when the run goes on.

        ::

            async with agent.iter("Tidy the repo") as steps:
                async for step in steps:
                    if isinstance(step, ModelStep) and step.tool_calls:
                        step.replace_tool_calls([c for c in step.tool_calls if c.name != "bash"])
                answer = steps.result

        One step per model response (a :class:`~condukt.agent.ModelStep`,
        before its tool calls run: they may be edited, see
        :meth:`~condukt.agent.ModelStep.replace_tool_calls`) and one per
        batch of tool results (a :class:`~condukt.agent.ToolsStep`, the turn
        complete in the history). The run waits at each step until the
        caller asks for the next one; that time counts against ``timeout``.
        ``steps.steer(text)`` adds a user message before the next request.
        Leaving the block early (``break``, an exception, cancellation)
        aborts the run: the history keeps the completed turns only (a step's
        response whose calls never ran is dropped) and ``steps.result``
        raises :class:`Aborted`. When the iteration ends, ``steps.result``
        is the run's result (what :meth:`run` returns) or raises what
        :meth:`run` would have raised. Arguments and the errors on entry
        are those of :meth:`stream`.
        """
        request = run_request(
            prompt, timeout, max_turns, images, output, input, input_schema, None, documents, model_settings
        )
        refuse_inside_own_run(self, "iter()")
        return _StepsContext(self, request)

    async def submit(
        self,
        prompt: str,
        *,
        timeout: float | None = 300,
        max_turns: int | None = None,
        images: Iterable[ImageBlock | str | os.PathLike[str]] | None = None,
        output: Any = None,
        input: Any = None,
        input_schema: Any = None,
        on_event: Callable[[Event], Awaitable[None]] | None = None,
        documents: Iterable[DocumentBlock | str | os.PathLike[str]] | None = None,
        model_settings: ModelSettings | Mapping[str, Any] | None = None,
    ) -> str:
        """Start ``prompt`` as a *detached* run (or queue it) and return its id at once.

        Nobody waits for a detached run: it goes on until it ends, whoever
        attaches to it or leaves. Read its events with :meth:`attach`, its
        outcome with :meth:`result`, where it stands with :meth:`run_info`;
        stop it with ``abort(run_id)``. The id is a UUIDv7 (usable as one URL
        path segment); the run's events are numbered from 0.

        Its event log is kept by the agent (the last ``DETACHED_EVENTS``
        events) and, when the agent owns its key in a session store, in the
        store too: after the node died, an agent restarted on the same key
        with ``resume=True`` finishes the run and ``attach``/``result`` by
        the same id work there (``docs/sessions.md``, "Detached runs").

        Takes :meth:`run`'s options and raises what it raises for them,
        :class:`Busy` when the queue is full and
        :class:`~condukt.CallingSelf` from inside the agent's own run.
        Cancelling the caller before the agent read the request withdraws it
        (no run); once it is read, the run goes on.
        """
        request = run_request(
            prompt, timeout, max_turns, images, output, input, input_schema, on_event, documents, model_settings
        )
        request.detached = True
        refuse_inside_own_run(self, "submit()")
        run_id: str = await self.call(request, timeout=None)
        return run_id

    def attach(self, run_id: str, *, after: int = -1) -> _AttachContext:
        """Read the events of the detached run ``run_id`` with an index greater than ``after``, up to its ``Done``.

        ::

            async with agent.attach(run_id) as events:
                async for event in events:
                    ...  # events.index is the index of this event

        Events already logged are replayed, then new ones follow as they
        happen; the iteration ends after :class:`~condukt.events.Done`, with
        ``events.result`` / ``events.error`` set as :meth:`stream` sets them.
        Any number of readers may attach to one run, each at its own pace
        (the run never waits for them); leaving the block, or cancelling the
        reader, never affects the run. Reconnecting with ``after=`` the last
        index seen gives every event exactly once.

        Raises on entry :class:`UnknownRun` for an id this agent (and its
        store) does not know, :class:`EventsEvicted` when events after
        ``after`` are no longer kept, ``TypeError``/``ValueError`` for bad
        arguments; while iterating, :class:`~condukt.CallError` if the agent
        exited before the run's end (with a store and ``resume=True``, its
        next incarnation finishes it: attach again there).
        """
        check_str("run_id", run_id, optional=False)
        if isinstance(after, bool) or not isinstance(after, int):
            raise TypeError(f"after must be an int, got {type(after).__name__}")
        if after < -1:
            raise ValueError(f"after must be >= -1, got {after}")
        return _AttachContext(self, run_id, after)

    async def result(self, run_id: str, *, timeout: float | None = None) -> Any:
        """Wait for the detached run ``run_id`` to end; return its result or raise its error.

        The result is what :meth:`run` would have returned; the error what
        it would have raised (:class:`Aborted`, :class:`RunTimeout`...). A
        run that ended in an earlier incarnation of the agent (read back
        from its store) returns its final text (a structured run: its JSON
        data), and a failure it had is raised as :class:`RunFailed`
        (:class:`Aborted` and :class:`RunTimeout` keep their class).

        Raises :class:`UnknownRun` for an unknown id,
        :class:`~condukt.CallTimeout` after ``timeout`` seconds (the run goes
        on), :class:`~condukt.CallError` if the agent exited before the run
        ended. Cancelling the caller only stops the wait: the run goes on.
        """
        check_str("run_id", run_id, optional=False)
        timeout = check_seconds("timeout", timeout)
        with trio.move_on_after(math.inf if timeout is None else timeout) as scope:
            record = await self._record(run_id)
            while not record.ended:
                if record.lost is not None:
                    reason = self.exit_reason
                    raise CallError(reason, f"agent exited before run {run_id} finished: {reason!r}")
                await record.wait()
        if scope.cancelled_caught:
            raise CallTimeout(f"run {run_id} did not end within {timeout} s")
        return record.outcome()

    async def run_info(self, run_id: str, *, timeout: float | None = 5.0) -> DetachedRunInfo:
        """Where the detached run ``run_id`` stands: a :class:`DetachedRunInfo` (status, text, error, indexes).

        Raises :class:`UnknownRun` for an unknown id,
        :class:`~condukt.CallTimeout` after ``timeout``. Cancelling the
        caller only stops the wait.
        """
        check_str("run_id", run_id, optional=False)
        record = await self._record(run_id, check_seconds("timeout", timeout))
        info: DetachedRunInfo = record.info()
        return info

    async def _record(self, run_id: str, timeout: float | None = None) -> Any:
        """The agent's ``RunRecord`` of ``run_id`` (read in this task; written by the agent's pump)."""
        record: Any = await self.call(AttachRun(run_id), timeout=timeout)
        return record

    async def abort(self, run_id: str | None = None) -> bool:
        """Stop a run for real and wait until it has stopped; whether it stopped the run meant.

        Without ``run_id``: the run in progress, and the follow-ups queued
        behind it are dropped (runs other callers queued still run). With a
        ``run_id`` (from :class:`~condukt.events.AgentStart` or
        ``EventStream.run_id``): that run, whether it is in progress or still
        queued (then it never starts and nothing of it reaches the history).
        In-flight model requests and tool calls are cancelled (tool
        subprocesses killed) and the run's caller gets :class:`Aborted`.

        Returns ``False`` when there was nothing to stop: no such run, or it
        is already delivering its result (its ``Done`` is on the way). Safe
        from anywhere, including the run's own event callbacks and tools:
        then it returns ``True`` at once (it could not wait for its own run)
        and the run stops at its next checkpoint, with ``Aborted``.
        Cancelling the caller stops the wait; an abort the agent had not
        read yet is withdrawn (as any call), one it had read goes on.
        """
        check_str("run_id", run_id)
        from_run = self._inside_own_run()
        result: bool = await self.call(AbortRun(run_id=run_id, from_run=from_run), timeout=None)
        return result

    async def steer(self, text: str) -> None:
        """Add ``text`` as a user message before the running loop's next model request.

        If the model was about to finish, the loop takes one more turn so the
        message is answered; if the run is already delivering its result, the
        text becomes a follow-up. Raises :class:`NotRunning` when no run is in
        progress, ``TypeError`` for a non-str. Cancelling the caller may leave
        the steer delivered or not.
        """
        check_str("text", text, optional=False)
        await self.call(Steer(text), timeout=None)

    async def follow_up(self, text: str) -> None:
        """Queue ``text`` as a prompt that runs after the current run (at once if idle).

        Follow-ups run before runs other callers queued: they continue the
        conversation. Its events reach ``handle_event`` and node subscribers;
        its answer lands in the history. Raises :class:`Busy` when
        ``max_follow_ups`` are already waiting, ``TypeError`` for a non-str.
        Cancelling the caller withdraws the follow-up if the agent had not
        read it yet; once read, it stays queued.
        """
        check_str("text", text, optional=False)
        await self.call(FollowUp(text), timeout=None)

    async def operation(self, name: str, input: Any = None, /, **options: Any) -> Any:
        """Run the operation ``name`` of this agent's class as a one-shot.

        It uses this agent's start options (model, keys, cwd...), overridden
        by ``options``, on a fresh transient agent: this agent's history is
        neither used nor changed. Its identity and session options (``id``,
        ``session_store``, ``session_store_key``) are not passed on, so the
        transient agent neither loads nor overwrites this agent's stored
        conversation. Raises :class:`UnknownOperation`. Cancelling the caller
        stops the transient agent.
        """
        status = self._status()
        merged = {k: v for k, v in status.start_options.items() if k not in _NOT_FOR_OPERATIONS}
        merged.update(options)
        return await run_operation(status.agent_class, name, input, **merged)

    async def approve(self, call_id: str, *, timeout: float | None = 5.0) -> None:
        """Let the tool call ``call_id`` (from :class:`~condukt.events.ApprovalRequested`) run.

        Returns once the agent has the decision (the call then runs in the
        waiting run). Raises :class:`UnknownApproval` if no call with that id
        waits (never asked, already decided, expired), ``TypeError`` for a
        non-str, :class:`~condukt.CallTimeout` after ``timeout``. Safe from
        any task, including a tool of the same agent. Cancelling the caller
        withdraws the decision if the agent had not read it yet.
        """
        check_str("call_id", call_id, optional=False)
        await self.call(Decide(call_id, True), timeout=check_seconds("timeout", timeout))

    async def deny(self, call_id: str, reason: str = "", *, timeout: float | None = 5.0) -> None:
        """Refuse the tool call ``call_id``: the tool never runs and the model gets ``reason`` as its result.

        ``reason`` is scrubbed like every text bound for the model. Raises
        what :meth:`approve` raises. Cancelling the caller withdraws the
        decision if the agent had not read it yet.
        """
        check_str("call_id", call_id, optional=False)
        check_str("reason", reason, optional=False)
        await self.call(Decide(call_id, False, reason), timeout=check_seconds("timeout", timeout))

    async def pending_approvals(self, *, timeout: float | None = 5.0) -> tuple[PendingApproval, ...]:
        """The tool calls waiting for :meth:`approve` / :meth:`deny`, oldest first.

        Each is a :class:`~condukt.sessions.PendingApproval` (call id, tool,
        scrubbed arguments, run id, request and expiry times). Answered at
        once, also during a run. Raises :class:`~condukt.CallTimeout` after
        ``timeout``. Cancelling the caller only stops the wait.
        """
        result: tuple[PendingApproval, ...] = await self.call(
            GetApprovals(), timeout=check_seconds("timeout", timeout)
        )
        return result

    async def respond(self, call_id: str, value: Any, *, timeout: float | None = 5.0) -> None:
        """Give the waiting deferred tool call ``call_id`` (from :class:`~condukt.events.InputRequested`) its result.

        ``value`` (a str, or JSON data) becomes the call's result, as the
        tool's ``result(value)`` makes it (:class:`~condukt.tools.AskUser`:
        the answer's text), scrubbed like every text bound for the model;
        the waiting run goes on. Returns once the agent has the answer; a
        restored call (after a restart) may be answered before the resumed
        run reaches it. Raises :class:`InputAlreadyAnswered` for a call
        answered before (the first answer stands),
        :class:`UnknownInputRequest` for an id no call of this agent waits
        with, ``TypeError`` for a non-str id,
        :class:`~condukt.CallTimeout` after ``timeout``. Safe from any
        task, including a tool of the same agent. Cancelling the caller
        withdraws the answer if the agent had not read it yet.
        """
        check_str("call_id", call_id, optional=False)
        await self.call(Respond(call_id, value), timeout=check_seconds("timeout", timeout))

    async def pending_inputs(self, *, timeout: float | None = 5.0) -> tuple[PendingInput, ...]:
        """The deferred tool calls waiting for :meth:`respond`, oldest first.

        Each is a :class:`~condukt.sessions.PendingInput` (call id, tool,
        question, scrubbed arguments, run id, request time). Answered at
        once, also during a run. Raises :class:`~condukt.CallTimeout` after
        ``timeout``. Cancelling the caller only stops the wait.
        """
        result: tuple[PendingInput, ...] = await self.call(GetInputs(), timeout=check_seconds("timeout", timeout))
        return result

    async def last_result(self, *, timeout: float | None = 5.0) -> RunResult | None:
        """How the last run that ended, ended (a :class:`RunResult`), or None if none has.

        This is where the result of a run nobody waits for lands: a run
        resumed after a restart, a follow-up. Its events (``AgentEnd``,
        ``Done``) also reach node subscribers. The agent keeps only the
        last one, in memory. Raises :class:`~condukt.CallTimeout` after
        ``timeout``. Cancelling the caller only stops the wait.
        """
        result: RunResult | None = await self.call(GetLastResult(), timeout=check_seconds("timeout", timeout))
        return result

    async def history(self, *, timeout: float | None = 5.0) -> tuple[Message, ...]:
        """The conversation: user, assistant and tool result messages, in order.

        Answered at once, also during a run (completed turns and the turn in
        flight). Raises :class:`~condukt.CallTimeout` after ``timeout``.
        Cancelling the caller only stops the wait: nothing changes.
        """
        result: tuple[Message, ...] = await self.call(GetHistory(), timeout=check_seconds("timeout", timeout))
        return result

    async def clear(self, *, timeout: float | None = None) -> None:
        """Forget the conversation (and its stored snapshot).

        Waits its turn behind the runs queued before it (at once when idle).
        Raises :class:`Busy` if ``max_queued_runs`` jobs already wait,
        :class:`~condukt.CallingSelf` from inside the agent's own run,
        :class:`~condukt.CallTimeout` after ``timeout``. Cancelling the
        caller while it waits may leave the clear queued.
        """
        timeout = check_seconds("timeout", timeout)
        refuse_inside_own_run(self, "clear()")
        await self.call(Clear(), timeout=timeout)

    async def compact(self, *, timeout: float | None = None) -> int:
        """Run the agent's compactor now; returns how many messages it removed.

        Without a ``compactor`` nothing changes. Waits its turn like
        :meth:`clear`; what a failing compactor raises is raised here (the
        history is left as it was). Cancelling the caller stops the wait;
        a compaction already queued or running still happens.
        """
        timeout = check_seconds("timeout", timeout)
        refuse_inside_own_run(self, "compact()")
        result: int = await self.call(Compact(), timeout=timeout)
        return result


async def submit_run(handle: AgentHandle, request: RunRequest) -> Any:
    """What :meth:`AgentHandle.run` does with its checked ``request``: send it, wait for the answer.

    For capabilities that start runs with run-scoped capabilities of their
    own (``request.capabilities``: a handoff's). Cancelling the caller
    aborts the run (or takes it out of the queue).
    """
    # A cancelled caller starts nothing: an idle agent would start the run
    # right here (``handle_call_now``), where the mailbox skips a withdrawn call.
    await trio.lowlevel.checkpoint_if_cancelled()
    try:
        return await start_call(handle, request, None)  # handle.call, a coroutine frame less
    except trio.Cancelled:
        # Whoever wanted the answer is gone: do not leave the run going.
        send_system(handle, CancelRun(request))
        raise


def refuse_inside_own_run(handle: AgentHandle, what: str) -> None:
    """Raise :class:`~condukt.CallingSelf` when the calling task is part of ``handle``'s own run.

    Such a caller waiting for the agent would wait for itself (a deadlock).
    """
    if handle._inside_own_run():
        raise CallingSelf(
            f"{what} from inside {handle!r}'s own run would wait for that run to end (a deadlock); "
            "use follow_up() to queue a prompt behind it"
        )


class EventStream:
    """The events of one streaming run; an async iterator ending after ``Done``."""

    def __init__(self, handle: AgentHandle, receive: trio.MemoryReceiveChannel[Event], run_id: str = "") -> None:
        self._handle = handle
        self._receive = receive
        #: The run's id (what ``agent.abort(run_id)`` takes).
        self.run_id = run_id
        self.done: Done | None = None
        #: The final text once the run completed.
        self.result: str | None = None
        #: The :class:`~condukt.events.Error` event if the run failed.
        self.error: Error | None = None

    def __aiter__(self) -> EventStream:
        return self

    async def __anext__(self) -> Event:
        if self.done is not None:
            raise StopAsyncIteration
        try:
            event = await self._receive.receive()
        except trio.EndOfChannel:
            # The run's channel closes before ``Done`` only when the run task
            # died with its process; the exit reason is set once it has exited.
            reason = await self._handle.wait()
            raise CallError(reason, f"agent exited before the run finished: {reason!r}") from None
        except trio.ClosedResourceError:
            reason = self._handle.exit_reason
            raise CallError(reason, f"agent exited before the run finished: {reason!r}") from None
        if type(event) is AgentEnd:
            self.result = event.text
        elif type(event) is Error:
            self.error = event
        elif type(event) is Done:
            self.done = event
        return event


class _StepsContext:
    """``agent.iter()``: a stream whose run carries a :class:`Stepping` capability."""

    def __init__(self, handle: AgentHandle, request: RunRequest) -> None:
        self._stepping = Stepping()
        request.capabilities = (*request.capabilities, self._stepping)
        self._stream = _StreamContext(handle, request)
        self._handle = handle

    async def __aenter__(self) -> Steps:
        events = await self._stream.__aenter__()
        return Steps(self._handle, events, self._stepping)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self._stream.__aexit__(exc_type, exc, tb)
        stepping = self._stepping
        if stepping.failure is None and not stepping.ended():
            # Left before the run started (it was queued): it never runs, and never settles.
            stepping.failure = Aborted("run aborted")


class _StreamContext:
    def __init__(self, handle: AgentHandle, request: RunRequest) -> None:
        self._handle = handle
        self._request = request
        self._stream: EventStream | None = None

    async def __aenter__(self) -> EventStream:
        send, receive = trio.open_memory_channel[Event](STREAM_BUFFER)
        self._request.sink = send
        try:
            run_id: str = await self._handle.call(self._request, timeout=None)
        except BaseException:
            send.close()
            receive.close()
            raise
        self._stream = EventStream(self._handle, receive, run_id)
        return self._stream

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        stream = self._stream
        assert stream is not None
        stream._receive.close()
        if stream.done is None and self._handle.alive:
            # The reader left early: the run must not go on without it.
            with trio.CancelScope(shield=True):
                try:
                    await self._handle.call(AbortRun(self._request), timeout=None)
                except ConduktError:
                    pass


class AttachedStream:
    """The events of one detached run, read by one reader (``agent.attach``); ends after ``Done``."""

    def __init__(self, handle: AgentHandle, record: Any, after: int) -> None:
        self._handle = handle
        self._record = record
        #: The run's id.
        self.run_id = record.run_id
        #: The index of the last event this reader got (``after`` before the first).
        self.index = after
        self.done: Done | None = None
        #: The final text once the run completed.
        self.result: str | None = None
        #: The :class:`~condukt.events.Error` event if the run failed.
        self.error: Error | None = None

    def __aiter__(self) -> AttachedStream:
        return self

    async def __anext__(self) -> Event:
        if self.done is not None:
            raise StopAsyncIteration
        record = self._record
        while True:
            event: Event | None = record.event(self.index + 1)  # EventsEvicted for a reader that fell too far behind
            if event is not None:
                break
            if record.lost is not None:
                reason = self._handle.exit_reason
                raise CallError(reason, f"agent exited before run {self.run_id} finished: {reason!r}")
            await record.wait()
        self.index += 1
        if type(event) is AgentEnd:
            self.result = event.text
        elif type(event) is Error:
            self.error = event
        elif type(event) is Done:
            self.done = event
        return event


class _AttachContext:
    def __init__(self, handle: AgentHandle, run_id: str, after: int) -> None:
        self._handle = handle
        self._run_id = run_id
        self._after = after

    async def __aenter__(self) -> AttachedStream:
        record = await self._handle._record(self._run_id)
        record.event(self._after + 1)  # EventsEvicted at once when they are gone
        return AttachedStream(self._handle, record, self._after)

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        return None  # detaching never affects the run
