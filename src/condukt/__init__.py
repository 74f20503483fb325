"""condukt: reliable LLM agents as OTP-style processes on trio.

Layers (each imports only those before it): :mod:`condukt.otp` (processes,
supervisors), :mod:`condukt.messages` / :mod:`condukt.events` (data),
:mod:`condukt.tools`, :mod:`condukt.providers` (and :mod:`condukt.testing`),
:mod:`condukt.agent`. The names most programs need are re-exported here.
"""

from . import events, messages, providers, serialization, testing, tools
from .agent import (
    Aborted,
    Agent,
    AgentError,
    AgentHandle,
    Busy,
    EventStream,
    InvalidInput,
    InvalidOutput,
    NoResultSubmitted,
    NotRunning,
    RunTimeout,
    Subagent,
    UnknownOperation,
    operation,
    run,
    run_operation,
)
from .otp import *  # noqa: F403
from .otp import __all__ as _otp_all
from .providers import Model, ModelError, ModelRequest
from .tools import Tool, ToolContext, ToolError, tool

__version__ = "0.1.0"

__all__ = [
    *_otp_all,
    "Aborted",
    "Agent",
    "AgentError",
    "AgentHandle",
    "Busy",
    "EventStream",
    "InvalidInput",
    "InvalidOutput",
    "Model",
    "ModelError",
    "ModelRequest",
    "NoResultSubmitted",
    "NotRunning",
    "RunTimeout",
    "Subagent",
    "Tool",
    "ToolContext",
    "ToolError",
    "UnknownOperation",
    "__version__",
    "events",
    "messages",
    "operation",
    "providers",
    "run",
    "run_operation",
    "serialization",
    "testing",
    "tool",
    "tools",
]
