"""The same agent workload on condukt and on two peer libraries, in one process.

One run = 2 model turns + 1 call of a no-op tool taking one integer argument,
on an in-process fake model (no network): turn 1 the model asks for the tool
call, turn 2 it answers with text. Each library gets its own idiomatic fake:

- condukt: ``condukt.Agent`` with a model object (``name`` + ``async complete``)
  and a no-op ``condukt.Tool``; on trio.
- pydantic-ai: ``Agent(FunctionModel(...))`` with an ``@agent.tool_plain``; on asyncio.
- openai-agents: ``agents.Agent`` with a custom ``agents.Model`` (``get_response``),
  a ``@function_tool``, and ``Runner.run``; on asyncio, tracing disabled.

Every fake model builds a fresh response for each turn (as a provider adapter
parsing a reply would), and every tool is an ``async def`` (both peers send a
plain ``def`` tool to a worker thread). Each library runs in its own event
loop (``trio.run``, then ``asyncio.run`` twice), one after the other, and
that round is done three times, so that load from other work on the machine
spreads over all three libraries rather than falling on one. In every round
each measurement is warmed up and timed over a number of runs sized (in the
first round) to take about TARGET seconds of CPU; the best round is kept.
The figure is process CPU time (``time.process_time``, all threads) per run.

For condukt two figures: a run on an agent process that is already running
(``agent.run`` + ``agent.clear``, so every run starts from an empty history
like the peers' runs do), and a whole agent life (``node.spawn`` +
``agent.run`` + ``agent.stop``). The peers' agents are plain objects, not
processes: their figure is one ``run`` call on an agent built beforehand.

    pip install -e ".[bench]"
    python benchmarks/agent_peers.py [target seconds per measurement, default 1.2]
"""

from __future__ import annotations

import asyncio
import gc
import importlib.metadata
import math
import os
import platform
import subprocess
import sys
import time
from collections.abc import Awaitable, Callable
from pathlib import Path
from typing import Any

import trio

import condukt
from condukt.messages import AssistantMessage, TextBlock, ToolCall, ToolResultMessage, Usage, UserMessage

TARGET = float(sys.argv[1]) if len(sys.argv) > 1 else 1.2  # seconds of CPU per measurement
REPEAT = 3
WARMUP = 100
CALIBRATE = 100
MIN_RUNS = 200

PEERS = {
    # module: (distribution, what to install)
    "pydantic_ai": ("pydantic-ai-slim", 'pip install -e ".[bench]"  (or: pip install pydantic-ai-slim)'),
    "agents": ("openai-agents", 'pip install -e ".[bench]"  (or: pip install openai-agents)'),
}


def require_peers() -> None:
    """Exit with a clear message if a peer library is not installed."""
    missing = []
    for module, (dist, install) in PEERS.items():
        try:
            importlib.metadata.version(dist)
            __import__(module)
        except importlib.metadata.PackageNotFoundError:
            missing.append(f"  - {dist} is not installed\n    install it with: {install}")
        except ImportError as exc:
            missing.append(
                f"  - {dist} is installed but {module!r} does not import: {exc}\n    reinstall it with: {install}"
            )
    if missing:
        sys.exit("agent_peers.py needs the peer libraries it compares against:\n" + "\n".join(missing))


# openai-agents: no tracing export (no network, no API key); set before it is imported.
os.environ.setdefault("OPENAI_AGENTS_DISABLE_TRACING", "1")
require_peers()

import agents  # noqa: E402
import pydantic_ai  # noqa: E402
from agents.items import ModelResponse as OAModelResponse  # noqa: E402
from agents.usage import Usage as OAUsage  # noqa: E402
from openai.types.responses import ResponseFunctionToolCall, ResponseOutputMessage, ResponseOutputText  # noqa: E402
from pydantic_ai.messages import ModelResponse, TextPart, ToolCallPart, ToolReturnPart  # noqa: E402
from pydantic_ai.models.function import AgentInfo, FunctionModel  # noqa: E402
from pydantic_ai.usage import RequestUsage  # noqa: E402

agents.set_tracing_disabled(True)


class Count:
    """Model turns and tool calls of one library (checked after every measurement)."""

    def __init__(self) -> None:
        self.turns = 0
        self.tools = 0

    def reset(self) -> None:
        self.turns = self.tools = 0

    def check(self, runs: int, what: str) -> None:
        if (self.turns, self.tools) != (2 * runs, runs):
            raise AssertionError(
                f"{what}: {runs} runs made {self.turns} model turns and {self.tools} tool calls "
                f"(expected {2 * runs} and {runs})"
            )


def cpu() -> float:
    return time.process_time()


