"""Static supervisors (OTP's ``supervisor`` with one_for_one, one_for_all, rest_for_one)."""

from __future__ import annotations

from collections import deque
from collections.abc import Hashable, Iterable
from typing import Any

import trio

from ._caller import Caller
from ._child_spec import (
    EXITS_KEPT,
    ChildCounts,
    ChildExit,
    ChildInfo,
    ChildSpec,
    SupervisorInfo,
    child_info,
    validate_supervisor,
)
from ._errors import ChildNotFound, ChildRestarting, ChildRunning, NoProc
from ._handle import Handle
from ._process import start_process
from ._signals import IGNORE, ExitReason, _Sentinel
from ._spawnable import H
from ._supervisor_base import RestartIntensity, SupervisorBase, needs_restart, stop_child, supervisor_of

__all__ = ["Supervisor", "SupervisorHandle"]


class _Child:
    __slots__ = ("exits", "handle", "restarting", "restarts", "spec", "starting")

    def __init__(self, spec: ChildSpec) -> None:
        self.spec = spec
        #: The running incarnation, or ``None``.
        self.handle: Handle | None = None
        #: The incarnation whose ``init`` runs in the background (a restart).
        self.starting: Handle | None = None
        #: A restart of this child is due or under way (OTP's ``restarting``).
        self.restarting = False
        #: Restarts that started (``child_info``).
        self.restarts = 0
        #: Its last abnormal or restarted exits (``child_info``), made at the first one.
        self.exits: deque[ChildExit] | None = None


#: The message a supervisor sends itself to go on with its restarts.
_PUMP = _Sentinel("_PUMP", "<go on with the restarts>")


class _Attempt:
    """One restart under way: ``group`` started one member at a time, in order."""

    __slots__ = ("group", "index", "stamp")

    def __init__(self, group: list[_Child], stamp: float) -> None:
        self.group = group
        self.index = 0
        self.stamp = stamp


