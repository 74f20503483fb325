"""What both supervisors share: restart rules, the restart intensity, child exits and starts, stopping children."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from ._child_spec import TIMELINE_KEPT, ChildExit, ChildSpec, child_exit
from ._errors import NoProc
from ._handle import Handle
from ._process import start_detached
from ._server import Server
from ._signals import ChildExited, ChildStarted, ExitReason, is_shutdown_exit

__all__ = [
    "RestartIntensity",
    "SupervisorBase",
    "needs_restart",
    "request_child_stop",
    "stop_child",
    "supervisor_of",
]

logger = logging.getLogger("condukt.otp")

S = TypeVar("S", bound=Server)


def needs_restart(restart: str, reason: ExitReason) -> bool:
    """OTP's restart rule for one exited child."""
    if restart == "permanent":
        return True
    if restart == "transient":
        return not is_shutdown_exit(reason)
    return False


class RestartIntensity:
    """At most ``max_restarts`` restarts within any ``max_seconds`` window.

    Every restart attempt counts, as in OTP. Unlike OTP, an attempt whose
    child failed to start is *held*: it stays counted, however old, until
    that child starts again or stops being restarted (:meth:`release`). A
    child that cannot start thus brings its supervisor down after
    ``max_restarts`` attempts whatever its ``init`` takes to fail; OTP ages
    such attempts out, so an ``init`` that fails slowly enough is retried
    forever.
    """

    __slots__ = ("_held", "_held_count", "_max_restarts", "_max_seconds", "_times")

    def __init__(self, max_restarts: int, max_seconds: float) -> None:
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._times: deque[float] = deque()
        self._held: dict[object, list[float]] = {}
        self._held_count = 0

    def allow(self) -> float | None:
        """Record one restart attempt now; returns its time stamp, or ``None`` when the intensity is exceeded."""
        now = trio.current_time()
        times = self._times
        times.append(now)
        horizon = now - self._max_seconds
        while times and times[0] < horizon:
            times.popleft()
        if len(times) + self._held_count > self._max_restarts:
            return None
        return now

    def hold(self, key: object, stamp: float) -> None:
        """The attempt made at ``stamp`` failed to start ``key``: keep it counted until :meth:`release`."""
        try:
            self._times.remove(stamp)
        except ValueError:
            pass  # already out of the window: held all the same
        self._held.setdefault(key, []).append(stamp)
        self._held_count += 1

    def release(self, key: object) -> None:
        """``key`` started (or is no longer restarted): its held attempts age like any other."""
        if not self._held:
            return
        stamps = self._held.pop(key, None)
        if stamps:
            self._held_count -= len(stamps)
            self._times = deque(sorted([*self._times, *stamps]))


def request_child_stop(handle: Handle, spec: ChildSpec) -> None:
    """Ask a child to exit the way its spec says (``terminate`` budget or brutal kill); does not wait."""
    proc = handle._process
    if proc is None:
        return
    if spec.brutal_kill:
        proc._request_exit("killed", terminate=False, timeout=None)
    else:
        proc._request_exit("shutdown", terminate=True, timeout=spec.shutdown_timeout)


async def stop_child(handle: Handle, spec: ChildSpec) -> None:
    """Stop a child the way its spec says and wait until it has exited.

    A child still in a background ``init`` has that ``init`` cancelled (no
    ``terminate``: it never ran).
    """
    request_child_stop(handle, spec)
    await handle.wait()


def supervisor_of(handle: Handle, cls: type[S]) -> S:
    """The supervisor instance behind ``handle``; raises :class:`NoProc` once it has exited."""
    proc = handle._process
    server = None if proc is None else proc._server
    if server is None:
        raise NoProc(f"{handle!r} is not alive")
    assert isinstance(server, cls)
    return server


