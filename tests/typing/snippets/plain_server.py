"""A plain Server subclass, no type parameters anywhere: spawn gives a Handle under --strict."""

from __future__ import annotations

from typing import Any, assert_type

import condukt


class Counter(condukt.Server):
    async def init(self, start: int = 0) -> None:
        self.n = start

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return self.n

    async def handle_cast(self, message: Any) -> None:
        self.n += message[1]


def specs() -> list[condukt.ChildSpec]:
    """A bare ChildSpec annotation still passes --strict (it means ChildSpec[Handle])."""
    first: condukt.ChildSpec = condukt.ChildSpec("a", Counter, args=(1,))
    return [first, condukt.ChildSpec("b", Counter)]


async def main() -> None:
    async with condukt.open_node() as node:
        counter = await node.spawn(Counter, 5, name="counter")
        assert_type(counter, condukt.Handle)
        await counter.cast(("add", 1))
        n = await counter.call("get")
        assert_type(n, Any)

        sup = await node.start_supervisor(specs())
        await sup.terminate_child("a")
        restarted = await sup.restart_child("a")
        assert_type(restarted, condukt.Handle)
        assert_type(await sup.start_child(condukt.ChildSpec("c", Counter)), condukt.Handle)

        dyn = await node.start_dynamic_supervisor()
        assert_type(dyn, condukt.DynamicSupervisorHandle)
        assert_type(await dyn.start_child(condukt.ChildSpec(None, Counter)), condukt.Handle)
        assert_type(await node.spawn(condukt.DynamicSupervisor), condukt.DynamicSupervisorHandle)

        assert_type(node.whereis("counter"), condukt.Handle | None)
