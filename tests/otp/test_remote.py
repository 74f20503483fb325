"""The runtime's extension point for other nodes' processes (lowlevel.set_remote_processes), without Ray."""

from __future__ import annotations

import itertools
from collections.abc import Callable
from typing import Any

import pytest

import condukt
from condukt.otp import lowlevel


class Far:
    """A reference to a process of another node, as an extension would hand one out."""

    def __init__(self, pid: int) -> None:
        self.id = pid

    async def wait(self) -> Any:
        raise NotImplementedError

    def __repr__(self) -> str:
        return f"<Far {self.id}>"


class FakeRemote:
    """Records watches and links; the test ends them as a lost node would."""

    def __init__(self, near: dict[int, condukt.Handle]) -> None:
        self.near = near  # Far ids that name a process of this node
        self.watches: dict[Any, Callable[[Any], None]] = {}
        self.links: list[tuple[condukt.Handle, Far]] = []
        self.keys = itertools.count()

    def local(self, target: Any) -> condukt.Handle | None:
        if not isinstance(target, Far):
            raise TypeError(f"not a Far: {target!r}")
        return self.near.get(target.id)

    def watch(self, target: Any, on_exit: Callable[[Any], None], watcher: condukt.Handle | None) -> Callable[[], None]:
        key = next(self.keys)
        self.watches[key] = on_exit
        return lambda: self.watches.pop(key, None) and None

    def link(self, local: condukt.Handle, target: Any) -> None:
        self.links.append((local, target))
        self.watches[local, target] = lambda reason: lowlevel.exit_signal(local, target, reason)

    def unlink(self, local: condukt.Handle, target: Any) -> None:
        self.links.remove((local, target))
        self.watches.pop((local, target), None)

    def lose(self, reason: Any = "noconnection") -> None:
        for on_exit in list(self.watches.values()):
            on_exit(reason)
        self.watches.clear()


class Watcher(condukt.Server):
    async def init(self, far: Far, trap: bool) -> None:
        self.trap_exits = trap
        self.far = far
        self.ref = self.monitor(far)
        self.link(far)
        self.got: list[Any] = []

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "drop":
            self.demonitor(self.ref)
            self.unlink(self.far)
        return [(type(m).__name__, m.handle, m.reason, getattr(m, "ref", None) is self.ref) for m in self.got]

    async def handle_info(self, message: Any) -> None:
        self.got.append(message)


async def test_monitor_and_link_reach_another_nodes_process_through_the_extension() -> None:
    async with condukt.open_node() as node:
        remote = FakeRemote({})
        lowlevel.set_remote_processes(node, remote)
        far = Far(7)
        trapping = await node.spawn(Watcher, far, True)
        dying = await node.spawn(Watcher, far, False)
        dropped = await node.spawn(Watcher, far, True)
        assert await dropped.call("drop") == []
        async with node.monitor(far) as outside:
            async with node.monitor(dying) as dying_down:
                remote.lose()
                assert (await outside.wait()).handle is far
                assert (await dying_down.wait()).reason == "noconnection"
        assert await trapping.call("got") == [("Down", far, "noconnection", True), ("Exit", far, "noconnection", False)]
        assert await dropped.call("got") == []  # demonitored and unlinked: nothing


async def test_a_reference_to_a_process_of_this_node_is_monitored_locally_and_the_down_carries_it() -> None:
    async with condukt.open_node() as node:
        target = await node.spawn(condukt.Server)
        far = Far(1)
        remote = FakeRemote({1: target})
        lowlevel.set_remote_processes(node, remote)
        watcher = await node.spawn(Watcher, far, True)
        assert remote.watches == {} and remote.links == []
        await target.stop("bye")  # the Down and the Exit are in the watcher's mailbox before the call
        # The Down carries the reference it was given; the exit signal comes from the local process.
        assert await watcher.call("got") == [("Down", far, "bye", True), ("Exit", target, "bye", False)]


async def test_on_exit_calls_back_once_and_can_be_removed() -> None:
    async with condukt.open_node() as node:
        seen: list[Any] = []
        first = await node.spawn(condukt.Server)
        second = await node.spawn(condukt.Server)
        lowlevel.on_exit(first, seen.append)
        remove = lowlevel.on_exit(second, seen.append)
        remove()
        await first.stop("one")
        await second.stop("two")
        lowlevel.on_exit(first, seen.append)  # already gone: at once
        assert seen == ["one", "noproc"]


async def test_a_plain_node_raises_type_error_for_anything_but_a_handle() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match=r"node.monitor\(\) takes a condukt.Handle, got Far"):
            node.monitor(Far(1))
