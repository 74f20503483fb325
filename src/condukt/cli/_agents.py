"""The agent a command starts: ``condukt.Agent`` or ``--agent MODULE:CLASS``, its options, ``--mcp`` tools."""

from __future__ import annotations

import importlib
import os
import re
import shlex
import sys
from collections.abc import Sequence
from enum import Enum
from pathlib import Path
from typing import Any

import condukt

from ._errors import CommandError, UsageError

__all__ = ["DEFAULT_MODELS", "AgentChoice", "ToolSet", "choose_agent", "load_object", "mcp_sources", "route_name"]

#: The models picked when no --model / CONDUKT_MODEL is given, by the key that is set.
DEFAULT_MODELS = (("ANTHROPIC_API_KEY", "anthropic:claude-sonnet-4-5"), ("OPENAI_API_KEY", "openai:gpt-4o-mini"))


class ToolSet(str, Enum):
    """The built-in tools ``--tools`` gives the agent."""

    coding = "coding"
    read_only = "read-only"
    none = "none"


def load_object(target: str, what: str = "MODULE:APP") -> Any:
    """The object ``MODULE:ATTR`` names (attributes may be dotted), imported from the current directory too.

    Raises :class:`CommandError` for a malformed target, a module that is
    not there or an attribute it lacks; an error inside the module's own
    imports propagates.
    """
    module_name, sep, attribute = target.partition(":")
    if not sep or not module_name or not attribute:
        raise UsageError(f"expected {what}, got {target!r}")
    if "" not in sys.path and os.getcwd() not in sys.path:
        sys.path.insert(0, os.getcwd())
    try:
        value: Any = importlib.import_module(module_name)
    except ModuleNotFoundError as exc:
        if exc.name is not None and module_name.startswith(exc.name):
            raise CommandError(f"no module named {module_name!r}") from None
        raise
    for part in attribute.split("."):
        try:
            value = getattr(value, part)
        except AttributeError:
            raise CommandError(f"module {module_name!r} has no attribute {attribute!r}") from None
    return value


def load_agent(target: str) -> type[condukt.Agent]:
    """The :class:`condukt.Agent` subclass ``MODULE:CLASS`` names (:class:`CommandError` otherwise)."""
    value = load_object(target, "MODULE:CLASS")
    if not (isinstance(value, type) and issubclass(value, condukt.Agent)):
        raise CommandError(f"{target} is not a condukt.Agent subclass (it is {value!r})")
    return value


def mcp_sources(commands: Sequence[str]) -> list[Any]:
    """``condukt.mcp.stdio`` sources for ``--mcp "COMMAND ARGS"`` values (split as a shell would, without one)."""
    if not commands:
        return []
    try:
        import condukt.mcp
    except ImportError:
        raise CommandError("--mcp needs the MCP SDK: pip install 'condukt[mcp]'") from None
    sources = []
    for command in commands:
        try:
            argv = shlex.split(command)
        except ValueError as exc:
            raise UsageError(f"--mcp {command!r}: {exc}") from None
        if not argv:
            raise UsageError("--mcp takes a command that starts an MCP server, e.g. --mcp 'node server.js'")
        sources.append(condukt.mcp.stdio(*argv))
    return sources


def _builtin(tools: ToolSet) -> list[Any]:
    return {
        ToolSet.coding: condukt.tools.coding_tools(),
        ToolSet.read_only: condukt.tools.read_only_tools(),
        ToolSet.none: [],
    }[tools]


def _with_more_tools(agent: type[condukt.Agent], extra: list[Any]) -> type[condukt.Agent]:
    """``agent`` whose ``tools()`` also gives ``extra`` (same name, module and docstring)."""

    def tools(self: condukt.Agent) -> list[Any]:
        return [*agent.tools(self), *extra]

    namespace = {"tools": tools, "__module__": agent.__module__, "__qualname__": agent.__qualname__}
    subclass: type[condukt.Agent] = type(agent.__name__, (agent,), namespace)
    subclass.__doc__ = agent.__doc__
    return subclass


class AgentChoice:
    """The agent class a command starts and its start options, from the command line and the environment."""

    def __init__(self, agent: type[condukt.Agent], options: dict[str, Any]) -> None:
        self.agent = agent
        self.options = options

    @property
    def model_name(self) -> str:
        """The model, as a ``provider:name`` string when it is one."""
        model = self.options.get("model", self.agent.model)
        return model if isinstance(model, str) else type(model).__name__


def choose_agent(
    *,
    agent: str | None,
    model: str | None,
    base_url: str | None,
    api_key: str | None,
    tools: ToolSet | None,
    cwd: Path | None,
    system: str | None = None,
    thinking: str | None = None,
    mcp: Sequence[str] = (),
) -> AgentChoice:
    """The agent to start and its options.

    Without ``agent``: :class:`condukt.Agent` with ``--tools`` (default:
    coding) and a model from ``--model``, ``CONDUKT_MODEL`` or the first
    provider key set. With ``agent`` (``MODULE:CLASS``): that class, its
    own tools, prompt and options, each overridden only by what the
    command line gives (``--tools`` replaces its tools). ``--mcp`` servers'
    tools come on top in both cases. Raises :class:`CommandError`.
    """
    chosen = condukt.Agent if agent is None else load_agent(agent)
    options: dict[str, Any] = {}
    if cwd is not None:
        options["cwd"] = str(cwd)
    if model is None and chosen.model is None:
        model = next((name for env, name in DEFAULT_MODELS if os.environ.get(env)), None)
        if model is None:
            raise CommandError("no model: pass --model provider:name or set CONDUKT_MODEL (and the provider's key)")
    if model is not None:
        options["model"] = model
    if base_url is not None:
        options["base_url"] = base_url
    if api_key is not None:
        options["api_key"] = api_key
    if system is not None:
        options["system_prompt"] = system
    if thinking is not None:
        options["thinking_level"] = thinking
    sources = mcp_sources(mcp)
    if tools is not None or agent is None:
        options["tools"] = [*_builtin(tools or ToolSet.coding), *sources]
    elif sources:
        chosen = _with_more_tools(chosen, sources)
    return AgentChoice(chosen, options)


def route_name(agent: type[condukt.Agent]) -> str:
    """The HTTP route name of an agent class: ``ReleaseNotes`` -> ``release-notes``."""
    return re.sub(r"(?<=[a-z0-9])(?=[A-Z])", "-", agent.__name__).lower()
