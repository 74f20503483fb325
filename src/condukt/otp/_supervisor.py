"""Static supervisors (OTP's ``supervisor`` with one_for_one, one_for_all, rest_for_one)."""

from __future__ import annotations

import logging
from collections import deque
from collections.abc import Hashable, Iterable
from typing import Any

import trio

from ._child_spec import ChildCounts, ChildSpec, start_process, validate_supervisor
from ._errors import ChildNotFound, ChildRunning, NoProc
from ._process import Caller, Handle, Server
from ._signals import ChildExited, ExitReason, is_shutdown_exit

__all__ = ["RestartIntensity", "Supervisor", "SupervisorHandle", "needs_restart", "stop_child"]

logger = logging.getLogger("condukt.otp")


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


async def stop_child(handle: Handle, spec: ChildSpec) -> None:
    """Stop a child the way its spec says (``terminate`` budget or brutal kill) and wait."""
    if spec.brutal_kill:
        handle.kill()
    else:
        handle._request_exit("shutdown", terminate=True, timeout=spec.shutdown_timeout)
    await handle.wait()


class _Child:
    __slots__ = ("handle", "spec")

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        self.handle: Handle | None = None


class SupervisorHandle(Handle):
    """The handle of a static :class:`Supervisor`.

    The inspection methods are synchronous; the others are calls into the
    supervisor process, serialised with its restarts (``timeout=None`` by
    default, because starting a child waits for that child's ``init``).
    """

    __slots__ = ()

    def _sup(self) -> Supervisor:
        server = self._server
        if server is None:
            raise NoProc(f"{self!r} is not alive")
        assert isinstance(server, Supervisor)
        return server

    def which_children(self) -> list[tuple[Hashable, Handle | None]]:
        """``(id, handle or None)`` for every child spec, in start order."""
        return [(c.spec.id, c.handle) for c in self._sup()._children]

    def count_children(self) -> ChildCounts:
        """How many specs, running children, supervisors and workers."""
        children = self._sup()._children
        sups = sum(1 for c in children if c.spec.is_supervisor)
        return ChildCounts(
            specs=len(children),
            active=sum(1 for c in children if c.handle is not None),
            supervisors=sups,
            workers=len(children) - sups,
        )

    async def start_child(self, spec: ChildSpec, *, timeout: float | None = None) -> Handle:
        """Add ``spec`` at the end and start it; raises ``ValueError`` for a duplicate id."""
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"expected a ChildSpec, got {spec!r}")
        if spec.id is None:
            raise ValueError("a static supervisor's child needs an id")
        result: Handle = await self.call(("start_child", spec), timeout=timeout)
        return result

    async def terminate_child(self, child_id: Hashable, *, timeout: float | None = None) -> None:
        """Stop a child for good (it stays listed; ``restart_child`` starts it again).

        A temporary child's spec is removed, as in OTP.
        """
        await self.call(("terminate_child", child_id), timeout=timeout)

    async def restart_child(self, child_id: Hashable, *, timeout: float | None = None) -> Handle:
        """Start a terminated child again; raises :class:`ChildRunning` if it runs."""
        result: Handle = await self.call(("restart_child", child_id), timeout=timeout)
        return result

    async def delete_child(self, child_id: Hashable, *, timeout: float | None = None) -> None:
        """Remove a terminated child's spec; raises :class:`ChildRunning` if it runs."""
        await self.call(("delete_child", child_id), timeout=timeout)


