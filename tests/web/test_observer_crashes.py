"""The observer's crash reports, restart timelines, process panel, kill and restart, and charts (routes)."""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable
from typing import Any

import httpx
import pytest
import trio

import condukt
import condukt.web.observer as observer
from condukt.messages import Usage
from condukt.testing import ScriptedModel, call, reply

from .helpers import AUTH, TOKEN, hypercorn_trio
from .observed import Blocked, CrashOnTool, Linker
from .test_observer import sse_events


async def until(events: AsyncIterator[tuple[str, Any]], found: Callable[[str, Any], Any]) -> Any:
    """Read the stream until ``found(name, data)`` is true for an event; returns what it returned."""
    with trio.fail_after(30):
        async for name, data in events:
            result = found(name, data)
            if result:
                return result
    raise AssertionError("the stream ended")


def crash_of(child_id: str, pid: int) -> Callable[[str, Any], Any]:
    def found(name: str, data: Any) -> Any:
        changed = data.get("changed", data.get("processes", [])) if name in ("snapshot", "diff") else []
        for p in changed:
            if p["child_id"] == child_id and p["exits"] and p["exits"][-1]["pid"] == pid:
                return p
        return None
    return found


async def test_a_crashed_agent_shows_its_reason_traceback_and_its_old_log_ending_in_the_error() -> None:
    model = ScriptedModel([call("noop", {}, id="c1"), reply("never")])

    @condukt.tool
    async def noop() -> str:
        """Does nothing."""
        return "ok"

    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("worker", CrashOnTool, kwargs={"model": model, "tools": [noop]})],
            name="app", max_restarts=5, max_seconds=30.0)
        worker = dict(sup.which_children())["worker"]
        assert worker is not None
        session = worker.session_id  # type: ignore[attr-defined]
        app = observer.create_app(node, token=TOKEN, interval=0.05)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10, headers=AUTH) as client:
            async with client.stream("GET", "/api/stream") as response:
                events = sse_events(response)
                await until(events, lambda name, data: name == "snapshot")  # the observer saw the agent alive
                with pytest.raises(condukt.CallError):
                    await worker.run("review PR 7")  # type: ignore[attr-defined]
                row = await until(events, crash_of("worker", worker.id))
            crash = row["exits"][-1]
            assert row["restarts"] == 1 and row["pid"] != worker.id
            assert crash["reason"] == "RuntimeError: crash on purpose" and crash["error_type"] == "RuntimeError"
            assert "crash on purpose" in crash["traceback"] and "handle_event" in crash["traceback"]
            assert crash["restarted"] is True and crash["session"] == session and crash["child_id"] == "worker"
            # The crashed incarnation's log ends the way a failed run's does: in its error.
            log = (await client.get(f"/api/agents/{session}/events")).json()["events"]
            assert [e["type"] for e in log] == ["agent_start", "turn_start", "tool_call_start", "error", "done"]
            assert log[-2]["error_type"] == "RuntimeError" and "crash on purpose" in log[-2]["message"]
            assert log[-1]["status"] == "failed" and log[-1]["crash"] is True
            # The supervisor's restart timeline and policy.
            details = (await client.get(f"/api/processes/{sup.id}")).json()
            policy = details["supervisor"]
            assert (policy["strategy"], policy["max_restarts"], policy["max_seconds"], policy["intensity"]) == (
                "one_for_one", 5, 30.0, "supervisor")
            assert [(e["child_id"], e["pid"], e["session"]) for e in policy["timeline"]] == [
                ("worker", worker.id, session)]
            snap = (await client.get("/api/snapshot")).json()
            app_row = next(p for p in snap["processes"] if p["pid"] == sup.id)
            assert app_row["supervisor"] == {"strategy": "one_for_one", "max_restarts": 5, "max_seconds": 30.0,
                                             "intensity": "supervisor"}


async def test_the_process_panel_shows_links_monitors_mailbox_and_memory() -> None:
    hold = trio.Event()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("blocked", Blocked), condukt.ChildSpec("linker", Linker)], name="app")
        children = dict(sup.which_children())
        blocked, linker = children["blocked"], children["linker"]
        assert blocked is not None and linker is not None
        await linker.cast(("link", blocked))
        await linker.cast(("monitor", blocked))
        assert await linker.call("sync") == "done"
        await blocked.cast(hold)
        await blocked.cast("queued")
        await blocked.cast(7)
        app = observer.create_app(node, token=TOKEN, interval=0.05)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert (await client.get(f"/api/processes/{blocked.id}")).status_code == 401
            details = (await client.get(f"/api/processes/{blocked.id}", headers=AUTH)).json()
            assert details["links"] == [linker.id] and details["monitored_by"] == [linker.id]
            assert details["mailbox"] == {"length": 2, "messages": [{"kind": "cast", "type": "str"},
                                                                     {"kind": "cast", "type": "int"}]}
            assert details["memory"]["bytes"] > 0 and details["memory"]["complete"] is True
            assert details["supervisor"] is None
            missing = await client.get("/api/processes/99999", headers=AUTH)
            assert missing.status_code == 404 and missing.json()["error"] == "ProcessNotFound"
        hold.set()


