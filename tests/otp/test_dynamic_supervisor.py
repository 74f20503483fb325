"""Dynamic supervisors: children on demand, limits, restarts, intensity, shutdown."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Log, Worker, events, settle, spec


async def test_start_child_and_inspection(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(name="dyn")
        assert isinstance(dyn, condukt.DynamicSupervisorHandle)
        assert node.whereis("dyn") is dyn
        assert dyn.count_children() == condukt.otp.ChildCounts(specs=0, active=0, supervisors=0, workers=0)
        a = await dyn.start_child(spec(None, log, tag="a"))
        b = await dyn.start_child(spec(None, log, tag="b"))
        sub = await dyn.start_child(condukt.ChildSpec(None, condukt.Supervisor, kwargs={"children": []}))
        assert await a.call("ping") == ("pong", "a")
        assert dyn.which_children() == [(None, a), (None, b), (None, sub)]
        assert dyn.count_children() == condukt.otp.ChildCounts(specs=3, active=3, supervisors=1, workers=2)
        assert node.process_count == 4


async def test_terminate_child(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        a = await dyn.start_child(spec(None, log, tag="a"))
        b = await dyn.start_child(spec(None, log, tag="b"))
        assert await dyn.terminate_child(a) is None
        assert a.exit_reason == "shutdown"
        assert events(log, "terminate") == [("a", "shutdown")]
        await settle()
        assert dyn.which_children() == [(None, b)]  # a permanent child stopped this way stays stopped
        with pytest.raises(condukt.ChildNotFound):
            await dyn.terminate_child(a)
        stranger = await node.spawn(Worker)
        with pytest.raises(condukt.ChildNotFound):
            await dyn.terminate_child(stranger)
        assert stranger.alive


async def test_terminate_child_respects_brutal_kill_and_budget(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        brutal = await dyn.start_child(spec(None, log, tag="brutal", shutdown="brutal_kill"))
        slow = await dyn.start_child(spec(None, log, tag="slow", shutdown=1.0, hang_terminate=True))
        await dyn.terminate_child(brutal)
        assert brutal.exit_reason == "killed"
        assert events(log, "terminate") == []
        await dyn.terminate_child(slow)
        assert slow.exit_reason == "killed"
        assert trio.current_time() == pytest.approx(1.0)


async def test_max_children(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_children=2)
        a = await dyn.start_child(spec(None, log, tag="a"))
        await dyn.start_child(spec(None, log, tag="b"))
        count = node.process_count
        with pytest.raises(condukt.TooManyChildren):
            await dyn.start_child(spec(None, log, tag="c"))
        assert node.process_count == count
        assert ("init", "c") not in log
        await dyn.terminate_child(a)
        await dyn.start_child(spec(None, log, tag="c"))
        assert dyn.count_children().active == 2


async def test_max_children_zero(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_children=0)
        with pytest.raises(condukt.TooManyChildren):
            await dyn.start_child(spec(None, [], tag="a"))


async def test_max_children_counts_children_still_in_init(autojump_clock: Any) -> None:
    class SlowInit(condukt.Server):
        async def init(self) -> None:
            await trio.sleep(1)

    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_children=1)
        results: list[Any] = []

        async def start() -> None:
            try:
                results.append(await dyn.start_child(condukt.ChildSpec(None, SlowInit)))
            except condukt.TooManyChildren as exc:
                results.append(exc)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(start)
            nursery.start_soon(start)
        assert sum(isinstance(r, condukt.TooManyChildren) for r in results) == 1
        assert dyn.count_children().active == 1


@pytest.mark.parametrize(
    ("restart", "how", "restarted"),
    [
        ("permanent", "normal", True),
        ("permanent", "crash", True),
        ("transient", "normal", False),
        ("transient", "shutdown", False),
        ("transient", "crash", True),
        ("temporary", "crash", False),
    ],
)
async def test_restart_types(restart: Any, how: str, restarted: bool, autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        old = await dyn.start_child(spec(None, log, tag="a", restart=restart, name="a"))
        await old.cast(("crash", Boom()) if how == "crash" else ("stop", how))
        await old.wait()
        await settle()
        children = dyn.which_children()
        if restarted:
            [(_, new)] = children
            assert new is not old and new.alive
            assert node.whereis("a") is new
            assert events(log, "init") == [("a",), ("a",)]
        else:
            assert children == []
            assert node.whereis("a") is None
        assert dyn.alive


async def test_intensity_exceeded_shuts_the_dynamic_supervisor_down(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=1, max_seconds=5.0)
        await dyn.start_child(spec(None, log, tag="bystander"))
        await dyn.start_child(spec(None, log, tag="flaky", name="flaky"))
        async with node.monitor(dyn) as m:
            for _ in range(2):
                flaky = node.whereis("flaky")
                assert flaky is not None
                await flaky.cast(("crash", Boom()))
                await flaky.wait()
                await settle()
            down = await m.wait()
        assert down.reason == "shutdown"
        assert ("bystander", "shutdown") in events(log, "terminate")
        assert node.process_count == 0


async def test_per_child_intensity_keeps_the_others_when_many_children_crash(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=1, max_seconds=5.0, intensity="per_child")
        for i in range(100):
            await dyn.start_child(spec(None, log, tag=i, name=("w", i)))
        for i in range(10):  # ten children crash once each: ten restarts, one per child
            old = node.whereis(("w", i))
            assert old is not None
            await old.cast(("crash", Boom()))
            await old.wait()
        await settle()
        assert dyn.alive
        assert dyn.count_children().active == 100
        # Only the ten crashed (terminate ran with their exception); nobody was shut down.
        assert sorted(tag for tag, _ in events(log, "terminate")) == list(range(10))
        restarted = node.whereis(("w", 0))
        assert restarted is not None and await restarted.call("ping") == ("pong", 0)


async def test_per_child_intensity_gives_up_one_crash_looping_child(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=2, max_seconds=5.0, intensity="per_child")
        bystander = await dyn.start_child(spec(None, log, tag="bystander"))
        await dyn.start_child(spec(None, log, tag="flaky", name="flaky"))
        for _ in range(3):  # the third crash within 5 s exceeds the child's 2 restarts
            flaky = node.whereis("flaky")
            assert flaky is not None
            await flaky.cast(("crash", Boom()))
            await flaky.wait()
            await settle()
        assert node.whereis("flaky") is None
        assert dyn.alive and bystander.alive
        assert dyn.which_children() == [(None, bystander)]
        assert events(log, "init").count(("flaky",)) == 3


async def test_per_child_intensity_window_ages_out(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=1, max_seconds=5.0, intensity="per_child")
        await dyn.start_child(spec(None, [], tag="a", name="a"))
        for _ in range(3):  # one crash every 6 s: never two within the window
            a = node.whereis("a")
            assert a is not None
            await a.cast(("crash", Boom()))
            await a.wait()
            await settle()
            await trio.sleep(6)
        assert node.whereis("a") is not None and dyn.alive


async def test_bad_intensity_option_is_a_value_error() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="per_child"):
            await node.start_dynamic_supervisor(intensity="each")  # type: ignore[arg-type]


async def test_stop_stops_all_children(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        handles = [await dyn.start_child(spec(None, log, tag=i)) for i in range(3)]
        await dyn.stop()
        assert sorted(events(log, "terminate")) == [(0, "shutdown"), (1, "shutdown"), (2, "shutdown")]
        assert not any(h.alive for h in handles)
        assert node.process_count == 0


async def test_children_stop_concurrently_within_their_budgets(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        for i in range(3):
            await dyn.start_child(spec(None, log, tag=i, shutdown=2.0, hang_terminate=True))
        await dyn.stop()
        # All are asked at once: the budgets run in parallel, not one after another.
        assert trio.current_time() == pytest.approx(2.0)


async def test_start_child_on_a_dead_supervisor_raises_noproc(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        await dyn.stop()
        with pytest.raises(condukt.NoProc):
            await dyn.start_child(spec(None, [], tag="a"))
        with pytest.raises(condukt.NoProc):
            dyn.count_children()


async def test_dynamic_supervisor_under_a_static_one_is_restarted(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        dyn_spec = condukt.ChildSpec(
            "dyn", condukt.DynamicSupervisor, kwargs={"max_restarts": 0}, name="dyn"
        )
        top = await node.start_supervisor([dyn_spec])
        dyn = node.whereis("dyn")
        assert isinstance(dyn, condukt.DynamicSupervisorHandle)
        h = await dyn.start_child(spec(None, [], tag="a"))
        await h.cast(("crash", Boom()))
        assert await dyn.wait() == "shutdown"
        await settle()
        new = node.whereis("dyn")
        assert new is not None and new is not dyn
        assert isinstance(new, condukt.DynamicSupervisorHandle)
        assert new.count_children().active == 0  # dynamic children are not re-created
        assert top.alive
