"""Usage limits per run: requests, tokens and cost stop a run with a typed error, history consistent."""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt.agent import UsageLimitExceeded, UsageLimits
from condukt.messages import AssistantMessage, ToolCall, Usage
from condukt.testing import FunctionModel, reply


class Echo(condukt.Tool):
    name = "echo"
    description = "Echoes"

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "again"


def looping(usage: Usage) -> FunctionModel:
    """A model that asks for the tool on every turn, each response costing ``usage``."""
    count = 0

    def respond(request: Any) -> AssistantMessage:
        nonlocal count
        count += 1
        return AssistantMessage((ToolCall(f"c{count}", "echo", {}),), usage=usage)

    return FunctionModel(respond)


async def test_max_requests_stops_a_tool_loop() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=looping(Usage(10, 5)), tools=[Echo], capabilities=[UsageLimits(max_requests=3)]
        )
        with pytest.raises(UsageLimitExceeded, match="max_requests=3") as caught:
            await agent.run("loop")
        assert (caught.value.limit, caught.value.allowed, caught.value.used) == ("max_requests", 3, 3)
        history = await agent.history()
        # The completed turns stay, each tool call with its result, as after an abort.
        assert [type(m).__name__ for m in history] == ["UserMessage"] + ["AssistantMessage", "ToolResultMessage"] * 3
        assert agent.alive


async def test_token_and_cost_limits() -> None:
    async with condukt.open_node() as node:
        tokens = await node.spawn(
            condukt.Agent, model=looping(Usage(400, 100)), tools=[Echo],
            capabilities=[UsageLimits(max_total_tokens=1200)],
        )
        with pytest.raises(UsageLimitExceeded, match="max_total_tokens=1200 reached: the run used 1500"):
            await tokens.run("loop")
        priced = UsageLimits(max_cost=0.01, prices=(3.0, 15.0))  # dollars per million tokens
        cost = await node.spawn(condukt.Agent, model=looping(Usage(1000, 200)), tools=[Echo], capabilities=[priced])
        with pytest.raises(UsageLimitExceeded, match="max_cost") as caught:
            await cost.run("loop")
        assert caught.value.used == pytest.approx(2 * (1000 * 3 + 200 * 15) / 1e6)


async def test_each_run_starts_from_zero_and_a_final_answer_at_the_limit_is_kept() -> None:
    script = iter([
        AssistantMessage((ToolCall("a", "echo", {}),), usage=Usage(1, 1)),
        reply("done", usage=Usage(1, 1)),
    ] * 2)  # fmt: skip

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=FunctionModel(lambda r: next(script)), tools=[Echo],
            capabilities=[UsageLimits(max_requests=2)],
        )
        assert await agent.run("one") == "done"
        assert await agent.run("two") == "done"


def test_options_are_checked() -> None:
    with pytest.raises(ValueError, match="max_requests must be a positive int"):
        UsageLimits(max_requests=0)
    with pytest.raises(ValueError, match="max_cost needs prices"):
        UsageLimits(max_cost=1.0)
    with pytest.raises(ValueError, match="prices must be"):
        UsageLimits(max_cost=1.0, prices=(1.0,))  # type: ignore[arg-type]
    assert repr(UsageLimits(max_requests=3)) == "UsageLimits(max_requests=3)"
