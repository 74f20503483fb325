"""The trio transport and the node's shared client: pooling, TLS, cancellation, closing with the node."""

from __future__ import annotations

import functools
import json
import ssl
from collections.abc import AsyncIterator

import httpx
import pytest
import trio
import trustme

import condukt
from condukt.providers import HttpSettings, configure_http, resolve_model
from condukt.providers._http.transport import _Connection
from condukt.providers.lowlevel import TrioTransport
from condukt.testing.server import Fault, ProtocolServer, reply

from .helpers import spawn, tls_contexts


async def test_connections_are_reused_and_closed_with_the_node(server: ProtocolServer) -> None:
    async with condukt.open_node() as node:
        agent = await spawn(node, server, "anthropic")
        for text in ("one", "two", "three"):
            server.add(reply(text))
            assert await agent.run("hi") == text
        assert server.connections == 1 and server.open_connections == 1
    with trio.fail_after(5):
        while server.open_connections:
            await trio.sleep(0.01)


async def test_a_model_outside_a_node_owns_its_client(server: ProtocolServer) -> None:
    model = resolve_model("openai:m", api_key="k", base_url=server.url + "/v1")
    server.add(reply("alone"))

    async def emit(event: object) -> None:
        pass

    from condukt.messages import UserMessage
    from condukt.providers import ModelRequest

    message = await model.complete(ModelRequest(None, (UserMessage.from_text("hi"),)), emit)
    assert message.text == "alone"
    await model.aclose()
    with trio.fail_after(5):
        while server.open_connections:
            await trio.sleep(0.01)


async def test_the_pool_bounds_requests_in_flight(server: ProtocolServer) -> None:
    server.latency = 0.05
    transport = TrioTransport(max_connections=3)
    async with httpx.AsyncClient(transport=transport) as client:
        async def one() -> None:
            response = await client.post(server.url + "/v1/chat/completions", json={"model": "m", "messages": []})
            assert response.status_code == 200
        async with trio.open_nursery() as nursery:
            for _ in range(12):
                nursery.start_soon(one)
    assert server.peak_in_flight == 3
    assert server.connections == 3
    assert transport.active_connections == 0


async def test_configure_http_before_first_use(server: ProtocolServer) -> None:
    async with condukt.open_node() as node:
        settings = configure_http(node, max_connections=2, read_timeout=30)
        assert settings.max_connections == 2 and settings.read_timeout == 30
        agent = await spawn(node, server, "openai")
        server.add(reply("ok"))
        await agent.run("hi")
        with pytest.raises(RuntimeError):
            configure_http(node, max_connections=5)
    assert HttpSettings().timeout().pool is None


async def test_a_cancelled_response_closes_its_connection(server: ProtocolServer) -> None:
    server.add(Fault(reply("x" * 50, chunk=5), after=4, kind="hang"))
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        with trio.move_on_after(0.3):
            async with client.stream("POST", server.url + "/v1/messages", json={"stream": True}) as response:
                async for _ in response.aiter_bytes():
                    pass
        with trio.fail_after(5):
            await server.client_closed.wait()
        assert transport.active_connections == 0 and transport.idle_connections == 0
        # The next request opens a fresh connection and works.
        server.add(reply("fresh"))
        response = await client.post(server.url + "/v1/messages", json={})
        assert response.json()["content"][0]["text"] == "fresh"


async def test_a_connection_the_server_closed_is_not_reused(server: ProtocolServer) -> None:
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(server.url + "/v1/messages", json={})
        [conn] = [c for idle in transport._idle.values() for c in idle]
        # Half-close our side: the server sees EOF and closes the connection.
        conn.stream.socket.shutdown(1)
        with trio.fail_after(5):
            while not conn.looks_closed():
                await trio.sleep(0.01)
        response = await client.post(server.url + "/v1/messages", json={})
        assert response.status_code == 200
    assert server.connections == 2


async def test_tls(nursery: trio.Nursery) -> None:
    ca = trustme.CA()
    cert = ca.issue_cert("127.0.0.1")
    server_context = ssl.create_default_context(ssl.Purpose.CLIENT_AUTH)
    cert.configure_cert(server_context)
    client_context = ssl.create_default_context()
    ca.configure_trust(client_context)

    server = ProtocolServer()
    listeners = await nursery.start(trio.serve_ssl_over_tcp, server._connection, 0, server_context)
    port = listeners[0].transport_listener.socket.getsockname()[1]
    server.add(reply("secure"), reply("again"))
    async with condukt.open_node() as node:
        configure_http(node, verify=client_context)
        agent = await node.spawn(condukt.Agent, model="anthropic:m", api_key="k", base_url=f"https://127.0.0.1:{port}")
        assert await agent.run("hi") == "secure"
        assert await agent.run("hi") == "again"
    assert server.connections == 1
    assert server.requests[0].headers["x-api-key"] == "k"


async def test_unsupported_schemes_and_closed_transports() -> None:
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.UnsupportedProtocol):
            await client.get("ftp://example.com/")
    with pytest.raises(httpx.LocalProtocolError):
        await transport.handle_async_request(httpx.Request("GET", "http://127.0.0.1:1/"))


async def test_a_refused_connection_says_why_in_one_line() -> None:
    with trio.socket.socket() as probe:  # a port nothing listens on
        await probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.ConnectError) as caught:
            await client.get(f"http://127.0.0.1:{port}/")
    message = str(caught.value)
    assert "ConnectionRefusedError" in message and "sub-exception" not in message
    assert "\n" not in message


