"""condukt.tools.ToolSource: tools a source lists are offered before each request, and follow its changes."""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import Tool, ToolSet, ToolSource, ToolSourceContext


def _named(name: str, answer: str) -> Tool:
    @condukt.tool(name=name)
    async def fn() -> str:
        """Answers."""
        return answer

    return fn


class Changing(ToolSet):
    def __init__(self, log: list[str]) -> None:
        self.current: tuple[Tool, ...] = (_named("first", "one"),)
        self.log = log

    def tools(self) -> tuple[Tool, ...]:
        return self.current

    async def aclose(self) -> None:
        self.log.append("closed")


class Source(ToolSource):
    def __init__(self) -> None:
        self.log: list[str] = []
        self.opened: Changing | None = None
        self.context: ToolSourceContext | None = None

    async def open(self, context: ToolSourceContext) -> ToolSet:
        self.context = context
        self.opened = Changing(self.log)
        return self.opened


def _names(model: Any, index: int) -> list[str]:
    return [tool.name for tool in model.requests[index].tools]


async def test_a_source_s_tools_are_offered_and_a_change_shows_in_the_next_request() -> None:
    source = Source()

    @condukt.tool
    async def grow() -> str:
        """Adds a tool to the source."""
        assert source.opened is not None
        source.opened.current = (*source.opened.current, _named("second", "two"))
        return "grown"

    model = ScriptedModel([call("grow", {}), call("second", {}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[grow, source])
        assert await agent.run("go") == "done"
        assert source.context is not None and source.context.node is node
        await agent.stop()
    assert _names(model, 0) == ["grow", "first"]
    assert _names(model, 1) == ["grow", "first", "second"]
    assert model.requests[2].messages[-1].text == "two"
    assert source.log == ["closed"]


async def test_a_name_clash_fails_the_start_and_closes_the_source() -> None:
    source = Source()
    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="two tools are named 'first'"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), tools=[_named("first", "x"), source])
    assert source.log == ["closed"]
