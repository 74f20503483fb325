"""``condukt.a2a.remote``: a condukt agent asking A2A agents (served by the a2a-sdk alone, and by condukt)."""

from __future__ import annotations

from typing import Any

import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse, PlainTextResponse, Response
from starlette.routing import Route

import condukt
import condukt.a2a
from condukt.messages import ToolResultMessage
from condukt.testing import FunctionModel, call, reply
from tests.web.helpers import hypercorn_trio
from tests.web.protocol_agents import Assistant

from .sdk_server import sdk_agent


def caller(tool: condukt.Tool) -> condukt.ChildSpec:
    """An agent that sends its prompt to ``tool`` and answers 'ok: <result>' or 'error: <result>'."""

    def respond(request: condukt.ModelRequest) -> Any:
        last = request.messages[-1]
        if type(last) is ToolResultMessage:
            return reply(f"{'error' if last.is_error else 'ok'}: {last.text}")
        return call(tool.name, {"message": last.text})

    return condukt.ChildSpec(None, condukt.Agent, kwargs={"model": FunctionModel(respond), "tools": [tool]})


async def spawn(node: condukt.Node, tool: condukt.Tool) -> condukt.AgentHandle:
    spec = caller(tool)
    return await node.spawn(condukt.Agent, **spec.kwargs)


async def test_an_agent_served_by_the_a2a_sdk_alone() -> None:
    with sdk_agent() as (url, executor):
        async with condukt.open_node() as node:
            tool = condukt.a2a.remote(url, name="ask_echo")
            agent = await spawn(node, tool)
            assert await agent.run("hi") == "ok: echo 1: hi"
            assert await agent.run("again") == "ok: echo 2: again"  # one remote context per conversation
            other = await spawn(node, tool)
            assert await other.run("fresh") == "ok: echo 1: fresh"
            assert sorted(executor.seen.values()) == [1, 2]


async def test_a_hanging_remote_agent_times_out_and_its_task_is_cancelled() -> None:
    with sdk_agent() as (url, executor):
        async with condukt.open_node() as node:
            agent = await spawn(node, condukt.a2a.remote(url, name="ask_echo", timeout=1.0))
            answer = await agent.run("hang")
            assert answer.startswith("error:") and "timed out" in answer
            assert await trio.to_thread.run_sync(executor.cancelled.wait, 10)
            assert await agent.run("hi") == "ok: echo 1: hi"  # the agent goes on


async def test_aborting_the_calling_run_cancels_the_remote_task() -> None:
    with sdk_agent() as (url, executor):
        async with condukt.open_node() as node:
            agent = await spawn(node, condukt.a2a.remote(url, name="ask_echo"))
            progress = []
            async with agent.stream("hang") as events:
                async for event in events:
                    if type(event) is condukt.events.ToolProgress:
                        progress.append(event.message)
                        if event.message.endswith("working"):  # the remote task runs, its id known
                            assert await agent.abort()
            assert events.done is not None and events.done.status == "aborted"
            assert progress[-1].startswith("remote task ") and progress[-1].endswith(": working")
            assert await trio.to_thread.run_sync(executor.cancelled.wait, 10)


async def test_garbage_is_an_error_result_and_the_agent_lives_on() -> None:
    async def card(request: Request) -> Response:
        base = str(request.base_url)
        return JSONResponse({"name": "junk", "description": "Junk.", "version": "1", "capabilities": {},
                             "defaultInputModes": ["text/plain"], "defaultOutputModes": ["text/plain"], "skills": [],
                             "supportedInterfaces": [{"url": f"{base}rpc", "protocolBinding": "JSONRPC",
                                                      "protocolVersion": "1.0"}]})

    async def junk(request: Request) -> Response:
        return PlainTextResponse("<html>502 Bad Gateway</html>", media_type="text/html")

    async def no_card(request: Request) -> Response:
        return PlainTextResponse("not a card")

    app = Starlette(routes=[Route("/.well-known/agent-card.json", card), Route("/rpc", junk, methods=["POST"]),
                            Route("/bad/.well-known/agent-card.json", no_card)])
    async with hypercorn_trio(app) as url, condukt.open_node() as node:
        agent = await spawn(node, condukt.a2a.remote(url, name="ask_junk"))
        answer = await agent.run("hi")
        assert answer.startswith("error: Error: the remote agent at") and "JSON" in answer
        bad = await spawn(node, condukt.a2a.remote(f"{url}/bad", name="ask_bad"))
        assert (await bad.run("hi")).startswith("error: Error: no A2A agent card")
        assert agent.alive and bad.alive
        missing = await spawn(node, condukt.a2a.remote("http://127.0.0.1:9/", name="ask_nobody", timeout=5.0))
        assert (await missing.run("hi")).startswith("error: Error: no A2A agent card")


async def test_a_condukt_agent_over_a2a_with_a_token() -> None:
    async with condukt.open_node() as node:
        app = condukt.a2a.asgi_app(node, agent=Assistant, name="assistant", description="Helps.", token="t0k")
        async with hypercorn_trio(app) as url:
            agent = await spawn(node, condukt.a2a.remote(url, name="ask_assistant", token="t0k"))
            assert await agent.run("hello") == "ok: turn 1: hello"
            assert await agent.run("weather?") == "ok: get_weather said: sunny in Paris"
            assert await agent.run("third") == "ok: turn 3: third"
            denied = await spawn(node, condukt.a2a.remote(url, name="ask_assistant"))
            assert (await denied.run("hello")).startswith("error:")
