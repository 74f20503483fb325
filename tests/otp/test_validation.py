"""Bad input and failed starts: errors are raised up front and nothing is left running."""

from __future__ import annotations

from typing import Any

import pytest
import trio

import condukt

from .servers import Boom, Log, Worker, events, spec


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"strategy": "one_for_some"}, ValueError),
        ({"strategy": None}, ValueError),
        ({"max_restarts": -1}, ValueError),
        ({"max_restarts": 1.5}, TypeError),
        ({"max_restarts": True}, TypeError),
        ({"max_seconds": 0}, ValueError),
        ({"max_seconds": -1.0}, ValueError),
        ({"max_seconds": "5"}, TypeError),
    ],
)
async def test_bad_supervisor_options_start_nothing(
    kwargs: dict[str, Any], error: type[Exception], autojump_clock: Any
) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        with pytest.raises(error):
            await node.start_supervisor([spec("a", log)], name="app", **kwargs)
        assert node.process_count == 0
        assert node.whereis("app") is None and node.whereis("a") is None
        assert log == []


async def test_duplicate_child_ids_start_nothing(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="duplicate"):
            await node.start_supervisor([spec("a", log), spec("b", log), spec("a", log)])
        assert node.process_count == 0
        assert log == []


@pytest.mark.parametrize(
    "children",
    [
        [condukt.ChildSpec(None, Worker)],  # a static child needs an id
        ["not a spec"],
        condukt.ChildSpec("a", Worker),  # a spec, not a list of specs
        "ab",
    ],
)
async def test_bad_children_start_nothing(children: Any, autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        with pytest.raises((TypeError, ValueError)):
            await node.start_supervisor(children)
        assert node.process_count == 0


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"restart": "sometimes"}, ValueError),
        ({"shutdown": -1}, ValueError),
        ({"shutdown": "never"}, ValueError),
        ({"shutdown": float("nan")}, ValueError),
        ({"mailbox_size": 0}, ValueError),
        ({"start": int}, TypeError),
        ({"start": Worker()}, TypeError),
    ],
)
def test_bad_child_spec_is_rejected_at_construction(kwargs: dict[str, Any], error: type[Exception]) -> None:
    fields: dict[str, Any] = {"start": Worker, **kwargs}
    with pytest.raises(error):
        condukt.ChildSpec("a", **fields)


def test_child_spec_defaults() -> None:
    s = condukt.ChildSpec("a", Worker)
    assert (s.args, dict(s.kwargs), s.restart, s.shutdown, s.name, s.mailbox_size) == (
        (),
        {},
        "permanent",
        None,
        None,
        None,
    )
    assert condukt.ChildSpec("a", Worker, args=[1, 2]).args == (1, 2)


@pytest.mark.parametrize(
    ("kwargs", "error"),
    [
        ({"max_children": -1}, ValueError),
        ({"max_children": 1.5}, ValueError),
        ({"max_restarts": -1}, ValueError),
        ({"max_seconds": 0}, ValueError),
    ],
)
async def test_bad_dynamic_supervisor_options_start_nothing(
    kwargs: dict[str, Any], error: type[Exception], autojump_clock: Any
) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(error):
            await node.start_dynamic_supervisor(name="dyn", **kwargs)
        assert node.process_count == 0
        assert node.whereis("dyn") is None


async def test_child_init_failure_stops_the_started_siblings(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("init")
    async with condukt.open_node() as node:
        with pytest.raises(Boom) as info:
            await node.start_supervisor(
                [spec("a", log), spec("b", log), spec("c", log, fail=error), spec("d", log)],
                name="app",
            )
        assert info.value is error
        # Those already started were stopped (reverse order); the rest never started.
        assert log == [
            ("init", "a"),
            ("init", "b"),
            ("init-failed", "c"),
            ("terminate", "b", "shutdown"),
            ("terminate", "a", "shutdown"),
        ]
        # Right away: nothing running, counted or registered.
        assert node.process_count == 0
        assert node.whereis("app") is None
        assert node.registered() == []


async def test_nested_supervisor_init_failure_propagates(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("deep")
    inner = condukt.ChildSpec(
        "inner", condukt.Supervisor, kwargs={"children": [spec("x", log, fail=error)]}, name="inner"
    )
    async with condukt.open_node() as node:
        with pytest.raises(Boom):
            await node.start_supervisor([spec("a", log), inner], name="outer")
        assert node.process_count == 0
        assert node.registered() == []
        assert events(log, "terminate") == [("a", "shutdown")]


async def test_dynamic_child_init_failure_leaves_nothing(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        dyn = await node.start_dynamic_supervisor()
        count = node.process_count
        with pytest.raises(Boom):
            await dyn.start_child(spec(None, log, fail=Boom()))
        assert node.process_count == count
        assert dyn.count_children().active == 0
        assert node.registered() == []


async def test_supervised_start_child_with_bad_spec(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([])
        with pytest.raises(TypeError):
            await sup.start_child("not a spec")  # type: ignore[arg-type]
        with pytest.raises(ValueError):
            await sup.start_child(condukt.ChildSpec(None, Worker))
        dyn = await node.start_dynamic_supervisor()
        with pytest.raises(TypeError):
            await dyn.start_child(Worker)  # type: ignore[arg-type]
        assert sup.alive and dyn.alive


class SlowInit(Worker):
    async def init(self, log: Log, tag: Any) -> None:  # type: ignore[override]
        await super().init(log, tag)
        await trio.sleep(10)


async def test_cancelled_spawn_leaves_nothing(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        with trio.move_on_after(1) as scope:
            await node.spawn(SlowInit, log, "slow", name="slow")
        assert scope.cancelled_caught
        assert node.process_count == 0
        assert node.registered() == []
        await node.spawn(Worker, name="slow")  # the name is free again at once


async def test_cancelled_start_supervisor_leaves_nothing(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        with trio.move_on_after(1) as scope:
            await node.start_supervisor(
                [spec("a", log), condukt.ChildSpec("slow", SlowInit, (log, "slow"), name="slow")],
                name="app",
            )
        assert scope.cancelled_caught
        # Right away: the child started before the cancel was stopped, nothing is left.
        assert events(log, "terminate") == [("a", "shutdown")]
        assert node.process_count == 0
        assert node.registered() == []
        await node.start_supervisor([spec("a", log)], name="app")


async def test_a_supervisor_killed_during_its_init_fails_its_start(autojump_clock: Any) -> None:
    # Its init (starting the children) runs in its own task; the starter must
    # not wait forever for an init that was cut short by someone else.
    log: Log = []
    async with condukt.open_node() as node:

        async def kill_it() -> None:
            await trio.sleep(1)
            sup = node.whereis("app")
            assert sup is not None and sup.alive
            sup.kill()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(kill_it)
            with trio.fail_after(2), pytest.raises(condukt.CallError) as info:
                await node.start_supervisor(
                    [spec("a", log), condukt.ChildSpec("slow", SlowInit, (log, "slow"))], name="app"
                )
        assert info.value.reason == "killed"
        assert node.process_count == 0 and node.registered() == []


def test_errors_that_carry_fields_keep_them_through_pickling() -> None:
    import pickle

    error = pickle.loads(pickle.dumps(condukt.CallError("killed", "custom message")))
    assert (error.reason, str(error)) == ("killed", "custom message")
    taken = pickle.loads(pickle.dumps(condukt.NameTaken("a1")))
    assert (taken.name, str(taken)) == ("a1", "name already registered: 'a1'")
