"""Errors a run can end with."""

from __future__ import annotations

from ..otp import ConduktError

__all__ = [
    "Aborted",
    "AgentError",
    "Busy",
    "InvalidInput",
    "InvalidOutput",
    "NoResultSubmitted",
    "NotRunning",
    "RunTimeout",
    "SessionLost",
    "UnknownApproval",
    "UnknownOperation",
]


class AgentError(ConduktError):
    """Base class of the agent layer's errors."""


class Aborted(AgentError):
    """The run was stopped by ``abort()`` (or its caller went away).

    History keeps every completed turn; the turn in flight is dropped.
    """


class RunTimeout(AgentError, TimeoutError):
    """The run did not finish within its ``timeout``; the turn in flight is dropped."""


class Busy(AgentError):
    """The agent's bounded queue is full: ``max_queued_runs`` jobs (or ``max_follow_ups`` follow-ups) already wait.

    Runs submitted while the agent is busy otherwise wait their turn; this
    is back-pressure, raised in the caller, and the agent is unaffected.
    """


class NotRunning(AgentError):
    """``steer`` needs a run in progress."""


class InvalidInput(AgentError, ValueError):
    """A structured run's ``input`` does not match its schema; no model request was made."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        #: The individual validation messages.
        self.errors = errors or []


class InvalidOutput(AgentError):
    """The model kept submitting results that do not match the output schema."""

    def __init__(self, message: str, errors: list[str] | None = None) -> None:
        super().__init__(message)
        #: The validation messages of the last submission.
        self.errors = errors or []


class NoResultSubmitted(AgentError):
    """A structured run ended without the model calling ``submit_result``."""


class UnknownOperation(AgentError, LookupError):
    """No operation of that name is declared on the agent class."""


class UnknownApproval(AgentError, LookupError):
    """No tool call with that id waits for approval (never asked, already decided, or expired)."""

    def __init__(self, call_id: str) -> None:
        super().__init__(f"no tool call {call_id!r} is waiting for approval")
        #: The call id asked about.
        self.call_id = call_id


class SessionLost(AgentError):
    """The agent's session key was taken over by another owner: this agent writes nothing more (fencing).

    Raised in the run whose save the store refused (the run fails with it:
    ``Error`` then ``Done("failed")``), and in every later run; the agent
    then exits with it as its reason. ``key`` is the session key; ``owner``
    and ``node`` name the new holder as far as the store said (None when
    unknown); the store's refusal (a :class:`~condukt.sessions.SessionOwned`)
    is its ``__cause__``. It happens when the agent's node was silent (a
    partition, a paused process) for longer than the store's ``lease_ttl``
    and another agent acquired the key meanwhile; see ``docs/sessions.md``,
    "Agents own their keys".
    """

    def __init__(self, key: str, *, owner: str | None = None, node: str | None = None) -> None:
        self.key = key
        self.owner = owner
        self.node = node
        super().__init__(f"session {key!r:.200} was taken over by another owner: this agent writes nothing more")
