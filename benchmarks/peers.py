"""condukt and its peers on the same workloads, in one process run, side by side.

Two workloads, each run on condukt and, when they are installed, on
pydantic-ai and openai-agents (``pip install -e ".[bench]"``; a peer that is
missing is reported and skipped, never estimated):

1. **In-process**: one run = 2 model turns + 1 no-op tool call on an
   in-process fake model: ``benchmarks/agent_peers.py`` (run from here when
   both peers are installed; see its docstring).
2. **Over HTTP**: ``N`` concurrent runs (default 100), each 2 model turns +
   1 no-op tool call, against a local OpenAI Chat Completions server
   (``condukt.testing.server``) that waits ``LATENCY`` (50 ms) before each
   answer, in a separate process so its CPU is not counted. Each library
   uses its own OpenAI-compatible client pointed at that server:
   condukt ``condukt.run(..., model="openai:...", base_url=...)`` (a
   transient supervised agent per run, spawn and stop included), pydantic-ai
   ``OpenAIChatModel`` with an ``OpenAIProvider(base_url=...)``,
   openai-agents ``OpenAIChatCompletionsModel`` over ``AsyncOpenAI(base_url=...)``.
   Each library builds its agent and client in its own event loop, runs an
   untimed warm-up batch (connections, caches), then the timed batch.
   Measured: wall time of the batch (ideal: 2 × LATENCY) and process CPU
   per run. Libraries alternate, ``ROUNDS`` rounds, best round kept.

Ratios are peer / condukt (above 1: condukt is cheaper or faster).

    python benchmarks/peers.py [N concurrent runs, default 100]
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import os
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path

import trio

import condukt

N = int(sys.argv[1]) if len(sys.argv) > 1 else 100
LATENCY = 0.05
ROUNDS = 3

os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")

PEERS = {"pydantic-ai": ("pydantic_ai", "pydantic-ai-slim"), "openai-agents": ("agents", "openai-agents")}


def installed(name: str) -> bool:
    module, dist = PEERS[name]
    try:
        importlib.metadata.version(dist)
        __import__(module)
    except (importlib.metadata.PackageNotFoundError, ImportError):
        return False
    return True


# --- condukt ---------------------------------------------------------------------------------------


@condukt.tool
async def noop() -> str:
    """Does nothing."""
    return "ok"


async def condukt_round(url: str) -> tuple[float, float]:
    async with condukt.open_node() as node:

        async def batch() -> list[str]:
            answers: list[str] = []

            async def one() -> None:
                answers.append(
                    await condukt.run("go", model="openai:bench", base_url=url, api_key="k", tools=[noop], node=node)
                )

            async with trio.open_nursery() as nursery:
                for _ in range(N):
                    nursery.start_soon(one)
            return answers

        return await timed(batch)


# --- peers -----------------------------------------------------------------------------------------


async def pydantic_round(url: str) -> tuple[float, float]:
    from pydantic_ai import Agent
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("bench", provider=OpenAIProvider(base_url=url, api_key="k"))
    agent = Agent(model)

    @agent.tool_plain
    async def noop() -> str:
        """Does nothing."""
        return "ok"

    async def batch() -> list[str]:
        results = await asyncio.gather(*(agent.run("go") for _ in range(N)))
        return [result.output for result in results]

    return await timed(batch)


async def openai_agents_round(url: str) -> tuple[float, float]:
    import agents
    from openai import AsyncOpenAI

    agents.set_tracing_disabled(True)
    client = AsyncOpenAI(base_url=url, api_key="k")
    model = agents.OpenAIChatCompletionsModel(model="bench", openai_client=client)

    @agents.function_tool
    async def noop() -> str:
        """Does nothing."""
        return "ok"

    agent = agents.Agent(name="bench", model=model, tools=[noop])

    async def batch() -> list[str]:
        results = await asyncio.gather(*(agents.Runner.run(agent, "go") for _ in range(N)))
        return [str(result.final_output) for result in results]

    try:
        return await timed(batch)
    finally:
        await client.close()


# --- measuring -------------------------------------------------------------------------------------


async def timed(batch: Callable[[], Awaitable[list[str]]]) -> tuple[float, float]:
    """(wall seconds, CPU seconds) of one batch after an untimed warm-up batch (connections, caches).

    Checks that every run answered "done" (the server's answer after the tool result).
    """
    for warm in (True, False):
        gc.collect()
        wall, cpu = time.perf_counter(), time.process_time()
        answers = await batch()
        wall, cpu = time.perf_counter() - wall, time.process_time() - cpu
        if answers != ["done"] * N:
            raise AssertionError(f"expected {N} answers 'done', got {answers[:3]}... ({len(answers)})")
        if not warm:
            return wall, cpu
    raise AssertionError("unreachable")


def versions(present: list[str]) -> str:
    try:
        commit = subprocess.run(
            ["git", "-C", str(Path(__file__).resolve().parent), "rev-parse", "--short", "HEAD"],
            capture_output=True,
            text=True,
            check=True,
        ).stdout.strip()
    except (OSError, subprocess.CalledProcessError):
        commit = "?"
    parts = [f"condukt {condukt.__version__} ({commit})"]
    parts += [f"{PEERS[name][1]} {importlib.metadata.version(PEERS[name][1])}" for name in present]
    return ", ".join(parts) + f", Python {platform.python_version()}, trio {trio.__version__}"


def main() -> None:
    present = [name for name in PEERS if installed(name)]
    missing = [name for name in PEERS if name not in present]
    print(versions(present))
    for name in missing:
        print(f"{name} is not installed: skipped (pip install -e '.[bench]')")

    if not missing:
        print("\n== 1. in-process: benchmarks/agent_peers.py ==\n", flush=True)
        subprocess.run([sys.executable, str(Path(__file__).with_name("agent_peers.py"))], check=True)

    print(f"\n== 2. over HTTP: {N} concurrent runs, 2 turns + 1 tool each, server latency {LATENCY * 1000:g} ms ==")
    server = subprocess.Popen(
        [sys.executable, "-m", "condukt.testing.server", "--quiet", "--latency", str(LATENCY)],
        stdin=subprocess.PIPE,
        stdout=subprocess.PIPE,
        text=True,
    )
    try:
        assert server.stdout is not None
        url = f"{server.stdout.readline().strip()}/v1"  # its first line: the base URL
        libraries: dict[str, Callable[[], tuple[float, float]]] = {
            "condukt": lambda: trio.run(condukt_round, url)
        }
        if "pydantic-ai" in present:
            libraries["pydantic-ai"] = lambda: asyncio.run(pydantic_round(url))
        if "openai-agents" in present:
            libraries["openai-agents"] = lambda: asyncio.run(openai_agents_round(url))
        rounds: dict[str, list[tuple[float, float]]] = {name: [] for name in libraries}
        for _ in range(ROUNDS):  # each library in its own event loop, alternating
            for name, one_round in libraries.items():
                rounds[name].append(one_round())
    finally:
        assert server.stdin is not None
        server.stdin.close()
        server.wait(timeout=10)

    best = {name: (min(w for w, _ in r), min(c for _, c in r)) for name, r in rounds.items()}
    print(f"\n  {'library':<14} {'wall (batch)':>13} {'x ideal':>8} {'CPU per run':>12} {'ratio wall':>11} {'ratio CPU':>10}")
    base_wall, base_cpu = best["condukt"]
    for name, (wall, cpu) in best.items():
        print(
            f"  {name:<14} {wall * 1000:10.0f} ms {wall / (2 * LATENCY):7.2f}× {cpu / N * 1e3:9.2f} ms"
            f" {wall / base_wall:10.2f}× {cpu / base_cpu:9.2f}×"
        )
    print(f"\nideal wall time: {2 * LATENCY * 1000:g} ms (2 model turns of {LATENCY * 1000:g} ms); best of {ROUNDS} rounds")
    print("ratios: library / condukt (above 1: condukt is faster or uses less CPU)")


if __name__ == "__main__":
    main()
