"""Callers: the reply address of one call (OTP's ``From``), and how a task's call enters a mailbox.

A caller parks with :func:`trio.lowlevel.wait_task_rescheduled` and is
rescheduled with the answer (a reply, an error, the timeout): no cancel
scope and no channel per call. Its timeout is an entry in the node's timer
heap (see ``_timers``), and the caller object is itself the abort function
its task parks with. The kinds of caller differ only in where the answer
goes: a waiting task (:class:`_TaskCaller`), a callback
(:class:`_CallbackCaller`), or a task that may get it before it parks
(:class:`_DirectCaller`, for calls an idle process answers at once; see
``_calls``).
"""

from __future__ import annotations

from collections import deque
from collections.abc import Awaitable, Callable
from typing import TYPE_CHECKING, Any

import outcome
from trio.lowlevel import Abort, Task, reschedule

from ._errors import CallTimeout
from ._process import _CALL
from ._timers import Timed

if TYPE_CHECKING:
    from ._process import Process

__all__ = ["Caller"]


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
