"""Controlling a run: Busy, abort, run timeout, cancelled callers, steer, follow_up, ModelError."""

from __future__ import annotations

import json
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from waiting import WallBound, Watched, open_fifo

import condukt
from condukt.events import Done, Error
from condukt.messages import AssistantMessage, TextBlock, ToolResultMessage, UserMessage
from condukt.testing import ScriptedModel, ScriptExhausted, call, reply

from .helpers import Recorder, Sleep, assert_consistent, of_type


class Gate(condukt.Tool):
    """``gate``: blocks until ``self.open`` is set, then answers ``"passed"``."""

    name = "gate"
    description = "Waits for the test."
    parameters = {"type": "object", "properties": {}}

    def __init__(self) -> None:
        super().__init__()
        self.entered = trio.Event()
        self.open = trio.Event()

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.entered.set()
        await self.open.wait()
        return "passed"


# ---------------------------------------------------------------- queueing and Busy


async def test_concurrent_runs_and_streams_queue_and_run_in_order(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("first", delay=10), reply("second"), reply("third"), reply("fourth")])
    answers: list[tuple[str, str]] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:

            async def ask(prompt: str) -> None:
                answers.append((prompt, await agent.run(prompt)))

            async def watch(prompt: str) -> None:
                async with agent.stream(prompt) as events:
                    async for _ in events:
                        pass
                answers.append((prompt, events.result or ""))

            nursery.start_soon(ask, "one")
            await trio.testing.wait_all_tasks_blocked()
            assert agent.running and agent.state == "running"
            nursery.start_soon(ask, "two")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(watch, "three")
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(agent.clear)  # maintenance waits its turn too
            await trio.testing.wait_all_tasks_blocked()
            nursery.start_soon(ask, "four")
            await trio.testing.wait_all_tasks_blocked()
            assert agent.queued == 4
        assert dict(answers) == {"one": "first", "two": "second", "three": "third", "four": "fourth"}
        # They ran in the order they were submitted (their callers may wake in any order)...
        assert [r.messages[-1].text for r in model.requests] == ["one", "two", "three", "four"]
        # ...and the clear ran after "three" and before "four".
        assert [m.text for m in await agent.history()] == ["four", "fourth"]
        assert agent.state == "idle" and agent.queued == 0


async def test_busy_only_when_the_run_queue_is_full(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("slow", delay=10), reply("a"), reply("b")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, max_queued_runs=2)
        results: list[Any] = []
        async with trio.open_nursery() as nursery:
            for prompt in ("running", "queued 1", "queued 2"):
                nursery.start_soon(lambda p=prompt: _collect(agent.run(p), results))
                await trio.testing.wait_all_tasks_blocked()
            with pytest.raises(condukt.Busy, match="max_queued_runs=2"):
                await agent.run("one too many")
            with pytest.raises(condukt.Busy):
                async with agent.stream("one too many"):
                    pass  # pragma: no cover
        assert sorted(results) == ["a", "b", "slow"]  # the callers wake in any order...
        # ...but the runs ran in the order they were submitted.
        assert [r.messages[-1].text for r in model.requests] == ["running", "queued 1", "queued 2"]


async def _collect(awaitable: Any, into: list[Any]) -> None:
    into.append(await awaitable)


async def test_a_queued_run_whose_caller_gives_up_leaves_no_trace(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("first", delay=10), reply("third")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "first")
            await trio.testing.wait_all_tasks_blocked()
            with trio.move_on_after(1):
                await agent.run("second, abandoned")
            await trio.testing.wait_all_tasks_blocked()
            assert agent.queued == 0
            nursery.start_soon(agent.run, "third")
        assert [m.text for m in await agent.history()] == ["first", "first", "third", "third"]
        assert all("abandoned" not in m.text for r in model.requests for m in r.messages)


async def test_leaving_a_queued_streams_block_early_leaves_the_agent_alive(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("first", delay=10), reply("third")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "first")
            await trio.testing.wait_all_tasks_blocked()
            async with agent.stream("second, left at once"):
                pass  # queued behind "first": leaving aborts it with the reader's end already closed
            await trio.testing.wait_all_tasks_blocked()
            assert agent.alive and agent.queued == 0
        assert await agent.run("third") == "third"
        assert [m.text for m in await agent.history()] == ["first", "first", "third", "third"]


async def test_abort_by_run_id_takes_a_queued_run_out_of_the_queue(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("first", delay=10), reply("third")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "first")
            await trio.testing.wait_all_tasks_blocked()
            async with agent.stream("second") as events:
                assert agent.queued == 1
                assert await agent.abort(events.run_id) is True
                seen = [event async for event in events]
            assert seen == [Error("Aborted", "run aborted before it started"), Done("aborted")]
            assert await agent.abort(events.run_id) is False  # nothing left to abort
            nursery.start_soon(agent.run, "third")
        assert [m.text for m in await agent.history()] == ["first", "first", "third", "third"]


