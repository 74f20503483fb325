"""Running a turn's tool calls: concurrently, each under its timeout, never taking the agent down.

A tool's failure is the model's business, not the process's: whatever a
tool raises (``ToolError``, any exception, ``SystemExit`` from argparse or
click, an exception whose ``__str__`` raises) becomes an error result the
model sees, and the run goes on. Only trio's cancellation (an abort, the
run's timeout, the process stopping) and ``KeyboardInterrupt`` pass through.
"""

from __future__ import annotations

import logging
import traceback
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import trio

from ..events import Event, ToolCallEnd, ToolCallStart, ToolProgress
from ..messages import DocumentBlock, ImageBlock, TextBlock, ToolCall, ToolResultMessage
from ..tools import AGENT_DEFAULT, DEFAULT_SANDBOX, ToolContext, ToolError, render_result
from ._context import AgentContext
from ._run import Run

__all__ = ["describe", "run_tool_calls", "timeout_of"]

logger = logging.getLogger("condukt.agent")

Content = tuple[TextBlock | ImageBlock | DocumentBlock, ...]
_UNSET: Any = object()
#: ``_Calls.started`` of a turn nobody watches (never written to).
_NOT_RECORDED: dict[int, float] = {}


def describe(exc: BaseException) -> str:
    """``exc`` as text for a message, even when its ``__str__`` raises."""
    try:
        text = str(exc)
    except BaseException:  # a broken __str__ must not break the report of the failure
        return f"<unprintable {type(exc).__name__}>"
    return text


def _passes_through(exc: BaseException) -> bool:
    """Whether ``exc`` (or a leaf of its group) is cancellation or Ctrl-C, which a tool must not swallow."""
    if isinstance(exc, BaseExceptionGroup):
        return exc.split((trio.Cancelled, KeyboardInterrupt))[0] is not None
    return isinstance(exc, (trio.Cancelled, KeyboardInterrupt))


def _error(message: str) -> Content:
    return (TextBlock(f"Error: {message}"),)


def _display(content: Content) -> str:
    """A tool result as event text: images and documents shown as a placeholder."""
    if len(content) == 1 and type(content[0]) is TextBlock:
        return content[0].text
    return "".join(b.text if type(b) is TextBlock else _placeholder(b) for b in content)


def _placeholder(block: ImageBlock | DocumentBlock) -> str:
    kind = "image" if type(block) is ImageBlock else "document"
    return f"[{kind} {block.media_type}, {len(block.data) * 3 // 4} bytes]"


def timeout_of(ctx: AgentContext, call: ToolCall) -> float | None:
    """The timeout of ``call``: its tool's own, else the agent's ``tool_timeout``."""
    tool = ctx.tools_by_name.get(call.name)
    if tool is None or tool.timeout is AGENT_DEFAULT:
        return ctx.config.tool_timeout
    return tool.timeout  # type: ignore[return-value]


def run_tool_calls(run: Run, calls: Sequence[ToolCall]) -> Awaitable[list[ToolResultMessage]]:
    """Run a turn's calls (await the result); their results in call order.

    Capabilities may answer calls themselves first (in call order: a
    structured run's ``submit_result`` is judged so). Calls that start
    together with the same timeout share one deadline (one nursery's cancel
    scope) instead of a cancel scope each: the deadlines are identical, and
    a scope per call is the dominant cost of a wide fan-out. Not a
    coroutine itself: the caller awaits the runner's directly (a coroutine
    less per turn).
    """
    runner = run.tool_calls = _Calls(run, calls)
    return runner.all()


