"""The Tool behaviour: :class:`Tool`, :class:`ToolError`, :class:`ToolContext`, results."""

from __future__ import annotations

import abc
import functools
import json
import os
import re
import weakref
from collections.abc import Callable, Iterable, Mapping
from pathlib import Path
from typing import Any, Final

import attrs

from ..messages import DocumentBlock, ImageBlock, TextBlock, ToolDefinition
from ..otp import ConduktError
from ..sandbox import Local, Sandbox, SandboxError
from ..schema import Schema
from ..serialization import unstructure

__all__ = [
    "AGENT_DEFAULT",
    "DEFAULT_SANDBOX",
    "Tool",
    "ToolContext",
    "ToolError",
    "render_result",
    "resolve_tools",
]

_NAME = re.compile(r"^[A-Za-z0-9_-]{1,64}$")


class _AgentDefault:
    __slots__ = ()

    def __repr__(self) -> str:
        return "AGENT_DEFAULT"


#: ``Tool.timeout`` value meaning "use the agent's ``tool_timeout``".
AGENT_DEFAULT: Final = _AgentDefault()


#: The sandbox of agents that set none: the host, an allowlisted environment,
#: no process left behind (see :class:`condukt.sandbox.Local`).
DEFAULT_SANDBOX: Final = Local()
#: Where session stores keep their files under an agent's working directory:
#: confined tools may not touch it (an agent could rewrite another's history).
_STATE_DIR = ".condukt"


class ToolError(ConduktError):
    """Raise from ``Tool.call`` to report a failure to the model; the run goes on.

    The model sees ``"Error: <message>"`` and can recover.
    """


# Not frozen: one is built per tool call on the hot path, and a frozen attrs
# __init__ costs three times as much. It belongs to the call it is given to.
@attrs.define
class ToolContext:
    """What a tool call knows about its caller.

    ``agent`` is the calling agent's handle (a tool may call back into the
    agent's non-run API), ``cwd`` its working directory, ``opts`` the tool's
    own options, ``session_id`` the conversation's id, ``tool_call_id`` the
    id of this call. ``confine`` is set when the agent confines file tools to
    ``cwd``; ``secrets`` maps secret names to values for tools that pass them
    to subprocesses (never to the model). ``sandbox`` is the agent's
    :class:`~condukt.sandbox.Sandbox`: run commands with
    ``await context.sandbox.run(argv, cwd=..., env=context.sandbox.environment(...), timeout=...)``.
    """

    agent: Any
    cwd: Path
    opts: Mapping[str, Any] = attrs.field(factory=dict)
    session_id: str = ""
    tool_call_id: str = ""
    confine: bool = False
    secrets: Mapping[str, str] = attrs.field(factory=dict, repr=False)
    #: ``await context.emit(event)`` publishes an event into the calling run's
    #: stream (sub-agents forward their events this way); ``None`` outside a run.
    emit: Any = attrs.field(default=None, repr=False)
    sandbox: Sandbox = attrs.field(default=DEFAULT_SANDBOX, repr=False)

    def resolve_path(self, path: str | os.PathLike[str], *, write: bool = False) -> Path:
        """``path`` made absolute against ``cwd``, checked for reading (or ``write``).

        Raises :class:`ToolError` if confinement is on and the path (after
        resolving ``..`` and symlinks) leaves ``cwd`` or enters its
        ``.condukt`` directory (session files), or the sandbox refuses it.
        """
        candidate = Path(path).expanduser()
        if not candidate.is_absolute():
            candidate = self.cwd / candidate
        candidate = Path(os.path.normpath(candidate))
        if not self.allows(candidate):
            if self.confine and self._inside(os.path.realpath(candidate), self._state_dir()):
                raise ToolError(f"path {str(path)!r} is session storage; confined tools may not touch it")
            raise ToolError(f"path {str(path)!r} is outside the working directory {self.cwd}")
        try:
            self.sandbox.check_path(candidate, cwd=self.cwd, write=write)
        except SandboxError as exc:
            raise ToolError(str(exc)) from None
        return candidate

    def allows(self, path: str | os.PathLike[str]) -> bool:
        """Whether a confined tool may touch the absolute ``path``.

        Always true unless confinement is on; then the path, after resolving
        ``..`` and symlinks, must be ``cwd`` or inside it, and not inside
        ``cwd/.condukt`` (where session stores keep their files). Tools that
        walk directories (``grep``, ``glob``) use it to skip symlinks that
        lead out.
        """
        if not self.confine:
            return True
        real = os.path.realpath(path)
        return self._inside(real, os.path.realpath(self.cwd)) and not self._inside(real, self._state_dir())

    def _state_dir(self) -> str:
        return os.path.join(os.path.realpath(self.cwd), _STATE_DIR)

    @staticmethod
    def _inside(path: str, root: str) -> bool:
        return path == root or path.startswith(root.rstrip(os.sep) + os.sep)


