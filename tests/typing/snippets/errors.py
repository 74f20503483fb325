"""Mistakes the types catch: each marked line must get an error containing the marked text."""

from __future__ import annotations

import condukt


class Counter(condukt.Server):
    pass


class NotAServer:
    pass


async def main() -> None:
    async with condukt.open_node() as node:
        counter = await node.spawn(Counter)
        await counter.run("x")  # E: "Handle" has no attribute "run"
        await node.spawn(NotAServer)  # E: incompatible type "type[NotAServer]"
        spec = condukt.ChildSpec(None, Counter)
        dyn = await node.start_dynamic_supervisor()
        child = await dyn.start_child(spec)
        child.which_children()  # E: "Handle" has no attribute "which_children"
