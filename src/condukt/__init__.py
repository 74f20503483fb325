"""condukt: reliable LLM agents as OTP-style processes on trio.

Layers (each imports only those before it): :mod:`condukt.otp` (processes,
supervisors), :mod:`condukt.messages` / :mod:`condukt.events` /
:mod:`condukt.schema` (data), :mod:`condukt.sandbox`, :mod:`condukt.tools`,
:mod:`condukt.providers` (and :mod:`condukt.testing`), :mod:`condukt.agent`.

The names a program writes are re-exported here; everything else lives in
its subpackage (``condukt.otp.DynamicSupervisor``, ``condukt.agent.AgentContext``,
``condukt.providers.RetryPolicy``...). ``tests/test_public_api.py`` pins this
list.
"""

from typing import Any

from . import (
    agent,
    compaction,
    events,
    messages,
    otp,
    providers,
    redaction,
    sandbox,
    schema,
    secrets,
    serialization,
    sessions,
    telemetry,
    testing,
    tools,
)
from . import virtual as virtual  # registers node.agent's activator
from .agent import (
    Aborted,
    Agent,
    AgentError,
    AgentHandle,
    Busy,
    Capability,
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
from .agent.capabilities.handoffs import handoff
from .otp import (
    NO_REPLY,
    Caller,
    CallError,
    CallingSelf,
    CallTimeout,
    ChildNotFound,
    ChildRunning,
    ChildSpec,
    ConduktError,
    Down,
    DynamicSupervisor,
    DynamicSupervisorHandle,
    Exit,
    ExitReason,
    Handle,
    MailboxFull,
    NameTaken,
    Node,
    NoProc,
    Server,
    Supervisor,
    SupervisorHandle,
    TooManyChildren,
    UnhandledMessage,
    current_node,
    open_node,
)
from .providers import Model, ModelError, ModelRequest, ModelSettings
from .tools import Tool, ToolContext, ToolError, tool

__version__ = "0.1.0"

__all__ = [
    "NO_REPLY",
    "Aborted",
    "Agent",
    "AgentError",
    "AgentHandle",
    "Busy",
    "CallError",
    "CallTimeout",
    "Caller",
    "CallingSelf",
    "Capability",
    "ChildNotFound",
    "ChildRunning",
    "ChildSpec",
    "ConduktError",
    "Down",
    "DynamicSupervisor",
    "DynamicSupervisorHandle",
    "EventStream",
    "Exit",
    "ExitReason",
    "Handle",
    "InvalidInput",
    "InvalidOutput",
    "MailboxFull",
    "Model",
    "ModelError",
    "ModelRequest",
    "ModelSettings",
    "NameTaken",
    "NoProc",
    "NoResultSubmitted",
    "Node",
    "NotRunning",
    "RunTimeout",
    "Server",
    "Subagent",
    "Supervisor",
    "SupervisorHandle",
    "TooManyChildren",
    "Tool",
    "ToolContext",
    "ToolError",
    "UnhandledMessage",
    "UnknownOperation",
    "__version__",
    "agent",
    "compaction",
    "current_node",
    "events",
    "messages",
    "open_node",
    "operation",
    "otp",
    "providers",
    "redaction",
    "run",
    "run_operation",
    "sandbox",
    "schema",
    "secrets",
    "serialization",
    "sessions",
    "telemetry",
    "testing",
    "tool",
    "handoff",
    "tools",
]

#: Names the top level used to export, and where they live now.
_MOVED = {
    "DEFAULT_MAILBOX_SIZE": otp,
    "DEFAULT_SHUTDOWN": otp,
    "ChildCounts": otp,
    "Monitor": otp,
    "MonitorRef": otp,
    "RestartType": otp,
    "Subscription": otp,
    "TimerRef": otp,
    "is_normal_exit": otp,
    "is_shutdown_exit": otp,
}


def __getattr__(name: str) -> Any:
    # An optional extra, imported on first use: `condukt.mcp.stdio(...)` works after `import condukt`.
    if name == "mcp":
        import importlib

        return importlib.import_module("condukt.mcp")
    # A deprecation path for the names that moved to their subpackages.
    module = _MOVED.get(name)
    if module is None:
        raise AttributeError(f"module 'condukt' has no attribute {name!r}")
    import warnings

    warnings.warn(
        f"condukt.{name} moved to {module.__name__}.{name}; the top-level name will go",
        DeprecationWarning,
        stacklevel=2,
    )
    return getattr(module, name)
