"""Proxies: ``proxy=`` and ``HTTP_PROXY`` / ``HTTPS_PROXY`` / ``ALL_PROXY`` / ``NO_PROXY``, through a local proxy.

The proxy here is a small one started by each test: it forwards plain HTTP
requests sent in the absolute form and opens ``CONNECT`` tunnels, and it
insists on credentials when given some.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import logging
import ssl

import attrs
import httpx
import pytest
import trio

import condukt
from condukt.providers import HttpSettings, configure_http
from condukt.providers._http.proxy import ProxyMap
from condukt.providers.lowlevel import TrioTransport
from condukt.testing.server import ProtocolServer, reply

from .helpers import spawn, tls_contexts

SECRET = "s3cr3t-proxy-pass"
_PROXY_ENV = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


@pytest.fixture(autouse=True)
def _no_proxy_env(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in _PROXY_ENV:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    monkeypatch.delenv("REQUEST_METHOD", raising=False)


@attrs.define
class LocalProxy:
    """A forward proxy and ``CONNECT`` tunneller on 127.0.0.1."""

    credentials: str | None = None
    port: int = 0
    #: ``(request line, headers)`` of every request the proxy received.
    seen: list[tuple[str, dict[str, str]]] = attrs.Factory(list)
    #: Names the proxy resolves itself (a test's stand-in for DNS): ``{"models.test": "127.0.0.1"}``.
    hosts: dict[str, str] = attrs.Factory(dict)

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    async def start(self, nursery: trio.Nursery, tls: ssl.SSLContext | None = None) -> LocalProxy:
        if tls is None:
            [listener] = await nursery.start(functools.partial(trio.serve_tcp, self._handle, 0, host="127.0.0.1"))
            self.port = listener.socket.getsockname()[1]
        else:
            [listener] = await nursery.start(
                functools.partial(trio.serve_ssl_over_tcp, self._handle, 0, tls, host="127.0.0.1")
            )
            self.port = listener.transport_listener.socket.getsockname()[1]
        return self

    async def _handle(self, client: trio.abc.Stream) -> None:
        buffer = b""
        while b"\r\n\r\n" not in buffer:
            data = await client.receive_some(65536)
            if not data:
                return
            buffer += data
        head, _, rest = buffer.partition(b"\r\n\r\n")
        line, *fields = head.decode("latin-1").split("\r\n")
        headers = {name.strip().lower(): value.strip() for name, _, value in (f.partition(":") for f in fields)}
        self.seen.append((line, headers))
        method, target, _ = line.split(" ")
        if self.credentials is not None:
            expected = "Basic " + base64.b64encode(self.credentials.encode()).decode()
            if headers.get("proxy-authorization") != expected:
                await client.send_all(b"HTTP/1.1 407 Proxy Authentication Required\r\nContent-Length: 0\r\n\r\n")
                await client.aclose()
                return
        if method == "CONNECT":
            host, _, port = target.rpartition(":")
            upstream = await trio.open_tcp_stream(self.hosts.get(host, host), int(port))
            await client.send_all(b"HTTP/1.1 200 Connection established\r\n\r\n")
        else:
            # One request per connection: the absolute form becomes the origin form upstream.
            url = httpx.URL(target)
            length = int(headers.get("content-length", "0"))
            while len(rest) < length:
                rest += await client.receive_some(65536)
            kept = [f for f in fields if not f.lower().startswith(("proxy-authorization", "connection"))]
            upstream = await trio.open_tcp_stream(self.hosts.get(url.host, url.host), url.port or 80)
            forwarded = f"{method} {url.raw_path.decode()} HTTP/1.1\r\n" + "\r\n".join([*kept, "Connection: close"])
            rest = forwarded.encode("latin-1") + b"\r\n\r\n" + rest
        if rest:
            await upstream.send_all(rest)

        async def pipe(source: trio.abc.Stream, sink: trio.abc.Stream) -> None:
            try:
                while data := await source.receive_some(65536):
                    await sink.send_all(data)
            except (trio.BrokenResourceError, trio.ClosedResourceError):
                pass
            with trio.CancelScope(shield=True), contextlib.suppress(trio.BrokenResourceError):
                await sink.aclose()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(pipe, client, upstream)
            nursery.start_soon(pipe, upstream, client)


async def test_plain_http_goes_through_a_forward_proxy_with_its_credentials(
    nursery: trio.Nursery, server: ProtocolServer, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    proxy = await LocalProxy(credentials=f"agent:{SECRET}").start(nursery)
    server.add(reply("via the proxy"))
    async with condukt.open_node() as node:
        configure_http(node, proxy=f"http://agent:{SECRET}@127.0.0.1:{proxy.port}")
        agent = await spawn(node, server, "anthropic")
        assert await agent.run("hi") == "via the proxy"
    [(line, headers)] = proxy.seen
    assert line == f"POST {server.url}/v1/messages HTTP/1.1"  # the absolute form
    assert headers["host"] == server.url.removeprefix("http://")
    assert headers["proxy-authorization"] == "Basic " + base64.b64encode(f"agent:{SECRET}".encode()).decode()
    [request] = server.requests
    assert "proxy-authorization" not in request.headers and request.headers["x-api-key"]
    assert SECRET not in caplog.text


async def test_https_goes_through_a_connect_tunnel_named_by_the_environment(
    nursery: trio.Nursery, monkeypatch: pytest.MonkeyPatch
) -> None:
    server_context, client_context = tls_contexts("models.test")
    server = ProtocolServer()
    listeners = await nursery.start(trio.serve_ssl_over_tcp, server._connection, 0, server_context)
    port = listeners[0].transport_listener.socket.getsockname()[1]
    # A name only the proxy can resolve: loopback addresses never go through an environment proxy.
    proxy = await LocalProxy(credentials=f"agent:{SECRET}", hosts={"models.test": "127.0.0.1"}).start(nursery)
    monkeypatch.setenv("HTTPS_PROXY", f"http://agent:{SECRET}@127.0.0.1:{proxy.port}")
    monkeypatch.setenv("HTTP_PROXY", "http://127.0.0.1:9")  # not for https:// URLs
    server.add(reply("tunnelled"), reply("again"))
    async with condukt.open_node() as node:
        configure_http(node, verify=client_context)
        agent = await node.spawn(condukt.Agent, model="openai:m", api_key="k", base_url=f"https://models.test:{port}/v1")
        assert await agent.run("hi") == "tunnelled"
        assert await agent.run("hi") == "again"  # through the same tunnel
    [(line, headers)] = proxy.seen
    assert line == f"CONNECT models.test:{port} HTTP/1.1"
    assert headers["proxy-authorization"].startswith("Basic ")
    assert server.connections == 1 and len(server.requests) == 2
    assert all("proxy-authorization" not in request.headers for request in server.requests)


async def test_an_https_proxy_is_reached_over_tls(nursery: trio.Nursery, server: ProtocolServer) -> None:
    proxy_context, client_context = tls_contexts()
    proxy = await LocalProxy(credentials=f"agent:{SECRET}").start(nursery, tls=proxy_context)
    url = f"https://agent:{SECRET}@127.0.0.1:{proxy.port}"
    transport = TrioTransport(proxy=httpx.Proxy(url, ssl_context=client_context))
    async with httpx.AsyncClient(transport=transport) as client:
        response = await client.post(server.url + "/v1/messages", json={})
        assert response.status_code == 200
    assert proxy.seen[0][0].startswith(f"POST {server.url}/v1/messages ")
    assert len(server.requests) == 1


async def test_wrong_proxy_credentials_fail_without_showing_them(nursery: trio.Nursery) -> None:
    proxy = await LocalProxy(credentials="agent:right").start(nursery)
    transport = TrioTransport(proxy=f"http://agent:{SECRET}@127.0.0.1:{proxy.port}")
    async with httpx.AsyncClient(transport=transport) as client:
        with pytest.raises(httpx.ProxyError, match="407") as info:
            await client.get("https://127.0.0.1:1/")
        # Plain HTTP: the proxy's own 407 answer comes back as the response.
        assert (await client.get("http://127.0.0.1:1/")).status_code == 407
    assert SECRET not in str(info.value) and f"127.0.0.1:{proxy.port}" in str(info.value)
    assert SECRET not in repr(ProxyMap(f"http://agent:{SECRET}@p:1").lookup("http", "x", 80))


async def test_no_proxy_goes_direct(
    nursery: trio.Nursery, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    proxy = await LocalProxy().start(nursery)
    monkeypatch.setenv("ALL_PROXY", proxy.url)
    monkeypatch.setenv("NO_PROXY", "example.com, 127.0.0.0/8")
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        assert (await client.post(server.url + "/v1/messages", json={})).status_code == 200
    assert proxy.seen == [] and len(server.requests) == 1
    # ``trust_env=False`` ignores the environment; ``proxy=`` overrides it, NO_PROXY included.
    monkeypatch.setenv("NO_PROXY", "")
    async with httpx.AsyncClient(transport=TrioTransport(trust_env=False)) as client:
        await client.post(server.url + "/v1/messages", json={})
    assert proxy.seen == []
    monkeypatch.setenv("NO_PROXY", "127.0.0.1")
    async with httpx.AsyncClient(transport=TrioTransport(proxy=proxy.url)) as client:
        await client.post(server.url + "/v1/messages", json={})
    assert len(proxy.seen) == 1 and len(server.requests) == 3


def test_the_environment_is_read_by_httpx_rules(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("HTTP_PROXY", "plain:3128")  # no scheme: http://
    monkeypatch.setenv("ALL_PROXY", "http://every:8080")
    monkeypatch.setenv("NO_PROXY", "example.com,.internal,10.0.0.0/8,[::1],localhost,api.test:8443,https://only.tls")
    routes = ProxyMap()

    def via(scheme: str, host: str, port: int) -> str | None:
        proxy = routes.lookup(scheme, host, port)
        return None if proxy is None else proxy.label

    assert via("http", "api.openai.com", 80) == "http://plain:3128"
    assert via("https", "api.openai.com", 443) == "http://every:8080"  # ALL_PROXY when no HTTPS_PROXY
    assert via("https", "example.com", 443) is None and via("https", "www.example.com", 443) is None
    assert via("https", "notexample.com", 443) == "http://every:8080"
    assert via("https", "internal", 443) is not None and via("https", "a.internal", 443) is None
    assert via("http", "10.1.2.3", 80) is None and via("http", "11.1.2.3", 80) is not None
    assert via("http", "::1", 80) is None and via("http", "localhost", 80) is None
    assert via("https", "api.test", 8443) is None and via("https", "api.test", 443) is not None
    assert via("https", "only.tls", 443) is None and via("http", "only.tls", 80) is not None
    monkeypatch.setenv("NO_PROXY", "foo, *")
    assert via("http", "api.openai.com", 80) is not None  # ``routes`` read the environment once
    assert not ProxyMap()
    assert not ProxyMap(trust_env=False) and not ProxyMap(None, trust_env=False)


async def test_proxy_settings() -> None:
    with pytest.raises(ValueError, match="SOCKS"):
        TrioTransport(proxy="socks5://127.0.0.1:1080")
    settings = HttpSettings(proxy="http://127.0.0.1:3128")
    client, transport = settings.build_client_and_transport()
    assert isinstance(transport, TrioTransport)
    assert transport._proxies.lookup("https", "api.anthropic.com", 443) is not None
    await client.aclose()


async def test_an_environment_proxy_never_applies_to_this_machine(
    nursery: trio.Nursery, server: ProtocolServer, monkeypatch: pytest.MonkeyPatch
) -> None:
    # A machine whose environment names a proxy for the internet still reaches a local model server directly.
    proxy = await LocalProxy().start(nursery)
    monkeypatch.setenv("ALL_PROXY", proxy.url)
    monkeypatch.delenv("NO_PROXY", raising=False)
    monkeypatch.delenv("no_proxy", raising=False)
    routes = ProxyMap()
    assert routes.lookup("http", "localhost", 11434) is None and routes.lookup("http", "127.0.0.5", 80) is None
    assert routes.lookup("http", "::1", 80) is None and routes.lookup("http", "api.openai.com", 80) is not None
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        assert (await client.post(server.url + "/v1/messages", json={})).status_code == 200
    assert proxy.seen == []
    assert ProxyMap(proxy.url).lookup("http", "127.0.0.1", 80) is not None  # an explicit proxy= applies to all
