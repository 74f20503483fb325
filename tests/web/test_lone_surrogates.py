"""A lone surrogate ("\\ud800": legal in a JSON escape and in a model's output) through every encoder that
writes to a client: JSON answers, errors, SSE runs, history, approvals, operations, the observer's snapshot,
event log and stream, on both servers. Each answer is 200 (or its usual error) and carries the string back."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import httpx
import trio

import condukt
import condukt.web
from condukt.testing import FunctionModel, call

from .helpers import AUTH, TOKEN, Echo, parse_sse
from .servers import both_servers, served
from .test_approvals_http import Deployer, events

S = "\ud800"
LOW = "\udfff"


def post_json(data: Any) -> dict[str, Any]:
    """A request body with lone surrogates as JSON escapes (the only way they travel)."""
    return {"content": json.dumps(data).encode(), "headers": {**AUTH, "Content-Type": "application/json"}}


class Surrogates(condukt.Agent):
    """An agent with an operation whose result holds lone surrogates."""

    model = FunctionModel(lambda request: call("submit_result", {"result": f"odd {S} and {LOW}"}))
    describe = condukt.operation(input={"type": "string"}, output={"type": "string"}, instructions="Describe it.")


def napper(pid_file: Path) -> condukt.ChildSpec:
    """Runs `sleep 600` through bash (its pid written first), so its run is in progress while the test looks."""
    command = f"echo $$ > {pid_file}.tmp && mv {pid_file}.tmp {pid_file} && exec sleep 600"
    model = FunctionModel(lambda request: call("bash", {"command": command}))
    return condukt.ChildSpec(
        None, condukt.Agent, kwargs={"model": model, "tools": [condukt.tools.Bash], "cwd": pid_file.parent}
    )


@both_servers
async def test_every_encoder_writing_to_a_client_carries_lone_surrogates(server: str, tmp_path: Path) -> None:
    pid_file = tmp_path / "pid"

    def make_app(node: Any) -> Any:
        return condukt.web.create_app(
            node, agents={"echo": Echo, "deployer": Deployer, "napper": napper(pid_file)},
            operations=[Surrogates.describe], token=TOKEN, observer=True,
        )

    async with served(server, make_app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
        # A JSON run whose prompt and answer hold one.
        first = await client.post("/agents/echo/runs", **post_json({"prompt": f"hi {S}"}))
        assert first.status_code == 200, first.text
        session = first.json()["session"]
        assert first.json()["text"] == f"turn 1: hi {S}"
        # The same over SSE: every event is sent, the run completes.
        streamed = await client.post(
            "/agents/echo/runs", content=json.dumps({"prompt": f"then {LOW}", "session": session}).encode(),
            headers={**AUTH, "Content-Type": "application/json", "Accept": "text/event-stream"},
        )
        sse = parse_sse(streamed.text)
        assert sse[-1][1]["status"] == "completed"
        assert "".join(d["text"] for name, d in sse if name == "text_delta") == f"turn 2: then {LOW}"
        assert sse[0][1]["prompt"] == f"then {LOW}"
        # The history holding both, ever after.
        history = await client.get(f"/sessions/{session}/history", headers=AUTH)
        assert history.status_code == 200
        assert f"turn 1: hi {S}" in json.dumps(history.json(), ensure_ascii=False)
        # Errors that quote the request.
        unknown = await client.post("/agents/echo/runs", **post_json({"prompt": "x", "session": f"no{S}"}))
        assert (unknown.status_code, unknown.json()["error"]) == (404, "SessionNotFound")
        invalid = await client.post("/agents/echo/runs", **post_json({"prompt": "x", f"extra{S}": 1}))
        assert invalid.status_code == 422 and invalid.json()["errors"]
        # An operation whose result holds them.
        described = await client.post("/operations/describe", **post_json(f"a {S}"))
        assert described.status_code == 200 and described.json() == f"odd {S} and {LOW}"
        # Approvals: the waiting call's arguments hold one.
        async with client.stream("POST", "/agents/deployer/runs", content=json.dumps({"prompt": f"api{S}"}).encode(),
                                 headers={**AUTH, "Content-Type": "application/json",
                                          "Accept": "text/event-stream"}) as response:
            deployer = response.headers["x-condukt-session"]
            async for name, data in events(response):
                if name == "approval_requested":
                    listed = await client.get(f"/sessions/{deployer}/approvals", headers=AUTH)
                    assert listed.status_code == 200
                    assert listed.json()["approvals"][0]["arguments"] == {"service": f"api{S}"}
                    await client.post(f"/sessions/{deployer}/approvals/{data['call_id']}", **post_json({
                        "approve": False, "reason": f"no {S}"}))
        # The observer, while a run whose prompt holds one is in progress (its event log starts with a first look).
        assert (await client.get("/observer/api/snapshot", headers=AUTH)).status_code == 200
        async with client.stream("POST", "/agents/napper/runs", content=json.dumps({"prompt": f"nap {S}"}).encode(),
                                 headers={**AUTH, "Content-Type": "application/json",
                                          "Accept": "text/event-stream"}) as response:
            napping = response.headers["x-condukt-session"]
            with trio.fail_after(10):
                while not pid_file.exists():  # the tool's `sleep 600` runs
                    await trio.sleep(0.01)
            found: list[dict[str, Any]] = []
            with trio.fail_after(10):
                while not found:  # snapshots are shared for half the observer's interval: a newer one shows it
                    snapshot = await client.get("/observer/api/snapshot", headers=AUTH)
                    assert snapshot.status_code == 200
                    found = [p for p in snapshot.json()["processes"]
                             if ((p["agent"] or {}).get("run") or {}).get("prompt") == f"nap {S}"]
                    await trio.sleep(0.05)
            [agent] = found
            assert agent["agent"]["run"]["prompt"] == f"nap {S}"
            logged = await client.get(f"/observer/api/agents/{napping}/events", headers=AUTH)
            assert logged.status_code == 200
            assert any(e.get("prompt") == f"nap {S}" for e in logged.json()["events"])
            async with client.stream("GET", f"/observer/api/stream?agent={napping}", headers=AUTH) as stream:
                seen: dict[str, Any] = {}
                async for name, data in events(stream):
                    seen[name] = data
                    if {"snapshot", "log"} <= seen.keys():
                        break
            assert f"nap {S}" in json.dumps(seen, ensure_ascii=False)
            aborted = await client.post(f"/observer/api/processes/{agent['pid']}/abort", headers=AUTH)
            assert aborted.json() == {"pid": agent["pid"], "aborted": True}
            tail = parse_sse((await response.aread()).decode())
        assert tail[-1][1]["status"] == "aborted"
