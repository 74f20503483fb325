"""Runs an idle agent starts in its caller's task (``Caller.host``): the same behaviour as a run in a worker task.

A run asked of an idle agent by a task that waits for it runs in that task
(no worker task per run). Each test first lets the agent go idle, so the
run takes that path, and checks what a user relies on either way.
"""

from __future__ import annotations

import contextvars
import math
from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt.events import AgentEnd, Done
from condukt.messages import AssistantMessage, TextBlock, Usage
from condukt.sessions import MemoryStore
from condukt.testing import ScriptedModel, call, reply

from .helpers import Recorder, Sleep, assert_consistent

_WHO: contextvars.ContextVar[str] = contextvars.ContextVar("who", default="nobody")


class HostedSleep(Sleep):
    """``sleep`` that records the task it runs in (a lone call runs in the run's own task)."""

    def __init__(self) -> None:
        super().__init__()
        self.tasks: list[trio.lowlevel.Task] = []

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        self.tasks.append(trio.lowlevel.current_task())
        return await super().call(args, context)


async def warmed(node: condukt.Node, cls: type[condukt.Agent] = condukt.Agent, **options: Any) -> condukt.AgentHandle:
    """An agent that has answered "warm up" and is idle: the next run is hosted by its caller."""
    agent = await node.spawn(cls, **options)
    assert await agent.run("warm up") == "warm"
    await trio.testing.wait_all_tasks_blocked()
    return agent


async def aborted(agent: condukt.AgentHandle) -> bool:
    """Whether the agent's last run ended aborted, once the agent has settled it."""
    await trio.testing.wait_all_tasks_blocked()
    last = await agent.last_result()
    return last is not None and last.status == "aborted"


async def test_cancelling_the_caller_aborts_the_run_it_hosts(autojump_clock: trio.abc.Clock) -> None:
    sleep = HostedSleep()
    model = ScriptedModel([reply("warm"), call("sleep", {"seconds": -1}), reply("next run")])
    async with condukt.open_node() as node:
        agent = await warmed(node, model=model, tools=[sleep])
        history = await agent.history()
        with trio.move_on_after(3) as scope:
            await agent.run("hang")
        assert scope.cancelled_caught
        assert sleep.cancelled == 1  # the tool was cancelled with it
        assert sleep.tasks == [trio.lowlevel.current_task()]  # the run ran in this task
        await trio.testing.wait_all_tasks_blocked()  # the agent settles the run once its caller has left
        assert await aborted(agent)  # settled although its caller had left
        assert not agent.running
        assert await agent.history() == history  # no trace of the aborted prompt
        assert await agent.run("again") == "next run"
        assert_consistent(await agent.history())


async def test_a_run_asked_beside_a_hosted_run_queues_behind_it(autojump_clock: trio.abc.Clock) -> None:
    """A task started before the caller's run (a sibling in the caller's nursery) is not part of that run."""
    model = ScriptedModel([reply("warm"), reply("first", delay=5), reply("second")])
    async with condukt.open_node() as node:
        agent = await warmed(node, model=model)
        answers: list[str] = []
        async with trio.open_nursery() as nursery:

            async def second() -> None:
                await trio.sleep(1)  # the first run is in progress, in the parent task
                answers.append(await agent.run("second"))

            nursery.start_soon(second)
            answers.append(await agent.run("first"))
        assert answers == ["first", "second"]


async def test_a_tool_of_a_hosted_run_cannot_wait_on_its_own_agent(autojump_clock: trio.abc.Clock) -> None:
    seen: list[BaseException] = []

    @condukt.tool
    async def ask_myself(context: condukt.ToolContext) -> str:
        """Ask this agent again (a deadlock if it waited)."""
        try:
            await context.agent.run("recursive")
        except condukt.CallingSelf as exc:
            seen.append(exc)
        return "refused"

    model = ScriptedModel([reply("warm"), call("ask_myself", {}), reply("done")])
    async with condukt.open_node() as node:
        agent = await warmed(node, model=model, tools=[ask_myself])
        assert await agent.run("go") == "done"
        assert len(seen) == 1


