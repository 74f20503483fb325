"""Tool sources in an agent: opened at start, asked for their tools before each request.

A capability, so the turn loop knows nothing of it: built in when the
agent's tools list holds a :class:`~condukt.tools.ToolSource`, it takes the
sources out of ``ctx.declared_tools``; ``setup`` opens them, ``tools``
offers their first tools with the agent's own (a name
clash then fails the start, as for any two tools), and ``run_started`` /
``after_turn`` (the points before each model request) rebuild the agent's
tool table when a source lists a different set; ``history_changed`` (after
each turn) first lets each source catch up with changes announced during the
turn (:meth:`ToolSet.sync`). ``stop`` closes them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence

from ...messages import AssistantMessage
from ...otp import ExitReason
from ...tools import Tool, ToolSet, ToolSource, ToolSourceContext
from .._capability import Builtin, Capability
from .._context import AgentContext
from .._run import Run

__all__ = ["ToolSources"]

logger = logging.getLogger("condukt.agent")


class ToolSources(Builtin):
    """Opens an agent's :class:`~condukt.tools.ToolSource` entries and keeps their tools current."""

    def __init__(self, sources: Sequence[ToolSource]) -> None:
        self.sources = tuple(sources)
        self.sets: list[ToolSet] = []
        #: What each set listed when the table was last built (compared by identity).
        self.seen: list[Sequence[Tool]] = []
        self.own: tuple[Tool, ...] | None = None

    @classmethod
    def at_start(cls, ctx: AgentContext) -> Capability | None:
        """One for an agent whose tools list holds sources: they are this capability's from now on."""
        declared = ctx.declared_tools
        # A class is never a ToolSource instance: the ABC's isinstance check only for the rest.
        sources = [entry for entry in declared if not isinstance(entry, type) and isinstance(entry, ToolSource)]
        if not sources:
            return None
        ctx.declared_tools = [e for e in declared if isinstance(e, type) or not isinstance(e, ToolSource)]
        return cls(sources)

    async def setup(self, ctx: AgentContext) -> None:
        """Open the sources (a failure closes those already open); cancelling the start cancels it."""
        context = ToolSourceContext(ctx.node, ctx.handle, ctx.cwd)
        try:
            for source in self.sources:
                self.sets.append(await source.open(context))
        except BaseException:
            await self.close()
            raise

    def tools(self, ctx: AgentContext) -> Sequence[Tool]:
        """The tools the sources list now."""
        self.seen = [tool_set.tools() for tool_set in self.sets]
        return [tool for listed in self.seen for tool in listed]

    def run_started(self, run: Run) -> None:
        """Rebuild the tool table if a source lists other tools than before."""
        self._refresh(run.context)

    async def history_changed(self, ctx: AgentContext) -> None:
        """Let the sources catch up with changes announced during the turn (cancelled with the run)."""
        # The async point after each turn, before the next request.
        for tool_set in self.sets:
            await tool_set.sync()

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        """Rebuild the tool table if a source lists other tools than before."""
        self._refresh(run.context)
        return False

    def _refresh(self, ctx: AgentContext) -> None:
        current = [tool_set.tools() for tool_set in self.sets]
        if all(a is b for a, b in zip(current, self.seen, strict=True)):
            return
        if self.own is None:  # the agent's other tools, as resolved at start
            offered = {id(tool) for listed in self.seen for tool in listed}
            self.own = tuple(tool for tool in ctx.tools if id(tool) not in offered)
        self.seen = current
        tools = list(self.own)
        names = {tool.name for tool in tools}
        for listed in current:
            for tool in listed:
                try:
                    tool.check()
                except (TypeError, ValueError) as exc:
                    logger.warning("tool source offers an unusable tool; left out: %s", exc)
                    continue
                if tool.name in names:
                    logger.warning("tool source offers a second tool named %r; left out", tool.name)
                    continue
                names.add(tool.name)
                tools.append(tool)
        ctx.set_tools(tools)

    async def stop(self, ctx: AgentContext, reason: ExitReason) -> None:
        """Close the sources (bounded by the agent's shutdown budget, then cancelled)."""
        await self.close()

    async def close(self) -> None:
        """Close the opened sets (last opened first); a failure is logged, not raised.

        Cancelled, it raises at once: the sets it had not closed yet stay open.
        """
        sets, self.sets = self.sets, []
        for tool_set in reversed(sets):
            try:
                await tool_set.aclose()
            except Exception:
                logger.exception("closing a tool source failed")
