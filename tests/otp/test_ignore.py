"""``init`` returning ``condukt.otp.IGNORE`` (OTP's ``ignore``): nothing runs, and supervisors carry on."""

from __future__ import annotations

from typing import Any

import trio

import condukt

from .servers import Flaky, Gate, Log, events, flaky, settle, spec

IGNORE = condukt.otp.IGNORE


class Ignoring(condukt.Server):
    async def init(self, log: Log) -> Any:
        log.append(("init",))
        return IGNORE

    async def terminate(self, reason: condukt.ExitReason) -> None:
        raise AssertionError("terminate must not run after an ignored init")


class IgnoringSupervisor(condukt.Supervisor):
    async def init(self, *args: Any, **kwargs: Any) -> Any:
        return IGNORE


def ignoring(child_id: Any, log: Log, **kwargs: Any) -> condukt.ChildSpec:
    return condukt.ChildSpec(child_id, Ignoring, (log,), name=child_id, **kwargs)


def test_ignore_is_a_named_sentinel() -> None:
    assert repr(IGNORE) == "condukt.otp.IGNORE"
    assert "IGNORE" in condukt.otp.__all__ and "ChildRestarting" in condukt.otp.__all__


async def test_spawn_of_an_ignoring_server_returns_a_dead_handle(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        h = await node.spawn(Ignoring, log, name="ignored")
        assert log == [("init",)]
        assert not h.alive and h.exit_reason == "normal"
        assert await h.wait() == "normal"
        assert node.whereis("ignored") is None and node.registered() == []
        assert node.process_count == 0
        assert node.root.which_children() == []


async def test_a_supervisor_whose_init_ignores_is_not_started(autojump_clock: Any) -> None:
    # OTP's sup_start_ignore_init.
    async with condukt.open_node() as node:
        sup = await node.spawn(IgnoringSupervisor, name="sup")
        assert not sup.alive and sup.exit_reason == "normal"
        assert node.process_count == 0 and node.registered() == []


async def test_a_static_supervisor_keeps_the_spec_of_an_ignored_child(autojump_clock: Any) -> None:
    # OTP's sup_start_ignore_child and sup_start_ignore_temporary_child.
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [ignoring("perm", log), ignoring("temp", log, restart="temporary"), spec("w", log)]
        )
        assert [cid for cid, _ in sup.which_children()] == ["perm", "w"]
        assert dict(sup.which_children())["perm"] is None
        assert sup.count_children() == condukt.otp.ChildCounts(specs=2, active=1, supervisors=0, workers=2)

        added = await sup.start_child(ignoring("later", log))
        assert not added.alive and added.exit_reason == "normal"
        temp = await sup.start_child(ignoring("later-temp", log, restart="temporary"))
        assert not temp.alive
        assert [cid for cid, _ in sup.which_children()] == ["perm", "w", "later"]
        assert dict(sup.which_children())["later"] is None

        # An ignored child is a stopped one: restart_child tries again, delete_child removes it.
        again = await sup.restart_child("perm")
        assert not again.alive
        await sup.delete_child("perm")
        assert [cid for cid, _ in sup.which_children()] == ["w", "later"]
        assert sup.alive


async def test_a_restart_whose_init_ignores_leaves_the_child_stopped(autojump_clock: Any) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([flaky("c", gate)], max_restarts=10)
        gate.mode = "ignore"
        for _ in range(3):  # one attempt each (counted, as in OTP), no retry
            gate.inits[-1].kill()
            await settle()
            assert sup.which_children() == [("c", None)] and sup.alive
            gate.mode = "run"
            assert (await sup.restart_child("c")).alive
            gate.mode = "ignore"
        assert len(gate.inits) == 7


async def test_a_dynamic_supervisor_forgets_an_ignored_child(autojump_clock: Any) -> None:
    log: Log = []
    gate = Gate()
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_children=1)
        h = await dyn.start_child(ignoring(None, log))
        assert not h.alive and h.exit_reason == "normal"
        assert dyn.which_children() == [] and dyn.count_children().specs == 0

        child = await dyn.start_child(condukt.ChildSpec(None, Flaky, (gate,)))  # max_children not used up
        gate.mode = "ignore"
        child.kill()
        await settle()
        assert dyn.count_children().specs == 0 and len(gate.inits) == 2
        assert dyn.alive


async def test_a_nested_supervisor_that_ignores_on_restart_stays_stopped(autojump_clock: Any) -> None:
    gate = Gate()

    class Gated(condukt.Supervisor):
        async def init(self, *args: Any, **kwargs: Any) -> Any:
            if gate.mode == "ignore":
                return IGNORE
            return await super().init(*args, **kwargs)

    log: Log = []
    async with condukt.open_node() as node:
        top = await node.start_supervisor(
            [condukt.ChildSpec("inner", Gated, kwargs={"children": [spec("leaf", log)]}, name="inner")]
        )
        inner = node.whereis("inner")
        assert inner is not None
        gate.mode = "ignore"
        inner.kill()
        await settle()
        assert top.which_children() == [("inner", None)] and top.alive
        assert node.whereis("inner") is None and node.whereis("leaf") is None
        assert events(log, "init") == [("leaf",)]
        await trio.sleep(1)
        assert node.process_count == 1