async def test_stopping_an_agent_during_a_hosted_run(autojump_clock: trio.abc.Clock) -> None:
    """The caller learns the agent exited; the tool is cancelled before ``terminate``; the checkpoint stays."""
    order: list[str] = []
    store = MemoryStore()

    class Watched(condukt.Agent):
        async def terminate(self, reason: condukt.ExitReason) -> None:
            order.append("terminate")
            await super().terminate(reason)

    class Hang(Sleep):
        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            try:
                return await super().call(args, context)
            finally:
                order.append("tool ended")

    model = ScriptedModel([reply("warm"), call("sleep", {"seconds": -1})])
    async with condukt.open_node() as node:
        agent = await warmed(node, Watched, model=model, tools=[Hang()], session_store=store, id="s1", resume=True)
        errors: list[BaseException] = []
        async with trio.open_nursery() as nursery:

            async def caller() -> None:
                try:
                    await agent.run("hang")
                except condukt.CallError as exc:
                    errors.append(exc)

            nursery.start_soon(caller)
            await trio.sleep(1)
            await agent.stop()
        assert len(errors) == 1
        assert order == ["tool ended", "terminate"]
        snapshot = await store.load("s1")
        assert snapshot is not None and snapshot.run is not None  # the run in flight, to resume after a restart


async def test_a_run_that_crashes_in_the_callers_task_crashes_the_agent(autojump_clock: trio.abc.Clock) -> None:
    class Broken(condukt.Agent):
        async def handle_event(self, event: Any) -> None:
            if type(event).__name__ == "TurnStart":
                raise RuntimeError("a bug in the agent")

    async with condukt.open_node() as node:
        agent = await node.spawn(Broken, model=ScriptedModel([reply("never")]))
        await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(condukt.CallError):
            await agent.run("go")
        reason = await agent.wait()
        assert isinstance(reason, RuntimeError)


class NeverWaits:
    """An in-process model that answers without ever giving trio's scheduler a turn."""

    name = "never-waits"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        return AssistantMessage((TextBlock("ok"),), Usage(1, 1), "end_turn")


async def test_a_loop_of_runs_lets_other_tasks_run() -> None:
    """Each ``await agent.run()`` is a schedule point, even when nothing in the run waits."""
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=NeverWaits())
        await trio.testing.wait_all_tasks_blocked()
        ticks = 0
        async with trio.open_nursery() as nursery:

            async def other() -> None:
                nonlocal ticks
                while True:
                    ticks += 1
                    await trio.lowlevel.checkpoint()

            nursery.start_soon(other)
            before = ticks
            for _ in range(20):
                await agent.run("go")
            assert ticks - before >= 19
            nursery.cancel_scope.cancel()


async def test_tools_of_a_hosted_run_see_the_agents_context_not_the_callers() -> None:
    """As in a worker task the agent starts: the agent's context variables, whoever calls."""
    seen: list[str] = []

    @condukt.tool
    async def who() -> str:
        """Report the context."""
        seen.append(_WHO.get())
        return "ok"

    model = ScriptedModel([call("who", {}), reply("a"), call("who", {}), reply("b"), call("who", {}), reply("c")])
    async with condukt.open_node() as node:
        _WHO.set("spawner")
        agent = await node.spawn(condukt.Agent, model=model, tools=[who])
        _WHO.set("caller")
        assert await agent.run("at once") == "a"  # before the agent's task first ran
        await trio.testing.wait_all_tasks_blocked()
        assert await agent.run("idle") == "b"  # the agent parked on its mailbox
        async with agent.stream("in a worker task") as events:  # a stream's run has a task of its own
            async for _ in events:
                pass
        assert seen == ["spawner"] * 3


class Approved(Sleep):
    """``sleep``, asking for approval first."""

    requires_approval = True


@pytest.mark.parametrize(
    ("tool", "turn"),
    [
        (Sleep(), [call("sleep", {"seconds": -1, "label": "a"}), call("sleep", {"seconds": -1, "label": "b"})]),
        (Approved(), call("sleep", {"seconds": 1})),  # the caller leaves while the call waits for approval
    ],
    ids=["parallel-calls", "approval"],
)
async def test_cancelling_the_caller_while_tool_calls_run_in_a_nursery_aborts_the_run(
    autojump_clock: trio.abc.Clock, tool: condukt.Tool, turn: Any
) -> None:
    """The calls' nursery raises the caller's cancellation as a group: still the abort."""
    model = ScriptedModel([reply("warm"), turn, reply("next run")])
    async with condukt.open_node() as node:
        agent = await warmed(node, model=model, tools=[tool], load_project_instructions=False)
        history = await agent.history()
        with trio.move_on_after(3) as scope:
            await agent.run("hang")
        assert scope.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert await aborted(agent)
        assert not agent.running
        assert await agent.history() == history
        assert await agent.pending_approvals() == ()
        with trio.fail_after(5):  # neither CallingSelf (the caller is no longer the run's task) nor a wait
            assert await agent.run("again") == "next run"


