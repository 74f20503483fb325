"""Exit reasons and the runtime messages a process can receive in ``handle_info``."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Final

import attrs

if TYPE_CHECKING:
    from ._process import Handle, MonitorRef

__all__ = ["Down", "Exit", "ExitReason", "NO_REPLY", "is_normal_exit", "is_shutdown_exit"]

#: An exit reason: ``"normal"``, ``"shutdown"``, ``"killed"``, ``"noproc"``
#: or the exception object that crashed the process.
ExitReason = Any


class _NoReply:
    __slots__ = ()

    def __repr__(self) -> str:
        return "condukt.NO_REPLY"

    def __reduce__(self) -> str:
        return "NO_REPLY"


#: Returned from ``handle_call`` to defer the reply: the server answers later
#: with ``caller.reply(value)`` and keeps serving its mailbox meanwhile
#: (OTP's ``{:noreply, state}`` followed by ``GenServer.reply/2``).
NO_REPLY: Final = _NoReply()


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
    """True for the reasons a ``transient`` child is *not* restarted after."""
    return isinstance(reason, str) and reason in ("normal", "shutdown")


@attrs.frozen
class ChildExited:
    """Internal: a supervised child exited (delivered to its supervisor's mailbox).

    ``key`` is what the supervisor passed when it started the child, so it
    can find its record without the (dropped) process state.
    """

    handle: Handle
    reason: ExitReason
    key: Any = None
