"""Processes: the :class:`Server` behaviour, :class:`Handle`, :class:`Process`, callers, links, monitors.

A process is one trio task running a mailbox loop over a :class:`Server`
instance. Its state (mailbox, links, monitors, server instance, nursery, stop
request, ...) lives on a :class:`Process`; a :class:`Handle` only names it
(node, pid, name, server class) and points at the :class:`Process` while it
runs. On exit the handle drops that reference and keeps the exit reason, so a
handle of a dead incarnation is small, cannot reach stale state, and reports
``alive == False``.

Hot paths (``call``, ``cast``, the mailbox loop) avoid per-message cancel
scopes and channel machinery: a message is appended to a deque and the parked
process task is rescheduled directly; a caller parks with
:func:`trio.lowlevel.wait_task_rescheduled` and its timeout is an entry in the
node's timer heap (see ``_timers``). The split costs one attribute hop
(``handle._process``) per operation and no allocation per message.
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable, Hashable
from contextvars import Context
from typing import TYPE_CHECKING, Any, ClassVar, Final

import outcome
import trio
from trio.lowlevel import (
    Abort,
    ParkingLot,
    Task,
    checkpoint,
    checkpoint_if_cancelled,
    current_task,
    reschedule,
    wait_task_rescheduled,
)

from ._current import current_node_var
from ._errors import CallError, CallingSelf, CallTimeout, ConduktError, MailboxFull, NameTaken, NoProc
from ._hosting import Hosted, in_context
from ._signals import IGNORE, NO_REPLY, ChildExited, ChildStarted, Down, Exit, ExitReason, is_normal_exit
from ._timers import Timed

if TYPE_CHECKING:
    from ._node import Node

__all__ = [
    "DEFAULT_MAILBOX_SIZE",
    "Caller",
    "Handle",
    "MonitorRef",
    "Process",
    "Server",
    "TimerRef",
    "UnhandledMessage",
]

logger = logging.getLogger("condukt.otp")

#: Default mailbox capacity (messages). ``cast``/``send``/``call`` wait for
#: room beyond it; ``cast_nowait``/``send_nowait`` raise :class:`MailboxFull`.
DEFAULT_MAILBOX_SIZE: Final = 1024

#: Messages handled per scheduler pass before the loop yields to other tasks.
_BATCH: Final = 64

_CALL, _CAST, _INFO = 0, 1, 2
# _BOOTING: started in the background (``start_detached``): ``init`` runs in
# the process's own task and the parent hears the outcome as ``ChildStarted``.
_STARTING, _RUNNING, _DEAD, _BOOTING = 0, 1, 2, 3


class UnhandledMessage(ConduktError):
    """A server received a call or cast its class does not handle (OTP crashes too)."""


# --------------------------------------------------------------------------- callers


class Caller(Timed):
    """The reply address of one pending call (OTP's ``From``).

    Passed to :meth:`Server.handle_call`. Returning a value from
    ``handle_call`` replies with it; returning :data:`NO_REPLY` defers the
    reply until :meth:`reply` (or :meth:`reply_error`) is called, from any
    task. Replies to a caller that already got an answer, timed out or was
    cancelled are dropped and return ``False``.
    """

    __slots__ = ("_state", "_target", "_task", "_timeout")

    def __init__(self, task: Task, target: Process, timeout: float | None) -> None:
        self._timer_state = 0
        self._task = task
        self._target = target
        self._state = 0
        self._timeout = timeout

    @property
    def pending(self) -> bool:
        """True until the call is answered, times out or is withdrawn."""
        return not self._state

    @property
    def can_host(self) -> bool:
        """Whether :meth:`host` may be called: only in ``handle_call_now``, for a task that waits for the reply."""
        return False

    def host(self, work: Callable[[], Awaitable[Any]], cancel: Callable[[], None]) -> None:
        """Have the calling task run ``await work()`` for the process once ``handle_call_now`` returns.

        For a call whose answer needs awaited work (an agent's run): the
        caller's task, which would only wait, does it, instead of a task the
        process starts for it (see ``Server.handle_call_now``). The reply
        still comes from :meth:`reply` or :meth:`reply_error`; the caller
        waits for it after ``work`` returns if it has not come by then.

        ``work`` runs in a copy of the process's context variables, as a
        task of ``start_soon`` would. When the process exits it calls
        ``cancel()`` (synchronously; :attr:`Process.exiting` is then true),
        which must make ``work`` end soon (cancel the scopes it runs in),
        and waits for ``work`` to end before ``terminate`` runs. An
        exception escaping ``work`` crashes the process (the caller gets
        :class:`CallError`). A cancellation of the calling task reaches
        ``work`` as ``trio.Cancelled``, from the caller's own cancel scopes:
        ``work`` may finish its bookkeeping (shielded) and must let it
        propagate.

        Raises ``RuntimeError`` unless :attr:`can_host`: outside
        ``handle_call_now``, for a caller that is no waiting task (a
        ``call_with_callback``), a call with a timeout, or while the
        process already has hosted work.
        """
        raise RuntimeError(f"{self!r} cannot host work (see Caller.can_host)")

    def _finish(self) -> None:
        self._state = 1
        target = self._target
        if self._timer_state == 1:
            target._handle._node._timers.cancel(self)
        deferred = target._deferred
        if deferred:
            deferred.discard(self)

    def reply(self, value: Any) -> bool:
        """Answer the call with ``value``; returns whether the caller got it.

        Synchronous and safe from any task of the node; never raises.
        """
        if self._state:
            return False
        self._finish()
        self._settle(outcome.Value(value))
        return True

    def reply_error(self, error: BaseException) -> bool:
        """Make the caller's ``call`` raise ``error``; returns whether it was delivered.

        Synchronous and safe from any task of the node; never raises.
        """
        if self._state:
            return False
        self._finish()
        self._settle(outcome.Error(error))
        return True

    def _fire(self) -> None:  # the call timed out
        if self._state:
            return
        self._state = 1
        deferred = self._target._deferred
        if deferred:
            deferred.discard(self)
        self._settle(outcome.Error(CallTimeout(f"no reply from {self._target._handle!r} within {self._timeout}s")))

    def _settle(self, result: outcome.Outcome[Any]) -> None:
        """Hand the answer (a reply, an error, the timeout) to the caller: its parked task resumes."""
        reschedule(self._task, result)


class _TaskCaller(Caller):
    """The caller of a task waiting in :meth:`Handle.call`: itself the abort function the task parks with.

    (A bound method made per call would be one more object per call in flight.)
    """

    __slots__ = ()

    def __call__(self, raise_cancel: Any) -> Abort:  # the waiting task was cancelled
        self._finish()
        return Abort.SUCCEEDED


class _CallbackCaller(Caller):
    """A caller that is no task: the reply, error or timeout goes to a callback (see :func:`call_with_callback`)."""

    __slots__ = ("_deliver",)

    def __init__(self, target: Process, timeout: float | None, deliver: Callable[[outcome.Outcome[Any]], None]) -> None:
        super().__init__(None, target, timeout)  # type: ignore[arg-type]
        self._deliver = deliver

    def _settle(self, result: outcome.Outcome[Any]) -> None:
        self._deliver(result)


class _DirectCaller(_TaskCaller):
    """The caller of a call the idle process handles in the calling task (:meth:`Server.handle_call_now`).

    An answer given before the task parks is kept for it (rescheduling a
    task that runs is not allowed); after that, as :class:`_TaskCaller`.
    """

    __slots__ = ("_early", "_waiting", "_work")

    def __init__(self, task: Task, target: Process, timeout: float | None) -> None:
        super().__init__(task, target, timeout)
        self._early: outcome.Outcome[Any] | None = None
        self._waiting = False
        self._work: tuple[Callable[[], Awaitable[Any]], Callable[[], None]] | None = None

    @property
    def can_host(self) -> bool:
        """True inside the process's ``handle_call_now`` for this call, with no timeout and no other hosted work."""
        target = self._target
        return (
            target._current is self
            and target._hosted is None
            and self._timeout is None
            and self._work is None
            and not self._state
        )

    def host(self, work: Callable[[], Awaitable[Any]], cancel: Callable[[], None]) -> None:
        """See :meth:`Caller.host`."""
        if not self.can_host:
            super().host(work, cancel)
        self._work = (work, cancel)

    def _settle(self, result: outcome.Outcome[Any]) -> None:
        if self._waiting:
            reschedule(self._task, result)
        else:
            self._early = result


def _takes_calls_now(proc: Process) -> bool:
    """Whether ``proc`` is idle (parked on an empty mailbox, or started and its task not run yet; not exiting)
    and its server has ``handle_call_now``."""
    server = proc._server
    return (
        (proc._parked or proc._context is not None)
        and not proc._mailbox
        and proc._current is None  # not from inside a handle_call_now: one callback at a time
        and proc._stop is None
        and proc._pending is None
        and server is not None
        and type(server).handle_call_now is not Server.handle_call_now
    )


def _handle_now(proc: Process, request: Any, caller: Caller) -> Any:
    """Run the idle process's ``handle_call_now`` for ``request`` here, in the process's context.

    Returns what it returns (``NotImplemented``: the call goes through the
    mailbox after all). An exception crashes the process as one from
    ``handle_call`` would, and the call is left for the exit to fail
    (:class:`CallError`).
    """
    server = proc._server
    assert server is not None
    proc._current = caller
    try:
        reply = _context_of(proc).run(server.handle_call_now, request, caller)
    except Exception as exc:  # noqa: BLE001  # the process crashes, as in its own task
        proc._current = None
        if not caller._state:
            _defer(proc, caller)
        proc._crashed(exc)
        proc._wake()
        return NO_REPLY
    finally:
        proc._current = None  # also past a KeyboardInterrupt: no callback runs any more
    if proc._stop is not None or proc._pending is not None:
        proc._wake()  # it asked to stop or started tasks before its nursery: the process acts on it
    return reply


def _context_of(proc: Process) -> Context:
    """The process's context variables: its task's, or before that task first runs, what it will start with."""
    context = proc._context
    if context is not None:
        return context
    task = proc._task
    assert task is not None
    return task.context


def _defer(proc: Process, caller: Caller) -> None:
    deferred = proc._deferred
    if deferred is None:
        deferred = proc._deferred = set()
    deferred.add(caller)


async def _answered_at_once(result: outcome.Outcome[Any]) -> Any:
    await trio.lowlevel.cancel_shielded_checkpoint()  # an await of a call is a checkpoint, answered or not
    return result.unwrap()


def _call_now(proc: Process, task: Task, request: Any, timeout: float | None, deadline: float) -> Awaitable[Any] | None:
    """The call answered or started by the idle process's ``handle_call_now``; ``None`` if it declined."""
    caller = _DirectCaller(task, proc, timeout)
    reply = _handle_now(proc, request, caller)
    if reply is NotImplemented:
        return None
    if reply is not NO_REPLY:
        caller.reply(reply)
    work = caller._work
    if work is not None:
        caller._work = None
        if proc._stop is None:  # else it crashed or stops: nothing to host
            if not caller._state:
                _defer(proc, caller)
            return _run_hosted(proc, caller, *work)
    early = caller._early
    if early is not None:
        return _answered_at_once(early)
    if not caller._state:
        _defer(proc, caller)
        if timeout is not None:
            proc._handle._node._timers.schedule(deadline, caller)
    caller._waiting = True
    return wait_task_rescheduled(caller)


async def _run_hosted(
    proc: Process, caller: _DirectCaller, work: Callable[[], Awaitable[Any]], cancel: Callable[[], None]
) -> Any:
    """Run the process's ``work`` in the calling task (see :meth:`Caller.host`), then await the reply."""
    hosted = proc._hosted = Hosted(cancel)
    steps = in_context(_context_of(proc).copy(), work())  # type: ignore[arg-type]
    try:
        await steps
    except Exception as exc:  # as from a task of the process: it crashes
        proc._crash_from_outside(exc)
    except BaseException:  # the caller was cancelled: it withdraws the call
        caller._finish()
        raise
    finally:
        proc._hosted = None
        waiter = hosted.waiter
        if waiter is not None:  # the exiting process waits for the work to end
            reschedule(waiter)
    yielded = steps.yielded
    # Nothing of the work stays alive while the caller waits below (with
    # 10,000 callers at once, that is 60,000 objects less for the cyclic GC).
    hosted = steps = work = cancel = None  # type: ignore[assignment]
    early = caller._early
    if early is not None:
        if not yielded:
            # Work that never waited (an in-process model): the call is still
            # a schedule point, as every await of a call is (a loop of runs
            # must let other tasks in); shielded, as the answer is in hand.
            await trio.lowlevel.cancel_shielded_checkpoint()
        return early.unwrap()
    caller._waiting = True
    return await wait_task_rescheduled(caller)


def _post_call(
    proc: Process, mailbox: deque[Any], task: Task, request: Any, timeout: float | None, deadline: float
) -> Callable[[Any], Abort]:
    """Put a call from ``task`` in the mailbox (which has room); the abort function to park the task with."""
    caller = _TaskCaller(task, proc, timeout)
    mailbox.append((_CALL, request, caller))
    proc._wake()
    if timeout is not None:
        proc._handle._node._timers.schedule(deadline, caller)
    return caller


def start_call(handle: Handle, request: Any, timeout: float | None) -> Awaitable[Any]:
    """:meth:`Handle.call`, sent now, without a coroutine of its own (see :mod:`.lowlevel`)."""
    proc = handle._process
    if proc is not None:
        task = current_task()
        mailbox = proc._mailbox
        if mailbox is None:
            mailbox = proc._mailbox = deque()
        if task is not proc._task and task is not proc._init_task and len(mailbox) < proc._capacity:
            deadline = math.inf if timeout is None else trio.current_time() + timeout
            if not mailbox and _takes_calls_now(proc):
                answer = _call_now(proc, task, request, timeout, deadline)
                if answer is not None:
                    return answer
            return wait_task_rescheduled(_post_call(proc, mailbox, task, request, timeout, deadline))
    return handle.call(request, timeout)  # the cases that raise or wait for room, as ``call`` has them


def call_with_callback(
    handle: Handle, request: Any, timeout: float | None, deliver: Callable[[outcome.Outcome[Any]], None]
) -> Callable[[], None] | None:
    """:meth:`Handle.call` without a waiting task: ``deliver(outcome)`` gets the reply (see :mod:`.lowlevel`)."""
    proc = handle._process
    if proc is None:
        raise NoProc(f"{handle!r} is not alive")
    mailbox = proc._mailbox
    if mailbox is None:
        mailbox = proc._mailbox = deque()
    elif len(mailbox) >= proc._capacity:
        return None
    caller = _CallbackCaller(proc, timeout, deliver)
    if not mailbox and _takes_calls_now(proc):
        reply = _handle_now(proc, request, caller)
        if reply is not NotImplemented:
            if reply is not NO_REPLY:
                caller.reply(reply)
            elif not caller._state:
                _defer(proc, caller)
                if timeout is not None:
                    handle._node._timers.schedule(trio.current_time() + timeout, caller)
            return caller._finish
    mailbox.append((_CALL, request, caller))
    proc._wake()
    if timeout is not None:
        handle._node._timers.schedule(trio.current_time() + timeout, caller)
    return caller._finish


# --------------------------------------------------------------------------- timers


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


# --------------------------------------------------------------------------- monitors


class MonitorRef:
    """A monitor set by :meth:`Server.monitor`; identifies the :class:`Down` it yields."""

    __slots__ = ("_target", "_watcher")

    def __init__(self, target: Handle, watcher: Any) -> None:
        self._target = target
        self._watcher = watcher

    @property
    def target(self) -> Handle:
        """The monitored process."""
        return self._target

    def _down(self, reason: ExitReason) -> None:
        self._watcher._on_down(Down(self._target, reason, self))

    def __repr__(self) -> str:
        return f"<MonitorRef of {self._target!r}>"


# --------------------------------------------------------------------------- handle


def _unwrap(exc: BaseException) -> BaseException:
    """The single real exception inside nested one-leaf groups (nursery wrapping)."""
    while isinstance(exc, BaseExceptionGroup):
        # ``split`` matches leaves; a negated ``subgroup`` predicate would match the group itself.
        _, rest = exc.split(trio.Cancelled)
        if rest is None or len(rest.exceptions) != 1:
            return exc if rest is None else rest
        exc = rest.exceptions[0]
    return exc


def _only_cancelled(exc: BaseException) -> bool:
    if isinstance(exc, trio.Cancelled):
        return True
    if isinstance(exc, BaseExceptionGroup):
        return exc.split(trio.Cancelled)[1] is None
    return False


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


# --------------------------------------------------------------------------- process


class Process:
    """The state of one running incarnation of a process (see :mod:`condukt.otp.lowlevel`).

    The runtime makes one per start, with its :class:`Handle`, and the
    handle drops it when the process exits: code that holds a ``Process``
    after that sees :attr:`alive` ``False`` and :attr:`server` ``None``.
    Everything here is read-only to callers; the mailbox loop, links,
    monitors, timers and the exit protocol are the runtime's.
    """

    __slots__ = (
        "_boot_args",
        "_capacity",
        "_child_key",
        "_context",
        "_current",
        "_exit_waiters",
        "_deferred",
        "_handle",
        "_hosted",
        "_init_task",
        "_links",
        "_mailbox",
        "_monitors",
        "_nursery",
        "_parent",
        "_parked",
        "_pending",
        "_room",
        "_scope",
        "_server",
        "_shutdown",
        "_state",
        "_stop",
        "_task",
        "_term_scope",
    )

    def __init__(
        self,
        handle: Handle,
        server: Server,
        capacity: int = DEFAULT_MAILBOX_SIZE,
        shutdown: float | None = 5.0,
        parent: Handle | None = None,
        child_key: Any = None,
    ) -> None:
        self._handle = handle
        self._server: Server | None = server
        self._capacity = capacity
        self._shutdown = shutdown
        self._parent = parent
        self._child_key = child_key
        self._state = _STARTING
        self._mailbox: deque[tuple[int, Any, Caller | None]] | None = None
        self._room: ParkingLot | None = None
        self._task: Task | None = None
        #: Between a start and the first step of the process's task: the context that task starts with.
        self._context: Context | None = None
        self._init_task: Task | None = None
        self._parked = False
        # Made when the task starts (``_open_scope``, or the nursery's).
        self._scope: trio.CancelScope | None = None
        self._term_scope: trio.CancelScope | None = None
        self._stop: tuple[ExitReason, bool, float | None] | None = None
        self._current: Caller | None = None
        #: Work a caller's task does for the process (``Caller.host``), while it runs.
        self._hosted: Hosted | None = None
        self._deferred: set[Caller] | None = None
        self._monitors: dict[MonitorRef, None] | None = None
        self._links: set[Handle] | None = None
        self._pending: list[tuple[Callable[..., Awaitable[Any]], tuple[Any, ...]]] | None = None
        self._nursery: trio.Nursery | None = None
        self._exit_waiters: list[Task] | None = None
        # A supervisor's ``boot`` arguments, kept until its own task runs it.
        self._boot_args: tuple[tuple[Any, ...], dict[str, Any]] | None = None
        handle._process = self

    # ------------------------------------------------------------------ public, read-only

    @property
    def handle(self) -> Handle:
        """The handle naming this incarnation."""
        return self._handle

    @property
    def server(self) -> Server | None:
        """The :class:`Server` instance the process runs; ``None`` once it has exited."""
        return self._server

    @property
    def alive(self) -> bool:
        """``False`` once the process has exited."""
        return self._state != _DEAD

    @property
    def stopping(self) -> bool:
        """True from the moment the process must exit (stop, kill, crash, exit signal) until it is dead.

        A stopping process serves no more messages; a behaviour that starts
        work on behalf of callers refuses new work once this is true.
        """
        return self._stop is not None and self._state != _DEAD

    @property
    def exiting(self) -> bool:
        """True from the moment the process must exit, and after; unlike :attr:`stopping`, also once dead.

        Work a caller hosts for the process (``Caller.host``) checks it when
        cancelled: true, the process cancelled it; false, its caller did.
        """
        hosted = self._hosted
        return self._stop is not None or self._state == _DEAD or (hosted is not None and hosted.cancelled)

    @property
    def mailbox_length(self) -> int:
        """Messages waiting in the mailbox (not counting the one being handled)."""
        mailbox = self._mailbox
        return 0 if mailbox is None else len(mailbox)

    @property
    def status(self) -> str:
        """Where the process stands, as Erlang's ``process_info(Pid, status)`` says it.

        ``"starting"`` (its ``init`` runs), ``"waiting"`` (idle, parked on an
        empty mailbox; work it started as tasks may still run), ``"running"``
        (handling a message, or runnable), ``"stopping"`` (it must exit:
        ``terminate`` runs or is due) or ``"exited"``. Synchronous; never raises.
        """
        state = self._state
        if state == _DEAD:
            return "exited"
        if self._stop is not None:
            return "stopping"
        if state == _STARTING or state == _BOOTING:
            return "starting"
        return "waiting" if self._parked else "running"

    def __repr__(self) -> str:
        return f"<Process of {self._handle!r}>"

    # ------------------------------------------------------------------ delivery

    def _has_room(self) -> bool:
        mailbox = self._mailbox
        return mailbox is None or len(mailbox) < self._capacity

    def _put(self, kind: int, message: Any) -> None:
        mailbox = self._mailbox
        if mailbox is None:
            mailbox = self._mailbox = deque()
        mailbox.append((kind, message, None))
        self._wake()

    async def _put_waiting(self, kind: int, message: Any) -> None:
        await self._wait_room()
        self._put(kind, message)

    async def _wait_room(self) -> None:
        lot = self._room
        if lot is None:
            lot = self._room = ParkingLot()
        while self._state != _DEAD and self._mailbox is not None and len(self._mailbox) >= self._capacity:
            await lot.park()
        if self._state == _DEAD:
            raise NoProc(f"{self._handle!r} is not alive")

    def _wake(self) -> None:
        """Reschedule the process task if it is parked waiting for its mailbox."""
        if self._parked:
            self._parked = False
            task = self._task
            assert task is not None
            reschedule(task)

    def _abort_park(self, raise_cancel: Any) -> Abort:
        self._parked = False
        return Abort.SUCCEEDED

    # ------------------------------------------------------------------ lifecycle

    def _request_exit(self, reason: ExitReason, *, terminate: bool, timeout: float | None) -> None:
        """Make the process exit with ``reason`` (cancelling what it is doing)."""
        if self._state == _DEAD:
            return
        if self._stop is not None:
            # Already exiting; only a kill can cut a running terminate short.
            if not terminate and self._term_scope is not None:
                self._term_scope.cancel()
            if not terminate:
                self._stop = ("killed", False, None)
            return
        self._stop = (reason, terminate, timeout)
        if self._parked:
            # Idle in its loop: wake it to see the stop. No cancellation means
            # no Cancelled exception and none of its cyclic garbage.
            self._wake()
        elif self._scope is not None:
            self._scope.cancel()

    def _exit_signal(self, sender: Handle, reason: ExitReason) -> None:
        """A linked process exited: trapped as an :class:`Exit` message, else fatal unless normal."""
        if self._state == _DEAD or self._stop is not None:
            return
        server = self._server
        if server is not None and server.trap_exits:
            self._put(_INFO, Exit(sender, reason))  # OTP delivers {'EXIT', Pid, normal} too
        elif not is_normal_exit(reason):
            self._request_exit(reason, terminate=True, timeout=self._shutdown)

    async def _serve(self) -> bool:
        """The mailbox loop. Returns ``True`` when the process needs a nursery."""
        server = self._server
        assert server is not None
        while True:
            if self._stop is not None:
                return False
            if self._pending is not None and self._nursery is None:
                return True
            mailbox = self._mailbox
            if not mailbox:
                # Drop the last message before parking: an idle process must
                # not keep its request and caller alive (nor the GC walk them).
                payload = caller = reply = None
                self._parked = True
                await wait_task_rescheduled(self._abort_park)
                continue
            n = len(mailbox)
            if n > _BATCH:
                n = _BATCH
            handled = 0
            while handled < n:
                handled += 1
                kind, payload, caller = mailbox.popleft()
                room = self._room
                if room:
                    # Wake a sender as soon as its slot is free, not after the
                    # batch: the callback below may be waiting for that sender.
                    room.unpark()
                if kind == _CALL:
                    assert caller is not None
                    if caller._state:
                        continue  # the caller gave up before we got here
                    self._current = caller
                    reply = await server.handle_call(payload, caller)
                    self._current = None
                    if reply is not NO_REPLY:
                        caller.reply(reply)
                    elif not caller._state:
                        deferred = self._deferred
                        if deferred is None:
                            deferred = self._deferred = set()
                        deferred.add(caller)
                elif kind == _CAST:
                    await server.handle_cast(payload)
                else:
                    await server.handle_info(payload)
                if self._stop is not None or self._pending is not None:
                    break
            if mailbox and self._stop is None:
                await checkpoint()  # bounded batch: let other tasks run

    async def _main(self) -> None:
        """The process task body. Never raises except for an outer cancellation.

        A plain process's body is inline here rather than a coroutine of its
        own: every live process holds one coroutine less, and each of its
        wake-ups passes one frame less.
        """
        self._task = current_task()
        self._context = None
        # Whoever started it, a process and the tasks it starts are on its node.
        current_node_var.set(self._handle._node)
        reason: ExitReason = "killed"
        notify = True
        try:
            if self._handle._cls._eager_nursery:
                reason, notify = await self._main_supervising()
                return
            # The cancel scope encloses the nursery: stopping the process cancels
            # its background tasks before ``terminate`` runs.
            try:
                if self._handle._cls.nursery_at_start:
                    # The nursery is opened at once and its cancel scope is the
                    # process's: one cancel scope per process instead of two.
                    async with trio.open_nursery() as nursery:
                        self._scope = nursery.cancel_scope
                        if self._state == _BOOTING:
                            booted = await self._boot_here()
                            if booted is not None:
                                reason = booted
                                return
                        self._nursery = nursery
                        if self._pending is not None:
                            self._start_pending()
                        await self._serve()
                        if nursery.child_tasks:  # a cancel costs ~9k instructions: only when there is work to stop
                            nursery.cancel_scope.cancel()
                        else:
                            # Nothing can run in the nursery any more: exit now, so
                            # whoever waits for the exit runs in the same scheduling
                            # batch as the nursery's closing checkpoint, not after it
                            # (spawn + run + stop of an agent: ~14k instructions less).
                            self._nursery = None
                            stop = self._stop
                            assert stop is not None
                            reason = await self._terminate(stop[0], stop[2]) if stop[1] else stop[0]
                            if self._hosted is not None:  # a kill: no terminate, which would have ended it
                                await self._end_hosted()
                            self._exit(reason)
                            return
                else:
                    with self._open_scope():
                        if self._state == _BOOTING:
                            booted = await self._boot_here()
                            if booted is not None:
                                reason = booted
                                return
                        if self._pending is not None or await self._serve():
                            async with trio.open_nursery() as nursery:
                                self._nursery = nursery
                                self._start_pending()
                                await self._serve()
                                if nursery.child_tasks:
                                    nursery.cancel_scope.cancel()
            except BaseException as exc:
                if _only_cancelled(exc) or not isinstance(exc, Exception):
                    raise
                reason = await self._terminate(self._crashed(exc), self._shutdown)
                return
            finally:
                self._nursery = None
            stop = self._stop
            assert stop is not None
            if self._state == _BOOTING:
                reason = stop[0]  # stopped or killed during init: no terminate
                return
            reason = await self._terminate(stop[0], stop[2]) if stop[1] else stop[0]
        finally:
            if self._hosted is not None:  # a kill, a stop during init, an outer cancellation
                await self._end_hosted()
            self._exit(reason, notify=notify)

    async def _main_supervising(self) -> tuple[ExitReason, bool]:
        # Supervisors: the children's nursery encloses the cancel scope, so
        # stopping the supervisor does not cancel its children; ``terminate``
        # shuts them down in order, inside the nursery.
        reason: ExitReason = "killed"
        async with trio.open_nursery() as nursery:
            self._nursery = nursery
            try:
                try:
                    with self._open_scope():
                        init_error = self._register_here() if self._state == _BOOTING else None
                        if init_error is None:
                            init_error = await self._init_in_task()
                        if init_error is not None:
                            nursery.cancel_scope.cancel()
                            # A background start tells its parent (ChildStarted).
                            return init_error, self._state == _BOOTING
                        self._running()
                        await self._serve()
                except BaseException as exc:
                    if _only_cancelled(exc) or not isinstance(exc, Exception):
                        raise
                    reason = await self._terminate(self._crashed(exc), self._shutdown)
                else:
                    stop = self._stop
                    assert stop is not None
                    reason = await self._terminate(stop[0], stop[2]) if stop[1] else stop[0]
            finally:
                nursery.cancel_scope.cancel()
        self._nursery = None
        return reason, True

    def _crash_from_outside(self, exc: BaseException) -> None:
        """Work the process's task does not run (hosted by a caller) raised ``exc``: the process crashes."""
        stopping = self._stop is not None
        self._crashed(exc)
        if not stopping:
            if self._parked:
                self._wake()
            elif self._scope is not None:
                self._scope.cancel()

    async def _end_hosted(self) -> None:
        """Cancel the work a caller hosts for this exiting process, and wait until it has ended."""
        hosted = self._hosted
        if hosted is None:
            return
        if not hosted.cancelled:
            hosted.cancelled = True
            try:
                hosted.cancel()
            except Exception as exc:  # its owner's bug: the wait below still ends when the work does
                logger.error("%r: cancelling hosted work failed", self._handle, exc_info=exc)
        hosted.waiter = current_task()
        with trio.CancelScope(shield=True):  # a kill included: the work must be over before the exit
            await wait_task_rescheduled(_no_abort)

    def _open_scope(self) -> trio.CancelScope:
        """The process's cancel scope, made when its task starts (``nursery_at_start`` uses its nursery's)."""
        scope = self._scope = trio.CancelScope()
        return scope

    def _crashed(self, exc: BaseException) -> ExitReason:
        """A callback raised ``exc``: the process is exiting; returns the exit reason.

        The one place a crash is reported: supervisors, links and monitors
        see the exit reason but log nothing more about it.
        """
        reason = _unwrap(exc)
        logger.error("%r crashed", self._handle, exc_info=reason)
        if self._stop is None:
            # Exiting from now on, as after a stop: stop requests and link
            # signals are ignored, and a kill cuts ``terminate`` short.
            self._stop = (reason, True, self._shutdown)
        return reason

    async def _init_in_task(self) -> Any:
        """Run ``boot`` in the process's own task and tell a waiting starter how it went.

        Returns ``None`` when the process is to run, :data:`IGNORE`, or the
        exception ``boot`` raised. A cancellation (a stop, kill or exit
        signal during ``init``) is re-raised after the starter is told.
        """
        server = self._server
        assert server is not None
        args, kwargs = self._boot_args or ((), {})
        self._boot_args = None
        # The starter is read afterwards: a cancelled starter withdrew itself
        # (``_abort_init_wait``) and must not be woken again.
        try:
            result = await server.boot(*args, **kwargs)
        except Exception as exc:
            self._tell_starter(outcome.Error(exc))
            return exc
        except BaseException:
            if self._init_task is not None:
                # Exiting during init at someone else's request: the starter
                # must not wait forever for an init that will not finish.
                stop = self._stop
                reason = "killed" if stop is None else stop[0]
                error = CallError(reason, f"{self._handle!r} exited during init: {reason!r}")
                self._tell_starter(outcome.Error(error))
            raise
        if result is not IGNORE:
            result = None
        self._tell_starter(outcome.Value(result))
        return result

    def _tell_starter(self, result: outcome.Outcome[Any]) -> None:
        waiter = self._init_task
        if waiter is not None:
            self._init_task = None
            reschedule(waiter, result)

    async def _boot_here(self) -> Any:
        """A background start's ``init``, in this task: returns ``None`` (it runs) or why it does not.

        The parent hears the outcome: at once when the process runs
        (:meth:`_running`), from :meth:`_exit` otherwise. Nobody waits for
        it, so unlike :meth:`_init_in_task` there is no starter to tell, and
        a cancellation (a stop or kill during ``init``) simply propagates.
        """
        stop = self._stop
        if stop is not None:
            return stop[0]  # stopped before its task began
        taken = self._register_here()
        if taken is not None:
            return taken
        server = self._server
        assert server is not None and self._boot_args is not None
        args, kwargs = self._boot_args
        self._boot_args = None
        try:
            result = await server.boot(*args, **kwargs)
        except Exception as exc:
            return exc
        if result is IGNORE:
            return IGNORE
        self._running()
        return None

    def _register_here(self) -> NameTaken | None:
        """A background start registers its name as its ``init`` begins; returns the error if it is taken."""
        handle = self._handle
        if handle._name is not None:
            try:
                handle._node._register(handle._name, handle)
            except NameTaken as exc:
                return exc
        return None

    def _running(self) -> None:
        """``init`` succeeded: serve from now on; a background start tells its parent at once."""
        booting = self._state == _BOOTING
        self._state = _RUNNING
        if booting:
            parent = self._parent
            supervisor = None if parent is None else parent._process
            if supervisor is not None and supervisor._stop is None:
                # A synchronous hook rather than a message: a restart that
                # works costs the supervisor no extra wake-up (see
                # ``SupervisorBase._child_running``).
                server: Any = supervisor._server
                try:
                    server._child_running(self._handle, self._child_key)
                except Exception as exc:  # a supervisor bug must not crash this child
                    logger.error("%r: recording %r failed", parent, self._handle, exc_info=exc)

    def _abort_init_wait(self, raise_cancel: Any) -> Abort:
        # The starter was cancelled: nobody will learn this handle, so the
        # half-started process must not outlive the start.
        self._init_task = None
        self._request_exit("shutdown", terminate=True, timeout=self._shutdown)
        return Abort.SUCCEEDED

    async def _terminate(self, reason: ExitReason, timeout: float | None) -> ExitReason:
        if self._hosted is not None:
            await self._end_hosted()
        server = self._server
        assert server is not None
        if not server.needs_terminate():
            return reason
        deadline = math.inf if timeout is None else trio.current_time() + timeout
        with trio.CancelScope(deadline=deadline, shield=True) as scope:
            self._term_scope = scope
            try:
                await server.terminate(reason)
            except Exception as exc:
                # As in OTP: whatever the reason was, the exit reason is now
                # the crash of terminate.
                logger.error("%r: terminate(%r) raised", self._handle, reason, exc_info=exc)
                reason = exc
        self._term_scope = None
        if scope.cancelled_caught:
            return "killed"
        return reason

    def _start_pending(self) -> None:
        pending, self._pending = self._pending, None
        nursery = self._nursery
        assert nursery is not None
        for fn, args in pending or ():
            nursery.start_soon(fn, *args)

    def _exit(self, reason: ExitReason, *, notify: bool = True) -> None:
        """Mark the process dead and tell everyone who asked. Synchronous, never raises."""
        state = self._state
        if state == _DEAD:
            return
        self._state = _DEAD
        report = reason
        if reason is IGNORE:
            reason = "normal"
        handle = self._handle
        handle._process = None
        handle._exit_reason = reason
        node = handle._node
        node._process_count -= 1
        if handle._name is not None:
            node._unregister(handle._name, handle)

        if self._current is not None:
            _fail(self._current, reason)
            self._current = None
        if self._deferred:
            for caller in list(self._deferred):
                _fail(caller, reason)
        mailbox, self._mailbox = self._mailbox, None
        if mailbox:
            for kind, _, queued in mailbox:
                if kind == _CALL and queued is not None:
                    _fail(queued, reason)
        if self._room is not None:
            self._room.unpark_all()
        if self._monitors:
            monitors, self._monitors = self._monitors, None
            for ref in monitors:
                ref._down(reason)
        if self._links:
            links, self._links = self._links, None
            for other in links:
                theirs = other._process
                if theirs is not None:
                    if theirs._links is not None:
                        theirs._links.discard(handle)
                    theirs._exit_signal(handle, reason)
        parent = self._parent
        if notify and parent is not None:
            supervisor = parent._process
            # A stopping supervisor ignores exits of the children it is stopping.
            if supervisor is not None and supervisor._stop is None:
                if state == _BOOTING:  # it never ran: the outcome of its background start
                    supervisor._put(_INFO, ChildStarted(handle, report, self._child_key))
                elif not _exit_handled(supervisor, handle, reason, self._child_key):
                    supervisor._put(_INFO, ChildExited(handle, reason, self._child_key))
        waiters = self._exit_waiters
        if waiters:
            self._exit_waiters = None
            for task in waiters:
                reschedule(task)
        self._server = None
        self._boot_args = None


def _no_abort(raise_cancel: Any) -> Abort:
    return Abort.FAILED


def _exit_handled(supervisor: Process, handle: Handle, reason: ExitReason, key: Any) -> bool:
    """Let the supervisor handle a child's exit right now, if it needs no waiting (see ``SupervisorBase``)."""
    server: Any = supervisor._server
    try:
        return bool(server._child_exit_now(handle, reason, key))
    except Exception as exc:  # a supervisor bug must not crash the exiting child
        logger.error("%r: handling the exit of %r failed", supervisor._handle, handle, exc_info=exc)
        return True


def _fail(caller: Caller, reason: ExitReason) -> None:
    """Fail a call the exiting process will never answer (a function, not a closure per exit)."""
    if not caller._state:
        error = CallError(reason)
        if isinstance(reason, BaseException):
            error.__cause__ = reason
        caller.reply_error(error)


def _add_monitor(target: Handle, watcher: Any) -> MonitorRef:
    """Monitor ``target`` for ``watcher`` (a Handle or a node Monitor); dead: ``Down`` at once."""
    ref = MonitorRef(target, watcher)
    proc = target._process
    if proc is None:
        ref._down("noproc")
    else:
        monitors = proc._monitors
        if monitors is None:
            monitors = proc._monitors = {}
        monitors[ref] = None
    return ref


def _remove_monitor(ref: MonitorRef) -> None:
    proc = ref._target._process
    if proc is not None and proc._monitors:
        proc._monitors.pop(ref, None)


# --------------------------------------------------------------------------- server


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
    #: run): it saves a cancel scope per process (~48k instructions, measured
    #: on spawn + run + stop of an agent); a process that never starts a task
    #: pays for a nursery instead (spawn + stop alone: ~+48k).
    nursery_at_start: ClassVar[bool] = False
    # Supervisors open their children's nursery before ``init`` runs.
    _eager_nursery: ClassVar[bool] = False

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

    def monitor(self, other: Handle) -> MonitorRef:
        """Get a :class:`Down` in ``handle_info`` when ``other`` exits.

        If ``other`` is already dead the ``Down`` (reason ``"noproc"``) is
        delivered at once. Synchronous; never raises.
        """
        return _add_monitor(other, self.handle)

    def demonitor(self, ref: MonitorRef) -> None:
        """Remove a monitor; no ``Down`` is delivered for it afterwards (unless already queued)."""
        _remove_monitor(ref)

    def link(self, other: Handle) -> None:
        """Link with ``other``: an abnormal exit of either kills the other.

        A process with ``trap_exits`` receives :class:`Exit` instead of dying.
        Linking to a dead process behaves as in OTP: the caller gets an exit
        signal with reason ``"noproc"``. Synchronous; never raises; does
        nothing once this process has exited.
        """
        me = self.handle
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

    def unlink(self, other: Handle) -> None:
        """Remove a link (both directions). Synchronous; never raises."""
        me = self.handle
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
