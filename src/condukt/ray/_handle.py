"""Location-transparent handles: (node id, process id), routed by Ray or taken locally."""

from __future__ import annotations

import threading
from collections.abc import Hashable
from types import TracebackType
from typing import Any

import attrs
import ray
import trio

from ..otp import Handle, NoProc
from ._bridge import await_ref, unwrap

__all__ = ["ClusterHandle", "LocalNode", "actor_of", "local_node", "set_local_node"]

#: The :class:`condukt.AgentHandle` methods a cluster handle of an agent forwards (all awaited).
AGENT_METHODS = frozenset(
    {
        "run", "abort", "steer", "follow_up", "operation", "approve", "deny",
        "pending_approvals", "last_result", "history", "clear", "compact",
    }
)  # fmt: skip

#: Seconds past a call's timeout after which the caller stops waiting for a node that does not answer.
UNRESPONSIVE_GRACE = 5.0

#: Ray namespace of the node actors (their names are unique: ``condukt-node-<uuid>``).
NAMESPACE = "condukt"


#: Exported processes a node's table holds past the live ones before it drops those that exited.
EXPORT_SLACK = 4096


@attrs.define
class LocalNode:
    """The condukt node running in this Python process (inside a node actor), if any."""

    node_id: str
    #: Handles of this node that were pickled (sent elsewhere) or spawned through the cluster, by process id.
    #: Strong references: an exited process's handle keeps its exit reason for monitors that arrive late,
    #: until a sweep (when the table has grown by half its live size plus EXPORT_SLACK) drops it.
    exports: dict[int, Handle] = attrs.field(factory=dict)
    cluster: Any = None
    _lock: threading.Lock = attrs.field(factory=threading.Lock)
    _sweep_at: int = EXPORT_SLACK

    def export(self, handle: Handle) -> None:
        """Put ``handle`` in the table (from any thread)."""
        with self._lock:
            exports = self.exports
            if handle.id not in exports:
                exports[handle.id] = handle
                if len(exports) > self._sweep_at:
                    live = {pid: kept for pid, kept in exports.items() if kept.alive}
                    self.exports = live
                    self._sweep_at = len(live) + len(live) // 2 + EXPORT_SLACK


_local: LocalNode | None = None
_actors: dict[str, Any] = {}


def set_local_node(local: LocalNode | None) -> None:
    """Declare the node of this process (called by the node actor)."""
    global _local
    _local = local


def local_node() -> LocalNode | None:
    """The node in this process, or ``None`` (the driver, a plain Ray task)."""
    return _local


def actor_name(node_id: str) -> str:
    """The Ray actor name of a node."""
    return f"condukt-node-{node_id}"


def remember_actor(node_id: str, actor: Any) -> None:
    """Cache the Ray actor handle of a node (the cluster does it for the nodes it starts)."""
    _actors[node_id] = actor


def forget_actors() -> None:
    """Drop the cached actor handles (they belong to the Ray session that is ending)."""
    _actors.clear()


def actor_of(node_id: str) -> Any:
    """The Ray actor of a node, looked up by name once per process."""
    actor = _actors.get(node_id)
    if actor is None:
        try:
            actor = ray.get_actor(actor_name(node_id), namespace=NAMESPACE)
        except ValueError as exc:
            from ._bridge import NodeDown

            raise NodeDown(node_id) from exc
        _actors[node_id] = actor
    return actor


def reduce_handle(node_id: str, handle: Handle) -> tuple[Any, tuple[Any, ...]]:
    """How a node's local handle pickles: exported, then rebuilt as a :class:`ClusterHandle`."""
    local = _local
    if local is not None:
        local.export(handle)
    agent = hasattr(handle, "run") and hasattr(handle, "stream")
    return (ClusterHandle, (node_id, handle.id, handle.name, agent))


