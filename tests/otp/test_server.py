"""A single server's life: init, callbacks, stop/kill/wait, background tasks, timers."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Log, Worker, events, settle


class Counter(condukt.Server):
    async def init(self, start: int = 0) -> None:
        self.n = start

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return self.n

    async def handle_cast(self, message: Any) -> None:
        self.n += message[1]


async def test_spawn_call_cast_roundtrip() -> None:
    async with condukt.open_node() as node:
        counter = await node.spawn(Counter, 5, name="counter")
        assert isinstance(counter, condukt.Handle)
        assert counter.alive and counter.name == "counter" and counter.exit_reason is None
        await counter.cast(("add", 1))
        counter.cast_nowait(("add", 2))
        assert await counter.call("get") == 8
        assert node.whereis("counter") is counter
        assert node.process_count == 1


async def test_handles_have_distinct_ids() -> None:
    async with condukt.open_node() as node:
        a = await node.spawn(Counter)
        b = await node.spawn(Counter)
        assert a.id != b.id
        assert a != b and len({a, b}) == 2


async def test_init_runs_before_spawn_returns() -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await node.spawn(Worker, log, "a")
        assert log == [("init", "a")]


async def test_init_error_propagates_out_of_spawn_and_leaves_nothing() -> None:
    log: Log = []
    error = Boom("init failed")
    async with condukt.open_node() as node:
        before = node.process_count
        with pytest.raises(Boom) as info:
            await node.spawn(Worker, log, "a", fail=error, name="a")
        assert info.value is error
        assert node.process_count == before
        assert node.whereis("a") is None
        assert "a" not in node.registered()
        # No terminate after a failed init, and the name is free again.
        assert events(log, "terminate") == []
        again = await node.spawn(Worker, log, "a", name="a")
        assert node.whereis("a") is again


async def test_default_init_rejects_arguments() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(TypeError):
            await node.spawn(condukt.Server, 1)
        assert node.process_count == 0


async def test_unhandled_call_crashes_the_server(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(condukt.Server)
        with pytest.raises(condukt.CallError) as info:
            await h.call("anything")
        assert isinstance(info.value.reason, condukt.UnhandledMessage)
        assert isinstance(await h.wait(), condukt.UnhandledMessage)


async def test_stop_runs_terminate_and_returns_after_exit(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        assert await h.stop("bye") is None
        assert not h.alive
        assert h.exit_reason == "bye"
        assert events(log, "terminate") == [("a", "bye")]
        assert node.process_count == 0


async def test_stop_default_reason_is_normal(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        await h.stop()
        assert await h.wait() == "normal"


async def test_stop_cancels_the_callback_in_progress(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        await h.cast(("wait", trio.Event()))  # blocks the server forever
        await settle()
        with trio.fail_after(1):
            await h.stop("shutdown")
        assert events(log, "terminate") == [("a", "shutdown")]


async def test_stop_with_hanging_terminate_is_killed_after_timeout(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", hang_terminate=True)
        start = trio.current_time()
        await h.stop("normal", timeout=2.0)
        assert trio.current_time() - start == pytest.approx(2.0)
        assert h.exit_reason == "killed"
        assert events(log, "terminate") == [("a", "normal")]


async def test_stop_of_dead_process_raises_noproc(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        await h.stop()
        with pytest.raises(condukt.NoProc):
            await h.stop()


async def test_kill_skips_terminate(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        assert h.kill() is None
        assert await h.wait() == "killed"
        assert not h.alive
        assert events(log, "terminate") == []
        h.kill()  # killing a dead process does nothing
        assert h.exit_reason == "killed"


async def test_kill_cuts_a_running_terminate_short(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", hang_terminate=True)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.stop, "normal", None)
            await settle()
            assert events(log, "terminate") == [("a", "normal")]
            h.kill()
        assert h.exit_reason == "killed"


async def test_kill_cuts_the_terminate_after_a_crash_short(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", hang_terminate=True)
        await h.cast(("crash", error))
        await settle()
        assert events(log, "terminate") == [("a", error)]
        h.kill()
        with trio.fail_after(0.1):
            assert await h.wait() == "killed"


async def test_stop_during_the_terminate_after_a_crash_keeps_the_crash_reason(
    autojump_clock: Any,
) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", hang_terminate=True)
        await h.cast(("crash", error))
        await settle()
        await h.stop("normal", timeout=1.0)  # already exiting: waits for the crash's terminate
        assert trio.current_time() == pytest.approx(condukt.otp.DEFAULT_SHUTDOWN)
        assert h.exit_reason == "killed"  # the terminate overran its budget
        assert events(log, "terminate") == [("a", error)]


class FailingTerminate(condukt.Server):
    async def terminate(self, reason: condukt.ExitReason) -> None:
        raise Boom("terminate")


class FailingTerminateOnStop(condukt.Server):
    """Stops itself with the reason it is cast; its ``terminate`` then raises."""

    async def handle_cast(self, message: Any) -> None:
        if isinstance(message, BaseException):
            raise message
        self.stop(message)

    async def terminate(self, reason: condukt.ExitReason) -> None:
        raise Boom(f"terminate after {reason!r}")


async def test_stop_raises_when_terminate_raises(autojump_clock: Any) -> None:
    # OTP: gen_server:stop fails with the error terminate raised.
    async with condukt.open_node() as node:
        h = await node.spawn(FailingTerminate)
        with pytest.raises(condukt.CallError) as info:
            await h.stop("normal")
        assert not h.alive
        assert isinstance(h.exit_reason, Boom) and str(h.exit_reason) == "terminate"
        assert info.value.reason is h.exit_reason and info.value.__cause__ is h.exit_reason
        with pytest.raises(condukt.NoProc):
            await h.stop()


async def test_stop_returns_when_the_process_stops_cleanly_or_is_cut_short(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        error = Boom("as requested")
        h = await node.spawn(Worker, log, "a")
        await h.stop(error)  # the reason asked for is an exception: not a failure
        assert h.exit_reason is error
        slow = await node.spawn(Worker, log, "slow", hang_terminate=True)
        await slow.stop("normal", timeout=1.0)  # cut short: "killed", and stop returns
        assert slow.exit_reason == "killed"


@pytest.mark.parametrize(
    "reason", ["normal", "shutdown", ("shutdown", "some_info"), ("custom", 1), Boom("crash")]
)
async def test_a_crash_of_terminate_becomes_the_exit_reason(reason: Any, autojump_clock: Any) -> None:
    # OTP: whatever the reason was (a custom one, a crash), the crash of
    # terminate is the exit reason the world sees.
    async with condukt.open_node() as node:
        h = await node.spawn(FailingTerminateOnStop)
        async with node.monitor(h) as monitor:
            await h.cast(reason)
            down = await monitor.wait()
        assert isinstance(down.reason, Boom) and str(down.reason) == f"terminate after {reason!r}"
        assert h.exit_reason is down.reason


async def test_wait_returns_the_exit_reason(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        error = Boom("x")
        async with trio.open_nursery() as nursery:
            waiters: list[Any] = []

            async def wait() -> None:
                waiters.append(await h.wait())

            nursery.start_soon(wait)
            nursery.start_soon(wait)
            await settle()
            await h.cast(("crash", error))
        assert waiters == [error, error]
        assert await h.wait() is error  # also once dead


async def test_stop_from_inside_ends_after_the_callback(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        assert await h.call(("stop", "normal")) == "stopping"
        assert await h.wait() == "normal"
        assert events(log, "terminate") == [("a", "normal")]


async def test_crash_in_callback_runs_terminate_with_the_exception(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        await h.cast(("crash", error))
        assert await h.wait() is error
        assert events(log, "terminate") == [("a", error)]
        assert node.process_count == 0


class Selfish(condukt.Server):
    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "call":
            with pytest.raises(condukt.CallingSelf):
                await self.handle.call("again")
            return "refused"
        if request == "stop":
            with pytest.raises(condukt.CallingSelf):
                await self.handle.stop()
            return "refused"
        return "again"


async def test_calling_yourself_raises_calling_self(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Selfish)
        assert await h.call("call") == "refused"
        assert await h.call("stop") == "refused"
        assert h.alive


class SelfCallInInit(condukt.Server):
    async def init(self) -> None:
        await self.handle.call("x")


async def test_calling_yourself_from_init_raises_calling_self(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(condukt.CallingSelf):
            await node.spawn(SelfCallInInit)
        assert node.process_count == 0


# --------------------------------------------------------------------------- start_soon


class Background(condukt.Server):
    """Runs a ticker task started in ``init``; calls still get served."""

    async def init(self, log: Log, fail_after: float | None = None) -> None:
        self.log = log
        self.ticks = 0
        self.start_soon(self._tick, fail_after)

    async def _tick(self, fail_after: float | None) -> None:
        try:
            while True:
                await trio.sleep(1)
                self.ticks += 1
                if fail_after is not None and self.ticks >= fail_after:
                    raise Boom("background")
        except trio.Cancelled:
            self.log.append(("cancelled", self.ticks))
            raise

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "later":
            self.start_soon(self._later)
            return None
        return self.ticks

    async def _later(self) -> None:
        self.log.append(("later", "ran"))

    async def terminate(self, reason: condukt.ExitReason) -> None:
        self.log.append(("terminate", reason))


async def test_start_soon_runs_alongside_the_mailbox(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Background, log)
        await trio.sleep(3.5)
        assert await h.call("ticks") == 3
        await h.call("later")
        await settle()
        assert ("later", "ran") in log
        await trio.sleep(1)
        assert await h.call("ticks") == 4


async def test_start_soon_task_is_cancelled_before_terminate(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Background, log)
        await trio.sleep(2.5)
        await h.stop("normal")
        assert log == [("cancelled", 2), ("terminate", "normal")]


async def test_start_soon_exception_crashes_the_process(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Background, log, fail_after=2)
        reason = await h.wait()
        assert isinstance(reason, Boom) and str(reason) == "background"
        assert log == [("terminate", reason)]
        assert trio.current_time() == pytest.approx(2.0)


# --------------------------------------------------------------------------- timers


class Timers(condukt.Server):
    async def init(self, log: Log) -> None:
        self.log = log
        self.refs: dict[str, condukt.otp.TimerRef] = {}

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        op, *rest = request
        if op == "after":
            seconds, message = rest
            self.refs[message] = self.send_after(seconds, message)
            return self.refs[message].active
        if op == "cancel":
            return self.refs[rest[0]].cancel()
        if op == "active":
            return self.refs[rest[0]].active
        raise AssertionError(request)

    async def handle_info(self, message: Any) -> None:
        self.log.append((message, trio.current_time()))


async def test_send_after_delivers_to_handle_info_after_the_delay(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Timers, log)
        start = trio.current_time()
        assert await h.call(("after", 2.0, "late")) is True
        assert await h.call(("after", 1.0, "early")) is True
        await trio.sleep(1.5)
        assert [m for m, _ in log] == ["early"]
        await trio.sleep(1.0)
        assert [(m, t - start) for m, t in log] == [
            ("early", pytest.approx(1.0)),
            ("late", pytest.approx(2.0)),
        ]
        assert await h.call(("active", "late")) is False
        assert await h.call(("cancel", "late")) is False  # already fired


async def test_cancelled_timer_is_never_delivered(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Timers, log)
        await h.call(("after", 1.0, "tick"))
        assert await h.call(("cancel", "tick")) is True
        assert await h.call(("active", "tick")) is False
        assert await h.call(("cancel", "tick")) is False
        await trio.sleep(5)
        assert log == []


async def test_timer_of_a_dead_process_is_dropped(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Timers, log)
        await h.call(("after", 1.0, "tick"))
        await h.stop()
        await trio.sleep(5)
        assert log == []


class StopsFromBackground(condukt.Server):
    async def init(self, log: Log) -> None:
        self.log = log
        self.start_soon(self._work)

    async def _work(self) -> None:
        await trio.sleep(2)
        self.stop("done")

    async def terminate(self, reason: condukt.ExitReason) -> None:
        self.log.append(("terminate", reason))


async def test_background_task_can_stop_its_process(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(StopsFromBackground, log)
        assert await h.wait() == "done"
        assert trio.current_time() == pytest.approx(2.0)
        assert log == [("terminate", "done")]
