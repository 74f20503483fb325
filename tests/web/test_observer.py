"""The observer's data and routes: snapshots of the live tree, the SSE stream, the event log, abort, the token."""

from __future__ import annotations

import json
from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import condukt
import condukt.web
import condukt.web.observer as observer
from condukt import serialization
from condukt.messages import Usage
from condukt.testing import FunctionModel, ScriptedModel, call, reply
from condukt.web._event_log import EventLog

from .helpers import AUTH, TOKEN, hypercorn_trio
from .observed import Blocked, Crashy, Gate


def by_key(snap: observer.Snapshot) -> dict[str, observer.ProcessView]:
    return {view.key: view for view in snap.processes}


def gated_agent(gate: Gate) -> condukt.ChildSpec:
    model = ScriptedModel([[reply("looking", usage=Usage(120, 8)), call("gate", id="g1")], reply("done")])
    return condukt.ChildSpec("reviewer", condukt.Agent, kwargs={"model": model, "tools": [gate]})


async def test_a_snapshot_holds_the_tree_with_kinds_status_mailboxes_restarts_and_agent_runs() -> None:
    gate, hold = Gate(), trio.Event()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [gated_agent(gate), condukt.ChildSpec("crashy", Crashy), condukt.ChildSpec("blocked", Blocked)],
            name="app", max_restarts=10,
        )
        dyn = await node.start_dynamic_supervisor(name="sessions")
        idle = await dyn.start_child(condukt.ChildSpec(None, condukt.Agent, kwargs={"model": ScriptedModel([])}))
        children = dict(sup.which_children())
        reviewer, crashy, blocked = children["reviewer"], children["crashy"], children["blocked"]
        assert reviewer is not None and crashy is not None and blocked is not None
        await crashy.cast("boom")
        await blocked.cast(hold)
        for n in range(3):
            await blocked.cast(n)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(reviewer.run, "review PR 7")  # type: ignore[attr-defined]
            await gate.entered.wait()
            await trio.testing.wait_all_tasks_blocked()
            snap = observer.snapshot(node)
            views = by_key(snap)
            root = views[snap.root]
            assert root.parent is None and root.kind == "dynamic_supervisor"
            assert [views[k].name for k in root.children] == ["app", "sessions"]
            app = views[str(sup.id)]
            assert app.kind == "supervisor" and app.restart == "temporary"
            rows = [views[k] for k in app.children]
            assert [(v.child_id, v.kind, v.module) for v in rows] == [
                ("reviewer", "agent", "Agent"), ("crashy", "server", "Crashy"), ("blocked", "server", "Blocked")]
            assert all(v.parent == app.key for v in rows)
            # The crashed child was restarted: a new pid, one restart.
            new_crashy = dict(sup.which_children())["crashy"]
            assert new_crashy is not None and rows[1].pid == new_crashy.id != crashy.id and rows[1].restarts == 1
            assert rows[0].restarts == 0
            assert rows[2].status == "running" and rows[2].mailbox == 3
            agent = rows[0].agent
            assert agent is not None and agent.state == "running"
            assert agent.run is not None
            assert (agent.run.prompt, agent.run.turn, agent.run.usage, agent.run.tool_calls) == (
                "review PR 7", 1, Usage(120, 8), (("g1", "gate"),))
            sessions = views[str(dyn.id)]
            assert sessions.kind == "dynamic_supervisor" and sessions.children == (str(idle.id),)
            idle_view = views[str(idle.id)].agent
            assert idle_view is not None and idle_view.state == "idle" and idle_view.run is None
            assert snap.handles[reviewer.id] is reviewer
            # It is plain data for the one converter (what the page receives).
            data = serialization.unstructure(rows[0])
            assert data["agent"]["run"]["usage"]["input_tokens"] == 120
            gate.open.set()
            hold.set()


async def test_a_static_child_that_is_not_running_shows_as_a_slot() -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([condukt.ChildSpec("w", condukt.Server)])
        await sup.terminate_child("w")
        views = by_key(observer.snapshot(node))
        (slot,) = [views[k] for k in views[str(sup.id)].children]
        assert (slot.pid, slot.status, slot.child_id, slot.key) == (None, "terminated", "w", f"{sup.id}/w")


async def test_the_event_log_keeps_each_agents_recent_events_within_its_bounds() -> None:
    async with condukt.open_node() as node:
        log = await node.spawn(EventLog, per_agent=5, max_agents=2)
        agents = [await node.spawn(condukt.Agent, model=ScriptedModel([reply(f"hi {i}")] * 3), id=f"a{i}")
                  for i in range(3)]
        await agents[0].run("one")
        seq, found = await log.call(("events", "a0", 0))
        assert len(found) == 5  # the last five of the run's seven events
        assert [e["type"] for e in found[-3:]] == ["turn_end", "agent_end", "done"]
        assert found[-1]["seq"] == seq and found[-1]["status"] == "completed"
        assert (await log.call(("events", "a0", seq)))[1] == []  # nothing newer
        await agents[1].run("two")
        await agents[2].run("three")  # a third agent: the least recently active one is forgotten
        assert (await log.call(("events", "a0", 0)))[1] == []
        assert len((await log.call(("events", "a2", 0)))[1]) == 5


