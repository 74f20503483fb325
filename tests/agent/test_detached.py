"""Detached runs: ``submit``, ``attach``, ``result``, ``run_info``; the event log, its bound, its store copy."""

from __future__ import annotations

from typing import Any

import pytest
import trio
from waiting import Watched

import condukt
from condukt.agent import DETACHED_EVENTS, RUNS_KEY_SUFFIX, EventsEvicted, RunFailed, UnknownRun
from condukt.events import AgentEnd, AgentStart, Done, Error, Event, TextDelta, ToolCallStart
from condukt.messages import ToolResultMessage
from condukt.providers import ModelError
from condukt.sessions import LeasingStore, MemoryStore, RunLog, StoreUnavailable
from condukt.testing import FunctionModel, ScriptedModel, call, reply


def gated_agent(
    gate: trio.Event, reached: trio.Event | None = None, incarnations: Watched[condukt.AgentHandle] | None = None
) -> type[condukt.Agent]:
    @condukt.tool
    async def wait_for_gate() -> str:
        """Waits for the test."""
        if reached is not None:
            reached.set()
        await gate.wait()
        return "open"

    def answer(request: condukt.ModelRequest) -> Any:
        last = request.messages[-1]
        if type(last) is ToolResultMessage:
            return reply("gate was " + last.text)
        return [reply("waiting"), call("wait_for_gate", {})]

    class Gated(condukt.Agent):
        model = FunctionModel(answer)

        async def init(self, options: Any) -> None:
            if incarnations is not None:
                incarnations.append(self.handle)

        def tools(self) -> list[Any]:
            return [wait_for_gate]

    return Gated


async def stored_log(store: LeasingStore, key: str, run_id: str) -> RunLog | None:
    """A run's stored log: under the session key when persistence holds its lease, else under ``key#runs``."""
    return await store.read_run(key, run_id) or await store.read_run(key + RUNS_KEY_SUFFIX, run_id)


async def read_all(agent: condukt.AgentHandle, run_id: str, after: int = -1) -> list[tuple[int, Event]]:
    found = []
    async with agent.attach(run_id, after=after) as events:
        async for event in events:
            found.append((events.index, event))
    return found


async def test_submit_returns_an_id_and_attach_replays_then_follows_live(autojump_clock: Any) -> None:
    gate, reached = trio.Event(), trio.Event()
    async with condukt.open_node() as node:
        agent = await node.spawn(gated_agent(gate, reached))
        run_id = await agent.submit("go")
        assert isinstance(run_id, str) and "/" not in run_id
        await reached.wait()
        assert (await agent.run_info(run_id)).status == "running"
        readers: list[list[tuple[int, Event]]] = []
        async with trio.open_nursery() as nursery:

            async def reader() -> None:
                readers.append(await read_all(agent, run_id))

            for _ in range(3):  # any number of attachers
                nursery.start_soon(reader)
            await trio.sleep(1)
            gate.set()
        assert readers[0] == readers[1] == readers[2]
        events = readers[0]
        assert [index for index, _ in events] == list(range(len(events)))
        assert type(events[0][1]) is AgentStart and events[0][1].run_id == run_id
        assert events[-1][1] == Done("completed")
        assert await agent.result(run_id) == "gate was open"
        info = await agent.run_info(run_id)
        assert (info.status, info.text, info.next_index) == ("done", "gate was open", len(events))


async def test_leaving_attach_early_never_aborts_the_run(autojump_clock: Any) -> None:
    gate = trio.Event()
    async with condukt.open_node() as node:
        agent = await node.spawn(gated_agent(gate))
        run_id = await agent.submit("go")
        async with agent.attach(run_id) as events:
            async for event in events:
                if type(event) is ToolCallStart:
                    break  # the reader leaves mid-run
        with trio.move_on_after(5):  # a reader cancelled while it waits: nothing happens to the run either
            await agent.result(run_id)
        gate.set()
        assert await agent.result(run_id) == "gate was open"
        # Reconnecting after the last index seen gives the rest, each event once.
        tail = await read_all(agent, run_id, after=events.index)
        assert tail[0][0] == events.index + 1 and tail[-1][1] == Done("completed")


async def test_unknown_run_ids_raise_unknown_run(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("hi")]))
        with pytest.raises(UnknownRun) as raised:
            await agent.result("no-such-run")
        assert raised.value.run_id == "no-such-run"
        with pytest.raises(UnknownRun):
            await agent.run_info("no-such-run")
        with pytest.raises(UnknownRun):
            async with agent.attach("no-such-run"):
                pass
        # A plain run's id is not a detached run's.
        async with agent.stream("hi") as stream:
            async for _ in stream:
                pass
        with pytest.raises(UnknownRun):
            await agent.result(stream.run_id)
        with pytest.raises(ValueError):
            agent.attach("x", after=-2)
        with pytest.raises(TypeError):
            agent.attach("x", after="3")  # type: ignore[arg-type]


async def test_past_the_log_bound_older_events_are_evicted_with_a_typed_error(autojump_clock: Any) -> None:
    words = DETACHED_EVENTS + 500
    text = " ".join(f"w{i}" for i in range(words))
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply(text)]))
        run_id = await agent.submit("talk a lot")
        assert await agent.result(run_id) == text
        info = await agent.run_info(run_id)
        assert info.next_index - info.first_index == DETACHED_EVENTS
        assert info.first_index > 0
        with pytest.raises(EventsEvicted) as raised:
            async with agent.attach(run_id):
                pass
        assert raised.value.first_index == info.first_index
        kept = await read_all(agent, run_id, after=info.first_index - 1)
        assert len(kept) == DETACHED_EVENTS and kept[-1][1] == Done("completed")
        assert all(type(event) is TextDelta for _, event in kept[:-4])


