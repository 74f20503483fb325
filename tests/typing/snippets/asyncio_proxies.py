"""condukt.asyncio's proxies are typed (issue 32): spawn gives an agent-handle proxy, its methods the trio signatures.

The asyncio program runs on a loop of its own in a worker thread (this
test file's runner is trio).
"""

from __future__ import annotations

import asyncio
from collections.abc import Hashable
from typing import Any, assert_type

import trio

import condukt
import condukt.asyncio
from condukt.events import Event
from condukt.messages import Message
from condukt.testing import ScriptedModel, reply


class MyAgent(condukt.Agent):
    system_prompt = "You help."


class Counter(condukt.Server):
    async def init(self, start: int = 0) -> None:
        self.n = start

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return self.n

    async def handle_cast(self, message: Any) -> None:
        self.n += message[1]


class TaskHandle(condukt.Handle):
    """A handle class of the user's own: its methods are reached, typed, through call_in_trio."""

    __slots__ = ()

    async def size(self, extra: int) -> int:
        n: int = await self.call("size")
        return n + extra


class Tasks(Counter):
    handle_class = TaskHandle


async def double(n: int) -> int:
    await trio.lowlevel.checkpoint()
    return 2 * n


async def program(m: condukt.Model) -> None:
    async with condukt.asyncio.open_node() as node:
        assert_type(node, condukt.asyncio.Node)
        h = await node.spawn(MyAgent, model=m)
        assert_type(h, condukt.asyncio.AgentHandle)
        assert_type(h, condukt.asyncio.AgentHandle[condukt.AgentHandle])
        text: str = await h.run("x")
        assert text == "one"
        assert_type(h.inner, condukt.AgentHandle)
        assert_type(h.alive, bool)
        assert_type(h.session_id, str)
        history = await h.history(timeout=2.0)
        assert_type(history, tuple[Message, ...])
        assert len(history) == 2
        async with h.stream("y") as events:
            assert_type(events, condukt.asyncio.Stream)
            async for event in events:
                assert_type(event, Event)
        assert_type(events.result, str | None)
        assert events.result == "two"
        assert_type(await h.abort(), bool)

        counter = await node.spawn(Counter, 5, name="counter")
        assert_type(counter, condukt.asyncio.Handle[condukt.Handle])
        assert await counter.call("get") == 5
        await counter.cast(("add", 1))
        assert await counter.call("get") == 6
        found = await node.whereis("counter")
        assert_type(found, condukt.asyncio.Handle[condukt.Handle] | None)
        assert found == counter and found == counter.inner

        tasks = await node.spawn(Tasks, 3)
        assert_type(tasks, condukt.asyncio.Handle[TaskHandle])
        assert_type(await tasks.call_in_trio(TaskHandle.size, tasks.inner, 1), int)
        assert await tasks.call_in_trio(TaskHandle.size, tasks.inner, 1) == 4
        assert await node.call_in_trio(double, 21) == 42
        assert_type(await node.call_in_trio(double, 21), int)
        assert_type(await condukt.asyncio.call(double, 4), int)

        sup = await node.start_supervisor([condukt.ChildSpec("a", Counter)])
        assert_type(sup, condukt.asyncio.SupervisorHandle)
        children = await sup.which_children()
        assert_type(children, list[tuple[Hashable, condukt.asyncio.Handle[condukt.Handle] | None]])
        other = await sup.start_child(condukt.ChildSpec("b", MyAgent, kwargs={"model": m}))
        assert_type(other, condukt.asyncio.AgentHandle)
        await sup.terminate_child("b")

        dyn = await node.start_dynamic_supervisor()
        assert_type(dyn, condukt.asyncio.DynamicSupervisorHandle)
        child = await dyn.start_child(condukt.ChildSpec(None, Counter))
        assert_type(child, condukt.asyncio.Handle[condukt.Handle])
        await dyn.terminate_child(child)  # a proxy: it arrives as its trio handle
        assert (await dyn.count_children()).active == 0

    once = await condukt.asyncio.run("z", model=ScriptedModel([reply("three")]))
    assert once == "three"


async def main() -> None:
    model = ScriptedModel([reply("one"), reply("two")])
    await trio.to_thread.run_sync(asyncio.run, program(model))
