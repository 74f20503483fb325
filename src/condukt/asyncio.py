"""condukt from asyncio code: trio runs as a guest on the running asyncio loop.

::

    import asyncio
    import condukt.asyncio as ca

    async def main():
        async with ca.open_node() as node:           # trio runs as a guest on this loop
            agent = await node.spawn(MyAgent, model=...)
            print(await agent.run("hi"))
            async with agent.stream("go") as events:
                async for event in events: ...
        print(await ca.run("one-shot", model=..., tools=[...]))

    asyncio.run(main())

One trio guest run (:func:`trio.lowlevel.start_guest_run`) per asyncio loop
is shared by every node opened on it, and ends when the last one closes.
The proxies returned here (:class:`Node`, :class:`Handle`, :class:`Stream`)
have the names of the trio API, and **every method is awaitable** on
asyncio, the trio API's sync ones included (they must run inside trio's
run); properties are read directly.

Cancellation crosses both ways. Cancelling the asyncio task that awaits a
call (``asyncio.wait_for`` or ``asyncio.timeout`` running out, a client
disconnecting) cancels the trio call, and the await returns once that has
ended; for ``run`` and ``stream`` that means the agent aborts the run (its
tool subprocesses are killed), exactly as when a trio caller is cancelled.
An exception on the trio side arrives as the same exception on asyncio;
``trio.Cancelled`` never does.

Why guest mode and not a thread: calls run on the loop's thread (no
locks), and trio's cancellation maps onto asyncio's task cancellation. An
idle guest run waits for I/O in a worker thread, so waking it costs two
thread hand-offs; trio stays on the loop for ``LINGER_TICKS`` ticks after
each answer, so that a call made right away does not have to wake it, and
a call made while trio is runnable runs trio's pending ticks itself, on
the spot (up to ``INLINE_TICKS``), so that it is often answered without
the awaiting task being suspended at all. Calls start right in the
awaiting task, between trio's ticks; ``agent.run`` with a callback
(:func:`condukt.agent.lowlevel.start_run`), without a trio task of its
own. Where guest mode cannot be used (a loop per request),
``open_node(thread=True)`` runs trio in a thread of its own instead, with
the same API and cancellation; its nodes serve every loop of the process.
The bridge is hand-written because no well-kept package
exposes trio objects to asyncio this way (trio-asyncio goes the other way,
asyncio code inside trio, and is in maintenance mode; anyio targets code
written for both, not a trio library called from asyncio).
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import contextvars
import functools
import inspect
import random
import threading
import time
import types
import weakref
from collections.abc import AsyncIterator, Awaitable, Callable, Generator
from types import TracebackType
from typing import Any

import attrs
import outcome
import trio

from . import agent as _agent_layer
from . import otp
from .agent.lowlevel import start_run
from .otp import lowlevel as otp_lowlevel

__all__ = ["Handle", "Node", "Stream", "call", "current_node", "open_node", "run"]

#: Events a stream holds for the asyncio side before the run waits for it to read.
STREAM_BUFFER = 64

#: The node of the innermost enclosing ``open_node`` block of this asyncio task.
_current: contextvars.ContextVar[Node | None] = contextvars.ContextVar("condukt_asyncio_node", default=None)


def _set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def _set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


class _Call:
    """One call from asyncio into trio: what to run, where its answer goes, how to cancel it.

    A call with ``begin`` is started without a task of its own
    (:meth:`_Guest.begin`): ``begin(call)`` starts it in trio with the call
    itself as the callback for its answer, and returns what stops it.
    """

    __slots__ = (
        "args", "begin", "cancelled", "error", "finished", "fn", "future", "host", "kwargs", "loop", "scope", "settled",
        "stop", "value",
    )  # fmt: skip

    def __init__(
        self,
        loop: asyncio.AbstractEventLoop,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        host: _Guest,
        begin: Callable[[_Call], Callable[[], None] | None] | None = None,
    ) -> None:
        self.loop = loop
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.host = host
        self.begin = begin
        self.future: asyncio.Future[Any] | None = None  # made only when the caller has to wait (:meth:`_Guest.wait`)
        self.value: Any = None  # the answer, when it came before anyone waited
        self.error: BaseException | None = None
        self.scope: trio.CancelScope | None = None  # the running task's scope, while the call runs
        self.stop: Callable[[], None] | None = None  # what stops a call started by ``begin``, while it runs
        self.cancelled = False  # the asyncio caller left: the trio side is to stop
        self.finished = False  # the trio side has ended (set on the asyncio loop's thread)
        self.settled: asyncio.Future[None] | None = None  # made only when a cancelled caller waits for the end

    def done(self) -> bool:
        """Whether the trio side has ended (its answer is in, or it was stopped)."""
        return self.finished

    def result(self) -> Any:
        """The answer of a call that ended before anyone waited: its value, or its error raised."""
        if self.error is not None:
            raise self.error
        return self.value

    def __call__(self, result: outcome.Outcome[Any]) -> None:
        """In trio: the answer of a call started by ``begin``."""
        self.host.answered(self, result)

    def cancel(self) -> None:
        """In trio: stop the call if it runs (one that has not started never will; one that ended is left)."""
        if self.scope is not None:
            self.scope.cancel()
        elif self.stop is not None:
            stop, self.stop = self.stop, None
            stop()  # its answer will not come: the call ends here
            self.host.deliver(self.loop, _finish, self, None, None)


def _finish(call: _Call, value: Any, error: BaseException | None) -> None:
    """On the asyncio loop: the trio side of ``call`` ended with ``value`` or ``error``."""
    call.finished = True
    future = call.future
    if future is None:  # answered before the caller waited (on the spot, in :meth:`_Guest.start`)
        call.value = value
        call.error = error
    elif not future.done():
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)
    if call.settled is not None and not call.settled.done():
        call.settled.set_result(None)


class _InContext:
    """Await ``awaitable`` with each of its steps run in ``context``.

    A task that lingers runs the next call itself (no new task, no extra
    tick); this keeps that call's context variables its own, as if it had
    a task of its own.
    """

    __slots__ = ("awaitable", "context")

    def __init__(self, awaitable: Awaitable[Any], context: contextvars.Context) -> None:
        self.awaitable = awaitable
        self.context = context

    def __await__(self) -> Generator[Any, Any, Any]:
        steps = self.awaitable.__await__()
        run = self.context.run
        send: Any = None
        error: BaseException | None = None
        while True:
            try:
                yielded = run(steps.send, send) if error is None else run(steps.throw, error)
            except StopIteration as stop:
                return stop.value
            try:
                send = yield yielded
                error = None
            except BaseException as exc:  # noqa: BLE001  # handed on to the awaitable, as await does
                send, error = None, exc


#: Guest ticks trio stays runnable after it answered a call, so that a next call
#: made right away enters trio on the loop's thread instead of waking trio's
#: I/O-wait thread (:class:`_LingerClock` after an agent run's answer, the
#: answering task itself after other calls, :meth:`_Guest.linger`). A call awaited directly (or
#: under ``asyncio.timeout``) comes back within 1 tick; through a task of its
#: own (``create_task``, ``gather``, Python 3.11's ``wait_for``) within 3-4.
#: Each tick nobody uses costs about 10 µs of CPU; 0 turns lingering off.
LINGER_TICKS = 4

#: Guest ticks a call may run on the spot, in the awaiting asyncio task, while
#: trio is runnable (see :meth:`_Guest.call`): enough for an agent run on an
#: in-process model (4), and a bound on how long the loop's other callbacks wait.
INLINE_TICKS = 16

#: Calls that may be answered on the spot before the loop gets a turn: a task
#: that only makes such calls still lets the loop's other callbacks run every
#: ``INLINE_CALLS`` calls.
INLINE_CALLS = 32


class _LingerClock(trio.abc.Clock):
    """trio's clock for a guest run: the system clock, except for a few idle ticks after an answer.

    While ``idle_ticks`` is above zero, a wait for I/O with nothing runnable
    does not sleep (:meth:`deadline_to_sleep_time` answers 0 and counts one
    off). trio then polls for I/O and queues its next tick on the asyncio
    loop instead of waiting in its I/O thread, so a call made right after an
    answer (the next ``await`` of a sequential loop) enters trio with no
    thread hand-off, and the tick it lands in runs that call's work. Waking
    a task kept runnable for those ticks did the same with a task step per
    answer, about 6% of an agent run's instructions (390.6k against 368.0k, callgrind,
    benchmarks/embedding.py's workload, docs/benchmarks.md).
    """

    __slots__ = ("idle_ticks", "offset")

    def __init__(self) -> None:
        self.idle_ticks = 0
        # Like trio's own clock, a large random offset: trio time is not time.perf_counter().
        self.offset = 10_000.0 + random.uniform(0, 200_000)

    def start_clock(self) -> None:
        """Nothing to start: the clock is ``time.perf_counter()`` plus an offset."""

    def current_time(self) -> float:
        """trio's current time."""
        return self.offset + time.perf_counter()

    def deadline_to_sleep_time(self, deadline: float) -> float:
        """Seconds trio may sleep waiting for I/O until ``deadline``: 0 while idle ticks are left."""
        if self.idle_ticks > 0:
            self.idle_ticks -= 1
            return 0.0
        return deadline - self.current_time()


