"""The endpoint under uvicorn (asyncio) through condukt.asyncio, mounted in a FastAPI app; and aiohttp."""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI, Request
from waiting import WallBound, open_fifo_asyncio

import condukt
import condukt.asyncio as ca
import condukt.lifespan
import condukt.web
from condukt.testing import FunctionModel, reply

from . import checks
from .helpers import AUTH, TOKEN, Echo, Triage, agents, free_port, sleeper, uvicorn_server

LIMIT = 64 * 1024


def fastapi_app(tmp_path: Path) -> FastAPI:
    app = FastAPI(lifespan=condukt.lifespan.lifespan)
    app.mount(
        "/v1",
        condukt.web.create_app(agents=agents(tmp_path), operations=[Triage.classify], token=TOKEN, max_body_size=LIMIT),
    )

    @app.post("/ask")
    async def ask(request: Request) -> dict[str, Any]:
        seen: list[Any] = []

        def answer(model_request: condukt.ModelRequest) -> Any:
            seen.append(condukt.current_node())  # the node the one-shot's agent runs on
            return reply("asked")

        text = await ca.run("q", model=FunctionModel(answer))  # no node=: the lifespan's
        return {"text": text, "on_app_node": seen == [request.state.node.inner]}

    return app


@pytest.fixture
def fastapi_url(tmp_path: Path) -> Iterator[str]:
    with uvicorn_server(fastapi_app(tmp_path)) as url:
        yield url


async def test_the_endpoint_in_fastapi_on_uvicorn(
    fastapi_url: str, tmp_path: Path, process_gone: Callable[[int], bool]
) -> None:
    async with httpx.AsyncClient(base_url=f"{fastapi_url}/v1", timeout=10) as client:
        await checks.everything(client, LIMIT, tmp_path / "pid", process_gone)
    async with httpx.AsyncClient(base_url=fastapi_url, timeout=10) as client:
        assert (await client.post("/ask")).json() == {"text": "asked", "on_app_node": True}


async def test_the_endpoint_alone_on_uvicorn_opens_its_node_through_condukt_asyncio() -> None:
    app = condukt.web.create_app(agents={"echo": Echo}, token=TOKEN)
    with uvicorn_server(app) as url:
        async with httpx.AsyncClient(base_url=url, timeout=10) as client:
            first = (await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)).json()
            again = await client.post(
                "/agents/echo/runs", json={"prompt": "again", "session": first["session"]}, headers=AUTH
            )
            assert (first["text"], again.json()["text"]) == ("turn 1: hi", "turn 2: again")


@pytest.mark.slow
def test_aiohttp_app_with_a_wait_for_timeout_that_kills_the_tool(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    from aiohttp import web

    pid_file = tmp_path / "pid"
    spec = sleeper(pid_file)
    node_key = web.AppKey("node", Any)

    async def node_ctx(app: web.Application) -> Any:
        async with condukt.lifespan.open_app_node() as node:
            app[node_key] = node
            yield

    async def run(request: web.Request) -> web.Response:
        agent = await request.app[node_key].spawn(condukt.Agent, model=FunctionModel(lambda r: reply("hi there")))
        return web.json_response({"text": await agent.run("hello")})

    async def slow(request: web.Request) -> web.Response:
        async with open_fifo_asyncio(pid_file) as pids, open_fifo_asyncio(tmp_path / "done") as done:
            agent = await request.app[node_key].spawn(spec.start, **spec.kwargs)
            run = asyncio.ensure_future(agent.run("sleep"))
            pid = int(await pids.readline())  # the tool's `sleep 600` runs
            try:
                await asyncio.wait_for(run, 0.1)
            except TimeoutError:
                await done.readline()  # the agent finishes the abort right after the caller left
                return web.json_response(
                    {"timed_out": True, "history": len(await agent.history()), "pid": pid}, status=504
                )
        return web.json_response({"timed_out": False})

    app = web.Application()
    app.cleanup_ctx.append(node_ctx)
    app.add_routes([web.post("/run", run), web.post("/slow", slow)])
    port = free_port()
    ready = threading.Event()
    stop: list[Callable[[], None]] = []

    async def serve() -> None:
        runner = web.AppRunner(app)
        await runner.setup()
        await web.TCPSite(runner, "127.0.0.1", port).start()
        done = asyncio.Event()
        loop = asyncio.get_running_loop()
        stop.append(lambda: loop.call_soon_threadsafe(done.set))
        ready.set()
        await done.wait()
        await runner.cleanup()

    thread = threading.Thread(target=asyncio.run, args=(serve(),), daemon=True)
    thread.start()
    assert ready.wait(10)
    try:
        with httpx.Client(base_url=f"http://127.0.0.1:{port}", timeout=10) as client:
            assert client.post("/run").json() == {"text": "hi there"}
            with wall_bound(5.0, "a run cut by asyncio.wait_for, its tool killed"):
                slow_answer = client.post("/slow")
            assert slow_answer.status_code == 504
            answer = slow_answer.json()
            assert answer == {"timed_out": True, "history": 0, "pid": answer["pid"]}
        assert process_gone(answer["pid"])
    finally:
        stop[0]()
        thread.join(10)
