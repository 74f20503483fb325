"""Tool sources in an agent: opened at start, asked for their tools before each request.

A capability, so the turn loop knows nothing of it: ``setup`` opens the
sources, ``tools`` offers their first tools with the agent's own (a name
clash then fails the start, as for any two tools), and ``run_started`` /
``after_turn`` (the points before each model request) rebuild the agent's
tool table when a source lists a different set; ``history_changed`` (after
each turn) first lets each source catch up with changes announced during the
turn (:meth:`ToolSet.sync`). ``stop`` closes them.
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import TYPE_CHECKING

from ..messages import AssistantMessage
from ..otp import ExitReason
from ..tools import Tool, ToolSet, ToolSource, ToolSourceContext
from ._capability import Capability

if TYPE_CHECKING:
    from ._run import Run
    from ._session import Session

__all__ = ["ToolSources"]

logger = logging.getLogger("condukt.agent")


class ToolSources(Capability):
    """Opens an agent's :class:`~condukt.tools.ToolSource` entries and keeps their tools current."""

    def __init__(self, sources: Sequence[ToolSource]) -> None:
        self.sources = tuple(sources)
        self.sets: list[ToolSet] = []
        #: What each set listed when the table was last built (compared by identity).
        self.seen: list[Sequence[Tool]] = []
        self.own: tuple[Tool, ...] | None = None

    async def setup(self, session: Session) -> None:
        context = ToolSourceContext(session.node, session.handle, session.cwd)
        try:
            for source in self.sources:
                self.sets.append(await source.open(context))
        except BaseException:
            await self.close()
            raise

    def tools(self, session: Session) -> Sequence[Tool]:
        self.seen = [tool_set.tools() for tool_set in self.sets]
        return [tool for listed in self.seen for tool in listed]

    def run_started(self, run: Run) -> None:
        self._refresh(run.session)

    async def history_changed(self, session: Session) -> None:
        # The async point after each turn, before the next request: let the
        # sources catch up with changes announced during the turn's calls.
        for tool_set in self.sets:
            await tool_set.sync()

    def after_turn(self, run: Run, message: AssistantMessage) -> bool:
        self._refresh(run.session)
        return False

    def _refresh(self, session: Session) -> None:
        current = [tool_set.tools() for tool_set in self.sets]
        if all(a is b for a, b in zip(current, self.seen, strict=True)):
            return
        if self.own is None:  # the agent's other tools, as resolved at start
            offered = {id(tool) for listed in self.seen for tool in listed}
            self.own = tuple(tool for tool in session.tools if id(tool) not in offered)
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
        session.tools = tuple(tools)
        session.tools_by_name = {tool.name: tool for tool in tools}
        session.tool_definitions = tuple(tool.definition() for tool in tools)

    async def stop(self, session: Session, reason: ExitReason) -> None:
        await self.close()

    async def close(self) -> None:
        """Close the opened sets (last opened first); a failure is logged, not raised."""
        sets, self.sets = self.sets, []
        for tool_set in reversed(sets):
            try:
                await tool_set.aclose()
            except Exception:
                logger.exception("closing a tool source failed")
