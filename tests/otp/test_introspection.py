"""What dashboards read from the runtime: ``child_info`` restart counts and ``Process.status``."""

from __future__ import annotations

import trio

import condukt
from condukt.otp import ChildInfo
from condukt.otp.lowlevel import process_of

from .servers import Boom, Worker, settle


async def test_a_static_supervisor_counts_the_restarts_of_each_child() -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("a", Worker, args=(None, "a")), condukt.ChildSpec("b", Worker, args=(None, "b"))],
            max_restarts=10,
        )
        first = sup.child_info()
        assert [(c.id, c.restarts, c.restarting, c.server_class, c.restart, c.supervisor) for c in first] == [
            ("a", 0, False, Worker, "permanent", False), ("b", 0, False, Worker, "permanent", False)]
        for _ in range(2):
            handle = dict(sup.which_children())["b"]
            assert handle is not None
            await handle.cast(("crash", Boom("x")))
            await settle()
        info = {c.id: c for c in sup.child_info()}
        assert info["a"].restarts == 0 and info["a"].handle is first[0].handle
        assert info["b"].restarts == 2 and info["b"].handle is not None and info["b"].handle.alive
        # A manual restart after a terminate is not a restart the supervisor made.
        await sup.terminate_child("b")
        assert {c.id: c.handle for c in sup.child_info()}["b"] is None
        await sup.restart_child("b")
        assert {c.id: c.restarts for c in sup.child_info()}["b"] == 2


async def test_a_dynamic_supervisor_counts_restarts_per_child_and_lists_those_restarting() -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=10)
        steady = await dyn.start_child(condukt.ChildSpec(None, Worker, args=(None, "steady")))
        crashy = await dyn.start_child(condukt.ChildSpec(None, Worker, args=(None, "crashy"), restart="transient"))
        await crashy.cast(("crash", Boom("x")))
        await settle()
        infos = dyn.child_info()
        assert len(infos) == 2 and all(isinstance(i, ChildInfo) for i in infos)
        counts = {i.handle: i.restarts for i in infos}
        assert counts[steady] == 0
        (new,) = [h for h in counts if h is not steady]
        assert counts[new] == 1 and new is not crashy
        await new.cast(("crash", Boom("again")))
        await settle()
        assert sorted(i.restarts for i in dyn.child_info()) == [0, 2]
        # A child whose restart is under way is listed without a handle.
        (latest,) = [i.handle for i in dyn.child_info() if i.restarts == 2]
        assert latest is not None
        await dyn.terminate_child(latest)
        assert [i.restarts for i in dyn.child_info()] == [0]


class SlowInit(condukt.Server):
    async def init(self, gate: trio.Event, started: list[int]) -> None:
        started.append(1)
        if len(started) > 1:
            await gate.wait()  # restarts wait

    async def handle_cast(self, message: object) -> None:
        raise Boom("crash")


async def test_a_child_being_restarted_shows_as_restarting() -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=10)
        gate, started = trio.Event(), []
        child = await dyn.start_child(condukt.ChildSpec(None, SlowInit, args=(gate, started)))
        await child.cast("crash")
        await settle()
        (info,) = dyn.child_info()
        assert info.handle is None and info.restarting and info.restarts == 0
        gate.set()
        await settle()
        (info,) = dyn.child_info()
        assert info.handle is not None and not info.restarting and info.restarts == 1


async def test_process_status_follows_the_process() -> None:
    async with condukt.open_node() as node:
        gate = trio.Event()
        worker = await node.spawn(Worker)
        proc = process_of(worker)
        assert proc is not None
        await settle()
        assert proc.status == "waiting" and proc.mailbox_length == 0
        await worker.cast(("wait", gate))
        await worker.cast("ping")
        await settle()
        assert proc.status == "running" and proc.mailbox_length == 1
        gate.set()
        await settle()
        assert proc.status == "waiting" and proc.mailbox_length == 0
        await worker.stop()
        assert proc.status == "exited" and not proc.alive