async def test_result_raises_the_runs_own_error_and_abort_works_on_queued_runs(autojump_clock: Any) -> None:
    gate = trio.Event()
    async with condukt.open_node() as node:
        agent = await node.spawn(gated_agent(gate))
        first = await agent.submit("go")
        queued = await agent.submit("go again")
        assert (await agent.run_info(queued)).status == "queued"
        assert await agent.abort(queued) is True
        with pytest.raises(condukt.Aborted):
            await agent.result(queued)
        events = [event for _, event in await read_all(agent, queued)]
        assert events == [Error("Aborted", "run aborted before it started"), Done("aborted")]
        assert await agent.abort(first) is True
        with pytest.raises(condukt.Aborted):
            await agent.result(first)
        assert (await agent.run_info(first)).status == "aborted"

        failing = await node.spawn(condukt.Agent, model=ScriptedModel([ModelError("model down")]))
        run_id = await failing.submit("hi")
        with pytest.raises(ModelError, match="model down"):
            await failing.result(run_id)
        info = await failing.run_info(run_id)
        assert (info.status, info.error_type) == ("failed", "ModelError")
        with pytest.raises(condukt.CallTimeout):
            await agent.result(await agent.submit("slow"), timeout=1)


async def test_with_a_store_the_log_and_result_outlive_the_incarnation(autojump_clock: Any) -> None:
    store = MemoryStore()
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("stored answer"), ModelError("no")]),
                                 session_store=store, id="key")
        run_id = await agent.submit("hi")
        failed_id = await agent.submit("fail")
        assert await agent.result(run_id) == "stored answer"
        with pytest.raises(ModelError):
            await agent.result(failed_id)
        live = await read_all(agent, run_id)
        log = await stored_log(store, "key", run_id)
        assert log is not None and log.status == "done"
        assert list(log.events) == live  # what readers saw is what the store holds
        await agent.stop()
        # Another incarnation on the key (another process would do the same): read back from the store.
        again = await node.spawn(condukt.Agent, model=ScriptedModel([]), session_store=store, id="key")
        assert await again.result(run_id) == "stored answer"
        assert await read_all(again, run_id) == live
        with pytest.raises(RunFailed) as raised:
            await again.result(failed_id)
        assert raised.value.error_type == "ModelError"
        with pytest.raises(UnknownRun):
            await again.result("never-submitted")


async def test_a_stored_run_no_incarnation_finishes_is_closed_as_interrupted(autojump_clock: Any) -> None:
    store = MemoryStore()
    lease = await store.acquire("key")  # a node that died mid-run left this log (under the session key: ctx.lease)
    await lease.log_events("r1", [AgentStart("s", "hi", "r1")])
    await lease.release()
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([]), session_store=store, id="key")
        events = [event for _, event in await read_all(agent, "r1")]
        assert events[0] == AgentStart("s", "hi", "r1")
        assert type(events[1]) is Error and events[1].error_type == "Interrupted"
        assert events[2] == Done("aborted")
        with pytest.raises(condukt.Aborted):
            await agent.result("r1")
        log = await stored_log(store, "key", "r1")
        assert log is not None and log.status == "aborted" and log.next_index == 3


async def test_an_agent_end_in_a_detached_structured_run_returns_the_structured_result(autojump_clock: Any) -> None:
    model = ScriptedModel([call("submit_result", {"label": "bug"})])
    schema = {"type": "object", "properties": {"label": {"type": "string"}}, "required": ["label"]}
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        run_id = await agent.submit("triage", output=schema)
        assert await agent.result(run_id) == {"label": "bug"}
        events = [event for _, event in await read_all(agent, run_id)]
        assert any(type(event) is AgentEnd for event in events)


async def test_a_killed_incarnation_s_detached_run_is_finished_by_its_restarted_successor(autojump_clock: Any) -> None:
    store, gate, reached = MemoryStore(), trio.Event(), trio.Event()
    incarnations: Watched[condukt.AgentHandle] = Watched()
    spec = condukt.ChildSpec("ops", gated_agent(gate, reached, incarnations),
                             kwargs={"session_store": store, "id": "ops", "resume": True}, name="ops")
    async with condukt.open_node() as node:
        await node.start_supervisor([spec])
        first = node.whereis("ops", condukt.AgentHandle)
        assert first is not None
        run_id = await first.submit("go")
        await reached.wait()
        before = await read_all_until_tool(first, run_id)
        first.kill()  # no terminate: its leases are not released
        _, second = await incarnations.wait_for_length(2)
        gate.set()
        events = await read_all(second, run_id)
        assert [index for index, _ in events] == list(range(len(events)))
        assert events[: len(before)] == before
        assert events[-1][1] == Done("completed")
        assert (await second.result(run_id)).startswith("gate was Error: this call was interrupted")


async def read_all_until_tool(agent: condukt.AgentHandle, run_id: str) -> list[tuple[int, Event]]:
    found = []
    async with agent.attach(run_id) as events:
        async for event in events:
            found.append((events.index, event))
            if type(event) is ToolCallStart:
                return found
    return found


async def test_a_store_that_cannot_be_read_fails_the_attach_not_the_agent(autojump_clock: Any) -> None:
    class Down(MemoryStore):
        async def read_run(self, key: str, run_id: str, *, after: int = -1) -> RunLog | None:
            raise StoreUnavailable("the database is down")

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("still here")]), session_store=Down())
        with pytest.raises(StoreUnavailable):
            await agent.result("some-run")
        assert agent.alive
        assert await agent.run("hi") == "still here"
