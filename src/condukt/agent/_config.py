"""The frozen configuration of one agent incarnation, built and checked from its start options."""

from __future__ import annotations

import functools
import operator
import os
import weakref
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

import attrs

from ..messages import AssistantMessage, Message, ToolResultMessage, UserMessage
from ..providers import Model, ModelSettings, ThinkingLevel, resolve_model, validate_thinking_level
from ..providers.lowlevel import model_settings
from ..redaction import Redactor
from ..sandbox import Sandbox
from ._validate import check_bool, check_count, check_mapping, check_seconds, check_str

__all__ = ["AGENT_OPTIONS", "CLASS_ATTRIBUTES", "AgentConfig"]


def _model(value: Any) -> Any:
    if value is None or isinstance(value, str) or callable(getattr(value, "complete", None)):
        return value
    raise TypeError(f"model must be a 'provider:model' string or a Model object, got {type(value).__name__} {value!r}")


def _cwd(value: Any) -> Path:
    if value is None:
        # The process's working directory: os.getcwd() raises when it no
        # longer exists, so what it returns is a directory (no stat needed).
        return _absolute(os.getcwd(), "")
    if not isinstance(value, (str, os.PathLike)):
        raise TypeError(f"cwd must be a path (str or os.PathLike), got {type(value).__name__} {value!r}")
    raw = os.fspath(value)
    path = _absolute(raw, "" if os.path.isabs(raw) else os.getcwd())
    if not os.path.isdir(path):
        raise ValueError(f"cwd {path} is not a directory")
    return path


@functools.lru_cache(maxsize=256)
def _absolute(raw: str, base: str) -> Path:
    """``raw`` made absolute against ``base`` (cached: every agent start resolves its cwd).

    abspath, not resolve(): no symlink walk (confinement compares real paths itself).
    """
    return Path(os.path.normpath(os.path.join(base, os.path.expanduser(raw))))


def _list(name: str, what: str) -> Callable[[Any], tuple[Any, ...] | None]:
    def check(value: Any) -> tuple[Any, ...] | None:
        if value is None:
            return None
        if type(value) is list or type(value) is tuple:  # the usual value, without the ABCs' isinstance checks
            return tuple(value)
        if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
            hint = f"; wrap it in a list: {name}=[{value.__name__}]" if isinstance(value, type) else ""
            raise TypeError(f"{name} must be a list of {what}, got {type(value).__name__} {value!r}{hint}")
        return tuple(value)

    return check


def _instance_of(name: str, protocol: type, what: str) -> Callable[[Any], Any]:
    def check(value: Any) -> Any:
        if value is not None and (isinstance(value, type) or not isinstance(value, protocol)):
            raise TypeError(f"{name} must have {what} (an instance, not a class), got {value!r}")
        return value

    return check


def _compactor(value: Any) -> Any:
    # Checked by its method, as the Compactor protocol's isinstance would: the protocol lives with the
    # compaction capability, which sits above this module (it reads an agent's config).
    if value is not None and (isinstance(value, type) or not callable(getattr(value, "compact", None))):
        raise TypeError(
            f"compactor must have an async compact(messages) method (an instance, not a class), got {value!r}"
        )
    return value


def _store(value: Any) -> Any:
    if value is not None and (isinstance(value, type) or not callable(getattr(value, "bind", None))):
        raise TypeError(f"session_store must be a SessionStore instance, got {value!r}")
    return value


def _key(name: str) -> Callable[[Any], str | None]:
    def check(value: Any) -> str | None:
        if value is None or value == "":
            return None
        return check_str(name, value)

    return check


def _history(value: Any) -> tuple[Message, ...] | None:
    if value is None:
        return None
    if isinstance(value, (str, bytes, Mapping)) or not isinstance(value, Sequence):
        raise TypeError(f"history must be a list of messages, got {type(value).__name__}")
    for message in value:
        if type(message) not in (UserMessage, AssistantMessage, ToolResultMessage):
            raise TypeError(f"history must hold condukt.messages messages, got {message!r}")
    return tuple(value)


