"""Exit reasons and the runtime messages a process can receive in ``handle_info``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final, final

import attrs

if TYPE_CHECKING:
    from ._handle import Handle
    from ._monitors import MonitorRef

__all__ = ["IGNORE", "NO_REPLY", "Down", "Exit", "ExitReason", "is_normal_exit", "is_shutdown_exit"]

#: An exit reason: ``"normal"``, ``"shutdown"``, ``("shutdown", detail)``,
#: ``"killed"``, ``"noproc"``, the exception object that crashed the process,
#: or whatever was passed to ``stop``.
ExitReason = Any


class _Sentinel:
    """A named marker value: one instance each, kept by identity through pickling."""

    __slots__ = ("_name", "_shown")

    def __init__(self, name: str, shown: str) -> None:
        self._name = name
        self._shown = shown

    def __repr__(self) -> str:
        return self._shown

    def __reduce__(self) -> str:
        return self._name


#: Returned from ``handle_call`` to defer the reply: the server answers later
#: with ``caller.reply(value)`` and keeps serving its mailbox meanwhile
#: (OTP's ``{:noreply, state}`` followed by ``GenServer.reply/2``).
NO_REPLY: Final = _Sentinel("NO_REPLY", "condukt.NO_REPLY")


#: Returned from ``init`` to not start after all (OTP's ``ignore``): the
#: start returns a handle that has already exited with reason ``"normal"``,
#: without ``terminate``; nothing stays registered. A static supervisor keeps
#: the spec of such a child (not running, not restarted; a temporary one is
#: dropped); a dynamic supervisor forgets it.
IGNORE: Final = _Sentinel("IGNORE", "condukt.otp.IGNORE")


@final
@attrs.frozen
class Down:
    """A monitored process exited (OTP's ``{'DOWN', Ref, process, Pid, Reason}``).

    ``reason`` is ``"noproc"`` when the process was already dead when the
    monitor was set up.
    """

    handle: Handle
    reason: ExitReason
    ref: MonitorRef | None = None


@attrs.frozen
class Exit:
    """A linked process exited; delivered only to processes with ``trap_exits``."""

    handle: Handle
    reason: ExitReason


def is_normal_exit(reason: ExitReason) -> bool:
    """True for ``"normal"``: the only reason that does not kill linked processes."""
    return isinstance(reason, str) and reason == "normal"


def is_shutdown_exit(reason: ExitReason) -> bool:
    """True for the reasons a ``transient`` child is *not* restarted after.

    ``"normal"``, ``"shutdown"`` and ``("shutdown", detail)`` for any
    ``detail`` (OTP's ``{shutdown, Term}``: a clean stop that says why).
    """
    if isinstance(reason, str):
        return reason == "normal" or reason == "shutdown"
    return (
        isinstance(reason, tuple)
        and len(reason) == 2
        and isinstance(reason[0], str)
        and reason[0] == "shutdown"
    )


@attrs.frozen
class ChildExited:
    """Internal: a supervised child exited (delivered to its supervisor's mailbox).

    ``key`` is what the supervisor passed when it started the child, so it
    can find its record without the (dropped) process state.
    """

    handle: Handle
    reason: ExitReason
    key: Any = None


@attrs.frozen
class ChildStarted:
    """Internal: a child started in the background (``start_detached``) did not come out of ``init`` running.

    ``failure`` is :data:`IGNORE` when its ``init`` returned that, or the
    reason it exited during ``init`` (the exception ``init`` raised,
    :class:`NameTaken`, the reason of a stop or kill); no ``ChildExited``
    follows. (A child that runs tells its supervisor synchronously instead.)
    """

    handle: Handle
    failure: ExitReason
    key: Any = None
