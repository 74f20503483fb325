"""Read timeouts for many connections at once, kept by one sleeping task.

A read with a timeout is usually a cancel scope around the wait. In trio
0.35 one scope costs about 49k instructions to make, enter and leave
(callgrind; more when its deadline moves), and a model request made one
for its idle timeout: a 2-turn run through
:class:`~condukt.providers.lowlevel.TrioTransport` cost 1,134k client
instructions with it, 1,005k without (docs/benchmarks.md, "Read timeouts
without a cancel scope"). Here a read only writes its deadline on its
connection; a connection goes into a heap when it starts waiting with a
deadline earlier than the one it is already filed under, and one task (a
trio system task, started on the first timed read of a trio run) sleeps
until the earliest deadline, and ends when no connection is filed.

A connection found still waiting past its deadline with nothing to read
is closed, which wakes its reader (``trio.lowlevel.notify_closing``
through the socket's ``close``); the reader sees :attr:`Timed.timed_out`
and raises a timeout, without touching the descriptor again (the number
may be another file's by then). One with bytes to read at its deadline is
spared, as a cancel scope would spare it (trio delivers I/O before it
expires deadlines), and looked at again shortly. A connection closed
while filed is let go (:meth:`ReadTimer.forget`: its entries are dropped
in batches), and the end of a trio run drops every entry (the next run
files its reads again, on its own clock). Nothing in trio or httpx does
this (trio's only timeout is the cancel scope; httpcore wraps each read
in one).
"""

from __future__ import annotations

import heapq
import logging
import math
from typing import Protocol

import trio

__all__ = ["ReadTimer", "Timed"]

logger = logging.getLogger("condukt.providers")

#: Seconds after which a connection that had bytes to read at its deadline is looked at again.
_GRACE = 0.05


class Timed(Protocol):
    """What the timer needs of a connection."""

    #: When the read it is waiting on times out (``inf``: not waiting, or no timeout).
    read_deadline: float
    #: The deadline of its earliest entry in the timer's heap (``inf``: none).
    filed_at: float
    #: Set by the timer before it closes a connection whose read timed out.
    timed_out: bool

    def has_data(self) -> bool:
        """Whether bytes (or the end of the stream) are there to read, without waiting."""

    def close(self) -> None:
        """Close at once (this wakes a task waiting to read it)."""


class ReadTimer:
    """The read deadlines of one transport's connections, enforced by one task while any is filed."""

    __slots__ = ("_dropped", "_heap", "_next", "_runner", "_scope", "_wake_at")

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timed]] = []
        self._next = 0
        #: Connections closed while filed, whose entries are still in the heap.
        self._dropped = 0
        self._wake_at = math.inf
        #: The trio run the task sleeps in (a token), ``None`` when there is no task.
        self._runner: trio.lowlevel.TrioToken | None = None
        self._scope: trio.CancelScope | None = None

    def file(self, conn: Timed, deadline: float) -> None:
        """Make sure ``conn`` is looked at by ``deadline`` (its ``read_deadline`` is set by the caller)."""
        start = self._runner is None or self._runner is not trio.lowlevel.current_trio_token()
        if start:  # the first timed read of this trio run (another run's deadlines meant its own clock)
            self._drop_all()
        conn.filed_at = deadline
        self._next += 1
        heapq.heappush(self._heap, (deadline, self._next, conn))
        if start:
            self._wake_at = deadline
            self._runner = trio.lowlevel.current_trio_token()
            trio.lowlevel.spawn_system_task(self._run, name="condukt read timer")
        elif deadline < self._wake_at:
            self._wake_at = deadline
            if self._scope is not None:
                self._scope.deadline = deadline

    def forget(self, conn: Timed) -> None:
        """``conn`` is being closed: the heap lets go of it (at once, or at the next compaction).

        A closed connection's entries would otherwise keep it (its socket, its
        reader, a TLS stream's buffers) until their deadlines, a read timeout
        away: many thousands of connections with a server that closes each one.
        """
        conn.filed_at = math.inf
        self._dropped += 1
        heap = self._heap
        if self._dropped > 32 and self._dropped * 2 > len(heap):
            # Keep each connection's current entry only (the others would be skipped anyway).
            heap[:] = [entry for entry in heap if entry[0] == entry[2].filed_at]
            heapq.heapify(heap)
            self._dropped = 0

    def _drop_all(self) -> None:
        """Empty the heap: its connections are filed again by their next timed read."""
        for _, _, conn in self._heap:
            conn.filed_at = math.inf
        self._heap.clear()
        self._dropped = 0

    async def _run(self) -> None:
        runner = self._runner
        heap = self._heap
        try:
            while True:
                now = trio.current_time()
                while heap and heap[0][0] <= now:
                    filed, _, conn = heapq.heappop(heap)
                    if filed != conn.filed_at:
                        continue  # a later filing of the same connection replaced this one
                    deadline = conn.read_deadline
                    if deadline <= now:
                        spared = False
                        if now - deadline < _GRACE:  # once only: a read spared before is not again
                            try:
                                spared = conn.has_data()
                            except Exception:  # as for close below: the task must not raise
                                logger.exception("probing a connection whose read timed out failed")
                        if spared:
                            # The bytes came with the deadline (in the same tick): its reader is
                            # woken by them, as under a cancel scope, where trio delivers I/O
                            # before it expires deadlines. Looked at again shortly: bytes that
                            # were no data for the reader (a TLS record of the protocol's own)
                            # leave it waiting on the same read, and then it times out.
                            self._next += 1
                            conn.filed_at = now + _GRACE
                            heapq.heappush(heap, (conn.filed_at, self._next, conn))
                            continue
                        conn.filed_at = math.inf
                        conn.timed_out = True
                        try:
                            conn.close()
                        except Exception:  # a system task must not raise: that would end the trio run
                            logger.exception("closing a connection whose read timed out failed")
                    elif deadline != math.inf:  # waiting on a later read: look again then
                        self._next += 1
                        conn.filed_at = deadline
                        heapq.heappush(heap, (deadline, self._next, conn))
                    else:  # not waiting: filed again by its next timed read
                        conn.filed_at = math.inf
                if not heap:
                    return  # the next timed read starts another task
                self._wake_at = heap[0][0]
                with trio.CancelScope(deadline=self._wake_at) as self._scope:
                    await trio.sleep_forever()
                self._scope = None
        finally:
            if self._runner is runner:
                # Cancelled with the trio run: nothing is timed any more (a later run files its reads again).
                self._drop_all()
                self._runner = None
                self._scope = None
                self._wake_at = math.inf