# ---------------------------------------------------------------- abort


@pytest.mark.slow
async def test_abort_kills_a_ten_minute_bash_command_promptly(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    # Real time: a real subprocess. The command leaves a background child too.
    command = 'sleep 600 & echo "$! $$" > pids; wait'
    model = ScriptedModel([call("bash", {"command": command, "timeout": 600}), reply("after the abort")])
    log: list[Any] = []
    errors: list[BaseException] = []
    async with condukt.open_node() as node, open_fifo(tmp_path / "pids") as pidfile:
        agent = await node.spawn(Recorder, model=model, tools=[condukt.tools.Bash], cwd=tmp_path, log=log)

        async def runner() -> None:
            try:
                await agent.run("sleep a long time", timeout=None)
            except condukt.Aborted as exc:
                errors.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(runner)
            pids = await pidfile.receive_line()  # the command and its child run
            with wall_bound(2.0, "abort"):
                assert await agent.abort() is True
        assert len(errors) == 1 and isinstance(errors[0], condukt.Aborted)
        for pid in map(int, pids.split()):
            assert process_gone(pid), f"process {pid} survived the abort"
        assert not agent.running
        history = await agent.history()
        assert history == ()  # the aborted turn and the prompt it left unanswered are gone
        assert log[-1] == Done("aborted")
        assert of_type(log, Error)[0].error_type == "Aborted"
        # The agent is still usable, and the dropped turn is not sent again.
        assert await agent.run("hello again") == "after the abort"
        assert not any(isinstance(m, AssistantMessage) for m in model.requests[1].messages)


async def test_abort_during_the_model_request(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("too late", delay=100)])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:

            async def runner() -> None:
                with pytest.raises(condukt.Aborted):
                    await agent.run("slow model")

            nursery.start_soon(runner)
            await trio.sleep(1)
            start = trio.current_time()
            assert await agent.abort()
            assert trio.current_time() - start < 0.1
        assert await agent.history() == ()


async def test_abort_when_idle_returns_false() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([]))
        assert await agent.abort() is False


async def test_abort_keeps_completed_turns_and_drops_the_one_in_flight(
    autojump_clock: trio.abc.Clock,
) -> None:
    sleep = Sleep()
    model = ScriptedModel(
        [call("sleep", {"seconds": 1, "label": "done"}), call("sleep", {"seconds": -1, "label": "hang"})]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[sleep])
        async with trio.open_nursery() as nursery:

            async def runner() -> None:
                with pytest.raises(condukt.Aborted):
                    await agent.run("go")

            nursery.start_soon(runner)
            await sleep.calls.wait_for_length(2)
            await agent.abort()
        history = await agent.history()
    assert sleep.cancelled == 1
    assert_consistent(history)
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage]
    assert history[-1].text == "slept done"


