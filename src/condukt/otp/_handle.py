"""Handles: :class:`Handle`, the name of one incarnation of a process (Python's stand-in for a PID).

A handle holds what names the process (node, pid, name, server class) and,
while the process runs, a reference to its :class:`~condukt.otp.lowlevel.Process`;
on exit it drops that reference and keeps the exit reason, so a handle of a
dead incarnation is small, cannot reach stale state, and reports
``alive == False``. Its methods are the client side of a process: call,
cast, send, stop, kill, wait. Each costs one attribute hop
(``handle._process``) and no allocation per message.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Hashable
from typing import TYPE_CHECKING, Any

import trio
from trio.lowlevel import Abort, checkpoint, checkpoint_if_cancelled, current_task, wait_task_rescheduled

from ._caller import _post_call
from ._errors import CallError, CallingSelf, CallTimeout, MailboxFull, NoProc
from ._process import _CAST, _DEAD, _INFO
from ._signals import Down, ExitReason

if TYPE_CHECKING:
    from ._node import Node
    from ._process import Process
    from ._server import Server

__all__ = ["Handle"]


class Handle:
    """A reference to one incarnation of a process (Python's stand-in for a PID).

    Handles are cheap, hashable by identity and safe to keep: once the process
    exits, :attr:`alive` is ``False``, :attr:`exit_reason` says why, and every
    operation raises :class:`NoProc`. A restarted child is a *new* incarnation
    with a new handle; find it with ``node.whereis(name)``.

    A handle holds only what names the process (node, id, name, server class)
    and, while it runs, a reference to its :class:`Process`, the state of that
    incarnation; on exit it drops the reference and keeps the exit reason.
    The runtime makes handles (``spawn``, ``start_child``); a behaviour may
    subclass ``Handle`` (with ``__slots__ = ()``) to add methods, named by
    its ``Server.handle_class``.
    """

    __slots__ = ("__weakref__", "_cls", "_exit_reason", "_name", "_node", "_pid", "_process")

    def __init__(self, node: Node, cls: type[Server], name: Hashable | None = None) -> None:
        self._node = node
        self._pid = node._new_pid()
        self._cls = cls
        self._name = name
        # Set by the Process made for this handle; ``None`` again once it exits.
        self._process: Process | None = None
        self._exit_reason: ExitReason = None

    # ------------------------------------------------------------------ public

    @property
    def id(self) -> int:
        """This incarnation's process id, unique within its node."""
        return self._pid

    @property
    def name(self) -> Hashable | None:
        """The registered name, or ``None``."""
        return self._name

    @property
    def alive(self) -> bool:
        """``False`` once the process has exited (for good: handles never revive)."""
        return self._process is not None

    @property
    def exit_reason(self) -> ExitReason:
        """Why the process exited; ``None`` while it is alive."""
        return self._exit_reason

    @property
    def node(self) -> Node:
        """The node this process runs on."""
        return self._node

    @property
    def server_class(self) -> type[Server]:
        """The :class:`Server` subclass this process runs."""
        return self._cls

    def __repr__(self) -> str:
        name = f" {self._name!r}" if self._name is not None else ""
        state = "alive" if self._process is not None else f"dead: {self._exit_reason!r}"
        return f"<{type(self).__name__} #{self._pid}{name} {self._cls.__name__} {state}>"

    def __reduce__(self) -> Any:
        # A handle names a process of one node: it pickles only when that node
        # exports its handles (see condukt.otp.lowlevel.set_handle_reducer).
        reducer = self._node._handle_reducer
        if reducer is None:
            raise TypeError(
                f"{self!r} cannot be pickled: its node does not export handles "
                "(handles cross processes in a condukt.ray cluster)"
            )
        return reducer(self)

    async def call(self, request: Any, timeout: float | None = 5.0) -> Any:
        """Send ``request`` to ``handle_call`` and wait for the reply.

        Waits for mailbox room if the mailbox is full (within the timeout).
        ``timeout=None`` waits forever.

        Cancellation: cancelling the caller withdraws the request: the server
        skips it if it has not started on it, and a later reply is dropped.

        Raises :class:`NoProc` if the process is not alive,
        :class:`CallTimeout` when no reply came in time, :class:`CallError`
        if the process exited before replying (``.reason`` says why), whatever
        the server passed to ``caller.reply_error``, and :class:`CallingSelf`
        when a process calls itself from its own mailbox loop.
        """
        proc = self._process
        if proc is None:
            await checkpoint()
            raise NoProc(f"{self!r} is not alive")
        task = current_task()
        if task is proc._task or task is proc._init_task:
            raise CallingSelf(f"{self!r} called itself from its own loop (deadlock)")
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        mailbox = proc._mailbox
        if mailbox is None:
            mailbox = proc._mailbox = deque()
        elif len(mailbox) >= proc._capacity:
            with trio.move_on_at(deadline):
                await proc._wait_room()
            if proc._state != _DEAD and len(mailbox) >= proc._capacity:
                raise CallTimeout(f"{self!r}: mailbox stayed full for {timeout}s")
            mailbox = proc._mailbox
            if mailbox is None:
                raise NoProc(f"{self!r} is not alive")
        return await wait_task_rescheduled(_post_call(proc, mailbox, task, request, timeout, deadline))

    async def cast(self, message: Any) -> None:
        """Send ``message`` to ``handle_cast`` without waiting for it to be handled.

        A cancellation point; it blocks (a schedule point) only while the
        mailbox is full. Cancellation: a cancelled ``cast`` delivered nothing.
        Raises :class:`NoProc` if the process is not alive (or exits while
        the cast waits for room). Delivery into a live mailbox does not
        guarantee the message is handled (the process may exit first), as in OTP.
        """
        await checkpoint_if_cancelled()
        proc = self._process
        if proc is None:
            raise NoProc(f"{self!r} is not alive")
        proc._put(_CAST, message) if proc._has_room() else await proc._put_waiting(_CAST, message)

    def cast_nowait(self, message: Any) -> None:
        """Like :meth:`cast` but raises :class:`MailboxFull` instead of waiting.

        Synchronous. Raises :class:`NoProc` if the process is not alive.
        """
        proc = self._process
        if proc is None:
            raise NoProc(f"{self!r} is not alive")
        if not proc._has_room():
            raise MailboxFull(f"{self!r}: mailbox full ({proc._capacity} messages)")
        proc._put(_CAST, message)

    async def send(self, message: Any) -> None:
        """Send a raw message, delivered to ``handle_info``.

        Waits for room, is cancelled and raises exactly like :meth:`cast`.
        """
        await checkpoint_if_cancelled()
        proc = self._process
        if proc is None:
            raise NoProc(f"{self!r} is not alive")
        proc._put(_INFO, message) if proc._has_room() else await proc._put_waiting(_INFO, message)

    def send_nowait(self, message: Any) -> None:
        """Like :meth:`send` but raises :class:`MailboxFull` instead of waiting.

        Synchronous. Raises :class:`NoProc` if the process is not alive.
        """
        proc = self._process
        if proc is None:
            raise NoProc(f"{self!r} is not alive")
        if not proc._has_room():
            raise MailboxFull(f"{self!r}: mailbox full ({proc._capacity} messages)")
        proc._put(_INFO, message)

    async def stop(self, reason: ExitReason = "normal", timeout: float | None | str = "default") -> None:
        """Stop the process and wait until it has exited.

        The process stops serving at once (a callback in progress is cancelled
        at its next checkpoint), then ``terminate(reason)`` runs with up to
        ``timeout`` seconds (``None``: no limit) before it is cancelled and the
        exit reason becomes ``"killed"``. The default is 5 s for workers and no
        limit for supervisors (each of their children is bounded by its own
        ``shutdown``), as in OTP. Stopping a supervised ``permanent``
        child this way gets it restarted, as in OTP; use the supervisor's
        ``terminate_child`` to stop it for good.

        Cancellation: cancelling the caller only stops the waiting; the
        process still exits as requested.

        Raises :class:`NoProc` if the process is not alive,
        :class:`CallingSelf` from the process's own loop (use ``Server.stop``),
        and :class:`CallError` when the process exited with an exception
        rather than the requested reason: its ``terminate`` raised (or it
        crashed before the stop took effect). ``.reason`` (and
        ``__cause__``) is that exception, as OTP's ``gen_server:stop`` fails
        with it. A ``terminate`` cut short by ``timeout`` is not an error: the
        reason is then ``"killed"`` and ``stop`` returns.
        """
        proc = self._process
        if proc is None:
            await checkpoint()
            raise NoProc(f"{self!r} is not alive")
        task = current_task()
        if task is proc._task or task is proc._init_task:
            raise CallingSelf(f"{self!r} cannot wait for its own exit; use Server.stop()")
        if timeout == "default":
            timeout = None if self._cls._eager_nursery else 5.0
        assert not isinstance(timeout, str), "timeout must be seconds or None"
        proc._request_exit(reason, terminate=True, timeout=timeout)
        await self.wait()
        exited = self._exit_reason
        if isinstance(exited, BaseException) and exited is not reason:
            raise CallError(exited, f"{self!r} did not stop cleanly: {exited!r}") from exited

    def kill(self) -> None:
        """Kill the process at once, without ``terminate`` (OTP's ``exit(Pid, kill)``).

        The exit reason is ``"killed"``. Synchronous: :attr:`alive` turns
        ``False`` when the process's task next runs. Does nothing if it is
        already dead; never raises.
        """
        proc = self._process
        if proc is not None:
            proc._request_exit("killed", terminate=False, timeout=None)

    async def wait(self) -> ExitReason:
        """Wait until the process has exited and return its exit reason.

        Cancellation: cancelling the waiter leaves the process untouched.
        Never raises otherwise; on a dead process it returns at once (after
        a checkpoint).
        """
        proc = self._process
        if proc is None:
            await checkpoint()
            return self._exit_reason
        # The waiting task parks on the process itself (rescheduled by
        # ``_exit``) rather than on a trio.Event made per process.
        waiters = proc._exit_waiters
        if waiters is None:
            waiters = proc._exit_waiters = []
        task = current_task()
        waiters.append(task)

        def withdraw(raise_cancel: Any) -> Abort:
            waiters.remove(task)
            return Abort.SUCCEEDED

        await wait_task_rescheduled(withdraw)
        return self._exit_reason

    # ------------------------------------------------------------------ runtime

    def _system(self, message: Any) -> None:
        """Deliver a runtime message (Down, Exit, timers, child exits) to ``handle_info``.

        Bypasses the capacity: such messages are bounded by the number of
        monitors, links, children and timers the process itself set up, and a
        dying process must never block on a full mailbox.
        """
        proc = self._process
        if proc is not None:
            proc._put(_INFO, message)

    def _on_down(self, down: Down) -> None:
        self._system(down)

