"""Where a node actor runs trio: in a thread of its own (the default) or as a guest on the actor's asyncio loop.

Ray runs an async actor's methods on an asyncio loop; the node's processes
are trio tasks. Both hosts give the actor ``await host.call(fn, *args)``:
run the trio function ``fn`` in the node's trio run and return its result;
and ``await host.call_soon(begin)`` for work that needs no task of its own
(a ``call``: into the mailbox, the reply delivered by a callback).

Measured with ``benchmarks/cluster.py`` (a call of an echo server through
the actor, on the 2-core test machine): the thread host adds about 570 µs
to a raw Ray actor call, the guest host about 840 µs. A guest run hands
trio's I/O wait to a worker thread and back at every scheduling batch, and
a call takes several batches (the caller's task, the server's, the reply);
a trio thread crosses threads twice per call, whatever the batches. Hence
the thread by default; the guest host (:mod:`condukt.asyncio`) stays
selectable, ``open_cluster(trio_host="guest")``, for comparison.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Awaitable, Callable
from typing import Any

import trio

from .. import asyncio as condukt_asyncio
from ..otp import ConduktError, Node, open_node


class NodeClosed(ConduktError, RuntimeError):
    """The node's trio run stopped before or during a call handed to it (a ``RuntimeError`` too, as it was)."""

__all__ = ["GuestHost", "NodeClosed", "ThreadHost", "make_host"]


#: What :meth:`ThreadHost.call_soon` runs in trio: ``begin(deliver)`` returns a withdraw function or ``None``.
Begin = Callable[[Callable[[Any], None]], "Callable[[], None] | None"]


def _fail(result: asyncio.Future[Any], error: BaseException) -> None:
    if not result.done():
        result.set_exception(error)


def _withdraw(withdraw: list[Callable[[], None] | None]) -> None:
    if withdraw and withdraw[0] is not None:
        withdraw[0]()


