"""Approvals over HTTP: pending calls listed, approved and denied through the endpoint (hypercorn on trio)."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx

import condukt
import condukt.web
from condukt.testing import FunctionModel, call, reply

from .helpers import AUTH, TOKEN, hypercorn_trio

deployed: list[str] = []


@condukt.tool(requires_approval=True)
async def deploy(service: str) -> str:
    """Deploys a service."""
    deployed.append(service)
    return f"deployed {service}"


def deployer(request: condukt.ModelRequest) -> Any:
    last = request.messages[-1]
    if type(last).__name__ == "ToolResultMessage":
        return reply(f"result: {last.text}")
    return call("deploy", {"service": last.text})


class Deployer(condukt.Agent):
    """Deploys the service it is told, once someone approves."""

    model = FunctionModel(deployer)
    system_prompt = "You deploy."

    def tools(self) -> list[Any]:
        return [deploy]


async def events(response: httpx.Response) -> AsyncIterator[tuple[str, dict[str, Any]]]:
    """The SSE events of a streamed response, as they arrive."""
    block: dict[str, str] = {}
    async for line in response.aiter_lines():
        if line:
            key, _, value = line.partition(": ")
            block[key] = value
        elif block:
            yield block["event"], json.loads(block["data"])
            block = {}


async def run_until_asked(client: httpx.AsyncClient, service: str, decide: Any) -> tuple[str, list[tuple[str, dict[str, Any]]]]:
    """Stream a run; when it asks for approval, call ``decide(session, call_id)``; return the session and every event."""
    seen = []
    body = {"prompt": service}
    async with client.stream("POST", "/agents/deployer/runs", json=body, headers={**AUTH, "Accept": "text/event-stream"}) as response:
        assert response.status_code == 200
        session = response.headers["x-condukt-session"]
        async for name, data in events(response):
            seen.append((name, data))
            if name == "approval_requested":
                await decide(session, data["call_id"])
    return session, seen


async def test_pending_calls_are_listed_then_approved_or_denied() -> None:
    deployed.clear()
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"deployer": Deployer}, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:

            async def approve(session: str, call_id: str) -> None:
                listed = (await client.get(f"/sessions/{session}/approvals", headers=AUTH)).json()
                [pending] = listed["approvals"]
                assert (pending["call_id"], pending["tool"], pending["arguments"]) == (call_id, "deploy", {"service": "api"})
                assert deployed == []  # nothing ran before the decision
                answer = await client.post(f"/sessions/{session}/approvals/{call_id}", json={"approve": True}, headers=AUTH)
                assert answer.status_code == 200 and answer.json() == {"session": session, "call_id": call_id, "approved": True}

            session, seen = await run_until_asked(client, "api", approve)
            assert deployed == ["api"]
            assert seen[-1][0] == "done"
            assert any(name == "approval_decided" and data["approved"] for name, data in seen)
            assert (await client.get(f"/sessions/{session}/approvals", headers=AUTH)).json()["approvals"] == []

            async def deny(session: str, call_id: str) -> None:
                answer = await client.post(
                    f"/sessions/{session}/approvals/{call_id}", json={"approve": False, "reason": "frozen for the holidays"}, headers=AUTH
                )
                assert answer.status_code == 200

            session, seen = await run_until_asked(client, "billing", deny)
            assert deployed == ["api"]  # the denied call never ran
            history = (await client.get(f"/sessions/{session}/history", headers=AUTH)).json()["messages"]
            assert "frozen for the holidays" in json.dumps(history)


async def test_bad_decisions_are_refused() -> None:
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"deployer": Deployer}, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            # A session to talk to: a run that is approved at once.
            async def approve(session: str, call_id: str) -> None:
                await client.post(f"/sessions/{session}/approvals/{call_id}", json={"approve": True}, headers=AUTH)

            session, _ = await run_until_asked(client, "web", approve)
            unknown = await client.post(f"/sessions/{session}/approvals/nope", json={"approve": True}, headers=AUTH)
            assert unknown.status_code == 404 and unknown.json()["error"] == "UnknownApproval"
            invalid = await client.post(f"/sessions/{session}/approvals/nope", json={"approve": "yes"}, headers=AUTH)
            assert invalid.status_code == 422
            assert (await client.get(f"/sessions/{session}/approvals")).status_code == 401
            assert (await client.get("/sessions/missing/approvals", headers=AUTH)).status_code == 404
            spec = (await client.get("/openapi.json", headers=AUTH)).json()
            assert "post" in spec["paths"]["/sessions/{id}/approvals/{call_id}"]
