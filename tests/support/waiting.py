"""Waits on events for the test packages: no test polls with ``sleep``.

tests/support is on ``sys.path`` (pyproject's ``pythonpath``), so every
test package imports this module by name: ``from waiting import Watched``.

* :class:`Watched`: a list whose changes wake the tasks waiting for a
  condition on it (a tool's calls, an agent's events, restarted incarnations);
* :func:`open_fifo` (:func:`open_fifo_asyncio` on asyncio, :func:`open_fifo_sync`
  in a thread): a named pipe a
  subprocess writes a line into when it reaches a point the test waits for
  (it started, it wrote its pids);
* :func:`serving_process`: a server in another process, ready when it logs so;
* :func:`exited` (and :func:`gone`, for synchronous code): waits until a
  process (not necessarily a child) has exited, woken by the kernel
  through a pidfd.

Each takes a ``timeout``: a safety net against a hang (virtual time under
``autojump_clock``, where a wait that can never end fails at once), not a
timing assertion. Timing assertions go through the ``wall_bound`` fixture.
"""

from __future__ import annotations

import asyncio
import contextlib
import errno
import os
import select
import subprocess
import time
from collections.abc import AsyncIterator, Callable, Iterable, Iterator
from pathlib import Path
from typing import Any, Protocol, SupportsIndex, TypeVar

import trio

T = TypeVar("T")

#: Default safety net of a wait, in seconds.
TIMEOUT = 30.0

class WallBound(Protocol):
    """The type of the ``wall_bound`` fixture (tests/conftest.py): ``with wall_bound(2.0, "what"): ...``."""

    def __call__(self, seconds: float, what: str, *, at_least: float = 0.0) -> contextlib.AbstractContextManager[None]:
        """A block that must take at most ``seconds`` (times the suite's slack) and at least ``at_least``."""
        ...


class Watched(list[T]):
    """A list that wakes its waiters whenever an item is added: ``await log.wait_until(lambda: ...)``.

    Pass it wherever code appends to a list it was given (a ``Recorder``'s
    ``log``, a tool's ``calls``); the predicate is checked again after each
    change, never on a timer.
    """

    def __init__(self, items: Iterable[T] = ()) -> None:
        super().__init__(items)
        self._lot: trio.lowlevel.ParkingLot | None = None

    def _changed(self) -> None:
        lot = self._lot
        if lot:
            lot.unpark_all()

    def append(self, item: T) -> None:
        super().append(item)
        self._changed()

    def extend(self, items: Iterable[T]) -> None:
        super().extend(items)
        self._changed()

    def insert(self, index: SupportsIndex, item: T) -> None:
        super().insert(index, item)
        self._changed()

    async def wait_until(self, predicate: Callable[[], object], *, timeout: float = TIMEOUT) -> None:
        """Return once ``predicate()`` is true (checked now, then after each change); a checkpoint either way."""
        with trio.fail_after(timeout):
            await trio.lowlevel.checkpoint()
            while not predicate():
                if self._lot is None:
                    self._lot = trio.lowlevel.ParkingLot()
                await self._lot.park()

    async def wait_for_length(self, count: int, *, timeout: float = TIMEOUT) -> list[T]:
        """Return the first ``count`` items once there are that many."""
        await self.wait_until(lambda: len(self) >= count, timeout=timeout)
        return self[:count]


class FifoReader:
    """The reading end of :func:`open_fifo`: whole lines, as the writers send them."""

    def __init__(self, stream: trio.lowlevel.FdStream) -> None:
        self._stream = stream
        self._buffer = b""

    async def receive_line(self, *, timeout: float = TIMEOUT) -> str:
        """The next line written into the pipe (without its newline); waits for it."""
        with trio.fail_after(timeout):
            while b"\n" not in self._buffer:
                self._buffer += await self._stream.receive_some()
        line, _, self._buffer = self._buffer.partition(b"\n")
        return line.decode()


@contextlib.asynccontextmanager
async def open_fifo(path: Path) -> AsyncIterator[FifoReader]:
    """Make a named pipe at ``path`` and read what processes write into it (``echo started > path``).

    The pipe is opened for reading *and* writing, so a writer never blocks
    waiting for a reader, and the reader never sees an end of file between
    writers. Linux semantics (O_RDWR on a FIFO); POSIX leaves it undefined.
    """
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    stream = trio.lowlevel.FdStream(fd)
    try:
        yield FifoReader(stream)
    finally:
        await stream.aclose()


