"""Agent-loop overhead: runs, spawn + run + stop, 10,000 concurrent runs, tool fan-out, idle agents.

One run = 2 model turns + 1 call of a no-op tool, on an in-process model
(no network). Every figure is printed with the baseline it is compared to,
measured in the same process:

* a run on a running agent and spawn + run + stop: CPU per run (the peer
  libraries' figures for the same workload come from ``agent_peers.py``);
* 10,000 concurrent runs: CPU per run as a ratio to the sequential figure
  (agents spawned and started before the clock starts; each agent's first
  run, then a second run of the same agents: the steady state of a
  service, as the sequential figure is), next to the same ratio for raw
  trio actors of the same shape (a task and a channel each, a call that
  adds four objects to a history), and memory per in-flight run
  (tracemalloc, agents that already ran once);
* 1,000 tool calls in one turn: CPU per call as a ratio to a raw trio
  nursery running the same no-op calls;
* idle agents: memory per agent next to a raw trio task with a channel.

    python benchmarks/agent_loop.py [idle-agents]
"""

from __future__ import annotations

import gc
import sys
import time
import tracemalloc
from typing import Any

import trio
import trio.testing
from _common import report, rss_kb

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage

RUNS = 3_000
SPAWNS = 1_000
CONCURRENT = 10_000
IDLE = int(sys.argv[1]) if len(sys.argv) > 1 and sys.argv[1].isdigit() else 100_000
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


class Held(TwoTurns):
    """Like TwoTurns, but the second turn waits for ``gate``: every run stays in flight."""

    def __init__(self) -> None:
        self.gate = trio.Event()

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        if type(request.messages[-1]).__name__ == "ToolResultMessage":
            await self.gate.wait()
            return self._answer
        return self._call


class FanOut:
    """Asks for FANOUT no-op calls in one turn, then answers."""

    name = "fanout"

    def __init__(self, n: int) -> None:
        self._calls = AssistantMessage(tuple(ToolCall(f"c{i}", "noop", {"x": i}) for i in range(n)), Usage(), "tool_use")
        self._answer = AssistantMessage((TextBlock("done"),), Usage(), "end_turn")

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        return self._answer if type(request.messages[-1]).__name__ == "ToolResultMessage" else self._calls


OPTIONS: dict[str, Any] = {"tools": [Noop], "load_project_instructions": False}


def cpu() -> float:
    return time.process_time()


async def sequential(call: Any, argument: Any, clear: Any) -> float:
    """CPU µs per ``await call(argument)``, RUNS one after another, ``await clear()`` every 50 (not timed); best of 3."""
    best = float("inf")
    for _ in range(3):
        used = 0.0
        for _ in range(RUNS // 50):
            start = cpu()
            for _ in range(50):
                await call(argument)
            used += cpu() - start
            await clear()
        best = min(best, used / RUNS * 1e6)
    return best


async def running_agent(node: condukt.Node) -> float:
    """CPU per run on an agent that is already running; the history is cleared every 50 runs (not timed)."""
    agent = await node.spawn(condukt.Agent, model=TwoTurns(), **OPTIONS)
    return await sequential(agent.run, "go", agent.clear)


async def spawn_run_stop(node: condukt.Node) -> float:
    best = float("inf")
    model = TwoTurns()
    for _ in range(3):
        start = cpu()
        for _ in range(SPAWNS):
            agent = await node.spawn(condukt.Agent, model=model, **OPTIONS)
            await agent.run("go")
            await agent.stop()
        best = min(best, (cpu() - start) / SPAWNS * 1e6)
    return best


async def run_all(agents: list[condukt.AgentHandle]) -> tuple[float, float]:
    """Every agent runs once, all at the same time: (wall seconds, CPU seconds)."""
    gc.collect()
    wall0, cpu0 = time.perf_counter(), cpu()
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.run, "go")
    return time.perf_counter() - wall0, cpu() - cpu0


