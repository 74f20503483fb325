"""Mistakes the types of condukt.asyncio's proxies catch: each marked line must get an error containing the marked text."""

from __future__ import annotations

from typing import Any

import condukt
import condukt.asyncio


class MyAgent(condukt.Agent):
    pass


class Counter(condukt.Server):
    pass


class NotAServer:
    pass


async def half(n: int) -> float:
    return n / 2


async def program(m: Any) -> None:
    async with condukt.asyncio.open_node() as node:
        h = await node.spawn(MyAgent, model=m)
        await h.run(42)  # E: Argument 1 has incompatible type "int"; expected "str"
        await h.run("x", max_turns="many")  # E: Argument "max_turns" has incompatible type "str"
        await h.rnu("x")  # E: has no attribute "rnu"
        await h.history(timeout="soon")  # E: Argument "timeout" has incompatible type "str"
        h.stream(prompt=1)  # E: Argument "prompt" has incompatible type "int"
        h.run("x")  # E: Value of type "Coroutine[Any, Any, Any]" must be used
        counter = await node.spawn(Counter)
        await counter.run("x")  # E: has no attribute "run"
        await node.spawn(NotAServer)  # E: incompatible type "type[NotAServer]"
        sup = await node.start_supervisor([condukt.ChildSpec("a", Counter)])
        await sup.terminate_child("a", timeout="never")  # E: Argument "timeout" has incompatible type "str"
        dyn = await node.start_dynamic_supervisor()
        await dyn.terminate_child("a")  # E: to "terminate_child" of "DynamicSupervisorHandle" has incompatible type
        await node.call_in_trio(half, "two")  # E: Argument 2 to "call_in_trio" of "Proxy" has incompatible type "str"
        await condukt.asyncio.call(half, "two")  # E: Argument 2 to "call" has incompatible type "str"
    await condukt.asyncio.run(MyAgent, 42)  # E: Argument 2 to "run" has incompatible type "int"
