"""PostgreSQL connections driven by the trio loop: libpq in non-blocking mode, psycopg's wait protocol.

psycopg's async API runs on asyncio only. Rather than run its blocking API
in worker threads, :class:`Connection` drives a ``psycopg.pq`` connection
in non-blocking mode: a query is sent with ``send_query_prepared``, and
psycopg's own generator (``psycopg.generators.execute``, the code psycopg's
asyncio API runs) flushes it and collects the results, yielding whenever
the socket must become readable or writable; this module waits for that
with ``trio.lowlevel.wait_readable`` / ``wait_writable``. Connecting runs
in a worker thread (libpq resolves host names, negotiates TLS and tries
the hosts of a multi-host DSN with blocking calls there; it happens once
per pooled connection).

Measured (benchmarks/sessions.py, "driver": one INSERT of 2 KB, the same
server and process): this costs less than half the wall time and CPU of a
blocking psycopg call handed to ``trio.to_thread.run_sync`` (a thread
switch each way per statement), and less than psycopg's own blocking
``Connection.execute`` (no query conversion or adaptation layer); with
1,000 tasks saving over one pool, throughput is about twice the thread
pool's. See docs/benchmarks.md for the figures.
"""

from __future__ import annotations

import select
from collections.abc import Awaitable, Callable, Sequence
from typing import Any, TypeVar

import psycopg
import trio
from psycopg import generators, pq
from psycopg.waiting import Ready, Wait

__all__ = ["Connection", "Pool", "Row", "connect"]

T = TypeVar("T")
Row = tuple[bytes | None, ...]
Param = bytes | str | int | float | None

_OK = (pq.ExecStatus.COMMAND_OK, pq.ExecStatus.TUPLES_OK)


async def _drive(gen: Any, fileno: int) -> Any:
    """Run one of psycopg's generators to its end, waiting on the trio loop."""
    try:
        state = next(gen)
        while True:
            if state & Wait.W:
                ready = _ready_now(fileno, state)
                if not ready:
                    ready = await (_readable_or_writable(fileno) if state & Wait.R else _writable(fileno))
            else:
                await trio.lowlevel.wait_readable(fileno)
                ready = Ready.R
            state = gen.send(ready)
    except StopIteration as done:
        return done.value


def _ready_now(fileno: int, state: int) -> int:
    # A socket asked for writing is nearly always writable: a zero-timeout
    # poll is cheaper than a trip through the loop.
    poller = select.poll()
    poller.register(fileno, select.POLLOUT | (select.POLLIN if state & Wait.R else 0))
    events = poller.poll(0)
    if not events:
        return 0
    mask = events[0][1]
    return (Ready.W if mask & (select.POLLOUT | select.POLLERR | select.POLLHUP) else 0) | (
        Ready.R if mask & (select.POLLIN | select.POLLHUP) else 0
    )


async def _writable(fileno: int) -> int:
    await trio.lowlevel.wait_writable(fileno)
    return int(Ready.W)


async def _readable_or_writable(fileno: int) -> int:
    ready = 0
    async with trio.open_nursery() as nursery:

        async def wait(waiter: Callable[[int], Awaitable[None]], flag: int) -> None:
            nonlocal ready
            await waiter(fileno)
            ready |= flag
            nursery.cancel_scope.cancel()

        nursery.start_soon(wait, trio.lowlevel.wait_readable, int(Ready.R))
        nursery.start_soon(wait, trio.lowlevel.wait_writable, int(Ready.W))
    return ready


def _encode(value: Param) -> tuple[bytes | None, int]:
    if value is None:
        return None, 0
    if isinstance(value, bytes):
        return value, 1  # binary: bytea parameters go as they are
    if isinstance(value, str):
        return value.encode("utf-8"), 0
    return str(value).encode(), 0


