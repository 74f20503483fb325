"""condukt.asyncio's typed proxies: they mirror the trio API member for member, and each kind comes back where it should.

The static side (``mypy --strict`` reads ``await node.spawn(MyAgent)`` as an
agent-handle proxy) is in tests/typing/snippets/asyncio_*.py; these tests
pin what the type checker relies on at run time.
"""

from __future__ import annotations

import asyncio
import functools
import inspect
import typing
from collections.abc import Callable
from typing import Any

import pytest
import trio
import trio.testing

import condukt
import condukt.asyncio as ca
from condukt.agent import EventStream
from condukt.agent.lowlevel import start_run
from condukt.events import TextDelta
from condukt.testing import FunctionModel, ScriptedModel, reply

# tests/ is on sys.path: the bridge's tests lend their helpers.
from tests.asyncio.test_bridge import _add_instrument, _Chatty, _IOWaits, _nothing, _remove_instrument

#: Each proxy class and the trio class it stands for.
PAIRS: list[tuple[type, type]] = [
    (ca.Node, condukt.Node),
    (ca.Handle, condukt.Handle),
    (ca.AgentHandle, condukt.AgentHandle),
    (ca.SupervisorHandle, condukt.SupervisorHandle),
    (ca.DynamicSupervisorHandle, condukt.DynamicSupervisorHandle),
    (ca.Stream, EventStream),
]


def _instance_attributes(cls: type) -> set[str]:
    """Public attributes an instance of ``cls`` gets in ``__init__`` (not found on the class)."""
    if cls is condukt.Node:
        instance: Any = condukt.Node()
    elif cls is EventStream:
        instance = EventStream(None, None)  # type: ignore[arg-type]  # only its attributes are read
    else:
        return set()  # the handles have slots only
    return {name for name in vars(instance) if not name.startswith("_")}


@pytest.fixture(params=["guest", "thread"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    """Each test that takes it runs with trio as a guest on the loop, then with trio in its own thread."""
    if request.param == "thread":
        monkeypatch.setattr(ca, "open_node", functools.partial(ca.open_node, thread=True))
    mode: str = request.param
    return mode


def _public(cls: type) -> set[str]:
    return {name for name in dir(cls) if not name.startswith("_")} | _instance_attributes(cls)


@pytest.mark.parametrize(("proxy", "trio_class"), PAIRS, ids=lambda cls: cls.__qualname__)
def test_each_proxy_declares_every_public_member_of_its_trio_class(proxy: type, trio_class: type) -> None:
    """Declared on the class, so type checkers see it (the run-time fallback does not count)."""
    missing = sorted(name for name in _public(trio_class) if not hasattr(proxy, name))
    assert missing == []


def _shape(signature: inspect.Signature) -> list[tuple[str, Any, Any]]:
    """Names, kinds and defaults of the parameters after ``self``: what a caller's arguments meet."""
    parameters = list(signature.parameters.values())
    if parameters and parameters[0].name == "self":
        parameters = parameters[1:]
    return [(p.name, p.kind, p.default) for p in parameters]


def _trio_methods() -> list[tuple[str, Callable[..., Any], Callable[..., Any]]]:
    found = []
    for proxy, trio_class in PAIRS:
        for name in sorted(_public(trio_class)):
            trio_member = inspect.getattr_static(trio_class, name, None)
            if not inspect.isfunction(trio_member):
                continue
            found.append((f"{proxy.__name__}.{name}", getattr(proxy, name), trio_member))
    return found


def _shapes(fn: Callable[..., Any]) -> list[list[tuple[str, Any, Any]]]:
    """The shape of each overload of ``fn``, or of ``fn`` itself."""
    return [_shape(inspect.signature(each)) for each in typing.get_overloads(fn) or [fn]]


@pytest.mark.parametrize(
    ("where", "proxy_method", "trio_method"), _trio_methods(), ids=lambda x: x if type(x) is str else ""
)
def test_proxy_methods_take_the_parameters_of_the_trio_methods(
    where: str, proxy_method: Callable[..., Any], trio_method: Callable[..., Any]
) -> None:
    """Bridged methods read the trio signature; those written out (they give proxies) repeat it, overload by overload."""
    trio_shapes = _shapes(trio_method)
    for shape in _shapes(proxy_method):
        assert shape in trio_shapes, where
    if trio_method.__name__ not in ("stream", "iter", "attach"):  # async context managers on both sides
        assert inspect.iscoroutinefunction(proxy_method), where  # awaitable on asyncio, the trio API's sync ones too


def test_one_shot_run_takes_the_parameters_of_condukt_run() -> None:
    assert _shape(inspect.signature(ca.run)) == _shape(inspect.signature(condukt.run))


def test_start_run_takes_what_agent_handle_run_takes() -> None:
    """What condukt.asyncio's ``run`` starts without a task must accept every option of ``AgentHandle.run``."""
    run = _shape(inspect.signature(condukt.AgentHandle.run))
    started = _shape(inspect.signature(start_run))[2:]  # after handle and deliver
    assert started == run


class Counter(condukt.Server):
    async def init(self, start: int = 0) -> None:
        self.n = start

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return self.n


class TaskHandle(condukt.Handle):
    """A handle class of one's own, with a method and a property of its own."""

    __slots__ = ()

    async def size(self, extra: int) -> int:
        n: int = await self.call("size")
        return n + extra

    @property
    def label(self) -> str:
        return f"tasks {self.id}"


class Tasks(Counter):
    handle_class = TaskHandle


def test_each_kind_of_proxy_comes_back_from_the_trio_api(mode: str) -> None:
    async def main() -> dict[str, Any]:
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("hi")]), name="agent")
            counter = await node.spawn(Counter, 2)
            sup = await node.start_supervisor(
                [
                    condukt.ChildSpec("c", Counter),
                    condukt.ChildSpec("a", condukt.Agent, kwargs={"model": ScriptedModel([])}),
                ]
            )
            dyn = await node.start_dynamic_supervisor()
            dyn_agent = await dyn.start_child(
                condukt.ChildSpec(None, condukt.Agent, kwargs={"model": ScriptedModel([])})
            )
            children = dict(await sup.which_children())
            await sup.terminate_child("c")
            restarted = await sup.restart_child("c")
            info = await agent.info()
            return {
                "agent": type(agent),
                "counter": type(counter),
                "sup": type(sup),
                "dyn": type(dyn),
                "dyn child": type(dyn_agent),
                "children": {key: type(value) for key, value in children.items()},
                "restarted": type(restarted),
                "found": type(await node.whereis("agent")),
                "typed find": type(await node.whereis("agent", condukt.AgentHandle)),
                "registered": await node.registered(),
                "state": (agent.state, agent.queued, agent.running, info.state),
                "unbound": await ca.AgentHandle.run(agent, "x"),  # a method read off the class takes the proxy first
                "counts": (await dyn.count_children()).active,
                "process count": node.process_count > 0,
                "node": agent.node is node.inner,
            }

    assert asyncio.run(main()) == {
        "agent": ca.AgentHandle,
        "counter": ca.Handle,
        "sup": ca.SupervisorHandle,
        "dyn": ca.DynamicSupervisorHandle,
        "dyn child": ca.AgentHandle,
        "children": {"c": ca.Handle, "a": ca.AgentHandle},
        "restarted": ca.Handle,
        "found": ca.AgentHandle,
        "typed find": ca.AgentHandle,
        "registered": ["agent"],
        "state": ("idle", 0, False, "idle"),
        "unbound": "hi",
        "counts": 1,
        "process count": True,
        "node": True,
    }


