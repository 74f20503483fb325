"""The lifecycle cannot wedge: Done means settled, abort is safe from anywhere, nothing waits on itself."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt import events
from condukt.sessions import DiskStore, SQLiteStore
from condukt.testing import FunctionModel, ScriptedModel, call, reply

from .helpers import Add, assert_consistent

EVENT_TYPES = [
    events.AgentStart,
    events.TurnStart,
    events.TextDelta,
    events.ThinkingDelta,
    events.ToolCallStart,
    events.ToolCallEnd,
    events.TurnEnd,
    events.AgentEnd,
    events.Done,
]


@pytest.mark.parametrize("store_kind", ["disk", "sqlite"])
async def test_run_right_after_a_stream_is_never_busy_with_a_store(tmp_path: Path, store_kind: str) -> None:
    store: Any = DiskStore() if store_kind == "disk" else SQLiteStore()
    model = ScriptedModel([reply(f"streamed {i}") if i % 2 == 0 else reply(f"ran {i}") for i in range(40)])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, cwd=tmp_path, session_store=store, id="s")
        for i in range(0, 40, 2):
            async with agent.stream(f"stream {i}") as stream:
                async for _ in stream:
                    pass
            assert stream.result == f"streamed {i}"
            # Done was delivered after the save: the run is not still "running".
            assert await agent.run(f"run {i + 1}") == f"ran {i + 1}"
        history = await agent.history()
    assert len(history) == 80
    assert_consistent(history)
    # The store holds every turn: a new incarnation resumes with all of it.
    async with condukt.open_node() as node:
        again = await node.spawn(condukt.Agent, model=ScriptedModel([]), cwd=tmp_path, session_store=store, id="s")
        assert await again.history() == history


@pytest.mark.parametrize("event_type", EVENT_TYPES, ids=lambda t: t.__name__)
async def test_abort_from_on_event_never_wedges_the_agent(event_type: type, autojump_clock: trio.abc.Clock) -> None:
    def respond(request: condukt.ModelRequest) -> Any:
        last = request.messages[-1]
        if last.text == "again":
            return reply("next run works")
        if last.role == "user":
            return [reply("Let me add.", thinking="Use the tool."), call("add", {"a": 1, "b": 2})]
        return reply("The sum is 3.")

    model = FunctionModel(respond)
    answers: list[Any] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Add])

        async def on_event(event: Any) -> None:
            if type(event) is event_type:
                answers.append(await agent.abort())

        outcome: Any
        try:
            outcome = await agent.run("Add 1 and 2", on_event=on_event)
        except condukt.Aborted as exc:
            outcome = exc
        with trio.fail_after(5):
            assert await agent.run("again") == "next run works"
        assert agent.state == "idle"
        assert_consistent(await agent.history())
    if event_type in (events.AgentEnd, events.Done):
        # The run was already delivering its result: too late to abort.
        assert outcome == "The sum is 3." and answers == [False]
    else:
        assert isinstance(outcome, condukt.Aborted)
        # The callback that asked gets its answer; the run stops right after it.
        assert answers == [True]


async def test_abort_from_handle_event_on_done_does_not_wedge() -> None:
    class Impatient(condukt.Agent):
        async def handle_event(self, event: Any) -> None:
            if isinstance(event, events.Done):
                assert await self.handle.abort() is False

    async with condukt.open_node() as node:
        agent = await node.spawn(Impatient, model=ScriptedModel([reply("one"), reply("two")]))
        assert await agent.run("1") == "one"
        assert await agent.run("2") == "two"


async def test_a_tool_cannot_wait_on_its_own_agent(autojump_clock: trio.abc.Clock) -> None:
    seen: dict[str, str] = {}

    class Reentrant(condukt.Tool):
        name = "reentrant"
        description = "Calls its own agent back."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            agent = context.agent
            for name, attempt in [("run", agent.run("inner")), ("clear", agent.clear()), ("compact", agent.compact())]:
                try:
                    await attempt
                except condukt.CallingSelf as exc:
                    seen[name] = str(exc)
            async with trio.open_nursery():  # also from a task the tool starts
                pass
            return "done"

    model = ScriptedModel([call("reentrant"), reply("finished")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Reentrant])
        with trio.fail_after(10):
            assert await agent.run("go") == "finished"
    assert set(seen) == {"run", "clear", "compact"}
    assert "deadlock" in seen["run"] and "follow_up" in seen["run"]


async def test_a_tool_may_abort_its_own_run(autojump_clock: trio.abc.Clock) -> None:
    class Quit(condukt.Tool):
        name = "quit"
        description = "Stops the run it is part of."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            await context.agent.abort()
            await trio.sleep(100)  # the cancellation arrives here
            return "never"

    model = ScriptedModel([call("quit"), reply("after")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Quit])
        with pytest.raises(condukt.Aborted):
            await agent.run("go")
        assert await agent.run("again") == "after"


async def test_a_stream_queued_behind_a_run_ends_when_the_agent_is_killed() -> None:
    model = ScriptedModel([reply("slow", delay=100)])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(_swallow, agent.run("first"))
            await trio.testing.wait_all_tasks_blocked()
            async with agent.stream("queued") as stream:
                agent.kill()
                with trio.fail_after(5), pytest.raises(condukt.CallError):
                    async for _ in stream:
                        pass


async def _swallow(awaitable: Any) -> None:
    try:
        await awaitable
    except condukt.ConduktError:
        pass


async def test_steers_never_make_two_user_messages_in_a_row(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("first", delay=1), reply("second"), reply("third")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "prompt")
            await trio.testing.wait_all_tasks_blocked()
            await agent.steer("first steer")
            await agent.steer("second steer")

        async def steer_at_start(event: Any) -> None:
            if isinstance(event, events.AgentStart):
                await agent.steer("steered before the first request")

        assert await agent.run("another prompt", on_event=steer_at_start) == "third"
        history = await agent.history()
    assert_consistent(history)
    # Two steers during a request: one user message, one more turn.
    assert [b.text for b in history[2].content] == ["first steer", "second steer"]
    assert history[3].text == "second"
    # A steer before the first request joins the prompt.
    assert [b.text for b in history[4].content] == ["another prompt", "steered before the first request"]
    assert history[5].text == "third"


_CALLER_VAR = __import__("contextvars").ContextVar("caller_var", default="unset")


async def test_a_run_started_at_once_runs_in_the_agents_context_not_the_callers() -> None:
    """Runs on an idle agent start in the caller's task (no mailbox round), but tools never see its context."""
    seen: list[str] = []

    @condukt.tool
    async def peek() -> str:
        """Read the context variable."""
        seen.append(_CALLER_VAR.get())
        return "ok"

    async with condukt.open_node() as node:
        model = ScriptedModel([call("peek"), reply("one"), call("peek"), reply("two")])
        agent = await node.spawn(condukt.Agent, model=model, tools=[peek])
        await trio.testing.wait_all_tasks_blocked()  # idle: the next run starts at once
        _CALLER_VAR.set("the caller's")
        assert await agent.run("1") == "one"
        assert await agent.run("2") == "two"
    assert seen == ["unset", "unset"]


async def test_an_agent_class_that_overrides_handle_call_still_sees_every_run() -> None:
    class Counting(condukt.Agent):
        runs = 0

        async def handle_call(self, request: Any, caller: Any) -> Any:
            if type(request).__name__ == "RunRequest":
                Counting.runs += 1
            return await super().handle_call(request, caller)

    async with condukt.open_node() as node:
        agent = await node.spawn(Counting, model=ScriptedModel([reply("a"), reply("b")]))
        await trio.testing.wait_all_tasks_blocked()
        assert [await agent.run("1"), await agent.run("2")] == ["a", "b"]
    assert Counting.runs == 2
