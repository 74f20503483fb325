"""The server's HTTP/1.1 plumbing: requests read by httptools, heads and chunks written, one timer for latencies."""

from __future__ import annotations

import functools
import heapq
import itertools
import math
import os
from collections import deque
from http import HTTPStatus
from typing import Any

import httptools
import trio

__all__ = ["CHUNKED", "CLOSE", "Requests", "Timer", "chunk", "head", "receive", "send"]


class Timer:
    """Sleeps for the server's requests: one task wakes every sleeper whose time came.

    A ``trio.sleep`` per request costs the server a cancel scope, a deadline
    and a delivered cancellation each (about a quarter of its CPU per
    request at 1,000 concurrent requests, which bounds the makespans the
    benchmarks measure); here a sleeper parks until the timer task, woken at
    the earliest deadline, reschedules every sleeper that is due.
    """

    __slots__ = ("_heap", "_order", "_scope")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, list[Any]]] = []
        self._order = itertools.count()
        self._scope: trio.CancelScope | None = None

    async def sleep(self, delay: float) -> None:
        """Return after ``delay`` seconds (cancellable); needs :meth:`run` running."""
        deadline = trio.current_time() + delay
        sleeper: list[Any] = [trio.lowlevel.current_task()]
        heapq.heappush(self._heap, (deadline, next(self._order), sleeper))
        scope = self._scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

        def abort(_: Any) -> trio.lowlevel.Abort:
            sleeper[0] = None
            return trio.lowlevel.Abort.SUCCEEDED

        await trio.lowlevel.wait_task_rescheduled(abort)

    async def run(self) -> None:
        """Wake sleepers as their deadlines pass, until cancelled."""
        heap = self._heap
        while True:
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as self._scope:
                await trio.sleep_forever()
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                task = heapq.heappop(heap)[2][0]
                if task is not None:
                    trio.lowlevel.reschedule(task)


CLOSE = ("connection", "close")
CHUNKED = ("transfer-encoding", "chunked")


#: Whether sockets are read and written through their descriptors (POSIX; see :func:`send`).
_DIRECT = os.name == "posix"


async def send(stream: trio.abc.Stream, data: bytes) -> None:
    """``stream.send_all(data)``: on POSIX and plain TCP, first one non-blocking ``os.write`` and a checkpoint.

    What the socket does not take at once goes through ``send_all``. The
    checkpoint after each write keeps a server's turn-taking between
    frames (a client reads a stream's events one by one, as from a
    provider flushing each event), without ``send_all``'s layers.
    """
    sent = 0
    if _DIRECT and type(stream) is trio.SocketStream:
        try:
            sent = os.write(stream.socket.fileno(), data)
        except BlockingIOError:
            sent = 0
        except OSError as exc:
            raise trio.BrokenResourceError(f"{type(exc).__name__}: {exc}") from exc
    if sent < len(data):
        await stream.send_all(memoryview(data)[sent:] if sent else data)
    else:
        await trio.lowlevel.checkpoint()


async def receive(stream: trio.abc.Stream) -> bytes:
    """``stream.receive_some()``: on POSIX and plain TCP, ``trio.lowlevel.wait_readable`` and ``os.read``."""
    if not _DIRECT or type(stream) is not trio.SocketStream:  # (a TLS stream, in some tests)
        return bytes(await stream.receive_some(65536))
    fd = stream.socket.fileno()
    while True:
        await trio.lowlevel.wait_readable(fd)
        try:
            return os.read(fd, 65536)
        except BlockingIOError:  # woken without data after all: wait again
            pass
        except OSError as exc:
            raise trio.BrokenResourceError(f"{type(exc).__name__}: {exc}") from exc


@functools.lru_cache(maxsize=256)
def head(status: int, headers: tuple[tuple[str, str], ...]) -> bytes:
    """A response head: status line (with the standard reason phrase) and ``headers``."""
    try:
        reason = HTTPStatus(status).phrase
    except ValueError:
        reason = ""
    lines = [f"HTTP/1.1 {status} {reason}", *(f"{name}: {value}" for name, value in headers), "", ""]
    return "\r\n".join(lines).encode("latin-1")


def chunk(frame: bytes) -> bytes:
    """``frame`` as one chunk of a chunked body."""
    return b"%x\r\n%s\r\n" % (len(frame), frame)


class Requests:
    """httptools' callbacks for one connection's requests: each complete one joins :attr:`complete`."""

    __slots__ = ("_body", "_headers", "_target", "complete", "parser")

    def __init__(self) -> None:
        self.parser = httptools.HttpRequestParser(self)
        #: ``(method, target, headers, body, keep_alive)`` of each request read whole, oldest first.
        self.complete: deque[tuple[bytes, bytes, list[tuple[bytes, bytes]], bytes, bool]] = deque()
        self._target = b""
        self._headers: list[tuple[bytes, bytes]] = []
        self._body: list[bytes] = []

    def on_message_begin(self) -> None:
        self._target = b""
        self._headers = []
        self._body = []

    def on_url(self, url: bytes) -> None:
        self._target += url

    def on_header(self, name: bytes, value: bytes) -> None:
        self._headers.append((name, value))

    def on_body(self, body: bytes) -> None:
        self._body.append(body)

    def on_message_complete(self) -> None:
        parser = self.parser
        self.complete.append(
            (parser.get_method(), self._target, self._headers, b"".join(self._body), parser.should_keep_alive())
        )