def test_a_handle_class_of_ones_own_is_reached_typed_or_through_the_fallback(mode: str) -> None:
    async def main() -> tuple[int, int, str, bool]:
        async with ca.open_node() as node:
            tasks = await node.spawn(Tasks, 3)
            typed = await tasks.call_in_trio(TaskHandle.size, tasks, 1)  # a proxy argument arrives as the trio handle
            untyped = await tasks.size(2)  # type: ignore[attr-defined]  # the run-time fallback
            label = tasks.label  # type: ignore[attr-defined]
            return typed, untyped, label, tasks.inner.label == label

    typed, untyped, label, same = asyncio.run(main())
    assert (typed, untyped, same) == (4, 5, True)
    assert label.startswith("tasks ")


def test_run_options_reach_the_agent_from_asyncio(mode: str) -> None:
    """``model_settings`` (and every other option of ``AgentHandle.run``) also on a run started without a task."""

    async def main() -> Any:
        model = ScriptedModel([reply("x")])
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model)
            assert await agent.run("hi", model_settings={"temperature": 0.25}, max_turns=2) == "x"
        return model.requests[-1].settings

    settings = asyncio.run(main())
    assert settings is not None and settings.temperature == 0.25


@pytest.mark.parametrize("linger", [0, None])
def test_the_tunables_are_read_off_the_package(linger: int | None, monkeypatch: pytest.MonkeyPatch) -> None:
    """docs/embedding.md: ``condukt.asyncio.LINGER_TICKS = 0`` turns lingering off."""
    if linger is not None:
        monkeypatch.setattr(ca, "LINGER_TICKS", linger)

    async def main() -> int:
        waits = _IOWaits()
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=FunctionModel(lambda request: "ok"))
            await node.call_in_trio(_add_instrument, waits)
            lingered = 0
            for _ in range(5):
                for answered in (agent.run("go"), node.call_in_trio(_nothing)):
                    await answered
                    start = len(waits.timeouts)
                    for _ in range(20):  # nobody calls: trio goes idle
                        await asyncio.sleep(0)
                    lingered += sum(1 for timeout in waits.timeouts[start:] if timeout == 0)
            await node.call_in_trio(_remove_instrument, waits)
        return lingered

    lingered = asyncio.run(main())
    if linger == 0:
        assert lingered == 0
    else:
        assert lingered > 0


def test_a_smaller_stream_buffer_set_on_the_package_holds_the_run_back_sooner(
    monkeypatch: pytest.MonkeyPatch, mode: str
) -> None:
    monkeypatch.setattr(ca, "STREAM_BUFFER", 4)

    async def main() -> tuple[int, int, Any]:
        model = _Chatty(600)
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model)
            async with agent.stream("go") as events:
                await events.__anext__()
                await node.call_in_trio(trio.testing.wait_all_tasks_blocked)  # the run waits for the reader
                held = model.emitted
                deltas = len([event async for event in events if type(event) is TextDelta])
            return held, deltas, events.done

    held, deltas, done = asyncio.run(main())
    assert deltas == 600 and done is not None
    # The run waits with this bridge's buffer (4, not 64) and the agent's own one full.
    assert condukt.agent.STREAM_BUFFER <= held <= 4 + condukt.agent.STREAM_BUFFER + 8