async def test_a_caller_whose_deadline_is_the_runs_timeout_aborts_the_run(autojump_clock: trio.abc.Clock) -> None:
    """The run's scope and the caller's are cancelled at once: the caller's cancellation gets past the run's."""
    model = ScriptedModel([reply("warm"), call("sleep", {"seconds": -1}), reply("next run")])
    async with condukt.open_node() as node:
        sleep = HostedSleep()
        agent = await warmed(node, model=model, tools=[sleep])
        history = await agent.history()
        with trio.move_on_after(5) as scope:
            await agent.run("hang", timeout=5)
        assert scope.cancelled_caught
        assert sleep.tasks == [trio.lowlevel.current_task()]  # hosted
        await trio.testing.wait_all_tasks_blocked()
        assert await aborted(agent)
        assert not agent.running
        assert await agent.history() == history
        with trio.fail_after(5):
            assert await agent.run("again") == "next run"


async def test_an_abort_and_the_callers_cancellation_at_once_roll_the_history_back(
    autojump_clock: trio.abc.Clock,
) -> None:
    outer = trio.CancelScope()

    @condukt.tool
    async def quit_all(context: condukt.ToolContext) -> str:
        """Abort the run, and its caller gives up too."""
        assert await context.agent.abort()
        outer.cancel()
        await trio.sleep_forever()
        return "never"

    model = ScriptedModel([reply("warm"), call("quit_all", {}), reply("next run")])
    async with condukt.open_node() as node:
        agent = await warmed(node, model=model, tools=[quit_all])
        history = await agent.history()
        with outer:
            await agent.run("go")
        assert outer.cancelled_caught
        await trio.testing.wait_all_tasks_blocked()
        assert await aborted(agent)
        assert await agent.history() == history  # no unanswered prompt left behind
        with trio.fail_after(5):
            assert await agent.run("again") == "next run"
        assert_consistent(await agent.history())


async def test_a_caller_that_gives_up_does_not_wait_for_its_event_callback(autojump_clock: trio.abc.Clock) -> None:
    """Its callback's reader goes with it (a channel nobody closes): the caller still leaves at its deadline.

    The aborted run's last events are delivered all the same, by the agent.
    """
    log: list[Any] = []
    model = ScriptedModel([reply("warm"), call("sleep", {"seconds": -1}), reply("next run")])
    async with condukt.open_node() as node:
        agent = await warmed(node, Recorder, model=model, tools=[Sleep()], log=log)
        send, receive = trio.open_memory_channel[Any](0)

        async def read() -> None:
            async for _ in receive:
                pass

        async with trio.open_nursery() as watchdog:
            # Only the agent's exit would end a wait that ignores the caller's cancellation.
            watchdog.start_soon(_kill_after, agent, 100)
            with trio.move_on_after(3):
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read)
                    await agent.run("hang", on_event=send.send)
            left_at = trio.current_time()
            watchdog.cancel_scope.cancel()
        assert left_at < 4
        assert agent.alive
        send.close()  # the agent's delivery to the callback fails now: it drops the callback
        await trio.testing.wait_all_tasks_blocked()
        assert log[-1] == Done("aborted")
        with trio.fail_after(5):
            assert await agent.run("again") == "next run"


async def _kill_after(agent: condukt.AgentHandle, seconds: float) -> None:
    await trio.sleep(seconds)
    agent.kill()


async def test_a_caller_whose_reader_fails_during_the_settle_leaves(autojump_clock: trio.abc.Clock) -> None:
    """The reader of its ``on_event`` channel fails on ``AgentEnd``: the caller's nursery must still exit."""
    model = ScriptedModel([reply("warm"), reply("answer")])
    async with condukt.open_node() as node:
        agent = await warmed(node, model=model)
        send, receive = trio.open_memory_channel[Any](0)

        async def read() -> None:
            async for event in receive:
                if isinstance(event, AgentEnd):
                    raise ValueError("the reader failed")

        failed_at = math.inf
        async with trio.open_nursery() as watchdog:
            watchdog.start_soon(_kill_after, agent, 100)
            try:
                async with trio.open_nursery() as nursery:
                    nursery.start_soon(read)
                    await agent.run("go", on_event=send.send)
            except* ValueError:
                failed_at = trio.current_time()
            watchdog.cancel_scope.cancel()
        assert failed_at < 1
