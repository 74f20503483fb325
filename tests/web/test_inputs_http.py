"""Deferred tools over HTTP: waiting ``ask_user`` calls listed and answered through the endpoint (hypercorn on trio)."""

from __future__ import annotations

from typing import Any

import httpx

import condukt
import condukt.web
from condukt.testing import FunctionModel, call, reply
from condukt.tools import AskUser

from .helpers import AUTH, TOKEN, hypercorn_trio
from .test_approvals_http import events


def asker(request: condukt.ModelRequest) -> Any:
    last = request.messages[-1]
    if type(last).__name__ == "ToolResultMessage":
        return reply(f"Hello, {last.text}!")
    return call("ask_user", {"question": "What is your name?"}, id="q1")


class Greeter(condukt.Agent):
    """Asks the user's name, then greets them."""

    model = FunctionModel(asker)
    load_project_instructions = False

    def tools(self) -> list[Any]:
        return [AskUser]


async def test_a_waiting_question_is_listed_answered_and_refused_twice() -> None:
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"greeter": Greeter}, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            seen: list[tuple[str, dict[str, Any]]] = []
            headers = {**AUTH, "Accept": "text/event-stream"}
            async with client.stream("POST", "/agents/greeter/runs", json={"prompt": "hi"}, headers=headers) as response:
                session = response.headers["x-condukt-session"]
                async for name, data in events(response):
                    seen.append((name, data))
                    if name != "input_requested":
                        continue
                    assert (data["call_id"], data["question"], data["tool"]) == ("q1", "What is your name?", "ask_user")
                    listed = (await client.get(f"/sessions/{session}/inputs", headers=AUTH)).json()
                    assert [(p["call_id"], p["question"]) for p in listed["inputs"]] == [("q1", "What is your name?")]
                    # Bad input first: an unknown id (404), a body without a value (422); the call still waits.
                    unknown = await client.post(f"/sessions/{session}/inputs/q9", json={"value": "x"}, headers=AUTH)
                    assert (unknown.status_code, unknown.json()["error"]) == (404, "UnknownInputRequest")
                    bad = await client.post(f"/sessions/{session}/inputs/q1", json={"answer": "x"}, headers=AUTH)
                    assert bad.status_code == 422
                    answered = await client.post(f"/sessions/{session}/inputs/q1", json={"value": "Ada"}, headers=AUTH)
                    assert answered.status_code == 200 and answered.json()["answered"] is True
                    again = await client.post(f"/sessions/{session}/inputs/q1", json={"value": "Bob"}, headers=AUTH)
                    assert (again.status_code, again.json()["error"]) == (409, "InputAlreadyAnswered")
            names = [name for name, _ in seen]
            assert "input_received" in names
            assert ("agent_end", "Hello, Ada!") in [(n, d.get("text")) for n, d in seen]
            anonymous = await client.get(f"/sessions/{session}/inputs")
            assert anonymous.status_code == 401
            spec = (await client.get("/openapi.json", headers=AUTH)).json()
            post = spec["paths"]["/sessions/{id}/inputs/{call_id}"]["post"]
            assert {"200", "404", "409"} <= set(post["responses"])
            assert "get" in spec["paths"]["/sessions/{id}/inputs"]