class _Calls:
    """The calls of one turn and their results."""

    __slots__ = ("calls", "context_tail", "ctx", "notify", "results", "run", "started")

    def __init__(self, run: Run, calls: Sequence[ToolCall]) -> None:
        ctx = self.ctx = run.context
        self.run = run
        self.calls = calls
        self.results: list[ToolResultMessage | None] = [None] * len(calls)
        # Per-call events and hooks cost a little per call: only when someone listens.
        notify = self.notify = run.listened() or run.hooks.watches_tools
        #: When each call started (only recorded when ``notify``; else a shared empty dict).
        self.started: dict[int, float] = {} if notify else _NOT_RECORDED
        config = ctx.config
        # What every call's ToolContext shares after its call id, looked up once per turn.
        emit = run.emit if not ctx.scrubs else _ScrubbingEmit(ctx, run)
        self.context_tail = (config.confine_to_cwd, ctx.secret_env, emit, config.sandbox or DEFAULT_SANDBOX)

    async def all(self) -> list[ToolResultMessage]:
        try:
            hooks = self.run.hooks
            if (
                len(self.calls) == 1
                and not hooks.intercept_tool_call
                and not hooks.gate_tool_call
                and not hooks.wrap_tool_call
            ):
                # The common turn: one call, nothing to group.
                await self._one(0, timeout_of(self.ctx, self.calls[0]))
            else:
                await self._all()
        finally:
            self.run.tool_calls = None
        return self.results  # type: ignore[return-value]  # every slot is filled

    async def _all(self) -> None:
        ctx, run, calls = self.ctx, self.run, self.calls
        groups: dict[float | None, list[int]] = {}
        intercepts = run.hooks.intercept_tool_call
        timeouts: dict[str, float | None] = {}
        for index, call in enumerate(calls):
            answer = None
            for intercept in intercepts:
                answer = intercept(run, call)
                if answer is not None:
                    break
            if answer is not None:
                # Scrubbed like a tool's own result: it goes to the history and the model.
                if self.notify:
                    await self._started(index)
                await self._finished(index, answer.content, answer.is_error, None)
                continue
            timeout = timeouts.get(call.name, _UNSET)
            if timeout is _UNSET:
                timeout = timeouts[call.name] = timeout_of(ctx, call)
                groups.setdefault(timeout, []).append(index)
            else:
                groups[timeout].append(index)
        if (run.hooks.gate_tool_call or run.hooks.wrap_tool_call) and groups:
            # Gated calls may wait (an approval), wrapped ones too (a journal
            # write): each in a task of its own, so the others go on; its
            # timeout starts once the gates and wrappers let it run.
            async with trio.open_nursery() as nursery:
                for timeout, indices in groups.items():
                    for index in indices:
                        nursery.start_soon(self._gated, index, timeout)
        elif len(groups) == 1:
            ((timeout, indices),) = groups.items()
            if len(indices) == 1:
                await self._one(indices[0], timeout)
            else:
                await self._group(timeout, indices)
        elif groups:
            async with trio.open_nursery() as nursery:
                for timeout, indices in groups.items():
                    nursery.start_soon(self._group, timeout, indices)

    async def _gated(self, index: int, timeout: float | None) -> None:
        """One call behind the ``gate_tool_call`` hooks (answered by one, or run), inside the ``wrap_tool_call``s."""
        run, call = self.run, self.calls[index]
        for gate in run.hooks.gate_tool_call:
            answer = await gate(run, call)
            if answer is not None:
                if self.notify:
                    await self._started(index)
                await self._finished(index, answer.content, answer.is_error, None)
                return
        wrappers = run.hooks.wrap_tool_call
        if not wrappers:
            await self._one(index, timeout)
            return
        invoked = False

        async def run_once() -> ToolResultMessage:
            nonlocal invoked
            if invoked:
                raise RuntimeError(f"wrap_tool_call invoked call {call.id!r} twice")
            invoked = True
            await self._one(index, timeout)
            result = self.results[index]
            assert result is not None  # _one fills its slot or raises
            return result

        invoke: Callable[[], Awaitable[ToolResultMessage]] = run_once
        for wrap in reversed(wrappers):
            invoke = _bind_tool_wrapper(wrap, run, call, invoke)
        self.results[index] = await invoke()

    async def _started(self, index: int) -> None:
        """Only when ``notify``: record the start, tell the hooks and listeners."""
        self.started[index] = trio.current_time()
        call = self.calls[index]
        run = self.run
        await run.emit(ToolCallStart(call.id, call.name, call.arguments))
        for hook in run.hooks.tool_started:
            hook(run, call)

    async def _finished(self, index: int, content: Content, is_error: bool, crash: BaseException | None) -> None:
        result = self._record(index, content, is_error)
        if self.notify:
            await self._notify_end(index, result, crash)

    def _record(self, index: int, content: Content, is_error: bool) -> ToolResultMessage:
        call = self.calls[index]
        ctx = self.ctx
        if ctx.scrubs:
            content = ctx.scrub_blocks(content)
        result = ToolResultMessage(call.id, call.name, content, is_error)
        self.results[index] = result
        return result

    async def _notify_end(self, index: int, result: ToolResultMessage, crash: BaseException | None) -> None:
        call = self.calls[index]
        run = self.run
        duration = trio.current_time() - self.started[index]
        for hook in run.hooks.tool_finished:
            hook(run, call, result, crash, duration)
        await run.emit(ToolCallEnd(call.id, call.name, _display(result.content), result.is_error, duration))

    def _interrupted(self, index: int, exc: BaseException) -> None:
        """A call cut off by cancellation (abort, run timeout): tell the hooks (synchronously: we are cancelled)."""
        run = self.run
        if self.notify and index in self.started:
            duration = trio.current_time() - self.started[index]
            for hook in run.hooks.tool_finished:
                hook(run, self.calls[index], None, exc, duration)

    async def _call(self, index: int) -> None:
        """One call, start to end, except its timeout: the tool runs, its result is recorded.

        One coroutine per call (the cost of a wide fan-out is mostly per-call
        bookkeeping): the checks, the context and the exception handling are
        inline rather than in helpers of their own.
        """
        notify = self.notify
        if notify:
            await self._started(index)
        ctx = self.ctx
        call = self.calls[index]
        crash: BaseException | None = None
        tool = ctx.tools_by_name.get(call.name)
        if tool is None:
            known = ", ".join(sorted(ctx.tools_by_name)) or "none"
            content, is_error = _error(f"unknown tool {call.name!r}. Available tools: {known}"), True
        elif (problem := tool.validate(call.arguments)) is not None:
            content, is_error = _error(f"invalid arguments for {call.name}: {problem}"), True
        else:
            # Positional, in ToolContext's field order: agent, cwd, opts, session_id,
            # tool_call_id, then confine, secrets, emit, sandbox (shared by the turn).
            context = ToolContext(ctx.handle, ctx.cwd, tool.opts, ctx.id, call.id, *self.context_tail)
            try:
                value = await tool.call(call.arguments.copy(), context)
                content, is_error = (TextBlock(value),) if type(value) is str else render_result(value), False
            except ToolError as exc:
                content, is_error = _error(describe(exc)), True
            except BaseException as exc:
                if _passes_through(exc):
                    raise
                # Scrubbed: the traceback carries the exception's message, which may hold a secret.
                trace = "".join(traceback.format_exception(exc))
                logger.warning("tool %r raised:\n%s", call.name, ctx.scrub(trace))
                content, is_error, crash = _error(f"{type(exc).__name__}: {describe(exc)}"), True, exc
        if ctx.scrubs:
            content = ctx.scrub_blocks(content)
        result = self.results[index] = ToolResultMessage(call.id, call.name, content, is_error)
        if notify:
            await self._notify_end(index, result, crash)

    async def _timed_out(self, index: int, timeout: float | None) -> None:
        if self.notify and index not in self.started:
            await self._started(index)
        call = self.calls[index]
        await self._finished(index, _error(f"tool {call.name!r} timed out after {timeout:g} seconds"), True, None)

    async def _one(self, index: int, timeout: float | None) -> None:
        try:
            # No scope of its own when the run's deadline comes first: the
            # tool's could never fire, and a scope is most of a call's cost.
            # Usually known without reading the clock: the run started before
            # now, so a timeout reaching past the run's deadline from its start does.
            run = self.run
            run_deadline = run.scope.deadline
            if timeout is None or run.started_at + timeout >= run_deadline:
                await self._call(index)
            else:
                deadline = trio.current_time() + timeout
                if deadline >= run_deadline:
                    await self._call(index)
                else:
                    with trio.CancelScope(deadline=deadline):
                        await self._call(index)
        except BaseException as exc:
            self._interrupted(index, exc)
            raise
        if self.results[index] is None:
            await self._timed_out(index, timeout)

    async def _group(self, timeout: float | None, indices: list[int]) -> None:
        try:
            async with trio.open_nursery() as group:
                if timeout is not None:
                    group.cancel_scope.deadline = trio.current_time() + timeout
                start, call = group.start_soon, self._call
                for index in indices:
                    start(call, index)
        except BaseException as exc:  # aborted: close what started and did not finish
            leaf = exc
            while isinstance(leaf, BaseExceptionGroup) and len(leaf.exceptions) == 1:
                leaf = leaf.exceptions[0]
            for index in indices:
                if self.results[index] is None:
                    self._interrupted(index, leaf)
            raise
        for index in indices:
            if self.results[index] is None:  # cut off by the shared deadline
                await self._timed_out(index, timeout)


def _bind_tool_wrapper(
    wrap: Callable[..., Awaitable[ToolResultMessage]],
    run: Run,
    call: ToolCall,
    inner: Callable[[], Awaitable[ToolResultMessage]],
) -> Callable[[], Awaitable[ToolResultMessage]]:
    async def invoke() -> ToolResultMessage:
        return await wrap(run, call, inner)

    return invoke


class _ScrubbingEmit:
    """``context.emit`` of an agent that scrubs: a tool's :class:`ToolProgress` text is scrubbed like its result.

    (Other events a tool emits, a sub-agent's, were scrubbed by the agent that made them.)
    """

    __slots__ = ("ctx", "run")

    def __init__(self, ctx: AgentContext, run: Run) -> None:
        self.ctx = ctx
        self.run = run

    def __call__(self, event: Event) -> Awaitable[None]:
        if type(event) is ToolProgress and event.message:
            event = ToolProgress(event.call_id, self.ctx.scrub(event.message), event.progress, event.total)
        return self.run.emit(event)
