"""How a supervisor starts a child: :class:`ChildSpec` and its validation (``_process`` starts it)."""

from __future__ import annotations

import math
import time
import traceback
from collections.abc import Hashable, Iterable, Mapping
from typing import Any, Generic, Literal, final

import attrs

from ._handle import Handle
from ._server import Server
from ._spawnable import H_co, Spawnable

__all__ = [
    "EXITS_KEPT",
    "TIMELINE_KEPT",
    "ChildCounts",
    "ChildExit",
    "ChildInfo",
    "ChildSpec",
    "RestartType",
    "SupervisorInfo",
    "child_exit",
    "child_info",
]

RestartType = Literal["permanent", "transient", "temporary"]
_RESTART_TYPES = ("permanent", "transient", "temporary")
_STRATEGIES = ("one_for_one", "one_for_all", "rest_for_one")

#: Default ``shutdown`` budget (seconds) of a worker; supervisors get ``"infinity"``.
DEFAULT_SHUTDOWN = 5.0


def _to_tuple(value: Iterable[Any]) -> tuple[Any, ...]:
    return tuple(value)


def _check_start(instance: Any, attribute: Any, value: Any) -> None:
    if not (isinstance(value, type) and issubclass(value, Server)):
        raise TypeError(f"ChildSpec.start must be a condukt.Server subclass, got {value!r}")


def _check_restart(instance: Any, attribute: Any, value: Any) -> None:
    if value not in _RESTART_TYPES:
        raise ValueError(f"unknown restart type {value!r}; expected one of {', '.join(_RESTART_TYPES)}")


def _check_shutdown(instance: Any, attribute: Any, value: Any) -> None:
    if value is None or value in ("brutal_kill", "infinity"):
        return
    if isinstance(value, bool) or not isinstance(value, (int, float)) or value < 0 or math.isnan(value):
        raise ValueError(
            f"shutdown must be seconds >= 0, 'brutal_kill', 'infinity' or None, got {value!r}"
        )


def _check_mailbox(instance: Any, attribute: Any, value: Any) -> None:
    if value is not None and (isinstance(value, bool) or not isinstance(value, int) or value < 1):
        raise ValueError(f"mailbox_size must be a positive int, got {value!r}")


@final
@attrs.frozen
class ChildSpec(Generic[H_co]):
    """How to start (and restart) one child of a supervisor.

    ``start(*args, **kwargs)`` names the :class:`Server` subclass and the
    arguments of its ``init``. ``restart`` is ``"permanent"`` (always
    restarted), ``"transient"`` (restarted only after an exit other than
    ``"normal"``, ``"shutdown"`` or ``("shutdown", detail)``) or
    ``"temporary"`` (never). ``shutdown`` is
    how many seconds ``terminate`` gets when the supervisor stops the child,
    ``"brutal_kill"`` to kill it without ``terminate``, or ``"infinity"``;
    ``None`` means 5 s for workers and ``"infinity"`` for supervisors, as in
    OTP. ``name`` registers each incarnation under that name on the node.
    ``id`` identifies the child within a static supervisor (dynamic
    supervisors ignore it; pass ``None``).

    Generic in the handle type its ``start`` class makes (inferred; a bare
    ``ChildSpec`` annotation means ``ChildSpec[Handle]``), so the
    ``start_child`` functions return that type.
    """

    id: Hashable | None
    start: type[Spawnable[H_co]] = attrs.field(validator=_check_start)
    args: tuple[Any, ...] = attrs.field(default=(), converter=_to_tuple)
    kwargs: Mapping[str, Any] = attrs.field(factory=dict)
    restart: RestartType = attrs.field(default="permanent", validator=_check_restart)
    shutdown: float | Literal["brutal_kill", "infinity"] | None = attrs.field(
        default=None, validator=_check_shutdown
    )
    name: Hashable | None = None
    mailbox_size: int | None = attrs.field(default=None, validator=_check_mailbox)

    @property
    def is_supervisor(self) -> bool:
        """Whether this child is itself a supervisor."""
        # ``start`` is a Server subclass (validated); typed as Spawnable for inference.
        start: Any = self.start
        return bool(start._eager_nursery)

    @property
    def brutal_kill(self) -> bool:
        """Whether the supervisor kills this child without ``terminate``."""
        return self.shutdown == "brutal_kill"

    @property
    def shutdown_timeout(self) -> float | None:
        """The ``terminate`` budget in seconds (``None``: unbounded)."""
        value = self.shutdown
        if value is None:
            return None if self.is_supervisor else DEFAULT_SHUTDOWN
        if value == "infinity":
            return None
        if value == "brutal_kill":
            return DEFAULT_SHUTDOWN  # budget for self-initiated exits only
        return float(value)


@attrs.frozen
class ChildCounts:
    """What ``count_children`` reports (OTP's ``count_children/1``)."""

    specs: int
    active: int
    supervisors: int
    workers: int


