"""Agents: the :class:`Agent` behaviour, its process, and :class:`AgentHandle`."""

from ._agent import AGENT_OPTIONS, Agent
from ._errors import (
    Aborted,
    AgentError,
    Busy,
    InvalidInput,
    InvalidOutput,
    NoResultSubmitted,
    NotRunning,
    RunTimeout,
    UnknownOperation,
)
from ._handle import STREAM_BUFFER, AgentHandle, EventStream
from ._ids import uuid7
from ._oneshot import run
from ._operations import BoundOperation, Operation, operation, operations_of, run_operation
from ._subagents import Subagent, SubagentSupervisor

__all__ = [
    "AGENT_OPTIONS",
    "STREAM_BUFFER",
    "Aborted",
    "Agent",
    "AgentError",
    "AgentHandle",
    "BoundOperation",
    "Busy",
    "EventStream",
    "InvalidInput",
    "InvalidOutput",
    "NoResultSubmitted",
    "NotRunning",
    "Operation",
    "RunTimeout",
    "Subagent",
    "SubagentSupervisor",
    "UnknownOperation",
    "operation",
    "operations_of",
    "run",
    "run_operation",
    "uuid7",
]
