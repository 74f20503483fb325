"""condukt.run(..., node=): a one-shot on a service's own node, sharing its pool and limits."""

from __future__ import annotations

import pytest
import trio

import condukt
from condukt.testing import ScriptedModel, reply


async def test_a_one_shot_runs_on_the_node_given() -> None:
    # The caller runs in a task outside the node's block (as a request handler
    # would), so there is no current node: without node= it would open its own.
    opened: list[condukt.Node] = []
    ready, finished = trio.Event(), trio.Event()
    counts: list[int] = []

    async def hold_node() -> None:
        async with condukt.open_node() as node:
            opened.append(node)
            ready.set()
            await finished.wait()

    async def handler() -> None:
        await ready.wait()
        node = opened[0]
        assert condukt.otp.current_node() is None

        async def probe(event: object) -> None:
            counts.append(node.process_count)

        text = await condukt.run("hi", model=ScriptedModel([reply("on the node")]), node=node, on_event=probe)
        assert text == "on the node"
        assert node.process_count == 0  # stopped after
        finished.set()

    async with trio.open_nursery() as nursery:
        nursery.start_soon(hold_node)
        nursery.start_soon(handler)
    assert counts and max(counts) == 1  # the one-shot agent was a process of that node


async def test_node_must_be_a_node() -> None:
    with pytest.raises(TypeError, match="node must be a condukt Node"):
        await condukt.run("hi", model=ScriptedModel([reply("x")]), node="mine")  # type: ignore[arg-type]
