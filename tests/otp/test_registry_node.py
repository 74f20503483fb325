"""The name registry and the node: open_node's lifetime, shutdown and leak-freedom."""

from __future__ import annotations

import contextvars
from typing import Any

import pytest
import trio
import trio.testing

import condukt

from .servers import Boom, Log, Worker, events, settle, spec


def tasks_living() -> int:
    return trio.lowlevel.current_statistics().tasks_living


# --------------------------------------------------------------------------- registry


async def test_names_are_unique(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        first = await node.spawn(Worker, name="svc")
        count = node.process_count
        with pytest.raises(condukt.NameTaken) as info:
            await node.spawn(Worker, name="svc")
        assert info.value.name == "svc"
        assert node.process_count == count
        assert node.whereis("svc") is first
        assert node.registered() == ["svc"]


async def test_name_taken_applies_to_supervisors_and_children(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        await node.spawn(Worker, name="x")
        with pytest.raises(condukt.NameTaken):
            await node.start_supervisor([condukt.ChildSpec("a", Worker)], name="x")
        with pytest.raises(condukt.NameTaken):
            await node.start_supervisor([condukt.ChildSpec("a", Worker, name="x")])
        with pytest.raises(condukt.NameTaken):
            await node.start_dynamic_supervisor(name="x")
        assert node.process_count == 1
        assert node.registered() == ["x"]


async def test_name_taken_when_a_supervisor_starts_a_child(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        await node.spawn(Worker, name="x")
        sup = await node.start_supervisor([])
        dyn = await node.start_dynamic_supervisor()
        with pytest.raises(condukt.NameTaken):
            await sup.start_child(condukt.ChildSpec("a", Worker, name="x"))
        with pytest.raises(condukt.NameTaken):
            await dyn.start_child(condukt.ChildSpec(None, Worker, name="x"))
        assert sup.which_children() == [] and dyn.which_children() == []
        assert sup.alive and dyn.alive


async def test_name_is_freed_when_the_process_dies(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        first = await node.spawn(Worker, name="svc")
        await first.cast(("crash", Boom()))
        await first.wait()
        assert node.whereis("svc") is None
        assert node.registered() == []
        second = await node.spawn(Worker, name="svc")
        assert node.whereis("svc") is second
        assert not first.alive and second.alive


async def test_whereis_of_an_unknown_name(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        assert node.whereis("nobody") is None


async def test_whereis_finds_the_restarted_incarnation(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await node.start_supervisor([spec("db", log)])
        old = node.whereis("db")
        assert old is not None
        await old.cast(("crash", Boom()))
        await old.wait()
        await settle()
        new = node.whereis("db")
        assert new is not None and new is not old
        assert old.alive is False and new.alive is True
        assert new.name == old.name == "db"
        assert await new.call("ping") == ("pong", "db")
        with pytest.raises(condukt.NoProc):
            await old.call("ping")


async def test_handle_stop_of_a_permanent_child_gets_it_restarted(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await node.start_supervisor([spec("db", log)])
        old = node.whereis("db")
        assert old is not None
        await old.stop("normal")
        await settle()
        new = node.whereis("db")
        assert new is not None and new is not old and new.alive


# --------------------------------------------------------------------------- node lifetime


async def test_current_node(autojump_clock: Any) -> None:
    class WhereAmI(condukt.Server):
        async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
            return condukt.current_node()

    assert condukt.current_node() is None
    async with condukt.open_node() as node:
        assert condukt.current_node() is node
        h = await node.spawn(WhereAmI)
        assert await h.call("where") is node
        assert h.node is node
    assert condukt.current_node() is None


async def test_process_crash_does_not_escape_the_node(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        await h.cast(("crash", Boom()))
        await h.wait()
        assert await (await node.spawn(Worker)).call("ping") == ("pong", "w")


async def test_node_exit_terminates_everything_in_reverse_start_order(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await node.spawn(Worker, log, "first")
        await node.start_supervisor([spec("s1", log), spec("s2", log)])
        dyn = await node.start_dynamic_supervisor()
        await dyn.start_child(condukt.ChildSpec(None, Worker, (log, "d1")))
        await node.spawn(Worker, log, "last")
        busy = await node.spawn(Worker, log, "busy")
        await busy.cast(("wait", trio.Event()))  # still inside a callback at exit
        await settle()
    assert events(log, "terminate") == [
        ("busy", "shutdown"),
        ("last", "shutdown"),
        ("d1", "shutdown"),
        ("s2", "shutdown"),
        ("s1", "shutdown"),
        ("first", "shutdown"),
    ]


async def test_node_exit_leaves_no_tasks_behind(autojump_clock: Any) -> None:
    log: Log = []
    before = tasks_living()
    async with condukt.open_node() as node:
        for i in range(3):
            await node.spawn(Worker, log, i)
        await node.start_supervisor([spec("a", log), spec("b", log)])
        dyn = await node.start_dynamic_supervisor()
        await dyn.start_child(condukt.ChildSpec(None, Worker, (log, "d")))
        h = await node.spawn(Worker, log, "sleeper")
        await h.cast(("sleep", 1000))
        assert tasks_living() > before
    assert tasks_living() == before
    assert len(events(log, "terminate")) == 7
    assert node.process_count == 0
    with pytest.raises(condukt.ConduktError):
        node.root  # noqa: B018 - the property raises once the node is closed
    with pytest.raises(condukt.ConduktError):
        await node.spawn(Worker)


async def test_exception_in_the_body_propagates_unwrapped(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("body")
    before = tasks_living()
    with pytest.raises(Boom) as info:
        async with condukt.open_node() as node:
            await node.spawn(Worker, log, "a")
            await node.start_supervisor([spec("b", log)])
            raise error
    assert info.value is error
    assert events(log, "terminate") == [("b", "shutdown"), ("a", "shutdown")]
    assert tasks_living() == before


async def test_exception_group_raised_in_the_body_propagates_as_is(autojump_clock: Any) -> None:
    group = ExceptionGroup("mine", [Boom("1"), Boom("2")])
    with pytest.raises(ExceptionGroup) as info:
        async with condukt.open_node() as node:
            await node.spawn(Worker)
            raise group
    assert info.value is group


async def test_cancelling_the_body_stops_everything(autojump_clock: Any) -> None:
    log: Log = []
    before = tasks_living()
    with trio.move_on_after(10) as scope:
        async with condukt.open_node() as node:
            await node.spawn(Worker, log, "a")
            await node.start_supervisor([spec("b", log)])
            await trio.sleep_forever()
    assert scope.cancelled_caught
    assert events(log, "terminate") == [("b", "shutdown"), ("a", "shutdown")]
    assert tasks_living() == before


async def test_hanging_terminate_does_not_block_node_exit_forever(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        await node.spawn(Worker, log, "stuck", hang_terminate=True)
        await node.spawn(Worker, log, "b")
        start = trio.current_time()
    assert trio.current_time() - start == pytest.approx(condukt.otp.DEFAULT_SHUTDOWN)
    assert events(log, "terminate") == [("b", "shutdown"), ("stuck", "shutdown")]


async def test_nodes_are_independent(autojump_clock: Any) -> None:
    async with condukt.open_node() as one, condukt.open_node() as two:
        a = await one.spawn(Worker, name="svc")
        b = await two.spawn(Worker, name="svc")
        assert one.whereis("svc") is a and two.whereis("svc") is b
        assert one.process_count == two.process_count == 1


async def test_processes_are_on_their_node_whoever_started_them(autojump_clock: Any) -> None:
    seen: list[Any] = []

    class Where(condukt.Server):
        async def init(self) -> None:
            seen.append(condukt.current_node())

        async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
            return condukt.current_node()

    async with condukt.open_node() as node:
        handles: list[Any] = []

        async def outsider() -> None:  # a task outside the open_node block's context (a server's request task)
            assert condukt.current_node() is None
            handles.append(await node.spawn(Where))
            assert condukt.current_node() is None  # init ran on the node without changing the caller's

        done = trio.Event()

        async def run_outside() -> None:
            await outsider()
            done.set()

        trio.lowlevel.spawn_system_task(run_outside, context=contextvars.Context())
        await done.wait()
        assert seen == [node]
        assert await handles[0].call("where") is node


async def test_run_default_node_applies_to_every_task_of_the_run(autojump_clock: Any) -> None:
    from condukt.otp.lowlevel import run_default_node

    seen: list[Any] = []

    async def elsewhere() -> None:  # a task that does not inherit the block's context
        seen.append(condukt.current_node())

    with pytest.raises(TypeError):
        run_default_node(object())  # type: ignore[arg-type]
    async with condukt.open_node() as first, condukt.open_node() as second:
        with run_default_node(first):
            trio.lowlevel.spawn_system_task(elsewhere, context=contextvars.Context())
            await trio.testing.wait_all_tasks_blocked()
            with run_default_node(second):
                trio.lowlevel.spawn_system_task(elsewhere, context=contextvars.Context())
                await trio.testing.wait_all_tasks_blocked()
            trio.lowlevel.spawn_system_task(elsewhere, context=contextvars.Context())
            await trio.testing.wait_all_tasks_blocked()
        trio.lowlevel.spawn_system_task(elsewhere, context=contextvars.Context())
        await trio.testing.wait_all_tasks_blocked()
    assert seen == [first, second, first, None]


async def test_pubsub_topics_show_who_listens_and_cannot_be_changed() -> None:
    async with condukt.open_node() as node:
        topics = node.pubsub.topics
        assert not topics  # nobody subscribes: a publisher need not build its message
        subscription = node.subscribe("agent-1")
        assert dict(topics) == {"agent-1": {subscription}}  # a live view
        with pytest.raises(TypeError):
            topics["other"] = set()  # type: ignore[index]
        subscription.close()
        assert not topics
