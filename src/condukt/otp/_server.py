"""The :class:`Server` behaviour (OTP's ``gen_server``): what a process runs, and what it may do.

Subclass it and override the callbacks; the runtime (``_process``) owns the
loop that calls them. Its helpers (``monitor``, ``link``, ``stop``,
``send_after``, ``start_soon``) act on the process running the instance.
"""

from __future__ import annotations

import logging
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any, ClassVar

import trio

from ._errors import ConduktError, NoProc
from ._handle import Handle
from ._monitors import MonitorRef, _add_monitor, _remove_monitor
from ._remote import RemoteHandle, monitor_any, remote_for
from ._signals import ExitReason
from ._timers import TimerRef

if TYPE_CHECKING:
    from ._caller import Caller
    from ._node import Node

__all__ = ["Server", "UnhandledMessage"]

logger = logging.getLogger("condukt.otp")


class UnhandledMessage(ConduktError):
    """A server received a call or cast its class does not handle (OTP crashes too)."""


class Server:
    """The behaviour of a process (OTP's ``gen_server``): subclass and override callbacks.

    Start one with ``await node.spawn(MyServer, *args, **kwargs)`` or a
    :class:`ChildSpec`; ``init(*args, **kwargs)`` runs before ``spawn``
    returns (an exception there is raised by ``spawn`` and nothing is left
    running; returning :data:`IGNORE` leaves nothing running either, and
    ``spawn`` returns a dead handle). Then the process serves its mailbox
    one message at a time:

    * ``handle_call(request, caller)`` -> the reply (or :data:`NO_REPLY`),
    * ``handle_cast(message)``,
    * ``handle_info(message)`` for raw sends, :class:`Down`, :class:`Exit`
      and ``send_after`` messages,
    * ``terminate(reason)`` when it stops, is stopped by its supervisor, is
      killed by a link, or crashed in a callback (not after a failed or
      ignored ``init`` or a kill). OTP calls ``terminate`` on a supervisor's
      shutdown only for processes trapping exits; condukt always does, within
      the ``shutdown`` budget, because Python code holds resources that want
      closing.

    An exception escaping a callback crashes the process with that exception
    as its exit reason; one escaping ``terminate`` replaces the exit reason,
    whatever it was (as in OTP).
    """

    #: The handle type ``spawn`` and ``start_child`` return for this class. A
    #: behaviour sets a :class:`Handle` subclass (``__slots__ = ()``) carrying
    #: its client API; type checkers read this attribute, so ``node.spawn(cls)``
    #: is typed as that subclass with no type parameters written anywhere.
    handle_class: ClassVar[type[Handle]] = Handle
    #: Receive :class:`Exit` messages from linked processes instead of dying with them.
    trap_exits: bool = False
    #: Low-level hook: open the process's task nursery as soon as its loop
    #: starts, its cancel scope doubling as the process's. For behaviours whose
    #: processes start a task for most of their work (an agent starts one per
    #: run): it saves a cancel scope per process; a process that never starts
    #: a task pays for a nursery instead (``benchmarks/agent_instructions.py``
    #: and ``benchmarks/otp_instructions.py`` count both).
    nursery_at_start: ClassVar[bool] = False
    # Supervisors open their children's nursery before ``init`` runs.
    _eager_nursery: ClassVar[bool] = False
    #: Seconds idle after which the process hibernates (OTP's ``hibernate_after``
    #: start option): its task ends and :meth:`on_hibernate` compacts its state;
    #: the next message (call, cast, send, stop) starts it again, after
    #: :meth:`on_wake`. ``None``: never (a start's ``hibernate_after=`` overrides it).
    hibernate_after: ClassVar[float | None] = None

    handle: Handle

    async def boot(self, *args: Any, **kwargs: Any) -> Any:
        """Low-level hook for behaviours built on Server: what the runtime runs at start.

        The default runs :meth:`init` and returns what it returned. A
        behaviour (like ``condukt.Agent``) overrides it to do its own set-up
        around its users' ``init``. Application servers override ``init``,
        never this. Like ``init`` it runs before the start returns and is
        cancelled with the start; what it raises fails the start, with
        nothing left running; returning :data:`IGNORE` makes the start a
        no-op (any other return value is ignored). See
        :mod:`condukt.otp.lowlevel`.
        """
        return await self.init(*args, **kwargs)

    def needs_terminate(self) -> bool:
        """Low-level hook: whether :meth:`terminate` has work to do at exit.

        Skipping it saves a shielded cancel scope per exit. The default is
        true when the class overrides ``terminate``; behaviours whose
        ``terminate`` only sometimes has work refine it.
        """
        return type(self).terminate is not Server.terminate

    @classmethod
    def default_hibernate_after(cls, node: Node) -> float | None:
        """Low-level hook: the ``hibernate_after`` of a start that gives none.

        The default is the class's :attr:`hibernate_after`. A behaviour may
        fall back on a per-node setting (:class:`condukt.Agent` uses the
        node's ``open_node(hibernate_after=)``). Synchronous.
        """
        return cls.hibernate_after

    def on_hibernate(self) -> bool:
        """Compact the state of an idle process about to hibernate; return whether it did.

        Called synchronously, from the process's task, when it has been idle
        for ``hibernate_after`` seconds: no callback runs, the mailbox is
        empty, no task of the process runs. Drop caches, fold object graphs
        into compact values; :meth:`on_wake` undoes it before the next callback.
        Returning ``False`` keeps the state as it is (the task still ends:
        an idle process needs none). The default does nothing and returns
        ``False``. An exception is logged and leaves the process awake.
        """
        return False

    def on_wake(self) -> None:
        """Restore what :meth:`on_hibernate` compacted, before the process handles its next message.

        Synchronous (it may run in the task of a caller whose call the
        process answers at once, see :meth:`handle_call_now`). Called only
        after a :meth:`on_hibernate` that returned ``True``. An exception
        crashes the process, as one from a callback does.
        """

    async def init(self, *args: Any, **kwargs: Any) -> Any:
        """Set up state from the ``spawn`` arguments. Runs before ``spawn`` returns.

        Return nothing to run. Return :data:`IGNORE` to not run after all
        (OTP's ``ignore``): the process exits with reason ``"normal"``, no
        ``terminate``, and the start returns its handle, already dead. Raise
        to fail the start. It runs in the starting task: cancelling the start
        cancels it, and nothing is left running or registered. (A supervisor's
        restart runs it in the background instead; see docs/runtime.md.)
        """
        if args or kwargs:
            raise TypeError(
                f"{type(self).__name__}.init() takes no arguments; "
                f"override init to accept {args!r} {kwargs!r}"
            )

    def handle_call_now(self, request: Any, caller: Caller) -> Any:
        """Optionally answer (or start answering) a call at once, in the calling task, while the process is idle.

        Not in OTP: a fast path for calls a server handles without waiting.
        When the process is parked on an empty mailbox (nothing queued before
        the call, no callback running), :func:`condukt.otp.lowlevel.start_call` and
        :func:`~condukt.otp.lowlevel.call_with_callback` call this instead of
        queueing the request for the process's task, which saves that task a
        scheduling round per call. It runs in the process's context
        variables, synchronously: return the reply, :data:`NO_REPLY` (answer
        later through ``caller``), or ``NotImplemented`` to take the mailbox
        path (the default, for every request). It must not block; an
        exception crashes the process, as one from :meth:`handle_call` does.
        It runs even if the calling task is already cancelled (where the
        mailbox would skip the withdrawn call): a handle method whose call
        starts work checks first, as ``AgentHandle.run`` does with
        ``trio.lowlevel.checkpoint_if_cancelled()`` (checking here with
        ``trio.current_effective_deadline()``, which walks every enclosing
        cancel scope, measured +13.9k instructions per agent run, 4.5%).
        ``trio.lowlevel.current_task()`` is the caller's task (or none, from
        a guest run's host loop), not the process's.

        For a call whose answer needs awaited work, ``caller.host`` lets
        the calling task do that work (see :meth:`Caller.host`).

        Measured (callgrind, an agent's run on a running agent, which
        :class:`condukt.Agent` starts this way): 342k instructions per run
        through the mailbox, 307k this way with a worker task for the run,
        272k with the run hosted by the caller (docs/benchmarks.md).
        """
        return NotImplemented

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        """Answer a :meth:`Handle.call`. The default crashes, as OTP does for an unknown call.

        The caller giving up (timeout, cancellation) does not cancel it: the
        reply is dropped. Only the process stopping cancels it.
        """
        raise UnhandledMessage(f"{type(self).__name__} does not handle call {request!r}")

    async def handle_cast(self, message: Any) -> None:
        """Handle a :meth:`Handle.cast`. The default crashes, as OTP does.

        Only the process stopping cancels it (a stop, a kill, a linked crash).
        """
        raise UnhandledMessage(f"{type(self).__name__} does not handle cast {message!r}")

    async def handle_info(self, message: Any) -> None:
        """Handle raw sends, :class:`Down`, :class:`Exit` and timers. The default drops them.

        Only the process stopping cancels it.
        """
        logger.debug("%r dropped unexpected message %r", self.handle, message)

    async def terminate(self, reason: ExitReason) -> None:
        """Clean up before the process exits; bounded by the ``shutdown`` budget.

        Shielded from the cancellation that stopped the process; cancelled
        when the budget runs out or the process is killed. What it raises is
        logged and becomes the exit reason (OTP's rule), and makes a
        ``Handle.stop`` waiting for this exit raise :class:`CallError`.
        """

    # ------------------------------------------------------------------ helpers

    @property
    def node(self) -> Node:
        """The node this process runs on."""
        return self.handle._node

    def monitor(self, other: Handle | RemoteHandle) -> MonitorRef:
        """Get a :class:`Down` in ``handle_info`` when ``other`` exits.

        If ``other`` is already dead the ``Down`` (reason ``"noproc"``) is
        delivered at once. On a node of a :mod:`condukt.ray` cluster
        ``other`` may be a ``ClusterHandle`` of a process on any node (the
        ``Down`` carries it; reason ``"noconnection"`` when its node is
        lost); on a plain node anything but a :class:`Handle` raises
        :class:`TypeError`. Synchronous; never raises otherwise.
        """
        if isinstance(other, Handle):
            return _add_monitor(other, self.handle)
        me = self.handle
        return monitor_any(me._node, other, me, me, "Server.monitor()")

    def demonitor(self, ref: MonitorRef) -> None:
        """Remove a monitor; no ``Down`` is delivered for it afterwards (unless already queued)."""
        _remove_monitor(ref)

    def link(self, other: Handle | RemoteHandle) -> None:
        """Link with ``other``: an abnormal exit of either kills the other.

        A process with ``trap_exits`` receives :class:`Exit` instead of dying.
        Linking to a dead process behaves as in OTP: the caller gets an exit
        signal with reason ``"noproc"``. On a node of a :mod:`condukt.ray`
        cluster ``other`` may be a ``ClusterHandle`` of a process on any
        node (a lost node is an exit with reason ``"noconnection"``); on a
        plain node anything but a :class:`Handle` raises :class:`TypeError`.
        Synchronous; never raises otherwise; does nothing once this process
        has exited.
        """
        me = self.handle
        if not isinstance(other, Handle):
            remote = remote_for(me._node, other, "Server.link()")
            local = remote.local(other)
            if local is None:
                if me._process is not None:
                    remote.link(me, other)
                return
            other = local
        mine = me._process
        if other is me or mine is None:
            return
        theirs = other._process
        if theirs is None:
            mine._exit_signal(other, "noproc")
            return
        if mine._links is None:
            mine._links = set()
        if theirs._links is None:
            theirs._links = set()
        mine._links.add(other)
        theirs._links.add(me)

    def unlink(self, other: Handle | RemoteHandle) -> None:
        """Remove a link (both directions). Takes what :meth:`link` takes. Synchronous; never raises otherwise."""
        me = self.handle
        if not isinstance(other, Handle):
            remote = remote_for(me._node, other, "Server.unlink()")
            local = remote.local(other)
            if local is None:
                remote.unlink(me, other)
                return
            other = local
        mine = me._process
        if mine is not None and mine._links:
            mine._links.discard(other)
        theirs = other._process
        if theirs is not None and theirs._links:
            theirs._links.discard(me)

    def stop(self, reason: ExitReason = "normal") -> None:
        """Stop this process after the current callback returns (then ``terminate`` runs).

        Synchronous; never raises; does nothing if the process is already
        exiting.
        """
        proc = self.handle._process
        if proc is None or proc._stop is not None:
            return
        proc._stop = (reason, True, proc._shutdown)
        proc._wake()

    def send_after(self, seconds: float, message: Any) -> TimerRef:
        """Deliver ``message`` to this process's ``handle_info`` after ``seconds``.

        Synchronous. A timer of a process that has exited fires into nothing.
        """
        me = self.handle
        ref = TimerRef(me, message)
        me._node._timers.schedule(trio.current_time() + seconds, ref)
        return ref

    def start_soon(self, fn: Callable[..., Awaitable[Any]], *args: Any) -> None:
        """Run ``fn(*args)`` as a task inside this process.

        The task is cancelled when the process exits; an exception escaping
        it crashes the process. The process keeps serving its mailbox.
        Synchronous. Raises :class:`NoProc` if the process has exited.
        """
        me = self.handle
        proc = me._process
        if proc is None:
            raise NoProc(f"{me!r} is not alive")
        if proc._nursery is not None:
            proc._nursery.start_soon(fn, *args)
            return
        if proc._pending is None:
            proc._pending = []
        proc._pending.append((fn, args))
        proc._wake()
