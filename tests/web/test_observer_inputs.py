"""The observer answers a question an agent waits on (``ask_user``): the route behind the token, and the page's field."""

from __future__ import annotations

from typing import Any

import httpx
import trio

import condukt
import condukt.web.observer as observer
from condukt.events import InputRequested
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import AskUser

from .helpers import AUTH, TOKEN, hypercorn_trio


async def test_the_answer_route_answers_a_waiting_question_behind_the_token() -> None:
    model = ScriptedModel([call("ask_user", {"question": "Ship it?"}, id="q1"), reply("Shipping.")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[AskUser], load_project_instructions=False)
        worker = await node.spawn(condukt.Server)
        app = observer.create_app(node, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            answers: list[Any] = []
            async with trio.open_nursery() as nursery, node.subscribe(agent.session_id) as events:

                async def ask() -> None:
                    answers.append(await agent.run("release"))

                nursery.start_soon(ask)
                async for published in events:
                    if isinstance(published.event, InputRequested):
                        break
                path = f"/api/processes/{agent.id}/inputs/q1"
                assert (await client.post(path, json={"value": "yes"})).status_code == 401
                assert (await client.post(path, json={"answer": "yes"}, headers=AUTH)).status_code == 422
                unknown = await client.post(f"/api/processes/{agent.id}/inputs/q7", json={"value": "x"}, headers=AUTH)
                assert (unknown.status_code, unknown.json()["error"]) == (404, "UnknownInputRequest")
                not_agent = await client.post(f"/api/processes/{worker.id}/inputs/q1", json={"value": "x"}, headers=AUTH)
                assert (not_agent.status_code, not_agent.json()["error"]) == (404, "AgentNotFound")
                done = await client.post(path, json={"value": "yes"}, headers=AUTH)
                assert done.json() == {"pid": agent.id, "call_id": "q1", "answered": True}
            assert answers == ["Shipping."]
            again = await client.post(path, json={"value": "no"}, headers=AUTH)
            assert (again.status_code, again.json()["error"]) == (409, "InputAlreadyAnswered")
            page = (await client.get("/")).text
            assert "input_requested" in page and 'class="answer"' in page  # the field and its button
