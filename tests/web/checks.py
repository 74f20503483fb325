"""What every way of serving the endpoint must do; each check takes the served app's URL."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

import httpx
import trio
from waiting import open_fifo

from .helpers import AUTH, parse_sse


async def json_and_sse_runs_continue_one_session(client: httpx.AsyncClient) -> None:
    first = await client.post("/agents/echo/runs", json={"prompt": "hello"}, headers=AUTH)
    assert first.status_code == 200, first.text
    body = first.json()
    session = body["session"]
    assert body["text"] == "turn 1: hello"
    assert body["usage"].keys() >= {"input_tokens", "output_tokens"}

    second = await client.post("/agents/echo/runs", json={"prompt": "again", "session": session}, headers=AUTH)
    assert second.json() == {**second.json(), "session": session, "text": "turn 2: again"}

    streamed = await client.post(
        "/agents/echo/runs",
        json={"prompt": "streamed", "session": session},
        headers={**AUTH, "Accept": "text/event-stream"},
    )
    assert streamed.headers["content-type"].startswith("text/event-stream")
    assert streamed.headers["x-condukt-session"] == session
    events = parse_sse(streamed.text)
    names = [name for name, _ in events]
    assert names[0] == "agent_start" and names[-1] == "done"
    assert {"turn_start", "text_delta", "turn_end", "agent_end"} <= set(names)
    assert all(data["type"] == name for name, data in events)
    assert events[0][1]["session_id"] == session
    assert events[-1][1] == {"type": "done", "status": "completed"}
    assert "".join(d["text"] for n, d in events if n == "text_delta") == "turn 3: streamed"

    history = (await client.get(f"/sessions/{session}/history", headers=AUTH)).json()
    assert [m["type"] for m in history["messages"]] == ["user", "assistant"] * 3

    other = (await client.post("/agents/echo/runs", json={"prompt": "fresh"}, headers=AUTH)).json()
    assert other["session"] != session and other["text"] == "turn 1: fresh"


async def auth_is_required_except_for_healthz(client: httpx.AsyncClient) -> None:
    missing = await client.post("/agents/echo/runs", json={"prompt": "hi"})
    assert missing.status_code == 401 and missing.headers["www-authenticate"] == "Bearer"
    wrong = await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers={"Authorization": "Bearer nope"})
    assert wrong.status_code == 401
    assert (await client.get("/openapi.json")).status_code == 401
    assert (await client.get("/healthz")).status_code == 200
    spec = (await client.get("/openapi.json", headers=AUTH)).json()
    assert {"/agents/echo/runs", "/operations/classify", "/sessions/{id}/history"} <= spec["paths"].keys()


async def huge_bodies_get_413(client: httpx.AsyncClient, limit: int) -> None:
    huge = {"prompt": "x" * (limit * 4)}
    declared = await client.post("/agents/echo/runs", json=huge, headers=AUTH)
    assert declared.status_code == 413

    assert declared.json()["error"] == "PayloadTooLarge"


async def operations_are_typed(client: httpx.AsyncClient) -> None:
    ok = await client.post("/operations/classify", json={"text": "it crashes"}, headers=AUTH)
    assert ok.status_code == 200 and ok.json() == "bug"
    bad = await client.post("/operations/classify", json={"body": "no text"}, headers=AUTH)
    assert bad.status_code == 422
    assert bad.json()["error"] == "InvalidInput"
    assert any("'text' is a required property" in e for e in bad.json()["errors"])
    unknown = await client.post("/operations/nope", json={}, headers=AUTH)
    assert unknown.status_code == 404


async def session_routes(client: httpx.AsyncClient) -> None:
    session = (await client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH)).json()["session"]
    assert (await client.post(f"/sessions/{session}/abort", headers=AUTH)).json() == {
        "session": session, "aborted": False}
    idle = await client.post(f"/sessions/{session}/steer", json={"message": "more"}, headers=AUTH)
    assert idle.status_code == 409 and idle.json()["error"] == "NotRunning"
    assert (await client.post(f"/sessions/{session}/steer", json={}, headers=AUTH)).status_code == 422
    assert (await client.delete(f"/sessions/{session}", headers=AUTH)).status_code == 204
    assert (await client.get(f"/sessions/{session}/history", headers=AUTH)).status_code == 404
    gone = await client.post("/agents/echo/runs", json={"prompt": "hi", "session": session}, headers=AUTH)
    assert gone.status_code == 404


async def a_disconnect_mid_stream_aborts_the_run(
    client: httpx.AsyncClient, pid_file: Path, process_gone: Callable[[int], bool]
) -> None:
    lines: list[str] = []
    # The sleeper agent writes its shell's pid into ``pid_file`` and the end of its run into ``done``.
    async with open_fifo(pid_file) as pids, open_fifo(pid_file.parent / "done") as done:
        async with client.stream(
            "POST", "/agents/sleeper/runs", json={"prompt": "sleep"}, headers={**AUTH, "Accept": "text/event-stream"}
        ) as response:
            session = response.headers["x-condukt-session"]

            async def read() -> None:
                async for line in response.aiter_lines():
                    lines.append(line)

            async with trio.open_nursery() as nursery:
                nursery.start_soon(read)
                pid = int(await pids.receive_line())  # the tool runs its `sleep 600`
                nursery.cancel_scope.cancel()
        # The response is closed: the client went away mid-run.
        assert await done.receive_line() == "aborted"
    assert "event: tool_call_start" in lines
    assert await trio.to_thread.run_sync(process_gone, pid)
    # The aborted run left no half-finished turn in the history.
    history = (await client.get(f"/sessions/{session}/history", headers=AUTH)).json()
    assert history["messages"] == []


async def everything(client: httpx.AsyncClient, limit: int, pid_file: Path, process_gone: Callable[[int], bool]) -> None:
    """Every check above, in an order where each starts from a clean state."""
    await json_and_sse_runs_continue_one_session(client)
    await auth_is_required_except_for_healthz(client)
    await huge_bodies_get_413(client, limit)
    await operations_are_typed(client)
    await session_routes(client)
    await a_disconnect_mid_stream_aborts_the_run(client, pid_file, process_gone)
