"""Crash reports: one record with one traceback per crash, on the ``condukt.otp`` logger."""

from __future__ import annotations

import logging
from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Worker, settle, spec


def crash_reports(caplog: pytest.LogCaptureFixture) -> list[logging.LogRecord]:
    """Every record under the ``condukt`` logger that carries a traceback."""
    return [r for r in caplog.records if r.name.startswith("condukt") and r.exc_info is not None]


def tracebacks(caplog: pytest.LogCaptureFixture) -> int:
    """How many tracebacks the records would print, once formatted."""
    formatter = logging.Formatter()
    return sum(formatter.format(r).count("Traceback (most recent call last)") for r in caplog.records)


class Linked(condukt.Server):
    async def init(self, other: condukt.Handle) -> None:
        self.link(other)


class Background(condukt.Server):
    async def init(self, error: BaseException) -> None:
        self.error = error

    async def handle_cast(self, message: Any) -> None:
        async def fail() -> None:
            raise self.error

        self.start_soon(fail)


async def test_a_crash_is_reported_once_with_its_traceback(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    error = Boom("bad request")
    async with condukt.open_node() as node:
        worker = await node.spawn(Worker)
        with pytest.raises(condukt.CallError):
            await worker.call(("crash", error))
        assert await worker.wait() is error
    [record] = crash_reports(caplog)
    assert record.name == "condukt.otp" and record.levelno == logging.ERROR
    assert record.exc_info is not None and record.exc_info[1] is error
    assert "crashed" in record.getMessage() and repr(worker).split(" dead")[0] in record.getMessage()
    assert tracebacks(caplog) == 1


async def test_a_supervised_crash_is_not_reported_again_by_the_supervisor(
    caplog: pytest.LogCaptureFixture, autojump_clock: Any
) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    log: list[Any] = []
    error = Boom("crash under a supervisor")
    async with condukt.open_node() as node:
        await node.start_supervisor([spec("a", log), spec("b", log)], strategy="one_for_all")
        first = node.whereis("a")
        assert first is not None
        await first.cast(("crash", error))
        await settle()
        assert node.whereis("a") not in (None, first)  # restarted, and its sibling with it
    [record] = crash_reports(caplog)
    assert record.exc_info is not None and record.exc_info[1] is error
    assert tracebacks(caplog) == 1


async def test_processes_killed_by_a_crash_are_not_reported(
    caplog: pytest.LogCaptureFixture, autojump_clock: Any
) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    error = Boom("takes its links along")
    async with condukt.open_node() as node:
        worker = await node.spawn(Worker)
        linked = [await node.spawn(Linked, worker) for _ in range(3)]
        async with node.monitor(worker) as monitor:
            await worker.cast(("crash", error))
            await monitor.wait()
        await settle()
        assert all(h.exit_reason is error for h in linked)
    assert len(crash_reports(caplog)) == 1
    assert tracebacks(caplog) == 1


async def test_a_crash_in_a_background_task_is_reported_once(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    error = Boom("in a task")
    async with condukt.open_node() as node:
        server = await node.spawn(Background, error)
        await server.cast("go")
        assert await server.wait() is error  # unwrapped from the process's nursery group
    [record] = crash_reports(caplog)
    assert record.exc_info is not None and record.exc_info[1] is error
    assert tracebacks(caplog) == 1


async def test_intensity_exceeded_adds_one_line_without_a_traceback(
    caplog: pytest.LogCaptureFixture, autojump_clock: Any
) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    log: list[Any] = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)], max_restarts=1)
        for _ in range(2):
            handle = node.whereis("a")
            assert handle is not None
            await handle.cast(("crash", Boom("again")))
            await settle()
        assert await sup.wait() == "shutdown"
    assert len(crash_reports(caplog)) == 2
    assert tracebacks(caplog) == 2
    [gave_up] = [r for r in caplog.records if "intensity" in r.getMessage()]
    assert gave_up.exc_info is None


async def test_stops_and_kills_are_not_crashes(caplog: pytest.LogCaptureFixture) -> None:
    caplog.set_level(logging.DEBUG, logger="condukt")
    async with condukt.open_node() as node:
        a = await node.spawn(Worker)
        b = await node.spawn(Worker)
        await a.stop("shutdown")
        b.kill()
        await b.wait()
        await trio.lowlevel.checkpoint()
    assert crash_reports(caplog) == []
