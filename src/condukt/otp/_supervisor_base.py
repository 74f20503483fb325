"""What both supervisors share: restart rules, the restart-intensity loop, child exits, stopping children."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Awaitable, Callable
from typing import Any, TypeVar

import trio

from ._child_spec import ChildSpec
from ._errors import NoProc
from ._process import Handle, Server
from ._signals import ChildExited, ExitReason, is_shutdown_exit

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
T = TypeVar("T")
R = TypeVar("R")


def needs_restart(restart: str, reason: ExitReason) -> bool:
    """OTP's restart rule for one exited child."""
    if restart == "permanent":
        return True
    if restart == "transient":
        return not is_shutdown_exit(reason)
    return False


class RestartIntensity:
    """At most ``max_restarts`` restarts within any ``max_seconds`` window."""

    __slots__ = ("_max_restarts", "_max_seconds", "_times")

    def __init__(self, max_restarts: int, max_seconds: float) -> None:
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._times: deque[float] = deque()

    def allow(self) -> bool:
        """Record one restart; ``False`` when the intensity is exceeded."""
        now = trio.current_time()
        times = self._times
        times.append(now)
        horizon = now - self._max_seconds
        while times and times[0] < horizon:
            times.popleft()
        return len(times) <= self._max_restarts


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
    """Stop a child the way its spec says and wait until it has exited."""
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

    Children run in the supervisor's own nursery (``start_process`` with
    ``parent=self.handle``), opened before ``init`` (so ``init`` can start
    them) and outliving the supervisor's cancel scope (so stopping the
    supervisor leaves them to ``terminate``, which stops them in order). A
    child's exit arrives as a ``ChildExited`` message and goes to
    ``_child_exited``; restarts go through :meth:`_restart`, which applies
    the restart intensity.
    """

    _eager_nursery = True
    _intensity: RestartIntensity

    #: A child exited (``key`` as given to ``start_process``): restart it
    #: or forget it. Each supervisor defines it as a method.
    _child_exited: Callable[[Handle, ExitReason, Any], Awaitable[None]]

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, ChildExited):
            await self._child_exited(message.handle, message.reason, message.key)
        else:
            await super().handle_info(message)

    async def _restart(self, start: Callable[[T], Awaitable[R]], what: T) -> R | None:
        """Run ``start(what)`` until it succeeds, each attempt counted against the restart intensity.

        Returns what ``start`` returned, or ``None`` when the supervisor gave
        up. A failed attempt is logged (the child's ``init`` error is
        reported here, once) and retried; when the intensity is exceeded the
        supervisor stops with reason ``"shutdown"`` (OTP's escalation).
        """
        # ``start`` and ``what`` rather than a closure: the callers'
        # ``_child_exited`` then makes no cells on every child exit.
        while True:
            if not self._intensity.allow():
                logger.error("%r: restart intensity exceeded; shutting down", self.handle)
                self.stop("shutdown")
                return None
            try:
                return await start(what)
            except Exception as exc:
                logger.error("%r: restarting a child failed", self.handle, exc_info=exc)
