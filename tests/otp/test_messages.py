"""Casts and raw sends: delivery, ordering, bounded mailboxes and back-pressure."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Log, Worker, events, settle


async def test_cast_and_send_reach_their_callbacks_in_order(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        await h.cast(("record", 1))
        await h.send("raw-1")
        h.cast_nowait(("record", 2))
        h.send_nowait("raw-2")
        await h.cast(("record", 3))
        await settle()
        assert [e for e in log if e[0] != "init"] == [
            ("got", "a", 1),
            ("info", "a", "raw-1"),
            ("got", "a", 2),
            ("info", "a", "raw-2"),
            ("got", "a", 3),
        ]


async def test_cast_returns_before_the_message_is_handled(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        gate = trio.Event()
        with trio.fail_after(1):
            await h.cast(("wait", gate))
            await h.cast(("record", 1))
        assert events(log, "got") == []
        gate.set()
        await settle()
        assert events(log, "got") == [("a", 1)]


@pytest.mark.parametrize("method", ["cast", "send", "cast_nowait", "send_nowait"])
async def test_messages_to_a_dead_process_raise_noproc(method: str, autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        await h.stop()
        with pytest.raises(condukt.NoProc):
            result = getattr(h, method)("ping")
            if method in ("cast", "send"):
                await result


async def _full(node: condukt.Node, log: Log, size: int) -> tuple[condukt.Handle, trio.Event]:
    """A worker blocked in a callback with ``size`` more messages queued (a full mailbox)."""
    h = await node.spawn(Worker, log, "a", mailbox_size=size)
    gate = trio.Event()
    await h.cast(("wait", gate))
    await settle()
    for i in range(size):
        h.cast_nowait(("record", i))
    return h, gate


async def test_nowait_sends_raise_mailbox_full_at_capacity(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h, gate = await _full(node, log, 2)
        with pytest.raises(condukt.MailboxFull):
            h.cast_nowait(("record", "x"))
        with pytest.raises(condukt.MailboxFull):
            h.send_nowait("x")
        assert issubclass(condukt.MailboxFull, condukt.ConduktError)
        gate.set()
        await settle()
        assert events(log, "got") == [("a", 0), ("a", 1)]
        h.cast_nowait(("record", "room again"))
        await settle()
        assert events(log, "got")[-1] == ("a", "room again")


@pytest.mark.parametrize("method", ["cast", "send"])
async def test_cast_and_send_wait_for_room_when_full(method: str, autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h, gate = await _full(node, log, 2)
        done: list[float] = []

        async def put() -> None:
            await getattr(h, method)(("record", "waited"))
            done.append(trio.current_time())

        async with trio.open_nursery() as nursery:
            nursery.start_soon(put)
            await trio.sleep(3)
            assert done == []
            gate.set()
        assert done == [pytest.approx(3.0)]
        await settle()
        if method == "cast":
            assert events(log, "got") == [("a", 0), ("a", 1), ("a", "waited")]
        else:
            assert events(log, "info") == [("a", ("record", "waited"))]


async def test_cast_waiting_for_room_can_be_cancelled(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h, gate = await _full(node, log, 1)
        with trio.move_on_after(1) as scope:
            await h.cast(("record", "never"))
        assert scope.cancelled_caught
        gate.set()
        await settle()
        assert events(log, "got") == [("a", 0)]


async def test_cast_waiting_for_room_raises_noproc_when_the_process_dies(
    autojump_clock: Any,
) -> None:
    async with condukt.open_node() as node:
        h, _ = await _full(node, [], 1)
        async with trio.open_nursery() as nursery:

            async def put() -> None:
                with pytest.raises(condukt.NoProc):
                    await h.cast(("record", "never"))

            nursery.start_soon(put)
            await settle()
            h.kill()


async def test_default_mailbox_size(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        gate = trio.Event()
        await h.cast(("wait", gate))
        await settle()
        for i in range(condukt.otp.DEFAULT_MAILBOX_SIZE):
            h.send_nowait(i)
        with pytest.raises(condukt.MailboxFull):
            h.send_nowait("one too many")
        gate.set()


@pytest.mark.parametrize("size", [0, -1, 1.5, True])
async def test_bad_mailbox_size_is_rejected(size: Any, autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(ValueError):
            await node.spawn(Worker, mailbox_size=size)
        assert node.process_count == 0


async def test_messages_queued_at_exit_are_dropped(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a")
        gate = trio.Event()
        await h.cast(("wait", gate))
        await h.cast(("record", "never"))
        await settle()
        await h.stop("shutdown")
        assert events(log, "got") == []
        assert events(log, "terminate") == [("a", "shutdown")]


async def test_blocked_sender_wakes_as_soon_as_a_slot_frees(autojump_clock: Any) -> None:
    # The server takes A (a slot frees) and, while handling B, waits for the
    # sender of C: the sender must not wait for the server to finish B.
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Worker, log, "a", mailbox_size=2)
        first, second = trio.Event(), trio.Event()
        h.cast_nowait(("wait", first))
        h.cast_nowait(("wait", second))

        async def sender() -> None:
            await h.cast(("record", "C"))
            second.set()

        with trio.fail_after(1):
            async with trio.open_nursery() as nursery:
                nursery.start_soon(sender)
                await settle()
                first.set()
        await settle()
        assert events(log, "got") == [("a", "C")]