async def concurrent(node: condukt.Node) -> tuple[float, float, float, float]:
    """10,000 agents each run at the same time: wall ms, CPU µs per run (first run; agents that ran
    before), bytes per in-flight run.

    The agents are spawned and their processes started (their tasks' first
    steps, the spawn's cost) before the clock starts, as for the sequential
    figure. The first figure is each agent's first run; the second, a run
    of the same agents again after their history was cleared (what a
    service's long-lived agents do, like the sequential figure's agent).
    """
    dyn = await node.start_dynamic_supervisor()
    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": TwoTurns(), **OPTIONS}, restart="temporary")
    agents = [await dyn.start_child(spec) for _ in range(CONCURRENT)]
    await trio.testing.wait_all_tasks_blocked()
    wall, used = await run_all(agents)
    for agent in agents:
        await agent.clear()
    _, again = await run_all(agents)
    await dyn.stop("shutdown")

    # Memory: agents that ran once (a service's steady state), then 10,000 runs held in flight.
    held = Held()
    dyn = await node.start_dynamic_supervisor()
    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": held, **OPTIONS}, restart="temporary")
    agents = [await dyn.start_child(spec) for _ in range(CONCURRENT)]
    held.gate.set()
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.run, "warm up")
    for agent in agents:
        await agent.clear()
    held.gate = trio.Event()
    gc.collect()
    tracemalloc.start()
    before = tracemalloc.get_traced_memory()[0]
    async with trio.open_nursery() as nursery:
        for agent in agents:
            nursery.start_soon(agent.run, "go")
        await trio.testing.wait_all_tasks_blocked()
        in_flight = (tracemalloc.get_traced_memory()[0] - before) / CONCURRENT
        tracemalloc.stop()
        held.gate.set()
    await dyn.stop("shutdown")
    return wall * 1e3, used / CONCURRENT * 1e6, again / CONCURRENT * 1e6, in_flight


class _Entry:
    """A history entry of the raw actor below (a slotted object, as condukt's messages are)."""

    __slots__ = ("content", "role")

    def __init__(self, role: str, content: Any) -> None:
        self.role = role
        self.content = content


async def _raw_actor(receive: Any) -> None:
    """An agent's shape in raw trio: a task and a mailbox channel; a "run" adds 4 entries to its history."""
    history: list[_Entry] = []
    async for reply_to, prompt in receive:
        if prompt is None:
            history.clear()
            continue
        history.append(_Entry("user", (_Entry("text", prompt),)))
        history.append(_Entry("assistant", ()))
        history.append(_Entry("tool", (_Entry("text", "ok"),)))
        history.append(_Entry("assistant", "done"))
        reply_to.send_nowait(history[-1].content)


async def _raw_call(send: Any) -> Any:
    reply_send, reply_receive = trio.open_memory_channel[Any](1)
    await send.send((reply_send, "go"))
    return await reply_receive.receive()


async def raw_actors() -> tuple[float, float, float]:
    """The concurrency baseline in raw trio: CPU µs per call, sequential (one actor, cleared every 50 calls)
    and with 10,000 actors called at once (each one's first call, then again after a clear)."""
    async with trio.open_nursery() as nursery:
        sends = []
        for _ in range(CONCURRENT):
            send, receive = trio.open_memory_channel[Any](16)
            sends.append(send)
            nursery.start_soon(_raw_actor, receive)
        await trio.testing.wait_all_tasks_blocked()
        best = await sequential(_raw_call, sends[0], lambda: sends[0].send((None, None)))
        at_once = []
        for _ in range(2):
            gc.collect()
            start = cpu()
            async with trio.open_nursery() as calls:
                for send in sends:
                    calls.start_soon(_raw_call, send)
            at_once.append((cpu() - start) / CONCURRENT * 1e6)
            for send in sends:
                await send.send((None, None))
        for send in sends:
            send.close()
    return best, at_once[0], at_once[1]


async def idle_agents(node: condukt.Node) -> tuple[float, float, float, float]:
    """Spawn µs per agent, KB per idle agent (tracemalloc, RSS), and KB per raw task + channel."""
    spec = condukt.ChildSpec(None, condukt.Agent, kwargs={"model": TwoTurns(), **OPTIONS}, restart="temporary")
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
    # Every task has taken its first step (parked): one ``sleep(0)`` was not
    # enough, as trio runs a batch in either order, which made this line
    # bimodal between identical runs.
    await trio.testing.wait_all_tasks_blocked()
    mem = (tracemalloc.get_traced_memory()[0] - mem0) / IDLE
    rss = (rss_kb() - rss0) * 1024 / IDLE
    tracemalloc.stop()
    gc.enable()
    await dyn.stop("shutdown")

    async def raw_actor(receive: Any) -> None:
        async for _ in receive:
            pass

    gc.collect()
    tracemalloc.start()
    mem0 = tracemalloc.get_traced_memory()[0]
    async with trio.open_nursery() as nursery:
        sends = []
        for _ in range(IDLE):
            send, receive = trio.open_memory_channel[Any](1024)
            sends.append(send)
            nursery.start_soon(raw_actor, receive)
        await trio.testing.wait_all_tasks_blocked()  # as for the agents above
        raw = (tracemalloc.get_traced_memory()[0] - mem0) / IDLE
        tracemalloc.stop()
        for send in sends:
            send.close()
    return spawn_us, mem / 1024, rss / 1024, raw / 1024


