"""Connection reuse and timing in the trio transport, against real sockets on 127.0.0.1.

A server-closed idle connection is noticed (by the portable probe too) and
not reused; every resend is visible (a ``Retry`` event) and a ``POST`` the
server may have processed is not resent by the transport; the idle timeout
resets while the head or a non-streamed body is still arriving.
"""

from __future__ import annotations

import functools
import json
from collections.abc import Callable

import httpx
import pytest
import trio

import condukt
from condukt.events import Retry
from condukt.providers import ProviderUnavailable
from condukt.providers._http import transport as _transport
from condukt.providers._http.node import node_http
from condukt.providers._http.transport import _Connection
from condukt.providers.lowlevel import TrioTransport
from condukt.testing.server import Disconnect, ProtocolServer, anthropic_body, reply

from .helpers import collect, spawn


def _idle(transport: httpx.AsyncBaseTransport) -> list[_Connection]:
    assert isinstance(transport, TrioTransport)
    return [conn for idle in transport._idle.values() for conn in idle]


async def _read_request(stream: trio.SocketStream, buffer: bytearray) -> bool:
    """Read one request (head and ``Content-Length`` body) off ``stream``; ``False`` at EOF."""
    while b"\r\n\r\n" not in buffer:
        data = await stream.receive_some(65536)
        if not data:
            return False
        buffer += data
    end = buffer.index(b"\r\n\r\n") + 4
    length = 0
    for line in bytes(buffer[:end]).split(b"\r\n"):
        if line.lower().startswith(b"content-length:"):
            length = int(line.split(b":", 1)[1])
    while len(buffer) < end + length:
        buffer += await stream.receive_some(65536)
    del buffer[: end + length]
    return True


async def _serve(nursery: trio.Nursery, handler: Callable[[trio.SocketStream], object]) -> str:
    [listener] = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    return f"http://127.0.0.1:{listener.socket.getsockname()[1]}"


@pytest.mark.parametrize("probe", ["_poll_readable", "_select_readable"])
async def test_an_idle_connection_the_server_closed_is_noticed_and_not_reused(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch, probe: str
) -> None:
    # ``_select_readable`` is the probe where ``select.poll`` does not exist (Windows).
    monkeypatch.setattr(_transport, "_readable", getattr(_transport, probe))
    connections = 0
    close_idle = trio.Event()

    async def answer_once_then_close_when_idle(stream: trio.SocketStream) -> None:
        nonlocal connections
        connections += 1
        buffer = bytearray()
        if await _read_request(stream, buffer):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            await close_idle.wait()  # a keep-alive timeout on the server's side
        await stream.aclose()

    url = await _serve(nursery, answer_once_then_close_when_idle)
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.post(url, content=b"{}")).text == "ok"
        [conn] = _idle(transport)
        assert not conn.looks_closed()
        close_idle.set()
        with trio.fail_after(5):
            while not conn.looks_closed():
                await trio.sleep(0.01)
        response = await client.post(url, content=b"{}")
        assert response.text == "ok"
    assert connections == 2


async def test_a_post_the_server_may_have_processed_is_not_resent_by_the_transport(server: ProtocolServer) -> None:
    # The server reads the whole POST on a reused connection, then closes it without a word.
    server.add(reply("one"), Disconnect(), reply("two"), Disconnect())
    resent: list[str] = []

    async def on_resend(reason: str) -> None:
        resent.append(reason)

    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(server.url + "/v1/messages", json={})
        with pytest.raises(httpx.HTTPError, match="may have processed it"):
            await client.post(server.url + "/v1/messages", json={}, extensions={"condukt.resend": on_resend})
        assert len(server.requests) == 2 and resent == []
        # An idempotent request in the same spot is sent again, and says so.
        await client.post(server.url + "/v1/messages", json={})
        response = await client.request(
            "PUT", server.url + "/v1/messages", json={}, extensions={"condukt.resend": on_resend}
        )
        assert response.status_code == 200
    assert len(resent) == 1 and "idempotent" in resent[0]
    assert [r.method for r in server.requests] == ["POST", "POST", "POST", "PUT", "PUT"]