class Tool(abc.ABC):
    """A thing an agent can do beyond generating text.

    Subclass and set ``name``, ``description`` and ``parameters``, then
    implement ``call``. ``parameters`` describes the arguments: a JSON
    Schema dict of type ``object``, or an attrs class, a dataclass, a
    ``TypedDict`` or a pydantic ``BaseModel`` class, whose derived schema
    the model is sent, or a :class:`condukt.schema.Schema` (one built with
    ``untrusted=True`` for a schema from elsewhere). Options given at
    construction (``Database(table="users")``) are in ``self.opts`` and in
    ``context.opts``; ``name``, ``description`` and ``parameters`` may be
    properties computed from them, so one class can appear many times.

    ``call`` returns the result: a ``str`` is sent as is, an
    :class:`~condukt.messages.ImageBlock` or
    :class:`~condukt.messages.DocumentBlock` (or a list of text, image and
    document blocks) as content, anything else JSON-encoded. Raise :class:`ToolError` to report a
    failure the model can act on; any other exception is reported the same way
    (and logged). Arguments are validated against ``parameters`` before
    ``call`` runs, and ``call`` receives them as a dict of JSON data even
    when ``parameters`` is a class (``Schema.of(Params).convert(args)``
    builds an instance).

    ``timeout`` bounds each call in seconds: :data:`AGENT_DEFAULT` uses the
    agent's ``tool_timeout``; ``None`` means the tool enforces its own (as
    ``Bash`` and ``Command`` do, killing their process group).

    ``requires_approval`` makes a person approve each call before it runs
    (``docs/approvals.md``): ``True``, or a predicate on the call's
    arguments. Set it as a class attribute (a predicate is then a method,
    ``def requires_approval(self, args)``) or give it at construction
    (``Pay(requires_approval=lambda args: args["amount"] > 100)``; it is not
    put in ``opts``).

    ``idempotent`` says that running a call twice has the effect of running
    it once (reading a file, searching): after a crash, an agent with a
    session store and ``resume=True`` runs such a call again when it had
    started without a saved result; a call of a tool that is not idempotent
    (the default: a payment, a deploy, ``Bash``) is never run a second
    time: the model is told it was interrupted (``docs/sessions.md``,
    "Tool calls at most once"). Set it as a class attribute or give it at
    construction (``Search(idempotent=True)``; it is not put in ``opts``).
    """

    name: str = ""
    description: str = ""
    parameters: Mapping[str, Any] | type[Any] | Schema[Any] = {"type": "object", "properties": {}}
    timeout: float | None | _AgentDefault = AGENT_DEFAULT
    requires_approval: bool | Callable[[dict[str, Any]], bool] = False
    idempotent: bool = False

    def __init__(self, **opts: Any) -> None:
        if "requires_approval" in opts:
            self.requires_approval = _approval_rule(opts.pop("requires_approval"))
        if "idempotent" in opts:
            idempotent = opts.pop("idempotent")
            if not isinstance(idempotent, bool):
                raise TypeError(f"idempotent must be a bool, got {idempotent!r}")
            self.idempotent = idempotent
        self.opts: dict[str, Any] = dict(opts)
        self._schema: Schema[Any] | None = None
        self._definition: ToolDefinition | None = None

    @abc.abstractmethod
    async def call(self, args: dict[str, Any], context: ToolContext) -> Any:
        """Run the tool with validated ``args``; return the result for the model.

        The agent cancels it on the tool's timeout (the model is told the call
        timed out and the run goes on) and on an abort or the run's timeout
        (the run ends and the turn is dropped from the history). An
        implementation must then stop promptly, release what it started (kill
        its subprocesses: run them with ``context.sandbox.run``, which does)
        and let ``trio.Cancelled`` propagate; code that does not reach a
        checkpoint (sync code) delays the timeout and the abort until it ends.
        Put blocking work in a worker thread that cancellation abandons, or a
        function tool with ``isolate="process"`` (see :func:`condukt.tool`).
        """

    def definition(self) -> ToolDefinition:
        """The name, description and JSON Schema the model sees (computed once)."""
        if self._definition is None:
            self._definition = ToolDefinition(self.name, self.description, dict(self._compiled().json))
        return self._definition

    def check(self) -> None:
        """Raise ``TypeError``/``ValueError`` if the name, description or ``parameters`` is unusable.

        Done at agent start, so a broken tool fails ``spawn``, not a run.
        """
        cls = type(self)
        checked = _CHECKED.get(cls)
        if checked is not None and not _describes_itself(self):
            # A class whose name, description and parameters are plain class
            # attributes, checked before: every instance describes itself alike.
            self._schema, self._definition = checked
            return
        self._check()
        if _plainly_described(cls) and not _describes_itself(self):
            _CHECKED[cls] = (self._compiled(), self.definition())

    def _check(self) -> None:
        kind = type(self).__name__
        for attribute in ("name", "description"):
            value = getattr(self, attribute)
            if callable(value):
                raise TypeError(
                    f"{kind}.{attribute} is a method; define it as a class attribute or a @property "
                    f"(e.g. `@property\n    def {attribute}(self): ...`)"
                )
            if not isinstance(value, str):
                raise TypeError(f"{kind}.{attribute} must be a str, got {type(value).__name__}")
        name = self.name
        if not _NAME.match(name):
            raise ValueError(
                f"{type(self).__name__}: tool name {name!r} must be 1-64 characters of letters, digits, '_' or '-'"
            )
        try:
            schema = self._compiled()
        except (TypeError, ValueError) as exc:
            raise ValueError(f"tool {name!r}: invalid parameters schema: {exc}") from exc
        if schema.json.get("type") != "object":
            raise ValueError(f"tool {name!r}: parameters must be a JSON Schema of type 'object'")

    def needs_approval(self, args: Mapping[str, Any]) -> bool:
        """Whether a call with ``args`` waits for a person's approval (see ``requires_approval``).

        A predicate that raises counts as True: when in doubt, ask.
        """
        rule = self.requires_approval
        if rule is True or rule is False:
            return rule
        try:
            return bool(rule(dict(args)))
        except Exception:
            return True

    def validate(self, args: Any) -> str | None:
        """A message saying why ``args`` do not fit ``parameters``, or ``None`` if they do.

        Never raises: arguments that jsonschema itself fails on (``1e999``
        against ``multipleOf``, a value nested too deeply) get a message too.
        """
        if not isinstance(args, dict):
            if isinstance(args, str):
                return f"arguments are not valid JSON: {args[:200]!r}"
            return f"arguments must be a JSON object, got {type(args).__name__}"
        schema = self._schema
        if schema is None:
            try:
                schema = self._compiled()
            except Exception as exc:  # check() was skipped, or parameters is a property that fails
                return f"the tool's parameters are not a usable schema: {type(exc).__name__}"
        if schema.is_valid(args):
            return None
        errors = schema.errors(args, limit=1)
        return errors[0] if errors else "the arguments do not match the schema"

    def _compiled(self) -> Schema[Any]:
        schema = self._schema
        if schema is None:
            spec = self.parameters
            # A class attribute is shared by every instance: look it up by class, which is
            # cheaper at agent start than comparing the dict's canonical JSON.
            owner = next((k for k in type(self).__mro__ if "parameters" in k.__dict__), None)
            if owner is not None and owner.__dict__["parameters"] is spec and isinstance(spec, Mapping):
                schema = _class_schema(owner)
            else:
                schema = Schema.of(spec)
            self._schema = schema
        return schema

    def __repr__(self) -> str:
        # Options may hold secrets (Command env): never show their values.
        try:
            name = self.name
        except Exception:  # a property that needs options it was not given
            name = "?"
        if not isinstance(name, str):  # a method: its repr would show this tool again, forever
            name = "?"
        return f"<{type(self).__name__} tool {name!r}>"