async def test_kill_and_restart_a_process_behind_the_token() -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([condukt.ChildSpec("w", condukt.Server)], name="app", max_restarts=10)
        dyn = await node.start_dynamic_supervisor(name="sessions")
        loose = await dyn.start_child(condukt.ChildSpec(None, condukt.Server))
        first = dict(sup.which_children())["w"]
        assert first is not None
        app = observer.create_app(node, token=TOKEN, interval=0.05)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            assert (await client.post(f"/api/processes/{first.id}/kill")).status_code == 401
            assert first.alive
            async with node.monitor(first) as watch:
                killed = await client.post(f"/api/processes/{first.id}/kill", headers=AUTH)
                assert killed.json() == {"pid": first.id, "killed": True}
                assert (await watch.wait()).reason == "killed"
            infos = sup.child_info()
            assert infos[0].restarts == 1 and infos[0].exits[-1].reason == "killed"
            second = dict(sup.which_children())["w"]
            assert second is not None and second.alive and second.id != first.id

            assert (await client.post(f"/api/processes/{second.id}/restart")).status_code == 401
            restarted = await client.post(f"/api/processes/{second.id}/restart", headers=AUTH)
            third = dict(sup.which_children())["w"]
            assert third is not None and restarted.json() == {"pid": second.id, "restarted": third.id}
            assert not second.alive and sup.child_info()[0].restarts == 1  # a manual restart is not counted

            refused = await client.post(f"/api/processes/{loose.id}/restart", headers=AUTH)
            assert refused.status_code == 409 and refused.json()["error"] == "NotRestartable"
            root = await client.post(f"/api/processes/{node.root.id}/kill", headers=AUTH)
            assert root.status_code == 409 and node.root.alive
            gone = await client.post("/api/processes/99999/kill", headers=AUTH)
            assert gone.status_code == 404


async def test_the_charts_get_run_rates_tokens_cost_latency_mailbox_memory_and_restarts() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel(
            [reply("one", usage=Usage(100, 20, cost=0.25)), reply("two", usage=Usage(50, 10, cost=0.5))]))
        app = observer.create_app(node, token=TOKEN, interval=0.05)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10, headers=AUTH) as client:
            async with client.stream("GET", "/api/stream") as response:
                events = sse_events(response)
                await until(events, lambda name, data: name == "metrics")
                await agent.run("first")
                await agent.run("second")
                sample = await until(events, lambda name, data: name == "metrics" and next(
                    (s for s in data["samples"] if s["latency_p50"] is not None), None))
            assert set(sample) == {"time", "processes", "runs_per_s", "tokens_per_s", "cost", "latency_p50",
                                   "latency_p99", "mailbox", "memory", "restarts"}
            assert sample["cost"] == 0.75 and sample["runs_per_s"] > 0
            assert 0 <= sample["latency_p50"] <= sample["latency_p99"]
            assert sample["memory"] > 1 << 20 and sample["processes"] >= 2
            history = (await client.get("/api/metrics")).json()["samples"]
            assert history and history[-1]["time"] >= sample["time"]
            # A turn's tokens may land one sample before its run's end: look at every sample.
            assert any(s["tokens_per_s"] > 0 for s in history)


async def test_the_chart_library_is_served_from_the_package_with_its_licence() -> None:
    async with condukt.open_node() as node:
        app = observer.create_app(node, token=TOKEN)
        async with hypercorn_trio(app) as url, httpx.AsyncClient(base_url=url, timeout=10) as client:
            script = await client.get("/static/uPlot.iife.min.js")  # public: no token
            assert script.status_code == 200 and script.headers["content-type"].startswith("text/javascript")
            assert b"uPlot" in script.content
            licence = await client.get("/static/uPlot.LICENSE.txt")
            assert b"MIT" in licence.content
            assert (await client.get("/static/observer.py")).status_code == 404
            page = await client.get("/")
            assert 'src="static/uPlot.iife.min.js"' in page.text
