"""The observer's cost on a node of 1,000 (or 10,000) processes, against the same node unobserved, in the same process.

    python benchmarks/observer.py [SECONDS] [SUPERVISORS]

SUPERVISORS (default 10) sets the node's size: 100 gives 10,000 processes.

The node: 10 supervisors, each with 50 agents and 49 plain servers (1,000
processes with the root and the observer's event log), 20 of the agents
running one short run after another (a 20 ms model turn and a tool call,
so their state, turn and tool calls keep changing) and 20 of the servers
getting a cast every 10 ms.

1. Snapshot cost: one snapshot of the whole tree, encoded as the stream
   sends it (every process's JSON), per process.
2. CPU while a page watches: process CPU time per wall second over SECONDS
   (default 5) with one live page (an SSE client reading the stream over
   127.0.0.1, one agent's event log selected) against the same node with
   the observer app served but nobody watching; on the node at rest, then
   busy. The difference is what a watching page costs; the target (issue
   13) is "modest": under 5% of one core at the default interval (1 s).
"""

from __future__ import annotations

import datetime
import sys
import time
from typing import Any

import httpx
import hypercorn
import starlette
import trio
from _common import best_of, report, timed

import condukt
import condukt.web.observer as observer
from condukt.testing import FunctionModel, call, reply

SUPERVISORS, AGENTS, SERVERS = 10, 50, 49
BUSY_AGENTS, BUSY_SERVERS = 20, 20


class Sink(condukt.Server):
    async def handle_cast(self, message: Any) -> None:
        pass


class Pause(condukt.Tool):
    name = "pause"
    description = "Waits a little."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        await trio.sleep(0.02)
        return "ok"


def turns(request: condukt.ModelRequest) -> Any:
    return call("pause", {}) if type(request.messages[-1]).__name__ == "UserMessage" else reply("done", delay=0.02)


async def build(node: condukt.Node, supervisors: int = SUPERVISORS) -> tuple[list[Any], list[Any]]:
    agents, servers = [], []
    for s in range(supervisors):
        specs = [condukt.ChildSpec(f"agent-{i}", condukt.Agent, kwargs={"model": FunctionModel(turns), "tools": [Pause]})
                 for i in range(AGENTS)]
        specs += [condukt.ChildSpec(f"server-{i}", Sink) for i in range(SERVERS)]
        sup = await node.start_supervisor(specs, name=f"sup-{s}")
        for child_id, handle in sup.which_children():
            (agents if str(child_id).startswith("agent") else servers).append(handle)
    return agents, servers


async def workload(agents: list[Any], servers: list[Any]) -> None:
    async def runner(agent: Any) -> None:
        while True:
            await agent.run("go")

    async def caster(server: Any) -> None:
        while True:
            await server.cast("tick")
            await trio.sleep(0.01)

    async with trio.open_nursery() as nursery:
        for agent in agents[:BUSY_AGENTS]:
            nursery.start_soon(runner, agent)
        for server in servers[:BUSY_SERVERS]:
            nursery.start_soon(caster, server)


async def cpu_per_second(seconds: float) -> float:
    start_cpu, start = time.process_time(), time.perf_counter()
    await trio.sleep(seconds)
    return (time.process_time() - start_cpu) / (time.perf_counter() - start)


async def watch(url: str, agent: str, seconds: float, received: list[int]) -> None:
    async with httpx.AsyncClient(base_url=url, timeout=None) as client:
        with trio.move_on_after(seconds):
            async with client.stream("GET", f"/api/stream?agent={agent}") as response:
                async for chunk in response.aiter_bytes():
                    received[0] += len(chunk)


async def main() -> None:
    seconds = float(sys.argv[1]) if len(sys.argv) > 1 else 5.0
    supervisors = int(sys.argv[2]) if len(sys.argv) > 2 else SUPERVISORS
    async with condukt.open_node() as node:
        agents, servers = await build(node, supervisors)
        app = observer.create_app(node)
        from hypercorn.config import Config
        from hypercorn.trio import serve

        config = Config()
        config.bind = ["127.0.0.1:0"]
        config.accesslog = config.errorlog = None
        async with trio.open_nursery() as nursery:
            binds = await nursery.start(lambda task_status: serve(app, config, task_status=task_status))
            url = binds[0]
            async with httpx.AsyncClient(base_url=url) as client:
                count = len((await client.get("/api/snapshot")).json()["processes"])  # starts the event log
            watcher = observer._Observer(lambda: _node(node), interval=1e-9)  # no cache: a new snapshot each time
            at_rest = await best_of(10, timed(watcher.latest))
            session = agents[0].session_id
            rest = await watched(url, session, seconds)
            nursery.start_soon(workload, agents, servers)
            await trio.sleep(1.0)  # let the workload settle
            busy_snapshot = await best_of(10, timed(watcher.latest))
            busy = await watched(url, session, seconds)
            nursery.cancel_scope.cancel()

    print(f"observer on {count} processes ({BUSY_AGENTS} agents running, {BUSY_SERVERS} servers cast to), "
          f"{datetime.date.today()}, Python {sys.version.split()[0]}, trio {trio.__version__}, "
          f"starlette {starlette.__version__}, hypercorn {_version(hypercorn)}")
    report([
        ("server CPU per refresh (snapshot + encoding), node at rest", at_rest * 1e3, "ms"),
        ("  per process", at_rest / count * 1e6, "µs"),
        ("server CPU per refresh (snapshot + encoding), node busy", busy_snapshot * 1e3, "ms"),
        ("at rest: CPU, nobody watching", rest[0] * 100, "% of a core"),
        ("at rest: CPU, one page watching", rest[1] * 100, "% of a core"),
        ("busy: CPU, nobody watching", busy[0] * 100, "% of a core"),
        ("busy: CPU, one page watching", busy[1] * 100, "% of a core"),
        ("busy: stream received", busy[2] / seconds / 1024, "KiB/s"),
    ])
    print(f"what a watching page costs (interval {observer.DEFAULT_INTERVAL:g} s): "
          f"{(rest[1] - rest[0]) * 100:.1f}% of a core at rest, {(busy[1] - busy[0]) * 100:.1f}% busy; "
          f"ratio busy watched / unwatched: {busy[1] / busy[0]:.2f}x")


async def watched(url: str, session: str, seconds: float) -> tuple[float, float, int]:
    """CPU per wall second without, then with, a page watching; and the bytes that page received."""
    unwatched = await cpu_per_second(seconds)
    received = [0]
    async with trio.open_nursery() as nursery:
        nursery.start_soon(watch, url, session, seconds + 0.5, received)
        await trio.sleep(0.25)
        with_page = await cpu_per_second(seconds)
    return unwatched, with_page, received[0]


async def _node(node: condukt.Node) -> condukt.Node:
    return node


def _version(module: Any) -> str:
    from importlib.metadata import version

    return version(module.__name__)


if __name__ == "__main__":
    trio.run(main)