class SupervisorHandle(Handle):
    """The handle of a static :class:`Supervisor`.

    The inspection methods are synchronous; the others are calls into the
    supervisor process (``timeout=None`` by default, because starting a
    child waits for that child's ``init``). Restarts run their ``init`` in
    the background, so these calls are answered while a child's restart
    keeps failing.
    """

    __slots__ = ()

    def _sup(self) -> Supervisor:
        return supervisor_of(self, Supervisor)

    def which_children(self) -> list[tuple[Hashable, Handle | None]]:
        """``(id, handle or None)`` for every child spec, in start order.

        ``None``: not running (terminated, ignored, or being restarted: OTP's
        ``undefined`` and ``restarting``). Synchronous. Raises
        :class:`NoProc` once the supervisor has exited.
        """
        return [(c.spec.id, c.handle) for c in self._sup()._children]

    def child_info(self) -> list[ChildInfo]:
        """A :class:`ChildInfo` for every child spec, in start order (``which_children`` with restart counts).

        Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        return [child_info(c.spec, c.handle, c.restarts, c.restarting, c.exits) for c in self._sup()._children]

    def info(self) -> SupervisorInfo:
        """The supervisor's strategy, restart intensity and the timeline of its children's exits.

        Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        sup = self._sup()
        return SupervisorInfo(sup._strategy, sup._max_restarts, sup._max_seconds, "supervisor",
                              tuple(sup._timeline or ()))

    def count_children(self) -> ChildCounts:
        """How many specs, running children, supervisors and workers.

        Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        children = self._sup()._children
        sups = sum(1 for c in children if c.spec.is_supervisor)
        return ChildCounts(
            specs=len(children),
            active=sum(1 for c in children if c.handle is not None),
            supervisors=sups,
            workers=len(children) - sups,
        )

    async def start_child(self, spec: ChildSpec[H], *, timeout: float | None = None) -> H:
        """Add ``spec`` at the end and start it; returns the child's handle.

        The handle's type is ``spec.start.handle_class`` (type checkers see
        it too). If the child's ``init`` returns :data:`IGNORE`, the handle
        has already exited (``alive`` is ``False``) and the spec stays listed
        as not running, unless it is temporary (OTP's ``{ok, undefined}``).
        A call into the supervisor: cancellation and ``timeout``
        behave as for :meth:`Handle.call` (a start already under way
        completes and the child stays). Raises ``TypeError`` for a non-spec,
        ``ValueError`` for a missing or duplicate id (OTP's
        ``already_present``/``already_started``), whatever the child's
        ``init`` raised, and :class:`NoProc` or :class:`CallError` if the
        supervisor is not running.
        """
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"expected a ChildSpec, got {spec!r}")
        if spec.id is None:
            raise ValueError("a static supervisor's child needs an id")
        result: H = await self.call(("start_child", spec), timeout=timeout)
        return result

    async def terminate_child(self, child_id: Hashable, *, timeout: float | None = None) -> None:
        """Stop a child for good (it stays listed; ``restart_child`` starts it again).

        A child being restarted is not restarted any more (an ``init`` under
        way is cancelled), as in OTP. A temporary child's spec is removed,
        as in OTP. A call into the supervisor (cancellation as for
        :meth:`Handle.call`: the stop, once begun, completes). Raises
        :class:`ChildNotFound` for an unknown id.
        """
        await self.call(("terminate_child", child_id), timeout=timeout)

    async def restart_child(self, child_id: Hashable, *, timeout: float | None = None) -> Handle:
        """Start a terminated child again; returns its new handle.

        Typed as :class:`Handle`: an id does not say which class it starts.
        An ``init`` that returns :data:`IGNORE` gives a handle that has
        already exited. A call into the supervisor (cancellation as for
        :meth:`Handle.call`). Raises :class:`ChildNotFound` for an unknown
        id, :class:`ChildRestarting` while the supervisor restarts it,
        :class:`ChildRunning` if it runs, and whatever its ``init`` raised.
        """
        result: Handle = await self.call(("restart_child", child_id), timeout=timeout)
        return result

    async def delete_child(self, child_id: Hashable, *, timeout: float | None = None) -> None:
        """Remove a terminated child's spec.

        A call into the supervisor (cancellation as for :meth:`Handle.call`).
        Raises :class:`ChildNotFound` for an unknown id,
        :class:`ChildRestarting` while the supervisor restarts it, and
        :class:`ChildRunning` if it runs.
        """
        await self.call(("delete_child", child_id), timeout=timeout)


class Supervisor(SupervisorBase):
    """A static supervisor: starts ``children`` in order and restarts them per ``strategy``.

    Start with ``node.start_supervisor(children, ...)`` or nest one with
    ``ChildSpec(id, Supervisor, kwargs={"children": [...], ...})``.

    * ``one_for_one``: only the exited child is restarted.
    * ``one_for_all``: all other children are stopped (reverse start order)
      and all are restarted in start order.
    * ``rest_for_one``: the children started after it are stopped (reverse
      order) and restarted with it, in start order.

    Temporary children are never restarted, not even as siblings. A restart
    runs each child's ``init`` in the background, one child after the other;
    meanwhile the supervisor answers its API. When a child fails to start,
    the restart is tried again the same way (with ``one_for_all``, the
    children already restarted are stopped and all start again; with
    ``rest_for_one``, from the child that failed), as in OTP. Every attempt
    counts against the intensity: more than ``max_restarts`` attempts within
    ``max_seconds`` make the supervisor stop every child and exit with
    reason ``"shutdown"``, which its own supervisor sees as an abnormal exit
    (OTP's escalation). Attempts that failed stay counted until the child
    starts, so a child that cannot start brings the supervisor down however
    slowly its ``init`` fails (unlike OTP). On exit, children are stopped in
    reverse start order, each within its ``shutdown`` budget.
    """

    handle_class = SupervisorHandle

    async def init(
        self,
        children: Iterable[ChildSpec],
        strategy: str = "one_for_one",
        max_restarts: int = 3,
        max_seconds: float = 5.0,
    ) -> None:
        specs = validate_supervisor(children, strategy, max_restarts, max_seconds)
        self._strategy = strategy
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        self._intensity = RestartIntensity(max_restarts, max_seconds)
        self._children: list[_Child] = [_Child(spec) for spec in specs]
        # Restarts due (OTP's try-again messages), and the one under way.
        self._due: deque[_Child] = deque()
        self._attempt: _Attempt | None = None
        for child in list(self._children):
            try:
                await self._start(child)
            except BaseException:
                for started in reversed(self._children[: self._children.index(child)]):
                    await self._stop(started)
                raise

    # ------------------------------------------------------------------ helpers

    async def _start(self, child: _Child) -> Handle:
        """Start ``child`` now, its ``init`` in this task (initial starts and the API)."""
        me = self.handle
        proc = me._process
        nursery = None if proc is None else proc._nursery
        if nursery is None:
            raise NoProc(f"{me!r} is not running")
        handle = await start_process(me._node, child.spec, nursery=nursery, parent=me, key=child)
        if handle.alive:
            child.handle = handle
        elif child.spec.restart == "temporary" and child in self._children:
            self._children.remove(child)  # ignored: a temporary spec is not kept (OTP)
        return handle

    async def _stop(self, child: _Child, *, shield: bool = True) -> None:
        """Stop ``child``: its running incarnation, or the one still in ``init``."""
        handle, child.handle = child.handle, None  # its exit notice is now stale
        if handle is None:
            handle, child.starting = child.starting, None  # so is its start notice
        if handle is not None and handle.alive:
            with trio.CancelScope(shield=shield):
                await stop_child(handle, child.spec)

    def _find(self, child_id: Hashable) -> _Child:
        for child in self._children:
            if child.spec.id == child_id:
                return child
        raise ChildNotFound(f"no child {child_id!r} under {self.handle!r}")

    def _not_restarting(self, child: _Child) -> None:
        """``child`` is no longer restarted: drop it from the attempt under way, free its held attempts."""
        child.restarting = False
        self._intensity.release(child)

    # ------------------------------------------------------------------ callbacks

    async def handle_call(self, request: Any, caller: Caller) -> Any:
        op, arg = request
        try:
            if op == "start_child":
                if any(c.spec.id == arg.id for c in self._children):
                    raise ValueError(f"duplicate child id {arg.id!r}")
                child = _Child(arg)
                handle = await self._start(child)
                if handle.alive or arg.restart != "temporary":
                    self._children.append(child)
                return handle
            child = self._find(arg)
            if op == "terminate_child":
                if child.restarting:
                    self._not_restarting(child)
                await self._stop(child)
                if child.spec.restart == "temporary" and child in self._children:
                    self._children.remove(child)
                await self._pump()  # the restart under way may have waited for this child
                return None
            if child.restarting:
                raise ChildRestarting(f"child {arg!r} is being restarted")
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

    async def terminate(self, reason: ExitReason) -> None:
        # Not shielded: when the supervisor's own shutdown budget runs out,
        # the children not stopped yet are cancelled with it ("killed").
        self._due.clear()
        self._attempt = None
        for child in reversed(self._children):
            await self._stop(child, shield=False)

    # ------------------------------------------------------------------ restarts

    def _child_exit_now(self, handle: Handle, reason: ExitReason, key: Any) -> bool:
        child = key
        if not isinstance(child, _Child) or child.handle is not handle:
            return True  # we stopped it ourselves, or it was already replaced
        restart = needs_restart(child.spec.restart, reason)
        if restart and self._strategy != "one_for_one":
            return False  # its siblings are to be stopped first: in our own task
        self._child_exit_record(child, handle, reason, restart)
        child.handle = None
        if not restart:
            if child.spec.restart == "temporary":
                self._children.remove(child)
            return True
        self._restart_due(child)
        self._pump_now()
        return True

    async def _child_exited(self, handle: Handle, reason: ExitReason, key: Any) -> None:
        child = key
        if not isinstance(child, _Child) or child.handle is not handle:
            return  # we stopped it ourselves, or it was already replaced
        child.handle = None
        restart = needs_restart(child.spec.restart, reason)
        self._child_exit_record(child, handle, reason, restart)
        if not restart:
            if child.spec.restart == "temporary":
                self._children.remove(child)
            return
        self._restart_due(child)
        await self._pump()

    def _child_exit_record(self, child: _Child, handle: Handle, reason: ExitReason, restart: bool) -> None:
        record = self._record_exit(child.spec.id, handle, reason, restart and not self._stopping())
        if record is not None:
            if child.exits is None:
                child.exits = deque(maxlen=EXITS_KEPT)
            child.exits.append(record)

    def _restart_due(self, child: _Child) -> None:
        child.restarting = True
        if child not in self._due:
            self._due.append(child)

    def _child_running(self, handle: Handle, key: Any) -> None:
        child = key
        if not isinstance(child, _Child) or child.starting is not handle:
            return  # we stopped it during its init: it is being stopped
        child.starting = None
        child.handle = handle
        child.restarts += 1
        self._not_restarting(child)
        attempt = self._attempt
        assert attempt is not None and attempt.group[attempt.index] is child
        attempt.index += 1
        if not self._advance() and self._due:
            if self._strategy == "one_for_one":
                self._pump_now()
            else:
                self.handle._system(_PUMP)  # siblings to stop: in our own task

    async def _child_started(self, handle: Handle, failure: ExitReason, key: Any) -> None:
        child = key
        if not isinstance(child, _Child) or child.starting is not handle:
            return  # we stopped it during its init
        child.starting = None
        attempt = self._attempt
        assert attempt is not None and attempt.group[attempt.index] is child
        if failure is IGNORE:
            self._not_restarting(child)
            if child.spec.restart == "temporary":
                self._children.remove(child)
            attempt.index += 1
        else:
            # OTP: the child stays "restarting" and the restart is tried
            # again through a message to ourselves (here, the due queue);
            # the members after it wait, stopped, for that retry.
            self._start_failed(failure)
            self._intensity.hold(child, attempt.stamp)
            for later in attempt.group[attempt.index + 1 :]:
                if later.handle is None:
                    later.restarting = False
            self._attempt = None
            self._restart_due(child)
        await self._pump()

    async def handle_info(self, message: Any) -> None:
        if message is _PUMP:
            await self._pump()
        else:
            await super().handle_info(message)

    def _advance(self) -> bool:
        """Start the next member of the restart under way, in the background; ``False`` once it is done."""
        attempt = self._attempt
        if attempt is None:
            return False
        group = attempt.group
        while attempt.index < len(group):
            member = group[attempt.index]
            if member.starting is not None:
                return True  # under way
            if member.restarting and member.handle is None and member in self._children:
                member.starting = self._spawn(member.spec, member)
                return True
            attempt.index += 1
        self._attempt = None
        return False

    async def _pump(self) -> None:
        """Drive the restarts: go on with the one under way, or begin the next one due.

        Each member's ``init`` runs in the background (``_spawn``); this
        returns as soon as one is under way, and its outcome
        (``_child_running`` or ``ChildStarted``) goes on from there. A
        restart due is counted against the intensity when it begins (OTP's
        ``add_restart``), then its siblings are stopped per the strategy.
        """
        while (child := self._next_restart()) is not None:
            stamp = self._allow_restart()
            if stamp is None:
                return
            group = [child] if self._strategy == "one_for_one" else await self._group(child)
            self._begin(group, stamp)

    def _pump_now(self) -> None:
        """:meth:`_pump` for ``one_for_one``, which has no siblings to wait for."""
        while (child := self._next_restart()) is not None:
            stamp = self._allow_restart()
            if stamp is None:
                return
            self._begin([child], stamp)

    def _next_restart(self) -> _Child | None:
        """The child whose restart is to begin now: none while one is under way or we are stopping."""
        while not self._stopping() and not self._advance() and self._due:
            child = self._due.popleft()
            if child.restarting and child.handle is None and child in self._children:
                return child
            # else terminated, deleted or restarted since
        return None

    def _begin(self, group: list[_Child], stamp: float) -> None:
        for member in group:
            member.restarting = True
        self._attempt = _Attempt(group, stamp)

    async def _group(self, child: _Child) -> list[_Child]:
        """The children to restart with ``child`` (one_for_all, rest_for_one), in start order.

        Stops the running ones first, in reverse start order, and drops the
        temporary ones.
        """
        index = self._children.index(child)
        # A copy: a child that exits meanwhile may be forgotten at once (_child_exit_now).
        others = self._children[:] if self._strategy == "one_for_all" else self._children[index + 1 :]
        for other in reversed(others):
            if other is not child:
                await self._stop(other)
        for other in list(others):
            if other is not child and other.spec.restart == "temporary":
                self._children.remove(other)
        return [c for c in self._children if c is child or c in others]
