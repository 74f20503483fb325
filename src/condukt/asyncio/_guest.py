"""The guest-mode runner: one trio guest run per asyncio loop, and the calls asyncio makes into it.

:class:`Guest` starts trio as a guest of the running asyncio loop
(:func:`trio.lowlevel.start_guest_run`), shares it between the nodes opened
on that loop, and carries each call from asyncio into trio and its answer
back (:class:`Call`). How it keeps a sequence of calls from waking an idle
trio (lingering, :class:`LingerClock`, ticks run on the spot) is in the
package's docstring and measured by ``benchmarks/embedding.py``.

Arguments reach :meth:`Guest.start` already in trio terms: the callers
translate proxies first (:mod:`._translate`).
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
from collections.abc import Awaitable, Callable, Generator
from typing import Any

import outcome
import trio

# The package's tunables (LINGER_TICKS, INLINE_TICKS, INLINE_CALLS) are read
# from it at each use, so that setting them on ``condukt.asyncio`` takes effect.
from .. import asyncio as package

__all__ = ["Call", "Guest", "LingerClock", "finish", "set_exception", "set_result"]


def set_result(future: asyncio.Future[Any], value: Any) -> None:
    if not future.done():
        future.set_result(value)


def set_exception(future: asyncio.Future[Any], exc: BaseException) -> None:
    if not future.done():
        future.set_exception(exc)


class Call:
    """One call from asyncio into trio: what to run, where its answer goes, how to cancel it.

    A call with ``begin`` is started without a task of its own
    (:meth:`Guest.begin`): ``begin(call)`` starts it in trio with the call
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
        host: Guest,
        begin: Callable[[Call], Callable[[], None] | None] | None = None,
    ) -> None:
        self.loop = loop
        self.fn = fn
        self.args = args
        self.kwargs = kwargs
        self.host = host
        self.begin = begin
        self.future: asyncio.Future[Any] | None = None  # made only when the caller has to wait (:meth:`Guest.wait`)
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
            self.host.deliver(self.loop, finish, self, None, None)


def finish(call: Call, value: Any, error: BaseException | None) -> None:
    """On the asyncio loop: the trio side of ``call`` ended with ``value`` or ``error``."""
    call.finished = True
    future = call.future
    if future is None:  # answered before the caller waited (on the spot, in :meth:`Guest.start`)
        call.value = value
        call.error = error
    elif not future.done():
        if error is None:
            future.set_result(value)
        else:
            future.set_exception(error)
    if call.settled is not None and not call.settled.done():
        call.settled.set_result(None)


class InContext:
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