async def sse_events(response: httpx.Response) -> AsyncIterator[tuple[str, Any]]:
    buffer = ""
    async for chunk in response.aiter_text():
        buffer += chunk
        while "\n\n" in buffer:
            block, buffer = buffer.split("\n\n", 1)
            lines = dict(line.split(": ", 1) for line in block.splitlines() if not line.startswith(":"))
            if "data" in lines:
                yield lines["event"], json.loads(lines["data"])


async def test_the_stream_sends_a_snapshot_then_diffs_and_the_selected_agents_events() -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([gated_agent(gate), condukt.ChildSpec("crashy", Crashy)],
                                          max_restarts=10)
        app = observer.create_app(node, token=TOKEN, interval=0.05)
        reviewer = dict(sup.which_children())["reviewer"]
        assert reviewer is not None
        session = reviewer.session_id  # type: ignore[attr-defined]
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert (await client.get("/api/stream")).status_code == 401
            with trio.fail_after(10):
                async with client.stream("GET", f"/api/stream?agent={session}", headers=AUTH) as response:
                    assert response.headers["content-type"].startswith("text/event-stream")
                    events = sse_events(response)
                    name, first = await events.__anext__()
                    assert name == "snapshot"
                    procs = {p["key"]: p for p in first["processes"]}
                    crashy = next(p for p in procs.values() if p["child_id"] == "crashy")
                    assert crashy["restarts"] == 0
                    name, log = await events.__anext__()
                    assert (name, log["agent"], log["reset"]) == ("log", session, True)
                    handle = dict(sup.which_children())["crashy"]
                    assert handle is not None
                    await handle.cast("boom")
                    async with trio.open_nursery() as nursery:
                        nursery.start_soon(reviewer.run, "review")  # type: ignore[attr-defined]
                        restarted = saw_start = False
                        async for name, data in events:
                            if name == "diff":
                                for p in data["changed"]:
                                    if p["child_id"] == "crashy" and p["restarts"] == 1:
                                        restarted = True
                                        assert p["pid"] != crashy["pid"] and crashy["key"] in data["removed"]
                            elif name == "log":
                                saw_start |= any(e["type"] == "tool_call_start" for e in data["events"])
                            if restarted and saw_start:
                                break
                        gate.open.set()


