"""1,000 sessions behind the endpoint, 100 of them crashing once: the other 900 keep their conversations."""

from __future__ import annotations

from typing import Any

import httpx
import trio

import condukt
import condukt.web

from .helpers import AUTH, TOKEN, Echo


async def test_100_crashing_sessions_out_of_1000_leave_the_others_alone() -> None:
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"echo": Echo}, token=TOKEN, max_sessions=1000)
        transport = httpx.ASGITransport(app=app)
        async with httpx.AsyncClient(transport=transport, base_url="http://endpoint") as client:
            results: dict[int, Any] = {}

            async def converse(i: int, prompt: str) -> None:
                body = {"prompt": prompt, "session": results[i]["session"]} if i in results else {"prompt": prompt}
                response = await client.post("/agents/echo/runs", json=body, headers=AUTH)
                results[i] = {**results.get(i, {}), **response.json(), "status": response.status_code}

            async with trio.open_nursery() as nursery:
                for i in range(1000):
                    nursery.start_soon(converse, i, "crash once" if i % 10 == 0 else "hello")
            crashed = [i for i in range(1000) if results[i]["status"] == 500]
            assert crashed == list(range(0, 1000, 10))
            assert all(results[i]["error"] == "AgentCrashed" for i in crashed)

            async with trio.open_nursery() as nursery:
                for i in range(1000):
                    nursery.start_soon(converse, i, "again")
            assert all(results[i]["status"] == 200 for i in range(1000))
            # The 900 kept their conversation; the 100 go on in a restarted agent, same session id.
            assert {results[i]["text"] for i in range(1000) if i % 10} == {"turn 2: again"}
            assert {results[i]["text"] for i in crashed} == {"turn 1: again"}
            assert (await client.get("/healthz")).json() == {"status": "ok", "sessions": 1000}

            # Full: a new session is refused with 503 and Retry-After.
            full = await client.post("/agents/echo/runs", json={"prompt": "one more"}, headers=AUTH)
            assert full.status_code == 503 and full.headers["retry-after"] == "1"
