"""Tool sources: entries of a tools list that stand for a set of tools that can change.

A :class:`Tool` is fixed when the agent starts. Some tools are not: an MCP
server's tools are whatever the server lists now, and it may change them
while the agent runs (or be restarted without them for a moment). A
:class:`ToolSource` goes into ``Agent.tools()`` like a tool; the agent
opens it at start and asks the opened :class:`ToolSet` for its current
tools before every model request.
"""

from __future__ import annotations

import abc
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import attrs

from ..otp import Node
from ._tool import Tool

__all__ = ["ToolSet", "ToolSource", "ToolSourceContext"]


@attrs.frozen
class ToolSourceContext:
    """What a source knows about the agent opening it: its ``node``, ``agent`` handle and ``cwd``."""

    node: Node
    agent: Any
    cwd: Path


class ToolSet(abc.ABC):
    """An opened :class:`ToolSource`: one agent's view of a changing set of tools."""

    @abc.abstractmethod
    def tools(self) -> Sequence[Tool]:
        """The tools to offer the model now.

        Called before every model request on the agent's hot path: it must
        not block, and should return the very same sequence object while
        nothing changed (the agent rebuilds its tool table only when the
        object differs). A tool whose name another tool already has is left
        out (and logged).
        """

    async def sync(self) -> None:  # noqa: B027  # optional: most sources have nothing to wait for
        """Wait until :meth:`tools` shows every change announced so far (the default: nothing to wait for).

        The agent awaits it after each turn, before its next model request,
        so a change announced during a turn's tool calls (an MCP server's
        ``list_changed``) is in that request. Keep it short; it runs inside
        the run, so an abort or the run's timeout cancels it.
        """

    async def aclose(self) -> None:  # noqa: B027  # optional: most sources hold nothing
        """The agent is stopping: release what :meth:`ToolSource.open` took.

        Runs in the agent's ``terminate`` (within its shutdown budget);
        cancelled when that budget runs out.
        """


class ToolSource(abc.ABC):
    """An entry of an agent's tools list that expands to tools chosen at run time.

    Subclass and implement :meth:`open`. The agent opens each source when
    it starts (after its secrets and capabilities are set up), offers the
    model the tools the opened :class:`ToolSet` lists before each request,
    and closes it when it stops. ``condukt.mcp.stdio(...)`` is one.
    """

    @abc.abstractmethod
    async def open(self, context: ToolSourceContext) -> ToolSet:
        """Open the source for the agent described by ``context``.

        Runs while the agent starts: what it raises fails the start, and
        cancelling the start cancels it.
        """
