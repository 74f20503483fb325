"""Processes: :class:`Process`, the state of one running incarnation, and how one is started.

A process is one trio task running a mailbox loop over a
:class:`~condukt.Server` instance. Its state (mailbox, links, monitors,
server instance, nursery, stop request, ...) lives on a :class:`Process`; a
:class:`~condukt.Handle` only names it and points at the :class:`Process`
while it runs (see ``_handle``). This module holds the loop, the exit
protocol (callers failed, monitors and links told, the supervisor
notified) and the two ways a process starts: :func:`start_process` (``init``
in the starting task) and :func:`start_detached` (``init`` in the process's
own task, for a supervisor's restarts).

The mailbox loop avoids per-message cancel scopes and channel machinery: a
message is appended to a deque and the parked process task is rescheduled
directly (callers park as ``_caller`` describes).
"""

from __future__ import annotations

import logging
import math
from collections import deque
from collections.abc import Awaitable, Callable
from contextvars import Context, copy_context
from typing import TYPE_CHECKING, Any, Final

import outcome
import trio
from trio.lowlevel import Abort, ParkingLot, Task, checkpoint, current_task, reschedule, wait_task_rescheduled

from ._current import current_node_var
from ._errors import CallError, NameTaken, NoProc
from ._signals import IGNORE, NO_REPLY, ChildExited, ChildStarted, Exit, ExitReason, is_normal_exit
from ._timers import Timed

if TYPE_CHECKING:
    from ._caller import Caller
    from ._child_spec import ChildSpec
    from ._handle import Handle
    from ._hosting import Hosted
    from ._monitors import MonitorRef
    from ._node import Node
    from ._server import Server
    from ._spawnable import H

__all__ = ["DEFAULT_MAILBOX_SIZE", "Process", "start_detached", "start_process"]

logger = logging.getLogger("condukt.otp")

#: Default mailbox capacity (messages). ``cast``/``send``/``call`` wait for
#: room beyond it; ``cast_nowait``/``send_nowait`` raise :class:`MailboxFull`.
DEFAULT_MAILBOX_SIZE: Final = 1024

#: Messages handled per scheduler pass before the loop yields to other tasks.
_BATCH: Final = 64

# What a mailbox entry is: ``(kind, payload, caller)``, the caller only for a call.
_CALL, _CAST, _INFO = 0, 1, 2
# _BOOTING: started in the background (``start_detached``): ``init`` runs in
# the process's own task and the parent hears the outcome as ``ChildStarted``.
_STARTING, _RUNNING, _DEAD, _BOOTING = 0, 1, 2, 3
# What the mailbox loop (``Process._serve``) ends with.
_STOPPED, _NEEDS_NURSERY, _HIBERNATED = 0, 1, 2