class ClusterHandle:
    """A process anywhere in a :mod:`condukt.ray` cluster; pickles to (node id, process id).

    Works from the driver, from any node and from inside a tool: on the
    process's own node every method goes straight to the local
    :class:`condukt.Handle`; elsewhere it is one Ray actor call to that node.
    ``call``, ``cast``, ``send``, ``stop``, ``kill`` and ``wait`` are those of
    :class:`condukt.Handle`; an agent's handle also has every
    :class:`condukt.AgentHandle` method (``run``, ``stream``, ``abort``,
    ``history``, ... with their timeouts), each awaited.

    Two cluster handles are equal when they name the same process. A handle
    to a process on a node that is gone raises :class:`NodeDown` (a
    :class:`condukt.NoProc`).
    """

    __slots__ = ("__weakref__", "_cached", "agent", "id", "name", "node_id")

    def __init__(self, node_id: str, pid: int, name: Hashable | None = None, agent: bool = False) -> None:
        #: The node's id (a string unique to that node's incarnation).
        self.node_id = node_id
        #: The process id within its node.
        self.id = pid
        #: The name it was spawned under, or ``None``.
        self.name = name
        #: Whether it is an agent (has the :class:`condukt.AgentHandle` methods).
        self.agent = agent
        self._cached: Handle | None = None

    def __reduce__(self) -> tuple[Any, tuple[Any, ...]]:
        return (ClusterHandle, (self.node_id, self.id, self.name, self.agent))

    def __eq__(self, other: object) -> bool:
        return isinstance(other, ClusterHandle) and (other.node_id, other.id) == (self.node_id, self.id)

    def __hash__(self) -> int:
        return hash((self.node_id, self.id))

    def __repr__(self) -> str:
        name = f" {self.name!r}" if self.name is not None else ""
        return f"<ClusterHandle {self.node_id}#{self.id}{name}>"

    @property
    def local(self) -> Handle | None:
        """The plain :class:`condukt.Handle` when the process runs in this Python process, else ``None``.

        Raises :class:`condukt.NoProc` for a process of this node that is gone.
        """
        cached = self._cached
        if cached is not None:
            return cached
        node = _local
        if node is None or node.node_id != self.node_id:
            return None
        handle = node.exports.get(self.id)
        if handle is None:
            raise NoProc(f"no process {self.id} on node {self.node_id}")
        self._cached = handle
        return handle

    async def _invoke(self, method: str, *args: Any, **kwargs: Any) -> Any:
        local = self.local
        if local is not None:
            result = getattr(local, method)(*args, **kwargs)
            if hasattr(result, "__await__"):
                result = await result
            return result
        ref = actor_of(self.node_id).invoke.remote((self.id, method, args, kwargs))
        return unwrap(await await_ref(ref, self.node_id))

    async def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """:meth:`condukt.Handle.call`, wherever the process runs.

        The process's node enforces ``timeout`` (:class:`condukt.CallTimeout`);
        a node that does not answer at all (hung, or its machine gone without
        Ray noticing yet) raises it too, 5 s past ``timeout``.

        Cancellation: cancelling the caller cancels the Ray call and, on the
        node, the operation it awaits (as for a local caller).
        """
        local = self.local
        if local is not None:
            return await local.call(request, timeout)
        ref = actor_of(self.node_id).invoke.remote((self.id, "call", (request, timeout), {}))
        # The node enforces ``timeout``; the grace bounds a node that stopped answering altogether.
        within = None if timeout is None else timeout + UNRESPONSIVE_GRACE
        return unwrap(await await_ref(ref, self.node_id, within))

    async def cast(self, message: Any) -> None:
        """:meth:`condukt.Handle.cast`: returns once the message is in the mailbox.

        Cancellation: cancelling the caller cancels the Ray call and, on the
        node, the operation it awaits (as for a local caller).
        """
        await self._invoke("cast", message)

    async def send(self, message: Any) -> None:
        """:meth:`condukt.Handle.send`: a raw message to ``handle_info``.

        Cancellation: cancelling the caller cancels the Ray call and, on the
        node, the operation it awaits (as for a local caller).
        """
        await self._invoke("send", message)

    async def stop(self, reason: Any = "normal", timeout: float | None | str = "default") -> None:
        """:meth:`condukt.Handle.stop`: stop the process and wait until it has exited.

        Cancellation: cancelling the caller cancels the Ray call and, on the
        node, the operation it awaits (as for a local caller).
        """
        await self._invoke("stop", reason, timeout)

    async def kill(self) -> None:
        """:meth:`condukt.Handle.kill` (awaited here: it may cross nodes).

        Cancellation: cancelling the caller cancels the Ray call and, on the
        node, the operation it awaits (as for a local caller).
        """
        await self._invoke("kill")

    async def wait(self) -> Any:
        """Wait for the exit; returns the exit reason (``"noconnection"`` if its node is lost).

        From another node, a process that exited before the wait began may
        give ``"noproc"`` (its node keeps no record of exited processes);
        to learn a reason for sure, monitor before the exit.

        Cancellation: cancelling the caller cancels the Ray call and, on the
        node, the operation it awaits (as for a local caller).
        """
        local = self.local
        if local is not None:
            return await local.wait()
        from ._bridge import NodeDown

        try:
            (reason,) = await await_ref(actor_of(self.node_id).wait_exit.remote(self.id), self.node_id)
            return reason
        except NodeDown:
            return "noconnection"

    def stream(self, *args: Any, **kwargs: Any) -> Any:
        """:meth:`condukt.AgentHandle.stream` across nodes: ``async with h.stream(prompt) as events``.

        Events travel in batches pulled by the reader; the agent's node
        holds at most the stream's buffer for a slow reader, then the run
        waits (backpressure, as on one node). Leaving the block early
        aborts the run.
        """
        self._need_agent("stream")
        local: Any = self.local
        if local is not None:
            return local.stream(*args, **kwargs)
        return RemoteStream(self, args, kwargs)

    def _need_agent(self, what: str) -> None:
        if not self.agent:
            raise AttributeError(f"{self!r} is not an agent: no {what}()")

    def __getattr__(self, method: str) -> Any:
        if not self.agent or method not in AGENT_METHODS:
            raise AttributeError(f"{type(self).__name__} has no attribute {method!r}")

        async def remote_method(*args: Any, **kwargs: Any) -> Any:
            return await self._invoke(method, *args, **kwargs)

        remote_method.__name__ = method
        return remote_method


