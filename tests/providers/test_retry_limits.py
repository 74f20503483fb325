"""Retry policy, Retry-After parsing and node-wide limits, in virtual time (no sockets)."""

from __future__ import annotations

import email.utils
import itertools
import time
from typing import Any

import httpx
import pytest
import trio
import trio.testing

import condukt
from condukt.events import Event, Retry
from condukt.messages import UserMessage
from condukt.providers import (
    ModelRequest,
    ProviderLimits,
    ProviderUnavailable,
    RateLimited,
    RetryPolicy,
    resolve_model,
)
from condukt.providers._http.retry import parse_retry_after, retry_policy


def test_backoff_is_exponential_capped_and_jittered() -> None:
    policy = RetryPolicy(attempts=10, base=0.3, cap=5.0, jitter=0.5)
    for attempt, full in [(1, 0.3), (2, 0.6), (3, 1.2), (6, 5.0), (9, 5.0)]:
        for _ in range(20):
            delay = policy.delay(attempt)
            assert delay is not None and full * 0.5 <= delay <= full
    assert policy.delay(10) is None  # the last attempt failed: give up


def test_retry_after_wins_unless_too_long() -> None:
    policy = RetryPolicy()
    assert policy.delay(1, retry_after=1.0) == 1.0
    assert policy.delay(1, retry_after=61.0) is None
    assert policy.delay(3, retry_after=1.0) is None


def test_retry_option_forms() -> None:
    assert retry_policy(True) == RetryPolicy() == retry_policy(None)
    assert retry_policy(False).attempts == 1
    assert retry_policy(5).attempts == 5
    assert retry_policy({"base": 0.1}).base == 0.1
    with pytest.raises(TypeError):
        retry_policy("often")


def test_parse_retry_after() -> None:
    assert parse_retry_after({"retry-after": "2"}) == 2.0
    assert parse_retry_after({"retry-after": "1.5", "retry-after-ms": "250"}) == 0.25
    assert parse_retry_after({}) is None
    assert parse_retry_after({"retry-after": "soon"}) is None
    when = email.utils.formatdate(time.time() + 30, usegmt=True)
    assert 28 <= (parse_retry_after({"retry-after": when}) or 0) <= 30


def _model(handler: Any, **options: Any) -> Any:
    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    return resolve_model("anthropic:m", api_key="k", base_url="http://mock", http_client=client, stream=False, **options)


def _ok() -> httpx.Response:
    body = {"content": [{"type": "text", "text": "ok"}], "usage": {"input_tokens": 1, "output_tokens": 1}}
    return httpx.Response(200, json=body)


REQUEST = ModelRequest(None, (UserMessage.from_text("hi"),))


async def test_retry_after_in_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    times: list[float] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        times.append(trio.current_time())
        if len(times) == 1:
            return httpx.Response(429, headers={"retry-after": "1"}, json={"error": {"message": "slow"}})
        return _ok()

    events: list[Event] = []

    async def emit(event: Event) -> None:
        events.append(event)

    message = await _model(handler).complete(REQUEST, emit)
    assert message.text == "ok"
    assert len(times) == 2 and times[1] - times[0] == pytest.approx(1.0)
    assert events == [Retry("anthropic", 1, "HTTP 429: slow", 1.0)]


async def test_backoff_in_virtual_time(autojump_clock: trio.testing.MockClock) -> None:
    times: list[float] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        times.append(trio.current_time())
        return httpx.Response(503, text="upstream down")

    async def emit(event: Event) -> None:
        pass

    with pytest.raises(ProviderUnavailable) as info:
        await _model(handler).complete(REQUEST, emit)
    assert len(times) == 3 and info.value.attempts == 3
    gaps = [b - a for a, b in itertools.pairwise(times)]
    assert 0.15 <= gaps[0] <= 0.3 and 0.3 <= gaps[1] <= 0.6
    assert "upstream down" in str(info.value)


