"""``AgentHandle.info()``: what a dashboard shows of an agent (state, run, turn, tokens, tool calls in flight)."""

from __future__ import annotations

import pytest
import trio
import trio.testing

import condukt
from condukt.agent import AgentInfo, RunInfo, ToolCallInfo
from condukt.messages import Usage
from condukt.testing import ScriptedModel, call, reply

from .test_control import Gate


async def test_info_shows_the_run_its_turn_tokens_and_the_tool_calls_in_flight() -> None:
    gate = Gate()
    model = ScriptedModel([
        [reply("checking", usage=Usage(100, 7)), call("gate", id="c1")],
        reply("done", usage=Usage(50, 3)),
    ])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[gate], id="s-1",
                                 secrets={"TOKEN": "hunter2hunter2"})
        assert agent.info() == AgentInfo("s-1", "idle", 0, None)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "use hunter2hunter2 please")
            await gate.entered.wait()
            info = agent.info()
            assert info.state == "running" and info.queued == 0
            run = info.run
            assert isinstance(run, RunInfo)
            assert run.id.startswith("s-1/") and run.turn == 1
            assert run.usage == Usage(100, 7)
            assert run.tool_calls == (ToolCallInfo("c1", "gate"),)
            assert "hunter2hunter2" not in run.prompt  # scrubbed, as the history holds it
            gate.open.set()
        assert agent.info().run is None
        await agent.stop()
        with pytest.raises(condukt.NoProc):
            agent.info()
