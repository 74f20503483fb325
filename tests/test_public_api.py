"""The public names are pinned: an accidental export or removal fails here (like trio's test_exports).

Changing a list below is a decision about the public contract: add freely,
and remove only with a deprecation path (see ``condukt.__getattr__``).
"""

from __future__ import annotations

import importlib
import inspect
import warnings

import pytest

import condukt

TOP_LEVEL = {
    # runtime
    "open_node", "current_node", "Node", "Server", "Handle", "Caller", "NO_REPLY", "ChildSpec",
    "Supervisor", "SupervisorHandle", "DynamicSupervisor", "DynamicSupervisorHandle", "Down", "Exit",
    "ExitReason", "ConduktError", "CallError", "CallTimeout", "CallingSelf", "NoProc", "MailboxFull",
    "NameTaken", "TooManyChildren", "ChildNotFound", "ChildRunning", "UnhandledMessage",
    # agents
    "Agent", "AgentHandle", "Capability", "EventStream", "Subagent", "operation", "run", "run_operation",
    "AgentError", "Aborted", "Busy", "NotRunning", "RunTimeout", "InvalidInput", "InvalidOutput",
    "NoResultSubmitted", "UnknownOperation",
    # tools and models
    "Tool", "ToolContext", "ToolError", "tool", "Model", "ModelError", "ModelRequest", "ModelSettings",
    # subpackages
    "agent", "compaction", "events", "messages", "otp", "providers", "redaction", "sandbox", "schema", "secrets",
    "serialization", "sessions", "telemetry", "testing", "tools",
    "__version__",
}  # fmt: skip