async def fanout(node: condukt.Node) -> tuple[float, float]:
    tool = Noop()
    context = condukt.ToolContext(None, None)  # type: ignore[arg-type]

    async def raw() -> float:
        start = cpu()
        async with trio.open_nursery() as nursery:
            for i in range(FANOUT):
                nursery.start_soon(tool.call, {"x": i}, context)
        return cpu() - start

    agent = await node.spawn(condukt.Agent, model=FanOut(FANOUT), **OPTIONS)

    async def ours() -> float:
        await agent.clear()
        start = cpu()
        await agent.run("go")
        return cpu() - start

    # Alternating rounds (ABAB...), best of each: drift in the machine's
    # speed (a busy sibling core) reaches both sides alike.
    raws: list[float] = []
    our: list[float] = []
    for _ in range(9):
        raws.append(await raw())
        our.append(await ours())
    return min(raws) / FANOUT * 1e6, min(our) / FANOUT * 1e6


async def main() -> None:
    async with condukt.open_node() as node:
        seq = await running_agent(node)
        life = await spawn_run_stop(node)
        # Before the 10,000 agents: what they leave in the heap would tax the
        # side that allocates more when the collector runs.
        raw_fan, our_fan = await fanout(node)
        wall, cpu_run, cpu_again, in_flight = await concurrent(node)
        raw_seq, raw_first, raw_again = await raw_actors()
        spawn_us, kb, rss_kb_per, raw_kb = await idle_agents(node)
    report(
        [
            ("run on a running agent: CPU per run (2 turns + 1 tool)", seq, "µs"),
            ("spawn + run + stop: CPU per agent", life, "µs"),
            (f"{CONCURRENT} concurrent runs: wall", wall, "ms"),
            (f"{CONCURRENT} concurrent runs: CPU per run (each agent's first)", cpu_run, "µs"),
            (f"{CONCURRENT} concurrent runs: CPU per run (agents that ran before)", cpu_again, "µs"),
            (f"{CONCURRENT} runs in flight: memory per run (tracemalloc)", in_flight / 1024, "KB"),
            ("raw trio actor (task + channel), one call: CPU per call", raw_seq, "µs"),
            (f"raw trio actors, {CONCURRENT} calls at once: CPU per call (first)", raw_first, "µs"),
            (f"raw trio actors, {CONCURRENT} calls at once: CPU per call (again)", raw_again, "µs"),
            (f"raw nursery, {FANOUT} no-op tasks: CPU per task", raw_fan, "µs"),
            (f"agent turn with {FANOUT} no-op tool calls: CPU per call", our_fan, "µs"),
            (f"idle agents ({IDLE}): spawn time per agent", spawn_us, "µs"),
            ("idle agents: tracemalloc KB per agent", kb, "KB"),
            ("idle agents: RSS KB per agent", rss_kb_per, "KB"),
            ("raw trio task + memory channel: tracemalloc KB each", raw_kb, "KB"),
        ]
    )
    print(
        f"concurrent vs sequential CPU per run: {cpu_run / seq:.2f}x first runs,"
        f" {cpu_again / seq:.2f}x agents that ran before (target <= 1.3x);"
        f" raw trio actors, same shape: {raw_first / raw_seq:.2f}x first calls, {raw_again / raw_seq:.2f}x again"
    )
    print(f"memory per in-flight run: {in_flight / 1024:.1f} KB (target <= 10 KB)")
    print(f"tool fan-out CPU per call vs raw nursery: {our_fan / raw_fan:.2f}x (target <= 1.5x)")
    print(f"idle agent vs raw task + channel memory: {kb / raw_kb:.2f}x")


if __name__ == "__main__":
    trio.run(main)