async def test_abort_drops_queued_follow_ups(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("slow", delay=10), reply("follow-up answer")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:

            async def runner() -> None:
                with pytest.raises(condukt.Aborted):
                    await agent.run("first")

            nursery.start_soon(runner)
            await trio.testing.wait_all_tasks_blocked()
            await agent.follow_up("queued")
            await agent.abort()
        await trio.sleep(20)
        assert not agent.running
        assert await agent.history() == ()
    assert model.remaining == 1


# ---------------------------------------------------------------- run timeout and cancelled callers


async def test_run_timeout_raises_run_timeout_in_virtual_time(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    log: list[Any] = []
    model = ScriptedModel([call("sleep", {"seconds": -1}), reply("late"), reply("next")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[sleep], log=log)
        start = trio.current_time()
        with pytest.raises(condukt.RunTimeout) as info:
            await agent.run("hang", timeout=5)
        assert 5 <= trio.current_time() - start < 5.5
        assert isinstance(info.value, TimeoutError)
        assert sleep.cancelled == 1
        assert log[-1] == Done("timeout")
        assert await agent.history() == ()
        assert agent.alive and not agent.running
        assert await agent.run("again") == "late"


async def test_cancelling_the_caller_aborts_the_run(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    log: Watched[Any] = Watched()
    model = ScriptedModel([call("sleep", {"seconds": -1}), reply("next run")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[sleep], log=log)
        with trio.move_on_after(3) as scope:
            await agent.run("hang")
        assert scope.cancelled_caught
        await log.wait_until(lambda: Done("aborted") in log, timeout=1)
        await trio.testing.wait_all_tasks_blocked()  # the run's task ends after its last event
        assert not agent.running
        assert sleep.cancelled == 1
        assert_consistent(await agent.history())
        assert await agent.run("again") == "next run"


async def test_a_caller_cancelled_before_it_runs_starts_no_run(autojump_clock: trio.abc.Clock) -> None:
    """A run asked from an already cancelled task never starts (no events, no model request, no last result)."""
    log: list[Any] = []
    model = ScriptedModel([reply("never"), reply("next run")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, log=log)
        await trio.testing.wait_all_tasks_blocked()  # idle
        with trio.CancelScope() as scope:
            scope.cancel()
            await agent.run("too late")
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert log == []
        assert await agent.last_result() is None
        assert model.remaining == 2
        assert await agent.run("again") == "never"


# ---------------------------------------------------------------- model errors


async def test_model_error_is_raised_and_the_agent_stays_alive() -> None:
    log: list[Any] = []
    model = ScriptedModel([condukt.ModelError("overloaded"), reply("better now")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, log=log)
        with pytest.raises(condukt.ModelError, match="overloaded"):
            await agent.run("first")
        assert agent.alive
        assert log[-2:] == [Error("ModelError", "overloaded"), Done("failed")]
        assert await agent.run("second") == "better now"
        assert_consistent(await agent.history())


async def test_exhausted_script_is_a_model_error() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("only one")]))
        await agent.run("one")
        with pytest.raises(ScriptExhausted):
            await agent.run("two")
        assert isinstance(ScriptExhausted("x"), condukt.ModelError)
        assert agent.alive


# ---------------------------------------------------------------- steer and follow_up


async def test_steer_during_a_tool_call_reaches_the_next_request() -> None:
    gate = Gate()
    model = ScriptedModel([call("gate", id="g"), reply("steered")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[gate])
        async with trio.open_nursery() as nursery:

            async def runner() -> None:
                assert await agent.run("start") == "steered"

            nursery.start_soon(runner)
            await gate.entered.wait()
            await agent.steer("Also look at B.")
            gate.open.set()
    *_, result, steer = model.requests[1].messages
    assert isinstance(result, ToolResultMessage) and result.tool_call_id == "g"
    assert steer == UserMessage((TextBlock("Also look at B."),))


async def test_steer_while_the_model_is_finishing_takes_one_more_turn(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([reply("first answer", delay=5), reply("answer to the steer")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with trio.open_nursery() as nursery:

            async def runner() -> None:
                assert await agent.run("question") == "answer to the steer"

            nursery.start_soon(runner)
            await trio.sleep(1)
            await agent.steer("one more thing")
        history = await agent.history()
    assert [m.text for m in model.requests[1].messages] == ["question", "first answer", "one more thing"]
    assert [m.text for m in history] == ["question", "first answer", "one more thing", "answer to the steer"]


async def test_steer_when_idle_is_not_running() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([]))
        with pytest.raises(condukt.NotRunning):
            await agent.steer("anyone?")


async def test_follow_up_runs_after_the_current_run(autojump_clock: trio.abc.Clock) -> None:
    log: Watched[Any] = Watched()
    model = ScriptedModel([reply("first answer", delay=5), reply("second answer")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, log=log)
        async with trio.open_nursery() as nursery:

            async def runner() -> None:
                assert await agent.run("first") == "first answer"

            nursery.start_soon(runner)
            await trio.sleep(1)
            await agent.follow_up("then this")
            assert len(model.requests) == 1  # queued, not interleaved
        await log.wait_until(lambda: of_type(log, Done) == [Done("completed")] * 2)
        history = await agent.history()
    assert [m.text for m in history] == ["first", "first answer", "then this", "second answer"]
    assert [m.text for m in model.requests[1].messages] == ["first", "first answer", "then this"]


async def test_follow_up_when_idle_runs_at_once(autojump_clock: trio.abc.Clock) -> None:
    log: Watched[Any] = Watched()
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=ScriptedModel([reply("sure")]), log=log)
        await agent.follow_up("do it")
        await log.wait_until(lambda: bool(of_type(log, Done)))
        assert [m.text for m in await agent.history()] == ["do it", "sure"]


# ---------------------------------------------------------------- context.agent


class Introspect(condukt.Tool):
    """Calls back into its own agent through ``context.agent``."""

    name = "introspect"
    description = "Looks at its own agent."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        agent = context.agent
        with trio.fail_after(5):
            history = await agent.history()
            await agent.steer("note from the tool")
            try:
                await agent.run("nested")
                nested = "ran"
            except condukt.CallingSelf:
                nested = "refused"
        return {
            "first": history[0].role,
            "session": agent.session_id == context.session_id,
            "running": agent.running,
            "nested": nested,
        }


async def test_tool_can_call_back_into_its_own_agent(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([call("introspect"), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Introspect()])
        with trio.fail_after(10):
            assert await agent.run("look at yourself") == "done"
    *_, result, steer = model.requests[1].messages
    assert isinstance(result, ToolResultMessage) and not result.is_error, result.text

    assert json.loads(result.text) == {
        "first": "user",
        "session": True,
        "running": True,
        "nested": "refused",  # it would wait for the very run that waits for it
    }
    assert steer.text == "note from the tool"
