"""Sub-agents: delegation to supervised, monitored, cancellable child agents."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import attrs
import trio

from ...events import SubagentEvent
from ...otp import CallError, ChildSpec, ConduktError, Down, DynamicSupervisor, ExitReason, Handle, Server
from ...redaction import chain
from ...schema import Schema
from ...tools import Tool, ToolContext, ToolError
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._errors import InvalidInput
from .._input import render_input
from .._transient import stop_quietly

__all__ = [
    "Children",
    "Role",
    "Subagent",
    "SubagentSupervisor",
    "SubagentTool",
    "Subagents",
    "child_options",
    "resolve_roles",
]

#: Start options a child inherits from its parent unless its role sets them.
#: (Confinement and redaction are inherited too, but only ever tightened: see ``_delegate``.)
INHERITED = ("cwd",)
#: Provider settings a child inherits only when it talks to its parent's
#: provider: a key (or endpoint) for one provider must never reach another.
PROVIDER_INHERITED = ("api_key", "base_url", "model_options")


def _provider(model: Any) -> str:
    """The provider prefix of a ``"provider:model"`` string or a :class:`Model`'s name."""
    name = model if isinstance(model, str) else str(getattr(model, "name", ""))
    return name.partition(":")[0]


@attrs.frozen
class Subagent:
    """An inline sub-agent role: a plain :class:`Agent` with these settings.

    ``model`` ``None`` inherits the parent's model; ``input``/``output`` are
    schemas (JSON Schema dict, attrs class or dataclass) for the delegated
    task's structured input and result.
    """

    system_prompt: str | None = None
    tools: Sequence[Any] = ()
    model: Any = None
    input: Any = None
    output: Any = None
    description: str = ""
    options: Mapping[str, Any] = attrs.field(factory=dict)


@attrs.frozen
class Role:
    """A resolved role: what to start and how."""

    name: str
    #: The class to start (a :class:`~condukt.Agent` subclass).
    agent: type[Any]
    options: Mapping[str, Any]
    input: Any
    output: Any
    description: str


def resolve_roles(spec: Mapping[str, Any], plain: type[Server]) -> dict[str, Role]:
    """Roles from ``Agent.subagents()``: class, ``(class, options)`` or :class:`Subagent`.

    ``plain`` is condukt's plain :class:`~condukt.Agent` (``AgentContext.plain_agent``): an
    inline :class:`Subagent` role runs as one, and a class role must subclass it.
    """
    roles: dict[str, Role] = {}
    for name, value in spec.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"sub-agent role names must be non-empty strings, got {name!r}")
        if isinstance(value, Subagent):
            options = dict(value.options)
            if value.system_prompt is not None:
                options["system_prompt"] = value.system_prompt
            options["tools"] = list(value.tools)
            if value.model is not None:
                options["model"] = value.model
            role = Role(name, plain, options, value.input, value.output, value.description)
        else:
            if isinstance(value, tuple) and len(value) == 2:
                cls, options = value[0], dict(value[1])
            else:
                cls, options = value, {}
            if not (isinstance(cls, type) and issubclass(cls, plain)):
                raise TypeError(f"sub-agent role {name!r} must be an Agent subclass, (class, options) or Subagent")
            description = options.pop("description", "") or (cls.__doc__ or "").strip().split("\n")[0]
            role = Role(name, cls, options, options.pop("input", None), options.pop("output", None), description)
        for schema in (role.input, role.output):
            if schema is not None:
                Schema.of(schema)  # fail at start, not at the first delegation
        roles[name] = role
    return roles


class SubagentSupervisor(DynamicSupervisor):
    """The dynamic supervisor of one agent's sub-agents; it stops when its owner exits."""

    async def init(self, owner: Handle, **kwargs: Any) -> None:  # type: ignore[override]
        """Supervise for ``owner`` (monitored: its exit stops this supervisor).

        Runs in the starting task: cancelling that start cancels it and nothing is left running.
        """
        await super().init(**kwargs)
        self._owner_ref = self.monitor(owner)

    async def handle_info(self, message: Any) -> None:
        """The owner's ``Down`` stops the supervisor (and so the children).

        It never waits, so it is never cancelled midway.
        """
        if isinstance(message, Down) and message.ref is self._owner_ref:
            self.stop("shutdown")  # no orphans: the children go with their parent
            return
        await super().handle_info(message)


