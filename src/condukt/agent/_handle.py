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
from ..otp import CallError, CallingSelf, ConduktError, Handle, NoProc
from ..otp.lowlevel import send_system, server_of, start_call
from ..providers import ModelSettings
from ..providers.lowlevel import model_settings as check_model_settings
from ..schema import Schema
from ..tools.read import IMAGE_TYPES
from ._info import AgentInfo
from ._input import render_input
from ._operations import run_operation
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
from ._result import RunResult
from ._server import AgentStatus, status_of
from ._validate import check_callable, check_count, check_seconds, check_str

if TYPE_CHECKING:
    from ..sessions import PendingApproval

__all__ = ["STREAM_BUFFER", "AgentHandle", "EventStream", "refuse_inside_own_run", "run_request"]

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
        """The lifecycle state: ``"idle"``, ``"running"``, ``"finishing"`` or ``"maintaining"``."""
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
