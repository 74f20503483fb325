"""The :class:`AgentHandle`: how callers talk to an agent process."""

from __future__ import annotations

import os
from collections.abc import Awaitable, Callable, Iterable
from pathlib import Path
from types import TracebackType
from typing import TYPE_CHECKING, Any

import trio

from ..events import AgentEnd, Done, Error, Event
from ..messages import ImageBlock, Message
from ..otp import CallError, ConduktError, Handle, NoProc
from ..otp.lowlevel import send_system, server_of
from ..tools.read import IMAGE_TYPES
from ._requests import AbortRun, CancelRun, Clear, Compact, FollowUp, GetHistory, RunRequest, Steer
from ._structured import render_input

if TYPE_CHECKING:
    from ._agent import Agent

__all__ = ["AgentHandle", "EventStream", "STREAM_BUFFER", "stop_quietly"]

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


def _request(
    prompt: str,
    timeout: float | None,
    max_turns: int | None,
    images: Any,
    output: Any,
    input: Any,
    input_schema: Any,
) -> RunRequest:
    if not isinstance(prompt, str):
        raise TypeError(f"prompt must be a str, got {type(prompt).__name__}")
    if input is not None or input_schema is not None:
        rendered = render_input(input, input_schema)
        prompt = f"{prompt}\n\n{rendered}" if prompt else rendered
    return RunRequest(
        prompt, images=_load_images(images), timeout=timeout, max_turns=max_turns, output=output
    )


class AgentHandle(Handle):
    """The handle of an agent process: run prompts, stream events, steer, abort.

    Every method is a message to the agent process, so a handle may be used
    from any task, including a tool running inside that same agent
    (``context.agent``): the agent's mailbox keeps being served while a run
    is in progress.
    """

    __slots__ = ()

    def _agent(self) -> Agent:
        server = server_of(self)
        if server is None:
            raise NoProc(f"{self!r} is not alive")
        return server  # type: ignore[return-value]

    @property
    def session_id(self) -> str:
        """The id of the agent's conversation (a UUIDv7 unless given as ``id=``)."""
        return self._agent().session_id

    @property
    def running(self) -> bool:
        """Whether a run is in progress."""
        return self._agent()._active is not None

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

        Raises :class:`Busy` if a run is in progress, :class:`Aborted` if
        ``abort()`` stopped it, :class:`RunTimeout` after ``timeout`` seconds,
        a :class:`~condukt.providers.ModelError` if the model failed,
        :class:`InvalidOutput` / :class:`NoResultSubmitted` for a structured
        run without a valid result, and :class:`~condukt.CallError` if the
        agent crashed. Cancelling the
        caller aborts the run. In every case history holds only completed
        turns.
        """
        request = _request(prompt, timeout, max_turns, images, output, input, input_schema)
        request.on_event = on_event
        try:
            return await self.call(request, timeout=None)
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
    ) -> _StreamContext:
        """Run ``prompt`` and iterate over its events as they happen.

        ::

            async with agent.stream("Review the last commit") as events:
                async for event in events:
                    ...

        The iteration ends after :class:`~condukt.events.Done`; then
        ``events.result`` holds the final text (or ``events.error`` the
        failure). Leaving the block early aborts the run. Raises :class:`Busy`
        on entry if a run is in progress, and :class:`~condukt.CallError`
        while iterating if the agent crashed.
        """
        request = _request(prompt, timeout, max_turns, images, output, input, input_schema)
        return _StreamContext(self, request)

    async def abort(self) -> bool:
        """Stop the running turn for real and wait until it has stopped.

        In-flight model requests and tool calls are cancelled (tool
        subprocesses killed), queued follow-ups are dropped, the run's caller
        gets :class:`Aborted`. Returns ``False`` if nothing was running.
        """
        result: bool = await self.call(AbortRun(), timeout=None)
        return result

    async def steer(self, text: str) -> None:
        """Add ``text`` as a user message before the running loop's next model request.

        If the model was about to finish, the loop takes one more turn so the
        message is answered. Raises :class:`NotRunning` when idle.
        """
        await self.call(Steer(text))

    async def follow_up(self, text: str) -> None:
        """Queue ``text`` as a prompt that runs after the current run (at once if idle).

        Its events reach ``handle_event`` and node subscribers; its answer
        lands in the history.
        """
        await self.call(FollowUp(text))

    async def operation(self, name: str, input: Any = None, /, **options: Any) -> Any:
        """Run the operation ``name`` of this agent's class as a one-shot.

        It uses this agent's start options (model, keys, cwd...), overridden
        by ``options``, on a fresh transient agent: this agent's history is
        neither used nor changed. Its identity and session options (``id``,
        ``session_store``, ``session_store_key``) are not passed on, so the
        transient agent neither loads nor overwrites this agent's stored
        conversation. Raises :class:`UnknownOperation`.
        """
        from ._operations import run_operation

        agent = self._agent()
        merged = {k: v for k, v in agent.options.items() if k not in _NOT_FOR_OPERATIONS}
        merged.update(options)
        return await run_operation(type(agent), name, input, **merged)

    async def history(self) -> tuple[Message, ...]:
        """The conversation: user, assistant and tool result messages, in order."""
        result: tuple[Message, ...] = await self.call(GetHistory())
        return result

    async def clear(self) -> None:
        """Forget the conversation (and its stored snapshot). Raises :class:`Busy` during a run."""
        await self.call(Clear())

    async def compact(self) -> int:
        """Run the agent's compactor now; returns how many messages it removed.

        Without a ``compactor`` nothing changes. Raises :class:`Busy` during a run.
        """
        result: int = await self.call(Compact())
        return result


async def stop_quietly(handle: Handle, reason: str = "normal") -> None:
    """Stop ``handle`` if it still runs, shielded from cancellation, never raising.

    For cleanup in ``finally`` blocks: transient agents (one-shots,
    sub-agents) must be gone however their caller leaves.
    """
    with trio.CancelScope(shield=True):
        if handle.alive:
            try:
                await handle.stop(reason)
            except ConduktError:
                pass  # it exited on its own in the meantime


class EventStream:
    """The events of one streaming run; an async iterator ending after ``Done``."""

    def __init__(self, handle: AgentHandle, receive: trio.MemoryReceiveChannel[Event]) -> None:
        self._handle = handle
        self._receive = receive
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
            await self._handle.call(self._request, timeout=None)
        except BaseException:
            send.close()
            receive.close()
            raise
        self._stream = EventStream(self._handle, receive)
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