Results = dict[str, tuple[float, int]]  # measure -> (CPU seconds per run, runs timed)


async def measure(
    results: Results, sizes: dict[str, int], what: str, once: Callable[[], Awaitable[Any]], count: Count | None
) -> None:
    """CPU seconds per ``await once()``, after a warm-up, over ``sizes[what]`` runs.

    The first time, the number of runs is chosen to take about TARGET seconds.
    ``count`` (if given) must show 2 model turns and 1 tool call per run.
    """
    for _ in range(WARMUP):
        await once()
    runs = sizes.get(what)
    if runs is None:
        start = cpu()
        for _ in range(CALIBRATE):
            await once()
        runs = max(MIN_RUNS, math.ceil(TARGET / max((cpu() - start) / CALIBRATE, 1e-6)))
    gc.collect()
    if count is not None:
        count.reset()
    start = cpu()
    for _ in range(runs):
        await once()
    used = cpu() - start
    if count is not None:
        count.check(runs, what)
    results[what] = (used / runs, runs)


# --- condukt (trio) ---------------------------------------------------------------------------

CONDUKT = Count()


class CNoop(condukt.Tool):
    name = "noop"
    description = "Does nothing."
    parameters = {"type": "object", "properties": {"x": {"type": "integer"}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        CONDUKT.tools += 1
        return "ok"


class CTwoTurns:
    """Turn 1: one call of ``noop``; turn 2 (after its result): the answer."""

    name = "bench"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        CONDUKT.turns += 1
        if type(request.messages[-1]) is ToolResultMessage:
            return AssistantMessage((TextBlock("done"),), Usage(20, 5), "end_turn")
        return AssistantMessage((ToolCall("c1", "noop", {"x": 1}),), Usage(10, 5), "tool_use")


RUN = "condukt: run on a running agent (+ clear)"
CLEAR = "condukt: agent.clear() alone"
LIFE = "condukt: spawn + run + stop"


async def condukt_part(sizes: dict[str, int]) -> Results:
    options: dict[str, Any] = {"model": CTwoTurns(), "tools": [CNoop], "load_project_instructions": False}
    results: Results = {}
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, **options)

        # The workload really is 2 turns + 1 tool call (checked once, outside the timed loops).
        CONDUKT.reset()
        assert await agent.run("go") == "done"
        CONDUKT.check(1, "condukt")
        kinds = [type(m) for m in await agent.history()]
        assert kinds == [UserMessage, AssistantMessage, ToolResultMessage, AssistantMessage], kinds
        await agent.clear()

        async def run_on_running() -> None:
            await agent.run("go")
            await agent.clear()

        await measure(results, sizes, RUN, run_on_running, CONDUKT)
        # What the first figure carries beyond the run itself.
        await measure(results, sizes, CLEAR, agent.clear, None)
        await agent.stop()

        async def spawn_run_stop() -> None:
            a = await node.spawn(condukt.Agent, **options)
            await a.run("go")
            await a.stop()

        await measure(results, sizes, LIFE, spawn_run_stop, CONDUKT)
    return results


# --- pydantic-ai (asyncio) --------------------------------------------------------------------

PYDANTIC = Count()


async def pai_two_turns(messages: list[Any], info: AgentInfo) -> ModelResponse:
    PYDANTIC.turns += 1
    last = messages[-1]
    if any(isinstance(part, ToolReturnPart) for part in last.parts):
        return ModelResponse(parts=[TextPart("done")], usage=RequestUsage(input_tokens=20, output_tokens=5))
    return ModelResponse(
        parts=[ToolCallPart("noop", {"x": 1}, tool_call_id="c1")], usage=RequestUsage(input_tokens=10, output_tokens=5)
    )


def pydantic_agent() -> pydantic_ai.Agent[None, str]:
    agent = pydantic_ai.Agent(FunctionModel(pai_two_turns, model_name="bench"), name="bench")

    @agent.tool_plain
    async def noop(x: int) -> str:
        """Does nothing."""
        PYDANTIC.tools += 1
        return "ok"

    return agent


async def pydantic_part(sizes: dict[str, int]) -> Results:
    agent = pydantic_agent()

    PYDANTIC.reset()
    result = await agent.run("go")
    assert result.output == "done", result.output
    PYDANTIC.check(1, "pydantic-ai")
    messages = result.all_messages()
    responses = [m for m in messages if isinstance(m, ModelResponse)]
    returns = [p for m in messages for p in m.parts if isinstance(p, ToolReturnPart)]
    assert len(responses) == 2 and [(p.tool_name, p.content) for p in returns] == [("noop", "ok")], messages

    async def once() -> None:
        await agent.run("go")

    results: Results = {}
    await measure(results, sizes, "pydantic-ai: agent.run", once, PYDANTIC)
    return results


# --- openai-agents (asyncio) ------------------------------------------------------------------

OPENAI = Count()


class OATwoTurns(agents.Model):
    """Turn 1: one ``function_call`` of ``noop``; turn 2 (after its output): an assistant message."""

    async def get_response(
        self,
        system_instructions: str | None,
        input: str | list[Any],
        model_settings: Any,
        tools: list[Any],
        output_schema: Any,
        handoffs: list[Any],
        tracing: Any,
        *,
        previous_response_id: str | None = None,
        conversation_id: str | None = None,
        prompt: Any = None,
        **kwargs: Any,
    ) -> OAModelResponse:
        OPENAI.turns += 1
        if not isinstance(input, str) and input and input[-1].get("type") == "function_call_output":
            text = ResponseOutputText(type="output_text", text="done", annotations=[])
            item: Any = ResponseOutputMessage(
                id="m1", type="message", role="assistant", status="completed", content=[text]
            )
            usage = OAUsage(requests=1, input_tokens=20, output_tokens=5, total_tokens=25)
        else:
            item = ResponseFunctionToolCall(
                id="f1", call_id="c1", type="function_call", name="noop", arguments='{"x": 1}'
            )
            usage = OAUsage(requests=1, input_tokens=10, output_tokens=5, total_tokens=15)
        return OAModelResponse(output=[item], usage=usage, response_id=None)

    def stream_response(self, *args: Any, **kwargs: Any) -> Any:
        raise NotImplementedError("the benchmark does not stream")


@agents.function_tool
async def noop(x: int) -> str:
    """Does nothing."""
    OPENAI.tools += 1
    return "ok"


async def openai_part(sizes: dict[str, int]) -> Results:
    agent = agents.Agent(name="bench", instructions=None, model=OATwoTurns(), tools=[noop])

    OPENAI.reset()
    result = await agents.Runner.run(agent, "go")
    assert result.final_output == "done", result.final_output
    OPENAI.check(1, "openai-agents")
    assert len(result.raw_responses) == 2, result.raw_responses
    outputs = [i.output for i in result.new_items if isinstance(i, agents.ToolCallOutputItem)]
    assert outputs == ["ok"], result.new_items

    async def once() -> None:
        await agents.Runner.run(agent, "go")

    results: Results = {}
    await measure(results, sizes, "openai-agents: Runner.run", once, OPENAI)
    return results


# --- report -----------------------------------------------------------------------------------


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
    return (
        f"condukt {v('condukt')} ({commit}), pydantic-ai-slim {v('pydantic-ai-slim')}, "
        f"openai-agents {v('openai-agents')}, Python {platform.python_version()}, trio {trio.__version__}"
    )


def main() -> None:
    print(versions())
    print(
        f"workload: 2 model turns + 1 no-op tool call per run, in-process fake models; "
        f"{REPEAT} rounds of ~{TARGET:g} s CPU per measurement, best round kept"
    )
    sizes: dict[str, int] = {}
    rounds: dict[str, list[float]] = {}
    for _ in range(REPEAT):
        for results in (
            trio.run(condukt_part, sizes),
            asyncio.run(pydantic_part(sizes)),
            asyncio.run(openai_part(sizes)),
        ):
            for name, (seconds, runs) in results.items():
                sizes[name] = runs
                rounds.setdefault(name, []).append(seconds)
    best = {name: min(times) for name, times in rounds.items()}

    width = max(len(name) for name in best)
    print()
    print(f"  {'measure':<{width}}  {'CPU per run':>12}  {'worst round':>12}  {'runs':>6}")
    for name, times in rounds.items():
        print(f"  {name:<{width}}  {min(times) * 1e6:9.1f} µs  {max(times) * 1e6:9.1f} µs  {sizes[name]:>6}")
    print()
    print("The peers' agents are plain objects, not processes: their figure is one run call on an")
    print("agent built beforehand. The like-for-like condukt figure is a run on an agent process that")
    print("is already running, from an empty history (so it includes an agent.clear() call); spawn +")
    print("run + stop adds the start and stop of a supervised process around the run.")
    print()
    print(f"  {'ratio peer / condukt':<{width}}  {'vs run':>12}  {'vs spawn+run+stop':>18}")
    for name, seconds in best.items():
        if not name.startswith("condukt"):
            print(f"  {name:<{width}}  {seconds / best[RUN]:11.1f}×  {seconds / best[LIFE]:17.1f}×")


if __name__ == "__main__":
    main()