async def test_a_kept_alive_connection_closed_under_our_feet_is_replaced(
    server: ProtocolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        await client.post(server.url + "/v1/messages", json={})
        [conn] = [c for idle in transport._idle.values() for c in idle]
        # As if the server closed it in the instant between the liveness check and the send.
        monkeypatch.setattr(_Connection, "looks_closed", lambda self: False)
        conn.stream.socket.shutdown(2)
        response = await client.post(server.url + "/v1/messages", json={})
        assert response.status_code == 200
    assert server.connections == 2 and len(server.requests) == 2


async def test_default_headers_unless_the_caller_set_them(server: ProtocolServer) -> None:
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        await client.post(server.url + "/v1/messages", json={}, headers={"User-Agent": "mine/1"})
    transport = TrioTransport()
    await transport.handle_async_request(httpx.Request("POST", server.url + "/v1/messages", json={}))
    await transport.aclose()
    mine, bare = server.requests
    assert mine.headers["user-agent"] == "mine/1"
    assert bare.headers["user-agent"] == f"condukt/{condukt.__version__}"
    assert bare.headers["accept-encoding"] == "gzip, deflate"
    async with condukt.open_node() as node:
        agent = await spawn(node, server, "openai")
        server.add(reply("ok"))
        await agent.run("hi")
    assert server.requests[-1].headers["user-agent"] == f"condukt/{condukt.__version__}"
    client = HttpSettings().build_client()
    assert client.headers["user-agent"] == f"condukt/{condukt.__version__}"
    await client.aclose()


async def test_the_write_timeout_bounds_each_write(nursery: trio.Nursery) -> None:
    received = trio.Event()

    async def never_reads(stream: trio.SocketStream) -> None:
        received.set()
        await trio.sleep_forever()

    [listener] = await nursery.start(functools.partial(trio.serve_tcp, never_reads, 0, host="127.0.0.1"))
    url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/"
    async with httpx.AsyncClient(transport=TrioTransport(), timeout=httpx.Timeout(5.0, write=0.2)) as client:
        with trio.fail_after(3):
            with pytest.raises(httpx.WriteTimeout):
                await client.post(url, content=b"x" * 50_000_000)


async def test_a_slow_streamed_body_is_not_a_write_timeout(server: ProtocolServer) -> None:
    async def body() -> AsyncIterator[bytes]:
        for part in (b'{"a"', b": 1}"):
            await trio.sleep(0.3)
            yield part

    async with httpx.AsyncClient(transport=TrioTransport(), timeout=httpx.Timeout(5.0, write=0.1)) as client:
        response = await client.post(server.url + "/v1/messages", content=body())
    assert response.status_code == 200


async def test_tls_failures_say_why(nursery: trio.Nursery) -> None:
    server_context, _ = tls_contexts()  # the client below does not trust its CA
    server = ProtocolServer()
    listeners = await nursery.start(trio.serve_ssl_over_tcp, server._connection, 0, server_context)
    port = listeners[0].transport_listener.socket.getsockname()[1]
    async with httpx.AsyncClient(transport=TrioTransport()) as client:  # the test CA is not trusted
        with pytest.raises(httpx.ConnectError, match="CERTIFICATE_VERIFY_FAILED") as info:
            await client.get(f"https://127.0.0.1:{port}/")
    assert isinstance(info.value.__cause__, trio.BrokenResourceError)


async def test_exchange_pools_its_connection_and_closes_one_left_unread(server: ProtocolServer) -> None:
    transport = TrioTransport()
    url = httpx.URL(server.url + "/v1/chat/completions")
    host = [(b"Host", url.netloc)]
    body = b'{"model": "m", "messages": [{"role": "user", "content": "hi"}]}'
    for text in ("one", "two"):
        server.add(reply(text))
        response = await transport.exchange("POST", url, host, body)
        assert response.status_code == 200
        assert (response.header(b"content-type") or b"").startswith(b"application/json")
        assert json.loads(await response.read())["choices"][0]["message"]["content"] == text
        assert transport.idle_connections == 1 and transport.active_connections == 0
    assert server.connections == 1
    assert server.requests[-1].headers["content-length"] == str(len(body))
    assert server.requests[-1].headers["user-agent"].startswith("condukt/")
    server.add(reply("unread"))
    response = await transport.exchange("POST", url, host, body)
    await response.aclose()
    assert transport.idle_connections == 0 and transport.active_connections == 0
    await transport.aclose()


async def test_a_prepared_head_serves_every_body_and_is_checked_once(server: ProtocolServer) -> None:
    transport = TrioTransport()
    url = httpx.URL(server.url + "/v1/chat/completions")
    headers = [(b"Host", url.netloc), (b"Authorization", b"Bearer k")]
    prepared = transport.prepare("POST", url, headers)
    # Alike heads (agents of one node on one endpoint) share one prepared request.
    assert transport.prepare("POST", httpx.URL(str(url)), list(headers)) is prepared
    for text in ("one", "a longer second answer"):
        body = json.dumps({"model": "m", "messages": [{"role": "user", "content": text}]}).encode()
        server.add(reply(text))
        response = await transport.exchange_prepared(prepared, body)
        assert json.loads(await response.read())["choices"][0]["message"]["content"] == text
        recorded = server.requests[-1]
        assert recorded.raw == body and recorded.headers["content-length"] == str(len(body))
        assert recorded.headers["authorization"] == "Bearer k"
    assert server.connections == 1
    with pytest.raises(ValueError, match="another transport"):
        await TrioTransport().exchange_prepared(prepared, b"{}")
    with pytest.raises(httpx.LocalProtocolError):
        transport.prepare("POST", url, [(b"Host", url.netloc), (b"X-Key", b"k\r\nInjected: yes")])
    with pytest.raises(httpx.UnsupportedProtocol):
        transport.prepare("POST", httpx.URL("ftp://example.com/"), headers)
    await transport.aclose()
    with pytest.raises(httpx.LocalProtocolError):
        await transport.exchange_prepared(prepared, b"{}")
