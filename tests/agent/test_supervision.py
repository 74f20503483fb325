"""A crash in the loop machinery crashes the agent; its supervisor restarts it."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing
from waiting import Watched

import condukt
from condukt.testing import FunctionModel, ScriptedModel, reply

from .helpers import Recorder


def crash_first_time() -> FunctionModel:
    """A model whose first request raises a plain RuntimeError (a bug, not a ModelError)."""
    calls = 0

    def respond(request: condukt.ModelRequest) -> Any:
        nonlocal calls
        calls += 1
        if calls == 1:
            raise RuntimeError("bug in the model adapter")
        return reply(f"answer {calls}")

    return FunctionModel(respond)


async def test_crashed_agent_is_restarted_and_found_by_name(autojump_clock: trio.abc.Clock) -> None:
    model = crash_first_time()
    incarnations: Watched[condukt.AgentHandle] = Watched()
    async with condukt.open_node() as node:
        await node.start_supervisor(
            [condukt.ChildSpec("bot", Recorder, kwargs={"model": model, "incarnations": incarnations}, name="bot")]
        )
        first = node.whereis("bot")
        assert isinstance(first, condukt.AgentHandle)
        first_session = first.session_id
        with pytest.raises(condukt.CallError) as info:
            await first.run("hello")
        assert isinstance(info.value.reason, RuntimeError)
        _, second = await incarnations.wait_for_length(2)
        assert node.whereis("bot") is second
        assert not first.alive
        assert isinstance(second, condukt.AgentHandle)
        assert await second.run("hello again") == "answer 2"
        # A fresh incarnation: a new session and a history without the crashed run.
        assert second.session_id != first_session
        assert [m.text for m in await second.history()] == ["hello again", "answer 2"]


async def test_crash_while_streaming_ends_the_stream_with_call_error(autojump_clock: trio.abc.Clock) -> None:
    model = crash_first_time()
    incarnations: Watched[condukt.AgentHandle] = Watched()
    async with condukt.open_node() as node:
        await node.start_supervisor(
            [condukt.ChildSpec("bot", Recorder, kwargs={"model": model, "incarnations": incarnations}, name="bot")]
        )
        first = node.whereis("bot")
        assert first is not None
        with pytest.raises(condukt.CallError):
            async with first.stream("hello") as events:
                async for _ in events:
                    pass
        _, second = await incarnations.wait_for_length(2)
        assert await second.run("again") == "answer 2"


class FragileHook(Recorder):
    async def handle_event(self, event: Any) -> None:
        if type(event) is condukt.events.TurnStart:
            raise LookupError("hook bug")


async def test_exception_in_handle_event_crashes_the_agent(autojump_clock: trio.abc.Clock) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(FragileHook, model=ScriptedModel([reply("hi")]))
        async with node.monitor(agent) as monitor:
            with pytest.raises(condukt.CallError):
                await agent.run("hello")
            down = await monitor.wait()
        assert isinstance(down.reason, LookupError)
