"""Guards against silent mistakes: option typos, unbounded queues, lingering subscriptions."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt.testing import ScriptedModel, call, reply


async def test_a_misspelt_start_option_is_refused_at_spawn() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match="unknown start option.*max_turn"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), max_turn=3)
        assert node.process_count == 0


async def test_custom_options_are_declared_and_reach_init() -> None:
    seen: list[Any] = []

    class Custom(condukt.Agent):
        extra_options = frozenset({"flavour"})

        async def init(self, options: Any) -> None:
            seen.append(options["flavour"])

    async with condukt.open_node() as node:
        await node.spawn(Custom, model=ScriptedModel([]), flavour="mint")
    assert seen == ["mint"]


async def test_the_follow_up_queue_is_bounded(autojump_clock: Any) -> None:
    class Small(condukt.Agent):
        max_follow_ups = 2

    model = ScriptedModel([reply("slow", delay=10), reply("a"), reply("b")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Small, model=model)
        await agent.follow_up("first")  # starts at once
        await agent.follow_up("second")
        await agent.follow_up("third")
        with pytest.raises(condukt.Busy, match="follow-ups are already queued"):
            await agent.follow_up("fourth")


async def test_subscriptions_end_when_their_node_closes() -> None:
    received: list[Any] = []
    async with trio.open_nursery() as nursery:
        async with condukt.open_node() as node:
            subscription = node.subscribe("*")

            async def read() -> None:
                async for item in subscription:
                    received.append(item)

            nursery.start_soon(read)
            node.publish("topic", "hello")
            await trio.testing.wait_all_tasks_blocked()
        # Leaving the node closed the subscription: the reader's loop ended.
    assert received == ["hello"]
    assert subscription.closed


async def test_a_confined_parent_never_has_unconfined_children(tmp_path: Path) -> None:
    outside = tmp_path / "outside.txt"
    outside.write_text("secret plans")
    work = tmp_path / "work"
    work.mkdir()

    child_model = ScriptedModel([call("read", {"path": str(outside)}), reply("read it")])

    class Confined(condukt.Agent):
        confine_to_cwd = True

        def subagents(self) -> dict[str, Any]:
            return {"reader": condukt.Subagent(tools=[condukt.tools.Read], model=child_model)}

    parent_model = ScriptedModel([call("subagent", {"role": "reader", "task": "read it"}), reply("done")])
    async with condukt.open_node() as node:
        parent = await node.spawn(Confined, model=parent_model, cwd=work)
        await parent.run("go")
    read_result = child_model.requests[1].messages[-1]
    assert read_result.is_error
    assert "outside the working directory" in read_result.text
    assert "secret plans" not in repr(child_model.requests) + repr(parent_model.requests)


async def test_a_steer_too_late_for_its_run_becomes_a_follow_up(autojump_clock: Any) -> None:
    from condukt.messages import UserMessage

    class Slow(condukt.Tool):
        name = "slow"
        description = "Takes a while."

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
            await trio.sleep(5)
            return "slow done"

    model = ScriptedModel([call("slow"), reply("steer answered")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Slow], max_turns=1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "go")
            await trio.sleep(1)
            await agent.steer("and also this")  # the run stops at max_turns before another request
        await trio.sleep(1)
        history = await agent.history()
    user_texts = [m.text for m in history if isinstance(m, UserMessage)]
    assert user_texts == ["go", "and also this"]
    assert history[-1].text == "steer answered"
    assert len(model.requests) == 2  # the limited run made one request, the follow-up the other
    assert model.requests[-1].messages[-1].text == "and also this"
