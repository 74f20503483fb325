"""Processes of other nodes: how ``monitor`` and ``link`` reach them through a node's extension.

The runtime knows only its own node's processes. A layer that connects
nodes (:mod:`condukt.ray`) gives a node a :class:`RemoteProcesses` with
:func:`condukt.otp.lowlevel.set_remote_processes`; from then on
``node.monitor``, ``Server.monitor``/``demonitor`` and
``Server.link``/``unlink`` accept that layer's references to processes
(its handles) as they accept a local :class:`Handle`, as Erlang's
``monitor/2`` and ``link/1`` take a remote pid. On a node without one they
raise :class:`TypeError` saying what to use.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import TYPE_CHECKING, Any, Protocol

from ._monitors import MonitorRef
from ._signals import Down, ExitReason

if TYPE_CHECKING:
    from ._handle import Handle
    from ._node import Node

__all__ = ["RemoteHandle", "RemoteMonitorRef", "RemoteProcesses", "monitor_any", "remote_for"]


class RemoteHandle(Protocol):
    """A reference to a process of another node, as a node's :class:`RemoteProcesses` knows it.

    ``condukt.ray.ClusterHandle`` is one. The monitoring and linking APIs
    take one where they take a :class:`Handle`, on a node that has the
    extension (else :class:`TypeError`).
    """

    @property
    def id(self) -> int:
        """The process id within its node."""
        ...

    async def wait(self) -> ExitReason:
        """Wait for the process's exit and return its reason. Cancellation stops the waiting only."""
        ...


class RemoteProcesses(Protocol):
    """What a node needs to monitor and link other nodes' processes (see ``lowlevel.set_remote_processes``).

    Every method is called synchronously in the node's trio run and must
    neither block nor await.
    """

    def local(self, target: Any) -> Handle | None:
        """``target``'s plain :class:`Handle` when it names a live process of this node, else ``None``.

        Raises :class:`TypeError` for an object that is no reference to a process this extension knows.
        """
        ...

    def watch(self, target: Any, on_exit: Callable[[ExitReason], None], watcher: Handle | None) -> Callable[[], None]:
        """Call ``on_exit(reason)`` once, in this node's trio run, when the process ``target`` exits.

        ``reason`` is its exit reason, ``"noproc"`` if it was already gone
        and ``"noconnection"`` if its node is lost. ``watcher`` is the local
        process the watch is for (the watch may end when it exits) or
        ``None``. Returns a function that ends the watch (``on_exit`` is not
        called after it). Never raises for a process that is gone.
        """
        ...

    def link(self, local: Handle, target: Any) -> None:
        """Link the local process ``local`` with the remote process ``target``, both ways.

        ``target``'s exit reaches ``local`` as an exit signal (deliver it
        with :func:`~condukt.otp.lowlevel.exit_signal`), and ``local``'s
        exit reaches ``target`` the same way on its node. Linking twice is
        linking once.
        """
        ...

    def unlink(self, local: Handle, target: Any) -> None:
        """Remove the link of :meth:`link`, both ways; nothing if there is none."""
        ...


def remote_for(node: Node, target: object, what: str) -> RemoteProcesses:
    """The node's extension for references to other nodes' processes, or the :class:`TypeError` to raise."""
    remote: RemoteProcesses | None = node._remote_processes
    if remote is None:
        raise TypeError(
            f"{what} takes a condukt.Handle, got {type(target).__name__} {target!r}: this node reaches no other"
            " node. A condukt.ray.ClusterHandle is accepted on the nodes of a condukt.ray cluster; from outside"
            " one (the driver) use cluster.monitor(handle), or condukt.ray.monitor/link"
        )
    return remote


class RemoteMonitorRef(MonitorRef):
    """A monitor set through a reference the node's :class:`RemoteProcesses` knows.

    Its :class:`Down` carries that reference (as it was given), wherever the
    process runs.
    """

    __slots__ = ("_cancel", "_given")

    def __init__(self, target: Any, watcher: Any, given: Any) -> None:
        super().__init__(target, watcher)
        self._given = given
        self._cancel: Callable[[], None] | None = None

    @property
    def target(self) -> Any:
        """The monitored process, as the monitor was given it."""
        return self._given

    def _down(self, reason: ExitReason) -> None:
        self._cancel = None
        self._watcher._on_down(Down(self._given, reason, self))

    def _remove(self) -> bool:
        """End a watch of another node's process; ``False`` for a monitor of a local process."""
        if self._target is None:  # a process of another node
            cancel, self._cancel = self._cancel, None
            if cancel is not None:
                cancel()
            return True
        return False


def monitor_any(node: Node, target: Any, watcher: Any, watching: Handle | None, what: str) -> MonitorRef:
    """Monitor ``target``, a reference the node's :class:`RemoteProcesses` knows, for ``watcher``."""
    remote = remote_for(node, target, what)
    local = remote.local(target)
    if local is not None:
        ref = RemoteMonitorRef(local, watcher, target)
        proc = local._process
        if proc is None:
            ref._down("noproc")
        else:
            if proc._monitors is None:
                proc._monitors = {}
            proc._monitors[ref] = None
        return ref
    ref = RemoteMonitorRef(None, watcher, target)
    ref._cancel = remote.watch(target, ref._down, watching)
    return ref

