"""One node for an app's lifetime: condukt.lifespan on trio servers, and the endpoint's own lifespan."""

from __future__ import annotations

from typing import Any

import httpx
import pytest
import trio
from starlette.applications import Starlette
from starlette.requests import Request
from starlette.responses import JSONResponse
from starlette.routing import Route

import condukt
import condukt.lifespan
import condukt.web
from condukt.testing import FunctionModel, reply

from .helpers import AUTH, TOKEN, Echo, hypercorn_trio


async def test_starlette_lifespan_on_hypercorn_trio_makes_condukt_run_use_the_app_node() -> None:
    async def ask(request: Request) -> JSONResponse:
        seen: list[Any] = []

        def answer(model_request: condukt.ModelRequest) -> Any:
            seen.append(condukt.current_node())
            return reply("asked")

        text = await condukt.run("q", model=FunctionModel(answer))  # no node=, no open_node in this task
        node = request.state.node
        return JSONResponse({"text": text, "same": seen == [node] and condukt.current_node() is node})

    app = Starlette(routes=[Route("/ask", ask, methods=["POST"])], lifespan=condukt.lifespan.lifespan)
    async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url) as client:
        assert (await client.post("/ask")).json() == {"text": "asked", "same": True}
    assert condukt.current_node() is None


async def test_while_serving_for_quart_trio_needs_no_aenter_by_hand() -> None:
    seen: list[Any] = []
    serving = condukt.lifespan.while_serving()
    await serving.__anext__()  # what quart does at startup
    node = condukt.current_node()
    assert node is not None and node.root.alive

    async def handler() -> None:  # a request task that does not inherit the lifespan's context
        seen.append(condukt.current_node())
        seen.append(await condukt.run("hi", model=FunctionModel(lambda r: reply("from the app node"))))

    async with trio.open_nursery() as nursery:
        nursery.start_soon(handler)
    with pytest.raises(StopAsyncIteration):
        await serving.__anext__()  # and at shutdown
    assert seen == [node, "from the app node"]
    assert condukt.current_node() is None
    with pytest.raises(condukt.ConduktError, match="not running"):
        node.root  # noqa: B018 - the node stopped with the app


async def test_the_endpoint_opens_its_own_node_when_given_none() -> None:
    app = condukt.web.create_app(agents={"echo": Echo}, token=TOKEN)
    async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url) as client:
        answer = await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)
        assert answer.json()["text"] == "turn 1: hi"


async def test_idle_sessions_expire(autojump_clock: trio.abc.Clock) -> None:
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"echo": Echo}, token=TOKEN, session_idle_timeout=60)
        async with app.router.lifespan_context(app), httpx.AsyncClient(
            transport=httpx.ASGITransport(app=app), base_url="http://endpoint"
        ) as client:
            idle = (await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)).json()["session"]
            await trio.sleep(40)
            used = (await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)).json()["session"]
            await trio.sleep(40)  # idle: 80 s; used: 40 s
            assert (await client.get(f"/sessions/{idle}/history", headers=AUTH)).status_code == 404
            assert (await client.get(f"/sessions/{used}/history", headers=AUTH)).status_code == 200
            assert (await client.get("/healthz")).json()["sessions"] == 1
