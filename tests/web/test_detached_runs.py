"""Detached runs over HTTP: ``"detach": true``, the events route (SSE ids, ``Last-Event-ID``), the status route.

Served by hypercorn on trio in the test's own trio run, so a tool of the
agent can wait on an event the test sets (no sleeps).
"""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

import httpx
import trio
from waiting import TIMEOUT

import condukt
import condukt.web
from condukt.testing import FunctionModel, call, reply

from .helpers import Echo, hypercorn_trio
from .servers import served

GATE = trio.Event()
REACHED = trio.Event()
CANCELLED = trio.Event()


@condukt.tool
async def wait_for_gate() -> str:
    """Waits until the test opens the gate."""
    REACHED.set()
    try:
        await GATE.wait()
    except trio.Cancelled:
        CANCELLED.set()
        raise
    return "gate open"


def gated(request: condukt.ModelRequest) -> Any:
    last = request.messages[-1]
    if type(last).__name__ == "ToolResultMessage":
        return reply("after the gate: " + " ".join(f"word{i}" for i in range(20)))
    return [reply("before the gate"), call("wait_for_gate", {})]


class Gated(condukt.Agent):
    """Says something, calls a tool that waits for the test, then answers in 20 words."""

    model = FunctionModel(gated)

    def tools(self) -> list[Any]:
        return [wait_for_gate]


@asynccontextmanager
async def gated_app(**options: Any) -> AsyncIterator[tuple[httpx.AsyncClient, Any]]:
    global GATE, REACHED, CANCELLED
    GATE, REACHED, CANCELLED = trio.Event(), trio.Event(), trio.Event()
    async with condukt.open_node() as node:
        app = condukt.web.create_app(node, agents={"gated": Gated}, **options)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
            yield client, app


def parse_sse_ids(text: str) -> list[tuple[int | None, str, dict[str, Any]]]:
    """``[(id or None, event name, data)]`` of an SSE body."""
    found = []
    for block in text.strip().split("\n\n"):
        if not block.strip():
            continue
        lines = dict(line.split(": ", 1) for line in block.splitlines())
        found.append((int(lines["id"]) if "id" in lines else None, lines["event"], json.loads(lines["data"])))
    return found


async def read_until(response: httpx.Response, stop_type: str) -> tuple[str, list[tuple[int | None, str, Any]]]:
    """Read SSE blocks until one of type ``stop_type`` arrived; the raw text and the blocks so far."""
    text = ""
    async for chunk in response.aiter_text():
        text += chunk
        complete = text[: text.rfind("\n\n") + 2] if "\n\n" in text else ""
        blocks = parse_sse_ids(complete) if complete else []
        if any(name == stop_type for _, name, _ in blocks):
            return text, blocks
    return text, parse_sse_ids(text)


async def test_detach_answers_202_with_the_run_id_then_events_and_status_by_id() -> None:
    async with gated_app() as (client, _):
        created = await client.post("/agents/gated/runs", json={"prompt": "go", "detach": True})
        assert created.status_code == 202, created.text
        session, run = created.json()["session"], created.json()["run"]
        assert created.headers["location"] == f"/sessions/{session}/runs/{run}"
        await REACHED.wait()
        status = (await client.get(f"/sessions/{session}/runs/{run}")).json()
        assert status["status"] == "running" and status["text"] is None
        GATE.set()
        body = (await client.get(f"/sessions/{session}/runs/{run}/events")).text
        blocks = parse_sse_ids(body)
        assert [index for index, _, _ in blocks] == list(range(len(blocks)))
        assert blocks[0][1] == "agent_start" and blocks[-1][1] == "done"
        assert blocks[-1][2]["status"] == "completed"
        status = (await client.get(f"/sessions/{session}/runs/{run}")).json()
        assert status["status"] == "done"
        assert status["text"].startswith("after the gate: word0")
        assert status["next_index"] == len(blocks) and status["error"] is None


async def test_reconnect_with_last_event_id_sees_every_event_exactly_once() -> None:
    async with gated_app() as (client, _):
        created = await client.post("/agents/gated/runs", json={"prompt": "go", "detach": True})
        session, run = created.json()["session"], created.json()["run"]
        url = f"/sessions/{session}/runs/{run}/events"
        seen: list[tuple[int | None, str, Any]] = []
        # First connection: read up to the tool call, then the client goes away mid-run.
        async with client.stream("GET", url) as response:
            assert response.headers["content-type"].startswith("text/event-stream")
            _, blocks = await read_until(response, "tool_call_start")
        seen += blocks
        assert REACHED.is_set() or seen[-1][1] == "tool_call_start"
        GATE.set()
        # Reconnect, as EventSource does: Last-Event-ID is the last id received.
        last = seen[-1][0]
        async with client.stream("GET", url, headers={"Last-Event-ID": str(last)}) as response:
            _, blocks = await read_until(response, "done")
        seen += blocks
        ids = [index for index, _, _ in seen]
        assert ids == list(range(len(ids))), "every event exactly once, in order"
        assert seen[-1][1] == "done" and seen[-1][2]["status"] == "completed"
        # The same events as one uninterrupted read from the start.
        full = parse_sse_ids((await client.get(url)).text)
        assert [(i, n, d) for i, n, d in full] == seen
        # ...and from the middle, by query parameter.
        tail = parse_sse_ids((await client.get(url, params={"after": str(last)})).text)
        assert tail == seen[last + 1 :]