def _approval_rule(value: Any) -> bool | Callable[[dict[str, Any]], bool]:
    """``requires_approval`` checked: a bool or a predicate on the arguments."""
    if isinstance(value, bool) or callable(value):
        return value  # type: ignore[no-any-return]
    raise TypeError(f"requires_approval must be a bool or a predicate on the arguments, got {value!r}")


_DESCRIBED = frozenset({"name", "description", "parameters"})
#: Tool classes checked once for all their instances: their schema and definition.
_CHECKED: weakref.WeakKeyDictionary[type, tuple[Schema[Any], ToolDefinition]] = weakref.WeakKeyDictionary()


def _describes_itself(tool: Tool) -> bool:
    """Whether ``tool`` has a name, description or parameters of its own (not its plainly described class's).

    Compared by identity rather than read from ``tool.__dict__``: reading
    that makes the instance's dict, one more object per tool of every agent
    for the cyclic GC to walk. The same object set on the instance describes
    it as the class does.
    """
    cls = type(tool)
    return tool.name is not cls.name or tool.description is not cls.description or tool.parameters is not cls.parameters


def _plainly_described(cls: type) -> bool:
    """Whether ``name``, ``description`` and ``parameters`` are plain class attributes (no properties)."""
    for attribute in _DESCRIBED:
        owner = next((k for k in cls.__mro__ if attribute in k.__dict__), None)
        if (
            owner is None
            or hasattr(owner.__dict__[attribute], "__get__")
            and not isinstance(owner.__dict__[attribute], type)
        ):
            return False
    return True


