"""The exception hierarchy of the runtime.

Every error a caller of :mod:`condukt.otp` can act on derives from
:class:`ConduktError`, so code may catch broadly or narrowly (as with httpx).
"""

from __future__ import annotations

from typing import Any

__all__ = [
    "CallError",
    "CallTimeout",
    "CallingSelf",
    "ChildNotFound",
    "ChildRestarting",
    "ChildRunning",
    "ConduktError",
    "MailboxFull",
    "NameTaken",
    "NoProc",
    "TooManyChildren",
]


class ConduktError(Exception):
    """Base class of every error condukt raises on purpose.

    The whole tree, every layer's errors under their public names, is drawn
    once, in ``docs/errors.md``.
    """


class NoProc(ConduktError):
    """The target process is not alive (it never started or already exited)."""


class CallTimeout(ConduktError, TimeoutError):
    """A :meth:`Handle.call` got no reply within its timeout.

    The request is withdrawn: if the server has not picked it up yet it never
    will, and a late reply is dropped.
    """


class CallError(ConduktError):
    """The server exited while the call was pending (or exited unexpectedly).

    ``reason`` is the exit reason: ``"normal"``, ``"shutdown"``, ``"killed"``
    or the exception that crashed the server (also set as ``__cause__``).
    Also raised by ``Handle.stop`` when the process exited with an exception
    instead of the requested reason (its ``terminate`` raised), and by a
    start when the process was stopped or killed by someone else during its
    ``init``.
    """

    def __init__(self, reason: Any, message: str | None = None) -> None:
        self.reason = reason
        super().__init__(message or f"server exited during call: {reason!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.reason, str(self)))


class MailboxFull(ConduktError):
    """A ``*_nowait`` send found the target's mailbox at capacity."""


class NameTaken(ConduktError):
    """A process is already registered under that name on this node."""

    def __init__(self, name: str) -> None:
        self.name = name
        super().__init__(f"name already registered: {name!r}")

    def __reduce__(self) -> tuple[Any, ...]:
        return (type(self), (self.name,))


class TooManyChildren(ConduktError):
    """A dynamic supervisor already runs ``max_children`` children."""


class CallingSelf(ConduktError):
    """A process tried to call (or stop-and-wait on) itself, which would deadlock."""


class ChildNotFound(ConduktError, LookupError):
    """No child with that id (or handle) under this supervisor."""


class ChildRunning(ConduktError):
    """The operation needs the child stopped first (``restart_child``, ``delete_child``)."""


class ChildRestarting(ChildRunning):
    """The child is being restarted by its supervisor (OTP's ``{error, restarting}``).

    Raised by ``restart_child`` and ``delete_child`` while a restart of that
    child is due or under way (its ``init`` keeps failing, say);
    ``terminate_child`` stops the restarting for good. A
    :class:`ChildRunning`: the operation needs the child stopped first.
    """
