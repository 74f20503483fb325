"""Agent-loop overhead, idle agents and tool fan-out, on ScriptedModel-like models.

One run = 2 model turns + 1 tool call (a no-op tool). Baselines in the same
process: a raw trio nursery running the same no-op tasks (for fan-out) and a
bare trio task + memory channel per idle "agent" (for memory).

    python benchmarks/agent_loop.py
"""

from __future__ import annotations

import gc
import resource
import sys
import time
import tracemalloc
from typing import Any

import trio
from _common import report, rss_kb

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage

RUNS = 2_000
CONCURRENT = 10_000
IDLE = int(sys.argv[1]) if len(sys.argv) > 1 else 100_000
FANOUT = 1_000


class Noop(condukt.Tool):
    name = "noop"
    description = "Does nothing."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "ok"


class TwoTurns:
    """A model that asks for one tool call, then answers (no recording, no streaming chunks)."""

    name = "bench"
    _call = AssistantMessage((ToolCall("c1", "noop", {"x": 1}),), Usage(10, 5), "tool_use")
    _answer = AssistantMessage((TextBlock("done"),), Usage(20, 5), "end_turn")

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        last = request.messages[-1]
        return self._answer if type(last).__name__ == "ToolResultMessage" else self._call


class FanOut:
    """Asks for FANOUT no-op calls in one turn, then answers."""

    name = "fanout"

    def __init__(self, n: int) -> None:
        self._calls = AssistantMessage(tuple(ToolCall(f"c{i}", "noop", {"x": i}) for i in range(n)), Usage(), "tool_use")
        self._answer = AssistantMessage((TextBlock("done"),), Usage(), "end_turn")

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        return self._answer if type(request.messages[-1]).__name__ == "ToolResultMessage" else self._calls


def cpu() -> float:
    return time.process_time()


async def sequential(node: condukt.Node) -> float:
    agent = await node.spawn(condukt.Agent, model=TwoTurns(), tools=[Noop], load_project_instructions=False)
    for _ in range(50):
        await agent.run("go")
        await agent.clear()
    start = cpu()
    for _ in range(RUNS):
        await agent.run("go")
        await agent.clear()
    return (cpu() - start) / RUNS * 1e6


async def concurrent(node: condukt.Node) -> tuple[float, float, float, float]:
    dyn = await node.start_dynamic_supervisor()
    spec = condukt.ChildSpec(
        None, condukt.Agent, kwargs={"model": TwoTurns(), "tools": [Noop], "load_project_instructions": False},
        restart="temporary",
    )
    agents = [await dyn.start_child(spec) for _ in range(CONCURRENT)]
    gc.collect()
    peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    wall0, cpu0 = time.perf_counter(), cpu()
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.run, "go")
    wall, used = time.perf_counter() - wall0, cpu() - cpu0
    peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
    await dyn.stop("shutdown")
    return wall, used / CONCURRENT * 1e6, wall / CONCURRENT * 1e6, (peak - peak0) / 1024


async def idle_agents(node: condukt.Node) -> tuple[float, float, float, float]:
    """KB per idle agent (tracemalloc and RSS) and spawn time, vs a raw task+channel."""
    spec = condukt.ChildSpec(
        None, condukt.Agent,
        kwargs={"model": TwoTurns(), "tools": [Noop], "load_project_instructions": False},
        restart="temporary",
    )
    dyn = await node.start_dynamic_supervisor()
    t0 = time.perf_counter()
    for _ in range(IDLE):
        await dyn.start_child(spec)
    await trio.sleep(0)
    spawn_us = (time.perf_counter() - t0) / IDLE * 1e6
    await dyn.stop("shutdown")

    dyn = await node.start_dynamic_supervisor()
    gc.collect()
    gc.disable()
    tracemalloc.start()
    rss0, mem0 = rss_kb(), tracemalloc.get_traced_memory()[0]
    for _ in range(IDLE):
        await dyn.start_child(spec)
    await trio.sleep(0)
    mem = (tracemalloc.get_traced_memory()[0] - mem0) / IDLE
    rss = (rss_kb() - rss0) * 1024 / IDLE
    tracemalloc.stop()
    gc.enable()
    await dyn.stop("shutdown")
    return spawn_us, mem / 1024, rss / 1024, 0.0


async def fanout(node: condukt.Node) -> tuple[float, float]:
    tool = Noop()
    context = condukt.ToolContext(None, None)  # type: ignore[arg-type]

    async def raw() -> float:
        start = cpu()
        async with trio.open_nursery() as nursery:
            for i in range(FANOUT):
                nursery.start_soon(tool.call, {"x": i}, context)
        return cpu() - start

    agent = await node.spawn(condukt.Agent, model=FanOut(FANOUT), tools=[Noop], load_project_instructions=False)

    async def ours() -> float:
        await agent.clear()
        start = cpu()
        await agent.run("go")
        return cpu() - start

    raw_best = min([await raw() for _ in range(5)])
    our_best = min([await ours() for _ in range(5)])
    return raw_best / FANOUT * 1e6, our_best / FANOUT * 1e6


async def main() -> None:
    async with condukt.open_node() as node:
        seq = await sequential(node)
        wall, cpu_run, wall_run, peak_mb = await concurrent(node)
        raw_fan, our_fan = await fanout(node)
        spawn_us, kb, rss_kb_per, _ = await idle_agents(node)
    report(
        [
            ("sequential run, CPU per run (2 turns + 1 tool)", seq, "µs"),
            (f"{CONCURRENT} concurrent runs: wall", wall * 1e3, "ms"),
            (f"{CONCURRENT} concurrent runs: CPU per run", cpu_run, "µs"),
            (f"{CONCURRENT} concurrent runs: peak RSS growth", peak_mb, "MB"),
            (f"idle agents ({IDLE}): spawn time per agent", spawn_us, "µs"),
            ("idle agents: tracemalloc KB per agent", kb, "KB"),
            ("idle agents: RSS KB per agent", rss_kb_per, "KB"),
            (f"raw nursery, {FANOUT} no-op tasks: CPU per task", raw_fan, "µs"),
            (f"agent turn with {FANOUT} no-op tool calls: CPU per call", our_fan, "µs"),
        ]
    )
    print(f"CPU per run: {seq:.0f} µs (target < 150 µs)")
    print(f"KB per idle agent: {kb:.1f} KB (target <= 16 KB)")
    print(f"tool fan-out overhead per call vs raw nursery: {our_fan / raw_fan:.2f}x (target <= 2x)")


if __name__ == "__main__":
    trio.run(main)