#: How each start option is checked and normalised, by name. A check raises
#: ``TypeError``/``ValueError`` naming the option.
_CHECKS: dict[str, Callable[[Any], Any]] = {
    "model": _model,
    "api_key": lambda v: check_str("api_key", v),
    "base_url": lambda v: check_str("base_url", v),
    "system_prompt": lambda v: check_str("system_prompt", v),
    "thinking_level": validate_thinking_level,
    "cwd": _cwd,
    "id": _key("id"),
    "max_turns": lambda v: check_count("max_turns", v),
    "tool_timeout": lambda v: check_seconds("tool_timeout", v),
    "run_timeout": lambda v: check_seconds("run_timeout", v),
    "approval_timeout": lambda v: check_seconds("approval_timeout", v),
    "resume": lambda v: check_bool("resume", v),
    "confine_to_cwd": lambda v: check_bool("confine_to_cwd", v),
    "sandbox": _instance_of("sandbox", Sandbox, "the condukt.sandbox.Sandbox interface (Local(), Bubblewrap(...))"),
    "max_tokens": lambda v: check_count("max_tokens", v, optional=True),
    "model_options": lambda v: dict(check_mapping("model_options", v) or {}),
    "model_settings": model_settings,
    "output_retries": lambda v: check_count("output_retries", v, minimum=0),
    "max_concurrent_subagents": lambda v: check_count("max_concurrent_subagents", v),
    "max_queued_runs": lambda v: check_count("max_queued_runs", v, minimum=0),
    "max_follow_ups": lambda v: check_count("max_follow_ups", v, minimum=0),
    "load_project_instructions": lambda v: check_bool("load_project_instructions", v),
    "session_store": _store,
    "session_store_key": _key("session_store_key"),
    "redactor": _instance_of("redactor", Redactor, "a redact(text) method"),
    "compactor": _compactor,
    "tools": _list("tools", "tools (Tool classes or instances)"),
    "capabilities": _list("capabilities", "capabilities"),
    "subagents": lambda v: check_mapping("subagents", v),
    "secrets": lambda v: check_mapping("secrets", v),
    "inherited_secrets": lambda v: dict(check_mapping("inherited_secrets", v) or {}),
    "history": _history,
}

#: Start options the Agent itself understands; anything else must be
#: declared in ``extra_options`` (and is then left for ``init``).
AGENT_OPTIONS = frozenset(_CHECKS)

#: Options with a class attribute of the same name on :class:`Agent` as their
#: default. The others default to ``None`` (tools, secrets... come from the
#: agent's methods), whatever a subclass happens to define under that name.
CLASS_ATTRIBUTES = frozenset(
    {
        "model",
        "system_prompt",
        "thinking_level",
        "max_turns",
        "tool_timeout",
        "run_timeout",
        "approval_timeout",
        "resume",
        "confine_to_cwd",
        "sandbox",
        "max_tokens",
        "model_settings",
        "output_retries",
        "max_concurrent_subagents",
        "max_queued_runs",
        "max_follow_ups",
        "load_project_instructions",
        "session_store",
        "compactor",
        "redactor",
    }
)