class Process(Timed):
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
        "_asleep",
        "_handle",
        "_hibernate_after",
        "_home",
        "_hosted",
        "_idle_since",
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
        # ``hibernate_after``: seconds idle before the task ends (None: never),
        # the nursery it restarts in, since when it is idle, whether the
        # server's state is compacted. The process is its own timer entry
        # (``Timed``): one object less per hibernating process. The timer is
        # armed when the process parks with none pending, and re-armed at
        # ``_idle_since + after`` when it fires early: one heap entry per
        # idle period, not one per message.
        self._timer_state = 0
        self._hibernate_after: float | None = None
        self._home: trio.Nursery | None = None
        self._idle_since = 0.0
        self._asleep = False
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

    @property
    def hibernated(self) -> bool:
        """True while the process hibernates: idle, with no task, its server's state compacted.

        Only a process started with ``hibernate_after`` hibernates (see
        ``docs/runtime.md``); its next message wakes it. Synchronous; never raises.
        """
        return self._asleep and self._state != _DEAD

    def links(self) -> list[Handle]:
        """The processes linked to this one (Erlang's ``process_info(Pid, links)``). Synchronous; never raises."""
        links = self._links
        return [] if not links else list(links)

    def monitored_by(self) -> list[Handle | None]:
        """Who monitors this process: each watching process's handle, ``None`` for a monitor held outside any
        process (``node.monitor``). Erlang's ``process_info(Pid, monitored_by)``. Synchronous; never raises."""
        monitors = self._monitors
        if not monitors:
            return []
        from ._handle import Handle  # noqa: PLC0415 - _handle imports this module

        return [ref._watcher if isinstance(ref._watcher, Handle) else None for ref in monitors]

    def mailbox_peek(self, limit: int = 20) -> list[tuple[str, Any]]:
        """The first ``limit`` messages waiting, oldest first, as ``(kind, message)``: kind ``"call"``,
        ``"cast"`` or ``"info"``. For dashboards: the messages themselves, not copies. Synchronous."""
        mailbox = self._mailbox
        if not mailbox:
            return []
        kinds = ("call", "cast", "info")
        found: list[tuple[str, Any]] = []
        for kind, message, _ in mailbox:
            if len(found) >= limit:
                break
            found.append((kinds[kind], message))
        return found

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
        """Reschedule the process task if it is parked waiting for its mailbox (start it again if it hibernates)."""
        if self._parked:
            self._parked = False
            task = self._task
            if task is None:
                self._restart_task()
            else:
                reschedule(task)

    # ------------------------------------------------------------------ hibernation

    def _may_hibernate(self) -> bool:
        """Whether the process task may end now: idle, nothing to serve, no work of its own running."""
        nursery = self._nursery
        return (
            self._stop is None
            and not self._mailbox
            and self._pending is None
            and self._hosted is None
            and self._current is None
            and (nursery is None or not nursery.child_tasks)
        )

    def _idle(self) -> None:
        """The process parks (or a caller starts work for it): idle from now; make sure the timer will look."""
        now = self._idle_since = trio.current_time()
        if self._timer_state != 1:
            after = self._hibernate_after
            assert after is not None
            self._handle._node._timers.schedule(now + after, self)

    def _fire(self) -> None:
        """The hibernation timer: end the task of a process idle for ``hibernate_after``, else look again later."""
        if self._state != _RUNNING or self._stop is not None or not self._parked:
            return  # exiting, or handling messages: its next park re-arms the timer
        after = self._hibernate_after
        assert after is not None
        now = trio.current_time()
        due = self._idle_since + after
        if self._hosted is not None or self._current is not None or self._mailbox:
            due = now + after  # a caller runs work for it: look again later
        if due > now:
            self._handle._node._timers.schedule(due, self)
            return
        task = self._task
        if task is None:
            # Already without a task (a call answered at once woke only its state).
            self._compact_server()
            return
        self._parked = False
        reschedule(task, outcome.Value(_HIBERNATED))  # a plain wake-up brings None

    def _compact_server(self) -> None:
        """Ask the server to compact its state (its ``hibernate`` hook); a failing hook is logged, never fatal."""
        server = self._server
        if self._asleep or server is None:
            return
        try:
            self._asleep = bool(server.on_hibernate())
        except Exception as exc:  # the state is as it was: the process stays awake
            logger.error("%r: on_hibernate() raised", self._handle, exc_info=exc)

    def _thaw(self) -> None:
        """Restore the server's compacted state before it handles anything (its ``wake`` hook)."""
        if not self._asleep:
            return
        self._asleep = False
        server = self._server
        if server is not None:
            server.on_wake()

    def _restart_task(self) -> None:
        """A message for a hibernating process: its task starts again where it was started, in its old context."""
        home = self._home
        context = self._context
        assert home is not None and context is not None
        try:
            # A copy: the saved context may be the one running now (a call
            # answered at once runs in it), and a context is entered once.
            context.copy().run(home.start_soon, self._main)
        except RuntimeError:  # its supervisor's nursery is closed: nowhere to run any more
            self._exit("shutdown")

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

    async def _serve(self) -> int:
        """The mailbox loop: returns ``_STOPPED``, ``_NEEDS_NURSERY`` or ``_HIBERNATED`` (the task may end)."""
        server = self._server
        assert server is not None
        hibernates = self._hibernate_after is not None
        while True:
            if self._stop is not None:
                return _STOPPED
            if self._pending is not None and self._nursery is None:
                return _NEEDS_NURSERY
            mailbox = self._mailbox
            if not mailbox:
                # Drop the last message before parking: an idle process must
                # not keep its request and caller alive (nor the GC walk them).
                payload = caller = reply = None
                self._parked = True
                if hibernates:
                    self._idle()
                if await wait_task_rescheduled(self._abort_park) == _HIBERNATED and self._may_hibernate():
                    self._compact_server()
                    if mailbox is not None and not mailbox:
                        self._mailbox = None  # an empty deque is ~600 bytes
                    if self._deferred is not None and not self._deferred:
                        self._deferred = None
                    return _HIBERNATED
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
        hibernated = False
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
                        if self._asleep:
                            self._thaw()
                        if self._pending is not None:
                            self._start_pending()
                        served = await self._serve()
                        if served == _HIBERNATED:
                            pass  # the nursery has no tasks: leave it, and the task ends
                        elif nursery.child_tasks:  # a cancel costs ~9k instructions: only when there is work to stop
                            nursery.cancel_scope.cancel()
                        else:
                            # Nothing can run in the nursery any more: exit now, so
                            # whoever waits for the exit runs in the same scheduling
                            # batch as the nursery's closing checkpoint, not after it
                            # (fewer instructions a spawn + run + stop: benchmarks/agent_instructions.py).
                            self._nursery = None
                            stop = self._stop
                            assert stop is not None
                            reason = await self._terminate(stop[0], stop[2]) if stop[1] else stop[0]
                            if self._hosted is not None:  # a kill: no terminate, which would have ended it
                                await self._end_hosted()
                            self._exit(reason)
                            return
                    if served == _HIBERNATED:
                        hibernated = True
                        return
                else:
                    with self._open_scope():
                        if self._state == _BOOTING:
                            booted = await self._boot_here()
                            if booted is not None:
                                reason = booted
                                return
                        if self._asleep:
                            self._thaw()
                        served = _NEEDS_NURSERY if self._pending is not None else await self._serve()
                        if served == _NEEDS_NURSERY:
                            async with trio.open_nursery() as nursery:
                                self._nursery = nursery
                                self._start_pending()
                                served = await self._serve()
                                if served != _HIBERNATED and nursery.child_tasks:
                                    nursery.cancel_scope.cancel()
                        if served == _HIBERNATED:
                            hibernated = True
                            return
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
            if hibernated:
                # Idle with nothing running: the task ends, the process lives
                # on without one (``_wake`` starts another in this context).
                task = self._task
                assert task is not None
                self._scope = None
                self._context = task.context
                self._task = None
                self._parked = True
                if not self._may_hibernate():
                    self._wake()  # a message or a stop came while the task was leaving
            else:
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
        if self._timer_state == 1:  # a hibernation timer must not keep the dead process alive
            node._timers.cancel(self)
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



