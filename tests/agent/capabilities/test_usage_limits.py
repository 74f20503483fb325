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
    assert UsageLimits(max_cost=1.0).prices is None  # the cost comes from the answers' usage (docs/providers.md)
    with pytest.raises(ValueError, match="prices must be"):
        UsageLimits(max_cost=1.0, prices=(1.0,))  # type: ignore[arg-type]
    assert repr(UsageLimits(max_requests=3)) == "UsageLimits(max_requests=3)"


async def test_an_agent_token_budget_spans_runs_and_refuses_a_run_once_spent() -> None:
    budget = UsageLimits(max_total_tokens=250, per="agent")
    model = FunctionModel(lambda request: reply("ok", usage=Usage(80, 20)))
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, capabilities=[budget], load_project_instructions=False)
        assert await agent.run("one") == "ok"
        assert await agent.run("two") == "ok"
        with pytest.raises(UsageLimitExceeded, match="the agent used 300") as caught:
            await agent.run("three")  # its response takes the agent over 250
        assert (caught.value.limit, caught.value.per) == ("max_total_tokens", "agent")
        with pytest.raises(UsageLimitExceeded):
            await agent.run("four")  # spent: refused before any request
        history = await agent.history()
    assert len(model.requests) == 3
    # Consistent: completed turns only (the third run's turn completed before the check), none of "four".
    assert [m.text for m in history] == ["one", "ok", "two", "ok", "three", "ok"]
    assert budget.used()["max_total_tokens"] == 300


async def test_max_tool_calls_stops_before_the_calls_run() -> None:
    ran: list[int] = []

    @condukt.tool
    def step(n: int) -> str:
        """A step."""
        ran.append(n)
        return "done"

    def respond(request: Any) -> Any:
        turn = sum(1 for m in request.messages if isinstance(m, AssistantMessage))
        return [ToolCall(f"c{turn}{i}", "step", {"n": turn * 10 + i}) for i in range(2)]

    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent,
            model=FunctionModel(lambda r: AssistantMessage(tuple(respond(r)))),
            tools=[step],
            capabilities=[UsageLimits(max_tool_calls=3)],
            load_project_instructions=False,
        )
        with pytest.raises(UsageLimitExceeded, match="max_tool_calls=3"):
            await agent.run("go")
        history = await agent.history()
    assert sorted(ran) == [0, 1]  # the second turn's two calls would have made four
    assert [type(m).__name__ for m in history] == ["UserMessage", "AssistantMessage", "ToolResultMessage", "ToolResultMessage"]


async def test_max_duration_cancels_the_request_in_flight(autojump_clock: Any) -> None:
    model = FunctionModel(lambda request: reply("late", delay=100))
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, capabilities=[UsageLimits(max_duration=30)], load_project_instructions=False
        )
        with pytest.raises(UsageLimitExceeded, match="max_duration=30"):
            await agent.run("slow", timeout=None)
        assert await agent.history() == ()


def test_bad_budget_values_are_refused() -> None:
    with pytest.raises(ValueError, match="max_tool_calls"):
        UsageLimits(max_tool_calls=0)
    with pytest.raises(ValueError, match="max_duration"):
        UsageLimits(max_duration=-1)
    with pytest.raises(ValueError, match="per"):
        UsageLimits(per="node")  # type: ignore[arg-type]
