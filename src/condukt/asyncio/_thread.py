"""The thread-backed host: trio in a thread of its own, for hosts where guest mode cannot be used.

``open_node(thread=True)`` (a loop per request, as Django's ``runserver``;
a loop that another trio guest already uses). The same calls as
:class:`~._guest.Guest`, each crossing threads twice.
"""

from __future__ import annotations

import asyncio
import collections
import contextlib
import threading
from collections.abc import Callable
from typing import Any

import trio

from ._guest import Call, Guest

__all__ = ["ThreadHost"]


class ThreadHost(Guest):
    """trio in a thread of its own, shared by the whole process: for hosts where guest mode cannot be used.

    Not tied to any asyncio loop: calls come from whichever loop awaits
    them (each gets its answer on its own loop, through
    ``call_soon_threadsafe``), so nodes outlive loops, as where every
    request runs on a loop of its own. Each call crosses threads twice.
    """

    threaded = True
    lingers = False  # trio has a thread of its own: waking it costs the same whether or not it lingers
    direct = False  # trio's run is another thread's: calls start there
    _shared: ThreadHost | None = None
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
    async def acquire(cls) -> ThreadHost:
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

    def submit(self, call: Call) -> None:
        """From any loop's thread: queue ``call`` and wake trio's thread (one drain queued at a time)."""
        self.pending.append(call)
        assert self.token is not None
        self.token.run_sync_soon(self.drain, idempotent=True)
