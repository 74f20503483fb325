"""Restart attempts: run in the background, retried through the supervisor's mailbox, every one counted.

OTP's supervisor retries a failed restart through a message to itself, so it
answers ``which_children``, ``start_child``, ``terminate_child`` and the rest
between attempts, reports the child as ``restarting``, and counts every
attempt against its restart intensity. condukt runs each attempt's ``init``
in the background, so the supervisor answers *during* attempts too; and it
keeps failed attempts counted until the child starts, so a child that cannot
start brings its supervisor down however slowly its ``init`` fails (a
deliberate difference: OTP retries such a child forever).
"""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Flaky, Gate, flaky, settle, spec


async def test_a_child_that_cannot_start_brings_its_supervisor_down_while_its_api_answers(
    autojump_clock: Any,
) -> None:
    # The acceptance scenario: init fails after 2 s, 8 restarts in 10 s.
    gate, log = Gate(), []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [flaky("flaky", gate), spec("steady", log)], max_restarts=8, max_seconds=10.0
        )
        gate.mode, gate.delay = "fail", 2.0
        async with node.monitor(sup) as monitor:
            start = trio.current_time()
            node.whereis("flaky").kill()  # type: ignore[union-attr]
            for n in range(30):  # probe every 0.5 s for 15 s, while restarts keep failing
                await trio.sleep(0.5)
                with trio.fail_after(0.1):
                    assert dict(sup.which_children())["flaky"] is None
                    extra = await sup.start_child(spec(f"extra{n}", log))
                    assert extra.alive
                    await sup.terminate_child(f"extra{n}")
                    await sup.delete_child(f"extra{n}")
                    with pytest.raises(condukt.otp.ChildRestarting):
                        await sup.restart_child("flaky")
            down = await monitor.wait()
        # 8 attempts, each counted and each failing after 2 s; the ninth is
        # over the intensity, whatever the window: the supervisor gives up.
        assert down.reason == "shutdown"
        assert gate.failures == 8
        assert trio.current_time() - start == pytest.approx(16.0)
        assert ("terminate", "steady", "shutdown") in log
        assert node.process_count == 0


async def test_a_restarting_child_is_reported_and_handled_as_otp_does(autojump_clock: Any) -> None:
    # OTP's supervisor_SUITE hanging_restart_loop: between (here: during)
    # failed attempts, the API answers with "restarting" and "already present".
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([flaky("child", gate)], max_restarts=8, max_seconds=10.0)
        first = node.whereis("child")
        assert first is not None
        gate.mode, gate.delay = "fail", 2.0
        first.kill()
        await trio.sleep(3)  # one attempt failed, the next is under way
        assert gate.failures == 1
        with trio.fail_after(0.1):
            with pytest.raises(ValueError, match="duplicate"):  # OTP: {error, already_present}
                await sup.start_child(flaky("child", gate))
            with pytest.raises(condukt.otp.ChildRestarting):  # OTP: {error, restarting}
                await sup.restart_child("child")
            with pytest.raises(condukt.otp.ChildRestarting):
                await sup.delete_child("child")
            assert issubclass(condukt.otp.ChildRestarting, condukt.ChildRunning)
            assert sup.which_children() == [("child", None)]  # OTP: restarting
            assert sup.count_children() == condukt.otp.ChildCounts(
                specs=1, active=0, supervisors=0, workers=1
            )
            # Stopping it for good cancels the attempt under way; no more follow.
            in_init = gate.inits[-1]
            await sup.terminate_child("child")
        assert not in_init.alive and in_init.exit_reason == "shutdown"
        attempts = len(gate.inits)
        await trio.sleep(30)
        assert len(gate.inits) == attempts and gate.failures == 1
        assert sup.which_children() == [("child", None)] and sup.alive

        gate.mode = "run"
        second = await sup.restart_child("child")
        assert second.alive and node.whereis("child") is second

        # Stopping the supervisor in the middle of a failing restart does not hang.
        gate.mode = "fail"
        second.kill()
        await trio.sleep(1)
        in_init = gate.inits[-1]
        with trio.fail_after(0.1):
            await sup.stop("shutdown")
        assert sup.exit_reason == "shutdown"
        assert in_init.exit_reason == "shutdown"
        assert node.process_count == 0 and node.registered() == []


async def test_every_attempt_counts_against_the_intensity(autojump_clock: Any) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([flaky("child", gate)], max_restarts=3, max_seconds=5.0)
        gate.mode = "fail"
        node.whereis("child").kill()  # type: ignore[union-attr]
        assert await sup.wait() == "shutdown"
        assert gate.failures == 3  # three attempts allowed, the fourth is over the limit


async def test_held_attempts_are_released_once_the_child_starts(autojump_clock: Any) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([flaky("child", gate)], max_restarts=3, max_seconds=5.0)
        gate.fail_next, gate.delay = 2, 4.0  # two slow failures, then it starts
        node.whereis("child").kill()  # type: ignore[union-attr]
        await trio.sleep(20)
        assert gate.failures == 2 and sup.alive
        child = node.whereis("child")
        assert child is not None and await child.call("ping") == "pong"
        # Its failures age out like other restarts now: one more crash, well
        # after them, is restarted.
        gate.delay = 0.0
        child.kill()
        await settle()
        assert sup.alive and node.whereis("child") is not None


