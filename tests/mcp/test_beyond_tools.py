"""condukt.mcp beyond tools: prompts, resources and progress (MCP server-everything), start failures, back-off."""

from __future__ import annotations

import os
import signal
import sys
from pathlib import Path
from typing import Any

import pytest
import trio

import condukt
import condukt.mcp
from condukt.messages import TextBlock, ToolResultMessage
from condukt.testing import FunctionModel, ScriptedModel, call, reply
from tests.web.node_clients import node_modules


def everything() -> condukt.mcp.McpServer:
    """MCP's reference server (npm @modelcontextprotocol/server-everything) over stdio; skips without Node.js."""
    root = node_modules()
    script = root / "node_modules" / "@modelcontextprotocol" / "server-everything" / "dist" / "index.js"
    return condukt.mcp.stdio("node", str(script), "stdio", prefix="every", resources=True)


async def test_prompts_of_server_everything_go_into_a_run() -> None:
    server = everything()
    async with condukt.open_node() as node:
        names = {prompt.name for prompt in await server.list_prompts(node=node)}
        assert {"simple-prompt", "args-prompt"} <= names
        prompt = await server.get_prompt("args-prompt", {"city": "Paris"}, node=node)
        assert prompt.text == "What's weather in Paris?"
        assert [type(m).__name__ for m in prompt.messages] == ["UserMessage"]
        model = FunctionModel(lambda request: reply(f"asked: {request.messages[-1].text}"))
        agent = await node.spawn(condukt.Agent, model=model)
        assert await agent.run(prompt.text, images=prompt.images) == "asked: What's weather in Paris?"
        with pytest.raises(condukt.mcp.McpRequestError):
            await server.get_prompt("no-such-prompt", node=node)


async def test_resources_are_readable_directly_and_through_tools() -> None:
    server = everything()
    async with condukt.open_node() as node:
        resources = await server.list_resources(node=node)
        assert resources
        text = next(r for r in resources if (r.mime_type or "").startswith("text/"))
        blocks = await server.read_resource(str(text.uri), node=node)
        assert blocks and isinstance(blocks[0], TextBlock) and str(text.uri) in blocks[0].text

        def reader(request: condukt.ModelRequest) -> Any:
            last = request.messages[-1]
            if type(last) is ToolResultMessage and last.name == "every_list_resources":
                return call("every_read_resource", {"uri": last.text.split(" | ", 1)[0]})
            if type(last) is ToolResultMessage:
                return reply(last.text)
            return call("every_list_resources", {})

        model = FunctionModel(reader)
        agent = await node.spawn(condukt.Agent, model=model, tools=[server])
        answer = await agent.run("read the first resource")
        tools = {tool.name for tool in model.requests[0].tools}
        assert {"every_list_resources", "every_read_resource", "every_echo"} <= tools
        first = resources[0]
        assert answer.startswith(f"[resource {first.uri}]") or str(first.uri) in answer


async def test_progress_notifications_are_events_of_the_run() -> None:
    model = ScriptedModel([call("every_trigger-long-running-operation", {"duration": 0.3, "steps": 3}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[everything()])
        progress = []
        async with agent.stream("run it") as events:
            async for event in events:
                if type(event) is condukt.events.ToolProgress:
                    progress.append((event.progress, event.total))
                    call_id = event.call_id
                elif type(event) is condukt.events.ToolCallStart:
                    started = event.id
    assert progress == [(1, 3), (2, 3), (3, 3)]
    assert call_id == started


async def test_a_server_that_cannot_start_says_why() -> None:
    failing = condukt.mcp.stdio(
        sys.executable, "-c", "import sys; sys.stderr.write('boom: the config file is missing\\n'); sys.exit(3)",
        connect_timeout=10.0,
    )
    missing = condukt.mcp.stdio("/nonexistent/mcp-server", connect_timeout=10.0)
    async with condukt.open_node() as node:
        with pytest.raises(condukt.mcp.McpConnectError, match="boom: the config file is missing"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), tools=[failing])
        with pytest.raises(condukt.mcp.McpConnectError) as error:
            await node.spawn(condukt.Agent, model=ScriptedModel([]), tools=[missing])
        assert "executable not found: /nonexistent/mcp-server" in str(error.value)
        assert "Connection closed;" in str(error.value)  # the SDK's own error, then the cause
        with pytest.raises(condukt.mcp.McpConnectError, match="boom"):
            await failing.list_prompts(node=node)


FLAKY = '''
import os, sys
from mcp.server.mcpserver import MCPServer

if os.path.exists(sys.argv[1]):
    sys.stderr.write("down for maintenance\\n")
    sys.exit(1)

mcp = MCPServer("flaky")


@mcp.tool()
def pid() -> int:
    """This server's process id."""
    return os.getpid()


mcp.run()
'''


async def test_a_server_down_for_longer_than_the_intensity_is_tried_again(tmp_path: Path) -> None:
    script, down = tmp_path / "flaky.py", tmp_path / "down"
    script.write_text(FLAKY)
    server = condukt.mcp.stdio(sys.executable, str(script), str(down), max_restarts=1, max_seconds=5.0,
                               retry_delay=0.2, max_retry_delay=0.4)

    def respond(request: condukt.ModelRequest) -> Any:
        last = request.messages[-1]
        return reply(last.text) if type(last) is ToolResultMessage else call("pid", {})

    model = FunctionModel(respond)
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[server])
        first = int(await agent.run("pid"))
        down.write_text("")
        os.kill(first, signal.SIGKILL)
        with trio.fail_after(30):
            while "pid" in {tool.name for tool in model.requests[-1].tools}:  # restarts fail: given up on
                answer = await agent.run("pid")
        assert answer.startswith("Error")  # the tool is gone from the model's list meanwhile
        down.unlink()  # the server is back: the keeper's next try connects
        with trio.fail_after(30):
            while True:
                answer = await agent.run("pid")
                if answer.isdigit():
                    break
                await trio.sleep(0.05)
        assert int(answer) != first
