"""Ray object references awaited from trio, and values made safe to send back."""

from __future__ import annotations

import pickle
from typing import Any

import ray
import trio
from ray.exceptions import RayActorError

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


async def await_ref(ref: Any, node_id: str) -> Any:
    """Await a Ray ``ObjectRef`` from trio, without a thread per call.

    The reference's future calls back from Ray's thread; the callback wakes
    the trio task through its run's token (thread-safe). Cancelling the
    trio task cancels the Ray task (for an async actor method, the actor's
    asyncio task, and through condukt.asyncio the trio work it awaits). A
    dead actor raises :class:`NodeDown`.
    """
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
