"""Ray object references awaited from trio, and values made safe to send back."""

from __future__ import annotations

import heapq
import itertools
import logging
import math
import pickle
from typing import Any

import outcome
import ray
import trio
from ray.exceptions import RayActorError, RayTaskError

from ..otp import CallTimeout, ConduktError, ExitReason, NoProc

__all__ = ["NodeDown", "RemoteError", "await_ref", "portable", "unwrap"]

logger = logging.getLogger("condukt.ray")


class NodeDown(NoProc):
    """The node a handle points at is gone (its Ray actor died): OTP's ``noconnection``.

    A subclass of :class:`condukt.NoProc`, so code that handles a dead
    process handles a lost node the same way.
    """

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        super().__init__(f"node {node_id} is down (noconnection)")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.node_id,))


class RemoteError(ConduktError):
    """An error raised on another node that could not be pickled: its type name and text.

    A :class:`~condukt.ConduktError` (an ``Exception``, as it always was).
    """


async def await_ref(ref: Any, node_id: str, within: float | None = None) -> Any:
    """Await a Ray ``ObjectRef`` from trio, without a thread per call.

    Ray calls back from its own thread when the object is ready
    (``ObjectRef.future()``'s done callback); the callback reschedules the
    waiting trio task through its run's token (thread-safe), with no
    :class:`trio.Event` in between: with the event, a cross-node call took
    80–190 µs more on the 2-core test machine (``benchmarks/cluster.py``,
    docs/benchmarks.md). Ray's private completion hook underneath
    ``future()`` would save a further 20–40 µs a call (1,441 against 1,462
    µs best of seven rounds, side by side, 2026-12-01); condukt keeps to the
    public API.

    ``within`` seconds (``None``: no limit) bounds the wait: past it the Ray
    task is cancelled and :class:`condukt.CallTimeout` raised. The limit is
    an entry in one timer heap per trio run, not a cancel scope per call
    (entering and leaving one took 18–25 µs on the loaded 2-core test
    machine, trio 0.35).

    Cancelling the trio task cancels the Ray task (for an async actor
    method, the actor's asyncio task, and through condukt.asyncio the trio
    work it awaits). A dead actor raises :class:`NodeDown`; an error the
    Ray task raised is re-raised as Ray's ``get`` would.
    """
    wait = _Wait(trio.lowlevel.current_task(), ref, node_id, within)
    token = trio.lowlevel.current_trio_token()

    def completed(future: Any) -> None:  # in Ray's thread (or this one, if the object is ready)
        if future.cancelled():  # pragma: no cover - Ray does not cancel the futures it hands out
            data: Any = RuntimeError("the Ray future was cancelled")
        else:
            error = future.exception()
            data = error if error is not None else future.result()
        try:
            token.run_sync_soon(wait.deliver, outcome.Value(data))
        except trio.RunFinishedError:  # pragma: no cover - the caller's run has ended
            pass

    ref.future().add_done_callback(completed)
    if within is not None:
        _timers().schedule(trio.current_time() + within, wait)
    data = await trio.lowlevel.wait_task_rescheduled(wait.abort)
    if isinstance(data, Exception):
        if isinstance(data, RayActorError):
            raise NodeDown(node_id) from data
        if isinstance(data, RayTaskError):
            cause: Any = data
            raise cause.as_instanceof_cause()
        raise data
    return data


class _Wait:
    """One trio task waiting for a Ray reference (the entry the timers hold)."""

    __slots__ = ("node_id", "ref", "task", "timers", "within")

    def __init__(self, task: trio.lowlevel.Task, ref: Any, node_id: str, within: float | None) -> None:
        self.task: trio.lowlevel.Task | None = task
        self.ref = ref
        self.node_id = node_id
        self.within = within
        self.timers: _Timers | None = None

    def _end(self) -> None:
        self.task = self.ref = None
        timers = self.timers
        if timers is not None:
            self.timers = None
            timers.ended()

    def deliver(self, result: outcome.Outcome[Any]) -> None:  # in the trio thread
        task = self.task
        if task is not None:
            self._end()
            trio.lowlevel.reschedule(task, result)

    def abort(self, _: Any) -> trio.lowlevel.Abort:
        ref = self.ref
        self._end()
        _cancel(ref)
        return trio.lowlevel.Abort.SUCCEEDED

    def expire(self) -> None:
        self.timers = None  # out of the heap already
        if self.task is not None:
            _cancel(self.ref)
            self.deliver(outcome.Error(CallTimeout(f"no reply from node {self.node_id} within {self.within} s")))


def _cancel(ref: Any) -> None:
    """``ray.cancel(ref)``, which must not raise where it runs (trio's abort callback, the timer task)."""
    try:
        ray.cancel(ref)
    except Exception:  # pragma: no cover - Ray refusing a cancel (the task is done or its worker gone)
        logger.debug("ray.cancel failed", exc_info=True)


class _Timers:
    """Deadlines of the waits in one trio run: a heap served by one system task.

    Ended waits stay in the heap until their deadline, or until they
    outnumber the live ones (then the heap is rebuilt).
    """

    def __init__(self) -> None:
        self._heap: list[tuple[float, int, _Wait]] = []
        self._seq = itertools.count()
        self._ended = 0
        self._scope: trio.CancelScope | None = None

    def schedule(self, deadline: float, wait: _Wait) -> None:
        wait.timers = self
        heapq.heappush(self._heap, (deadline, next(self._seq), wait))
        scope = self._scope
        if scope is not None and deadline < scope.deadline:
            scope.deadline = deadline

    def ended(self) -> None:
        self._ended += 1
        if self._ended > 256 and 2 * self._ended > len(self._heap):
            self._heap[:] = [entry for entry in self._heap if entry[2].timers is self]
            heapq.heapify(self._heap)
            self._ended = 0

    async def run(self) -> None:
        heap = self._heap
        while True:
            with trio.CancelScope(deadline=heap[0][0] if heap else math.inf) as self._scope:
                await trio.sleep_forever()
            now = trio.current_time()
            while heap and heap[0][0] <= now:
                wait = heapq.heappop(heap)[2]
                if wait.timers is self:
                    wait.expire()
                else:
                    self._ended -= 1


_run_timers: trio.lowlevel.RunVar[_Timers] = trio.lowlevel.RunVar("condukt_ray_timers")


def _timers() -> _Timers:
    try:
        return _run_timers.get()
    except LookupError:
        timers = _Timers()
        _run_timers.set(timers)
        trio.lowlevel.spawn_system_task(timers.run, name="condukt.ray timers")
        return timers


def portable(value: Any) -> Any:
    """``value`` if it pickles, else a :class:`RemoteError` (or its repr) that does."""
    try:
        pickle.dumps(value)
    except Exception:
        if isinstance(value, BaseException):
            return RemoteError(f"{type(value).__name__}: {value}")
        return repr(value)
    return value


def portable_reason(reason: ExitReason) -> ExitReason:
    """An exit reason made safe to send to another node."""
    return portable(reason)


def unwrap(envelope: tuple[bool, Any]) -> Any:
    """The value of an ``(ok, value)`` reply from a node, or raise the error it carries."""
    ok, value = envelope
    if ok:
        return value
    raise value
