"""Agents: the :class:`Agent` behaviour, its process, and :class:`AgentHandle`.

The agent layer is a kernel and a wing of capabilities. The kernel: the
turn loop (:mod:`._loop`), the lifecycle state machine (:mod:`._lifecycle`)
and the incarnation's state and mailbox (:mod:`._state`). The features plug
in as :class:`Capability` objects, which see the agent through its
:class:`AgentContext`: the built-in ones (persistence, compaction,
scrubbing, project instructions, structured output, sub-agents, telemetry,
tool sources, approvals, resumption) live in :mod:`condukt.agent.capabilities`,
one module each, with the one list of them in order.
"""

import warnings
from typing import Any

from . import capabilities
from ._agent import Agent
from ._capability import Capability
from ._config import AGENT_OPTIONS, AgentConfig
from ._context import AgentContext
from ._errors import (
    Aborted,
    AgentError,
    Busy,
    InvalidInput,
    InvalidOutput,
    NoResultSubmitted,
    NotRunning,
    RunTimeout,
    SessionLost,
    UnknownApproval,
    UnknownOperation,
)
from ._handle import STREAM_BUFFER, AgentHandle, EventStream
from ._info import AgentInfo, RunInfo, ToolCallInfo
from ._oneshot import run
from ._operations import BoundOperation, Operation, operation, operations_of, run_operation
from ._result import RunResult
from ._run import Run
from .capabilities.guardrails import GuardrailTripped, InputGuardrail, OutputGuardrail
from .capabilities.subagents import Subagent, SubagentSupervisor
from .capabilities.usage_limits import UsageLimitExceeded, UsageLimits

__all__ = [
    "AGENT_OPTIONS",
    "STREAM_BUFFER",
    "Aborted",
    "Agent",
    "AgentConfig",
    "AgentContext",
    "AgentError",
    "AgentHandle",
    "AgentInfo",
    "BoundOperation",
    "Busy",
    "Capability",
    "EventStream",
    "GuardrailTripped",
    "InputGuardrail",
    "InvalidInput",
    "InvalidOutput",
    "NoResultSubmitted",
    "NotRunning",
    "Operation",
    "OutputGuardrail",
    "Run",
    "RunInfo",
    "RunResult",
    "RunTimeout",
    "SessionLost",
    "Subagent",
    "SubagentSupervisor",
    "ToolCallInfo",
    "UnknownApproval",
    "UnknownOperation",
    "UsageLimitExceeded",
    "UsageLimits",
    "capabilities",
    "operation",
    "operations_of",
    "run",
    "run_operation",
]

#: Names this package used to export, and what they are now (reachable with a DeprecationWarning).
_DEPRECATED = {
    # "Session" was the agent's runtime state; capabilities now get an AgentContext, which has the
    # attributes the Session's docstring listed. "Session" now means persisted sessions (condukt.sessions)
    # and HTTP conversations (condukt.web).
    "Session": (AgentContext, "condukt.agent.Session is deprecated: capabilities get a condukt.agent.AgentContext"),
}


def __getattr__(name: str) -> Any:
    moved = _DEPRECATED.get(name)
    if moved is None:
        raise AttributeError(f"module 'condukt.agent' has no attribute {name!r}")
    value, message = moved
    warnings.warn(message, DeprecationWarning, stacklevel=2)
    return value