@attrs.frozen
class ChildInfo:
    """One child of a supervisor, as ``child_info()`` reports it (for dashboards and debugging).

    ``id``: the spec's id (``None`` under a dynamic supervisor); ``handle``:
    the running incarnation, or ``None`` (not running: terminated, ignored,
    or being restarted); ``server_class``: what the spec starts; ``restart``:
    the spec's restart type; ``restarts``: how many times the supervisor
    restarted this child after an exit (restarts that started; a manual
    ``restart_child`` is not counted); ``restarting``: a restart is due or
    under way; ``supervisor``: the child is itself a supervisor.
    """

    id: Hashable | None
    handle: Handle | None
    server_class: type[Server]
    restart: RestartType
    restarts: int
    restarting: bool
    supervisor: bool
    #: The last exits of this child that were abnormal or restarted, oldest first (at most :data:`EXITS_KEPT`).
    exits: tuple[ChildExit, ...] = ()


#: How many exits ``ChildInfo.exits`` keeps per child (its last incarnations).
EXITS_KEPT = 5
#: How many exits a supervisor's timeline (``SupervisorInfo.exits``) keeps.
TIMELINE_KEPT = 100
#: A crash report's traceback is cut to its last this many characters.
TRACEBACK_CHARS = 8000


@attrs.frozen
class ChildExit:
    """One exit of a supervised child that was abnormal or restarted: a crash report, for dashboards.

    ``child_id``: the spec's id (``None`` under a dynamic supervisor);
    ``pid``: the incarnation that exited; ``reason``: its exit reason as
    text (``"killed"``, ``"shutdown"``, or ``"RuntimeError: boom"`` for a
    crash); ``error_type``: the exception's class name for a crash, else
    ``None``; ``traceback``: the crash's formatted traceback (its last
    :data:`TRACEBACK_CHARS` characters), else ``None``; ``time``: when
    (seconds since the epoch); ``restarted``: whether the supervisor
    restarts the child after it. Text rather than the exception itself:
    a report kept for long must not keep the dead incarnation's frames alive.
    """

    child_id: Hashable | None
    pid: int
    reason: str
    error_type: str | None
    traceback: str | None
    time: float
    restarted: bool


def child_exit(child_id: Hashable | None, pid: int, reason: Any, restarted: bool) -> ChildExit:
    """The :class:`ChildExit` of a child that exited with ``reason`` (its traceback formatted now)."""
    if isinstance(reason, BaseException):
        text = f"{type(reason).__name__}: {reason}" if str(reason) else type(reason).__name__
        formatted = "".join(traceback.format_exception(reason))
        return ChildExit(child_id, pid, text, type(reason).__name__, formatted[-TRACEBACK_CHARS:], time.time(),
                         restarted)
    return ChildExit(child_id, pid, reason if isinstance(reason, str) else repr(reason), None, None, time.time(),
                     restarted)


@attrs.frozen
class SupervisorInfo:
    """A supervisor's restart policy and recent history (``info()`` of its handle), for dashboards.

    ``strategy``: ``"one_for_one"``, ``"one_for_all"`` or ``"rest_for_one"``
    (a dynamic supervisor is ``"one_for_one"``); ``max_restarts`` within
    ``max_seconds``: its restart intensity; ``intensity``: ``"supervisor"``
    (all children's restarts count together) or ``"per_child"``;
    ``exits``: the timeline of its children's abnormal or restarted exits,
    oldest first (at most :data:`TIMELINE_KEPT`).
    """

    strategy: str
    max_restarts: int
    max_seconds: float
    intensity: str
    exits: tuple[ChildExit, ...]


def child_info(
    spec: ChildSpec, handle: Handle | None, restarts: int, restarting: bool, exits: Iterable[ChildExit] | None = None
) -> ChildInfo:
    """The :class:`ChildInfo` of a child started from ``spec``."""
    start: Any = spec.start  # a Server subclass (validated); typed as Spawnable for inference
    return ChildInfo(spec.id, handle, start, spec.restart, restarts, restarting, spec.is_supervisor,
                     tuple(exits) if exits else ())


def validate_intensity(max_restarts: Any, max_seconds: Any) -> None:
    """Raise ``TypeError``/``ValueError`` for a bad restart intensity."""
    if isinstance(max_restarts, bool) or not isinstance(max_restarts, int):
        raise TypeError(f"max_restarts must be an int, got {max_restarts!r}")
    if max_restarts < 0:
        raise ValueError(f"max_restarts must be >= 0, got {max_restarts}")
    if isinstance(max_seconds, bool) or not isinstance(max_seconds, (int, float)):
        raise TypeError(f"max_seconds must be a number, got {max_seconds!r}")
    if not max_seconds > 0:
        raise ValueError(f"max_seconds must be > 0, got {max_seconds}")


def validate_supervisor(
    children: Iterable[ChildSpec], strategy: Any, max_restarts: Any, max_seconds: Any
) -> list[ChildSpec]:
    """Check a static supervisor's configuration; returns the children as a list."""
    if strategy not in _STRATEGIES:
        raise ValueError(f"unknown strategy {strategy!r}; expected one of {', '.join(_STRATEGIES)}")
    validate_intensity(max_restarts, max_seconds)
    if isinstance(children, (str, bytes, ChildSpec)) or not isinstance(children, Iterable):
        raise TypeError("children must be a list of ChildSpec")
    specs = list(children)
    seen: set[Hashable] = set()
    for spec in specs:
        if not isinstance(spec, ChildSpec):
            raise TypeError(f"children must be ChildSpec instances, got {spec!r}")
        if spec.id is None:
            raise ValueError(f"a static supervisor's child needs an id: {spec!r}")
        if spec.id in seen:
            raise ValueError(f"duplicate child id {spec.id!r}")
        seen.add(spec.id)
    return specs