class LingerClock(trio.abc.Clock):
    """trio's clock for a guest run: the system clock, except for a few idle ticks after an answer.

    While ``idle_ticks`` is above zero, a wait for I/O with nothing runnable
    does not sleep (:meth:`deadline_to_sleep_time` answers 0 and counts one
    off). trio then polls for I/O and queues its next tick on the asyncio
    loop instead of waiting in its I/O thread, so a call made right after an
    answer (the next ``await`` of a sequential loop) enters trio with no
    thread hand-off, and the tick it lands in runs that call's work. Waking
    a task kept runnable for those ticks did the same with a task step per
    answer, which costs a measurable share of an agent run
    (``benchmarks/embedding.py``; figures in docs/benchmarks.md).
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


class Guest:
    """One trio guest run on one asyncio loop, shared by the nodes opened on it.

    Calls start on the spot, from the loop's thread between trio's ticks
    (trio's run state is this thread's while the guest run lives): an agent
    run with a callback (:meth:`start`), other calls as a task each
    (:meth:`submit`, :meth:`drain`), or in the task that lingers after
    answering the call before. An idle guest run waits for I/O in a worker
    thread, so waking it costs two thread hand-offs (asyncio to that thread,
    which then schedules trio's next tick back on the loop). After an answer
    trio therefore stays on the loop for ``LINGER_TICKS`` ticks (the
    answering task lingers, or :class:`LingerClock` keeps trio from
    sleeping): a call issued meanwhile (the next call of a sequential loop,
    a burst) enters trio with no wake-up at all. Measured in
    ``benchmarks/embedding.py`` (docs/benchmarks.md): the hand-offs cost
    more CPU than a whole agent run.
    """

    #: Whether trio runs in a thread of its own (:class:`~condukt.asyncio._thread.ThreadHost`) rather than as a guest.
    threaded = False
    #: Whether a task that answered a call stays runnable for a few ticks (:meth:`body`).
    lingers = True
    #: Whether a call that needs no task starts from the loop's thread, between guest ticks (:meth:`start`).
    direct = True

    _by_loop: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Guest] = weakref.WeakKeyDictionary()

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
        self.pending: collections.deque[Call] = collections.deque()
        self.kicked = False  # a drain is queued with trio's token
        self.hot = False  # a task lingers in trio and drains ``pending`` on its own
        self.linger_left = 0
        self.context: contextvars.Context | None = None  # the context each call's run starts from
        self.tick: Callable[[], object] | None = None  # trio's next guest tick, while it waits on the loop
        self.tick_queued = False  # a :meth:`run_tick` is queued on the loop
        self.ticking = False  # a guest tick is on the stack
        self.inline_left = package.INLINE_CALLS
        self.clock = LingerClock()

    @classmethod
    async def acquire(cls) -> Guest:
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
        self.inline_left = package.INLINE_CALLS
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
            for _ in range(package.INLINE_TICKS):
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

    def submit(self, call: Call) -> None:
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
                self.deliver(call.loop, finish, call, None, RuntimeError("the node is closed"))
            return
        if self.context is None:
            self.context = contextvars.copy_context()  # trio's (a thread-backed run's first drain is its token's)
        while pending:
            call = pending.popleft()
            if call.cancelled:  # the caller left before trio saw it: nothing to stop
                self.deliver(call.loop, finish, call, None, None)
            elif call.begin is None or not self.begin(call):
                self.context.run(nursery.start_soon, self.body, call)

    def begin(self, call: Call) -> bool:
        """In trio: start a call that needs no task (``call.begin``); False if it needs one after all.

        Its answer comes to :meth:`answered`, in the tick of the reply; an
        error raised while starting is its answer.
        """
        assert call.begin is not None
        try:
            stop = call.begin(call)
        except BaseException as exc:  # noqa: BLE001  # the caller's error, as the trio call would raise it
            self.deliver(call.loop, finish, call, None, exc)
            return True
        if stop is None:  # no room in the mailbox: a task waits for it
            return False
        call.stop = stop
        return True

    def answered(self, call: Call, result: outcome.Outcome[Any]) -> None:
        """In trio: the answer of a call started by :meth:`begin`; trio lingers after it (:class:`LingerClock`)."""
        call.stop = None
        deliver = finish if not self.threaded else functools.partial(self.deliver, call.loop, finish)
        if isinstance(result, outcome.Value):
            deliver(call, result.value, None)
        elif isinstance(result, outcome.Error):
            deliver(call, None, result.error)
        if self.lingers:
            self.clock.idle_ticks = package.LINGER_TICKS

    async def body(self, call: Call) -> None:
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
                            value = await InContext(value, context)
                except trio.Cancelled:
                    call.scope = None
                    stopped = RuntimeError("condukt's trio run was stopped during the call")
                    deliver(call.loop, finish, call, None, stopped)
                    raise
                except BaseException as exc:
                    call.scope = None
                    deliver(call.loop, finish, call, None, exc)
                else:
                    call.scope = None
                    deliver(call.loop, finish, call, value, None)
                if scope.cancel_called or not self.lingers:
                    return
                self.linger_left = package.LINGER_TICKS
                if self.hot:  # another task lingers: the refilled count is its
                    return
                next_call = await self.linger()
                if next_call is None:
                    return
                call, context = next_call, self.context

    async def linger(self) -> Call | None:
        """Stay runnable for ``linger_left`` ticks; returns a call queued meanwhile that needs a task, if any.

        One task at a time lingers (a later answer only refills the count),
        each tick a plain checkpoint; a call queued meanwhile (:meth:`submit`)
        is taken without a task of its own: one that needs no task
        (:meth:`begin`) is started and the task lingers on; the first that
        needs one is returned, to run in this task (the others queued with it
        get tasks of their own). A sequence of calls such as ``history()`` or
        ``call_in_trio`` then costs no task per call. When the count runs out
        the task ends (trio itself stays on the loop a few idle ticks longer,
        :class:`LingerClock`).
        """
        pending = self.pending
        deliver = self.deliver
        self.hot = True
        try:
            while True:
                while pending:
                    call = pending.popleft()
                    if call.cancelled:
                        deliver(call.loop, finish, call, None, None)
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
        begin: Callable[[Call], Callable[[], None] | None] | None = None,
    ) -> Call:
        """From asyncio: hand trio ``fn(*args, **kwargs)``, running trio's pending ticks on the spot.

        The call may be answered before this returns (``call.done()``, then ``call.result()``);
        otherwise await :meth:`wait`. With ``begin``, the call needs no trio
        task (see :class:`Call`), and a guest starts it right here, on the
        loop's thread between trio's ticks: trio's run state is this
        thread's while the guest run lives, and ``trio.lowlevel.reschedule``
        from outside a tick asks for a tick itself. A trio caller's own step
        (one scheduler tick per call, dearer in guest mode than in
        ``trio.run``) is what this saves (``benchmarks/embedding.py``,
        docs/benchmarks.md). A call from any other loop is refused: the
        guest's state belongs to its own loop's thread. ``args`` and
        ``kwargs`` are trio's: proxies are translated by the caller.
        """
        loop = self.call_loop
        if loop is None:
            loop = asyncio.get_running_loop()
        elif threading.get_ident() != self.thread_id:  # (asyncio.get_running_loop() costs a getpid() system call)
            raise RuntimeError(
                "this condukt.asyncio node runs as a guest on another asyncio loop; use it from that loop, "
                "or open it with open_node(thread=True) to share it between loops"
            )
        call = Call(loop, fn, args, kwargs, self, begin)
        if begin is None or not self.direct or self.ticking or not self.open() or not self.begin(call):
            self.submit(call)
        if self.tick is not None:
            self.run_inline(call.done)
        return call

    def open(self) -> bool:
        """Whether trio's run is up and its node nursery takes calls."""
        nursery = self.nursery
        return nursery is not None and not nursery.cancel_scope.cancel_called and not self.finished.done()

    async def wait(self, call: Call) -> Any:
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
