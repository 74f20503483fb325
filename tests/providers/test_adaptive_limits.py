"""Adaptive concurrency: limits start open and back off when the provider says it is overloaded."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt
from condukt.providers import ADAPTIVE, OpenAIModel, ProviderLimits, RetryPolicy
from condukt.providers._http.limits import ADAPTIVE_START
from condukt.testing.server import ProtocolServer, RecordedRequest, Status
from condukt.testing.server import reply as server_reply

from .helpers import API_KEY, base_url


async def test_the_default_limit_is_adaptive_and_starts_open(autojump_clock: trio.abc.Clock) -> None:
    limits = ProviderLimits("x")
    assert limits.max_concurrency == ADAPTIVE == condukt.providers.DEFAULT_MAX_CONCURRENCY
    assert limits.concurrency == ADAPTIVE_START


async def test_overload_halves_once_per_window_and_success_grows_it_back(autojump_clock: trio.abc.Clock) -> None:
    limits = ProviderLimits("x")
    sent_before = limits.generation
    limits.overloaded(sent_before)
    limits.overloaded(sent_before)  # sent under the old limit, same burst: no second halving
    assert limits.concurrency == ADAPTIVE_START // 2
    limits.overloaded(limits.generation)  # sent under the new limit, and still too much
    assert limits.concurrency == ADAPTIVE_START // 4
    window = int(limits.concurrency)
    for _ in range(window - 1):
        limits.succeeded()
    assert limits.concurrency == window
    limits.succeeded()
    assert limits.concurrency == window + 1  # one more after a full window of successes


async def test_a_fixed_limit_does_not_move(autojump_clock: trio.abc.Clock) -> None:
    limits = ProviderLimits("x", max_concurrency=8)
    limits.overloaded()
    limits.succeeded()
    assert limits.concurrency == 8 and limits.max_concurrency == 8
    limits.configure(max_concurrency=None)
    assert limits.concurrency == float("inf")
    limits.configure(max_concurrency="adaptive")
    assert limits.concurrency == ADAPTIVE_START
    with pytest.raises(ValueError, match="positive int, None or 'adaptive'"):
        limits.configure(max_concurrency="fast")


async def shed_by(server: ProtocolServer, node: condukt.Node, max_concurrency: Any) -> tuple[int, ProviderLimits]:
    """Run 200 agents at once against a provider that serves 20 at a time; its refusals, and the limits."""
    capacity = 20
    shed = 0

    def responder(request: RecordedRequest) -> Any:
        nonlocal shed
        if server.in_flight > capacity:
            shed += 1
            return Status(529, "Overloaded")
        return server_reply("done")

    server.latency = 0.05
    server.responder = responder
    model = OpenAIModel(
        "test-model", api_key=API_KEY, base_url=base_url(server, "openai"), node=node,
        retry=RetryPolicy(attempts=30, base=0.05, cap=0.5), stream=False, max_concurrency=max_concurrency,
    )
    results: list[str] = []

    async def one() -> None:
        agent = await node.spawn(condukt.Agent, model=model)
        results.append(await agent.run("go"))

    async with trio.open_nursery() as nursery:
        for _ in range(200):
            nursery.start_soon(one)
    assert results == ["done"] * 200
    return shed, model.limits


async def test_a_node_backs_off_a_provider_that_sheds_load(
    server: ProtocolServer, node: condukt.Node, autojump_clock: trio.abc.Clock
) -> None:
    shed_unbounded, _ = await shed_by(server, node, None)
    shed_adaptive, limits = await shed_by(server, node, "adaptive")
    assert limits.concurrency <= 40  # it backed off from 1000 to about what the provider serves
    assert shed_adaptive < 0.6 * shed_unbounded  # and was refused much less than without a limit
