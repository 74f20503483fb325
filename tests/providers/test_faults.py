"""Faults against the local server: rate limits, errors, cut and malformed streams, slow servers,
cancellation, missing keys, and keys that must never leak."""

from __future__ import annotations

import logging
import socket

import pytest
import trio
from waiting import WallBound

import condukt
from condukt.events import Done, Error, Retry, TextDelta
from condukt.providers import (
    AuthenticationFailed,
    InvalidRequest,
    InvalidResponse,
    MissingApiKey,
    ProviderUnavailable,
    RateLimited,
    StreamError,
    configure_http,
    provider_limits,
)
from condukt.testing.server import Disconnect, Fault, Malformed, ProtocolServer, Slow, Status, reply

from .helpers import ALL_PROTOCOLS, API_KEY, collect, spawn

both = pytest.mark.parametrize("protocol", ALL_PROTOCOLS)
# Frames before the first text delta (anthropic: message_start, ping, block start; openai: role chunk;
# gemini: none, each frame is a response with the next parts).
BEFORE_TEXT = {"anthropic": 3, "openai": 1, "gemini": 0, "openai-responses": 2}


@both
async def test_429_with_retry_after_is_retried_once_after_the_wait(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    server.add(Status(429, "Slow down", headers=(("retry-after", "1"),)), reply("Made it."))
    agent = await spawn(node, server, protocol)
    events, stream = await collect(agent, "hi")
    assert stream.result == "Made it."
    first, second = server.requests
    assert len(server.requests) == 2
    assert second.time - first.time >= 1.0
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert retry.provider == protocol and retry.attempt == 1 and retry.delay == 1.0
    assert "429" in retry.reason and "Slow down" in retry.reason


@both
async def test_retry_after_ms_is_honoured(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Status(429, "busy", headers=(("retry-after-ms", "150"), ("retry-after", "30"))), reply("ok"))
    agent = await spawn(node, server, protocol)
    events, _ = await collect(agent, "hi")
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert retry.delay == pytest.approx(0.15)


@both
async def test_400_fails_at_once_with_the_providers_message(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Status(400, "messages.0.content: Field required"))
    agent = await spawn(node, server, protocol)
    with pytest.raises(InvalidRequest) as info:
        await agent.run("hi")
    assert len(server.requests) == 1
    error = info.value
    assert error.status_code == 400 and error.provider == protocol
    assert "messages.0.content: Field required" in str(error)
    error_type = "INVALID_ARGUMENT" if protocol == "gemini" else "invalid_request_error"
    assert str(error).startswith(f"{protocol}: HTTP 400 {error_type}")
    assert error.request_id == "req_local"


@both
async def test_three_503s_are_three_requests_then_a_typed_error(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    server.add(*[Status(503, "Service Unavailable")] * 3)
    agent = await spawn(node, server, protocol)
    events, stream = await collect(agent, "hi")
    assert len(server.requests) == 3
    assert [e.attempt for e in events if isinstance(e, Retry)] == [1, 2]
    assert all(0.0 < e.delay <= 5.0 for e in events if isinstance(e, Retry))
    assert stream.error is not None and stream.error.error_type == "ProviderUnavailable"
    assert "gave up after 3 attempts" in stream.error.message
    quick = await spawn(node, server, protocol, model_options={"retry": {"base": 0.01}})
    server.add(*[Status(503)] * 3)
    with pytest.raises(ProviderUnavailable) as info:
        await quick.run("again")
    assert info.value.status_code == 503 and info.value.attempts == 3


@both
async def test_retry_false_sends_one_request(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Status(503, "down"), reply("never"))
    agent = await spawn(node, server, protocol, model_options={"retry": False})
    with pytest.raises(ProviderUnavailable):
        await agent.run("hi")
    assert len(server.requests) == 1


@both
async def test_a_dropped_stream_fails_the_run_and_leaves_no_partial_answer(
    node: condukt.Node, server: ProtocolServer, protocol: str
) -> None:
    server.add(Fault(reply("This answer is cut off half way", chunk=5), after=BEFORE_TEXT[protocol] + 2, kind="drop"))
    agent = await spawn(node, server, protocol)
    events, stream = await collect(agent, "hi")
    assert "".join(e.text for e in events if isinstance(e, TextDelta)) == "This answe"  # two 5-character deltas
    assert stream.error is not None and stream.error.error_type == "StreamError"
    assert isinstance(events[-1], Done) and events[-1].status == "failed"
    assert len(server.requests) == 1  # text was streamed already: never retried
    # No turn completed: the prompt goes too, so the next prompt does not follow an unanswered one.
    assert await agent.history() == ()


@both
async def test_a_stream_cut_before_any_content_is_retried(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Fault(reply("lost"), after=min(1, BEFORE_TEXT[protocol]), kind="drop"), reply("Second time lucky."))
    agent = await spawn(node, server, protocol)
    assert await agent.run("hi") == "Second time lucky."
    assert len(server.requests) == 2


@both
async def test_an_sse_error_event_before_content_is_retried(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    error_type = {"anthropic": "overloaded_error", "openai": "server_error", "gemini": "UNAVAILABLE", "openai-responses": "server_error"}[protocol]
    after = min(1, BEFORE_TEXT[protocol])
    server.add(Fault(reply("x"), after=after, kind="error", error_type=error_type, message="Overloaded"), reply("ok"))
    agent = await spawn(node, server, protocol)
    events, stream = await collect(agent, "hi")
    assert stream.result == "ok"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert error_type in retry.reason and "Overloaded" in retry.reason


@both
async def test_an_sse_error_event_after_content_fails_the_run(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Fault(reply("partial text", chunk=4), after=BEFORE_TEXT[protocol] + 1, kind="error", error_type="api_error", message="Internal"))
    agent = await spawn(node, server, protocol)
    with pytest.raises(ProviderUnavailable, match="Internal"):
        await agent.run("hi")
    assert len(server.requests) == 1


@both
async def test_malformed_json(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Malformed())
    plain = await spawn(node, server, protocol, stream=False)
    with pytest.raises(InvalidResponse, match="not JSON"):
        await plain.run("hi")
    server.add(Fault(reply("some text", chunk=3), after=BEFORE_TEXT[protocol] + 1, kind="garbage"))
    streaming = await spawn(node, server, protocol)
    with pytest.raises(StreamError, match="malformed"):
        await streaming.run("hi")
    assert len(server.requests) == 2


@both
@pytest.mark.slow
async def test_a_slow_first_byte_is_waited_for(
    node: condukt.Node, server: ProtocolServer, protocol: str, wall_bound: WallBound
) -> None:
    server.add(Slow(reply("Worth the wait."), 0.4))
    agent = await spawn(node, server, protocol)
    with wall_bound(2.0, "a run whose first byte comes after 0.4 s", at_least=0.4):
        assert await agent.run("hi") == "Worth the wait."


@both
async def test_a_server_silent_past_the_timeout_is_retried(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Slow(reply("too late"), 2.0), reply("on time"))
    agent = await spawn(node, server, protocol, model_options={"timeout": 0.2})
    events, stream = await collect(agent, "hi")
    assert stream.result == "on time"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert "no data from the server" in retry.reason


async def test_a_stalled_stream_after_content_is_a_stream_error(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Fault(reply("stalls here", chunk=3), after=4, kind="hang"))
    agent = await spawn(node, server, "anthropic", model_options={"timeout": 0.2})
    with pytest.raises(StreamError, match="no data from the server"):
        await agent.run("hi")
    with trio.fail_after(5):
        await server.client_closed.wait()


@both
async def test_dropped_connections_are_retried(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Disconnect(), reply("reconnected"))
    agent = await spawn(node, server, protocol)
    events, stream = await collect(agent, "hi")
    assert stream.result == "reconnected"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert "connection" in retry.reason


@pytest.mark.parametrize("where", ["node", "model"])
async def test_a_server_that_never_reads_fails_the_run_after_the_write_timeout(
    node: condukt.Node, nursery: trio.Nursery, autojump_clock: trio.abc.Clock, where: str
) -> None:
    # The server accepts and never reads: once the socket buffers are full (a small receive
    # buffer on the server side, a request larger than the client's send buffer can grow to),
    # only the write timeout ends the request. Without it the run would wait forever.
    accepted = trio.Event()

    async def never_reads(stream: trio.SocketStream) -> None:
        accepted.set()
        await trio.sleep_forever()

    [listener] = await trio.open_tcp_listeners(0, host="127.0.0.1")
    listener.socket.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)  # inherited by the accepted socket
    await nursery.start(trio.serve_listeners, never_reads, [listener])
    url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}"
    if where == "node":
        configure_http(node, write_timeout=7.0)  # read and connect stay at their defaults
        options: dict[str, object] = {"retry": False}
    else:
        options = {"retry": False, "timeout": 7.0}
    agent = await node.spawn(condukt.Agent, model="anthropic:m", api_key="k", base_url=url, model_options=options)
    started = trio.current_time()
    with trio.fail_after(120):  # virtual time: a missing write timeout fails here, not by hanging the suite
        with pytest.raises(ProviderUnavailable, match="timed out sending the request"):
            await agent.run("x" * 8_000_000)  # more than the 4 MB a loopback send buffer grows to
    assert accepted.is_set()
    assert 7.0 <= trio.current_time() - started < 8.0


async def test_an_unreachable_server_is_provider_unavailable(node: condukt.Node) -> None:
    listener = trio.socket.socket()
    await listener.bind(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    listener.close()  # nothing listens there now
    agent = await node.spawn(
        condukt.Agent, model="openai:m", api_key="k", base_url=f"http://127.0.0.1:{port}/v1", model_options={"retry": False}
    )
    with pytest.raises(ProviderUnavailable, match="connection failed"):
        await agent.run("hi")


@both
async def test_abort_mid_stream_closes_the_connection(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Fault(reply("endless answer", chunk=4), after=BEFORE_TEXT[protocol] + 1, kind="hang"))
    agent = await spawn(node, server, protocol)
    async with agent.stream("hi") as events:
        async for event in events:
            if isinstance(event, TextDelta):
                assert await agent.abort()
    assert events.error is not None and events.error.error_type == "Aborted"
    with trio.fail_after(5):
        await server.client_closed.wait()
    assert server.requests[0].client_closed
    assert await agent.history() == ()  # nothing answered the prompt: it is not kept


@both
async def test_a_run_timeout_mid_request_closes_the_connection(node: condukt.Node, server: ProtocolServer, protocol: str) -> None:
    server.add(Fault(reply("slow"), after=1, kind="hang"))
    agent = await spawn(node, server, protocol)
    with pytest.raises(condukt.RunTimeout):
        await agent.run("hi", timeout=0.3)
    with trio.fail_after(5):
        await server.client_closed.wait()
    # The agent and the node's pool carry on.
    server.add(reply("fine"))
    assert await agent.run("again") == "fine"


async def test_a_429_slows_every_agent_of_the_node(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(429, "Slow down", headers=(("retry-after", "1"),)), reply("a"), reply("b"))
    first = await spawn(node, server, "anthropic")
    second = await spawn(node, server, "anthropic")
    limits = provider_limits(node, "anthropic", server.url)
    async with trio.open_nursery() as nursery, first.stream("hi") as events:
        async for event in events:
            if isinstance(event, Retry):
                # The other agent asks only now, after the 429: it waits too.
                nursery.start_soon(second.run, "hi")
    rejected, *later = server.requests
    assert len(later) == 2
    assert all(request.time - rejected.time >= 0.95 for request in later)
    assert limits.peak_in_flight >= 1


async def test_a_missing_key_fails_at_agent_start(node: condukt.Node, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("ANTHROPIC_API_KEY", raising=False)
    monkeypatch.delenv("OPENAI_API_KEY", raising=False)
    with pytest.raises(MissingApiKey, match="ANTHROPIC_API_KEY"):
        await node.spawn(condukt.Agent, model="anthropic:claude-sonnet-4-5")
    with pytest.raises(MissingApiKey, match="OPENAI_API_KEY"):
        await node.spawn(condukt.Agent, model="openai:gpt-4.1")
    # Local servers need none.
    await node.spawn(condukt.Agent, model="ollama:llama3.2")


async def test_the_key_comes_from_the_environment(
    node: condukt.Node, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("ANTHROPIC_API_KEY", "env-key")
    monkeypatch.setenv("ANTHROPIC_BASE_URL", server.url)
    server.add(reply("hi"))
    agent = await node.spawn(condukt.Agent, model="anthropic:claude-x")
    await agent.run("hi")
    assert server.requests[0].headers["x-api-key"] == "env-key"


@both
async def test_the_key_never_leaks(
    node: condukt.Node, server: ProtocolServer, protocol: str, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    # A provider echoing the key back in its error message.
    server.add(Status(401, f"invalid x-api-key {API_KEY}"), Status(429, f"key {API_KEY} is rate limited"), Status(429, "again"), Status(429, "again"))
    agent = await spawn(node, server, protocol, model_options={"retry": {"base": 0.01}})
    events, stream = await collect(agent, "hi")
    assert stream.error is not None and stream.error.error_type == "AuthenticationFailed"
    events2, stream2 = await collect(agent, "hi", timeout=30)
    assert stream2.error is not None
    model = condukt.providers.resolve_model(f"{protocol}:m", api_key=API_KEY)
    with pytest.raises(AuthenticationFailed) as info:
        server.add(Status(401, f"bad key {API_KEY}"))
        await agent.run("hi")
    texts = [repr(e) for e in events + events2] + [repr(model), str(info.value), repr(info.value), caplog.text]
    texts += [str(vars(info.value))]
    assert not [t for t in texts if API_KEY in t]
    assert "[redacted]" in str(info.value)


async def test_rate_limited_is_a_provider_error_with_the_wait(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(429, "quota", headers=(("retry-after", "120"),)))
    agent = await spawn(node, server, "openai")
    with pytest.raises(RateLimited) as info:
        await agent.run("hi")  # 120 s is past max_retry_after: not retried
    assert info.value.retry_after == 120.0
    assert len(server.requests) == 1


async def test_errors_are_reported_as_events(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Status(400, "bad tool schema"))
    agent = await spawn(node, server, "openai")
    events, _ = await collect(agent, "hi")
    [error] = [e for e in events if isinstance(e, Error)]
    assert error.error_type == "InvalidRequest" and "bad tool schema" in error.message
