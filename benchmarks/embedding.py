"""condukt driven from asyncio (condukt.asyncio, trio as a guest) against the same runs driven from trio.

    python benchmarks/embedding.py [N]

The agent_loop.py workload (2 model turns + 1 tool call, in-process model):
runs on already-spawned agents, driven once from a trio program and once
from an asyncio program through ``condukt.asyncio``, in the same process.
CPU time per run, sequential (one agent, N runs) and concurrent (N agents,
one run each, all at once); the ratio asyncio / trio is the bridge's cost.
Target (issue 12): at most 1.2x at 1 and at 1,000 concurrent. The
thread-backed mode (``open_node(thread=True)``) is measured the same way.

Then a streamed run of 1,000 text deltas read as they come, CPU per event,
the same three ways. Last, the price of guest mode's lingering (trio stays runnable for a few
ticks after each answer, so that a next call made right away does not have
to wake it): the ticks an answer nobody follows up costs (counted with a
trio instrument) times the CPU of one guest tick (measured here).
"""

from __future__ import annotations

import asyncio
import datetime
import gc
import sys
import time
from collections.abc import Awaitable, Callable
from typing import Any

import trio
from agent_loop import OPTIONS, TwoTurns

import condukt
import condukt.asyncio as ca
from condukt.events import TextDelta
from condukt.messages import AssistantMessage, TextBlock, Usage

DELTAS = 1000
#: Rounds of the run measurements (best of each side); this machine's speed moves within minutes.
ROUNDS = 5


class Chatty:
    """A model that streams ``DELTAS`` text deltas, then answers."""

    name = "chatty"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        for _ in range(DELTAS):
            await emit(TextDelta("w "))
        return AssistantMessage((TextBlock("w " * DELTAS),), Usage(1, 1), "end_turn")


async def stream_cost(node: Any) -> float:
    """CPU per event of a streamed run on ``node``, read to the end."""
    agent = await node.spawn(condukt.Agent, model=Chatty())
    best = float("inf")
    for _ in range(3):
        cpu = time.process_time()
        async with agent.stream("go") as events:
            async for _event in events:
                pass
        best = min(best, (time.process_time() - cpu) / DELTAS)
        await agent.clear()
    return best


async def trio_stream() -> float:
    async with condukt.open_node() as node:
        return await stream_cost(node)


async def asyncio_stream(thread: bool = False) -> float:
    async with ca.open_node(thread=thread) as node:
        return await stream_cost(node)


async def measure(node: Any, n: int, run_all: Callable[[list[Any]], Awaitable[None]]) -> tuple[float, float]:
    """CPU per run on ``node`` (a trio node or a condukt.asyncio one): sequential, then ``n`` at once."""
    agent = await node.spawn(condukt.Agent, model=TwoTurns(), **OPTIONS)
    for _ in range(20):
        await agent.run("go")
        await agent.clear()
    gc.collect()
    cpu = time.process_time()
    for i in range(n):
        await agent.run("go")
        if i % 50 == 49:
            await agent.clear()
    sequential = (time.process_time() - cpu) / n
    agents = [await node.spawn(condukt.Agent, model=TwoTurns(), **OPTIONS) for _ in range(n)]
    gc.collect()
    cpu = time.process_time()
    await run_all(agents)
    concurrent = (time.process_time() - cpu) / n
    return sequential, concurrent


async def trio_side(n: int) -> tuple[float, float]:
    async def run_all(agents: list[Any]) -> None:
        async with trio.open_nursery() as nursery:
            for each in agents:
                nursery.start_soon(each.run, "go")

    async with condukt.open_node() as node:
        return await measure(node, n, run_all)


async def asyncio_side(n: int, thread: bool = False) -> tuple[float, float]:
    async def run_all(agents: list[Any]) -> None:
        await asyncio.gather(*(each.run("go") for each in agents))

    async with ca.open_node(thread=thread) as node:
        return await measure(node, n, run_all)


class _IOWaits(trio.abc.Instrument):
    def __init__(self) -> None:
        self.timeouts: list[float] = []

    def before_io_wait(self, timeout: float) -> None:
        self.timeouts.append(timeout)


async def _nothing() -> None:
    pass


async def _spin(n: int) -> float:
    cpu = time.process_time()
    for _ in range(n):
        await trio.lowlevel.checkpoint()
    return (time.process_time() - cpu) / n


async def linger_cost(calls: int = 200) -> tuple[float, float]:
    """Ticks trio stays runnable after an answer nobody follows up, and the CPU of one guest tick."""
    waits = _IOWaits()
    async with ca.open_node() as node:
        await node.call_in_trio(_add_instrument, waits)
        lingered = 0
        for _ in range(calls):
            await node.call_in_trio(_nothing)
            answered = len(waits.timeouts)
            await asyncio.sleep(0.0005)  # nobody calls: trio goes idle
            lingered += sum(1 for timeout in waits.timeouts[answered:] if timeout == 0)
        await node.call_in_trio(_remove_instrument, waits)
        tick = await node.call_in_trio(_spin, 20_000)
    return lingered / calls, tick


async def _add_instrument(instrument: trio.abc.Instrument) -> None:
    trio.lowlevel.add_instrument(instrument)


async def _remove_instrument(instrument: trio.abc.Instrument) -> None:
    trio.lowlevel.remove_instrument(instrument)


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 1000
    print(
        f"embedding, {datetime.date.today()}, condukt {condukt.__version__}, Python {sys.version.split()[0]}, "
        f"trio {trio.__version__}; N={n}, best of {ROUNDS} alternating rounds"
    )
    best_trio = [float("inf")] * 2
    best_asyncio = [float("inf")] * 2
    best_thread = [float("inf")] * 2
    for _ in range(ROUNDS):  # trio, asyncio, thread-backed in turn: a slower minute hits all three
        t = trio.run(trio_side, n)
        a = asyncio.run(asyncio_side(n))
        th = asyncio.run(asyncio_side(n, thread=True))
        best_trio = [min(x, y) for x, y in zip(best_trio, t, strict=True)]
        best_asyncio = [min(x, y) for x, y in zip(best_asyncio, a, strict=True)]
        best_thread = [min(x, y) for x, y in zip(best_thread, th, strict=True)]
    for label, index in (("one agent, runs one after another", 0), (f"{n} agents, one run each, at once", 1)):
        tr, asy, thr = best_trio[index] * 1e6, best_asyncio[index] * 1e6, best_thread[index] * 1e6
        print(
            f"  {label:<36} trio {tr:7.1f} µs   asyncio {asy:7.1f} µs   {asy / tr:.2f}×"
            f"   thread-backed {thr:7.1f} µs   {thr / tr:.2f}×"
        )
    streams = [
        (trio.run(trio_stream), asyncio.run(asyncio_stream()), asyncio.run(asyncio_stream(True))) for _ in range(3)
    ]
    tr, asy, thr = (min(each[i] for each in streams) * 1e6 for i in range(3))
    print(
        f"  {'a streamed run, per event':<36} trio {tr:7.1f} µs   asyncio {asy:7.1f} µs   {asy / tr:.2f}×"
        f"   thread-backed {thr:7.1f} µs   {thr / tr:.2f}×"
    )
    costs = [asyncio.run(linger_cost()) for _ in range(3)]
    ticks, tick = min(c[0] for c in costs), min(c[1] for c in costs)
    print(
        f"  an answer nobody follows up: trio lingers {ticks:.1f} ticks × {tick * 1e6:.1f} µs per guest tick"
        f" = {ticks * tick * 1e6:.1f} µs of CPU, then waits idle"
    )


if __name__ == "__main__":
    main()