class Subagents(Builtin):
    """Delegation as a capability: the ``subagent`` tool and the supervisor of the children.

    Children run under one :class:`SubagentSupervisor` per parent, started on
    first use and stopped with the parent. Built in when the agent has roles
    (``subagents()`` or ``subagents=``).
    """

    def __init__(self, roles: Mapping[str, Any], plain: type[Server]) -> None:
        self.roles = resolve_roles(roles, plain)
        self._children = Children()

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent with roles (a bad role fails the start)."""
        roles = ctx.config.subagents
        if roles is None:
            roles = ctx.agent.subagents()
        return cls(roles, ctx.plain_agent) if roles else None

    def tools(self, ctx: AgentContext) -> Sequence[Tool]:
        """The ``subagent`` tool for this agent's roles."""
        return [SubagentTool(ctx, self, self.roles, ctx.config.max_concurrent_subagents)]

    async def supervisor(self, ctx: AgentContext) -> Any:
        """The children's supervisor, started on first use (a cancelled start leaves none)."""
        return await self._children.supervisor(ctx)

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        """Stop the children with their parent (in the parent's shutdown budget, then cancelled)."""
        await self._children.stop()


class Children:
    """The :class:`SubagentSupervisor` of one agent's children, started on first use, stopped with the agent.

    Shared by the capabilities that start agents of their own (sub-agents, handoffs).
    """

    def __init__(self) -> None:
        self._supervisor: Any = None
        self._lock: trio.Lock | None = None

    async def supervisor(self, ctx: AgentContext) -> Any:
        """The supervisor, started on first use (a cancelled start leaves none)."""
        if self._lock is None:
            self._lock = trio.Lock()
        async with self._lock:
            supervisor = self._supervisor
            if supervisor is None or not supervisor.alive:
                supervisor = self._supervisor = await ctx.node.root.start_child(
                    ChildSpec(None, SubagentSupervisor, kwargs={"owner": ctx.handle}, restart="temporary")
                )
        return supervisor

    async def stop(self) -> None:
        """Stop the supervisor and the children (in the owner's shutdown budget, then cancelled)."""
        supervisor = self._supervisor
        if supervisor is not None and supervisor.alive:
            await supervisor.stop("shutdown", timeout=None)


def child_options(parent: AgentContext, agent: type[Any], own: Mapping[str, Any]) -> dict[str, Any]:
    """The start options of a child agent of class ``agent`` started by ``parent``, ``own`` on top.

    A child inherits its parent's cwd (and its provider settings when it
    talks to the same provider), its resolved secrets beneath its own, and
    is never less careful than its parent: a confined parent has confined
    children, a sandboxed parent sandboxed ones (unless ``own`` names its
    own sandbox), and the parent's redactor applies on top of the child's.
    """
    config = parent.config
    own_model = own.get("model", agent.model)
    inherited: tuple[str, ...] = INHERITED
    if own_model is None or _provider(own_model) == _provider(parent.model):
        inherited += PROVIDER_INHERITED
    options = {key: config.options[key] for key in inherited if key in config.options}
    options["cwd"] = str(parent.cwd)
    if own_model is None:
        options["model"] = parent.model
    options.setdefault("load_project_instructions", False)
    if parent.secrets:
        # Resolved values, not providers run again; the child's own secrets come on top.
        options["inherited_secrets"] = parent.secrets.env
    options.update(own)
    if config.confine_to_cwd:
        options["confine_to_cwd"] = True
    if config.sandbox is not None and options.get("sandbox", agent.sandbox) is None:
        options["sandbox"] = config.sandbox
    if config.redactor is not None:
        own_redactor = options.get("redactor", agent.redactor)
        if own_redactor is None or own_redactor is config.redactor:
            options["redactor"] = config.redactor
        else:
            options["redactor"] = chain(own_redactor, config.redactor)
    return options


