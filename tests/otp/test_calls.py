"""Request/reply: deferred replies, timeouts, withdrawn calls, callers of dead servers."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Log, Worker, events, settle


class Deferring(condukt.Server):
    """Parks ``"slow"`` callers and answers them on ``"release"``; answers the rest at once."""

    async def init(self, log: Log) -> None:
        self.log = log
        self.parked: list[condukt.Caller] = []

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        self.log.append(("call", request))
        match request:
            case "slow":
                self.parked.append(caller)
                return condukt.NO_REPLY
            case ("release", value):
                return [c.reply(value) for c in self.parked]
            case ("release_error", error):
                return [c.reply_error(error) for c in self.parked]
            case "pending":
                return [c.pending for c in self.parked]
            case ("crash", error):
                raise error
            case ("wait", event):
                await event.wait()
                return "waited"
        return ("echo", request)


async def test_deferred_reply_while_serving_other_calls(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, log)
        results: list[Any] = []

        async def slow() -> None:
            results.append(await h.call("slow", timeout=None))

        async with trio.open_nursery() as nursery:
            nursery.start_soon(slow)
            await settle()
            # The parked call does not block the mailbox.
            assert await h.call("fast") == ("echo", "fast")
            assert await h.call("pending") == [True]
            assert results == []
            assert await h.call(("release", 42)) == [True]
        assert results == [42]
        assert await h.call("pending") == [False]
        # A second answer to the same caller is dropped.
        assert await h.call(("release", 43)) == [False]


async def test_deferred_reply_error_raises_in_the_caller(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, [])
        error = KeyError("nope")
        async with trio.open_nursery() as nursery:

            async def slow() -> None:
                with pytest.raises(KeyError) as info:
                    await h.call("slow")
                assert info.value is error

            nursery.start_soon(slow)
            await settle()
            assert await h.call(("release_error", error)) == [True]
        assert h.alive  # an error sent to a caller is not a crash


async def test_call_timeout_raises_call_timeout(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, [])
        start = trio.current_time()
        with pytest.raises(condukt.CallTimeout):
            await h.call("slow", timeout=2.0)
        assert trio.current_time() - start == pytest.approx(2.0)
        assert h.alive


async def test_call_timeout_is_a_timeout_error(autojump_clock: Any) -> None:
    assert issubclass(condukt.CallTimeout, TimeoutError)
    assert issubclass(condukt.CallTimeout, condukt.ConduktError)
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, [])
        with pytest.raises(TimeoutError):
            await h.call("slow", timeout=0.5)


async def test_late_reply_after_timeout_is_dropped(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, [])
        with pytest.raises(condukt.CallTimeout):
            await h.call("slow", timeout=1.0)
        assert await h.call("pending") == [False]
        assert await h.call(("release", "late")) == [False]
        # The server goes on answering normally.
        assert await h.call("next") == ("echo", "next")


async def test_timed_out_queued_call_is_skipped(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, log)
        gate = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.call, ("wait", gate), None)
            await settle()
            with pytest.raises(condukt.CallTimeout):
                await h.call("queued", timeout=1.0)
            gate.set()
        assert await h.call("after") == ("echo", "after")
        assert [r for _, r in log] == [("wait", gate), "after"]


async def test_cancelled_queued_call_is_skipped(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, log)
        gate = trio.Event()
        async with trio.open_nursery() as nursery:
            nursery.start_soon(h.call, ("wait", gate), None)
            await settle()
            with trio.move_on_after(1.0) as scope:
                await h.call("queued", timeout=None)
            assert scope.cancelled_caught
            gate.set()
        assert await h.call("after") == ("echo", "after")
        assert [r for _, r in log] == [("wait", gate), "after"]


async def test_cancelled_deferred_call_drops_the_late_reply(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, [])
        with trio.move_on_after(1.0):
            await h.call("slow", timeout=None)
        assert await h.call("pending") == [False]
        assert await h.call(("release", 1)) == [False]


async def test_call_to_a_dead_process_raises_noproc(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        await h.stop()
        with pytest.raises(condukt.NoProc):
            await h.call("ping")
        assert issubclass(condukt.NoProc, condukt.ConduktError)


async def test_crash_during_call_raises_call_error_with_the_reason(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        error = Boom("x")
        with pytest.raises(condukt.CallError) as info:
            await h.call(("crash", error))
        assert info.value.reason is error
        assert info.value.__cause__ is error
        assert not h.alive and h.exit_reason is error


async def test_calls_queued_behind_a_crash_get_call_error(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, log)
        gate = trio.Event()
        error = Boom("x")
        outcomes: dict[str, Any] = {}

        async def call(key: str, request: Any) -> None:
            try:
                outcomes[key] = await h.call(request, timeout=None)
            except condukt.CallError as exc:
                outcomes[key] = exc

        async with trio.open_nursery() as nursery:
            nursery.start_soon(call, "deferred", "slow")
            await settle()
            nursery.start_soon(call, "blocker", ("wait", gate))
            await settle()
            nursery.start_soon(call, "crasher", ("crash", error))
            await settle()
            nursery.start_soon(call, "queued1", "one")
            nursery.start_soon(call, "queued2", "two")
            await settle()
            assert outcomes == {}
            gate.set()
        assert outcomes["blocker"] == "waited"
        for key in ("crasher", "deferred", "queued1", "queued2"):
            assert isinstance(outcomes[key], condukt.CallError), key
            assert outcomes[key].reason is error, key
        # Queued requests were never handled.
        assert ("call", "one") not in log and ("call", "two") not in log


async def test_stop_during_call_gives_call_error_with_the_stop_reason(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Deferring, [])
        async with trio.open_nursery() as nursery:

            async def slow() -> None:
                with pytest.raises(condukt.CallError) as info:
                    await h.call("slow")
                assert info.value.reason == "shutdown"

            nursery.start_soon(slow)
            await settle()
            await h.stop("shutdown")


async def test_call_waits_for_mailbox_room(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", mailbox_size=1)
        gate = trio.Event()
        await h.cast(("wait", gate))
        await settle()
        h.cast_nowait(("record", 1))  # fills the mailbox
        async with trio.open_nursery() as nursery:
            result: list[Any] = []

            async def call() -> None:
                result.append(await h.call(("record", 2)))

            nursery.start_soon(call)
            await trio.sleep(1)
            assert result == []
            gate.set()
        assert result == [2]
        assert events(log, "got") == [("a", 1), ("a", 2)]


async def test_call_times_out_when_the_mailbox_stays_full(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", mailbox_size=1)
        gate = trio.Event()
        await h.cast(("wait", gate))
        await settle()
        h.cast_nowait(("record", 1))
        start = trio.current_time()
        with pytest.raises(condukt.CallTimeout):
            await h.call(("record", 2), timeout=1.5)
        assert trio.current_time() - start == pytest.approx(1.5)
        gate.set()
        await settle()
        assert events(log, "got") == [("a", 1)]