async def test_concurrency_limit(autojump_clock: trio.testing.MockClock) -> None:
    limits = ProviderLimits("test", max_concurrency=3)
    running = peak = 0

    async def request() -> None:
        nonlocal running, peak
        token = object()
        await limits.acquire(token)
        running += 1
        peak = max(peak, running)
        await trio.sleep(1)
        running -= 1
        limits.release(token)

    start = trio.current_time()
    async with trio.open_nursery() as nursery:
        for _ in range(9):
            nursery.start_soon(request)
    assert peak == 3 == limits.peak_in_flight
    assert trio.current_time() - start == pytest.approx(3.0)


async def test_requests_per_minute(autojump_clock: trio.testing.MockClock) -> None:
    limits = ProviderLimits("test", max_concurrency=None, requests_per_minute=60)
    times = []
    for _ in range(65):
        token = object()
        await limits.acquire(token)
        limits.release(token)
        times.append(trio.current_time())
    # A full bucket lets 60 through at once, then one a second.
    assert times[59] == pytest.approx(times[0])
    assert times[64] - times[59] == pytest.approx(5.0, abs=0.01)


async def test_tokens_per_minute_charge_real_usage(autojump_clock: trio.testing.MockClock) -> None:
    limits = ProviderLimits("test", tokens_per_minute=6000)
    token = object()
    await limits.acquire(token, estimated_tokens=1000)
    limits.release(token)
    limits.charge(7000, 1000)  # the request used far more than estimated: the bucket is in debt
    start = trio.current_time()
    await limits.acquire(token, estimated_tokens=1000)
    limits.release(token)
    # 6000 - 1000 - 6000 = 1000 tokens of debt, + 1000 needed, at 100 tokens/s.
    assert trio.current_time() - start == pytest.approx(20.0, abs=0.1)


async def test_slow_down_holds_everybody(autojump_clock: trio.testing.MockClock) -> None:
    limits = ProviderLimits("test")
    limits.slow_down(2.0)
    start = trio.current_time()
    token = object()
    await limits.acquire(token)
    limits.release(token)
    assert trio.current_time() - start == pytest.approx(2.0)


async def test_a_429_in_one_model_delays_the_others(autojump_clock: trio.testing.MockClock) -> None:
    calls: list[tuple[str, float]] = []

    async def handler(request: httpx.Request) -> httpx.Response:
        who = request.headers["x-who"]
        calls.append((who, trio.current_time()))
        if who == "a" and len(calls) == 1:
            return httpx.Response(429, headers={"retry-after": "3"}, json={"error": {"message": "slow"}})
        return _ok()

    client = httpx.AsyncClient(transport=httpx.MockTransport(handler))
    async with condukt.open_node() as node:
        a, b = (
            resolve_model("anthropic:m", api_key="k", base_url="http://mock", node=node, http_client=client, stream=False, headers={"x-who": who})
            for who in "ab"
        )
        assert a.limits is b.limits

        async def emit(event: Event) -> None:
            if isinstance(event, Retry):
                await b.complete(REQUEST, emit)

        await a.complete(REQUEST, emit)
    assert [who for who, _ in calls] == ["a", "b", "a"]
    assert calls[1][1] - calls[0][1] == pytest.approx(3.0)


async def test_limit_options_configure_the_shared_limits() -> None:
    async with condukt.open_node() as node:
        first = resolve_model("groq:m", api_key="k", node=node)
        assert first.limits.max_concurrency == condukt.providers.DEFAULT_MAX_CONCURRENCY
        second = resolve_model("groq:other", api_key="k", node=node, max_concurrency=4, requests_per_minute=100)
        assert first.limits is second.limits
        assert first.limits.max_concurrency == 4 and first.limits.requests_per_minute == 100
        elsewhere = resolve_model("groq:m", api_key="k", node=node, base_url="http://proxy/v1")
        assert elsewhere.limits is not first.limits
        with pytest.raises(ValueError):
            ProviderLimits("x", max_concurrency=0)


async def test_rate_limited_carries_the_wait(autojump_clock: trio.testing.MockClock) -> None:
    async def handler(request: httpx.Request) -> httpx.Response:
        return httpx.Response(429, headers={"retry-after": "600"}, json={"error": {"message": "quota", "type": "rate_limit_error"}})

    async def emit(event: Event) -> None:
        pass

    with pytest.raises(RateLimited) as info:
        await _model(handler).complete(REQUEST, emit)
    assert info.value.retry_after == 600 and info.value.error_type == "rate_limit_error"