SUBPACKAGES = {
    "condukt.agent": {
        "AGENT_OPTIONS", "STREAM_BUFFER", "Aborted", "Agent", "AgentConfig", "AgentContext", "AgentError", "AgentHandle",
        "AgentInfo", "BoundOperation", "Busy", "Capability", "EventStream", "GuardrailTripped", "InputGuardrail",
        "InvalidInput", "InvalidOutput", "NoResultSubmitted", "NotRunning", "Operation", "OutputGuardrail", "Run",
        "RunInfo", "RunResult", "RunTimeout", "SessionLost", "Subagent", "SubagentSupervisor", "ToolCallInfo",
        "UnknownApproval",
        "UnknownOperation", "UsageLimitExceeded", "UsageLimits", "capabilities", "operation", "operations_of",
        "run", "run_operation",
    },
    "condukt.agent.capabilities": {
        "BUILTINS", "ORDER", "OWN", "Approvals", "Builtin", "Compaction", "GuardrailTripped", "InputGuardrail",
        "OutputGuardrail", "Persistence", "ProjectInstructions", "ResumeCheckpoints", "Resumption", "Scrubbing",
        "StructuredOutput", "Subagents", "Telemetry", "ToolJournal", "ToolSources", "UsageLimitExceeded", "UsageLimits",
    },
    "condukt.compaction": {"Compactor", "Sliding", "ToolResultPrune", "compact_with"},
    "condukt.instructions": {"INSTRUCTION_FILES", "Skill", "load_project_instructions", "read_skills"},
    "condukt.telemetry": {"Handler", "TelemetryEvent", "attach", "attached", "emit", "enabled"},
    "condukt.tools": {
        "AGENT_DEFAULT", "DEFAULT_SANDBOX", "Bash", "Command", "Edit", "FunctionTool", "Glob", "Grep", "Isolate", "Read", "Tool",
        "ToolContext", "ToolError", "ToolSet", "ToolSource", "ToolSourceContext", "Write", "coding_tools", "read_only_tools", "render_result",
        "resolve_tools", "tool",
    },
    "condukt.schema": {"ExternalReference", "Schema", "is_structured_type", "schema_for"},
    "condukt.messages": {
        "AssistantMessage", "Citation", "ContentBlock", "DOCUMENT_TYPES", "DocumentBlock", "ImageBlock", "Message",
        "ProviderBlock", "StopReason", "TextBlock", "ThinkingBlock", "ToolCall", "ToolDefinition", "ToolResultMessage",
        "Usage", "UserMessage",
    },
    "condukt.providers": {
        "ADAPTIVE", "DEFAULT_FALLBACK_ON", "DEFAULT_MAX_CONCURRENCY", "RETRY_STATUSES", "THINKING_LEVELS",
        "AnthropicModel", "AuthenticationFailed", "AzureOpenAIModel", "AzureResponsesModel", "BedrockModel", "CorruptFrame", "Emit", "EmptyPrompt", "Fallback", "GeminiModel", "HttpSettings",
        "InvalidRequest", "InvalidResponse", "MissingApiKey", "MissingCredentials", "Model", "ModelError", "ModelFactory", "ModelRefused",
        "ModelRequest", "ModelSettings", "OpenAIModel", "OpenAIPreset", "OpenAIResponsesModel", "Price", "ProviderError", "ProviderLimits",
        "ProviderUnavailable", "RateLimited", "RetryPolicy", "StreamError", "ThinkingLevel", "UnknownProvider",
        "UnsupportedContent", "UnsupportedSetting", "VertexAnthropicModel", "VertexGeminiModel", "configure_http", "lowlevel", "provider_limits", "register_provider",
        "registered_providers", "resolve_model", "validate_thinking_level",
    },
    "condukt.asyncio": {
        "AgentHandle", "DynamicSupervisorHandle", "Handle", "Node", "Stream", "SupervisorHandle", "call", "current_node",
        "open_node", "run",
    },
    "condukt.lifespan": {"lifespan", "open_app_node", "while_serving"},
    "condukt.web": {"BrowserGuard", "SessionsFull", "ag_ui_app", "create_app", "openai_app", "vercel_ai_app"},
    "condukt.web.uvicorn": {"HEADER_TIMEOUT", "HTTPProtocol"},
    "condukt.web.lowlevel": {
        "AgentRoute", "AppNode", "ProtocolError", "Sessions", "SessionsFull", "attachment",
        "bearer_ok", "decode_data_url", "event_failure", "guard_middleware", "read_json", "run_failure",
    },
    "condukt.a2a": {"RemoteAgent", "asgi_app", "remote"},
    "condukt.web.observer": {
        "NEW_TOKEN", "AgentView", "ExitView", "ProcessView", "RunView", "Snapshot", "SupervisorView", "create_app",
        "page_url", "serve", "snapshot",
    },
    "condukt.sandbox": {
        "BASE_ENV", "CREDENTIAL_NAME", "SAFE_ENV_VARS", "Bubblewrap", "Local", "ProcessResult", "Sandbox",
        "SandboxError", "redact_host_credentials",
    },
    "condukt.agent.lowlevel": {"start_run"},
    "condukt.providers.lowlevel": {
        "HttpModel", "PreparedRequest", "RawResponse", "SSEDecoder", "ServerSentEvent", "StreamAssembler", "TrioTransport",
        "model_settings",
    },
    "condukt.mcp": {
        "ConnectionLost", "McpConnectError", "McpPrompt", "McpRequestError", "McpServer", "McpTool", "asgi_app", "http",
        "render", "serve",
        "server_for", "sse", "stdio",
    },
    "condukt.testing": {"FunctionModel", "Reply", "ScriptExhausted", "ScriptedModel", "Step", "call", "reply"},
    "condukt.testing.postgres": {"PostgresNotFound", "PostgresServer", "find_binaries"},
    "condukt.sessions": {
        "RUN_STATUSES", "SNAPSHOT_VERSION", "CorruptJournal", "CorruptSnapshot", "DiskStore", "Lease", "LeaseReleased",
        "LeasingStore", "MemoryStore", "PendingApproval", "PostgresStore", "RunCheckpoint", "RunLog", "SQLiteStore",
        "SessionOwned", "SessionStore", "Snapshot", "SnapshotError", "StoreNotBound", "StoreUnavailable",
        "UnsupportedSchema", "UnsupportedSnapshotVersion", "decode", "encode",
    },
    "condukt.cli": {"JsonPrinter", "Renderer", "app", "main"},
    "condukt.ray": {
        "STREAM_BUFFER", "Cluster", "ClusterHandle", "ClusterMonitor", "ClusterSupervisor", "NodeDown", "NodeInfo",
        "Placement", "RemoteError", "RemoteStream", "current_cluster", "init", "least_loaded", "link", "monitor",
        "open_cluster", "shutdown",
    },
}  # fmt: skip

