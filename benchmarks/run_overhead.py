"""The per-run figures of ``agent_loop.py`` alone (a few seconds), for ``before_after.py``'s many rounds.

A run on a running agent and spawn + run + stop, CPU per run (the same
functions as ``agent_loop.py``, best of 3 each), and the memory of an idle
agent (tracemalloc, 2,000 agents), next to a raw trio actor call measured
in the same process: a machine that is busier during one process shows in
both, so the ratio is the figure to compare across processes.

    python benchmarks/run_overhead.py
"""

from __future__ import annotations

import sys

sys.argv[1:] = ["2000"]  # agent_loop reads the idle agents' count from its arguments when imported

import agent_loop  # noqa: E402
import trio  # noqa: E402
from _common import report  # noqa: E402

import condukt  # noqa: E402


async def main() -> None:
    async with condukt.open_node() as node:
        seq = await agent_loop.running_agent(node)
        life = await agent_loop.spawn_run_stop(node)
        raw_seq, _, _ = await agent_loop.raw_actors()
        _, kb, _, _ = await agent_loop.idle_agents(node)
    report(
        [
            ("run on a running agent: CPU per run (2 turns + 1 tool)", seq, "µs"),
            ("spawn + run + stop: CPU per agent", life, "µs"),
            ("raw trio actor (task + channel), one call: CPU per call", raw_seq, "µs"),
            ("run on a running agent / raw actor call", seq / raw_seq, "x"),
            ("spawn + run + stop / raw actor call", life / raw_seq, "x"),
            ("idle agents: tracemalloc KB per agent", kb, "KB"),
        ]
    )


if __name__ == "__main__":
    trio.run(main)