@attrs.frozen(kw_only=True)
class AgentConfig:
    """The settings of one agent incarnation: class attributes overridden by start options.

    Built and checked before the agent starts (a bad value fails ``spawn``
    with a ``TypeError``/``ValueError`` naming the option) and frozen after,
    so nothing a subclass defines can change it mid-run. ``tools``,
    ``capabilities``, ``subagents`` and ``secrets`` are ``None`` when the
    start options did not give them: the agent's methods supply them.
    """

    model: Any
    api_key: str | None = attrs.field(repr=False)
    base_url: str | None
    system_prompt: str | None
    thinking_level: ThinkingLevel
    cwd: Path
    id: str | None
    max_turns: int
    tool_timeout: float | None
    run_timeout: float | None
    approval_timeout: float | None
    resume: bool
    confine_to_cwd: bool
    sandbox: Sandbox | None
    max_tokens: int | None
    model_options: Mapping[str, Any]
    model_settings: ModelSettings | None
    output_retries: int
    max_concurrent_subagents: int
    max_queued_runs: int
    max_follow_ups: int
    load_project_instructions: bool
    session_store: Any
    session_store_key: str | None
    redactor: Redactor | None
    #: A :class:`~condukt.compaction.Compactor`, or None.
    compactor: Any
    tools: tuple[Any, ...] | None = attrs.field(repr=False)
    capabilities: tuple[Any, ...] | None = attrs.field(repr=False)
    subagents: Mapping[str, Any] | None = attrs.field(repr=False)
    secrets: Mapping[str, Any] | None = attrs.field(repr=False)
    inherited_secrets: Mapping[str, str] = attrs.field(repr=False)
    #: The conversation to start with (``history=``) when no session store restores one, or None.
    history: tuple[Message, ...] | None = attrs.field(repr=False)
    #: The start options as given (for ``init`` and operations).
    options: Mapping[str, Any] = attrs.field(repr=False)

    @classmethod
    def build(cls, agent: type[Any], options: Mapping[str, Any]) -> AgentConfig:
        """Check ``options`` against ``agent``'s class attributes; raises ``TypeError``/``ValueError``."""
        if not AGENT_OPTIONS.issuperset(options):
            unknown = set(options) - AGENT_OPTIONS - agent.extra_options
            if unknown:
                raise TypeError(
                    f"{agent.__name__} got unknown start option(s) {', '.join(sorted(unknown))}; "
                    f"declare custom ones in {agent.__name__}.extra_options"
                )
        values = _class_defaults(agent).copy()
        values["cwd"] = None  # the process's working directory now, not when first cached
        for name, value in options.items():
            check = _CHECKS.get(name)
            if check is not None:
                values[name] = check(value)
        if values["cwd"] is None:
            values["cwd"] = _cwd(None)
        values["options"] = dict(options)
        return cls(**values)

    def given(self, name: str) -> bool:
        """Whether the start options set ``name`` (rather than the class)."""
        return name in self.options

    def resolved_model(self, node: Any) -> Model:
        """The :class:`~condukt.providers.Model` for ``model`` (``ValueError`` if there is none)."""
        if self.model is None:
            raise ValueError("the agent has no model: set the model class attribute or pass model=")
        return resolve_model(
            self.model, api_key=self.api_key, base_url=self.base_url, node=node, **dict(self.model_options)
        )


_read_class_attributes = operator.attrgetter(*sorted(CLASS_ATTRIBUTES))
#: Per agent class: its raw class attributes and their checked values, plus
#: ``None`` for the options that have no class attribute. Checking them once
#: per class, not per spawn, is most of what starting an agent costs beyond
#: the process itself. Weak: classes made on the fly do not pile up.
_DEFAULTS: weakref.WeakKeyDictionary[type, tuple[tuple[Any, ...], dict[str, Any]]] = weakref.WeakKeyDictionary()


def _class_defaults(agent: type[Any]) -> dict[str, Any]:
    raw = _read_class_attributes(agent)
    cached = _DEFAULTS.get(agent)
    if cached is not None and cached[0] == raw:
        return cached[1]
    checked: dict[str, Any] = {}
    for name, check in _CHECKS.items():
        if name == "cwd":
            continue
        value = getattr(agent, name) if name in CLASS_ATTRIBUTES else None
        try:
            checked[name] = check(value)
        except (TypeError, ValueError) as exc:
            raise type(exc)(f"class attribute {agent.__name__}.{name}: {exc}") from None
    _DEFAULTS[agent] = (raw, checked)
    return checked
