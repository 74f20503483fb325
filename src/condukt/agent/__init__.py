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

__all__ = [
    "AGENT_OPTIONS",
    "STREAM_BUFFER",
    "Aborted",
    "Agent",
    "AgentError",
    "AgentHandle",
    "Busy",
    "EventStream",
    "InvalidInput",
    "InvalidOutput",
    "NoResultSubmitted",
    "NotRunning",
    "RunTimeout",
    "UnknownOperation",
    "uuid7",
]