class ThreadHost:
    """``trio.run`` in a daemon thread of the actor, holding one condukt node."""

    def __init__(self) -> None:
        self.node: Node | None = None
        self._token: trio.lowlevel.TrioToken | None = None
        self._nursery: trio.Nursery | None = None
        self._stop: trio.Event | None = None
        self._thread: threading.Thread | None = None
        self._finished: asyncio.Future[None] | None = None

    async def open(self, options: dict[str, Any]) -> None:
        loop = asyncio.get_running_loop()
        started: asyncio.Future[None] = loop.create_future()
        finished: asyncio.Future[None] = loop.create_future()
        self._finished = finished

        def settle(future: asyncio.Future[None], error: BaseException | None) -> None:
            if not future.done():
                if error is None:
                    future.set_result(None)
                else:
                    future.set_exception(error)

        async def main() -> None:
            self._token = trio.lowlevel.current_trio_token()
            # The calls' nursery outlives the node: closing stops the processes first, so the
            # calls waiting on them (an exit, a reply) end with what the shutdown gives them.
            async with trio.open_nursery() as nursery:
                self._nursery = nursery
                async with open_node(**options) as node:
                    self.node = node
                    self._stop = trio.Event()
                    loop.call_soon_threadsafe(settle, started, None)
                    await self._stop.wait()
                nursery.cancel_scope.cancel()

        def thread_main() -> None:
            error: BaseException | None = None
            try:
                trio.run(main)
            except BaseException as exc:  # pragma: no cover - reported to the waiting side
                error = exc
            loop.call_soon_threadsafe(settle, started, error or RuntimeError("the node's trio run ended"))
            loop.call_soon_threadsafe(settle, finished, error)

        self._thread = threading.Thread(target=thread_main, name="condukt-node", daemon=True)
        self._thread.start()
        await started

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Await trio's ``fn(*args)`` in the node's thread; cancelling the awaiting task cancels it there."""
        loop = asyncio.get_running_loop()
        result: asyncio.Future[Any] = loop.create_future()
        scopes: list[trio.CancelScope] = []

        def settle(ok: bool, value: Any) -> None:
            if not result.done():
                if ok:
                    result.set_result(value)
                else:
                    result.set_exception(value)

        async def body() -> None:
            with trio.CancelScope() as scope:
                scopes.append(scope)
                if result.cancelled():  # cancelled before this task started: the cancel found no scope
                    scope.cancel()
                try:
                    value = await fn(*args)
                except trio.Cancelled:
                    loop.call_soon_threadsafe(settle, False, NodeClosed("the node stopped during the call"))
                    raise
                except BaseException as exc:
                    loop.call_soon_threadsafe(settle, False, exc)
                else:
                    loop.call_soon_threadsafe(settle, True, value)

        def start() -> None:
            nursery = self._nursery
            if nursery is None or nursery.cancel_scope.cancel_called:
                loop.call_soon_threadsafe(settle, False, NodeClosed("the node is closed"))
            else:
                nursery.start_soon(body)

        token = self._token
        assert token is not None
        token.run_sync_soon(start)
        try:
            return await result
        except asyncio.CancelledError:
            token.run_sync_soon(lambda: [scope.cancel() for scope in scopes])
            raise

    async def call_soon(self, begin: Begin) -> Any:
        """Run ``begin(deliver)`` in the node's thread outside any task; return what it delivers.

        ``begin`` arranges for ``deliver(value)`` to be called once from the
        trio thread and returns a function that withdraws the operation (run
        there if the awaiting task is cancelled), or ``None``. No trio task
        and no cancel scope per call: see :func:`condukt.otp.lowlevel.call_with_callback`.
        """
        loop = asyncio.get_running_loop()
        result: asyncio.Future[Any] = loop.create_future()
        withdraw: list[Callable[[], None] | None] = []

        def settle(value: Any) -> None:
            if not result.done():
                result.set_result(value)

        def deliver(value: Any) -> None:
            loop.call_soon_threadsafe(settle, value)

        def start() -> None:
            nursery = self._nursery
            if nursery is None or nursery.cancel_scope.cancel_called:
                loop.call_soon_threadsafe(_fail, result, NodeClosed("the node is closed"))
            elif not result.cancelled():
                withdraw.append(begin(deliver))

        token = self._token
        assert token is not None
        token.run_sync_soon(start)
        try:
            return await result
        except asyncio.CancelledError:
            token.run_sync_soon(_withdraw, withdraw)
            raise

    async def close(self) -> None:
        if self._token is not None and self._stop is not None:
            stop = self._stop
            try:
                self._token.run_sync_soon(stop.set)
            except trio.RunFinishedError:  # pragma: no cover
                return
        if self._finished is not None:
            await self._finished


class GuestHost:
    """trio as a guest on the actor's asyncio loop (:func:`condukt.asyncio.open_node`)."""

    def __init__(self) -> None:
        self.node: Node | None = None
        self._opened: Any = None
        self._proxy: Any = None

    async def open(self, options: dict[str, Any]) -> None:
        self._opened = condukt_asyncio.open_node(**options)
        self._proxy = await self._opened.__aenter__()
        self.node = self._proxy.inner

    async def call(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> Any:
        """Await trio's ``fn(*args)`` in the guest run; cancellation crosses as in condukt.asyncio."""
        return await self._proxy.call_in_trio(fn, *args)

    async def call_soon(self, begin: Begin) -> Any:
        """Run ``begin(deliver)`` in the guest run and return what it delivers (in a task, as :meth:`call`)."""

        async def inside() -> Any:
            delivered: list[Any] = []
            done = trio.Event()

            def deliver(value: Any) -> None:
                delivered.append(value)
                done.set()

            withdraw = begin(deliver)
            try:
                await done.wait()
            except trio.Cancelled:
                if withdraw is not None and not delivered:
                    withdraw()
                raise
            return delivered[0]

        return await self.call(inside)

    async def close(self) -> None:
        if self._opened is not None:
            opened, self._opened = self._opened, None
            await opened.__aexit__(None, None, None)


def make_host(kind: str) -> ThreadHost | GuestHost:
    """The host named ``kind``: ``"thread"`` or ``"guest"``."""
    if kind == "thread":
        return ThreadHost()
    if kind == "guest":
        return GuestHost()
    raise ValueError(f"trio_host must be 'thread' or 'guest', got {kind!r}")