@contextlib.contextmanager
def open_fifo_sync(path: Path) -> Iterator[Callable[[float], str]]:
    """:func:`open_fifo` for synchronous code (a thread): yields ``receive_line(timeout)``.

    ``receive_line`` blocks until a whole line is in the pipe (the kernel
    wakes it) and raises ``TimeoutError`` after ``timeout`` seconds.
    """
    os.mkfifo(path)
    fd = os.open(path, os.O_RDWR | os.O_NONBLOCK)
    poller = select.poll()
    poller.register(fd, select.POLLIN)
    buffer = b""

    def receive_line(timeout: float = TIMEOUT) -> str:
        nonlocal buffer
        deadline = time.monotonic() + timeout
        while b"\n" not in buffer:
            if not poller.poll(max(0.0, deadline - time.monotonic()) * 1000):
                raise TimeoutError(f"no line in {path} within {timeout} s")
            buffer += os.read(fd, 4096)
        line, _, buffer = buffer.partition(b"\n")
        return line.decode()

    try:
        yield receive_line
    finally:
        os.close(fd)


@contextlib.asynccontextmanager
async def open_fifo_asyncio(path: Path) -> AsyncIterator[asyncio.StreamReader]:
    """:func:`open_fifo` for asyncio code: a ``StreamReader`` of the pipe (``await reader.readline()``)."""
    os.mkfifo(path)
    pipe = os.fdopen(os.open(path, os.O_RDWR | os.O_NONBLOCK), "rb", buffering=0)
    loop = asyncio.get_running_loop()
    reader = asyncio.StreamReader()
    transport, _ = await loop.connect_read_pipe(lambda: asyncio.StreamReaderProtocol(reader), pipe)
    try:
        yield reader
    finally:
        transport.close()


@contextlib.asynccontextmanager
async def serving_process(command: list[str], ready: bytes, **options: Any) -> AsyncIterator[trio.Process]:
    """Start ``command`` (a server) and return once its output (stdout and stderr) holds ``ready``.

    A server in another process signals nothing else: the line it logs when
    it listens is the event (``condukt serve``: ``serving on``; uvicorn at
    ``--log-level info``: ``Uvicorn running on``). The rest of its output is
    read and kept (``process.output``) so the pipe never fills. Leaving kills
    the process (SIGKILL) unless it has exited.
    """
    process = await trio.lowlevel.open_process(command, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, **options)
    assert process.stdout is not None
    output = bytearray()
    listening = trio.Event()

    async def read() -> None:
        assert process.stdout is not None
        while chunk := await process.stdout.receive_some():
            output.extend(chunk)
            if ready in output:
                listening.set()
        listening.set()  # it exited

    try:
        async with trio.open_nursery() as nursery:
            nursery.start_soon(read)
            with trio.fail_after(TIMEOUT):
                await listening.wait()
            assert ready in output, f"{command[:3]} exited before listening: {output.decode(errors='replace')}"
            process.output = output  # type: ignore[attr-defined]
            yield process
            nursery.cancel_scope.cancel()
    finally:
        if process.returncode is None:
            process.kill()
        with trio.CancelScope(shield=True):
            await process.wait()


def _pidfd(pid: int) -> int | None:
    """A pidfd for ``pid``, or ``None`` if there is no such process any more."""
    try:
        return os.pidfd_open(pid)
    except ProcessLookupError:
        return None
    except OSError as exc:  # pragma: no cover - kernels before 5.3
        if exc.errno == errno.ENOSYS:
            raise RuntimeError("waiting for a process needs pidfd_open (Linux 5.3+)") from exc
        raise


def gone(pid: int, *, timeout: float = TIMEOUT) -> bool:
    """:func:`exited` for synchronous code (a thread, a fixture): blocks until ``pid`` has exited or ``timeout``."""
    fd = _pidfd(pid)
    if fd is None:
        return True
    try:
        poller = select.poll()
        poller.register(fd, select.POLLIN)
        return bool(poller.poll(timeout * 1000))
    finally:
        os.close(fd)


async def exited(pid: int, *, timeout: float = TIMEOUT) -> bool:
    """Wait until process ``pid`` has exited (a zombie counts); ``False`` if it still runs after ``timeout``.

    Woken by the kernel (a pidfd turns readable when the process exits), so
    it works for processes this one did not start. Real time: never use it
    under ``autojump_clock``.
    """
    fd = _pidfd(pid)
    if fd is None:
        return True
    try:
        with trio.move_on_after(timeout):
            await trio.lowlevel.wait_readable(fd)
            return True
        return False
    finally:
        os.close(fd)


async def all_exited(pids: Iterable[int], *, timeout: float = TIMEOUT) -> list[int]:
    """Wait for every process of ``pids`` to exit; returns those still running after ``timeout``."""
    deadline = trio.current_time() + timeout
    return [pid for pid in pids if not await exited(pid, timeout=max(0.0, deadline - trio.current_time()))]


__all__ = ["TIMEOUT", "WallBound", "FifoReader", "Watched", "all_exited", "exited", "gone", "open_fifo", "open_fifo_asyncio", "open_fifo_sync", "serving_process"]
