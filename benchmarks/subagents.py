"""Sub-agent fan-out: a parent delegating to 100 children in one turn.

Each child does one model turn without tools (a FunctionModel answering at
once). The cost per child (spawn + run + stop, plus forwarding its events to
the parent) is the parent's run with 100 delegations minus the same parent
run with 100 no-op tool calls, divided by 100. Baseline, measured in the
same process: one run on an already-spawned agent with the same model and a
fresh history (``clear`` between runs, not timed). Two parts of a delegation
are also measured alone: an agent's spawn + stop, and a streamed run.

    python benchmarks/subagents.py [children]
    PROFILE=1 python benchmarks/subagents.py   # cProfile of the fan-out runs, on stderr
"""

from __future__ import annotations

import cProfile
import gc
import os
import pstats
import sys
import time
from typing import Any

import trio
from _common import report

import condukt
from condukt.messages import ToolResultMessage
from condukt.testing import FunctionModel, call, reply

CHILDREN = int(sys.argv[1]) if len(sys.argv) > 1 else 100
REPEAT = 15
PLAIN_RUNS = 2_000
PROFILE = os.environ.get("PROFILE") == "1"


class Noop(condukt.Tool):
    name = "noop"
    description = "Does nothing."
    parameters = {"type": "object", "properties": {"role": {"type": "string"}, "task": {"type": "string"}}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "done"


def child_model() -> FunctionModel:
    """One turn, no tools: the answer at once."""
    return FunctionModel(lambda request: reply("done"), name="child")


def fan_out(tool: str, n: int) -> FunctionModel:
    """``n`` calls of ``tool`` in the first turn, then the answer."""
    calls = [call(tool, {"role": "worker", "task": f"task {i}"}) for i in range(n)]

    def respond(request: condukt.ModelRequest) -> Any:
        return reply("all done") if type(request.messages[-1]) is ToolResultMessage else calls

    return FunctionModel(respond, name="parent")


async def plain_run(node: condukt.Node) -> float:
    """Seconds per run of one model turn on an already-spawned agent."""
    agent = await node.spawn(condukt.Agent, model=child_model(), load_project_instructions=False)
    for _ in range(100):
        await agent.run("task")
        await agent.clear()
    best = float("inf")
    for _ in range(5):
        gc.collect()
        total = 0.0
        for _ in range(PLAIN_RUNS // 5):
            start = time.perf_counter()
            await agent.run("task")
            total += time.perf_counter() - start
            await agent.clear()
        best = min(best, total / (PLAIN_RUNS // 5))
    await agent.stop()
    return best


async def one_shot(node: condukt.Node) -> float:
    """Seconds for the same work as a child done without delegation: spawn a plain agent, run, stop."""
    model = child_model()

    async def once() -> None:
        await condukt.run("task", model=model)

    return await per_call(once)


async def per_call(fn: Any, n: int = 1_000) -> float:
    """Best seconds per ``await fn()`` over three rounds of ``n`` (after a warm-up)."""
    for _ in range(100):
        await fn()
    best = float("inf")
    for _ in range(3):
        gc.collect()
        start = time.perf_counter()
        for _ in range(n):
            await fn()
        best = min(best, (time.perf_counter() - start) / n)
    return best


async def components(node: condukt.Node) -> tuple[float, float]:
    """Seconds for an agent's spawn + stop alone, and for one streamed run on a spawned agent.

    The parts a delegation is made of, for the breakdown: a child is spawned
    under a dynamic supervisor, runs its task as a stream (its events are
    forwarded to the parent) and is stopped.
    """
    supervisor = await node.start_dynamic_supervisor()
    spec = condukt.ChildSpec(
        None,
        condukt.Agent,
        kwargs={"model": child_model(), "load_project_instructions": False},
        restart="temporary",
    )

    async def spawn_stop() -> None:
        child = await supervisor.start_child(spec)
        await child.stop("shutdown")

    agent = await node.spawn(condukt.Agent, model=child_model(), load_project_instructions=False)

    async def stream() -> None:
        async with agent.stream("task") as events:
            async for _ in events:
                pass
        await agent.clear()

    async def clear() -> None:
        await agent.clear()

    spawn_stop_s = await per_call(spawn_stop)
    stream_s = await per_call(stream) - await per_call(clear)
    await agent.stop()
    await supervisor.stop()
    return spawn_stop_s, stream_s


async def parent_run(node: condukt.Node, delegating: bool, profiler: cProfile.Profile | None = None) -> float:
    """Best seconds for one parent run of ``CHILDREN`` delegations (or no-op calls)."""
    if delegating:
        roles = {"worker": condukt.Subagent(system_prompt="You work.", model=child_model())}
        parent = await node.spawn(
            condukt.Agent,
            model=fan_out("subagent", CHILDREN),
            subagents=roles,
            max_concurrent_subagents=CHILDREN,
            load_project_instructions=False,
        )
    else:
        parent = await node.spawn(
            condukt.Agent, model=fan_out("noop", CHILDREN), tools=[Noop], load_project_instructions=False
        )
    await parent.run("go")  # warm up (and start the sub-agent supervisor)
    await parent.clear()
    best = float("inf")
    for _ in range(REPEAT):
        gc.collect()
        if profiler is not None:
            profiler.enable()
        start = time.perf_counter()
        await parent.run("go")
        elapsed = time.perf_counter() - start
        if profiler is not None:
            profiler.disable()
        best = min(best, elapsed)
        await parent.clear()
    before = node.process_count
    await parent.stop()
    assert node.process_count < before
    return best


async def main() -> None:
    profiler = cProfile.Profile() if PROFILE else None
    async with condukt.open_node() as node:
        plain = await plain_run(node)
        transient = await one_shot(node)
        spawn_stop, stream = await components(node)
        noop = await parent_run(node, delegating=False)
        fanout = await parent_run(node, delegating=True, profiler=profiler)
        assert node.process_count == 0, node.process_count
    per_child = (fanout - noop) / CHILDREN
    report(
        [
            ("plain run on a spawned agent (1 turn)", plain * 1e6, "µs"),
            ("plain one-shot agent: spawn + run + stop (condukt.run)", transient * 1e6, "µs"),
            ("  its parts: agent spawn + stop alone", spawn_stop * 1e6, "µs"),
            ("  its parts: streamed run on a spawned agent", stream * 1e6, "µs"),
            (f"parent run, {CHILDREN} no-op tool calls", noop * 1e3, "ms"),
            (f"parent run, {CHILDREN} sub-agents", fanout * 1e3, "ms"),
            ("per child, total parent time / children", fanout / CHILDREN * 1e6, "µs"),
            ("per child: spawn + run + stop (minus no-op call)", per_child * 1e6, "µs"),
        ]
    )
    if profiler is not None:
        stats = pstats.Stats(profiler, stream=sys.stderr).strip_dirs().sort_stats("cumulative")
        stats.print_stats(45)
        stats.sort_stats("tottime").print_stats(30)
    print(f"per child vs a run on an already-spawned agent: {per_child / plain:.2f}x")
    # Like for like: a child is a whole agent life (spawn + run + stop), and so
    # is a plain one-shot agent doing the same task without a parent.
    print(f"sub-agent overhead per child vs a plain one-shot agent run: {per_child / transient:.2f}x (target <= 1.5x)")


if __name__ == "__main__":
    trio.run(main)
