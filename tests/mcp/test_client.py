"""condukt.mcp's client against a real MCPServer over stdio: tools, timeouts, abort, restarts, list_changed."""

from __future__ import annotations

import os
import signal
from collections.abc import Callable
from pathlib import Path

import pytest
import trio
from waiting import WallBound, open_fifo

import condukt
import condukt.mcp
from condukt import secrets
from condukt.testing import ScriptedModel, call, reply


def _results(model: ScriptedModel) -> list[str]:
    """The tool results the model saw, in order."""
    seen = []
    for message in model.requests[-1].messages:
        if type(message).__name__ == "ToolResultMessage":
            seen.append(message.text)
    return seen


def _tool_names(model: ScriptedModel, index: int = -1) -> list[str]:
    return [tool.name for tool in model.requests[index].tools]


async def test_an_agent_calls_a_server_tool_and_the_model_sees_the_result(server_script: list[str]) -> None:
    server = condukt.mcp.stdio(*server_script)
    model = ScriptedModel([call("add", {"a": 2, "b": 3}), reply("five")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[server])
        assert await agent.run("2+3?") == "five"
    assert _results(model) == ["5"]
    listed = {tool.name: tool for tool in model.requests[0].tools}
    assert {"add", "slow", "pid", "grow"} <= set(listed)
    assert listed["add"].parameters["properties"]["a"]["type"] == "integer"
    assert listed["add"].description == "Add two numbers."


async def test_a_prefix_renames_the_tools_and_equal_definitions_share_one_connection(server_script: list[str]) -> None:
    plain = ScriptedModel([call("pid", {}), reply("ok")])
    own = ScriptedModel([call("pid", {}), reply("ok")])
    prefixed = ScriptedModel([call("demo_pid", {}), call("demo_add", {"a": 1, "b": 1}), reply("ok")])
    async with condukt.open_node() as node:
        first = await node.spawn(condukt.Agent, model=plain, tools=[condukt.mcp.stdio(*server_script)])
        second = await node.spawn(
            condukt.Agent, model=prefixed, tools=[condukt.mcp.stdio(*server_script, prefix="demo")]
        )
        alone = await node.spawn(condukt.Agent, model=own, tools=[condukt.mcp.stdio(*server_script, shared=False)])
        await first.run("pid?")
        await second.run("pid?")
        await alone.run("pid?")
    assert "demo_add" in _tool_names(prefixed, 0) and "add" not in _tool_names(prefixed, 0)
    assert _results(prefixed)[0] == _results(plain)[0]  # one server process for both agents
    assert _results(prefixed)[1] == "2"
    assert _results(own)[0] != _results(plain)[0]  # shared=False: a connection of its own


async def test_a_slow_call_times_out_into_an_error_result_and_the_server_is_told(
    server_script: list[str], marks: Path
) -> None:
    server = condukt.mcp.stdio(*server_script, env={"MARKS": str(marks)})
    model = ScriptedModel([call("slow", {}), call("add", {"a": 1, "b": 2}), reply("went on")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[server], tool_timeout=1.0)
        assert await agent.run("go") == "went on"
    timed_out, added = _results(model)
    assert "timed out after 1 seconds" in timed_out
    assert added == "3"
    assert marks.read_text() == "slow started\nslow cancelled\n"  # notifications/cancelled reached the server


@pytest.mark.slow
async def test_an_abort_during_a_call_returns_promptly_and_the_server_stays_usable(
    server_script: list[str], marks: Path, wall_bound: WallBound
) -> None:
    server = condukt.mcp.stdio(*server_script, env={"MARKS": str(marks)})
    model = ScriptedModel([call("slow", {}), call("add", {"a": 4, "b": 4}), reply("eight")])
    async with condukt.open_node() as node, open_fifo(marks) as notes:
        agent = await node.spawn(condukt.Agent, model=model, tools=[server])
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                try:
                    await agent.run("slow")
                except condukt.Aborted:
                    pass

            nursery.start_soon(run)
            assert await notes.receive_line() == "slow started"  # the call is on the server
            with wall_bound(1.0, "an abort during an MCP call"):
                await agent.abort()
        assert await agent.run("add") == "eight"
        assert await notes.receive_line() == "slow cancelled"
    assert _results(model)[-1] == "8"


async def test_a_killed_server_is_restarted_and_its_tools_come_back(
    server_script: list[str], process_gone: Callable[[int], bool], tmp_path: Path
) -> None:
    server = condukt.mcp.stdio(*server_script, env={"STARTS": str(tmp_path / "starts")})
    model = ScriptedModel([call("pid", {}), reply("one"), call("pid", {}), reply("two")])
    async with condukt.open_node() as node, open_fifo(tmp_path / "starts") as starts:
        agent = await node.spawn(condukt.Agent, model=model, tools=[server])
        await agent.run("pid")
        first = int(_results(model)[-1])
        assert int(await starts.receive_line()) == first
        os.kill(first, signal.SIGKILL)
        # The death is seen and the connection restarted: its new incarnation starts a new
        # server process, which says so. (A call meanwhile waits for the new session.)
        restarted = int(await starts.receive_line())
        await agent.run("pid again")
    second = int(_results(model)[-1])
    assert second != first and second == restarted
    assert "pid" in _tool_names(model)


async def test_list_changed_adds_the_new_tool_to_the_next_request(server_script: list[str]) -> None:
    model = ScriptedModel([call("grow", {}), call("shout", {"text": "hi"}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.mcp.stdio(*server_script)])
        with trio.fail_after(10):
            await agent.run("grow")
    assert "shout" not in _tool_names(model, 0)
    assert "shout" in _tool_names(model, 1)  # the very next request
    assert _results(model)[-1] == "HI"


async def test_secret_env_reaches_the_server_and_is_redacted(server_script: list[str]) -> None:
    os.environ["CONDUKT_MCP_TEST_TOKEN"] = "s3cr3t-value"
    try:
        server = condukt.mcp.stdio(*server_script, env={"TOKEN": secrets.env("CONDUKT_MCP_TEST_TOKEN")})
        assert "s3cr3t" not in repr(server)
        model = ScriptedModel([call("token", {}), reply("ok")])
        async with condukt.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model, tools=[server])
            await agent.run("token")
            history = await agent.history()
    finally:
        del os.environ["CONDUKT_MCP_TEST_TOKEN"]
    assert _results(model) == ["token is [REDACTED:MCP_ENV_TOKEN]"]
    assert all("s3cr3t" not in repr(message) for message in history)


async def test_the_server_process_tree_goes_when_the_last_agent_stops(
    server_script: list[str], process_gone: Callable[[int], bool]
) -> None:
    model = ScriptedModel([call("spawn", {}), call("pid", {}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[condukt.mcp.stdio(*server_script)])
        await agent.run("spawn")
        child, server = (int(text) for text in _results(model))
        await agent.stop()
        assert process_gone(server)
        assert process_gone(child)


async def test_a_server_that_cannot_start_fails_the_agent_start() -> None:
    server = condukt.mcp.stdio("/nonexistent/mcp-server", connect_timeout=5.0)
    async with condukt.open_node() as node:
        try:
            await node.spawn(condukt.Agent, model=ScriptedModel([]), tools=[server])
        except condukt.mcp.McpConnectError as exc:
            assert "mcp-server" in str(exc)
        else:
            raise AssertionError("the start should fail")
