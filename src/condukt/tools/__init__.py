"""Tools: the :class:`Tool` behaviour, its context, ``@tool``, and the built-in tools.

Built-ins (one module each): :class:`Read`, :class:`Bash`, :class:`Command`,
:class:`Edit`, :class:`Write`, :class:`Glob`, :class:`Grep`.

A :class:`ToolSource` (like ``condukt.mcp.stdio(...)``) stands for tools
chosen at run time: the agent asks it for its current tools before each
model request.
"""

from __future__ import annotations

from typing import Any

from ._function_tool import FunctionTool, Isolate, tool
from ._source import ToolSet, ToolSource, ToolSourceContext
from ._tool import AGENT_DEFAULT, DEFAULT_SANDBOX, Tool, ToolContext, ToolError, render_result, resolve_tools
from .bash import Bash
from .command import Command
from .deferred import AskUser, DeferredTool
from .edit import Edit
from .glob import Glob
from .grep import Grep
from .read import Read
from .write import Write

__all__ = [
    "AGENT_DEFAULT",
    "DEFAULT_SANDBOX",
    "AskUser",
    "Bash",
    "Command",
    "DeferredTool",
    "Edit",
    "FunctionTool",
    "Glob",
    "Grep",
    "Isolate",
    "Read",
    "Tool",
    "ToolContext",
    "ToolError",
    "ToolSet",
    "ToolSource",
    "ToolSourceContext",
    "Write",
    "coding_tools",
    "read_only_tools",
    "render_result",
    "resolve_tools",
    "tool",
]


def coding_tools() -> list[Any]:
    """``[Read, Bash, Edit, Write]``: what a coding agent needs."""
    return [Read, Bash, Edit, Write]


def read_only_tools() -> list[Any]:
    """``[Read, Bash]``: look, run, but do not edit files directly."""
    return [Read, Bash]
