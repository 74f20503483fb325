"""Read timeouts of TrioTransport: one timer for all connections, per-read deadlines that reset while bytes move."""

from __future__ import annotations

import math
import os

import httpx
import pytest
import trio
import trio.testing

from condukt.providers.lowlevel import TrioTransport

from .helpers import read_head, serve_tcp


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


async def test_each_request_times_out_after_its_own_read_timeout(nursery: trio.Nursery) -> None:
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

        with trio.fail_after(5):
            async with trio.open_nursery() as requests:
                requests.start_soon(get, "long stall", "/stall", 1.0)
                requests.start_soon(get, "short stall", "/stall", 0.2)
                requests.start_soon(get, "slow answer", "/slow", 2.0)
    assert outcomes["short stall"][0] == "no data from the server for 0.2s"
    assert outcomes["long stall"][0] == "no data from the server for 1s"
    assert outcomes["slow answer"][0] == "ok"
    assert 0.2 <= outcomes["short stall"][1] < outcomes["slow answer"][1] < outcomes["long stall"][1]
    assert outcomes["long stall"][1] >= 1.0


async def test_a_body_that_keeps_moving_is_not_cut_by_the_read_timeout(nursery: trio.Nursery) -> None:
    # 8 bytes, 0.1 s apart: 0.8 s in all, but never 0.3 s without a byte.
    url = await serve_tcp(nursery, _by_path)
    async with httpx.AsyncClient(transport=TrioTransport()) as client:
        with trio.fail_after(5):
            response = await client.get(url + "/trickle", timeout=httpx.Timeout(5, read=0.3))
    assert response.text == "trickled"


async def test_a_shorter_read_timeout_on_a_reused_connection_applies(nursery: trio.Nursery) -> None:
    url = await serve_tcp(nursery, _by_path)
    transport = TrioTransport()
    async with httpx.AsyncClient(transport=transport) as client:
        assert (await client.get(url + "/fast", timeout=httpx.Timeout(5, read=30))).text == "ok"
        assert transport.idle_connections == 1  # the next request reuses it
        started = trio.current_time()
        with trio.fail_after(3), pytest.raises(httpx.ReadTimeout, match="for 0.2s"):
            await client.get(url + "/stall", timeout=httpx.Timeout(5, read=0.2))
        assert trio.current_time() - started < 2
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


def test_one_transport_times_reads_in_one_trio_run_after_another() -> None:
    transport = TrioTransport()

    async def one_run() -> float:
        async with trio.open_nursery() as nursery:
            url = await serve_tcp(nursery, _by_path)
            client = httpx.AsyncClient(transport=transport)
            started = trio.current_time()
            with trio.fail_after(3), pytest.raises(httpx.ReadTimeout):
                await client.get(url + "/stall", timeout=httpx.Timeout(5, read=0.2))
            nursery.cancel_scope.cancel()
            return trio.current_time() - started

    assert trio.run(one_run) < 2
    assert trio.run(one_run) < 2


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
