"""What an agent's handle may read of its live agent: :class:`AgentStatus`, kept by :class:`AgentServer`.

:class:`~condukt.agent.AgentHandle` answers a few questions synchronously,
without a message (``session_id``, ``state``, ``info()``, whether the calling
task is part of one of the agent's runs). It asks them of the agent's
:class:`AgentStatus` (the kernel's state provides it), which the agent keeps
in :class:`AgentServer`, its base class: the handle reads it through
:func:`status_of`, never through another class's private attributes, and
without importing the kernel (which sits above the handle).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any, Protocol

from trio.lowlevel import Task

from ..otp import Server
from ._info import AgentInfo

__all__ = ["AgentServer", "AgentStatus", "bind_status", "status_of"]


class AgentStatus(Protocol):
    """The live agent as its handle sees it: read in the agent's trio run, never awaiting."""

    @property
    def session_id(self) -> str:
        """The conversation's id."""
        ...

    @property
    def lifecycle_state(self) -> str:
        """``"idle"``, ``"running"``, ``"finishing"``, ``"maintaining"`` or ``"hibernated"``."""
        ...

    @property
    def running(self) -> bool:
        """Whether a run is in progress (running or delivering its result)."""
        ...

    @property
    def queued(self) -> int:
        """Runs (and maintenance jobs) waiting behind the current one."""
        ...

    @property
    def working(self) -> bool:
        """Whether a job is in progress in a task (else nothing can be part of one)."""
        ...

    @property
    def start_options(self) -> Mapping[str, Any]:
        """The start options the agent was given."""
        ...

    @property
    def agent_class(self) -> type[Server]:
        """The agent's class."""
        ...

    def info(self) -> AgentInfo:
        """What the agent is doing now."""
        ...

    def runs_in(self, task: Task) -> bool:
        """Whether ``task`` is part of the job in progress (its task, or a task it started)."""
        ...


class AgentServer(Server):
    """The base of :class:`~condukt.Agent`: a server that keeps its :class:`AgentStatus` for its handle.

    Not for subclassing directly: subclass :class:`~condukt.Agent`. The
    status sits under a name-mangled attribute, so a subclass may define any
    attribute it likes.
    """

    #: Set once, as the agent boots (:func:`bind_status`); None until then.
    __status: AgentStatus | None = None


# The two functions below are this module's own access to its class's attribute (name-mangled there).


def bind_status(server: AgentServer, status: AgentStatus) -> None:
    """Make ``status`` what :func:`status_of` returns for ``server`` (once, as the agent boots)."""
    server._AgentServer__status = status  # type: ignore[attr-defined]


def status_of(server: Server | None) -> AgentStatus | None:
    """The status of a booted agent's server; None for anything else (no server, not booted, not an agent)."""
    if not isinstance(server, AgentServer):
        return None
    status: AgentStatus | None = server._AgentServer__status  # type: ignore[attr-defined]
    return status
