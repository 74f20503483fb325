"""Session store overhead per turn: DiskStore and SQLiteStore as ratios to MemoryStore.

A 100-turn scripted run (each turn one tool call, so every turn is saved);
the baseline is the same run with MemoryStore, in the same process.

    python benchmarks/sessions.py
"""

from __future__ import annotations

import tempfile
import time
from pathlib import Path
from typing import Any

import trio
from _common import report

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage
from condukt.sessions import DiskStore, MemoryStore, SQLiteStore

TURNS = 100


class Echo(condukt.Tool):
    name = "echo"
    description = "Echoes."
    parameters = {"type": "object", "properties": {"n": {"type": "integer"}}, "required": ["n"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        return f"echo {args['n']} " + "x" * 200


class HundredTurns:
    name = "bench"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        turns = sum(1 for m in request.messages if type(m) is AssistantMessage)
        if turns + 1 >= TURNS:
            return AssistantMessage((TextBlock("done"),), Usage(), "end_turn")
        return AssistantMessage((ToolCall(f"c{turns}", "echo", {"n": turns}),), Usage(), "tool_use")


async def one_run(store: Any, cwd: Path) -> tuple[float, float]:
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=HundredTurns(), tools=[Echo], cwd=cwd, session_store=store,
            id="bench", max_turns=TURNS + 1, load_project_instructions=False,
        )
        wall, cpu = time.perf_counter(), time.process_time()
        await agent.run("go")
        return time.perf_counter() - wall, time.process_time() - cpu


async def main() -> None:
    rows = []
    results: dict[str, tuple[float, float]] = {}
    with tempfile.TemporaryDirectory() as tmp:
        for name, make in (("memory", MemoryStore), ("disk", DiskStore), ("sqlite", SQLiteStore)):
            best = (float("inf"), float("inf"))
            for attempt in range(3):
                cwd = Path(tmp) / f"{name}{attempt}"
                cwd.mkdir()
                store = make()
                best = min(best, await one_run(store, cwd))
                if isinstance(store, SQLiteStore):
                    await store.aclose()
            results[name] = best
            rows.append((f"{name}: wall per turn", best[0] / TURNS * 1e6, "µs"))
            rows.append((f"{name}: process CPU per turn", best[1] / TURNS * 1e6, "µs"))
    report(rows)
    base = results["memory"][0]
    print(f"DiskStore overhead per turn vs MemoryStore: {results['disk'][0] / base:.2f}x wall")
    print(f"SQLiteStore overhead per turn vs MemoryStore: {results['sqlite'][0] / base:.2f}x wall")


if __name__ == "__main__":
    trio.run(main)
