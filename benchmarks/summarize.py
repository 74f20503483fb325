"""Summarize's bookkeeping when the limit is far: CPU of a long tool run with and without it.

Each run is a 100-turn tool run (one call of a no-op tool per turn, a
300-character result each) on a fresh agent. The same runs are timed
without a compactor (the baseline) and with
``compactor=Summarize(max_tokens=10**9)``, whose limit is never reached:
what it costs is the size check before every request (the history's
characters counted incrementally, the calibration from usage) and the
kernel's ``wrap_model_request`` path it takes. Figures are this process's
CPU time, the round with the median ratio of several alternating rounds, and their ratio (target:
at most 1.05), for two models:

* ``anthropic``: the Anthropic protocol over HTTP, streamed, to the local
  protocol server running in a subprocess (its CPU is not counted): a run
  as an application makes it;
* ``in-process``: a model object answering at once, no encoding at all:
  the worst case, where the run costs almost nothing besides the loop.

    python benchmarks/summarize.py
"""

from __future__ import annotations

import gc
import json
import subprocess
import sys
import tempfile
import time
from typing import Any

import trio

import condukt
from condukt.compaction import Summarize
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage
from condukt.providers import ModelRequest

TURNS = 100
RUNS = 20
ROUNDS = 7
RESULT = "r" * 300


class Noop(condukt.Tool):
    name = "noop"
    description = "Does nothing."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return RESULT


class Calls:
    """Calls the tool ``TURNS`` times, then answers; reports input tokens as a provider would."""

    name = "bench"

    async def complete(self, request: ModelRequest, emit: Any) -> AssistantMessage:
        turn = len(request.messages) // 2 + 1
        usage = Usage(len(request.messages) * 40, 5)
        if turn > TURNS:
            return AssistantMessage((TextBlock("done"),), usage, "end_turn")
        return AssistantMessage((ToolCall(f"c{turn}", "noop", {"x": turn}),), usage, "tool_use")


class Wrap(condukt.Capability):
    """A capability that only wraps each model request: the kernel's cost of that path, without Summarize's."""

    async def wrap_model_request(self, run: Any, request: Any, send: Any) -> Any:
        return await send(request)


async def runs(node: condukt.Node, compactor: Any, model: Any) -> float:
    """CPU seconds for ``RUNS`` runs, each on a fresh agent (``compactor`` "wrap": the no-op wrapper instead)."""
    gc.collect()
    options: dict[str, Any] = {"capabilities": [Wrap()]} if compactor == "wrap" else {"compactor": compactor}
    start = time.process_time()
    for _ in range(RUNS):
        agent = await node.spawn(condukt.Agent, **model(), tools=[Noop], **options)
        text = await agent.run("go", max_turns=TURNS + 5)
        assert text == "done", text
        await agent.stop()
    return time.process_time() - start


async def compare(node: condukt.Node, model: Any) -> tuple[float, float, float]:
    far = Summarize(max_tokens=10**9, ahead=None)
    await runs(node, None, model)  # warm up
    await runs(node, far, model)
    rounds = [
        (await runs(node, None, model), await runs(node, far, model), await runs(node, "wrap", model))
        for _ in range(ROUNDS)
    ]
    # Alternating rounds, the median round: on a shared machine a neighbour's burst lands on
    # one round, not on one side.
    rounds.sort(key=lambda each: each[1] / each[0])
    return rounds[len(rounds) // 2]


def server(steps: int) -> tuple[subprocess.Popen[str], str]:
    """The protocol server in a subprocess, scripted with ``steps`` runs of the tool run; its URL."""
    script = tempfile.NamedTemporaryFile("w", suffix=".jsonl", delete=False)  # noqa: SIM115
    for _ in range(steps):
        for turn in range(1, TURNS + 1):
            script.write(json.dumps({"call": "noop", "arguments": {"x": turn}, "usage": [turn * 40, 5]}) + "\n")
        script.write(json.dumps({"reply": "done"}) + "\n")
    script.close()
    process = subprocess.Popen(
        [sys.executable, "-m", "condukt.testing.server", "--quiet", "--script", script.name],
        stdout=subprocess.PIPE,
        text=True,
    )
    assert process.stdout is not None
    url = process.stdout.readline().strip()
    return process, url


async def main() -> None:
    print(f"{TURNS}-turn tool runs, {RUNS} per round, the median of {ROUNDS} alternating rounds (this process's CPU):")
    process, url = server(RUNS * (3 * ROUNDS + 2))
    try:
        async with condukt.open_node() as node:
            for name, model in (
                ("anthropic", lambda: {"model": "anthropic:bench", "api_key": "k", "base_url": url}),
                ("in-process", lambda: {"model": Calls()}),
            ):
                plain, with_summarize, wrapped = await compare(node, model)
                per_turn = 1e6 / (RUNS * (TURNS + 1))
                print(f"  {name}: without a compactor            {plain * per_turn:8.1f} µs per turn")
                print(f"  {name}: Summarize, limit far           {with_summarize * per_turn:8.1f} µs per turn")
                print(f"  {name}: a no-op wrap_model_request     {wrapped * per_turn:8.1f} µs per turn")
                print(f"  {name}: Summarize / none               {with_summarize / plain:8.3f}")
                print(f"  {name}: no-op wrapper / none           {wrapped / plain:8.3f}")
    finally:
        process.terminate()
        process.wait()


if __name__ == "__main__":
    trio.run(main)
