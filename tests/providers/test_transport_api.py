"""TrioTransport's plain-method API: ``prepare``/``exchange_prepared`` and ``handle_async_request`` as httpx sees it."""

from __future__ import annotations

import functools
import gc
import warnings

import httpx
import pytest
import trio

from condukt.providers.lowlevel import TrioTransport

from .helpers import read_head


async def test_an_exchange_never_awaited_holds_no_slot(nursery: trio.Nursery) -> None:
    # ``exchange_prepared`` hands back the round trip without starting it: dropped un-awaited,
    # it has taken none of the transport's slots (the only one here), and raises nothing.
    async def handler(stream: trio.SocketStream) -> None:
        while await read_head(stream):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    [listener] = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    url = httpx.URL(f"http://127.0.0.1:{listener.socket.getsockname()[1]}/")
    transport = TrioTransport(max_connections=1)
    prepared = transport.prepare("POST", url, [(b"Host", url.netloc)])
    with warnings.catch_warnings():
        warnings.simplefilter("ignore", RuntimeWarning)  # the coroutine was never awaited
        transport.exchange_prepared(prepared, b"{}")
        gc.collect()
    with trio.fail_after(5):
        response = await transport.exchange_prepared(prepared, b"{}")
        assert await response.read() == b"ok"
        response = await transport.exchange_prepared(prepared, b"{}")
        assert await response.read() == b"ok"
    await transport.aclose()


@pytest.mark.parametrize("stream", [False, True])
async def test_handle_async_request_gives_the_response_httpx_gives(nursery: trio.Nursery, stream: bool) -> None:
    # What ``RawResponse.to_httpx`` builds is the response httpx users had: status, reason,
    # raw headers in the server's case, a decoded body, the connection back in the pool.
    async def handler(server_stream: trio.SocketStream) -> None:
        while await read_head(server_stream):
            await server_stream.send_all(
                b"HTTP/1.1 201 Made Here\r\nX-Thing: A\r\nx-thing: b\r\nContent-Length: 5\r\n\r\nhello"
            )

    [listener] = await nursery.start(functools.partial(trio.serve_tcp, handler, 0, host="127.0.0.1"))
    url = f"http://127.0.0.1:{listener.socket.getsockname()[1]}/"
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        for _ in range(2):
            if stream:
                async with client.stream("GET", url) as response:
                    assert [chunk async for chunk in response.aiter_raw()] == [b"hello"]
            else:
                response = await client.get(url)
                assert response.content == b"hello"
            assert response.status_code == 201
            assert response.reason_phrase == "Made Here"
            assert response.http_version == "HTTP/1.1"
            assert response.headers.raw[:2] == [(b"X-Thing", b"A"), (b"x-thing", b"b")]
            assert response.headers.get_list("x-thing") == ["A", "b"]
