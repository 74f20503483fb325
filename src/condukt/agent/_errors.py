"""Errors a run can end with."""

from __future__ import annotations

from ..otp import ConduktError

__all__ = [
    "Aborted",
    "AgentError",
    "Busy",
    "EventsEvicted",
    "HandoffCycle",
    "HandoffFailed",
    "InputAlreadyAnswered",
    "InvalidInput",
    "InvalidOutput",
    "NoResultSubmitted",
    "NotRunning",
    "RunFailed",
    "RunTimeout",
    "SessionLost",
    "UnknownApproval",
    "UnknownInputRequest",
    "UnknownOperation",
    "UnknownRun",
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


class UnknownRun(AgentError, LookupError):
    """No detached run with that id: never submitted to this agent, or forgotten.

    An agent remembers its last ``DETACHED_KEPT`` ended runs in memory; with a
    session store, older ones (up to the store's ``runs`` per key) are read
    back from it.
    """

    def __init__(self, run_id: str) -> None:
        super().__init__(f"no detached run {run_id!r:.200}")
        #: The run id asked about.
        self.run_id = run_id


class EventsEvicted(AgentError, LookupError):
    """``attach(run_id, after=...)`` asked for events older than the run's log still keeps.

    A detached run's log keeps its last ``DETACHED_EVENTS`` events (the
    store its ``run_events``); ``first_index`` is the oldest one kept:
    attach again with ``after=first_index - 1`` to read from there.
    """

    def __init__(self, run_id: str, after: int, first_index: int) -> None:
        super().__init__(
            f"run {run_id!r:.200} keeps events from index {first_index} on; events after {after} were evicted"
        )
        self.run_id = run_id
        self.after = after
        #: The oldest event index the log still keeps.
        self.first_index = first_index


class RunFailed(AgentError):
    """A detached run failed in another incarnation (its exception is known by name and message only).

    Raised by ``result(run_id)`` when the run's outcome was read back from
    the store; in the incarnation that ran it, ``result`` raises the run's
    own exception instead.
    """

    def __init__(self, run_id: str, error_type: str, message: str) -> None:
        super().__init__(f"{error_type}: {message}")
        self.run_id = run_id
        #: The exception class name of the run's failure.
        self.error_type = error_type
        self.message = message


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


class UnknownInputRequest(AgentError, LookupError):
    """No deferred tool call with that id waits for an answer (``agent.respond``): never asked, or not this agent's.

    Nothing changes: the agent and its runs go on.
    """

    def __init__(self, call_id: str, message: str | None = None) -> None:
        super().__init__(message or f"no tool call {call_id!r} is waiting for an answer")
        #: The call id asked about.
        self.call_id = call_id


class InputAlreadyAnswered(UnknownInputRequest):
    """The deferred tool call with that id was answered already; the first answer stands."""

    def __init__(self, call_id: str) -> None:
        super().__init__(call_id, f"tool call {call_id!r} was already answered")


class HandoffFailed(AgentError):
    """The agent a run handed off to (``condukt.handoff``) crashed or its run failed; the run fails with this.

    ``target`` names the handoff; ``reason`` is the target's exit reason or
    the exception its run failed with. The handing-off agent survives, its
    history keeping the turns before the handoff.
    """

    def __init__(self, target: str, reason: object, message: str) -> None:
        super().__init__(message)
        #: The handoff's name (its tool's name).
        self.target = target
        #: The target's exit reason, or its run's exception.
        self.reason = reason


class HandoffCycle(AgentError):
    """A handoff would hand the conversation back to an agent class already in the chain (a cycle).

    ``chain`` holds the agent classes' names in handoff order, the refused target last.
    """

    def __init__(self, chain: tuple[str, ...], message: str) -> None:
        super().__init__(message)
        #: The agent classes handed through, the refused target last.
        self.chain = chain