class Supervisor(Server):
    """A static supervisor: starts ``children`` in order and restarts them per ``strategy``.

    Start with ``node.start_supervisor(children, ...)`` or nest one with
    ``ChildSpec(id, Supervisor, kwargs={"children": [...], ...})``.

    * ``one_for_one``: only the exited child is restarted.
    * ``one_for_all``: all other children are stopped (reverse start order)
      and all are restarted in start order.
    * ``rest_for_one``: the children started after it are stopped (reverse
      order) and restarted with it, in start order.

    Temporary children are never restarted, not even as siblings. More than
    ``max_restarts`` restarts within ``max_seconds`` make the supervisor stop
    every child and exit with reason ``"shutdown"``, which its own supervisor
    sees as an abnormal exit (OTP's escalation). On exit, children are
    stopped in reverse start order, each within its ``shutdown`` budget.
    """

    handle_class = SupervisorHandle
    _eager_nursery = True

    async def init(
        self,
        children: Iterable[ChildSpec],
        strategy: str = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
    ) -> None:
        specs = validate_supervisor(children, strategy, max_restarts, max_seconds)
        self._strategy = strategy
        self._intensity = RestartIntensity(max_restarts, max_seconds)
        self._children: list[_Child] = [_Child(spec) for spec in specs]
        for index, child in enumerate(self._children):
            try:
                await self._start(child)
            except BaseException:
                for started in reversed(self._children[:index]):
                    await self._stop(started)
                raise

    # ------------------------------------------------------------------ helpers

    async def _start(self, child: _Child) -> Handle:
        spec = child.spec
        nursery = self.handle._nursery
        assert nursery is not None
        child.handle = await start_process(
            self.handle._node,
            spec.start,
            spec.args,
            spec.kwargs,
            nursery=nursery,
            name=spec.name,
            mailbox_size=spec.mailbox_size,
            shutdown=spec.shutdown_timeout,
            parent=self.handle,
            key=child,
        )
        return child.handle

    async def _stop(self, child: _Child, *, shield: bool = True) -> None:
        handle, child.handle = child.handle, None  # its exit notice is now stale
        if handle is not None and handle.alive:
            with trio.CancelScope(shield=shield):
                await stop_child(handle, child.spec)

    def _find(self, child_id: Hashable) -> _Child:
        for child in self._children:
            if child.spec.id == child_id:
                return child
        raise ChildNotFound(f"no child {child_id!r} under {self.handle!r}")

    # ------------------------------------------------------------------ callbacks

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        op, arg = request
        try:
            if op == "start_child":
                if any(c.spec.id == arg.id for c in self._children):
                    raise ValueError(f"duplicate child id {arg.id!r}")
                child = _Child(arg)
                handle = await self._start(child)
                self._children.append(child)
                return handle
            child = self._find(arg)
            if op == "terminate_child":
                await self._stop(child)
                if child.spec.restart == "temporary":
                    self._children.remove(child)
                return None
            if child.handle is not None:
                raise ChildRunning(f"child {arg!r} is running")
            if op == "restart_child":
                return await self._start(child)
            if op == "delete_child":
                self._children.remove(child)
                return None
        except Exception as exc:  # the caller's mistake or the child's init: not our crash
            caller.reply_error(exc)
            return None
        return await super().handle_call(request, caller)

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, ChildExited):
            await self._child_exited(message.handle, message.reason)
        else:
            await super().handle_info(message)

    async def terminate(self, reason: ExitReason) -> None:
        # Not shielded: when the supervisor's own shutdown budget runs out,
        # the children not stopped yet are cancelled with it ("killed").
        for child in reversed(self._children):
            await self._stop(child, shield=False)

    # ------------------------------------------------------------------ restarts

    async def _child_exited(self, handle: Handle, reason: ExitReason) -> None:
        child = handle._child_key
        if not isinstance(child, _Child) or child.handle is not handle:
            return  # we stopped it ourselves, or it was already replaced
        child.handle = None
        restart = needs_restart(child.spec.restart, reason)
        if child.spec.restart == "temporary":
            self._children.remove(child)
        if not restart:
            return
        if self._strategy == "one_for_one":
            group = [child]
        else:
            index = self._children.index(child)
            others = self._children if self._strategy == "one_for_all" else self._children[index + 1 :]
            for other in reversed(others):
                if other is not child and other.handle is not None:
                    await self._stop(other)
            for other in list(others):
                if other is not child and other.spec.restart == "temporary":
                    self._children.remove(other)
            group = [c for c in self._children if c is child or c in others]
        await self._restart(group)

    async def _restart(self, group: list[_Child]) -> None:
        while True:
            if not self._intensity.allow():
                logger.error("%r: restart intensity exceeded; shutting down", self.handle)
                self.stop("shutdown")
                return
            try:
                for child in group:
                    if child.handle is None and child in self._children:
                        await self._start(child)
                return
            except Exception as exc:
                logger.error("%r: restarting a child failed", self.handle, exc_info=exc)
