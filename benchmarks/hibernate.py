"""Hibernation (``hibernate_after``): idle agents' objects, the collector's time, wake-up, memory.

Every agent gets a 10-message history from one run (4 tool calls of a
no-op tool and an answer, each message a fresh object as a provider's
are), on an in-process model. Same-run baselines: the same agents with
hibernation off.

* GC-tracked objects per idle agent (``gc.get_objects()``), 2,000 agents
  hibernated vs 2,000 awake (target <= 0.5x);
Times are this process's CPU time (``time.process_time``): on a shared
machine, wall time mostly measures the other processes.

* a full collection (``gc.collect()``, best of 5) with ``--agents`` idle
  agents alive (default 100,000), hibernated vs awake (target <= 0.2x);
* wake-up: CPU of a call (``history()``) on a hibernated agent minus the same call
  on an awake one, for 10- and 1,000-message histories (target <= 100 µs
  for 10);
* ``--million N``: only spawn N agents (default 1,000,000) in batches that
  hibernate as soon as they are idle, and print the peak RSS and the RSS
  per agent (target: 1,000,000 within 2 GB).

    python benchmarks/hibernate.py [--agents N] [--million [N]]
"""

from __future__ import annotations

import argparse
import gc
import math
import resource
import statistics
import time
from typing import Any

import trio
from _common import report, rss_kb

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage
from condukt.otp.lowlevel import process_of

BATCH = 10_000


class Noop(condukt.Tool):
    name = "noop"
    description = "Does nothing."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "ok"


class Chatty:
    """Calls ``noop`` until the history holds ``length - 1`` messages, then answers: one run, ``length`` messages."""

    name = "bench"

    def __init__(self, length: int = 10) -> None:
        self.length = length

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        n = len(request.messages)
        if n < self.length - 1:
            return AssistantMessage((ToolCall(f"c{n}", "noop", {"x": n}),), Usage(10, 5), "tool_use")
        return AssistantMessage((TextBlock(f"done after {n} messages"),), Usage(20, 5), "end_turn")


def options(length: int = 10) -> dict[str, Any]:
    return {"model": Chatty(length), "tools": [Noop], "load_project_instructions": False, "max_turns": length}


async def spawn_idle(dyn: Any, n: int, after: float, length: int = 10) -> list[condukt.AgentHandle]:
    """``n`` agents under ``dyn``, each with a ``length``-message history; hibernating ones waited for."""
    spec = condukt.ChildSpec(None, condukt.Agent, kwargs=options(length), restart="temporary", hibernate_after=after)
    agents = []
    for _ in range(n):
        agent = await dyn.start_child(spec)
        await agent.run("go")
        agents.append(agent)
    if after != math.inf:
        await until_hibernated(agents)
    return agents


async def until_hibernated(agents: list[condukt.AgentHandle]) -> None:
    for agent in agents:
        while agent.state != "hibernated":
            await trio.sleep(0.001)
    # And their tasks have ended.
    await trio.testing.wait_all_tasks_blocked()


def tracked() -> int:
    return len(gc.get_objects())


async def objects_per_agent(node: condukt.Node, n: int) -> tuple[float, float]:
    """GC-tracked objects per idle agent: (awake, hibernated)."""
    figures = []
    for after in (math.inf, 0.0):
        dyn = await node.start_dynamic_supervisor()
        gc.collect()
        before = tracked()
        agents = await spawn_idle(dyn, n, after)
        gc.collect()
        figures.append((tracked() - before) / n)
        del agents
        await dyn.stop("shutdown")
    return figures[0], figures[1]


async def full_collection(node: condukt.Node, n: int) -> tuple[float, float, float, float]:
    """ms per full collection with ``n`` idle agents alive (best of 3): (awake, hibernated) and RSS KB per agent."""
    times: dict[float, float] = {}
    rss: dict[float, float] = {}
    for after in (0.0, math.inf):
        gc.collect()
        rss0 = rss_kb()
        dyn = await node.start_dynamic_supervisor()
        agents = await spawn_idle(dyn, n, after)
        gc.collect()
        rss[after] = (rss_kb() - rss0) / n
        best = math.inf
        for _ in range(5):
            start = time.process_time()
            gc.collect()
            best = min(best, time.process_time() - start)
        times[after] = best * 1e3
        del agents
        await dyn.stop("shutdown")
    return times[math.inf], times[0.0], rss[math.inf], rss[0.0]