class RemoteStream:
    """The events of one run on another node (see :meth:`ClusterHandle.stream`)."""

    def __init__(self, handle: ClusterHandle, args: tuple[Any, ...], kwargs: dict[str, Any]) -> None:
        self._handle = handle
        self._args = args
        self._kwargs = kwargs
        self._sid: int | None = None
        self._batch: list[Any] = []
        self._ended = False
        #: The final text once the run completed.
        self.result: str | None = None
        #: The :class:`~condukt.events.Error` event if the run failed.
        self.error: Any = None
        #: The run's id.
        self.run_id = ""

    async def __aenter__(self) -> RemoteStream:
        handle = self._handle
        ref = actor_of(handle.node_id).stream_open.remote(handle.id, self._args, self._kwargs)
        self._sid, self.run_id = unwrap(await await_ref(ref, handle.node_id))
        return self

    def __aiter__(self) -> RemoteStream:
        return self

    async def __anext__(self) -> Any:
        while not self._batch:
            if self._ended:
                raise StopAsyncIteration
            handle = self._handle
            ref = actor_of(handle.node_id).stream_next.remote(self._sid)
            events, ended, result, error = unwrap(await await_ref(ref, handle.node_id))
            self._batch = list(reversed(events))
            if ended:
                self._ended, self.result, self.error = True, result, error
        return self._batch.pop()

    async def __aexit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if self._sid is None or self._ended:
            return
        handle = self._handle
        with trio.CancelScope(shield=True):
            try:
                await await_ref(actor_of(handle.node_id).stream_close.remote(self._sid), handle.node_id)
            except NoProc:
                pass
