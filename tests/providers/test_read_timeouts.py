"""Read timeouts of TrioTransport: one timer for all connections, per-read deadlines that reset while bytes move.

And their edges, which a cancel scope per read never had: a second trio run,
bytes (or part of a TLS record) in the tick of the deadline, a reader woken in
the timer's own batch, closed connections, streams that go silent.
"""

from __future__ import annotations

import contextlib
import functools
import gc
import math
import os
import socket
import threading
from collections.abc import Callable

import httpx
import pytest
import trio
import trio.testing
from waiting import WallBound, Watched

import condukt
from condukt.providers import ProviderUnavailable, StreamError
from condukt.providers.lowlevel import TrioTransport
from condukt.testing.server import Fault, ProtocolServer, reply

from .helpers import read_head, serve_tcp, spawn, tls_contexts


async def _by_path(stream: trio.SocketStream) -> None:
    """``/stall``: never answers; ``/slow``: answers after 0.6 s; ``/trickle``: a body one byte per 0.1 s; else at once."""
    while head := await read_head(stream):
        path = head.split(b" ", 2)[1]
        if path == b"/stall":
            await trio.sleep_forever()
        if path == b"/slow":
            await trio.sleep(0.6)
        if path == b"/trickle":
            await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 8\r\n\r\n")
            for byte in b"trickled":
                await trio.sleep(0.1)
                await stream.send_all(bytes([byte]))
            continue
        await stream.send_all(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")


@pytest.mark.slow
async def test_each_request_times_out_after_its_own_read_timeout(nursery: trio.Nursery, wall_bound: WallBound) -> None:
    url = await serve_tcp(nursery, _by_path)
    outcomes: dict[str, tuple[str, float]] = {}
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        started = trio.current_time()

        async def get(label: str, path: str, read: float) -> None:
            try:
                response = await client.get(url + path, timeout=httpx.Timeout(5, read=read))
                outcomes[label] = (response.text, trio.current_time() - started)
            except httpx.ReadTimeout as exc:
                outcomes[label] = (str(exc), trio.current_time() - started)

        # Together no longer than the longest timeout; none sooner than its own.
        with wall_bound(1.0, "three requests timed by 0.2 s, 2 s and 1 s read timeouts", at_least=1.0):
            async with trio.open_nursery() as requests:
                requests.start_soon(get, "long stall", "/stall", 1.0)
                requests.start_soon(get, "short stall", "/stall", 0.2)
                requests.start_soon(get, "slow answer", "/slow", 2.0)
    assert outcomes["short stall"][0] == "no data from the server for 0.2s"
    assert outcomes["long stall"][0] == "no data from the server for 1s"
    assert outcomes["slow answer"][0] == "ok"
    # In the order of their deadlines (0.2 s, the answer at 0.6 s, 1 s), each past its own.
    assert 0.2 <= outcomes["short stall"][1] < outcomes["slow answer"][1] < outcomes["long stall"][1]
    assert outcomes["slow answer"][1] >= 0.6 and outcomes["long stall"][1] >= 1.0


async def test_a_body_that_keeps_moving_is_not_cut_by_the_read_timeout(nursery: trio.Nursery) -> None:
    # 8 bytes, 0.1 s apart: 0.8 s in all, but never 0.3 s without a byte.
    url = await serve_tcp(nursery, _by_path)
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        with trio.fail_after(5):
            response = await client.get(url + "/trickle", timeout=httpx.Timeout(5, read=0.3))
    assert response.text == "trickled"


@pytest.mark.slow
async def test_a_shorter_read_timeout_on_a_reused_connection_applies(nursery: trio.Nursery, wall_bound: WallBound) -> None:
    url = await serve_tcp(nursery, _by_path)
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(url + "/fast", timeout=httpx.Timeout(5, read=30))).text == "ok"
        assert transport.idle_connections == 1  # the next request reuses it
        with wall_bound(0.5, "a 0.2 s read timeout on a connection first used with 30 s"), pytest.raises(
            httpx.ReadTimeout, match="for 0.2s"
        ):
            await client.get(url + "/stall", timeout=httpx.Timeout(5, read=0.2))
        # The timed-out connection was closed, not pooled: the next request gets a working one.
        assert (await client.get(url + "/fast", timeout=httpx.Timeout(5, read=0.2))).text == "ok"


