"""Monitors and links of other nodes' processes on a cluster node (the runtime's ``RemoteProcesses``).

Installed on every node by its actor (``condukt.otp.lowlevel.set_remote_processes``):
``node.monitor``, ``Server.monitor`` and ``Server.link`` then take a
:class:`ClusterHandle` as they take a local handle. A watch is one pending
Ray call (``wait_exit`` on the process's node) whose completion is delivered
into the node's trio run by Ray's callback thread, with no trio task per
watch; it ends when the watching process exits.
"""

from __future__ import annotations

import logging
from collections.abc import Callable
from typing import Any

import ray
import trio
from ray.exceptions import RayActorError, TaskCancelledError

from ..otp import ExitReason, Handle, NoProc
from ..otp.lowlevel import exit_signal, on_exit
from ._handle import ClusterHandle, actor_of, reduce_handle

__all__ = ["ClusterProcesses"]

logger = logging.getLogger("condukt.ray")


class _Watch:
    """One watched remote process: a pending ``wait_exit`` and the callback for its answer."""

    __slots__ = ("_forget", "_on_exit", "_ref", "_token")

    def __init__(self, target: ClusterHandle, on_exit_: Callable[[ExitReason], None], watcher: Handle | None) -> None:
        self._on_exit: Callable[[ExitReason], None] | None = on_exit_
        self._token = trio.lowlevel.current_trio_token()
        self._forget: Callable[[], None] | None = None
        self._ref: Any = None
        try:
            ref = actor_of(target.node_id).wait_exit.remote(target.id)
        except NoProc:  # the node is not known any more: lost
            self._token.run_sync_soon(self._fire, "noconnection")
            return
        self._ref = ref
        if watcher is not None:
            self._forget = on_exit(watcher, lambda _reason: self.cancel())
        ref.future().add_done_callback(self._completed)

    def _completed(self, future: Any) -> None:  # in Ray's callback thread
        if self._on_exit is None:
            return
        reason: ExitReason
        if future.cancelled():
            return
        error = future.exception()
        if error is None:
            (reason,) = future.result()
        elif isinstance(error, TaskCancelledError):
            return
        elif isinstance(error, RayActorError):
            reason = "noconnection"
        else:  # pragma: no cover - wait_exit itself does not raise
            logger.warning("condukt.ray: watching a remote process failed: %r", error)
            reason = "noconnection"
        try:
            self._token.run_sync_soon(self._fire, reason)
        except trio.RunFinishedError:  # pragma: no cover - this node's run has ended
            pass

    def _fire(self, reason: ExitReason) -> None:  # in the node's trio run
        callback, self._on_exit = self._on_exit, None
        forget, self._forget = self._forget, None
        if forget is not None:
            forget()
        if callback is not None:
            callback(reason)

    def cancel(self) -> None:
        """End the watch (in the node's trio run): no callback after this."""
        if self._on_exit is None:
            return
        self._on_exit = None
        forget, self._forget = self._forget, None
        if forget is not None:
            forget()
        ref, self._ref = self._ref, None
        if ref is not None:
            try:
                ray.cancel(ref)
            except Exception:  # pragma: no cover - the task is done or its worker gone
                logger.debug("ray.cancel failed", exc_info=True)


class ClusterProcesses:
    """The :class:`condukt.otp.lowlevel.RemoteProcesses` of one cluster node."""

    def __init__(self, node_id: str) -> None:
        self.node_id = node_id
        # (local process id, remote process) -> the watch delivering the remote exit to the local process.
        self._links: dict[tuple[int, ClusterHandle], _Watch] = {}

    def local(self, target: Any) -> Handle | None:
        if not isinstance(target, ClusterHandle):
            raise TypeError(
                f"expected a condukt.Handle or a condukt.ray.ClusterHandle, got {type(target).__name__} {target!r}"
            )
        if target.node_id != self.node_id:
            return None
        try:
            return target.local
        except NoProc:
            return None  # gone: a watch through the node answers "noproc"

    def watch(self, target: Any, on_exit_: Callable[[ExitReason], None], watcher: Handle | None) -> Callable[[], None]:
        return _Watch(target, on_exit_, watcher).cancel

    def link(self, local: Handle, target: Any) -> None:
        self._link_one_way(local, target)
        # The other way: the target's node watches this process and signals the target.
        constructor, args = reduce_handle(self.node_id, local)
        try:
            actor_of(target.node_id).link_back.remote(target.id, constructor(*args))
        except NoProc:
            pass  # lost: the watch above signals "noconnection"

    def _link_one_way(self, local: Handle, target: ClusterHandle) -> None:
        key = (local.id, target)
        if key in self._links:
            return

        def signal(reason: ExitReason) -> None:
            self._links.pop(key, None)
            exit_signal(local, target, reason)

        self._links[key] = _Watch(target, signal, local)
        # The watch ends with the local process; so does the entry.
        def forget(_reason: ExitReason) -> None:
            self._links.pop(key, None)

        on_exit(local, forget)

    def unlink(self, local: Handle, target: Any) -> None:
        self._unlink_one_way(local.id, target)
        try:
            actor_of(target.node_id).unlink_back.remote(target.id, ClusterHandle(self.node_id, local.id))
        except NoProc:
            pass

    def _unlink_one_way(self, pid: int, target: ClusterHandle) -> None:
        watch = self._links.pop((pid, target), None)
        if watch is not None:
            watch.cancel()
