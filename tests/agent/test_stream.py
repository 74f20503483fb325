"""stream(): events in order, Done last, the result; leaving early aborts; handle_event sees all."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt.events import (
    AgentEnd,
    AgentStart,
    Done,
    Error,
    TextDelta,
    ThinkingDelta,
    ToolCallEnd,
    ToolCallStart,
    TurnEnd,
    TurnStart,
)
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add, Recorder, Sleep, assert_consistent


async def test_stream_yields_every_event_in_order_and_done_last() -> None:
    log: list[Any] = []
    model = ScriptedModel(
        [
            [reply("Let me add.", thinking="Use the tool."), call("add", {"a": 1, "b": 2}, id="c1")],
            reply("The sum is 3."),
        ]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[Add()], log=log)
        session_id = agent.session_id
        async with agent.stream("Add 1 and 2") as events:
            seen = [event async for event in events]
        assert events.result == "The sum is 3."
        assert events.error is None and events.done == Done("completed")
    kinds = [type(e) for e in seen]
    # Collapse consecutive deltas: their number depends on how text is chunked.
    collapsed = [k for i, k in enumerate(kinds) if i == 0 or k is not kinds[i - 1]]
    assert collapsed == [
        AgentStart,
        TurnStart,
        ThinkingDelta,
        TextDelta,
        ToolCallStart,
        ToolCallEnd,
        TurnEnd,
        TurnStart,
        TextDelta,
        TurnEnd,
        AgentEnd,
        Done,
    ]
    assert seen[0] == AgentStart(session_id, "Add 1 and 2", events.run_id)
    assert events.run_id == f"{session_id}/1"
    assert "".join(e.text for e in seen if type(e) is ThinkingDelta) == "Use the tool."
    deltas = [e.text for e in seen if type(e) is TextDelta]
    assert "".join(deltas) == "Let me add.The sum is 3."
    assert [e.turn for e in seen if type(e) in (TurnStart, TurnEnd)] == [1, 1, 2, 2]
    start = next(e for e in seen if type(e) is ToolCallStart)
    end = next(e for e in seen if type(e) is ToolCallEnd)
    assert (start.id, start.name, start.arguments) == ("c1", "add", {"a": 1, "b": 2})
    assert (end.id, end.result, end.is_error) == ("c1", "3", False)
    assert end.duration >= 0
    assert seen[-2] == AgentEnd("The sum is 3.", seen[-2].usage, 2)
    assert seen[-1] == Done("completed")
    # handle_event saw exactly the same events.
    assert log == seen


async def test_stream_reports_a_failure_as_error_then_done() -> None:
    model = ScriptedModel([condukt.ModelError("bad gateway")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with agent.stream("hi") as events:
            seen = [event async for event in events]
        assert agent.alive
    assert seen[-2:] == [Error("ModelError", "bad gateway"), Done("failed")]
    assert events.error == Error("ModelError", "bad gateway")
    assert events.result is None


async def test_leaving_the_stream_early_aborts_the_run(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    model = ScriptedModel([call("sleep", {"seconds": 100}), reply("unused"), reply("next")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[sleep])
        async with agent.stream("nap") as events:
            async for event in events:
                if type(event) is ToolCallStart:
                    break
        assert not agent.running
        assert sleep.calls and sleep.cancelled == 1 and not sleep.finished
        assert_consistent(await agent.history())
        assert await agent.run("again") == "unused"


async def test_an_exception_in_the_stream_block_aborts_the_run(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("slow", delay=100)])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        with pytest.raises(KeyError):
            async with agent.stream("hi") as events:
                async for _ in events:
                    raise KeyError("reader failed")
        assert not agent.running
        assert trio.current_time() < 50


async def test_stream_run_timeout_ends_with_done_timeout(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("slow", delay=100)])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with agent.stream("hi", timeout=2) as events:
            seen = [event async for event in events]
    assert seen[-1] == Done("timeout")
    assert events.error is not None and events.error.error_type == "RunTimeout"


async def test_handle_event_sees_events_of_run_and_stream_alike() -> None:
    log: list[Any] = []
    model = ScriptedModel([reply("one"), reply("two")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, log=log)
        await agent.run("a")
        first = len(log)
        async with agent.stream("b") as events:
            streamed = [e async for e in events]
    assert log[first:] == streamed
    assert [type(e) for e in log[:first]] == [type(e) for e in streamed]
    assert [e for e in log if type(e) is Done] == [Done("completed"), Done("completed")]
