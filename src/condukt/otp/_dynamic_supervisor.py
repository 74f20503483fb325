"""Dynamic supervisors (Elixir's ``DynamicSupervisor``): many children started on demand."""

from __future__ import annotations

import logging
from collections import deque
from typing import Any, Literal

from ._child_spec import (
    EXITS_KEPT,
    ChildCounts,
    ChildExit,
    ChildInfo,
    ChildSpec,
    SupervisorInfo,
    child_info,
    validate_intensity,
)
from ._errors import ChildNotFound, NoProc, TooManyChildren
from ._handle import Handle
from ._process import start_process
from ._signals import IGNORE, ExitReason
from ._spawnable import H
from ._supervisor_base import (
    RestartIntensity,
    SupervisorBase,
    needs_restart,
    request_child_stop,
    stop_child,
    supervisor_of,
)

__all__ = ["DynamicSupervisor", "DynamicSupervisorHandle"]

logger = logging.getLogger("condukt.otp")

#: Whom the restart intensity limits: the supervisor as a whole (OTP), or each child on its own.
Intensity = Literal["supervisor", "per_child"]


class _Restarting:
    """A child being restarted, filed under the handle of the incarnation that exited."""

    __slots__ = ("exits", "intensity", "old", "restarts", "spec", "stamp", "starting")

    def __init__(self, spec: ChildSpec, old: Handle, intensity: RestartIntensity, restarts: int,
                 exits: deque[ChildExit] | None = None) -> None:
        self.spec = spec
        #: The child's last exits (its crash reports), carried to the next incarnation.
        self.exits = exits
        self.old = old
        #: How many restarts of this child will have started once this one does.
        self.restarts = restarts
        #: The intensity this child's restarts count against (the supervisor's, or its own).
        self.intensity = intensity
        #: The incarnation whose ``init`` runs in the background, if any.
        self.starting: Handle | None = None
        self.stamp = 0.0


class DynamicSupervisorHandle(Handle):
    """The handle of a :class:`DynamicSupervisor`.

    ``start_child`` and ``terminate_child`` run in the calling task (no round
    trip through the supervisor's mailbox), so many tasks can start children
    at once; each start still waits for that child's ``init``.
    """

    __slots__ = ()

    def _sup(self) -> DynamicSupervisor:
        return supervisor_of(self, DynamicSupervisor)

    async def start_child(self, spec: ChildSpec[H]) -> H:
        """Start a child from ``spec`` (its ``id`` is ignored); returns its handle.

        The handle's type is ``spec.start.handle_class`` (type checkers see
        it too). Runs the child's ``init`` in the calling task. If ``init``
        returns :data:`IGNORE`, the handle has already exited (``alive`` is
        ``False``) and the supervisor keeps nothing (Elixir's ``:ignore``).

        Cancellation: a start cancelled while ``init`` runs leaves nothing
        running or registered (``init`` is cancelled with it).

        Raises ``TypeError`` for a non-spec, :class:`TooManyChildren` at
        ``max_children`` (children being restarted count), :class:`NoProc`
        if the supervisor is not running (or began shutting down while the
        child started), and whatever the child's ``init`` raised.
        """
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"expected a ChildSpec, got {spec!r}")
        return await self._sup()._start_child(spec)

    async def terminate_child(self, child: Handle) -> None:
        """Stop ``child`` for good (no restart) and wait until it has exited.

        ``child`` may also be the (dead) handle of a child the supervisor is
        restarting: the restart stops, an ``init`` under way is cancelled.

        Cancellation: cancelling the caller only stops the waiting; the
        child still stops and is not restarted. Raises :class:`ChildNotFound`
        if it is neither a running child of this supervisor nor one being
        restarted, :class:`NoProc` if the supervisor is not alive.
        """
        sup = self._sup()
        spec = sup._children.pop(child, None)
        if spec is not None:
            if sup._restarts:
                sup._restarts.pop(child, None)
            if sup._exits:
                sup._exits.pop(child, None)
            await stop_child(child, spec)
            return
        restarting = sup._restarting.pop(child, None)
        if restarting is None:
            raise ChildNotFound(f"{child!r} is not a child of {self!r}")
        restarting.intensity.release(restarting)
        starting, restarting.starting = restarting.starting, None
        if starting is not None:
            await stop_child(starting, restarting.spec)

    def count_children(self) -> ChildCounts:
        """How many children there are (``specs``, counting those being restarted), run (``active``), supervise.

        Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        sup = self._sup()
        specs = [*sup._children.values(), *(r.spec for r in sup._restarting.values())]
        sups = sum(1 for spec in specs if spec.is_supervisor)
        return ChildCounts(
            specs=len(specs), active=len(sup._children), supervisors=sups, workers=len(specs) - sups
        )

    def child_info(self) -> list[ChildInfo]:
        """A :class:`ChildInfo` for every child: the running ones in start order, then those being restarted.

        A child being restarted has ``handle`` ``None`` and ``restarting``
        true. Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        sup = self._sup()
        counts, exits = sup._restarts, sup._exits
        infos = [
            child_info(spec, handle, counts.get(handle, 0) if counts else 0, False,
                       exits.get(handle) if exits else None)
            for handle, spec in sup._children.items()
        ]
        infos.extend(child_info(r.spec, None, r.restarts - 1, True, r.exits) for r in sup._restarting.values())
        return infos

    def info(self) -> SupervisorInfo:
        """The supervisor's restart intensity and the timeline of its children's exits (strategy ``one_for_one``).

        Synchronous. Raises :class:`NoProc` once the supervisor has exited.
        """
        sup = self._sup()
        return SupervisorInfo("one_for_one", sup._max_restarts, sup._max_seconds,
                              "per_child" if sup._per_child else "supervisor", tuple(sup._timeline or ()))

    def which_children(self) -> list[tuple[None, Handle]]:
        """``(None, handle)`` for every running child, in start order.

        Children being restarted are not listed (``count_children`` counts
        them). Synchronous. Raises :class:`NoProc` once the supervisor has
        exited.
        """
        return [(None, handle) for handle in self._sup()._children]