class _Guest:
    """One trio guest run on one asyncio loop, shared by the nodes opened on it.

    Calls start on the spot, from the loop's thread between trio's ticks
    (trio's run state is this thread's while the guest run lives): an agent
    run with a callback (:meth:`start`), other calls as a task each
    (:meth:`submit`, :meth:`drain`), or in the task that lingers after
    answering the call before. An idle guest run waits for I/O in a worker
    thread, so waking it costs two thread hand-offs (asyncio to that thread,
    which then schedules trio's next tick back on the loop). After an answer
    trio therefore stays on the loop for ``LINGER_TICKS`` ticks (the
    answering task lingers, or :class:`_LingerClock` keeps trio from
    sleeping): a call issued meanwhile (the next call of a sequential loop,
    a burst) enters trio with no wake-up at all. Measured in
    ``benchmarks/embedding.py`` (docs/benchmarks.md): the hand-offs cost
    more CPU than a whole agent run.
    """

    #: Whether trio runs in a thread of its own (:class:`_ThreadHost`) rather than as a guest.
    threaded = False
    #: Whether a task that answered a call stays runnable for a few ticks (:meth:`body`).
    lingers = True
    #: Whether a call that needs no task starts from the loop's thread, between guest ticks (:meth:`start`).
    direct = True

    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, _Guest] = weakref.WeakKeyDictionary()

    def __init__(self, loop: asyncio.AbstractEventLoop) -> None:
        self.loop = loop
        self.thread_id = threading.get_ident()  # the loop's thread
        self.call_loop: asyncio.AbstractEventLoop | None = loop  # where calls are answered (None: the caller's)
        self.users = 0
        self.closing = False  # the last user left: the run is ending
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self.started: asyncio.Future[None] = loop.create_future()
        self.finished: asyncio.Future[None] = loop.create_future()
        self.pending: collections.deque[_Call] = collections.deque()
        self.kicked = False  # a drain is queued with trio's token
        self.hot = False  # a task lingers in trio and drains ``pending`` on its own
        self.linger_left = 0
        self.context: contextvars.Context | None = None  # the context each call's run starts from
        self.tick: Callable[[], object] | None = None  # trio's next guest tick, while it waits on the loop
        self.tick_queued = False  # a :meth:`run_tick` is queued on the loop
        self.ticking = False  # a guest tick is on the stack
        self.inline_left = INLINE_CALLS
        self.clock = _LingerClock()

    @classmethod
    async def acquire(cls) -> _Guest:
        loop = asyncio.get_running_loop()
        guest = cls._by_loop.get(loop)
        while guest is not None and guest.closing and not guest.finished.done():
            # Its last user left and its run is ending: it takes no more calls, and a thread has one trio run at a time.
            await asyncio.wait((guest.finished,))
            guest = cls._by_loop.get(loop)
        if guest is None or guest.finished.done():
            guest = cls._by_loop[loop] = cls(loop)
            trio.lowlevel.start_guest_run(
                guest._main,
                run_sync_soon_threadsafe=loop.call_soon_threadsafe,
                run_sync_soon_not_threadsafe=guest.schedule_tick,
                done_callback=guest._done,
                host_uses_signal_set_wakeup_fd=True,
                clock=guest.clock,
            )
        guest.users += 1
        try:
            await asyncio.shield(guest.started)
        except BaseException:
            guest.users -= 1
            raise
        return guest

    async def release(self) -> None:
        self.users -= 1
        if self.users == 0 and self.token is not None and self.nursery is not None:
            self.closing = True  # a later acquire waits for the end, then starts a new run
            nursery = self.nursery
            self.token.run_sync_soon(nursery.cancel_scope.cancel)
            await asyncio.shield(self.finished)

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        self.context = contextvars.copy_context()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.started.set_result(None)
            await trio.sleep_forever()

    def _done(self, result: outcome.Outcome[None]) -> None:
        if self.finished.done():
            return
        if isinstance(result, outcome.Error) and not isinstance(result.error, trio.Cancelled):
            self.finished.set_exception(result.error)
            if not self.started.done():
                self.started.set_exception(result.error)
        else:
            self.finished.set_result(None)
            if not self.started.done():
                self.started.set_exception(RuntimeError("condukt's trio run ended before it started"))

    def schedule_tick(self, tick: Callable[[], object]) -> None:
        """trio's hook for its next guest tick: keep it, and queue one :meth:`run_tick` on the loop.

        A call may run the tick first, on the spot (:meth:`call`); the queued
        :meth:`run_tick` then runs whichever tick is pending by its turn, if any.
        """
        self.tick = tick
        if not self.tick_queued:
            self.tick_queued = True
            self.loop.call_soon(self.run_tick)

    def run_tick(self) -> None:
        """On the loop: run trio's pending guest tick (the loop has had a turn, so calls may go inline again)."""
        self.tick_queued = False
        self.inline_left = INLINE_CALLS
        tick = self.tick
        if tick is not None and not self.ticking:
            self.tick = None
            self.ticking = True
            try:
                tick()
            finally:
                self.ticking = False

    def run_inline(self, done: Callable[[], object]) -> None:
        """In the awaiting asyncio task: run trio's pending ticks until ``done()`` is true.

        While trio is runnable (it lingers after an answer, or works), its
        next tick waits on the loop; running it here instead spares the loop
        turns, and a call answered within ``INLINE_TICKS`` ticks returns
        without the task being suspended and woken again. Stops at once when
        trio goes idle (its next tick then comes from its I/O-wait thread);
        at most ``INLINE_CALLS`` calls in a row before the loop gets a turn.
        """
        if self.ticking or self.inline_left <= 0:
            return
        self.inline_left -= 1
        self.ticking = True
        try:
            for _ in range(INLINE_TICKS):
                tick = self.tick
                if tick is None or done():
                    return
                self.tick = None
                tick()
        finally:
            self.ticking = False

    def call_soon(self, fn: Callable[[], Any]) -> None:
        """Run sync ``fn`` inside trio's run, soon."""
        assert self.token is not None
        self.token.run_sync_soon(fn)

    def deliver(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
        """From trio's side, run sync ``fn(*args)`` on the asyncio ``loop`` (at once: a guest shares its thread)."""
        fn(*args)

    def submit(self, call: _Call) -> None:
        """From asyncio: queue ``call`` for trio; a lingering task takes it, or it gets a task of its own.

        A guest starts that task right here, from the loop's thread between
        trio's ticks (as :meth:`start` starts runs); otherwise (a thread-backed
        node, or from inside a tick) trio's token is asked to.
        """
        self.pending.append(call)
        if self.hot or self.kicked:
            return
        if self.direct and not self.ticking and self.open():
            self.drain()
        else:
            self.call_soon(self.kicked_drain)  # raises RunFinishedError once trio's run is over
            self.kicked = True

    def kicked_drain(self) -> None:
        """In trio, through the token: start what asyncio queued."""
        self.kicked = False
        self.drain()

    def drain(self) -> None:
        """In trio: start a task for each queued call (or refuse them all once the node is closing)."""
        pending = self.pending
        nursery = self.nursery
        if nursery is None or nursery.cancel_scope.cancel_called:
            while pending:
                call = pending.popleft()
                self.deliver(call.loop, _finish, call, None, RuntimeError("the node is closed"))
            return
        if self.context is None:
            self.context = contextvars.copy_context()  # trio's (a thread-backed run's first drain is its token's)
        while pending:
            call = pending.popleft()
            if call.cancelled:  # the caller left before trio saw it: nothing to stop
                self.deliver(call.loop, _finish, call, None, None)
            elif call.begin is None or not self.begin(call):
                self.context.run(nursery.start_soon, self.body, call)

    def begin(self, call: _Call) -> bool:
        """In trio: start a call that needs no task (``call.begin``); False if it needs one after all.

        Its answer comes to :meth:`answered`, in the tick of the reply; an
        error raised while starting is its answer.
        """
        assert call.begin is not None
        try:
            stop = call.begin(call)
        except BaseException as exc:  # noqa: BLE001  # the caller's error, as the trio call would raise it
            self.deliver(call.loop, _finish, call, None, exc)
            return True
        if stop is None:  # no room in the mailbox: a task waits for it
            return False
        call.stop = stop
        return True

    def answered(self, call: _Call, result: outcome.Outcome[Any]) -> None:
        """In trio: the answer of a call started by :meth:`begin`; trio lingers after it (:class:`_LingerClock`)."""
        call.stop = None
        deliver = _finish if not self.threaded else functools.partial(self.deliver, call.loop, _finish)
        if isinstance(result, outcome.Value):
            deliver(call, result.value, None)
        elif isinstance(result, outcome.Error):
            deliver(call, None, result.error)
        if self.lingers:
            self.clock.idle_ticks = LINGER_TICKS

    async def body(self, call: _Call) -> None:
        """The trio task of one call; then, in guest mode, it lingers and may run the next ones.

        One cancel scope serves every call the task runs (entering a scope per
        call cost a quarter of a bare call's round trip): a call is cancelled
        through it only while it runs, and the task ends after a cancelled
        call. A call after the first runs in a fresh copy of the context the
        first started from.
        """
        deliver = self.deliver
        context: contextvars.Context | None = None
        with trio.CancelScope() as scope:
            while True:
                call.scope = scope
                if call.cancelled:
                    scope.cancel()
                try:
                    if context is None:
                        value = call.fn(*call.args, **call.kwargs)
                        if type(value) is types.CoroutineType or inspect.isawaitable(value):
                            value = await value
                    else:
                        context = context.copy()
                        value = context.run(call.fn, *call.args, **call.kwargs)
                        if type(value) is types.CoroutineType or inspect.isawaitable(value):
                            value = await _InContext(value, context)
                except trio.Cancelled:
                    call.scope = None
                    stopped = RuntimeError("condukt's trio run was stopped during the call")
                    deliver(call.loop, _finish, call, None, stopped)
                    raise
                except BaseException as exc:
                    call.scope = None
                    deliver(call.loop, _finish, call, None, exc)
                else:
                    call.scope = None
                    deliver(call.loop, _finish, call, value, None)
                if scope.cancel_called or not self.lingers:
                    return
                self.linger_left = LINGER_TICKS
                if self.hot:  # another task lingers: the refilled count is its
                    return
                next_call = await self.linger()
                if next_call is None:
                    return
                call, context = next_call, self.context

    async def linger(self) -> _Call | None:
        """Stay runnable for ``linger_left`` ticks; returns a call queued meanwhile that needs a task, if any.

        One task at a time lingers (a later answer only refills the count),
        each tick a plain checkpoint; a call queued meanwhile (:meth:`submit`)
        is taken without a task of its own: one that needs no task
        (:meth:`begin`) is started and the task lingers on; the first that
        needs one is returned, to run in this task (the others queued with it
        get tasks of their own). A sequence of calls such as ``history()`` or
        ``call_in_trio`` then costs no task per call. When the count runs out
        the task ends (trio itself stays on the loop a few idle ticks longer,
        :class:`_LingerClock`).
        """
        pending = self.pending
        deliver = self.deliver
        self.hot = True
        try:
            while True:
                while pending:
                    call = pending.popleft()
                    if call.cancelled:
                        deliver(call.loop, _finish, call, None, None)
                    elif call.begin is None or not self.begin(call):
                        return call
                if self.linger_left <= 0:
                    return None
                self.linger_left -= 1
                await trio.lowlevel.checkpoint()
        finally:
            self.hot = False  # from here calls get tasks of their own
            if pending:
                self.drain()

    def start(
        self,
        fn: Callable[..., Any],
        args: tuple[Any, ...],
        kwargs: dict[str, Any],
        begin: Callable[[_Call], Callable[[], None] | None] | None = None,
    ) -> _Call:
        """From asyncio: hand trio ``fn(*args, **kwargs)``, running trio's pending ticks on the spot.

        The call may be answered before this returns (``call.done()``, then ``call.result()``);
        otherwise await :meth:`wait`. With ``begin``, the call needs no trio
        task (see :class:`_Call`), and a guest starts it right here, on the
        loop's thread between trio's ticks: trio's run state is this
        thread's while the guest run lives, and ``trio.lowlevel.reschedule``
        from outside a tick asks for a tick itself. A trio caller's own step
        (one scheduler tick per call, about 13k instructions more in guest
        mode than in ``trio.run``) is what this saves: measured with
        callgrind, an agent run from asyncio went from 1.21x to 1.14x the
        instructions of the same run from trio (benchmarks/embedding.py,
        docs/benchmarks.md). A call from any other loop is refused: the
        guest's state belongs to its own loop's thread.
        """
        loop = self.call_loop
        if loop is None:
            loop = asyncio.get_running_loop()
        elif threading.get_ident() != self.thread_id:  # (asyncio.get_running_loop() costs a getpid() system call)
            raise RuntimeError(
                "this condukt.asyncio node runs as a guest on another asyncio loop; use it from that loop, "
                "or open it with open_node(thread=True) to share it between loops"
            )
        if args:
            args = _unwrap_args(args)
        if kwargs:
            kwargs = _unwrap_kwargs(kwargs)
        call = _Call(loop, fn, args, kwargs, self, begin)
        if begin is None or not self.direct or self.ticking or not self.open() or not self.begin(call):
            self.submit(call)
        if self.tick is not None:
            self.run_inline(call.done)
        return call

    def open(self) -> bool:
        """Whether trio's run is up and its node nursery takes calls."""
        nursery = self.nursery
        return nursery is not None and not nursery.cancel_scope.cancel_called and not self.finished.done()

    async def wait(self, call: _Call) -> Any:
        """Await the answer of a started ``call``; see the module for cancellation."""
        if call.finished:
            return call.result()
        future = call.future = call.loop.create_future()
        try:
            return await future
        except asyncio.CancelledError:
            call.cancelled = True
            if not call.finished:
                # The trio side is being cancelled: wait until it has cleaned up.
                call.settled = call.loop.create_future()
                with contextlib.suppress(trio.RunFinishedError):  # trio's run is over: nothing left to stop
                    self.call_soon(call.cancel)
                    await asyncio.shield(call.settled)
            raise

    async def call(self, fn: Callable[..., Any], *args: Any, **kwargs: Any) -> Any:
        """Await trio's ``fn(*args, **kwargs)`` from asyncio; see the module for cancellation.

        ``fn`` is called inside trio's run; if it returns an awaitable, that is awaited there.
        """
        call = self.start(fn, args, kwargs)
        if call.finished:
            return call.result()
        return await self.wait(call)


class _ThreadHost(_Guest):
    """trio in a thread of its own, shared by the whole process: for hosts where guest mode cannot be used.

    Not tied to any asyncio loop: calls come from whichever loop awaits
    them (each gets its answer on its own loop, through
    ``call_soon_threadsafe``), so nodes outlive loops, as where every
    request runs on a loop of its own. Each call crosses threads twice.
    """

    threaded = True
    lingers = False  # trio has a thread of its own: waking it costs the same whether or not it lingers
    direct = False  # trio's run is another thread's: calls start there
    _shared: _ThreadHost | None = None
    _lock = threading.Lock()

    def __init__(self) -> None:
        self.users = 0
        self.token: trio.lowlevel.TrioToken | None = None
        self.nursery: trio.Nursery | None = None
        self.ready = threading.Event()
        self.closing = False
        self.pending = collections.deque()
        self.kicked = False
        self.hot = False
        self.linger_left = 0
        self.context = None
        self.tick = None  # trio runs its own loop: no guest ticks to run on the spot
        self.call_loop = None  # each call is answered on the loop that made it
        self.thread = threading.Thread(target=self._run, name="condukt-trio", daemon=True)

    @classmethod
    async def acquire(cls) -> _ThreadHost:
        with cls._lock:
            host = cls._shared
            if host is None or host.closing or not host.thread.is_alive():
                host = cls._shared = cls()
                host.thread.start()
            host.users += 1
        await asyncio.get_running_loop().run_in_executor(None, host.ready.wait)
        if host.nursery is None:
            await host.release()
            raise RuntimeError("condukt's trio thread ended before it started")
        return host

    async def release(self) -> None:
        with self._lock:
            self.users -= 1
            last = self.users == 0
            if last:
                self.closing = True  # a later acquire starts a new thread
        if last and self.token is not None and self.nursery is not None:
            with contextlib.suppress(trio.RunFinishedError):
                self.token.run_sync_soon(self.nursery.cancel_scope.cancel)
            await asyncio.get_running_loop().run_in_executor(None, self.thread.join)

    def _run(self) -> None:
        try:
            trio.run(self._main)
        finally:
            self.ready.set()

    async def _main(self) -> None:
        self.token = trio.lowlevel.current_trio_token()
        async with trio.open_nursery() as nursery:
            self.nursery = nursery
            self.ready.set()
            await trio.sleep_forever()

    def deliver(self, loop: asyncio.AbstractEventLoop, fn: Callable[..., Any], *args: Any) -> None:
        with contextlib.suppress(RuntimeError):  # that loop has closed: nobody waits any more
            loop.call_soon_threadsafe(fn, *args)

    def submit(self, call: _Call) -> None:
        """From any loop's thread: queue ``call`` and wake trio's thread (one drain queued at a time)."""
        self.pending.append(call)
        assert self.token is not None
        self.token.run_sync_soon(self.drain, idempotent=True)


def _wrap(guest: _Guest, value: Any) -> Any:
    """``value`` with trio nodes and handles as proxies (in lists, tuples, sets and dict values too)."""
    if isinstance(value, otp.Node):
        return Node(guest, value)
    if isinstance(value, otp.Handle):
        return Handle(guest, value)
    kind = type(value)
    if kind is list or kind is tuple:
        items = [_wrap(guest, item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else kind(items)
    if kind is dict and value:
        wrapped = {key: _wrap(guest, item) for key, item in value.items()}
        return value if all(wrapped[key] is item for key, item in value.items()) else wrapped
    if (kind is set or kind is frozenset) and value:
        return kind(_wrap(guest, item) for item in value)
    return value


def _unwrap(value: Any) -> Any:
    """``value`` with proxies replaced by the trio objects they stand for, for a call into trio.

    trio's tables are keyed by the real handle (a supervisor's children, a
    node's monitors and links): a proxy handed to ``terminate_child`` would
    not be found there. Containers (lists, tuples, sets, dicts) and a
    :class:`~condukt.ChildSpec`'s arguments are unwrapped too; anything
    else is passed as it is.
    """
    if isinstance(value, _Proxy):
        return value._inner
    kind = type(value)
    if kind is list or kind is tuple:
        items = [_unwrap(item) for item in value]
        return value if all(a is b for a, b in zip(items, value, strict=True)) else kind(items)
    if kind is dict and value:
        return _unwrap_kwargs(value)
    if (kind is set or kind is frozenset) and value:
        return kind(_unwrap(item) for item in value)
    if kind is otp.ChildSpec:
        args, kwargs = _unwrap_args(value.args), _unwrap_kwargs(dict(value.kwargs))
        if args is not value.args or any(kwargs[key] is not item for key, item in value.kwargs.items()):
            return attrs.evolve(value, args=args, kwargs=kwargs)
    return value


def _unwrap_args(args: tuple[Any, ...]) -> tuple[Any, ...]:
    # The hot path of every call: most arguments are strings and numbers, left as they are.
    for item in args:
        if type(item) not in _PLAIN:
            return tuple(_unwrap(item) for item in args)
    return args


def _unwrap_kwargs(kwargs: dict[str, Any]) -> dict[str, Any]:
    for item in kwargs.values():
        if type(item) not in _PLAIN:
            return {key: _unwrap(item) for key, item in kwargs.items()}
    return kwargs


_PLAIN = frozenset({str, int, float, bool, type(None), bytes})


class _Proxy:
    """Trio's methods as asyncio awaitables; properties read as they are."""

    def __init__(self, guest: _Guest, inner: Any) -> None:
        self._guest = guest
        self._inner = inner

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._inner, name)
        if not callable(value) or name.startswith("_") or inspect.isclass(value):
            return value
        guest = self._guest
        begin = None
        if name == "run" and isinstance(self._inner, _agent_layer.AgentHandle):
            # A handle class of its own may override ``run``: then that is what runs, in a task.
            if type(self._inner).run is _agent_layer.AgentHandle.run:
                inner = self._inner

                def begin(call: _Call) -> Callable[[], None] | None:  # in trio: a run needs no task of its own
                    try:
                        return start_run(inner, call, *call.args, **call.kwargs)
                    except TypeError as exc:  # bad arguments: name the method the caller called
                        message = str(exc)
                        if message.startswith("start_run()"):
                            raise TypeError("run()" + message.removeprefix("start_run()")) from None
                        raise

        @functools.wraps(value)
        async def bridged(*args: Any, **kwargs: Any) -> Any:
            call = guest.start(value, args, kwargs, begin)
            result = call.result() if call.finished else await guest.wait(call)
            return result if type(result) is str else _wrap(guest, result)

        if inspect.ismethod(value) and value.__self__ is self._inner:
            self.__dict__[name] = bridged  # a method of the inner object: later look-ups skip __getattr__
        return bridged

    def __repr__(self) -> str:
        return f"<condukt.asyncio proxy of {self._inner!r}>"


class Node(_Proxy):
    """A condukt node seen from asyncio: the methods of :class:`condukt.Node`, all awaitable."""

    @property
    def inner(self) -> otp.Node:
        """The trio-side node (use it only from trio code)."""
        node: otp.Node = self._inner
        return node

    async def call_in_trio(self, fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
        """Await the trio function ``fn(*args, **kwargs)`` inside this node's trio run, from asyncio.

        For code that keeps its own trio-side logic next to the node (as
        :mod:`condukt.ray` does in a node actor that runs trio as a guest). The result is
        returned as is (no proxies); cancellation crosses as for every method.
        """
        return await self._guest.call(fn, *args, **kwargs)


class Handle(_Proxy):
    """A process or agent handle seen from asyncio: its methods awaitable, ``stream`` an async context manager.

    Handles are compared and hashed by the process they reference.
    """

    @property
    def inner(self) -> Any:
        """The trio-side handle (use it only from trio code)."""
        return self._inner

    def stream(self, *args: Any, **kwargs: Any) -> Stream:
        """``async with handle.stream(prompt) as events``, then ``async for event in events``.

        See :meth:`condukt.AgentHandle.stream`.
        """
        return Stream(self._guest, self._inner, args, kwargs)

    def __eq__(self, other: object) -> bool:
        # Equal to the trio handle it stands for too, so a table keyed by trio handles finds it.
        if isinstance(other, Handle):
            return bool(other._inner == self._inner)
        return bool(other is self._inner)

    def __hash__(self) -> int:
        return hash(self._inner)


_END = object()


class Stream:
    """The events of one streaming run, on asyncio.

    Leaving the block early (or cancelling the task iterating it) aborts the
    run, as on trio. ``result``, ``error`` and ``run_id`` are those of the
    trio :class:`~condukt.agent.EventStream`.
    """

    def __init__(self, guest: _Guest, handle: Any, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._guest = guest
        self._handle = handle
        self._args = args
        self._kwargs = kwargs
        self._queue: collections.deque[Any] = collections.deque()  # events handed over, not yet read
        self._waiters: list[asyncio.Future[None]] = []  # the readers, while the queue is empty
        self._inner: Any = None
        # Events handed to asyncio and events it has read: the run waits while
        # STREAM_BUFFER are unread. Reading wakes trio only if the run waits
        # (``_blocked``): not once per event, which cost a wake-up of an idle
        # trio (two thread hand-offs) per event. The lock makes the check and
        # the wait one step for thread-backed nodes.
        self._sent = 0
        self._read = 0
        self._blocked: trio.Event | None = None
        self._lock = threading.Lock()
        self._pump: asyncio.Task[Any] | None = None
        self._delivered: BaseException | None = None  # an error already raised to the reader

    async def __aenter__(self) -> Stream:
        loop = asyncio.get_running_loop()
        ready: asyncio.Future[None] = loop.create_future()
        deliver = self._guest.deliver
        put = self._put

        async def pump() -> None:
            announced = False
            try:
                async with self._handle.stream(*self._args, **self._kwargs) as events:
                    self._inner = events
                    announced = True
                    deliver(loop, _set_result, ready, None)
                    lock = self._lock
                    async for event in events:
                        with lock:
                            room = self._sent - self._read < STREAM_BUFFER
                            if room:
                                self._sent += 1
                        if not room:
                            await self._room()
                        deliver(loop, put, event)
            except BaseException as exc:
                if not announced:
                    deliver(loop, _set_exception, ready, exc)
                    raise
                if not isinstance(exc, trio.Cancelled):
                    deliver(loop, put, _Raise(exc))
                raise
            finally:
                deliver(loop, put, _END)

        self._pump = pumping = asyncio.ensure_future(self._guest.call(pump))
        try:
            # The call may fail before ``pump`` runs (a closed node, another loop): then only the task ends.
            await asyncio.wait((ready, pumping), return_when=asyncio.FIRST_COMPLETED)
            if not ready.done():
                pumping.result()  # raises what failed the call
            ready.result()
        except BaseException:
            ready.cancel()  # nobody reads it now (what the run's start raises is the pump's)
            await self._close()
            raise
        return self

    def __aiter__(self) -> AsyncIterator[Any]:
        return self

    def _put(self, item: Any) -> None:
        """On the asyncio loop: hand ``item`` to the reader (every task waiting to read looks again)."""
        self._queue.append(item)
        waiters = self._waiters
        if waiters:
            self._waiters = []
            for waiter in waiters:
                if not waiter.done():
                    waiter.set_result(None)

    async def __anext__(self) -> Any:
        queue = self._queue
        if not queue:
            guest = self._guest
            if guest.tick is not None:
                guest.run_inline(queue.__len__)  # trio is runnable: run it here until the next event is in
            while not queue:
                waiter = asyncio.get_running_loop().create_future()
                self._waiters.append(waiter)
                try:
                    await waiter
                finally:
                    if waiter in self._waiters:
                        self._waiters.remove(waiter)
        item = queue[0]
        if item is _END:
            raise StopAsyncIteration
        queue.popleft()
        if isinstance(item, _Raise):
            self._delivered = item.exc
            raise item.exc
        with self._lock:
            self._read += 1
            blocked, self._blocked = self._blocked, None
        if blocked is not None:
            with contextlib.suppress(trio.RunFinishedError):  # trio's run is over: nobody waits for room
                self._guest.call_soon(blocked.set)
        return item

    async def _room(self) -> None:
        """In trio: wait until fewer than STREAM_BUFFER events are unread, then count one more sent."""
        while True:
            with self._lock:
                if self._sent - self._read < STREAM_BUFFER:
                    self._sent += 1
                    return
                self._blocked = blocked = trio.Event()
            await blocked.wait()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        await self._close()

    async def _close(self) -> None:
        pump = self._pump
        if pump is None:
            return
        if not pump.done():
            pump.cancel()  # leaving early: the trio side leaves the stream's block, aborting the run
        try:
            await pump
        except asyncio.CancelledError:
            pass
        except BaseException as exc:
            if exc is not self._delivered:
                raise
        if pump.cancelled():
            current = asyncio.current_task()
            if current is not None and current.cancelling():
                raise asyncio.CancelledError

    @property
    def result(self) -> str | None:
        """The final text once the run completed."""
        return None if self._inner is None else self._inner.result

    @property
    def error(self) -> Any:
        """The :class:`~condukt.events.Error` event if the run failed."""
        return None if self._inner is None else self._inner.error

    @property
    def run_id(self) -> str:
        """The run's id (what ``abort(run_id)`` takes)."""
        return "" if self._inner is None else str(self._inner.run_id)


class _Raise:
    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc


class _OpenNode:
    def __init__(self, kwargs: dict[str, Any], default: bool, thread: bool) -> None:
        self._kwargs = kwargs
        self._default = default
        self._thread = thread
        self._exit_event: trio.Event | None = None
        self._guest: _Guest | None = None
        self._closed: asyncio.Future[None] | None = None
        self._token: contextvars.Token[Node | None] | None = None

    async def __aenter__(self) -> Node:
        guest = self._guest = await (_ThreadHost.acquire() if self._thread else _Guest.acquire())
        loop = asyncio.get_running_loop()
        opened: asyncio.Future[otp.Node] = loop.create_future()

        async def hold() -> None:
            # The node lives in a trio task of its own until the asyncio block ends.
            async with otp.open_node(**self._kwargs) as node:
                with otp_lowlevel.run_default_node(node) if self._default else contextlib.nullcontext():
                    self._exit_event = trio.Event()
                    guest.deliver(loop, _set_result, opened, node)
                    await self._exit_event.wait()

        self._closed = asyncio.ensure_future(guest.call(hold))
        waiting: set[asyncio.Future[Any]] = {opened, self._closed}
        await asyncio.wait(waiting, return_when=asyncio.FIRST_COMPLETED)
        if opened.done():
            proxy = Node(guest, opened.result())
            self._token = _current.set(proxy)
            return proxy
        await guest.release()
        self._closed.result()  # raises what opening raised
        raise RuntimeError("the node did not open")  # pragma: no cover

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        assert self._guest is not None and self._closed is not None
        if self._token is not None:
            with contextlib.suppress(ValueError):  # left in another context than entered: nothing to reset
                _current.reset(self._token)
        exit_event = self._exit_event
        if exit_event is not None:
            self._guest.call_soon(exit_event.set)
        try:
            await self._closed
        finally:
            await self._guest.release()


def open_node(*, default: bool = False, thread: bool = False, **kwargs: Any) -> _OpenNode:
    """``async with condukt.asyncio.open_node() as node``: a node on the running asyncio loop.

    Takes the options of :func:`condukt.open_node`. Leaving the block stops
    the node (its processes, then its HTTP client), as on trio. Cancelling
    the task inside the block cancels what it awaits, not the node.

    ``default=True`` makes it the default node of this loop for the block:
    :func:`run` (and trio code run through :func:`call`) without ``node=``
    uses it, from any task. That is what an application's lifespan wants
    (see :mod:`condukt.lifespan`).

    ``thread=True`` runs trio in a thread of its own instead of as a guest
    on this loop (one such thread per process, shared by every node opened
    this way): for hosts where guest mode cannot be used, such as a loop
    per request. Such a node may be used from any asyncio loop of the
    process while its block is open; leave the block on the loop that
    entered it. Calls cross threads (slower than guest mode); everything
    else, cancellation included, is the same. ``default=True`` then makes
    it the default of that trio thread (``run``/``call`` with ``node=`` it
    or inside its block use it).
    """
    return _OpenNode(kwargs, default, thread)


async def run(*args: Any, **kwargs: Any) -> Any:
    """:func:`condukt.run` from asyncio: a one-shot run.

    It runs on ``node=`` (a :class:`Node` of this module, or a trio node)
    if given, else on the node of the enclosing ``open_node`` block of this
    task, else on the loop's default node (``open_node(default=True)``,
    which :mod:`condukt.lifespan` opens), else on a temporary node.
    Cancelling the awaiting task aborts the run (its tool subprocesses are
    gone when the cancellation arrives) before ``CancelledError`` propagates.
    """
    node = kwargs.get("node") or _current.get()
    if isinstance(node, Node):
        kwargs["node"] = node.inner
        return await node._guest.call(_agent_layer.run, *args, **kwargs)
    return await call(_agent_layer.run, *args, **kwargs)


async def current_node() -> Node | None:
    """The node of the enclosing ``open_node`` block of this task, else the loop's default node, else ``None``.

    The loop's default node is the one opened with ``open_node(default=True)``
    (as :mod:`condukt.lifespan` does). Cancellation: cancelling the caller
    only stops the look-up.
    """
    enclosing = _current.get()
    if enclosing is not None:
        return enclosing
    guest = await _Guest.acquire()
    try:
        node = await guest.call(_current_trio_node)
        return None if node is None else Node(guest, node)
    finally:
        await guest.release()


async def _current_trio_node() -> otp.Node | None:
    return otp.current_node()


async def call(fn: Callable[..., Awaitable[Any]], *args: Any, **kwargs: Any) -> Any:
    """Await the trio async function ``fn(*args, **kwargs)`` from asyncio; returns its result.

    It runs in this loop's trio guest run (started if needed), so it may
    use trio and condukt's trio API (inner nodes and handles:
    :attr:`Node.inner`, :attr:`Handle.inner`). Cancellation crosses both
    ways as for every call of this module: cancelling the awaiting task
    cancels ``fn``, and the await returns once ``fn`` has ended; what
    ``fn`` raises arrives as that exception (``trio.Cancelled`` never does).
    """
    guest = await _Guest.acquire()
    try:
        return await guest.call(fn, *args, **kwargs)
    finally:
        await guest.release()
