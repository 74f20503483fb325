"""``hibernate_after``: an idle process ends its task and compacts its state until its next message."""

from __future__ import annotations

import contextvars
import math
from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt.otp.lowlevel import process_of

_var: contextvars.ContextVar[str] = contextvars.ContextVar("test_hibernate_var", default="unset")


class Box(condukt.Server):
    """Keeps a list it folds into a tuple while hibernating (and counts both hooks)."""

    async def init(self) -> None:
        self.items: list[int] | tuple[int, ...] = []
        self.hibernations = 0
        self.wakes = 0

    def on_hibernate(self) -> bool:
        self.hibernations += 1
        self.items = tuple(self.items)
        return True

    def on_wake(self) -> None:
        self.wakes += 1
        self.items = list(self.items)

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "items":
            return (list(self.items), type(self.items).__name__, self.hibernations, self.wakes)
        if request == "var":
            return _var.get()
        if request == "set-var":
            _var.set("set in the process")
            return None
        if request == "tick":
            self.send_after(5.0, "tock")
            return None
        raise AssertionError(request)

    async def handle_cast(self, message: Any) -> None:
        assert isinstance(self.items, list)  # never touched while compacted
        self.items.append(message)

    async def handle_info(self, message: Any) -> None:
        if message == "tock":
            assert isinstance(self.items, list)
            self.items.append(-1)


class Plain(condukt.Server):
    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return request


def hibernated(handle: condukt.Handle) -> bool:
    proc = process_of(handle)
    return proc is not None and proc.hibernated


async def test_idle_server_hibernates_and_wakes_on_the_next_message(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        box = await node.spawn(Box, hibernate_after=10.0)
        await box.cast(1)
        await trio.sleep(9.0)
        assert not hibernated(box)
        await trio.sleep(2.0)
        assert hibernated(box)
        proc = process_of(box)
        assert proc is not None and proc.status == "waiting" and proc.alive
        await box.cast(2)  # a cast wakes it: the state is restored before handle_cast runs
        items, kind, hibernations, wakes = await box.call("items")
        assert (items, kind, hibernations, wakes) == ([1, 2], "list", 1, 1)
        assert not hibernated(box)
        await trio.sleep(11.0)
        assert hibernated(box)
        assert (await box.call("items"))[:3] == ([1, 2], "list", 2)


async def test_a_message_resets_the_idle_time(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        box = await node.spawn(Box, hibernate_after=10.0)
        for _ in range(5):
            await trio.sleep(6.0)
            await box.cast(0)
        assert not hibernated(box)
        assert (await box.call("items"))[2] == 0  # never hibernated: no message was 10 s apart


async def test_timers_stop_and_monitors_reach_a_hibernating_process(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        box = await node.spawn(Box, hibernate_after=1.0)
        await box.call("tick")  # a send_after fires into a hibernating process
        await trio.sleep(2.0)
        assert hibernated(box)
        await trio.sleep(4.0)
        assert (await box.call("items"))[0] == [-1]
        await trio.sleep(2.0)
        assert hibernated(box)
        async with node.monitor(box) as monitor:
            await box.stop()
            down = await monitor.wait()
        assert down.reason == "normal"
        assert not box.alive


async def test_context_variables_survive_hibernation(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        box = await node.spawn(Box, hibernate_after=1.0)
        await box.call("set-var")
        await trio.sleep(2.0)
        assert hibernated(box)
        assert await box.call("var") == "set in the process"


async def test_a_server_without_hooks_still_ends_its_task(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        server = await node.spawn(Plain, hibernate_after=0.5)
        await trio.sleep(1.0)
        proc = process_of(server)
        assert proc is not None and not proc.hibernated  # nothing compacted...
        await trio.testing.wait_all_tasks_blocked()
        assert all("Plain" not in repr(task.coro) for task in _tasks())  # ...but no task either
        assert await server.call(42) == 42


def _tasks() -> list[Any]:
    root = trio.lowlevel.current_root_task()
    found: list[Any] = []
    stack = [root]
    while stack:
        task = stack.pop()
        found.append(task)
        for nursery in task.child_nurseries:
            stack.extend(nursery.child_tasks)
    return found


async def test_supervised_children_hibernate_and_restart_as_usual(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor(
            [condukt.ChildSpec("box", Box, hibernate_after=1.0, name="box")], strategy="one_for_one"
        )
        await trio.sleep(2.0)
        box = node.whereis("box")
        assert box is not None and hibernated(box)
        await sup.stop()
        assert not box.alive


async def test_node_default_does_not_apply_to_plain_servers(autojump_clock: Any) -> None:
    async with condukt.open_node(hibernate_after=1.0) as node:
        assert node.hibernate_after == 1.0
        box = await node.spawn(Box)
        never = await node.spawn(Box, hibernate_after=math.inf)
        await trio.sleep(5.0)
        assert not hibernated(box) and not hibernated(never)


@pytest.mark.parametrize("bad", [-1, "soon", True, math.nan])
async def test_bad_hibernate_after_is_refused(bad: Any) -> None:
    with pytest.raises(ValueError, match="hibernate_after"):
        condukt.ChildSpec(None, Box, hibernate_after=bad)
    with pytest.raises(ValueError, match="hibernate_after"):
        condukt.open_node(hibernate_after=bad)