# --------------------------------------------------------------------------- starting


async def start_process(
    node: Node,
    spec: ChildSpec[H],
    *,
    nursery: trio.Nursery,
    parent: Handle | None = None,
    key: Any = None,
) -> H:
    """Create a process from ``spec``, run its ``init`` and start its loop in ``nursery``.

    ``parent`` gets a ``ChildExited(handle, reason, key)`` message when the
    process exits.

    Ordinary servers run ``init`` right here, in the starting task (OTP's
    ``start_link`` also blocks until ``init`` returns); supervisors run it in
    their own task, inside the nursery their children will live in. Raises
    whatever ``init`` raised, with nothing left running or registered; the
    same holds when the start is cancelled (a supervisor's ``init`` is
    cancelled and the children it started are stopped before this returns).
    When ``init`` returns :data:`IGNORE`, the returned handle has already
    exited with reason ``"normal"`` (and ``parent`` hears nothing).
    """
    handle, proc, server = _new_process(node, spec, parent, key)
    cls = type(server)
    _set_hibernation(node, spec, proc, cls, nursery)
    name = spec.name
    if name is not None:
        node._register(name, handle)
    node._process_count += 1
    proc._init_task = current_task()
    if cls._eager_nursery:
        proc._boot_args = (spec.args, dict(spec.kwargs))
        try:
            nursery.start_soon(proc._main)
        except RuntimeError:
            proc._exit("shutdown", notify=False)
            raise NoProc("the supervisor is shutting down") from None
        try:
            result = await wait_task_rescheduled(proc._abort_init_wait)
        except BaseException:
            # ``init`` failed, or the start was cancelled and the process told
            # to shut down (``_abort_init_wait``): wait until it is gone, its
            # children included, so nothing is left running or registered.
            with trio.CancelScope(shield=True):
                await handle.wait()
            raise
        if result is IGNORE:
            with trio.CancelScope(shield=True):
                await handle.wait()  # it exits "normal" at once, nothing started
        return handle
    # ``init`` runs in the starting task, but on the process's node (``current_node()``).
    token = current_node_var.set(node)
    try:
        result = await server.boot(*spec.args, **spec.kwargs)
    except BaseException as exc:
        proc._init_task = None
        proc._exit(exc if isinstance(exc, Exception) else "killed", notify=False)
        raise
    finally:
        current_node_var.reset(token)
    proc._init_task = None
    if result is IGNORE:
        proc._exit("normal", notify=False)
        return handle
    proc._state = _RUNNING
    # What its task will start with (the starter's context, on the process's
    # node): calls it takes at once before that task first runs use it.
    context = proc._context = copy_context()
    context.run(current_node_var.set, node)
    try:
        nursery.start_soon(proc._main)
    except RuntimeError:
        proc._exit("shutdown", notify=False)
        raise NoProc("the supervisor is shutting down") from None
    return handle


