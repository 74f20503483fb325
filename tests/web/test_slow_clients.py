"""Clients that send their request headers slowly (slowloris), or nothing at all, are cut off: uvicorn with
condukt.web.uvicorn.HTTPProtocol, and `condukt serve` (hypercorn on trio), each a real server."""

from __future__ import annotations

import os
import signal
import sys
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from pathlib import Path

import httpx
import trio

import condukt.web
import condukt.web.uvicorn

from .helpers import Echo, free_port, uvicorn_server


class Quick(condukt.web.uvicorn.HTTPProtocol):
    header_timeout = 0.5


async def cut_off(port: int, opening: bytes, drip: bytes | None) -> bool:
    """Connect, send ``opening``, then ``drip`` every 0.1 s (None: nothing more); True once the server closes."""
    stream = await trio.open_tcp_stream("127.0.0.1", port)
    closed = False
    async with stream, trio.open_nursery() as nursery:

        async def dribble() -> None:
            try:
                if opening:
                    await stream.send_all(opening)
                while drip is not None:
                    await trio.sleep(0.1)
                    await stream.send_all(drip)
            except trio.BrokenResourceError:
                pass  # the server closed it: what the reader below is waiting for

        nursery.start_soon(dribble)
        try:
            while await stream.receive_some(65536):
                pass
        except trio.BrokenResourceError:
            pass
        closed = True
        nursery.cancel_scope.cancel()
    return closed


SLOW_HEADERS = (b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n", b"X-Slow: a\r\n")


async def test_uvicorn_with_condukts_protocol_cuts_off_slow_headers_and_silent_clients() -> None:
    app = condukt.web.create_app(agents={"echo": Echo})
    with uvicorn_server(app, http=Quick) as url:
        port = httpx.URL(url).port
        assert port is not None
        with trio.fail_after(30):  # a hang guard: the limit is half a second
            assert await cut_off(port, *SLOW_HEADERS)
            assert await cut_off(port, b"", None)  # connects, sends nothing
            # A kept-alive connection whose second request is the slow one.
            first = b"GET /healthz HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n"
            assert await cut_off(port, first + SLOW_HEADERS[0], SLOW_HEADERS[1])
        async with httpx.AsyncClient(base_url=url) as client:  # ordinary clients are served as before
            for _ in range(3):
                assert (await client.get("/healthz")).status_code == 200


@asynccontextmanager
async def condukt_serve(tmp_path: Path) -> AsyncIterator[int]:
    (tmp_path / "echo_app.py").write_text("import condukt.web\napp = condukt.web.create_app()\n")
    port = free_port()
    process = await trio.lowlevel.open_process(
        [sys.executable, "-m", "condukt", "serve", "echo_app:app", "--port", str(port)],
        cwd=tmp_path, env={**os.environ, "PYTHONPATH": str(tmp_path)},
    )
    try:
        async with httpx.AsyncClient() as client:
            with trio.fail_after(30):
                while True:  # another process: nothing to wait on but its answers
                    try:
                        if (await client.get(f"http://127.0.0.1:{port}/healthz")).status_code == 200:
                            break
                    except httpx.TransportError:
                        pass
                    await trio.sleep(0.05)
        yield port
    finally:
        process.send_signal(signal.SIGTERM)
        await process.wait()


async def test_condukt_serve_cuts_off_slow_headers_and_silent_clients(tmp_path: Path) -> None:
    async with condukt_serve(tmp_path) as port:
        closed: list[bool] = []

        async def attack(opening: bytes, drip: bytes | None) -> None:
            closed.append(await cut_off(port, opening, drip))

        with trio.fail_after(60):  # a hang guard: hypercorn's limit is its 5 s keep-alive timeout
            async with trio.open_nursery() as nursery:
                nursery.start_soon(attack, *SLOW_HEADERS)
                nursery.start_soon(attack, b"", None)  # connects, sends nothing
        assert closed == [True, True]
