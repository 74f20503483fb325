"""Cost from a maintained price table (genai-prices, the [prices] extra) in usage, events, telemetry and UsageLimits.

The table's own ``calc_price`` is the reference each figure is checked against (never a price typed
here); prices a user gives replace the table's; a model no table knows reports ``cost=None``.
"""

from __future__ import annotations

from typing import Any

import pytest

import condukt
from condukt import telemetry
from condukt.agent import UsageLimitExceeded, UsageLimits
from condukt.events import AgentEnd
from condukt.messages import AssistantMessage, Usage
from condukt.providers import Price
from condukt.providers._prices import lookup_price
from condukt.testing.server import ProtocolServer, reply, tool_use

from .helpers import Weather, collect, spawn

genai_prices = pytest.importorskip("genai_prices", reason="genai-prices ([prices] extra) is not installed")


def table_cost(model: str, provider_id: str, usage: Usage) -> float:
    """What genai-prices itself says (its input count includes cached tokens)."""
    total_input = usage.input_tokens + usage.cache_read_tokens + usage.cache_write_tokens
    table_usage = genai_prices.Usage(
        input_tokens=total_input,
        output_tokens=usage.output_tokens,
        cache_read_tokens=usage.cache_read_tokens,
        cache_write_tokens=usage.cache_write_tokens,
    )
    return float(genai_prices.calc_price(table_usage, model, provider_id=provider_id).total_price)


@pytest.mark.parametrize(
    ("provider", "provider_id", "model"),
    [
        ("anthropic", "anthropic", "claude-sonnet-4-5"),
        ("openai", "openai", "gpt-4o"),
        ("gemini", "google", "gemini-2.5-pro"),
        ("vertex-anthropic", "google", "claude-sonnet-4-5@20250929"),
        ("bedrock", "aws", "anthropic.claude-sonnet-4-5-20250929-v1:0"),
        ("mistral", "mistral", "mistral-large-latest"),
        ("deepseek", "deepseek", "deepseek-chat"),
    ],
)
@pytest.mark.parametrize("usage", [Usage(1200, 340, 5000, 800), Usage(250_000, 10, 0, 0), Usage(10, 1)], ids=["cached", "past-a-tier", "small"])
async def test_the_fast_path_agrees_with_the_table(provider: str, provider_id: str, model: str, usage: Usage) -> None:
    entry = await lookup_price(provider, model)
    assert entry is not None
    assert entry.cost(usage) == pytest.approx(table_cost(model, provider_id, usage), rel=1e-12)


async def test_an_answer_carries_its_cost_and_the_run_sums_it(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply(tools=tool_use("get_weather", {"location": "Paris"}), usage=(1000, 50)), reply("Sunny.", usage=(1100, 20)))
    agent = await node.spawn(
        condukt.Agent, model="anthropic:claude-sonnet-4-5", api_key="k", base_url=server.url, tools=[Weather]
    )
    events, stream = await collect(agent, "Weather?")
    answers = [m for m in await agent.history() if isinstance(m, AssistantMessage)]
    costs = [table_cost("claude-sonnet-4-5", "anthropic", a.usage) for a in answers]
    assert [a.usage.cost for a in answers] == pytest.approx(costs)
    [end] = [e for e in events if isinstance(e, AgentEnd)]
    assert end.usage.cost == pytest.approx(sum(costs)) and end.usage.input_tokens == 2100


async def test_given_prices_replace_the_table(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("ok", usage=(2_000_000, 1_000_000)))
    agent = await spawn(node, server, "openai", model_options={"prices": Price(1.0, 2.0)})
    await agent.run("hi")
    [*_, answer] = await agent.history()
    assert answer.usage.cost == pytest.approx(4.0)


async def test_an_unknown_model_has_no_cost(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(reply("ok"))
    agent = await spawn(node, server, "openai")  # "test-model": in no table
    events, _ = await collect(agent, "hi")
    [*_, answer] = await agent.history()
    assert answer.usage.cost is None
    [end] = [e for e in events if isinstance(e, AgentEnd)]
    assert end.usage.cost is None


def test_a_sum_is_unknown_when_a_part_with_tokens_is() -> None:
    assert (Usage() + Usage(1, 1, cost=0.5)).cost == 0.5
    assert (Usage(1, 1, cost=0.5) + Usage(2, 2)).cost is None
    assert (Usage(1, 1, cost=0.5) + Usage(2, 2, cost=0.25)).cost == 0.75
    assert Usage().cost is None


async def test_telemetry_carries_the_cost(node: condukt.Node, server: ProtocolServer) -> None:
    seen: list[Any] = []
    server.add(reply("ok", usage=(100, 10)))
    agent = await node.spawn(condukt.Agent, model="openai:gpt-4o", api_key="k", base_url=server.url + "/v1")
    with telemetry.attached(seen.append):
        await agent.run("hi")
    expected = table_cost("gpt-4o", "openai", Usage(100, 10))
    by_name = {event.name: event for event in seen}
    assert by_name[("condukt", "llm", "stop")].measurements["cost"] == pytest.approx(expected)
    assert by_name[("condukt", "run", "stop")].measurements["cost"] == pytest.approx(expected)


def _looping(server: ProtocolServer, usage: tuple[int, int]) -> None:
    for _ in range(10):
        server.add(reply(tools=tool_use("get_weather", {"location": "x"}), usage=usage))


async def test_max_cost_stops_a_run_on_the_tables_prices(node: condukt.Node, server: ProtocolServer) -> None:
    _looping(server, (100_000, 1000))
    agent = await node.spawn(
        condukt.Agent,
        model="anthropic:claude-sonnet-4-5",
        api_key="k",
        base_url=server.url,
        tools=[Weather],
        capabilities=[UsageLimits(max_cost=0.5)],
    )
    with pytest.raises(UsageLimitExceeded, match="max_cost") as caught:
        await agent.run("loop")
    per_turn = table_cost("claude-sonnet-4-5", "anthropic", Usage(100_000, 1000))
    assert caught.value.used == pytest.approx(per_turn * len(server.requests))
    assert caught.value.used > 0.5 >= caught.value.used - per_turn


async def test_max_cost_on_a_model_without_a_price_fails_saying_so(node: condukt.Node, server: ProtocolServer) -> None:
    _looping(server, (10, 1))
    agent = await spawn(node, server, "openai", tools=[Weather], capabilities=[UsageLimits(max_cost=1.0)])
    with pytest.raises(UsageLimitExceeded, match="cannot be checked: the cost of the model's answers is unknown"):
        await agent.run("loop")
    assert len(server.requests) == 1