def _new_process(node: Node, spec: ChildSpec[H], parent: Handle | None, key: Any) -> tuple[H, Process, Server]:
    """The handle, process and server instance for one start of ``spec`` (nothing registered or running)."""
    # ``spec.start`` is a Server subclass (validated) whose ``handle_class``
    # the type checker saw as ``type[H]`` (see ``Spawnable``). Plain ``Any``
    # locals, not ``typing.cast`` calls: this runs once per process start.
    start: Any = spec.start
    cls: type[Server] = start
    made: Any = cls.handle_class(node, cls, spec.name)
    handle: H = made
    server = cls()
    server.handle = handle
    mailbox_size = spec.mailbox_size
    # Positional: keywords to a class call cost a dict per process.
    proc = Process(
        handle,
        server,
        DEFAULT_MAILBOX_SIZE if mailbox_size is None else mailbox_size,
        spec.shutdown_timeout,
        parent,
        key,
    )
    return handle, proc, server


def _set_hibernation(node: Node, spec: ChildSpec[H], proc: Process, cls: type[Server], nursery: trio.Nursery) -> None:
    """Give ``proc`` its hibernation timer when its start (or else its class) asks for one."""
    if cls._eager_nursery:
        return  # a supervisor's task holds its children's nursery: it never hibernates
    after = spec.hibernate_after
    if after is None:
        after = cls.default_hibernate_after(node)
    if after is not None and after != math.inf:
        proc._hibernate_after = float(after)
        proc._home = nursery


def start_detached(
    node: Node,
    spec: ChildSpec[H],
    *,
    nursery: trio.Nursery,
    parent: Handle,
    key: Any = None,
) -> H:
    """Create a process from ``spec`` whose ``init`` runs in its own task, in ``nursery``; returns at once.

    A supervisor's restarts use it so that a slow ``init`` never holds up
    its mailbox. The name (if any) is registered as ``init`` begins, in the
    process's task. ``parent`` (a supervisor) hears of the outcome exactly
    once: when ``init`` returned, its ``_child_running(handle, key)`` is
    called from the child's task, before the child serves anything (its
    exit is later reported as for :func:`start_process`); otherwise it gets
    a ``ChildStarted(handle, failure, key)`` message, ``failure`` being
    :data:`IGNORE` or why it did not start (the exception ``init`` raised,
    :class:`NameTaken`, a stop or kill during ``init``). Synchronous; raises
    only what the class's (or its handle class's) constructor raised.
    ``parent`` hears nothing while it is stopping.
    """
    handle, proc, server = _new_process(node, spec, parent, key)
    _set_hibernation(node, spec, proc, type(server), nursery)
    proc._state = _BOOTING
    proc._boot_args = (spec.args, dict(spec.kwargs))
    node._process_count += 1
    # The name is registered by the process's own task, just before init
    # (``Process._boot_here``): as when init runs in the starter's task,
    # nobody finds the process before its ``boot`` has begun.
    try:
        nursery.start_soon(proc._main)
    except RuntimeError:
        proc._exit("shutdown")  # the parent is shutting down and hears nothing
    return handle
