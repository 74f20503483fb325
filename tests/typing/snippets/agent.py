"""The agent layer's contract (DESIGN.md): spawn of an Agent subclass is an AgentHandle."""

from __future__ import annotations

from typing import assert_type

import condukt
from condukt.agent import AgentHandle
from condukt.testing import ScriptedModel, reply


class MyAgent(condukt.Agent):
    system_prompt = "You help."


async def main() -> None:
    m = ScriptedModel([reply("hi")])
    async with condukt.open_node() as node:
        h = await node.spawn(MyAgent, model=m)
        assert_type(h, AgentHandle)
        await h.run("x")