#: Names the top level used to export: still reachable, with a DeprecationWarning.
DEPRECATED = {
    "DEFAULT_MAILBOX_SIZE", "DEFAULT_SHUTDOWN", "ChildCounts", "Monitor", "MonitorRef", "RestartType",
    "Subscription", "TimerRef", "is_normal_exit", "is_shutdown_exit",
}  # fmt: skip


def test_the_top_level_exports_exactly_what_users_write() -> None:
    assert set(condukt.__all__) == TOP_LEVEL
    for name in condukt.__all__:
        assert hasattr(condukt, name), name


@pytest.mark.parametrize("module", sorted(SUBPACKAGES))
def test_subpackage_exports_are_pinned(module: str) -> None:
    imported = importlib.import_module(module)
    assert set(imported.__all__) == SUBPACKAGES[module]
    for name in imported.__all__:
        assert hasattr(imported, name), name


@pytest.mark.parametrize("name", sorted(DEPRECATED))
def test_moved_names_still_resolve_with_a_deprecation_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"condukt.{name} moved to condukt.otp.{name}"):
        value = getattr(condukt, name)
    assert value is getattr(condukt.otp, name)
    with pytest.raises(AttributeError):
        condukt.no_such_name  # type: ignore[attr-defined]  # noqa: B018


#: Names condukt.agent used to export, and what they resolve to now (with a DeprecationWarning).
AGENT_DEPRECATED = {"Session": "AgentContext"}


@pytest.mark.parametrize("name", sorted(AGENT_DEPRECATED))
def test_renamed_agent_names_still_resolve_with_a_deprecation_warning(name: str) -> None:
    with pytest.warns(DeprecationWarning, match=f"condukt.agent.{name} is deprecated"):
        value = getattr(condukt.agent, name)
    assert value is getattr(condukt.agent, AGENT_DEPRECATED[name])
    with pytest.warns(DeprecationWarning):
        from condukt.agent import Session  # noqa: F401  # the import statement users wrote works too
    with pytest.raises(AttributeError):
        condukt.agent.no_such_name  # type: ignore[attr-defined]  # noqa: B018


def test_every_public_class_and_function_has_a_docstring() -> None:
    missing = []
    for module_name in ["condukt", *SUBPACKAGES]:
        module = importlib.import_module(module_name)
        with warnings.catch_warnings():
            warnings.simplefilter("error")
            for name in module.__all__:
                value = getattr(module, name)
                if (inspect.isclass(value) or inspect.isfunction(value)) and not inspect.getdoc(value):
                    missing.append(f"{module_name}.{name}")
    assert missing == []


PUBLIC_MODULES = [
    "condukt", "condukt.otp", "condukt.otp.lowlevel", "condukt.agent", "condukt.agent.lowlevel",
    "condukt.agent.capabilities", "condukt.tools", "condukt.providers",
    "condukt.providers.lowlevel", "condukt.sessions", "condukt.compaction", "condukt.testing", "condukt.schema",
    "condukt.secrets", "condukt.redaction", "condukt.sandbox", "condukt.asyncio", "condukt.testing.server", "condukt.mcp",
    "condukt.testing.postgres", "condukt.lifespan", "condukt.web", "condukt.web.observer", "condukt.web.uvicorn", "condukt.events",
    "condukt.ray", "condukt.web.lowlevel", "condukt.a2a",
]  # fmt: skip


def test_every_public_async_method_says_what_cancellation_does() -> None:
    """STYLE.md: every public function documents its cancellation behaviour."""
    missing = set()
    for module_name in PUBLIC_MODULES:
        module = importlib.import_module(module_name)
        for name in module.__all__:
            value = getattr(module, name)
            members = inspect.getmembers(value) if inspect.isclass(value) else [(name, value)]
            for member_name, member in members:
                if member_name.startswith("_") or not inspect.iscoroutinefunction(member):
                    continue
                if "cancel" not in (inspect.getdoc(member) or "").lower():
                    missing.add(f"{member.__module__}.{member.__qualname__}")
    assert sorted(missing) == []
