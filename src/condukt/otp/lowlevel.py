"""Extension points for code that builds on the runtime (like :mod:`trio.lowlevel`).

Application code needs none of this: :class:`~condukt.Server`,
:class:`~condukt.Handle` and the node are enough. Layers that build their
own behaviours on :class:`~condukt.Server` (condukt's agents are one) use
these names instead of reaching into the runtime's private state. They are
public and documented, with weaker stability promises than the main API.

A behaviour is a :class:`~condukt.Server` subclass that owns the callbacks
and offers its users callbacks of its own. Besides the names below it uses
four class-level hooks of :class:`~condukt.Server`:

* :attr:`Server.handle_class` — the :class:`~condukt.Handle` subclass
  (``__slots__ = ()``) that ``spawn`` and ``start_child`` return, carrying
  the behaviour's client API; type checkers follow it (see :class:`Spawnable`).
* :meth:`Server.boot` — what the runtime runs at start (default: ``init``);
  a behaviour does its own set-up around its users' ``init`` here.
* :meth:`Server.needs_terminate` — whether ``terminate`` has work at exit
  (skipping it saves a shielded cancel scope per exit).
* :attr:`Server.nursery_at_start` — open the process's task nursery when
  its loop starts, its cancel scope doubling as the process's (one cancel
  scope per process instead of two, for behaviours that start a task for
  most of their work).

A behaviour whose calls start awaited work can also answer through
:meth:`Server.handle_call_now` and have the waiting caller's task do that
work (:meth:`Caller.host`, :attr:`Process.exiting`), as agents do for runs.

See "Writing your own behaviour" in ``docs/runtime.md``.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable
from typing import Any

import outcome

from . import _node
from ._calls import call_with_callback as _call_with_callback
from ._calls import start_call as _start_call
from ._handle import Handle
from ._monitors import MonitorRef, _add_monitor, _remove_monitor
from ._node import Node, run_default_node
from ._process import Process
from ._remote import RemoteHandle, RemoteProcesses
from ._server import Server
from ._signals import ExitReason
from ._spawnable import Spawnable

__all__ = [
    "Process",
    "RemoteHandle",
    "RemoteProcesses",
    "Spawnable",
    "call_with_callback",
    "exit_signal",
    "on_exit",
    "process_of",
    "run_default_node",
    "send_system",
    "server_of",
    "set_handle_reducer",
    "set_activator",
    "set_remote_processes",
    "start_call",
]


def process_of(handle: Handle) -> Process | None:
    """The :class:`Process` (the state of the incarnation) ``handle`` names, or ``None`` once it has exited.

    For introspection (``mailbox_length``, ``stopping``) and for a
    behaviour's handle methods. Synchronous; never raises.
    """
    return handle._process


def call_with_callback(
    handle: Handle, request: Any, timeout: float | None, deliver: Callable[[outcome.Outcome[Any]], None]
) -> Callable[[], None] | None:
    """Send ``request`` to the process's ``handle_call`` with no task waiting: ``deliver`` gets the answer.

    What :meth:`Handle.call` does, for a bridge that answers a caller
    outside trio (:mod:`condukt.ray` answers a Ray actor method on its
    asyncio loop): ``deliver(outcome)`` is called once, synchronously, in
    the node's trio run, with an :class:`outcome.Value` of the reply or an
    :class:`outcome.Error` (:class:`CallTimeout` after ``timeout`` seconds,
    :class:`CallError` if the process exits first, whatever the server
    passed to ``caller.reply_error``). It must not block or raise. It may
    be called before this function returns (an idle process whose
    ``Server.handle_call_now`` answers at once).

    Call it from the node's trio thread (a task or a ``run_sync_soon``
    callback). Returns a function that withdraws the request (the server
    skips it if it has not started on it; a later answer is dropped, and
    ``deliver`` is not called), or ``None`` when the mailbox is full: then
    nothing was sent; wait for room with :meth:`Handle.call`. Raises
    :class:`NoProc` if the process is not alive. An idle process whose
    server has :meth:`~condukt.Server.handle_call_now` handles the request
    right here, in this call (``deliver`` may then be called before this
    returns).

    Measured in one trio run on the loaded 2-core test machine (trio
    0.35): answering a call through a task spawned for it, in a cancel
    scope, woken for the reply, took 94–108 µs per call against 28–30 µs
    for the plain ``call``; the task, its scope and the extra wake are what
    this saves a cluster node per cross-node call.
    """
    return _call_with_callback(handle, request, timeout, deliver)


def start_call(handle: Handle, request: Any, timeout: float | None = 5.0) -> Awaitable[Any]:
    """Send ``request`` to the process's ``handle_call`` now; await the result for the reply.

    ``await start_call(handle, request, timeout)`` is ``await
    handle.call(request, timeout)`` (same errors, same cancellation: an
    unanswered request is withdrawn), without a coroutine frame of its own
    between the caller and the wait: for a behaviour's handle method that
    wraps one call (an agent's ``run``), a frame less on every resume and
    an object less per call in flight. Call it from the task that awaits
    the result, and await it at once: the request is sent, and the reply
    addressed to the current task, when it is called. (Not for
    ``nursery.start_soon(start_call, ...)``: that calls it in the parent
    task; use :meth:`Handle.call` there.) An idle process whose server has
    :meth:`~condukt.Server.handle_call_now` handles the request right here,
    in the calling task.
    """
    return _start_call(handle, request, timeout)


def send_system(handle: Handle, message: Any) -> None:
    """Deliver ``message`` to the process's ``handle_info`` now, past its mailbox capacity.

    For runtime-level notices whose number the sender bounds itself (one
    per run, per monitor, per timer): they must neither block nor fail on a
    full mailbox. A message to a process that has exited is dropped.
    Synchronous: never blocks, never raises.
    """
    handle._system(message)


def server_of(handle: Handle) -> Server | None:
    """The :class:`Server` instance a live process runs, or ``None`` once it has exited.

    For a behaviour's own handle class (an agent's handle reading its
    agent's state). The instance belongs to the process: read it, do not
    call its callbacks from outside. Synchronous; never raises.
    """
    proc = handle._process
    return None if proc is None else proc._server


def set_handle_reducer(node: Node, reducer: Callable[[Handle], Any] | None) -> None:
    """Make ``node``'s handles picklable: ``pickle`` calls ``reducer(handle)`` for one.

    ``reducer`` returns what :meth:`object.__reduce__` returns (a callable and
    its arguments) for a stand-in that reaches the process from another
    Python process; it runs in the pickling thread, so it must not block.
    ``None`` (the default for every node) makes pickling a handle raise
    :class:`TypeError`: a plain node's handles mean nothing elsewhere.
    :mod:`condukt.ray` sets one on each node of a cluster.
    """
    node._handle_reducer = reducer


def set_remote_processes(node: Node, remote: RemoteProcesses | None) -> None:
    """Let ``node``'s monitors and links reach processes of other nodes through ``remote``.

    With it, ``node.monitor``, :meth:`Server.monitor`, :meth:`Server.demonitor`,
    :meth:`Server.link` and :meth:`Server.unlink` take the references
    ``remote`` knows (its :meth:`RemoteProcesses.local` does not raise
    :class:`TypeError` for them) where they take a :class:`Handle`: a
    reference to a process of this node is used as its local handle, one to
    another node's process goes to ``remote.watch``/``link``/``unlink``.
    ``None`` (every node's default) makes those APIs raise
    :class:`TypeError` for anything but a :class:`Handle`. :mod:`condukt.ray`
    sets one on each node of a cluster.
    """
    node._remote_processes = remote


def exit_signal(handle: Handle, sender: Any, reason: ExitReason) -> None:
    """Deliver the exit signal of a process linked with ``handle`` that exited with ``reason``.

    What a local link does when ``sender`` exits: a process with
    ``trap_exits`` gets ``Exit(sender, reason)`` in ``handle_info``;
    otherwise any reason but ``"normal"`` stops it with that reason. For a
    :class:`RemoteProcesses` delivering a remote link's signal. Does nothing
    for a process that has exited or is stopping. Synchronous; never raises.
    """
    proc = handle._process
    if proc is not None:
        proc._exit_signal(sender, reason)


class _ExitCallback:
    __slots__ = ("_callback",)

    def __init__(self, callback: Callable[[ExitReason], None]) -> None:
        self._callback = callback

    def _on_down(self, down: Any) -> None:
        self._callback(down.reason)


def on_exit(handle: Handle, callback: Callable[[ExitReason], None]) -> Callable[[], None]:
    """Call ``callback(reason)`` once, synchronously in the node's trio run, when ``handle``'s process exits.

    A monitor with no mailbox and no task: for an extension that must
    clean up when a local process exits (a :class:`RemoteProcesses` ending
    the remote watches of a process that is gone). An exited process calls
    it at once with ``"noproc"``. Returns a function that removes it.
    ``callback`` must not block or raise. Synchronous; never raises.
    """
    ref: MonitorRef = _add_monitor(handle, _ExitCallback(callback))
    return lambda: _remove_monitor(ref)


def set_activator(activator: Callable[[Node, Any, str, dict[str, Any]], Awaitable[Any]] | None) -> None:
    """What :meth:`Node.agent` calls: ``await activator(node, cls, key, options)`` returns the handle.

    :mod:`condukt.virtual` sets it when imported (``import condukt`` does);
    the runtime itself knows nothing of agents or stores.
    """
    _node._activator = activator
