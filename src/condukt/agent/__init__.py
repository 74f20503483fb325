"""Agents: the :class:`Agent` behaviour, its process, and :class:`AgentHandle`.

The agent layer is a short turn loop (:mod:`._loop`), a lifecycle state
machine (:mod:`._lifecycle`) and features that plug in as capabilities
(:class:`Capability`): persistence, compaction, scrubbing, project
instructions, structured output, sub-agents, telemetry.
"""

from ._agent import Agent
from ._capability import Capability
from ._config import AGENT_OPTIONS, AgentConfig
from ._errors import (
    Aborted,
    AgentError,
    Busy,
    InvalidInput,
    InvalidOutput,
    NoResultSubmitted,
    NotRunning,
    RunTimeout,
    UnknownApproval,
    UnknownOperation,
)
from ._guardrails import GuardrailTripped, InputGuardrail, OutputGuardrail
from ._handle import STREAM_BUFFER, AgentHandle, EventStream
from ._info import AgentInfo, RunInfo, ToolCallInfo
from ._oneshot import run
from ._operations import BoundOperation, Operation, operation, operations_of, run_operation
from ._run import Run, RunResult
from ._session import Session
from ._subagents import Subagent, SubagentSupervisor
from ._usage_limits import UsageLimitExceeded, UsageLimits

__all__ = [
    "AGENT_OPTIONS",
    "STREAM_BUFFER",
    "Aborted",
    "Agent",
    "AgentConfig",
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
    "Session",
    "Subagent",
    "SubagentSupervisor",
    "ToolCallInfo",
    "UnknownApproval",
    "UnknownOperation",
    "UsageLimitExceeded",
    "UsageLimits",
    "operation",
    "operations_of",
    "run",
    "run_operation",
]
