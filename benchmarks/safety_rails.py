"""Safety rails: what an input guardrail adds to a run's latency, what an approval adds to a call's CPU.

* Input guardrail latency: a model that takes 50 ms and a check that takes
  50 ms. The baseline is the same run without a guardrail; the concurrent
  guardrail (the default) should cost ~1.0x, a sequential one
  (``concurrent=False``) ~2x.
* Approval overhead: CPU per run of one tool call that needs approval,
  approved by an ``on_event`` callback as soon as it is asked, as a ratio
  to the same run with a tool that needs none and the same callback (so
  both runs build their events), both measured here.

    python benchmarks/safety_rails.py
"""

from __future__ import annotations

import time
from typing import Any

import trio
from _common import report

import condukt
from condukt.agent import InputGuardrail
from condukt.events import ApprovalRequested, Event
from condukt.messages import AssistantMessage, TextBlock, ToolCall, Usage, UserMessage

LATENCY = 0.05
LATENCY_RUNS = 20
CPU_RUNS = 2_000


class SlowModel:
    """Answers after ``LATENCY`` seconds."""

    name = "slow"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        await trio.sleep(LATENCY)
        return AssistantMessage((TextBlock("ok"),), Usage(), "end_turn")


class OneCall:
    """Calls ``noop`` once, then answers."""

    name = "one-call"

    async def complete(self, request: condukt.ModelRequest, emit: Any) -> AssistantMessage:
        if type(request.messages[-1]) is UserMessage:
            return AssistantMessage((ToolCall("c1", "noop", {}),), Usage(), "tool_use")
        return AssistantMessage((TextBlock("done"),), Usage(), "end_turn")


async def slow_check(prompt: str) -> None:
    await trio.sleep(LATENCY)


async def latency(capabilities: list[Any]) -> float:
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=SlowModel(), capabilities=capabilities, load_project_instructions=False
        )
        start = time.perf_counter()
        for _ in range(LATENCY_RUNS):
            await agent.run("hi")
        return (time.perf_counter() - start) / LATENCY_RUNS


async def cpu_per_run(approval: bool) -> float:
    @condukt.tool(isolate="none", requires_approval=approval)
    def noop() -> str:
        """Does nothing."""
        return "x"

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=OneCall(), tools=[noop], load_project_instructions=False)

        async def approve(event: Event) -> None:
            if type(event) is ApprovalRequested:
                await agent.approve(event.call_id)

        best = float("inf")
        for _ in range(3):
            start = time.process_time()
            for i in range(CPU_RUNS):
                await agent.run("go", on_event=approve)
                if i % 100 == 99:
                    await agent.clear()
            best = min(best, (time.process_time() - start) / CPU_RUNS)
        return best


async def main() -> None:
    plain = await latency([])
    concurrent = await latency([InputGuardrail(slow_check)])
    sequential = await latency([InputGuardrail(slow_check, concurrent=False)])
    without = await cpu_per_run(False)
    with_approval = await cpu_per_run(True)
    report(
        [
            ("run, 50 ms model, no guardrail: wall per run", plain * 1e3, "ms"),
            ("+ 50 ms input guardrail, concurrent: wall per run", concurrent * 1e3, "ms"),
            ("+ 50 ms input guardrail, sequential: wall per run", sequential * 1e3, "ms"),
            ("run with one tool call: CPU per run", without * 1e6, "µs"),
            ("same, the call approved via on_event: CPU per run", with_approval * 1e6, "µs"),
        ]
    )
    print(f"concurrent input guardrail vs none: {concurrent / plain:.2f}x (target <= 1.1x)")
    print(f"sequential input guardrail vs none: {sequential / plain:.2f}x")
    print(f"approved call vs plain call, CPU per run: {with_approval / without:.2f}x")


if __name__ == "__main__":
    trio.run(main)
