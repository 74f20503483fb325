"""Streams: the events of one streaming run, read from asyncio (``async with agent.stream(...) as events``).

A trio task (the pump) runs the trio handle's ``stream`` and hands each
event over to the asyncio side; the run waits while ``STREAM_BUFFER``
events are unread, so a slow reader holds it back as on trio.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import functools
import inspect
import threading
from collections.abc import AsyncIterator, Callable
from types import TracebackType
from typing import TYPE_CHECKING, Any, Concatenate, Generic, ParamSpec, overload

import trio

from .. import asyncio as package
from ..events import Done, Error, Event
from ._guest import Guest, set_exception, set_result
from ._steps import Steps

if TYPE_CHECKING:
    from ._translate import ProxyBase

__all__ = ["Stream", "StreamMethod", "steps_method", "stream_method"]

P = ParamSpec("P")

_END = object()


class Stream:
    """The events of one streaming run, on asyncio.

    Leaving the block early (or cancelling the task iterating it) aborts the
    run, as on trio. ``result``, ``error``, ``run_id`` and ``done`` are those
    of the trio :class:`~condukt.agent.EventStream`.
    """

    def __init__(
        self, guest: Guest, handle: Any, args: tuple[Any, ...], kwargs: dict[str, Any], method: str = "stream"
    ) -> None:
        self._guest = guest
        self._handle = handle
        self._method = method  # "stream", or "attach" (a detached run's events: leaving never aborts it)
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
                async with getattr(self._handle, self._method)(*self._args, **self._kwargs) as events:
                    self._inner = events
                    announced = True
                    deliver(loop, set_result, ready, None)
                    lock = self._lock
                    async for event in events:
                        with lock:
                            room = self._sent - self._read < package.STREAM_BUFFER
                            if room:
                                self._sent += 1
                        if not room:
                            await self._room()
                        deliver(loop, put, event)
            except BaseException as exc:
                if not announced:
                    deliver(loop, set_exception, ready, exc)
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

    def __aiter__(self) -> AsyncIterator[Event]:
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

    async def __anext__(self) -> Event:
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
        event: Event = item
        return event

    async def _room(self) -> None:
        """In trio: wait until fewer than STREAM_BUFFER events are unread, then count one more sent."""
        while True:
            with self._lock:
                if self._sent - self._read < package.STREAM_BUFFER:
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
    def error(self) -> Error | None:
        """The :class:`~condukt.events.Error` event if the run failed."""
        return None if self._inner is None else self._inner.error

    @property
    def done(self) -> Done | None:
        """The :class:`~condukt.events.Done` event once the iteration reached it."""
        return None if self._inner is None else self._inner.done

    @property
    def run_id(self) -> str:
        """The run's id (what ``abort(run_id)`` takes)."""
        return "" if self._inner is None else str(self._inner.run_id)


class StreamMethod(Generic[P]):
    """A trio ``stream``, ``attach`` or ``iter`` method on a proxy class: its parameters, returning a
    :class:`Stream` (or what ``factory`` makes: :class:`~condukt.asyncio.Steps` for ``iter``)."""

    __slots__ = ("factory", "name", "unbound")

    def __init__(
        self, fn: Callable[..., Any], factory: Callable[..., Any] | None = None, note: str | None = None
    ) -> None:
        name = self.name = fn.__name__
        self.factory = factory

        def unbound(proxy: Any, /, *args: Any, **kwargs: Any) -> Any:
            return getattr(proxy, name)(*args, **kwargs)

        functools.update_wrapper(unbound, fn)
        if note is None:
            note = _ATTACH_NOTE if name == "attach" else _STREAM_NOTE
        unbound.__doc__ = (inspect.getdoc(fn) or "") + note
        self.unbound = unbound

    def __set_name__(self, owner: type, name: str) -> None:
        if name != self.name:
            raise TypeError(f"{owner.__qualname__}.{name}: this stream_method() makes ``{self.name}``")
        self.unbound.__module__ = owner.__module__
        self.unbound.__qualname__ = f"{owner.__qualname__}.{name}"

    @overload
    def __get__(self, proxy: None, owner: type[Any]) -> Callable[Concatenate[Any, P], Stream]: ...

    @overload
    def __get__(self, proxy: ProxyBase, owner: type[Any]) -> Callable[P, Stream]: ...

    def __get__(self, proxy: ProxyBase | None, owner: type[Any]) -> Any:
        if proxy is None:
            return self.unbound
        guest, inner, name, factory = proxy._guest, proxy._inner, self.name, self.factory

        @functools.wraps(self.unbound)
        def make(*args: Any, **kwargs: Any) -> Any:
            if factory is None:
                return Stream(guest, inner, args, kwargs, name)
            return factory(guest, inner, args, kwargs)

        proxy.__dict__[name] = make  # later look-ups skip the descriptor
        return make


def stream_method(fn: Callable[Concatenate[Any, P], Any]) -> StreamMethod[P]:
    """The trio method ``fn`` (an agent handle's ``stream``) on a proxy class: ``stream = stream_method(...)``."""
    return StreamMethod[P](fn)


def steps_method(fn: Callable[Concatenate[Any, P], Any]) -> StreamMethod[P]:
    """The trio method ``fn`` (an agent handle's ``iter``) on a proxy class: ``iter = steps_method(...)``."""
    return StreamMethod[P](fn, Steps, _STEPS_NOTE)


_STREAM_NOTE = """

From asyncio (:mod:`condukt.asyncio`): ``async with agent.stream(...) as
events``, then ``async for event in events``, a :class:`Stream`. Leaving
the block early, or cancelling the task reading it, aborts the run, as on
trio; it holds up to ``condukt.asyncio.STREAM_BUFFER`` events for the
asyncio side, then the run waits for the reader."""


_STEPS_NOTE = """

From asyncio (:mod:`condukt.asyncio`): ``async with agent.iter(...) as
steps``, then ``async for step in steps``, a :class:`Steps`: nothing is read
ahead, so the run waits at each step as on trio. Leaving the block early,
or cancelling the task reading it, aborts the run."""

_ATTACH_NOTE = """

From asyncio (:mod:`condukt.asyncio`): ``async with agent.attach(run_id)
as events``, then ``async for event in events``, a :class:`Stream`.
Leaving the block, or cancelling the task reading it, never affects the
run. The reader's event index is ``after`` plus the number of events it
has read."""


class _Raise:
    """An error of the trio side, handed to the reader in the place of the next event."""

    __slots__ = ("exc",)

    def __init__(self, exc: BaseException) -> None:
        self.exc = exc
