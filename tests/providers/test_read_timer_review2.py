"""Second review of the read timer: bytes at a read's deadline, and ``exchange_prepared`` as a plain method."""

from __future__ import annotations

import functools
import gc
import os
import warnings

import httpx
import pytest
import trio
import trio.testing

from condukt.providers.lowlevel import TrioTransport

from .helpers import read_head, tls_contexts


async def test_a_tls_read_given_part_of_a_record_at_its_deadline_still_times_out(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    # On a real TLS connection: at the read's deadline only the header of a TLS record reaches
    # the client's socket. Its reader takes those bytes but has nothing to return: the read
    # must time out, at once (as under a cancel scope, when the reader runs first in trio's
    # batch) or shortly after (when the timer runs first and spares it for the bytes). Trio
    # orders each batch at random, hence several rounds.
    server_context, client_context = tls_contexts()
    server_fds: list[int] = []

    async def handler(stream: trio.SSLStream[trio.SocketStream]) -> None:
        try:
            if await read_head(stream):
                server_fds.append(stream.transport_stream.socket.fileno())
                await trio.sleep_forever()
        except trio.BrokenResourceError:
            pass  # the client closed the connection (the timed-out read)

    listeners = await nursery.start(
        functools.partial(trio.serve_ssl_over_tcp, handler, 0, server_context, host="127.0.0.1")
    )
    port = listeners[0].transport_listener.socket.getsockname()[1]
    outcomes: list[BaseException | str] = []
    async with httpx.AsyncClient(transport=TrioTransport(ssl_context=client_context, trust_env=False)) as client:

        async def get(done: trio.Event) -> None:
            try:
                outcomes.append(
                    (await client.get(f"https://127.0.0.1:{port}/", timeout=httpx.Timeout(5, read=1.0))).text
                )
            except httpx.HTTPError as exc:
                outcomes.append(exc)
            done.set()

        for _ in range(12):
            server_fds.clear()
            done = trio.Event()
            nursery.start_soon(get, done)
            while not server_fds:
                await trio.testing.wait_all_tasks_blocked()
            [fd] = server_fds
            # An application-data record header announcing 32 bytes that never come, in the
            # tick the read's deadline passes.
            os.write(fd, b"\x17\x03\x03\x00\x20")
            mock_clock.jump(1.0)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(0.1)
            await trio.testing.wait_all_tasks_blocked()
            assert done.is_set()
    assert [type(outcome) for outcome in outcomes] == [httpx.ReadTimeout] * 12


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
