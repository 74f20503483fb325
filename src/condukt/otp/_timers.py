"""One timer wheel per node: call timeouts and ``send_after`` (:class:`TimerRef`) without cancel scopes.

A trio cancel scope per call costs several microseconds; a call's timeout is
instead an entry in this heap, and the single timer task of the node fails the
waiting caller when the deadline passes. Entries that completed early are
removed lazily, and the heap is rebuilt once dead entries outnumber live ones.
"""

from __future__ import annotations

import heapq
import math
from itertools import count
from typing import TYPE_CHECKING, Any

import trio

if TYPE_CHECKING:
    from ._handle import Handle

__all__ = ["Timed", "TimerRef", "TimerService"]

_UNSCHEDULED, _SCHEDULED, _DONE = 0, 1, 2
_COMPACT_MIN = 256


class Timed:
    """Something with a deadline: subclasses implement :meth:`_fire`."""

    __slots__ = ("_timer_state",)

    def __init__(self) -> None:
        self._timer_state = _UNSCHEDULED

    def _fire(self) -> None:  # pragma: no cover - abstract
        raise AssertionError("subclass must implement _fire")


class TimerService:
    """Fires :class:`Timed` entries at their deadlines from one trio task."""

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, Timed]] = []
        self._seq = count()
        self._live = 0
        self._dead = 0
        self._scope: trio.CancelScope | None = None

    def schedule(self, deadline: float, entry: Timed) -> None:
        """Arrange for ``entry._fire()`` at ``deadline`` (trio clock time)."""
        entry._timer_state = _SCHEDULED
        heapq.heappush(self._heap, (deadline, next(self._seq), entry))
        self._live += 1
        scope = self._scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

    def cancel(self, entry: Timed) -> bool:
        """Withdraw ``entry``; returns whether it was still scheduled."""
        if entry._timer_state != _SCHEDULED:
            return False
        entry._timer_state = _DONE
        self._live -= 1
        self._dead += 1
        if self._dead > _COMPACT_MIN and self._dead > self._live:
            self._heap = [item for item in self._heap if item[2]._timer_state == _SCHEDULED]
            heapq.heapify(self._heap)
            self._dead = 0
        return True

    def _next_deadline(self) -> float:
        heap = self._heap
        while heap and heap[0][2]._timer_state != _SCHEDULED:
            heapq.heappop(heap)
            self._dead -= 1
        return heap[0][0] if heap else math.inf

    async def run(self) -> None:
        """Serve timers until cancelled (the node cancels it on close)."""
        while True:
            with trio.CancelScope(deadline=self._next_deadline()) as scope:
                self._scope = scope
                await trio.sleep_forever()
            self._scope = None
            now = trio.current_time()
            while True:
                # Re-read: a fired entry may cancel others and compact the heap.
                heap = self._heap
                if not heap or heap[0][0] > now:
                    break
                _, _, entry = heapq.heappop(heap)
                if entry._timer_state == _SCHEDULED:
                    entry._timer_state = _DONE
                    self._live -= 1
                    entry._fire()
                else:
                    self._dead -= 1


class TimerRef(Timed):
    """A pending :meth:`Server.send_after`; :meth:`cancel` withdraws it."""

    __slots__ = ("_handle", "_message")

    def __init__(self, handle: Handle, message: Any) -> None:
        self._timer_state = 0
        self._handle = handle
        self._message = message

    @property
    def active(self) -> bool:
        """True until the message is delivered or the timer cancelled."""
        return self._timer_state == 1

    def cancel(self) -> bool:
        """Withdraw the timer; returns ``False`` if it already fired or was cancelled."""
        return self._handle._node._timers.cancel(self)

    def _fire(self) -> None:
        self._handle._system(self._message)

