"""Location transparency: the plain monitor and link APIs take a ClusterHandle on a cluster node."""

from __future__ import annotations

import os
import signal
from typing import Any

import pytest
import trio

import condukt
import condukt.ray

pytestmark = pytest.mark.usefixtures("local_ray")


class Target(condukt.Server):
    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "crash":
            raise RuntimeError("asked to crash")
        return request


class Watcher(condukt.Server):
    """Monitors and links ``target`` with the plain APIs; reports what ``handle_info`` got."""

    async def init(self, target: Any, *, trap: bool = True, link: bool = True) -> None:
        self.trap_exits = trap
        self.target = target
        self.ref = self.monitor(target)
        if link:
            self.link(target)
        self.seen: list[tuple[str, Any, Any, bool]] = []
        self.waiting: list[tuple[int, condukt.Caller]] = []

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if isinstance(request, tuple) and request[0] == "wait for":
            if len(self.seen) >= request[1]:
                return self.seen
            self.waiting.append((request[1], caller))
            return condukt.NO_REPLY
        if request == "demonitor and unlink":
            self.demonitor(self.ref)
            self.unlink(self.target)
            return True
        if request == "crash":
            raise RuntimeError("the watcher crashed")
        return self.seen

    async def handle_info(self, message: Any) -> None:
        if isinstance(message, condukt.Down):
            self.seen.append(("down", message.handle, message.reason, message.ref is self.ref))
        elif isinstance(message, condukt.Exit):
            self.seen.append(("exit", message.handle, message.reason, False))
        for count, caller in list(self.waiting):
            if len(self.seen) >= count:
                caller.reply(self.seen)
                self.waiting.remove((count, caller))


class Outsider(condukt.Server):
    """Runs ``node.monitor`` (code outside a process's own monitors) on a node of the cluster."""

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        async with self.node.monitor(request) as monitor:
            down = await monitor.wait()
        return (down.handle, down.reason)


async def test_a_server_monitoring_and_linking_a_remote_process_gets_noconnection_when_its_node_is_killed() -> None:
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        a, b = await cluster.nodes()
        target = await cluster.spawn(Target, node=b.id)
        watcher = await cluster.spawn(Watcher, target, node=a.id)
        follower = await cluster.spawn(Watcher, target, trap=False, node=a.id)  # linked, not trapping: dies too
        outsider = await cluster.spawn(Outsider, node=a.id)
        assert await watcher.call("seen") == []

        async with trio.open_nursery() as nursery:
            outside: list[Any] = []

            async def watch_from_outside() -> None:
                outside.append(await outsider.call(target, timeout=60))

            nursery.start_soon(watch_from_outside)
            async with cluster.monitor(follower) as follower_down:
                os.kill(b.pid, signal.SIGKILL)
                with trio.fail_after(60):
                    seen = await watcher.call(("wait for", 2), timeout=60)
                    assert (await follower_down.wait()).reason == "noconnection"
        assert sorted(seen) == [("down", target, "noconnection", True), ("exit", target, "noconnection", False)]
        assert outside == [(target, "noconnection")]


async def test_remote_monitors_and_links_carry_exit_reasons_both_ways_and_can_be_removed() -> None:
    async with condukt.ray.open_cluster(nodes=2) as cluster:
        a, b = await cluster.nodes()

        # The remote process exits: the Down and the Exit carry its reason and its ClusterHandle.
        target = await cluster.spawn(Target, node=b.id)
        watcher = await cluster.spawn(Watcher, target, node=a.id)
        await target.stop("done")
        with trio.fail_after(30):
            assert sorted(await watcher.call(("wait for", 2), timeout=30)) == [
                ("down", target, "done", True),
                ("exit", target, "done", False),
            ]

        # The link works the other way too: the watcher crashing takes the remote process down.
        target = await cluster.spawn(Target, node=b.id)
        crasher = await cluster.spawn(Watcher, target, node=a.id)
        async with cluster.monitor(target) as target_down:
            with pytest.raises(condukt.CallError):
                await crasher.call("crash")
            with trio.fail_after(30):
                down = await target_down.wait()
        assert isinstance(down.reason, condukt.ray.RemoteError | RuntimeError)
        assert "the watcher crashed" in str(down.reason)

        # Demonitored and unlinked: the remote exit reaches nobody, and the watcher lives on.
        target = await cluster.spawn(Target, node=b.id)
        quiet = await cluster.spawn(Watcher, target, trap=False, node=a.id)
        assert await quiet.call("demonitor and unlink")
        witness = await cluster.spawn(Watcher, target, link=False, node=a.id)  # watching the same exit
        with pytest.raises(condukt.CallError):
            await target.call("crash")
        with trio.fail_after(30):
            [(_, _, reason, _)] = await witness.call(("wait for", 1), timeout=30)
        assert "asked to crash" in str(reason)
        assert await quiet.call("seen") == []  # no Down, and no exit signal killed it

        # A ClusterHandle of a process on the watcher's own node is monitored locally, and the Down carries it.
        neighbour = await cluster.spawn(Target, node=a.id)
        local_watcher = await cluster.spawn(Watcher, neighbour, node=a.id)
        await neighbour.stop("bye")
        with trio.fail_after(30):
            assert sorted(await local_watcher.call(("wait for", 2), timeout=30)) == [
                ("down", neighbour, "bye", True),
                ("exit", neighbour, "bye", False),
            ]

        # A monitor that reaches the node after the exit still gets the reason; an unknown process is "noproc".
        late = await cluster.spawn(Watcher, target, link=False, node=a.id)
        with trio.fail_after(30):
            [(_, _, reason, _)] = await late.call(("wait for", 1), timeout=30)
        assert "asked to crash" in str(reason)
        never = condukt.ray.ClusterHandle(b.id, 10_000)
        unknown = await cluster.spawn(Watcher, never, link=False, node=a.id)
        with trio.fail_after(30):
            assert await unknown.call(("wait for", 1), timeout=30) == [("down", never, "noproc", True)]


class PlainMonitor(condukt.Server):
    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        what, other = request
        if what == "monitor":
            self.monitor(other)
        elif what == "link":
            self.link(other)
        return None


async def test_a_plain_node_refuses_a_cluster_handle_with_a_type_error_saying_what_to_use() -> None:
    handle = condukt.ray.ClusterHandle("elsewhere", 7)
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match=r"node.monitor\(\) takes a condukt.Handle, got ClusterHandle.*cluster"):
            node.monitor(handle)
        server = await node.spawn(PlainMonitor)
        for what in ("monitor", "link"):
            with pytest.raises(condukt.CallError) as failed:
                await server.call((what, handle))
            assert isinstance(failed.value.reason, TypeError)
            assert f"Server.{what}() takes a condukt.Handle" in str(failed.value.reason)
            assert "condukt.ray.ClusterHandle is accepted on the nodes of a condukt.ray cluster" in str(
                failed.value.reason
            )
            server = await node.spawn(PlainMonitor)
