"""Static supervisors (OTP's ``supervisor`` with one_for_one, one_for_all, rest_for_one)."""

from __future__ import annotations

from collections.abc import Hashable, Iterable
from typing import Any

import trio

from ._child_spec import ChildCounts, ChildSpec, start_process, validate_supervisor
from ._errors import ChildNotFound, ChildRunning, NoProc
from ._process import Caller, Handle
from ._signals import ExitReason
from ._spawnable import H
from ._supervisor_base import RestartIntensity, SupervisorBase, needs_restart, stop_child, supervisor_of

__all__ = ["Supervisor", "SupervisorHandle"]


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
        return supervisor_of(self, Supervisor)

    def which_children(self) -> list[tuple[Hashable, Handle | None]]:
        """``(id, handle or None)`` for every child spec, in start order.

        Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        return [(c.spec.id, c.handle) for c in self._sup()._children]

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
        it too). A call into the supervisor: cancellation and ``timeout``
        behave as for :meth:`Handle.call` (a start already under way
        completes and the child stays). Raises ``TypeError`` for a non-spec,
        ``ValueError`` for a missing or duplicate id, whatever the child's
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

        A temporary child's spec is removed, as in OTP. A call into the
        supervisor (cancellation as for :meth:`Handle.call`: the stop, once
        begun, completes). Raises :class:`ChildNotFound` for an unknown id.
        """
        await self.call(("terminate_child", child_id), timeout=timeout)

    async def restart_child(self, child_id: Hashable, *, timeout: float | None = None) -> Handle:
        """Start a terminated child again; returns its new handle.

        Typed as :class:`Handle`: an id does not say which class it starts.
        A call into the supervisor (cancellation as for :meth:`Handle.call`).
        Raises :class:`ChildNotFound` for an unknown id, :class:`ChildRunning`
        if it runs, and whatever its ``init`` raised.
        """
        result: Handle = await self.call(("restart_child", child_id), timeout=timeout)
        return result

    async def delete_child(self, child_id: Hashable, *, timeout: float | None = None) -> None:
        """Remove a terminated child's spec.

        A call into the supervisor (cancellation as for :meth:`Handle.call`).
        Raises :class:`ChildNotFound` for an unknown id and
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

    Temporary children are never restarted, not even as siblings. More than
    ``max_restarts`` restarts within ``max_seconds`` make the supervisor stop
    every child and exit with reason ``"shutdown"``, which its own supervisor
    sees as an abnormal exit (OTP's escalation). On exit, children are
    stopped in reverse start order, each within its ``shutdown`` budget.
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
        me = self.handle
        proc = me._process
        nursery = None if proc is None else proc._nursery
        if nursery is None:
            raise NoProc(f"{me!r} is not running")
        child.handle = await start_process(me._node, child.spec, nursery=nursery, parent=me, key=child)
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

    async def terminate(self, reason: ExitReason) -> None:
        # Not shielded: when the supervisor's own shutdown budget runs out,
        # the children not stopped yet are cancelled with it ("killed").
        for child in reversed(self._children):
            await self._stop(child, shield=False)

    # ------------------------------------------------------------------ restarts

    async def _child_exited(self, handle: Handle, reason: ExitReason, key: Any) -> None:
        child = key
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
        await self._restart(self._start_group, group)

    async def _start_group(self, group: list[_Child]) -> None:
        """(Re)start the members of ``group`` that are not running and still listed, in order."""
        for member in group:
            if member.handle is None and member in self._children:
                await self._start(member)
