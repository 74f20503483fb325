"""Read timeouts kept by the transport's one timer task: the edges a cancel scope per read never had
(a second trio run, a reader woken in the timer's own batch, closed connections, stream errors)."""

from __future__ import annotations

import gc
import os
import socket
import threading

import httpx
import pytest
import trio
import trio.testing

import condukt
from condukt.providers import ProviderUnavailable, StreamError
from condukt.providers.lowlevel import TrioTransport
from condukt.testing.server import Fault, ProtocolServer, reply

from .helpers import read_head, serve_tcp, spawn


def _blocking_server(stop: threading.Event) -> tuple[str, threading.Thread]:
    """A server in a thread (it outlives a trio run): ``/fast`` answers, ``/stall`` never does."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(0.1)
    port = listener.getsockname()[1]

    def connection(sock: socket.socket) -> None:
        sock.settimeout(0.1)
        buffer = b""
        with sock:
            while not stop.is_set():
                try:
                    data = sock.recv(65536)
                except TimeoutError:
                    continue
                if not data:
                    return
                buffer += data
                while b"\r\n\r\n" in buffer:
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    if head.split(b" ", 2)[1] == b"/fast":
                        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def serve() -> None:
        with listener:
            while not stop.is_set():
                try:
                    sock, _ = listener.accept()
                except TimeoutError:
                    continue
                threading.Thread(target=connection, args=(sock,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return f"http://127.0.0.1:{port}", thread


def test_a_connection_reused_in_a_second_trio_run_still_times_out() -> None:
    # One transport, two trio runs, each with its own clock starting at 0 (as pytest-trio's
    # clocks do): the connection kept alive in the first run is reused in the second, where
    # its read must still time out.
    stop = threading.Event()
    url, thread = _blocking_server(stop)
    transport = TrioTransport()

    async def first() -> None:
        client = httpx.AsyncClient(transport=transport)  # not closed: the transport keeps its connection
        response = await client.get(url + "/fast", timeout=httpx.Timeout(5, read=0.2))
        assert response.text == "ok"

    outcome: list[str] = []

    async def second() -> None:
        assert transport.idle_connections == 1  # the first run's connection, reused now
        client = httpx.AsyncClient(transport=transport)
        try:
            with trio.fail_after(3):  # the mock clock runs at real speed here
                await client.get(url + "/stall", timeout=httpx.Timeout(5, read=1.0))
        except httpx.ReadTimeout as exc:
            outcome.append(str(exc))
        except trio.TooSlowError:
            outcome.append("the read never timed out")

    try:
        trio.run(first, clock=trio.testing.MockClock())  # time stands still: the read is filed under 0.2
        trio.run(second, clock=trio.testing.MockClock(rate=1))
    finally:
        stop.set()
        thread.join(5)
    assert outcome == ["no data from the server for 1s"]


async def test_a_reader_woken_as_its_read_times_out_never_reads_a_reused_descriptor(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    # The server's bytes arrive in the same scheduler batch as the timer wakes for the read's
    # deadline. If the timer runs first, it closes the socket after the reader was woken; a
    # task running between them may then get the same descriptor number (here: a pipe put
    # there, as the next socket or file opened would be). The reader must not read that
    # descriptor: it belongs to someone else now. Trio orders each batch at random (and the
    # bytes are not always seen in the timer's batch): about one round in four has the
    # timer first, and 40 rounds miss it about once in 100,000 runs.
    server_fds: list[int] = []
    answer = trio.Event()

    async def handler(stream: trio.SocketStream) -> None:
        while await read_head(stream):
            server_fds.append(stream.socket.fileno())
            await trio.sleep_forever()

    url = await serve_tcp(nursery, handler)
    stolen: list[bytes] = []
    outcomes: list[str] = []
    for _ in range(40):
        server_fds.clear()
        answer = trio.Event()
        done = trio.Event()
        start = trio.current_time()
        transport = TrioTransport()  # a new connection each round
        client = httpx.AsyncClient(transport=transport)

        async def request(done: trio.Event = done, client: httpx.AsyncClient = client) -> None:
            try:
                response = await client.get(url + "/", timeout=httpx.Timeout(5, read=1.0))
                outcomes.append(response.text)
            except httpx.HTTPError as exc:
                outcomes.append(f"{type(exc).__name__}: {exc}")
            done.set()

        async def opener(answer: trio.Event = answer, start: float = start, transport: TrioTransport = transport) -> None:
            [conn] = transport._active
            fd = conn.fd
            await trio.sleep_until(start + 0.5)  # wakes in the timer's batch, before it in the run queue
            try:
                os.fstat(fd)
            except OSError:  # the timer closed it after the reader was woken: reuse the number
                read, write = os.pipe()
                if write == fd:  # the write end took the number: keep it under another
                    write = os.dup(write)
                if read != fd:
                    os.dup2(read, fd)
                    os.close(read)
                    read = fd
                os.write(write, b"someone else's bytes")
                os.close(write)
                await answer.wait()
                os.set_blocking(read, False)
                try:
                    left = os.read(read, 100)
                except BlockingIOError:
                    left = b""
                if left != b"someone else's bytes":
                    stolen.append(left)
                os.close(read)

        nursery.start_soon(request)
        await trio.testing.wait_all_tasks_blocked()
        nursery.start_soon(opener)
        await trio.testing.wait_all_tasks_blocked()
        [server_fd] = server_fds
        # In one step: the answer is in the client's socket, and the clock is past the read's deadline.
        os.write(server_fd, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
        mock_clock.jump(1.0)
        await done.wait()
        answer.set()
        await trio.testing.wait_all_tasks_blocked()
    assert stolen == []
    assert set(outcomes) <= {"ok", "ReadTimeout: no data from the server for 1s"}


def _client_socket_streams() -> int:
    gc.collect()
    return sum(1 for o in gc.get_objects() if type(o) is trio.SocketStream)


async def test_closed_connections_are_not_kept_until_their_read_deadline(nursery: trio.Nursery) -> None:
    # A server that closes every connection after its answer: each request has a new
    # connection, timed with a long read timeout. Once closed, nothing should keep them.
    async def answers_and_closes(stream: trio.SocketStream) -> None:
        if await read_head(stream):
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\nConnection: close\r\n\r\nok")

    url = await serve_tcp(nursery, answers_and_closes)
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        before = _client_socket_streams()
        for _ in range(200):
            response = await client.get(url + "/", timeout=httpx.Timeout(5, read=600))
            assert response.text == "ok"
        await trio.testing.wait_all_tasks_blocked()
        assert transport.idle_connections == transport.active_connections == 0
        assert _client_socket_streams() - before < 100


async def test_a_stream_silent_before_any_content_is_provider_unavailable(
    node: condukt.Node, server: ProtocolServer
) -> None:
    # The head and a first frame came, then nothing: a timeout of a server that answered
    # nothing yet, as the docs' table says (ProviderUnavailable), not a stream cut mid-way.
    server.add(Fault(reply("never seen"), after=1, kind="hang"))
    agent = await spawn(node, server, "anthropic", model_options={"timeout": 0.2, "retry": False})
    with trio.fail_after(5), pytest.raises(ProviderUnavailable, match="no data from the server for 0.2s"):
        await agent.run("hi")


async def test_a_stream_silent_after_content_is_a_stream_error(node: condukt.Node, server: ProtocolServer) -> None:
    server.add(Fault(reply("stalls here", chunk=3), after=4, kind="hang"))
    agent = await spawn(node, server, "anthropic", model_options={"timeout": 0.2, "retry": False})
    with trio.fail_after(5), pytest.raises(StreamError, match="no data from the server for 0.2s"):
        await agent.run("hi")
