"""condukt as an MCP server answers results holding lone surrogates ("\\ud800", possible in any text a tool
or a model produces) instead of losing the whole result: the SDK's encoder cannot write them."""

from __future__ import annotations

from typing import Any

import trio

import condukt
import condukt.mcp
from condukt.testing import ScriptedModel, call, reply


@condukt.tool
async def odd(kind: str) -> Any:
    """Returns text, or structured data, holding lone surrogates; or fails with one in the message."""
    if kind == "error":
        raise condukt.ToolError("bad \ud800 input")
    if kind == "data":
        return {"key\udc80": ["x\ud800y"]}
    return "x\ud800y"


async def test_results_and_errors_holding_lone_surrogates_reach_the_client() -> None:
    model = ScriptedModel([
        [call("odd", {"kind": "text"}), call("odd", {"kind": "data"}), call("odd", {"kind": "error"})],
        reply("done"),
    ])
    async with trio.open_nursery() as nursery:
        url = await nursery.start(lambda task_status: condukt.mcp.serve([odd], "http", port=0,
                                                                         task_status=task_status))
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.mcp.http(url)])
            assert await agent.run("go") == "done"
            results = [m for m in await agent.history() if type(m).__name__ == "ToolResultMessage"]
        nursery.cancel_scope.cancel()
    assert [(r.text, r.is_error) for r in results] == [
        ("x\ufffdy", False), ('{"key\ufffd": ["x\ufffdy"]}', False), ("Error: Error: bad \ufffd input", True),  # the server says Error:, and so does the client
    ]