def _read_timer_tasks() -> list[trio.lowlevel.Task]:
    found = []
    pending = [trio.lowlevel.current_root_task()]
    while pending:
        task = pending.pop()
        if task is None:
            continue
        if task.name == "condukt read timer":
            found.append(task)
        pending.extend(child for nursery in task.child_nurseries for child in nursery.child_tasks)
    return found


async def test_the_timer_task_ends_once_no_read_is_timed(nursery: trio.Nursery) -> None:
    url = await serve_tcp(nursery, _by_path)
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        assert (await client.get(url + "/fast", timeout=httpx.Timeout(5, read=0.2))).text == "ok"
        assert len(_read_timer_tasks()) == 1
        await trio.sleep(0.3)  # past the deadline the connection was filed under
        assert _read_timer_tasks() == []
        # A later timed read starts it again.
        with pytest.raises(httpx.ReadTimeout):
            await client.get(url + "/stall", timeout=httpx.Timeout(5, read=0.2))


@pytest.mark.slow
def test_one_transport_times_reads_in_one_trio_run_after_another(wall_bound: WallBound) -> None:
    transport = TrioTransport()

    async def one_run() -> None:
        async with trio.open_nursery() as nursery:
            url = await serve_tcp(nursery, _by_path)
            client = httpx.AsyncClient(transport=transport)
            with wall_bound(0.5, "a 0.2 s read timeout"), pytest.raises(httpx.ReadTimeout):
                await client.get(url + "/stall", timeout=httpx.Timeout(5, read=0.2))
            nursery.cancel_scope.cancel()

    trio.run(one_run)
    trio.run(one_run)


