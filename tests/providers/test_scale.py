"""A thousand agents on one node against the local server, under a concurrency limit."""

from __future__ import annotations

from typing import Any, ClassVar

import pytest
import trio
from waiting import WallBound

import condukt
from condukt.providers import provider_limits
from condukt.testing.server import ProtocolServer, tool_then_answer

from .helpers import base_url


class Noop(condukt.Tool):
    """The tool each run calls once."""

    name = "noop"
    description = "Does nothing"
    parameters: ClassVar[dict[str, Any]] = {"type": "object", "properties": {}}

    async def call(self, args: dict, context: condukt.ToolContext) -> str:
        return "ok"


@pytest.mark.slow
async def test_a_thousand_agents_respect_the_concurrency_limit(nursery: trio.Nursery, wall_bound: WallBound) -> None:
    server = ProtocolServer(latency=0.05, responder=tool_then_answer)
    await nursery.start(server.run)
    limit = 100
    async with condukt.open_node() as node:
        agents = [
            await node.spawn(
                condukt.Agent,
                model="openai:m",
                api_key="k",
                base_url=base_url(server, "openai"),
                tools=[Noop],
                model_options={"max_concurrency": limit},
            )
            for _ in range(1000)
        ]
        results: list[str] = []

        async def run(agent: condukt.AgentHandle) -> None:
            results.append(await agent.run("go", timeout=60))

        # 2,000 requests of 50 ms, 100 at a time: at least 1 s; well under one at a time (100 s).
        with wall_bound(12.5, "1,000 runs, 100 requests of 50 ms at a time", at_least=1.0):
            async with trio.open_nursery() as runs:
                for agent in agents:
                    runs.start_soon(run, agent)
        limits = provider_limits(node, "openai", base_url(server, "openai"))
    assert results == ["done"] * 1000
    assert len(server.requests) == 2000  # 2 model turns per run, no retries, no errors
    assert server.peak_in_flight <= limit
    assert limits.peak_in_flight == limit  # the limit was reached, and held
    assert server.connections <= limit