class DynamicSupervisor(SupervisorBase):
    """A supervisor for children started on demand, all alike (one_for_one).

    Restart types and intensity work as for :class:`Supervisor`: each
    restart runs the child's ``init`` in the background (several children
    may restart at once), a failed one is tried again, and every attempt
    counts. On exit all children are asked to stop at once and the
    supervisor waits for all of them (as Elixir's ``DynamicSupervisor``
    does); the node's root supervisor instead stops them one by one in
    reverse start order.

    ``intensity="per_child"`` (not in OTP) applies ``max_restarts`` within
    ``max_seconds`` to each child on its own, for supervisors of many
    independent children (one agent per conversation): a child that
    exceeds it is given up (logged, no longer restarted, as if it were
    temporary) and the supervisor and its other children carry on. With
    the default ``"supervisor"``, restarts of all children count together
    and exceeding the limit stops the supervisor (OTP's escalation).
    """

    handle_class = DynamicSupervisorHandle

    async def init(
        self,
        max_children: int | None = None,
        max_restarts: int = 3,
        max_seconds: float = 5.0,
        *,
        ordered_shutdown: bool = False,
        intensity: Intensity = "supervisor",
    ) -> None:
        validate_intensity(max_restarts, max_seconds)
        if intensity not in ("supervisor", "per_child"):
            raise ValueError(f"intensity must be 'supervisor' or 'per_child', got {intensity!r}")
        self._per_child = intensity == "per_child"
        self._max_restarts = max_restarts
        self._max_seconds = max_seconds
        #: Per-child mode: the restart history of each running child that has been restarted.
        self._lineage: dict[Handle, RestartIntensity] = {}
        if max_children is not None and (
            isinstance(max_children, bool) or not isinstance(max_children, int) or max_children < 0
        ):
            raise ValueError(f"max_children must be None or an int >= 0, got {max_children!r}")
        self._max_children = max_children
        self._intensity = RestartIntensity(max_restarts, max_seconds)
        self._ordered_shutdown = ordered_shutdown
        self._children: dict[Handle, ChildSpec] = {}
        #: Restarts that started, per running child that has been restarted (``child_info``).
        self._restarts: dict[Handle, int] = {}
        #: The last exits of each running child that has exited before (``child_info``).
        self._exits: dict[Handle, deque[ChildExit]] = {}
        self._restarting: dict[Handle, _Restarting] = {}
        self._starting = 0

    async def _start_child(self, spec: ChildSpec[H]) -> H:
        me = self.handle
        proc = me._process
        if proc is None or proc._stop is not None:
            raise NoProc(f"{me!r} is not running")
        limit = self._max_children
        if limit is not None and len(self._children) + len(self._restarting) + self._starting >= limit:
            raise TooManyChildren(f"{me!r} already runs max_children={limit} children")
        nursery = proc._nursery
        assert nursery is not None  # opened before init, kept until the process is dead
        self._starting += 1
        try:
            handle = await start_process(me._node, spec, nursery=nursery, parent=me, key=spec)
        finally:
            self._starting -= 1
        if proc._stop is not None:
            # We began shutting down while the child ran init; it must not stay.
            child = handle._process
            if child is not None:
                child._request_exit("shutdown", terminate=True, timeout=spec.shutdown_timeout)
            raise NoProc(f"{me!r} shut down while the child started")
        if handle._process is not None:  # else its init returned IGNORE
            self._children[handle] = spec
        return handle

    # ------------------------------------------------------------------ restarts

    def _child_exit_now(self, handle: Handle, reason: ExitReason, key: Any) -> bool:
        spec = self._children.pop(handle, None)
        lineage = self._lineage.pop(handle, None) if self._per_child else None
        restarts = self._restarts.pop(handle, 0) if self._restarts else 0
        if spec is None:
            return True
        exits = self._exits.pop(handle, None) if self._exits else None
        restart = needs_restart(spec.restart, reason)
        record = self._record_exit(None, handle, reason, restart and not self._stopping())
        if record is not None and restart:
            if exits is None:
                exits = deque(maxlen=EXITS_KEPT)
            exits.append(record)
        if restart:
            if self._per_child:
                intensity = lineage or RestartIntensity(self._max_restarts, self._max_seconds)
            else:
                intensity = self._intensity
            restarting = _Restarting(spec, handle, intensity, restarts + 1, exits)
            self._restarting[handle] = restarting
            self._attempt(restarting)
        return True

    async def _child_exited(self, handle: Handle, reason: ExitReason, key: Any) -> None:
        self._child_exit_now(handle, reason, key)

    def _attempt(self, restarting: _Restarting) -> None:
        """One restart attempt, counted; its ``init`` runs in the background."""
        if self._per_child:
            stamp = restarting.intensity.allow()
            if stamp is None:
                logger.error("%r: restart intensity of child %r exceeded; not restarted", self.handle, restarting.old)
                del self._restarting[restarting.old]
                return
        else:
            stamp = self._allow_restart()
            if stamp is None:
                return
        restarting.stamp = stamp
        restarting.starting = self._spawn(restarting.spec, restarting)

    def _child_running(self, handle: Handle, key: Any) -> None:
        restarting = key
        if not isinstance(restarting, _Restarting) or restarting.starting is not handle:
            return  # terminated during its init: it is being stopped
        restarting.starting = None
        del self._restarting[restarting.old]
        restarting.intensity.release(restarting)
        self._children[handle] = restarting.spec
        self._restarts[handle] = restarting.restarts
        if restarting.exits:
            self._exits[handle] = restarting.exits
        if self._per_child:
            self._lineage[handle] = restarting.intensity

    async def _child_started(self, handle: Handle, failure: ExitReason, key: Any) -> None:
        restarting = key
        if not isinstance(restarting, _Restarting) or restarting.starting is not handle:
            return  # terminated during its init
        restarting.starting = None
        if failure is IGNORE:
            del self._restarting[restarting.old]
            restarting.intensity.release(restarting)
            return
        self._start_failed(failure)
        restarting.intensity.hold(restarting, restarting.stamp)
        self._attempt(restarting)  # tried again; OTP retries through a message to itself

    async def terminate(self, reason: ExitReason) -> None:
        children = list(self._children.items())
        self._children.clear()
        self._restarts.clear()
        self._exits.clear()
        for restarting in self._restarting.values():
            if restarting.starting is not None:
                children.append((restarting.starting, restarting.spec))
        self._restarting.clear()
        if self._ordered_shutdown:
            for handle, spec in reversed(children):
                await stop_child(handle, spec)
            return
        for handle, spec in reversed(children):
            request_child_stop(handle, spec)
        for handle, _ in children:
            if handle.alive:  # most are gone after the first wait: skip their checkpoints
                await handle.wait()
