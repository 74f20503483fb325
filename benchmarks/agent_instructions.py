"""A fixed agent workload to count instructions with callgrind: the measure load cannot move.

Spawns N agents one after another, runs each once (2 model turns + 1 no-op
tool call on an in-process model) and stops it; then makes N runs on one
running agent (its history cleared every 50 runs). Run it at two sizes under
callgrind and divide the difference by the difference of N: that is the cost
of one unit of the work (one spawn + run + stop, one run on a running agent),
with start-up costs cancelled out. Compare two checkouts by running each
one's interpreter (or ``PYTHONPATH`` at each one's ``src``)::

    for n in 200 1000; do
      PYTHONHASHSEED=0 valgrind --tool=callgrind --callgrind-out-file=cg.$n python benchmarks/agent_instructions.py $n
    done
    # per unit = (total of cg.1000 - total of cg.200) / 800   ("totals:" line of each file)

``python benchmarks/agent_instructions.py N on_event`` gives every run a no-op
``on_event`` listener (a run whose end awaits its listeners runs in a worker
task, not in its caller's: ``agent/_lifecycle.py``).

``python benchmarks/agent_instructions.py N concurrent`` spawns the N agents
first, then runs them all at once (agent_loop.py's 10,000 concurrent runs),
then stops them.

``agent_loop.py`` measures the same runs in CPU time, which varies with
what else runs on the machine; instruction counts do not.
"""

from __future__ import annotations

import sys
from typing import Any

import trio

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200
ON_EVENT = "on_event" in sys.argv[2:]
CONCURRENT = "concurrent" in sys.argv[2:]


class Noop(condukt.Tool):
    name = "noop"
    description = "Does nothing."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "ok"


class TwoTurns:
    """A model that asks for one tool call, then answers (agent_loop.py's model)."""

    name = "bench"
    _call = AssistantMessage((ToolCall("c1", "noop", {"x": 1}),), Usage(10, 5), "tool_use")
    _answer = AssistantMessage((TextBlock("done"),), Usage(20, 5), "end_turn")

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        return self._answer if type(request.messages[-1]).__name__ == "ToolResultMessage" else self._call


OPTIONS: dict[str, Any] = {"tools": [Noop], "load_project_instructions": False}


async def ignore(event: Any) -> None:
    pass


async def main() -> None:
    model = TwoTurns()
    run_options: dict[str, Any] = {"on_event": ignore} if ON_EVENT else {}
    async with condukt.open_node() as node:
        if CONCURRENT:
            agents = [await node.spawn(condukt.Agent, model=model, **OPTIONS) for _ in range(N)]
            async with trio.open_nursery() as nursery:
                for agent in agents:
                    nursery.start_soon(lambda agent: agent.run("go", **run_options), agent)
            for agent in agents:
                await agent.stop()
            return
        for _ in range(N):
            agent = await node.spawn(condukt.Agent, model=model, **OPTIONS)
            await agent.run("go", **run_options)
            await agent.stop()
        agent = await node.spawn(condukt.Agent, model=model, **OPTIONS)
        for i in range(N):
            await agent.run("go", **run_options)
            if i % 50 == 49:
                await agent.clear()


if __name__ == "__main__":
    trio.run(main)