class Connection:
    """One libpq connection in non-blocking mode, its statements prepared once each."""

    def __init__(self, pgconn: pq.abc.PGconn) -> None:
        self.pgconn = pgconn
        self._prepared: dict[str, bytes] = {}

    @property
    def reusable(self) -> bool:
        """Whether the connection is alive and outside any transaction (fit to go back to the pool)."""
        pgconn = self.pgconn
        return pgconn.status == pq.ConnStatus.OK and pgconn.transaction_status == pq.TransactionStatus.IDLE

    def close(self) -> None:
        """Close the connection (at once; a statement in flight is abandoned)."""
        self.pgconn.finish()

    async def execute(self, sql: str, params: Sequence[Param] = ()) -> list[Row]:
        """Run ``sql`` (``$1``... placeholders) with ``params``; its rows, each column as text bytes.

        Raises the ``psycopg.errors`` class for the server's error, or
        ``psycopg.OperationalError`` when the connection broke.
        """
        pgconn = self.pgconn
        name = self._prepared.get(sql)
        if name is None:
            name = f"c{len(self._prepared)}".encode()
            pgconn.send_prepare(name, sql.encode("utf-8"))
            self._check(await _drive(generators.execute(pgconn), pgconn.socket))
            self._prepared[sql] = name
        values, formats = zip(*(_encode(p) for p in params), strict=True) if params else ((), ())
        pgconn.send_query_prepared(name, values, formats)
        result = self._check(await _drive(generators.execute(pgconn), pgconn.socket))
        return [tuple(result.get_value(r, c) for c in range(result.nfields)) for r in range(result.ntuples)]

    async def run(self, sql: str) -> None:
        """Run a statement without parameters or rows (``BEGIN``, DDL...), unprepared."""
        pgconn = self.pgconn
        pgconn.send_query_params(sql.encode("utf-8"), None)
        self._check(await _drive(generators.execute(pgconn), pgconn.socket))

    def _check(self, results: list[pq.abc.PGresult]) -> pq.abc.PGresult:
        if not results:
            raise psycopg.OperationalError(
                f"no result from the server: {self.pgconn.get_error_message()}"
            )
        for result in results:
            if result.status not in _OK:
                if result.status == pq.ExecStatus.FATAL_ERROR:
                    raise psycopg.errors.error_from_result(result)
                raise psycopg.OperationalError(f"unexpected result status {result.status}")
        return results[-1]


async def connect(conninfo: str, setup: Sequence[str] = ()) -> Connection:
    """A new connection (opened in a worker thread), switched to non-blocking mode, ``setup`` run on it.

    Raises ``psycopg.OperationalError`` when the server cannot be reached.
    Cancellation waits for the connection attempt (bounded by the DSN's
    ``connect_timeout``), then closes it.
    """

    def blocking() -> pq.abc.PGconn:
        pgconn = pq.PGconn.connect(conninfo.encode("utf-8"))
        if pgconn.status != pq.ConnStatus.OK:
            message = pgconn.get_error_message()
            pgconn.finish()
            raise psycopg.OperationalError(f"connection failed: {message}")
        pgconn.nonblocking = 1
        return pgconn

    connection = Connection(await trio.to_thread.run_sync(blocking))
    try:
        for statement in setup:
            await connection.run(statement)
    except BaseException:
        connection.close()
        raise
    return connection


class Pool:
    """Up to ``size`` connections, opened on demand and shared by the store's operations."""

    def __init__(self, size: int, opener: Callable[[], Awaitable[Connection]]) -> None:
        self.size = size
        self._opener = opener
        self._idle: list[Connection] = []
        self._slots = trio.Semaphore(size)

    async def take(self) -> Connection:
        """A connection (an idle one, or a new one); give it back with :meth:`give`.

        Waiting for a free slot is cancellable; so is opening a connection
        (which then waits for the attempt, bounded by ``connect_timeout``).
        """
        try:
            # The statement that follows waits on the socket (a checkpoint):
            # taking a free slot needs no trip through the scheduler of its own.
            self._slots.acquire_nowait()
        except trio.WouldBlock:
            await self._slots.acquire()
        try:
            return self._idle.pop() if self._idle else await self._opener()
        except BaseException:
            self._slots.release()
            raise

    def give(self, connection: Connection) -> None:
        """Return a connection taken with :meth:`take`: pooled again if fit, else closed."""
        if connection.reusable:
            self._idle.append(connection)
        else:
            connection.close()
        self._slots.release()

    def discard_idle(self) -> None:
        """Close the idle connections (after a failure that probably broke them all: a server restart)."""
        idle, self._idle = self._idle, []
        for connection in idle:
            connection.close()

    @property
    def idle(self) -> int:
        """How many connections are open and idle."""
        return len(self._idle)