async def test_abort_route_aborts_a_running_agent_and_refuses_other_pids() -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([gated_agent(gate), condukt.ChildSpec("w", condukt.Server)])
        children = dict(sup.which_children())
        reviewer, worker = children["reviewer"], children["w"]
        assert reviewer is not None and worker is not None
        app = observer.create_app(node, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            async with trio.open_nursery() as nursery:
                outcome: list[BaseException] = []

                async def run() -> None:
                    try:
                        await reviewer.run("review")  # type: ignore[attr-defined]
                    except condukt.Aborted as exc:
                        outcome.append(exc)

                nursery.start_soon(run)
                await gate.entered.wait()
                assert (await client.post(f"/api/processes/{reviewer.id}/abort")).status_code == 401
                answer = await client.post(f"/api/processes/{reviewer.id}/abort", headers=AUTH)
                assert answer.json() == {"pid": reviewer.id, "aborted": True}
            assert len(outcome) == 1 and not reviewer.running  # type: ignore[attr-defined]
            again = await client.post(f"/api/processes/{reviewer.id}/abort", headers=AUTH)
            assert again.json() == {"pid": reviewer.id, "aborted": False}
            for pid in (worker.id, 99999):
                missing = await client.post(f"/api/processes/{pid}/abort", headers=AUTH)
                assert missing.status_code == 404 and missing.json()["error"] == "AgentNotFound"
            assert (await client.post("/api/processes/x1/abort", headers=AUTH)).status_code == 422


async def test_the_page_is_public_self_contained_and_holds_no_data() -> None:
    async with condukt.open_node() as node:
        await node.spawn(condukt.Server, name="secret-name")
        app = observer.create_app(node, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url) as client:
            page = await client.get("/")
            assert page.status_code == 200 and page.headers["content-type"].startswith("text/html")
            assert "default-src 'none'" in page.headers["content-security-policy"]
            assert page.headers["referrer-policy"] == "no-referrer"
            assert "secret-name" not in page.text and TOKEN not in page.text
            assert "http://" not in page.text and "https://" not in page.text  # nothing loads from elsewhere
            assert (await client.get("/api/snapshot")).status_code == 401
            snap = await client.get("/api/snapshot", headers=AUTH)
            assert any(p["name"] == "secret-name" for p in snap.json()["processes"])


async def test_the_endpoint_mounts_the_observer_behind_its_token_only_when_asked() -> None:
    async with condukt.open_node() as node:
        with_observer = condukt.web.create_app(node, token=TOKEN, observer=True)
        async with hypercorn_trio(with_observer) as url, httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/observer/")).status_code == 200
            assert (await client.get("/observer", follow_redirects=True)).status_code == 200
            assert (await client.get("/observer/api/snapshot")).status_code == 401
            assert (await client.get("/observer/api/snapshot", headers=AUTH)).status_code == 200
        without = condukt.web.create_app(node, token=TOKEN)
        async with hypercorn_trio(without) as url, httpx.AsyncClient(base_url=url) as client:
            assert (await client.get("/observer/", headers=AUTH)).status_code == 404


def test_bad_arguments_are_refused_at_once() -> None:
    with pytest.raises(ValueError, match="interval"):
        observer.create_app(None, interval=0)
    with pytest.raises(ValueError, match="token"):
        observer.create_app(None, token="")
    with pytest.raises(TypeError, match="node"):
        observer.create_app("node")  # type: ignore[arg-type]
    with pytest.raises(TypeError, match="observer"):
        condukt.web.create_app(observer="yes")  # type: ignore[arg-type]


def test_page_url_puts_the_token_in_the_fragment() -> None:
    assert observer.page_url("http://127.0.0.1:8000/", "a b/c") == "http://127.0.0.1:8000/observer/#token=a%20b%2Fc"
    assert observer.page_url("http://h:1", path="/") == "http://h:1/"


async def test_serve_reports_its_address_and_serves_the_node() -> None:
    async with condukt.open_node() as node:
        await node.spawn(condukt.Server, name="watched")
        async with trio.open_nursery() as nursery:
            page = await nursery.start(lambda task_status: observer.serve(node, port=0, task_status=task_status))
            # A token of its own, in the fragment of the address it reports (never sent to the server).
            url, _, fragment = page.partition("#token=")
            assert url.startswith("http://127.0.0.1:") and len(fragment) >= 32
            async with httpx.AsyncClient(base_url=url) as client:
                assert (await client.get("/api/snapshot")).status_code == 401
                snap = (await client.get("/api/snapshot", headers={"Authorization": f"Bearer {fragment}"})).json()
            assert any(p["name"] == "watched" for p in snap["processes"])
            open_page = await nursery.start(
                lambda task_status: observer.serve(node, port=0, token=None, task_status=task_status)
            )
            assert "#" not in open_page
            async with httpx.AsyncClient(base_url=open_page) as client:
                assert (await client.get("/api/snapshot")).status_code == 200
            nursery.cancel_scope.cancel()
        with pytest.raises(TypeError):
            await observer.serve("node")  # type: ignore[arg-type]


async def test_a_function_model_agent_shows_its_tool_calls_in_flight() -> None:
    gate = Gate()
    model = FunctionModel(lambda r: [call("gate", {}), call("gate", {})] if len(r.messages) == 1 else reply("ok"))
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[gate])
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "two at once")
            await gate.entered.wait()
            await trio.testing.wait_all_tasks_blocked()
            view = by_key(observer.snapshot(node))[str(agent.id)].agent
            assert view is not None and view.run is not None
            assert [name for _, name in view.run.tool_calls] == ["gate", "gate"]
            gate.open.set()
        view = by_key(observer.snapshot(node))[str(agent.id)].agent
        assert view is not None and view.run is None and view.state == "idle"


def test_the_observer_of_an_endpoint_on_uvicorn_asyncio() -> None:
    """The same routes on asyncio: a FastAPI app whose lifespan opens the node, the endpoint mounted in it."""
    from fastapi import FastAPI

    import condukt.lifespan

    from .helpers import Echo, uvicorn_server

    app = FastAPI(lifespan=condukt.lifespan.lifespan)
    app.mount("/v1", condukt.web.create_app(agents={"echo": Echo}, token=TOKEN, observer=True))
    with uvicorn_server(app) as url, httpx.Client(base_url=f"{url}/v1", timeout=10) as client:
        session = client.post("/agents/echo/runs", json={"prompt": "hi"}, headers=AUTH).json()["session"]
        snap = client.get("/observer/api/snapshot", headers=AUTH).json()
        (agent,) = [p for p in snap["processes"] if p["kind"] == "agent"]
        assert agent["agent"]["session_id"] == session and agent["agent"]["state"] == "idle"
        events = client.get(f"/observer/api/agents/{session}/events", headers=AUTH).json()["events"]
        assert events == []  # the log starts with the observer's first look; the run was before
        client.post("/agents/echo/runs", json={"prompt": "again", "session": session}, headers=AUTH)
        events = client.get(f"/observer/api/agents/{session}/events", headers=AUTH).json()["events"]
        assert events[0]["type"] == "agent_start" and events[-1] == {"type": "done", "status": "completed",
                                                                        "seq": events[-1]["seq"]}
        aborted = client.post(f"/observer/api/processes/{agent['pid']}/abort", headers=AUTH).json()
        assert aborted == {"pid": agent["pid"], "aborted": False}
        with client.stream("GET", "/observer/api/stream", headers=AUTH) as response:
            first = next(response.iter_lines())
            assert first == "event: snapshot"