async def test_a_restart_that_finds_its_name_taken_is_retried_and_counted(autojump_clock: Any) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        # one_for_all: the exit is handled in the supervisor's own task (its
        # siblings are stopped first), which a start_child keeps busy while
        # the name is taken between the exit and the restart.
        sup = await node.start_supervisor(
            [flaky("svc", gate)], strategy="one_for_all", max_restarts=2, max_seconds=5.0
        )
        old = node.whereis("svc")
        assert old is not None
        slow = Gate()
        slow.delay = 1.0
        async with trio.open_nursery() as nursery:
            nursery.start_soon(sup.start_child, flaky("slow", slow))
            await settle()
            old.kill()
            await old.wait()
            squatter = await node.spawn(condukt.Server, name="svc")
        assert await sup.wait() == "shutdown"
        assert len(gate.inits) == 1  # every attempt failed before init, on the name
        assert squatter.alive and node.whereis("svc") is squatter


async def test_other_children_restart_while_one_keeps_failing(autojump_clock: Any) -> None:
    gate, log = Gate(), []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [flaky("flaky", gate), spec("steady", log)], max_restarts=20, max_seconds=10.0
        )
        gate.mode, gate.delay = "fail", 2.0
        node.whereis("flaky").kill()  # type: ignore[union-attr]
        await trio.sleep(0.5)
        steady = node.whereis("steady")
        assert steady is not None
        steady.kill()
        await steady.wait()
        await trio.sleep(2.0)  # restarts are done one after the other: after flaky's attempt
        new = node.whereis("steady")
        assert new is not None and new is not steady
        assert dict(sup.which_children())["steady"] is new


async def test_a_dynamic_supervisor_restarts_in_the_background_and_counts_every_attempt(
    autojump_clock: Any,
) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=8, max_seconds=10.0)
        child = await dyn.start_child(condukt.ChildSpec(None, Flaky, (gate,)))
        gate.mode, gate.delay = "fail", 2.0
        async with node.monitor(dyn) as monitor:
            start = trio.current_time()
            child.kill()
            await trio.sleep(1)
            with trio.fail_after(0.1):
                assert dyn.which_children() == []  # only running children are listed
                assert dyn.count_children() == condukt.otp.ChildCounts(
                    specs=1, active=0, supervisors=0, workers=1
                )
                other = await dyn.start_child(spec(None, [], tag="other"))
                await dyn.terminate_child(other)
            down = await monitor.wait()
        assert down.reason == "shutdown"
        assert gate.failures == 8
        assert trio.current_time() - start == pytest.approx(16.0)


async def test_a_dynamic_supervisor_stops_restarting_a_child_terminated_by_its_old_handle(
    autojump_clock: Any,
) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_restarts=8, max_seconds=10.0)
        child = await dyn.start_child(condukt.ChildSpec(None, Flaky, (gate,)))
        gate.mode, gate.delay = "fail", 2.0
        child.kill()
        await trio.sleep(3)
        in_init = gate.inits[-1]
        with trio.fail_after(0.1):
            await dyn.terminate_child(child)
        assert in_init.exit_reason == "shutdown"
        assert dyn.count_children().specs == 0
        attempts = len(gate.inits)
        await trio.sleep(30)
        assert len(gate.inits) == attempts and dyn.alive
        with pytest.raises(condukt.ChildNotFound):
            await dyn.terminate_child(child)


async def test_restarting_children_count_towards_max_children(autojump_clock: Any) -> None:
    gate = Gate()
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor(max_children=1, max_restarts=8, max_seconds=10.0)
        child = await dyn.start_child(condukt.ChildSpec(None, Flaky, (gate,)))
        gate.mode, gate.delay = "fail", 2.0
        child.kill()
        await trio.sleep(1)
        with pytest.raises(condukt.TooManyChildren):
            await dyn.start_child(spec(None, []))


async def test_a_nested_supervisor_that_fails_to_restart_is_retried(autojump_clock: Any) -> None:
    gate, log = Gate(), []
    inner = condukt.ChildSpec(
        "inner", condukt.Supervisor, kwargs={"children": [flaky("leaf", gate)]}, name="inner"
    )
    async with condukt.open_node() as node:
        top = await node.start_supervisor([inner, spec("after", log)], max_restarts=5)
        first = node.whereis("inner")
        assert first is not None
        gate.fail_next = 2  # the inner supervisor's init fails twice (its leaf does)
        first.kill()
        await settle()
        second = node.whereis("inner")
        assert second is not None and second is not first and second.alive
        assert dict(top.which_children())["inner"] is second
        assert gate.failures == 2 and top.alive
        leaf = node.whereis("leaf")
        assert leaf is not None and await leaf.call("ping") == "pong"


async def test_a_child_restarting_in_the_background_is_registered_while_its_init_runs(
    autojump_clock: Any,
) -> None:
    # As a gen_server registered by start_link: findable during init, and
    # calls to it wait for init to finish.
    gate = Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([flaky("svc", gate)])
        gate.delay = 2.0  # the restart's init takes 2 s, then succeeds
        gate.inits[0].kill()
        await trio.sleep(1)
        found = node.whereis("svc")
        assert found is gate.inits[1] and found.alive
        assert dict(sup.which_children())["svc"] is None  # not running yet
        with pytest.raises(condukt.NameTaken):
            await node.spawn(condukt.Server, name="svc")
        assert await found.call("ping") == "pong"  # answered once init is done
        assert trio.current_time() == pytest.approx(2.0)
        assert dict(sup.which_children())["svc"] is found


class Fragile(condukt.Server):
    """A server that cannot even be instantiated while ``broken`` is set."""

    broken = False

    def __init__(self) -> None:
        if Fragile.broken:
            raise Boom("__init__")


async def test_a_restart_whose_server_cannot_be_instantiated_is_retried_and_counted(
    autojump_clock: Any,
) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("fragile", Fragile, name="fragile")], max_restarts=2
        )
        first = node.whereis("fragile")
        assert first is not None
        Fragile.broken = True
        try:
            first.kill()
            assert await sup.wait() == "shutdown"
        finally:
            Fragile.broken = False
        assert node.registered() == [] and node.process_count == 0
