"""Errors a run can end with."""

from __future__ import annotations

from ..otp import ConduktError

__all__ = ["Aborted", "AgentError", "Busy", "NotRunning", "RunTimeout"]


class AgentError(ConduktError):
    """Base class of the agent layer's errors."""


class Aborted(AgentError):
    """The run was stopped by ``abort()`` (or its caller went away).

    History keeps every completed turn; the turn in flight is dropped.
    """


class RunTimeout(AgentError, TimeoutError):
    """The run did not finish within its ``timeout``; the turn in flight is dropped."""


class Busy(AgentError):
    """The agent is already running; use ``follow_up`` to queue a prompt instead."""


class NotRunning(AgentError):
    """``steer`` needs a run in progress."""
