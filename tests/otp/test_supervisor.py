"""Static supervisors: strategies, restart types, intensity, escalation, API, shutdown."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Gate, Log, Worker, events, flaky, settle, spec


def lifecycle(log: Log) -> list[tuple[Any, ...]]:
    """``init``/``terminate`` entries, with exception reasons shown as ``"crash"``."""
    out: list[tuple[Any, ...]] = []
    for entry in log:
        if entry[0] == "init":
            out.append(entry)
        elif entry[0] == "terminate":
            reason = "crash" if isinstance(entry[2], BaseException) else entry[2]
            out.append(("terminate", entry[1], reason))
    return out


async def three(
    node: condukt.Node, log: Log, strategy: str, **kwargs: Any
) -> condukt.SupervisorHandle:
    sup = await node.start_supervisor(
        [spec("a", log), spec("b", log), spec("c", log)], strategy=strategy, **kwargs
    )
    assert lifecycle(log) == [("init", "a"), ("init", "b"), ("init", "c")]
    log.clear()
    return sup


async def crash(node: condukt.Node, name: str) -> condukt.Handle:
    """Crash the child registered as ``name``; returns its (now dead) handle."""
    h = node.whereis(name)
    assert h is not None
    await h.cast(("crash", Boom(name)))
    await h.wait()
    await settle()
    return h


# --------------------------------------------------------------------------- strategies


async def test_one_for_one_restarts_only_the_crashed_child(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await three(node, log, "one_for_one")
        before = dict(sup.which_children())
        old = await crash(node, "b")
        assert lifecycle(log) == [("terminate", "b", "crash"), ("init", "b")]
        after = dict(sup.which_children())
        assert after["a"] is before["a"] and after["c"] is before["c"]
        assert after["b"] is not old and after["b"] is not None and after["b"].alive
        assert node.whereis("b") is after["b"]


async def test_one_for_all_restarts_every_child(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await three(node, log, "one_for_all")
        before = dict(sup.which_children())
        await crash(node, "b")
        assert lifecycle(log) == [
            ("terminate", "b", "crash"),
            ("terminate", "c", "shutdown"),
            ("terminate", "a", "shutdown"),
            ("init", "a"),
            ("init", "b"),
            ("init", "c"),
        ]
        after = dict(sup.which_children())
        assert all(after[k] is not before[k] and after[k].alive for k in "abc")  # type: ignore[union-attr]
        assert not any(h.alive for h in before.values() if h is not None)


async def test_rest_for_one_restarts_the_child_and_those_after_it(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await three(node, log, "rest_for_one")
        before = dict(sup.which_children())
        await crash(node, "b")
        assert lifecycle(log) == [
            ("terminate", "b", "crash"),
            ("terminate", "c", "shutdown"),
            ("init", "b"),
            ("init", "c"),
        ]
        after = dict(sup.which_children())
        assert after["a"] is before["a"]
        assert after["b"] is not before["b"] and after["c"] is not before["c"]


async def test_rest_for_one_last_child_restarts_alone(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await three(node, log, "rest_for_one")
        await crash(node, "c")
        assert lifecycle(log) == [("terminate", "c", "crash"), ("init", "c")]


async def test_one_for_all_does_not_restart_temporary_siblings(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [spec("a", log, restart="temporary"), spec("b", log), spec("c", log)],
            strategy="one_for_all",
        )
        log.clear()
        await crash(node, "b")
        assert lifecycle(log) == [
            ("terminate", "b", "crash"),
            ("terminate", "c", "shutdown"),
            ("terminate", "a", "shutdown"),
            ("init", "b"),
            ("init", "c"),
        ]
        assert [cid for cid, _ in sup.which_children()] == ["b", "c"]


async def test_one_for_all_restarts_everyone_again_when_a_restart_fails(autojump_clock: Any) -> None:
    # OTP's one_for_all_other_child_fails_restart: child 1 was restarted, child
    # 2 then failed to start; the retry stops the new child 1 and starts both.
    g1, g2 = Gate(), Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([flaky("c1", g1), flaky("c2", g2)], strategy="one_for_all")
        g2.fail_next = 1
        g1.inits[0].kill()
        await settle()
        assert len(g1.inits) == 3 and len(g2.inits) == 3  # first start, failed restart, retry
        assert g1.inits[1].exit_reason == "shutdown"  # restarted, then stopped for the retry
        assert isinstance(g2.inits[1].exit_reason, Boom)  # failed in init
        assert sup.which_children() == [("c1", g1.inits[2]), ("c2", g2.inits[2])]
        assert all(h.alive for _, h in sup.which_children())  # type: ignore[union-attr]


async def test_rest_for_one_retries_from_the_child_that_failed_to_start(autojump_clock: Any) -> None:
    # OTP's rest_for_one_other_child_fails_restart: the retry restarts the
    # child that failed and those after it, not the one before.
    g1, g2, g3 = Gate(), Gate(), Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [flaky("c1", g1), flaky("c2", g2), flaky("c3", g3)], strategy="rest_for_one"
        )
        g2.fail_next = 1
        g1.inits[0].kill()
        await settle()
        assert [len(g.inits) for g in (g1, g2, g3)] == [2, 3, 2]
        assert g3.inits[0].exit_reason == "shutdown"  # stopped with the first restart
        assert sup.which_children() == [("c1", g1.inits[1]), ("c2", g2.inits[2]), ("c3", g3.inits[1])]


async def test_children_after_one_that_failed_to_restart_wait_stopped(autojump_clock: Any) -> None:
    g1, g2, g3 = Gate(), Gate(), Gate()
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [flaky("c1", g1), flaky("c2", g2), flaky("c3", g3)],
            strategy="one_for_all",
            max_restarts=10,
            max_seconds=60.0,
        )
        g2.mode, g2.delay = "fail", 1.0
        g1.inits[0].kill()
        await trio.sleep(1.5)  # c1 restarted, c2 failed once, the retry began
        assert len(g3.inits) == 1  # c3 was stopped and not started yet
        with pytest.raises(condukt.otp.ChildRestarting):
            await sup.restart_child("c3")  # part of the restart under way
        await sup.terminate_child("c2")  # its init is cancelled; the restart goes on without it
        await settle()
        assert sup.which_children() == [("c1", g1.inits[-1]), ("c2", None), ("c3", g3.inits[-1])]
        assert len(g3.inits) == 2 and g3.inits[-1].alive and g1.inits[-1].alive
        assert g2.inits[-1].exit_reason == "shutdown"
        assert sup.alive


# --------------------------------------------------------------------------- restart types


@pytest.mark.parametrize(
    ("restart", "how", "restarted"),
    [
        ("permanent", "normal", True),
        ("permanent", "crash", True),
        ("permanent", "shutdown", True),
        ("transient", "normal", False),
        ("transient", "crash", True),
        ("transient", "shutdown", False),
        ("temporary", "normal", False),
        ("temporary", "crash", False),
        ("temporary", "shutdown", False),
        # OTP's {shutdown, Term}: a clean stop that says why.
        ("permanent", ("shutdown", "some_info"), True),
        ("transient", ("shutdown", "some_info"), False),
        ("temporary", ("shutdown", "some_info"), False),
    ],
)
async def test_restart_types(restart: Any, how: Any, restarted: bool, autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("w", log, restart=restart)])
        old = node.whereis("w")
        assert old is not None
        log.clear()
        if how == "crash":
            await old.cast(("crash", Boom()))
        else:
            await old.cast(("stop", how))  # Server.stop from inside
        await old.wait()
        await settle()
        assert not old.alive
        new = node.whereis("w")
        if restarted:
            assert new is not None and new is not old and new.alive
            assert lifecycle(log)[-1] == ("init", "w")
            assert sup.which_children() == [("w", new)]
        else:
            assert new is None
            assert events(log, "init") == []
            # A temporary child's spec goes away; the others stay listed as stopped.
            expected = [] if restart == "temporary" else [("w", None)]
            assert sup.which_children() == expected
        assert sup.alive


@pytest.mark.parametrize(
    ("reason", "clean"),
    [
        ("normal", True),
        ("shutdown", True),
        (("shutdown", "some_info"), True),
        (("shutdown", {"why": "draining"}), True),
        (("shutdown",), False),
        (("shutdown", 1, 2), False),
        (("normal", "x"), False),
        ("killed", False),
        (Boom(), False),
        (None, False),
    ],
)
def test_is_shutdown_exit(reason: Any, clean: bool) -> None:
    assert condukt.otp.is_shutdown_exit(reason) is clean
    assert condukt.otp.is_normal_exit(reason) is (reason == "normal")


async def test_restarted_child_gets_the_same_arguments(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await node.start_supervisor([spec("w", log)])
        await crash(node, "w")
        await crash(node, "w")
        assert events(log, "init") == [("w",), ("w",), ("w",)]  # same log list, same tag


# --------------------------------------------------------------------------- intensity


async def test_intensity_exceeded_shuts_the_supervisor_down(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await three(node, log, "one_for_one", max_restarts=2, max_seconds=5.0)
        async with node.monitor(sup) as m:
            await crash(node, "a")
            await crash(node, "a")
            assert sup.alive
            await crash(node, "a")
            down = await m.wait()
        assert down.handle is sup and down.reason == "shutdown"
        assert not sup.alive and sup.exit_reason == "shutdown"
        # Every child is stopped, in reverse start order, and nothing is left.
        assert lifecycle(log)[-3:] == [
            ("terminate", "a", "crash"),
            ("terminate", "c", "shutdown"),
            ("terminate", "b", "shutdown"),
        ]
        assert [node.whereis(n) for n in "abc"] == [None, None, None]
        assert node.process_count == 0


async def test_restarts_outside_the_window_do_not_count(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)], max_restarts=2, max_seconds=5.0)
        for _ in range(6):
            await crash(node, "a")
            await trio.sleep(3)  # at most two restarts in any 5 s window
        assert sup.alive
        assert len(events(log, "init")) == 7


async def test_max_restarts_zero_gives_up_at_the_first_crash(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)], max_restarts=0)
        await crash(node, "a")
        assert await sup.wait() == "shutdown"
        assert events(log, "init") == [("a",)]


def nested(log: Log, **kwargs: Any) -> condukt.ChildSpec:
    return condukt.ChildSpec(
        "sub",
        condukt.Supervisor,
        kwargs={"children": [spec("leaf", log)], "max_restarts": 0, **kwargs},
        name="sub",
    )


async def test_intensity_escalates_to_the_parent_supervisor(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        top = await node.start_supervisor([spec("first", log), nested(log)], strategy="one_for_one")
        sub = node.whereis("sub")
        assert isinstance(sub, condukt.SupervisorHandle)
        log.clear()
        await crash(node, "leaf")  # sub gives up at once and exits "shutdown"
        assert sub.exit_reason == "shutdown"
        new_sub = node.whereis("sub")
        assert new_sub is not None and new_sub is not sub and new_sub.alive
        assert top.alive
        assert dict(top.which_children())["sub"] is new_sub
        assert lifecycle(log) == [("terminate", "leaf", "crash"), ("init", "leaf")]
        leaf = node.whereis("leaf")
        assert leaf is not None and await leaf.call("ping") == ("pong", "leaf")


async def test_escalation_reaches_the_top(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        top = await node.start_supervisor([nested(log)], max_restarts=1, max_seconds=5.0)
        async with node.monitor(top) as m:
            await crash(node, "leaf")  # sub restarted once by top
            assert top.alive
            await crash(node, "leaf")  # second restart of sub exceeds top's intensity
            down = await m.wait()
        assert down.reason == "shutdown"
        assert node.process_count == 0


# --------------------------------------------------------------------------- API


async def test_which_and_count_children(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log), nested(log), spec("c", log)])
        children = sup.which_children()
        assert [cid for cid, _ in children] == ["a", "sub", "c"]
        assert all(h is not None and h.alive for _, h in children)
        assert children[1][1] is node.whereis("sub")
        assert sup.count_children() == condukt.otp.ChildCounts(specs=3, active=3, supervisors=1, workers=2)
        await sup.terminate_child("c")
        assert sup.count_children() == condukt.otp.ChildCounts(specs=3, active=2, supervisors=1, workers=2)


async def test_start_child_appends_and_rejects_duplicate_ids(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)])
        h = await sup.start_child(spec("b", log))
        assert h.alive and node.whereis("b") is h
        assert sup.which_children() == [("a", node.whereis("a")), ("b", h)]
        with pytest.raises(ValueError):
            await sup.start_child(condukt.ChildSpec("a", Worker))
        assert [cid for cid, _ in sup.which_children()] == ["a", "b"]
        assert sup.alive  # a bad request is the caller's error, not a crash


async def test_start_child_init_error_is_raised_and_nothing_added(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)])
        count = node.process_count
        with pytest.raises(Boom):
            await sup.start_child(spec("b", log, fail=Boom("init")))
        assert [cid for cid, _ in sup.which_children()] == ["a"]
        assert node.process_count == count
        assert sup.alive


async def test_started_child_is_supervised(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)])
        old = await sup.start_child(spec("b", log))
        await crash(node, "b")
        new = node.whereis("b")
        assert new is not None and new is not old
        assert dict(sup.which_children())["b"] is new


async def test_terminate_restart_delete_child(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log), spec("b", log)])
        old = node.whereis("a")
        assert old is not None
        log.clear()
        assert await sup.terminate_child("a") is None
        assert not old.alive and old.exit_reason == "shutdown"
        assert lifecycle(log) == [("terminate", "a", "shutdown")]
        assert sup.which_children()[0] == ("a", None)
        await settle()
        assert node.whereis("a") is None  # a terminated child is not restarted

        with pytest.raises(condukt.ChildRunning):
            await sup.restart_child("b")
        with pytest.raises(condukt.ChildRunning):
            await sup.delete_child("b")

        new = await sup.restart_child("a")
        assert new.alive and new is not old and node.whereis("a") is new
        assert sup.which_children()[0] == ("a", new)

        await sup.terminate_child("a")
        assert await sup.delete_child("a") is None
        assert [cid for cid, _ in sup.which_children()] == ["b"]
        assert sup.alive


async def test_terminate_temporary_child_removes_its_spec(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log, restart="temporary"), spec("b", log)])
        await sup.terminate_child("a")
        assert [cid for cid, _ in sup.which_children()] == ["b"]


@pytest.mark.parametrize("op", ["terminate_child", "restart_child", "delete_child"])
async def test_unknown_child_id_raises_child_not_found(op: str, autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", [])])
        with pytest.raises(condukt.ChildNotFound):
            await getattr(sup, op)("missing")
        assert issubclass(condukt.ChildNotFound, LookupError)
        assert sup.alive


async def test_api_of_a_dead_supervisor_raises_noproc(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", [])])
        await sup.stop()
        with pytest.raises(condukt.NoProc):
            sup.which_children()
        with pytest.raises(condukt.NoProc):
            sup.count_children()
        with pytest.raises(condukt.NoProc):
            await sup.terminate_child("a")


# --------------------------------------------------------------------------- shutdown


async def test_stop_stops_children_in_reverse_start_order(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await three(node, log, "one_for_one")
        await sup.stop("shutdown")
        assert lifecycle(log) == [
            ("terminate", "c", "shutdown"),
            ("terminate", "b", "shutdown"),
            ("terminate", "a", "shutdown"),
        ]
        assert node.process_count == 0 and node.registered() == []


async def test_children_get_shutdown_whatever_the_supervisor_reason(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log)])
        await sup.stop("normal")
        assert events(log, "terminate") == [("a", "shutdown")]
        assert sup.exit_reason == "normal"


async def test_hanging_terminate_is_cancelled_after_the_shutdown_budget(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [spec("a", log), spec("slow", log, shutdown=2.0, hang_terminate=True), spec("c", log)]
        )
        slow = node.whereis("slow")
        assert slow is not None
        start = trio.current_time()
        await sup.stop()
        assert trio.current_time() - start == pytest.approx(2.0)
        assert slow.exit_reason == "killed"
        # The hang delayed, but did not prevent, the next child's shutdown.
        assert lifecycle(log)[-3:] == [
            ("terminate", "c", "shutdown"),
            ("terminate", "slow", "shutdown"),
            ("terminate", "a", "shutdown"),
        ]


async def test_default_worker_shutdown_budget_is_five_seconds(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("slow", log, hang_terminate=True)])
        start = trio.current_time()
        await sup.stop()
        assert trio.current_time() - start == pytest.approx(condukt.otp.DEFAULT_SHUTDOWN)


async def test_terminate_child_with_hanging_terminate_is_killed(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("slow", log, shutdown=1.0, hang_terminate=True)])
        slow = node.whereis("slow")
        assert slow is not None
        await sup.terminate_child("slow")
        assert slow.exit_reason == "killed"
        assert trio.current_time() == pytest.approx(1.0)


async def test_brutal_kill_skips_terminate(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", log), spec("b", log, shutdown="brutal_kill")])
        b = node.whereis("b")
        assert b is not None
        log.clear()
        await sup.stop()
        assert b.exit_reason == "killed"
        assert lifecycle(log) == [("terminate", "a", "shutdown")]


async def test_supervisor_is_a_process(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([spec("a", [])], name="app")
        assert isinstance(sup, condukt.SupervisorHandle)
        assert node.whereis("app") is sup
        assert node.process_count == 2
        await sup.stop()
        assert not sup.alive and node.whereis("app") is None
        assert node.process_count == 0


async def test_supervisor_stop_timeout_bounds_the_whole_shutdown(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [spec(c, log, shutdown=2.0, hang_terminate=True) for c in "abcd"]
        )
        children = [h for _, h in sup.which_children()]
        log.clear()
        await sup.stop("normal", timeout=3.0)
        # d used its 2 s, c was mid-terminate when the budget ran out and
        # finished its own 2 s; b and a were cancelled without terminate.
        assert sup.exit_reason == "killed"
        assert trio.current_time() == pytest.approx(4.0)
        assert lifecycle(log) == [("terminate", "d", "shutdown"), ("terminate", "c", "shutdown")]
        assert [h.exit_reason for h in children if h is not None] == ["killed"] * 4
        assert node.process_count == 0


async def test_nested_supervisor_shutdown_budget_is_honoured(autojump_clock: Any) -> None:
    log: Log = []
    inner = condukt.ChildSpec(
        "sub",
        condukt.Supervisor,
        kwargs={"children": [spec(c, log, shutdown=2.0, hang_terminate=True) for c in "xyz"]},
        shutdown=1.0,
        name="sub",
    )
    async with condukt.open_node() as node:
        top = await node.start_supervisor([inner])
        sub = node.whereis("sub")
        assert sub is not None
        await top.stop()
        assert sub.exit_reason == "killed"
        assert trio.current_time() == pytest.approx(2.0)
        assert [entry[1] for entry in log if entry[0] == "terminate"] == ["z"]
