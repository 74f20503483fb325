"""What a function tool's ``isolate`` mode costs per call, against an inline async tool in the same run.

Four ``@condukt.tool`` functions that return ``"ok"``, one per way of running:

* ``async def`` (always inline on the event loop): the baseline, 1×;
* ``def`` with ``isolate="none"``: inline on the event loop;
* ``def`` with ``isolate="thread"`` (the default for sync functions): a trio
  worker thread, abandoned at the deadline;
* ``def`` with ``isolate="process"``: a trio-parallel worker process, killed
  at the deadline; the pool is warmed up before timing.

Two figures per mode, each the best of 5 rounds:

* an agent run (2 model turns + 1 tool call, in-process model, history
  cleared between rounds), as ``agent_loop.py`` measures it: wall time and
  process CPU time (all threads and no child processes) per run;
* the bare ``tool.call(args, context)``: wall time per call; for the thread,
  also against ``trio.to_thread.run_sync`` of a no-op in the same rounds
  (what a thread hop costs on trio at the least).

Ratios are to the async tool's figure from the same round of the same run.

    pip install -e ".[process]"
    python benchmarks/tool_modes.py
"""

from __future__ import annotations

import datetime
import gc
import importlib.metadata
import platform
import subprocess
import time
from pathlib import Path
from typing import Any

import trio
from _common import report

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage

ROUNDS = 5
#: Runs (and bare calls) per round, per mode: a worker process round trip costs ~100× a thread hop.
COUNTS = {"async": 2_000, "none": 2_000, "thread": 2_000, "process": 200}


@condukt.tool(name="t")
async def async_noop(x: int) -> str:
    """Does nothing."""
    return "ok"


@condukt.tool(name="t", isolate="none")
def inline_noop(x: int) -> str:
    """Does nothing."""
    return "ok"


@condukt.tool(name="t")
def thread_noop(x: int) -> str:
    """Does nothing."""
    return "ok"


def process_tool() -> condukt.tools.FunctionTool | None:
    try:
        return condukt.tool(name="t", isolate="process")(process_noop)
    except ImportError as exc:
        print(f"(no process mode: {exc})")
        return None


def process_noop(x: int) -> str:
    """Does nothing (in a worker process: found there as ``__main__.process_noop``)."""
    return "ok"


class OneCall:
    """Asks for one call of ``t``, then answers."""

    name = "bench"
    _call = AssistantMessage((ToolCall("c1", "t", {"x": 1}),), Usage(10, 5), "tool_use")
    _answer = AssistantMessage((TextBlock("done"),), Usage(20, 5), "end_turn")

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        return self._answer if type(request.messages[-1]).__name__ == "ToolResultMessage" else self._call


async def runs(agent: Any, n: int) -> tuple[float, float]:
    """(wall s, CPU s) per run, over ``n`` runs; the history is cleared every 50 runs (not timed)."""
    wall = used = 0.0
    done = 0
    while done < n:
        batch = min(50, n - done)
        gc.collect()
        w0, c0 = time.perf_counter(), time.process_time()
        for _ in range(batch):
            await agent.run("go")
        wall += time.perf_counter() - w0
        used += time.process_time() - c0
        done += batch
        await agent.clear()
    return wall / n, used / n


async def bare_calls(tool: condukt.Tool, n: int) -> float:
    context = condukt.ToolContext(None, Path("."))
    args = {"x": 1}
    gc.collect()
    start = time.perf_counter()
    for _ in range(n):
        await tool.call(args, context)
    return (time.perf_counter() - start) / n


def _noop() -> str:
    return "ok"


async def to_thread_calls(n: int) -> float:
    """The same hop through trio's own ``trio.to_thread.run_sync``: what a thread costs at the least, on trio."""
    gc.collect()
    start = time.perf_counter()
    for _ in range(n):
        await trio.to_thread.run_sync(_noop, abandon_on_cancel=True)
    return (time.perf_counter() - start) / n


async def main() -> None:
    tools: dict[str, condukt.Tool] = {"async": async_noop, "none": inline_noop, "thread": thread_noop}
    process = process_tool()
    if process is not None:
        tools["process"] = process
    best_run: dict[str, tuple[float, float]] = {m: (float("inf"), float("inf")) for m in tools}
    best_bare: dict[str, float] = {m: float("inf") for m in tools}
    best_to_thread = float("inf")
    async with condukt.open_node() as node:
        agents = {
            mode: await node.spawn(condukt.Agent, model=OneCall(), tools=[tool], load_project_instructions=False)
            for mode, tool in tools.items()
        }
        for mode, agent in agents.items():  # warm up: caches, the thread cache, the worker pool
            await runs(agent, 20)
            await bare_calls(tools[mode], 20)
        for _ in range(ROUNDS):  # interleaved, so load from elsewhere spreads over every mode
            for mode, agent in agents.items():
                wall, used = await runs(agent, COUNTS[mode])
                best_run[mode] = (min(best_run[mode][0], wall), min(best_run[mode][1], used))
                best_bare[mode] = min(best_bare[mode], await bare_calls(tools[mode], COUNTS[mode]))
            best_to_thread = min(best_to_thread, await to_thread_calls(COUNTS["thread"]))

    names = {
        "async": "async def (inline)",
        "none": 'def, isolate="none"',
        "thread": 'def, isolate="thread"',
        "process": 'def, isolate="process" (warm)',
    }
    rows: list[tuple[str, float, str]] = []
    for mode in tools:
        rows.append((f"{names[mode]}: agent run, wall per run", best_run[mode][0] * 1e6, "µs"))
        rows.append((f"{names[mode]}: agent run, CPU per run", best_run[mode][1] * 1e6, "µs"))
        rows.append((f"{names[mode]}: bare tool.call, wall per call", best_bare[mode] * 1e6, "µs"))
    rows.append(("trio.to_thread.run_sync of a no-op (baseline hop), wall per call", best_to_thread * 1e6, "µs"))
    report(rows)
    print()
    base_wall, base_cpu = best_run["async"]
    width = max(len(n) for n in names.values())
    print(f"  {'ratio to the async tool':<{width}}  {'run wall':>9}  {'run CPU':>9}  {'bare call':>9}")
    for mode in tools:
        wall, used = best_run[mode]
        print(
            f"  {names[mode]:<{width}}  {wall / base_wall:8.2f}×  {used / base_cpu:8.2f}×"
            f"  {best_bare[mode] / best_bare['async']:8.1f}×"
        )
    wall, used = best_run["thread"]
    print(
        f'\nisolate="thread" agent run vs async tool: {wall / base_wall:.2f}× wall, {used / base_cpu:.2f}× CPU'
        " (target <= 1.5x)"
    )
    print(
        f'isolate="thread" bare call vs trio.to_thread.run_sync: {best_bare["thread"] / best_to_thread:.2f}×'
        " (the hop itself, against trio's own)"
    )


def versions() -> str:
    try:
        commit = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    v = importlib.metadata.version
    try:
        parallel = f"trio-parallel {v('trio-parallel')}"
    except importlib.metadata.PackageNotFoundError:
        parallel = "no trio-parallel"
    return (
        f"{datetime.date.today()}: condukt {v('condukt')} ({commit}), Python {platform.python_version()},"
        f" trio {trio.__version__}, {parallel}"
    )


if __name__ == "__main__":
    print(versions())
    print(f"workload: 2 model turns + 1 no-op tool call per run, in-process model; best of {ROUNDS} rounds")
    trio.run(main)