async def test_bytes_that_come_with_the_deadline_win(nursery: trio.Nursery, mock_clock: trio.testing.MockClock) -> None:
    # The answer reaches the socket in the same tick as the read's deadline passes: as under a
    # cancel scope (trio delivers I/O before it expires deadlines), the answer is read, not
    # timed out. Trio orders each batch at random, so without the timer's readability check
    # about half of these rounds would time out.
    server_fds: list[int] = []

    async def handler(stream: trio.SocketStream) -> None:
        try:
            while await read_head(stream):
                server_fds.append(stream.socket.fileno())
        except trio.BrokenResourceError:
            pass  # the client closed the connection (a timed-out read)

    url = await serve_tcp(nursery, handler)
    outcomes: list[str] = []
    async with httpx.AsyncClient(transport=TrioTransport()) as client:

        async def get(done: trio.Event) -> None:
            try:
                outcomes.append((await client.get(url, timeout=httpx.Timeout(5, read=1.0))).text)
            except httpx.ReadTimeout as exc:
                outcomes.append(str(exc))
            done.set()

        for _ in range(30):
            server_fds.clear()
            done = trio.Event()
            nursery.start_soon(get, done)
            await trio.testing.wait_all_tasks_blocked()
            [fd] = server_fds
            # In one step, without a checkpoint between: the answer is in the client's socket
            # and the clock is at the read's deadline.
            os.write(fd, b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")
            mock_clock.jump(1.0)
            await done.wait()
    assert outcomes == ["ok"] * 30


class _FakeConnection:
    """A connection as the read timer sees it, waiting on one read."""

    def __init__(self) -> None:
        self.read_deadline = math.inf
        self.filed_at = math.inf
        self.timed_out = False
        self.readable = False
        self.closed_at: float | None = None

    def has_data(self) -> bool:
        return self.readable

    def close(self) -> None:
        self.closed_at = trio.current_time()


async def _readable_at_its_deadline(clock: trio.testing.MockClock) -> _FakeConnection:
    """A connection waiting on a read with a 1 s timeout, filed with a timer, readable when the clock reaches it."""
    from condukt.providers._http.read_timer import ReadTimer

    timer = ReadTimer()
    conn = _FakeConnection()
    conn.read_deadline = trio.current_time() + 1.0
    timer.file(conn, conn.read_deadline)
    conn.readable = True
    clock.jump(1.0)
    await trio.testing.wait_all_tasks_blocked()
    return conn


async def test_a_read_still_waiting_after_bytes_that_were_no_data_times_out(
    mock_clock: trio.testing.MockClock,
) -> None:
    # Bytes at the deadline spare the read (its reader wakes for them); but if they were no data
    # for the reader (a TLS record of the protocol's own), it goes on waiting on the same read,
    # and the timer must still end it.
    conn = await _readable_at_its_deadline(mock_clock)
    assert conn.closed_at is None and not conn.timed_out
    conn.readable = False  # the reader took the bytes and waits again, on the same read
    mock_clock.jump(1.0)
    await trio.testing.wait_all_tasks_blocked()
    assert conn.timed_out and conn.closed_at is not None


async def test_a_read_is_spared_by_bytes_at_its_deadline_only_once(mock_clock: trio.testing.MockClock) -> None:
    # A socket that stays readable while its reader stays in the same read (a TLS stream busy
    # with records of its own, say) cannot keep the read alive past one short look again.
    conn = await _readable_at_its_deadline(mock_clock)
    assert conn.closed_at is None
    mock_clock.jump(1.0)
    await trio.testing.wait_all_tasks_blocked()
    assert conn.timed_out and conn.closed_at is not None


# ---------------------------------------------------------------- across trio runs


def _blocking_server() -> tuple[str, Callable[[], None]]:
    """A server in threads (it outlives a trio run): ``/fast`` answers, ``/stall`` never does.

    Returns its URL and the function that stops it: that shuts its sockets
    down, which ends the threads' blocking calls (they wait on nothing else).
    """
    listener = socket.create_server(("127.0.0.1", 0))
    port = listener.getsockname()[1]
    connections: list[socket.socket] = []

    def connection(sock: socket.socket) -> None:
        buffer = b""
        with sock:
            while data := sock.recv(65536):
                buffer += data
                while b"\r\n\r\n" in buffer:
                    head, _, buffer = buffer.partition(b"\r\n\r\n")
                    if head.split(b" ", 2)[1] == b"/fast":
                        sock.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 2\r\n\r\nok")

    def serve() -> None:
        with listener:
            while True:
                try:
                    sock, _ = listener.accept()
                except OSError:  # shut down by stop()
                    return
                connections.append(sock)
                threading.Thread(target=connection, args=(sock,), daemon=True).start()

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()

    def stop() -> None:
        for sock in [listener, *connections]:
            with contextlib.suppress(OSError):
                sock.shutdown(socket.SHUT_RDWR)
        thread.join(5)

    return f"http://127.0.0.1:{port}", stop


def test_a_connection_reused_in_a_second_trio_run_still_times_out() -> None:
    # One transport, two trio runs, each with its own clock starting at 0 (as pytest-trio's
    # clocks do): the connection kept alive in the first run is reused in the second, where
    # its read must still time out.
    url, stop = _blocking_server()
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
        stop()
    assert outcome == ["no data from the server for 1s"]


# ---------------------------------------------------------------- in the tick of the deadline


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


async def test_a_tls_read_given_part_of_a_record_at_its_deadline_still_times_out(
    nursery: trio.Nursery, mock_clock: trio.testing.MockClock
) -> None:
    # On a real TLS connection: at the read's deadline only the header of a TLS record reaches
    # the client's socket. Its reader takes those bytes but has nothing to return: the read
    # must time out, at once (as under a cancel scope, when the reader runs first in trio's
    # batch) or shortly after (when the timer runs first and spares it for the bytes). Trio
    # orders each batch at random, hence several rounds.
    server_context, client_context = tls_contexts()
    server_fds: Watched[int] = Watched()

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
            [fd] = await server_fds.wait_for_length(1)  # the request is on the server
            # An application-data record header announcing 32 bytes that never come, in the
            # tick the read's deadline passes.
            os.write(fd, b"\x17\x03\x03\x00\x20")
            mock_clock.jump(1.0)
            await trio.testing.wait_all_tasks_blocked()
            mock_clock.jump(0.1)
            await trio.testing.wait_all_tasks_blocked()
            assert done.is_set()
    assert [type(outcome) for outcome in outcomes] == [httpx.ReadTimeout] * 12


# ---------------------------------------------------------------- closed connections, silent streams


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
