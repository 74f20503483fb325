"""The node notifier end to end: ``node.subscribe(agent_id or "*")`` over real agents' events."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt.events import AgentEnd, AgentEvent, AgentStart, Done, ToolCallEnd, TurnStart
from condukt.testing import ScriptedModel, call, reply

from .capabilities.helpers import Echo, Logged


async def drain(subscription: Any) -> list[Any]:
    """Close ``subscription`` and return what it still buffered."""
    subscription.close()
    return [message async for message in subscription]


async def test_a_subscription_to_one_agent_gets_only_its_events(
    autojump_clock: trio.testing.MockClock,
) -> None:
    log: list[Any] = []
    async with condukt.open_node() as node:
        first = await node.spawn(
            Logged, model=ScriptedModel([call("echo", {"text": "x"}), reply("one")]), tools=[Echo], log=log
        )
        second = await node.spawn(condukt.Agent, model=ScriptedModel([reply("two")]))
        first_id, second_id = first.session_id, second.session_id
        mine = node.subscribe(first_id)
        everyone = node.subscribe("*")
        async with trio.open_nursery() as nursery:
            nursery.start_soon(first.run, "go")
            nursery.start_soon(second.run, "go")
        received = await drain(mine)
        everything = await drain(everyone)
    assert all(type(m) is AgentEvent and m.agent_id == first_id for m in received)
    # Exactly the agent's own events, in order (the same handle_event sees).
    assert [m.event for m in received] == log
    assert type(log[0]) is AgentStart and type(log[-1]) is Done
    assert any(type(m.event) is ToolCallEnd for m in received)
    # "*" gets both agents' events, each agent's in its own order.
    ids = {m.agent_id for m in everything}
    assert ids == {first_id, second_id}
    assert [m for m in everything if m.agent_id == first_id] == received
    theirs = [type(m.event) for m in everything if m.agent_id == second_id]
    assert theirs[0] is AgentStart and theirs[-1] is Done and AgentEnd in theirs


async def test_subscribers_follow_runs_live_and_see_follow_ups(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([reply("first", delay=1), reply("second", delay=1)])
    seen: list[tuple[str, Any]] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with node.subscribe(agent.session_id) as events:
            await agent.follow_up("one")
            await agent.follow_up("two")  # queued: runs after the first
            done = 0
            async for message in events:
                seen.append((type(message.event).__name__, trio.current_time()))
                if type(message.event) is Done:
                    done += 1
                    if done == 2:
                        break
    names = [name for name, _ in seen]
    assert names.count("AgentStart") == 2 and names[-1] == "Done"
    texts = [name for name in names if name == "AgentEnd"]
    assert len(texts) == 2
    # Live: the first run's events arrived a second before the second run's.
    first_done = next(t for name, t in seen if name == "Done")
    assert seen[-1][1] - first_done == pytest.approx(1.0)


async def test_a_subscriber_that_does_not_read_loses_the_oldest_and_never_slows_the_agent(
    autojump_clock: trio.testing.MockClock,
) -> None:
    model = ScriptedModel([[call("echo", {"text": str(i)}) for i in range(20)], reply("done")])
    log: list[Any] = []
    async with condukt.open_node() as node:
        agent = await node.spawn(Logged, model=model, tools=[Echo], log=log)
        slow = node.subscribe(agent.session_id, buffer=5)
        roomy = node.subscribe("*")
        started = trio.current_time()
        # Nobody reads during the run, and it completes at once.
        assert await agent.run("go") == "done"
        assert trio.current_time() == started
        kept = await drain(slow)
        everything = await drain(roomy)
    assert len(log) > 40
    assert slow.dropped == len(log) - 5
    assert [m.event for m in kept] == log[-5:]  # the newest survive
    assert type(kept[-1].event) is Done
    assert roomy.dropped == 0 and [m.event for m in everything] == log


async def test_closing_ends_the_iteration_of_a_waiting_reader(autojump_clock: trio.testing.MockClock) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("ok"), reply("again")]))
        subscription = node.subscribe(agent.session_id)
        received: list[Any] = []

        async def read() -> None:
            async for message in subscription:
                received.append(type(message.event))
            received.append("ended")

        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            await agent.run("go")
            await trio.sleep(1)
            assert received[-1] is Done
            subscription.close()  # the reader is waiting for more
        assert received[0] is AgentStart and received[-1] == "ended"
        # A closed subscription receives nothing more.
        await agent.run("again")
        assert subscription.closed and [m async for m in subscription] == []


async def test_leaving_the_block_unsubscribes() -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        async with node.subscribe("*") as subscription:
            await agent.run("go")
        assert not node.pubsub  # no topic left
        await agent.run("again")
        # What was buffered before leaving can still be read; nothing after.
        buffered = [m async for m in subscription]
        assert type(buffered[0].event) is AgentStart
        assert [m.event.text for m in buffered if type(m.event) is AgentEnd] == ["one"]


async def test_a_subscription_made_before_the_agent_exists(autojump_clock: trio.testing.MockClock) -> None:
    async with condukt.open_node() as node:
        subscription = node.subscribe("reviewer-1")
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("ok")]), id="reviewer-1")
        await agent.run("go")
        received = await drain(subscription)
    assert [type(m.event) for m in received][:2] == [AgentStart, TurnStart]
    assert {m.agent_id for m in received} == {"reviewer-1"}


async def test_user_messages_on_other_topics_and_the_star_topic() -> None:
    async with condukt.open_node() as node:
        star = node.subscribe("*")
        deploys = node.subscribe("deploys")
        node.publish("deploys", {"version": "1.2"})
        node.publish("other", "ignored by deploys")
        assert await drain(deploys) == [{"version": "1.2"}]
        assert await drain(star) == [{"version": "1.2"}, "ignored by deploys"]


@pytest.mark.parametrize("buffer", [0, -1, 1.5, True])
async def test_a_bad_buffer_is_refused(buffer: Any) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="buffer must be a positive int"):
            node.subscribe("*", buffer=buffer)