async def test_sse_run_with_on_disconnect_continue_goes_on_without_its_client() -> None:
    async with gated_app() as (client, _):
        body = {"prompt": "go", "on_disconnect": "continue"}
        async with client.stream("POST", "/agents/gated/runs", json=body,
                                 headers={"Accept": "text/event-stream"}) as response:
            session, run = response.headers["x-condukt-session"], response.headers["x-condukt-run"]
            _, blocks = await read_until(response, "tool_call_start")
        assert [index for index, _, _ in blocks] == list(range(len(blocks)))
        GATE.set()
        rest = parse_sse_ids((await client.get(f"/sessions/{session}/runs/{run}/events",
                                                headers={"Last-Event-ID": str(blocks[-1][0])})).text)
        assert rest[-1][1] == "done" and rest[-1][2]["status"] == "completed"
        status = (await client.get(f"/sessions/{session}/runs/{run}")).json()
        assert status["status"] == "done"


async def test_sse_run_default_on_disconnect_abort_aborts_the_run() -> None:
    async with gated_app() as (client, _):
        async with client.stream("POST", "/agents/gated/runs", json={"prompt": "go", "on_disconnect": "abort"},
                                 headers={"Accept": "text/event-stream"}) as response:
            session = response.headers["x-condukt-session"]
            await read_until(response, "tool_call_start")
        # The client left: the run is aborted (its tool cancelled), its turn in flight dropped.
        with trio.fail_after(TIMEOUT):
            await CANCELLED.wait()
        assert not GATE.is_set()
        assert (await client.get(f"/sessions/{session}/history")).json()["messages"] == []


async def test_unknown_run_id_and_bad_last_event_id_are_typed_errors() -> None:
    async with gated_app() as (client, _):
        created = await client.post("/agents/gated/runs", json={"prompt": "go", "detach": True})
        session, run = created.json()["session"], created.json()["run"]
        for path in (f"/sessions/{session}/runs/nope", f"/sessions/{session}/runs/nope/events"):
            answer = await client.get(path)
            assert answer.status_code == 404
            assert answer.json()["error"] == "RunNotFound"
        answer = await client.get(f"/sessions/{session}/runs/{run}/events", headers={"Last-Event-ID": "x1"})
        assert answer.status_code == 400 and answer.json()["error"] == "InvalidLastEventId"
        answer = await client.get(f"/sessions/{'0' * 32}/runs/{run}")
        assert answer.status_code == 404 and answer.json()["error"] == "SessionNotFound"
        bad = await client.post("/agents/gated/runs", json={"prompt": "go", "on_disconnect": "later"})
        assert bad.status_code == 422
        GATE.set()


async def test_openapi_lists_the_run_routes() -> None:
    async with gated_app() as (client, _):
        document = (await client.get("/openapi.json")).json()
        paths = document["paths"]
        assert "get" in paths["/sessions/{id}/runs/{run_id}"]
        events = paths["/sessions/{id}/runs/{run_id}/events"]["get"]
        assert any(p["name"] == "Last-Event-ID" for p in events["parameters"])
        assert "202" in paths["/agents/gated/runs"]["post"]["responses"]
        request = document["components"]["schemas"]["RunRequest"]["properties"]
        assert request["on_disconnect"]["enum"] == ["abort", "continue"]
        assert request["detach"]["type"] == "boolean"


async def test_detached_runs_on_uvicorn_asyncio() -> None:
    """The same routes on asyncio (uvicorn, the app mounted in FastAPI, trio as a guest)."""
    async with served("uvicorn-asyncio", lambda node: condukt.web.create_app(node, agents={"echo": Echo})) as url, \
            httpx.AsyncClient(base_url=url, timeout=TIMEOUT) as client:
        created = await client.post("/agents/echo/runs", json={"prompt": "hello", "detach": True})
        assert created.status_code == 202, created.text
        session, run = created.json()["session"], created.json()["run"]
        full = parse_sse_ids((await client.get(f"/sessions/{session}/runs/{run}/events")).text)
        assert [index for index, _, _ in full] == list(range(len(full)))
        assert full[-1][1] == "done"
        tail = parse_sse_ids((await client.get(f"/sessions/{session}/runs/{run}/events",
                                                headers={"Last-Event-ID": "2"})).text)
        assert tail == full[3:]
        status = (await client.get(f"/sessions/{session}/runs/{run}")).json()
        assert (status["status"], status["text"]) == ("done", "turn 1: hello")
        missing = await client.get(f"/sessions/{session}/runs/nope/events")
        assert missing.status_code == 404 and missing.json()["error"] == "RunNotFound"
