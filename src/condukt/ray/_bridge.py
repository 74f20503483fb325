"""Ray object references awaited from trio, and values made safe to send back."""

from __future__ import annotations

import pickle
from typing import Any

import outcome
import ray
import trio
from ray.exceptions import RayActorError, RayTaskError

from ..otp import ExitReason, NoProc

__all__ = ["NodeDown", "RemoteError", "await_ref", "portable", "unwrap"]


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


class RemoteError(Exception):
    """An error raised on another node that could not be pickled: its type name and text."""


#: Ray's completion hook of an ``ObjectRef`` (what ``ObjectRef.future()`` is built on), if this Ray has it.
_on_completed: Any = getattr(ray.ObjectRef, "_on_completed", None)


async def await_ref(ref: Any, node_id: str) -> Any:
    """Await a Ray ``ObjectRef`` from trio, without a thread per call.

    Ray calls back from its own thread when the object is ready; the
    callback reschedules the waiting trio task through its run's token
    (thread-safe). The callback is Ray's ``ObjectRef._on_completed``, the
    hook ``ObjectRef.future()`` itself wraps, when this Ray has it: going
    through ``future()`` adds a ``concurrent.futures.Future`` (a lock and a
    condition set in Ray's thread, read back in trio's) and a
    :class:`trio.Event`, measured at 80–190 µs more per cross-node call on
    the 2-core test machine (``benchmarks/cluster.py``, docs/benchmarks.md),
    mostly Ray's thread holding the GIL longer while trio's wakes. Without
    the hook it falls back to ``future()``.

    Cancelling the trio task cancels the Ray task (for an async actor
    method, the actor's asyncio task, and through condukt.asyncio the trio
    work it awaits). A dead actor raises :class:`NodeDown`; an error the
    Ray task raised is re-raised as Ray's ``get`` would.
    """
    if _on_completed is None:  # pragma: no cover - a Ray without the hook
        return await _await_future(ref, node_id)
    task = trio.lowlevel.current_task()
    token = trio.lowlevel.current_trio_token()
    waiting = [True]

    def deliver(data: Any) -> None:  # in the trio thread
        if waiting[0]:
            waiting[0] = False
            trio.lowlevel.reschedule(task, outcome.Value(data))

    def completed(data: Any) -> None:  # in Ray's thread (or this one, if the object is ready)
        try:
            token.run_sync_soon(deliver, data)
        except trio.RunFinishedError:  # pragma: no cover - the caller's run has ended
            pass

    def abort(_: Any) -> trio.lowlevel.Abort:
        waiting[0] = False
        ray.cancel(ref)
        return trio.lowlevel.Abort.SUCCEEDED

    _on_completed(ref, completed)
    data = await trio.lowlevel.wait_task_rescheduled(abort)
    if isinstance(data, Exception):
        if isinstance(data, RayActorError):
            raise NodeDown(node_id) from data
        if isinstance(data, RayTaskError):
            cause: Any = data
            raise cause.as_instanceof_cause()
        raise data
    return data


async def _await_future(ref: Any, node_id: str) -> Any:
    token = trio.lowlevel.current_trio_token()
    future = ref.future()
    done = trio.Event()

    def wake(_: Any) -> None:
        try:
            token.run_sync_soon(done.set)
        except trio.RunFinishedError:  # pragma: no cover - the caller's run has ended
            pass

    future.add_done_callback(wake)
    try:
        await done.wait()
    except trio.Cancelled:
        ray.cancel(ref)
        raise
    try:
        return future.result()
    except RayActorError as exc:
        raise NodeDown(node_id) from exc


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