@functools.lru_cache(maxsize=1024)
def _class_schema(owner: type) -> Schema[Any]:
    """The schema of a ``parameters`` dict set as a class attribute (never mutated, by convention)."""
    return Schema.of(owner.__dict__["parameters"])


def resolve_tools(items: Iterable[Any]) -> list[Tool]:
    """Instances for a tools list of classes and instances; checks names are unique.

    Raises ``TypeError`` for an entry that is not a tool and ``ValueError``
    for a bad name, a bad schema or a duplicate name.
    """
    tools: list[Tool] = []
    seen: dict[str, Tool] = {}
    for item in items:
        if isinstance(item, type) and issubclass(item, Tool):
            tool = item()
        elif isinstance(item, Tool):
            tool = item
        else:
            raise TypeError(f"a tool must be a condukt.Tool subclass or instance, got {item!r}")
        tool.check()
        if tool.name in seen:
            raise ValueError(f"two tools are named {tool.name!r}; give one a different name")
        seen[tool.name] = tool
        tools.append(tool)
    return tools


def render_result(value: Any) -> tuple[TextBlock | ImageBlock | DocumentBlock, ...]:
    """The content blocks the model sees for a tool's return value."""
    if isinstance(value, str):
        return (TextBlock(value),)
    if isinstance(value, _CONTENT_BLOCKS):
        return (value,)
    if isinstance(value, (list, tuple)) and value and all(isinstance(v, _CONTENT_BLOCKS) for v in value):
        return tuple(value)
    if attrs.has(type(value)):
        value = unstructure(value)
    return (TextBlock(json.dumps(value, ensure_ascii=False, default=_json_default)),)


_CONTENT_BLOCKS = (TextBlock, ImageBlock, DocumentBlock)


def _json_default(value: Any) -> Any:
    if isinstance(value, (set, frozenset)):
        return sorted(value, key=repr)
    if isinstance(value, Path):
        return str(value)
    if attrs.has(type(value)):
        return unstructure(value)
    raise TypeError(f"tool returned a value that is not JSON-serialisable: {type(value).__name__}")