async def wake_up(node: condukt.Node, length: int, n: int) -> tuple[float, float]:
    """µs for ``history()`` on an awake agent and on a hibernated one (medians over ``n`` agents each)."""
    figures = []
    for after in (math.inf, 0.0):
        dyn = await node.start_dynamic_supervisor()
        agents = await spawn_idle(dyn, n, after, length)
        samples = []
        for agent in agents:
            assert agent.state == ("idle" if after == math.inf else "hibernated")
            start = time.process_time()
            history = await agent.history()
            samples.append(time.process_time() - start)
            assert len(history) == length
            if after != math.inf:
                # It hibernates again at once: wait for that here, outside
                # the timed window of the next agent's wake-up.
                await until_hibernated([agent])
        figures.append(statistics.median(samples) * 1e6)
        await dyn.stop("shutdown")
    return figures[0], figures[1]


async def million(n: int) -> None:
    """Spawn ``n`` agents in batches, each hibernating once idle; print the peak RSS."""
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        rss0 = rss_kb()
        peak0 = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        start = time.perf_counter()
        agents: list[condukt.AgentHandle] = []
        while len(agents) < n:
            agents.extend(await spawn_idle(dyn, min(BATCH, n - len(agents)), 0.0))
        elapsed = time.perf_counter() - start
        gc.collect()
        rss = rss_kb()
        peak = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss
        proc = process_of(agents[-1])
        assert proc is not None and proc.hibernated
        assert len(await agents[0].history()) == 10  # one wakes, with its history
        report(
            [
                (f"{n} hibernated agents (10-message histories): spawn + run + hibernate, total", elapsed, "s"),
                ("RSS now", rss / 1024, "MB"),
                ("peak RSS of the process", peak / 1024, "MB"),
                ("RSS before the agents", rss0 / 1024, "MB"),
                ("peak RSS before the agents", peak0 / 1024, "MB"),
                ("RSS per hibernated agent", (rss - rss0) * 1024 / n, "B"),
            ]
        )
        print(f"peak RSS {peak / 1024 / 1024:.2f} GB for {n} hibernated agents (target: 1,000,000 within 2 GB)")
        await dyn.stop("shutdown")


async def main(args: argparse.Namespace) -> None:
    async with condukt.open_node() as node:
        awake, asleep = await objects_per_agent(node, 2_000)
        wake10 = await wake_up(node, 10, 300)
        wake1000 = await wake_up(node, 1000, 10)
        gc_awake, gc_asleep, rss_awake, rss_asleep = await full_collection(node, args.agents)
    report(
        [
            ("GC-tracked objects per idle agent, awake", awake, ""),
            ("GC-tracked objects per idle agent, hibernated", asleep, ""),
            (f"full collection, {args.agents} idle agents awake", gc_awake, "ms"),
            (f"full collection, {args.agents} idle agents hibernated", gc_asleep, "ms"),
            ("RSS per idle agent, awake", rss_awake, "KB"),
            ("RSS per idle agent, hibernated", rss_asleep, "KB"),
            ("history() of an awake agent, 10 messages", wake10[0], "µs"),
            ("history() of a hibernated agent, 10 messages", wake10[1], "µs"),
            ("history() of an awake agent, 1,000 messages", wake1000[0], "µs"),
            ("history() of a hibernated agent, 1,000 messages", wake1000[1], "µs"),
        ]
    )
    print(f"GC-tracked objects, hibernated vs awake: {asleep / awake:.2f}x (target <= 0.5x)")
    print(f"full collection, hibernated vs awake: {gc_asleep / gc_awake:.2f}x (target <= 0.2x)")
    print(f"wake-up, 10 messages: {wake10[1] - wake10[0]:.0f} µs (target <= 100 µs); 1,000 messages: {wake1000[1] - wake1000[0]:.0f} µs")


if __name__ == "__main__":
    import trio.testing

    parser = argparse.ArgumentParser()
    parser.add_argument("--agents", type=int, default=100_000)
    parser.add_argument("--million", type=int, nargs="?", const=1_000_000, default=None)
    parsed = parser.parse_args()
    if parsed.million is not None:
        trio.run(million, parsed.million)
    else:
        trio.run(main, parsed)