class SubagentTool(Tool):
    """The injected ``subagent`` tool: ``{role, task, input?}`` runs a child agent."""

    name = "subagent"
    timeout = None  # each child run has its own timeout

    def __init__(self, ctx: AgentContext, owner: Subagents, roles: dict[str, Role], max_concurrent: int) -> None:
        super().__init__()
        self._ctx = ctx
        self._owner = owner
        self._roles = roles
        self._limiter = trio.CapacityLimiter(max_concurrent)
        listed = "\n".join(f"- {r.name}: {r.description}" if r.description else f"- {r.name}" for r in roles.values())
        self._description = (
            "Delegate a task to a sub-agent. It works on its own (with its own tools) and returns "
            f"its final answer. Several calls in one turn run in parallel. Roles:\n{listed}"
        )
        branches = []
        for role in roles.values():
            branch: dict[str, Any] = {"properties": {"role": {"const": role.name}}}
            if role.input is not None:
                branch["properties"]["input"] = Schema.of(role.input).json
                branch["required"] = ["input"]
            branches.append(branch)
        checked: dict[str, Any] = {
            "type": "object",
            "properties": {
                "role": {"type": "string", "enum": list(roles), "description": "Which sub-agent to run"},
                "task": {"type": "string", "description": "What the sub-agent should do"},
                "input": {"description": "Structured input, for roles that take one"},
            },
            "required": ["role", "task"],
            "additionalProperties": False,
        }
        self._checked = Schema.of(checked)
        self._parameters: dict[str, Any] = {**checked, "oneOf": branches}

    @property
    def description(self) -> str:  # type: ignore[override]
        """Lists the roles."""
        return self._description

    @property
    def parameters(self) -> dict[str, Any]:  # type: ignore[override]
        """``role`` (one of the roles), ``task``, and per-role ``input``."""
        return self._parameters

    def validate(self, args: Any) -> str | None:
        """Check the arguments against the schema without its per-role ``oneOf``.

        jsonschema reports a failed ``oneOf`` only as "not valid under any of
        the given schemas"; checked apart, an unknown role is reported with
        the known ones, and a role's ``input`` against that role's own schema
        when the call renders it (:class:`InvalidInput` becomes the error).
        """
        errors = self._checked.errors(args, limit=1) if isinstance(args, dict) else None
        if errors is None:
            return super().validate(args)
        if errors:
            return errors[0]
        role = self._roles[args["role"]]
        if role.input is not None and "input" not in args:
            return f"input: role {role.name!r} requires an input"
        return None

    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Start the child, run the task, forward its events, stop it.

        Cancelled (the parent's abort or run timeout), it aborts the child's
        run and stops the child before the cancellation goes on.
        """
        role = self._roles[args["role"]]
        task = args["task"]
        if role.input is not None:
            try:
                task = f"{task}\n\n{render_input(args.get('input'), role.input)}"
            except InvalidInput as exc:
                raise ToolError(str(exc)) from None
        async with self._limiter:
            return await self._delegate(role, task, context)

    async def _delegate(self, role: Role, task: str, context: ToolContext) -> Any:
        parent = self._ctx
        config = parent.config
        supervisor = await self._owner.supervisor(parent)
        options = child_options(parent, role.agent, role.options)
        child = await supervisor.start_child(ChildSpec(None, role.agent, kwargs=options, restart="temporary"))
        child_id = child.session_id
        parent_emit = context.emit

        async def forward(event: Any) -> None:
            # Runs in the child's run task: the event goes straight into the
            # parent's stream, without a channel and a reader in between.
            await parent_emit(SubagentEvent(role.name, child_id, event))

        try:
            return await child.run(
                task,
                output=role.output,
                timeout=config.tool_timeout,
                on_event=forward if parent_emit is not None else None,
            )
        except CallError as exc:
            reason = exc.reason if exc.reason is not None else await child.wait()
            raise ToolError(f"sub-agent {role.name!r} crashed: {reason!r}") from None
        except ConduktError as exc:  # the child's run failed: timeout, model error, invalid output...
            raise ToolError(f"sub-agent {role.name!r} failed: {type(exc).__name__}: {exc}") from None
        finally:
            await stop_quietly(child, "shutdown")