class SupervisorBase(Server):
    """The part of a supervisor that does not depend on how it keeps its children.

    Children run in the supervisor's own nursery, opened before ``init`` (so
    ``init`` can start them) and outliving the supervisor's cancel scope (so
    stopping the supervisor leaves them to ``terminate``, which stops them in
    order). A child's exit goes to ``_child_exit_now``, called synchronously
    from the exiting child's task; what needs waiting (stopping siblings)
    it declines, and the exit then arrives as a ``ChildExited`` message for
    ``_child_exited``, in the supervisor's own task.

    Restarts never run a child's ``init`` in the supervisor's own task: a
    restart is a :func:`start_detached` (:meth:`_spawn`), so the supervisor
    serves its API between (and during) restart attempts. A child that
    starts calls ``_child_running`` synchronously from its own task; one
    that does not start arrives as a ``ChildStarted`` message for
    ``_child_started``, which tries again (OTP's supervisor retries through
    a message to itself). Each attempt is counted by :meth:`_allow_restart`
    against the intensity.
    """

    _eager_nursery = True
    _intensity: RestartIntensity
    #: The timeline of abnormal or restarted exits (``info().exits``); made at the first one.
    _timeline: deque[ChildExit] | None = None

    #: A child exited (``key`` as given when it was started): restart it
    #: or forget it. Each supervisor defines it as a method.
    _child_exited: Callable[[Handle, ExitReason, Any], Awaitable[None]]
    #: The same, called synchronously from the exiting child's task (never
    #: raises, never blocks); returns ``False`` to get a ``ChildExited``
    #: message instead, for what must wait in the supervisor's own task.
    _child_exit_now: Callable[[Handle, ExitReason, Any], bool]
    #: A background start ended without the child running: ``failure`` is
    #: ``IGNORE`` or why it did not start. Each supervisor defines it.
    _child_started: Callable[[Handle, ExitReason, Any], Awaitable[None]]
    #: A background start's ``init`` returned: the child runs from now on.
    #: Called synchronously from the child's task (never raises, never
    #: blocks), so it must leave the supervisor's state consistent at once.
    _child_running: Callable[[Handle, Any], None]

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, ChildExited):
            await self._child_exited(message.handle, message.reason, message.key)
        elif isinstance(message, ChildStarted):
            await self._child_started(message.handle, message.failure, message.key)
        else:
            await super().handle_info(message)

    def _record_exit(self, child_id: Any, handle: Handle, reason: ExitReason, restarted: bool) -> ChildExit | None:
        """Add a crash report to the timeline for an exit that was abnormal or restarted; ``None`` for the others.

        Normal exits of children that stay down are not recorded: they are
        the everyday end of temporary workers, and cost nothing here.
        """
        if not restarted and is_shutdown_exit(reason):
            return None
        record = child_exit(child_id, handle.id, reason, restarted)
        timeline = self._timeline
        if timeline is None:
            timeline = self._timeline = deque(maxlen=TIMELINE_KEPT)
        timeline.append(record)
        return record

    def _stopping(self) -> bool:
        """Whether this supervisor is exiting (it restarts nothing more)."""
        proc = self.handle._process
        return proc is None or proc._stop is not None

    def _allow_restart(self) -> float | None:
        """Count one restart attempt; returns its time stamp, or ``None`` after giving up.

        Giving up (more than ``max_restarts`` in ``max_seconds``) stops the
        supervisor with reason ``"shutdown"`` (OTP's escalation), once the
        current callback returns.
        """
        stamp = self._intensity.allow()
        if stamp is None:
            logger.error("%r: restart intensity exceeded; shutting down", self.handle)
            self.stop("shutdown")
        return stamp

    def _spawn(self, spec: ChildSpec, key: Any) -> Handle:
        """Start a child from ``spec`` in the background; returns its handle at once.

        Its outcome comes later: ``_child_running``, or a ``ChildStarted``
        message. Never raises: a class that cannot even be instantiated
        (its ``__init__`` raised) is a failed start like any other.
        """
        me = self.handle
        proc = me._process
        nursery = None if proc is None else proc._nursery
        assert nursery is not None  # opened before init, kept until the process is dead
        try:
            return start_detached(me._node, spec, nursery=nursery, parent=me, key=key)
        except Exception as exc:
            start: Any = spec.start
            stand_in = Handle(me._node, start, spec.name)  # never ran, never registered
            me._system(ChildStarted(stand_in, exc, key))
            return stand_in

    def _start_failed(self, failure: ExitReason) -> None:
        """Report a failed restart attempt (the one report of that ``init`` error)."""
        if isinstance(failure, BaseException):
            logger.error("%r: restarting a child failed", self.handle, exc_info=failure)
        else:
            logger.error("%r: restarting a child failed: it exited with %r", self.handle, failure)
