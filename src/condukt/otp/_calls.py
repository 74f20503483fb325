"""The ways to post a call besides :meth:`Handle.call`: :func:`start_call` and :func:`call_with_callback`.

Both go through the mailbox as ``Handle.call`` does (``_caller._post_call``),
except when the process is idle and its server has
:meth:`Server.handle_call_now`: then the calling task runs that callback
itself, in the process's context, and may host the awaited work the answer
needs (:meth:`Caller.host`), which saves the process's task a scheduling
round per call and a worker task per hosted call. :mod:`condukt.otp.lowlevel`
exports both.
"""

from __future__ import annotations

import math
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import Context
from typing import TYPE_CHECKING, Any

import outcome
import trio
from trio.lowlevel import Task, current_task, reschedule, wait_task_rescheduled

from ._caller import Caller, _CallbackCaller, _DirectCaller, _post_call
from ._errors import NoProc
from ._hosting import Hosted, in_context
from ._process import _CALL
from ._server import Server
from ._signals import NO_REPLY

if TYPE_CHECKING:
    from ._handle import Handle
    from ._process import Process

__all__ = ["call_with_callback", "start_call"]


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
        if proc._hibernate_after is not None:
            proc._idle()  # busy now: the idle time counts from here
            proc._thaw()
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
        if proc._hibernate_after is not None:
            proc._idle_since = trio.current_time()
        waiter = hosted.waiter
        if waiter is not None:  # the exiting process waits for the work to end
            reschedule(waiter)
    yielded = steps.yielded
    # Nothing of the work stays alive while the caller waits below: fewer objects
    # for the cyclic GC to walk when many callers wait (benchmarks/agent_loop.py,
    # its concurrent runs).
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

