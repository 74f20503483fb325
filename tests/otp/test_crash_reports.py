"""Crash reports: each child's last exits (``ChildInfo.exits``), a supervisor's policy and timeline (``info()``),
and what the observer's process panel reads (``Process.links``, ``monitored_by``, ``mailbox_peek``,
``Subscription.drain``)."""

from __future__ import annotations

from typing import Any

import trio
import trio.testing

import condukt
from condukt.otp import EXITS_KEPT, ChildExit, SupervisorInfo
from condukt.otp.lowlevel import process_of

from .servers import Boom, Worker, settle


async def crash(handle: Any, message: str) -> None:
    await handle.cast(("crash", Boom(message)))
    await settle()


async def test_a_static_supervisor_keeps_the_last_exits_of_each_child_with_reason_and_traceback() -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("a", Worker, args=(None, "a")), condukt.ChildSpec("b", Worker, args=(None, "b"))],
            strategy="one_for_all", max_restarts=20, max_seconds=7.5,
        )
        pids = []
        for n in range(EXITS_KEPT + 2):
            handle = dict(sup.which_children())["b"]
            assert handle is not None
            pids.append(handle.id)
            await crash(handle, f"crash {n}")
        info = {c.id: c for c in sup.child_info()}
        exits = info["b"].exits
        assert len(exits) == EXITS_KEPT and [e.pid for e in exits] == pids[-EXITS_KEPT:]  # the last ones, oldest first
        last = exits[-1]
        assert isinstance(last, ChildExit) and last.child_id == "b" and last.restarted
        assert (last.reason, last.error_type) == (f"Boom: crash {EXITS_KEPT + 1}", "Boom")
        assert last.traceback is not None and "Boom: crash" in last.traceback and "handle_cast" in last.traceback
        assert info["a"].exits == ()  # stopped by the strategy, not crashed: nothing to report
        policy = sup.info()
        assert isinstance(policy, SupervisorInfo)
        assert (policy.strategy, policy.max_restarts, policy.max_seconds, policy.intensity) == (
            "one_for_all", 20, 7.5, "supervisor")
        assert [e.pid for e in policy.exits] == pids  # the timeline keeps more than one child's window
        # A clean stop of a child that stays down is no crash: not reported.
        await sup.terminate_child("a")
        assert len(sup.info().exits) == len(pids)


async def test_a_dynamic_supervisor_carries_a_childs_reports_to_its_next_incarnation() -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=10, intensity="per_child")
        first = await dyn.start_child(condukt.ChildSpec(None, Worker, args=(None, "w")))
        temp = await dyn.start_child(condukt.ChildSpec(None, Worker, args=(None, "t"), restart="temporary"))
        await crash(first, "once")
        [info] = [c for c in dyn.child_info() if c.handle is not None and c.handle is not temp]
        assert info.handle is not None and info.handle.id != first.id
        assert [(e.pid, e.reason, e.restarted) for e in info.exits] == [(first.id, "Boom: once", True)]
        await crash(info.handle, "twice")
        [again] = [c for c in dyn.child_info() if c.handle is not temp]
        assert [e.reason for e in again.exits] == ["Boom: once", "Boom: twice"]
        await crash(temp, "gone")  # not restarted: only in the supervisor's timeline
        policy = dyn.info()
        assert (policy.strategy, policy.intensity) == ("one_for_one", "per_child")
        assert [(e.reason, e.restarted) for e in policy.exits] == [
            ("Boom: once", True), ("Boom: twice", True), ("Boom: gone", False)]


async def test_a_process_lists_its_links_monitors_and_waiting_messages() -> None:
    hold = trio.Event()

    class Holder(condukt.Server):
        async def handle_cast(self, message: Any) -> None:
            if isinstance(message, trio.Event):
                await message.wait()

    class Watcher(condukt.Server):
        async def handle_call(self, request: Any, caller: Any) -> Any:
            op, other = request
            self.link(other) if op == "link" else self.monitor(other)
            return None

    async with condukt.open_node() as node:
        holder = await node.spawn(Holder)
        watcher = await node.spawn(Watcher)
        await watcher.call(("link", holder))
        await watcher.call(("monitor", holder))
        await holder.cast(hold)
        await holder.cast("one")
        await holder.send(2)
        await trio.testing.wait_all_tasks_blocked()  # the holder took the event and waits on it
        proc = process_of(holder)
        assert proc is not None
        async with node.monitor(holder):
            assert proc.links() == [watcher]
            assert sorted(proc.monitored_by(), key=lambda h: h is None) == [watcher, None]  # None: from outside
        assert proc.mailbox_peek() == [("cast", "one"), ("info", 2)]
        assert proc.mailbox_peek(1) == [("cast", "one")]
        hold.set()


async def test_a_subscription_drains_what_is_buffered_without_waiting() -> None:
    async with condukt.open_node() as node:
        async with node.subscribe("topic") as subscription:
            node.publish("topic", 1)
            node.publish("topic", 2)
            assert subscription.drain() == [1, 2]
            assert subscription.drain() == []