async def test_a_reused_connection_closed_after_the_whole_post_is_retried_visibly(
    server: ProtocolServer, node: condukt.Node
) -> None:
    agent = await spawn(node, server, "anthropic", model_options={"retry": {"base": 0.01}})
    server.add(reply("one"), Disconnect(), reply("two"))
    assert await agent.run("hi") == "one"
    events, stream = await collect(agent, "again")
    assert stream.result == "two"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert retry.attempt == 1 and "connection" in retry.reason
    assert len(server.requests) == 3


async def test_a_resend_on_a_fresh_connection_is_a_retry_event(
    server: ProtocolServer, node: condukt.Node, monkeypatch: pytest.MonkeyPatch
) -> None:
    agent = await spawn(node, server, "openai")
    server.add(reply("one"), reply("two"))
    assert await agent.run("hi") == "one"
    [conn] = _idle(node_http(node).transport)
    # The connection dies in the instant between the liveness check and the send:
    # the request is not written, so the server cannot have acted on it.
    monkeypatch.setattr(_Connection, "looks_closed", lambda self: False)
    conn.stream.socket.shutdown(trio.socket.SHUT_RDWR)  # type: ignore[attr-defined]
    events, stream = await collect(agent, "again")
    assert stream.result == "two"
    [retry] = [e for e in events if isinstance(e, Retry)]
    assert retry.delay == 0 and "before the request was sent" in retry.reason
    assert len(server.requests) == 2 and server.connections == 2


async def _trickle(stream: trio.SocketStream, data: bytes, pieces: int, pause: float) -> None:
    size = -(-len(data) // pieces)
    for start in range(0, len(data), size):
        await stream.send_all(data[start : start + size])
        await trio.sleep(pause)


@pytest.mark.parametrize("slow", ["head", "body"])
async def test_the_idle_timeout_resets_while_a_response_is_still_arriving(
    nursery: trio.Nursery, node: condukt.Node, slow: str
) -> None:
    body = json.dumps(anthropic_body(reply("x" * 20_000), "m")).encode()
    head = b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nX-Padding: " + b"p" * 200
    head += b"\r\nContent-Length: %d\r\n\r\n" % len(body)

    async def slow_server(stream: trio.SocketStream) -> None:
        buffer = bytearray()
        while await _read_request(stream, buffer):
            # 20 pieces 0.05 s apart: 1 s in all, never 0.3 s without a byte.
            if slow == "head":
                await _trickle(stream, head, 20, 0.05)
                await stream.send_all(body)
            else:
                await stream.send_all(head)
                await _trickle(stream, body, 20, 0.05)

    url = await _serve(nursery, slow_server)
    agent = await node.spawn(
        condukt.Agent,
        model="anthropic:m",
        api_key="k",
        base_url=url,
        model_options={"stream": False, "timeout": 0.3, "retry": False},
    )
    with trio.fail_after(5):
        assert await agent.run("hi") == "x" * 20_000


async def test_the_idle_timeout_still_fires_when_a_body_stops(nursery: trio.Nursery, node: condukt.Node) -> None:
    async def stalls(stream: trio.SocketStream) -> None:
        buffer = bytearray()
        await _read_request(stream, buffer)
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 100\r\n\r\n{")
        await trio.sleep_forever()

    url = await _serve(nursery, stalls)
    agent = await node.spawn(
        condukt.Agent,
        model="anthropic:m",
        api_key="k",
        base_url=url,
        model_options={"stream": False, "timeout": 0.2, "retry": False},
    )
    with trio.fail_after(5), pytest.raises(ProviderUnavailable, match="no data from the server for 0.2s"):
        await agent.run("hi")
