"""Links (with and without trap_exits) and monitors (from a server and from outside)."""

from __future__ import annotations

from typing import Any

import pytest

import condukt

from .servers import Boom, Log, Worker, events, settle


class Linker(Worker):
    """A worker that links to / monitors other processes on request."""

    async def init(self, log: Log, tag: Any, *, trap: bool = False) -> None:
        await super().init(log, tag)
        self.trap_exits = trap

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        match request:
            case ("link", other):
                self.link(other)
                return None
            case ("unlink", other):
                self.unlink(other)
                return None
            case ("monitor", other):
                return self.monitor(other)
            case ("demonitor", ref):
                self.demonitor(ref)
                return None
        return await super().handle_call(request, caller)


def infos(log: Log, tag: Any) -> list[Any]:
    return [message for t, message in events(log, "info") if t == tag]


# --------------------------------------------------------------------------- links


async def test_abnormal_exit_kills_the_linked_process_with_the_same_reason(
    autojump_clock: Any,
) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await b.cast(("crash", error))
        assert await a.wait() is error
        assert events(log, "terminate") == [("b", error), ("a", error)]


async def test_links_are_bidirectional(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await a.cast(("crash", error))
        assert await b.wait() is error


@pytest.mark.parametrize("reason", ["shutdown", "custom"])
async def test_non_normal_stop_reasons_propagate_over_links(reason: str, autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await b.stop(reason)
        assert await a.wait() == reason
        assert events(log, "terminate") == [("b", reason), ("a", reason)]


async def test_normal_exit_does_not_kill_the_linked_process(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await b.call(("stop", "normal"))
        await b.wait()
        await settle()
        assert a.alive
        assert await a.call("ping") == ("pong", "a")


async def test_trap_exits_turns_the_exit_signal_into_a_message(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a", trap=True)
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await b.cast(("crash", error))
        await b.wait()
        await settle()
        assert a.alive
        assert infos(log, "a") == [condukt.Exit(b, error)]


async def test_trap_exits_receives_a_normal_exit_and_lives(autojump_clock: Any) -> None:
    # As in OTP: a trapping process gets {'EXIT', Pid, normal} and is not killed.
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a", trap=True)
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await b.stop("normal")
        await settle()
        assert a.alive
        assert infos(log, "a") == [condukt.Exit(b, "normal")]


async def test_unlink_stops_propagation(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        await a.call(("unlink", b))
        await b.cast(("crash", Boom()))
        await b.wait()
        await settle()
        assert a.alive


async def test_linking_to_a_dead_process_is_an_exit_signal_noproc(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        trapper = await node.spawn(Linker, log, "t", trap=True)
        b = await node.spawn(Worker, log, "b")
        await b.stop()
        await trapper.call(("link", b))
        await settle()
        assert infos(log, "t") == [condukt.Exit(b, "noproc")]
        await a.call(("link", b))
        assert await a.wait() == "noproc"


async def test_a_killed_process_kills_its_links(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await a.call(("link", b))
        b.kill()
        assert await a.wait() == "killed"
        # The linked process was stopped, not killed: its terminate ran.
        assert events(log, "terminate") == [("a", "killed")]


# --------------------------------------------------------------------------- monitors


async def test_server_monitor_delivers_down_on_exit(autojump_clock: Any) -> None:
    log: Log = []
    error = Boom("x")
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        ref = await a.call(("monitor", b))
        assert isinstance(ref, condukt.otp.MonitorRef) and ref.target is b
        await b.cast(("crash", error))
        await b.wait()
        await settle()
        [down] = infos(log, "a")
        assert isinstance(down, condukt.Down)
        assert down.handle is b and down.reason is error and down.ref is ref
        assert a.alive  # a monitor never kills the watcher


async def test_server_monitor_of_a_dead_process_is_down_noproc(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        await b.stop()
        ref = await a.call(("monitor", b))
        await settle()
        assert infos(log, "a") == [condukt.Down(b, "noproc", ref)]


async def test_each_monitor_gets_its_own_down(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        ref1 = await a.call(("monitor", b))
        ref2 = await a.call(("monitor", b))
        await b.stop("normal")
        await settle()
        assert infos(log, "a") == [condukt.Down(b, "normal", ref1), condukt.Down(b, "normal", ref2)]


async def test_demonitor_prevents_the_down(autojump_clock: Any) -> None:
    log: Log = []
    async with condukt.open_node() as node:
        a = await node.spawn(Linker, log, "a")
        b = await node.spawn(Worker, log, "b")
        ref = await a.call(("monitor", b))
        await a.call(("demonitor", ref))
        await b.stop()
        await settle()
        assert infos(log, "a") == []


async def test_node_monitor_of_a_live_process(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        async with node.monitor(h) as m:
            assert m.down is None
            await h.stop("bye")
            down = await m.wait()
        assert down.handle is h and down.reason == "bye"
        assert m.down is down


async def test_node_monitor_of_a_crash(autojump_clock: Any) -> None:
    error = Boom("x")
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        async with node.monitor(h) as m:
            await h.cast(("crash", error))
            down = await m.wait()
        assert down.reason is error


async def test_node_monitor_of_a_dead_process_is_down_noproc(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        await h.stop()
        async with node.monitor(h) as m:
            assert m.down is not None
            down = await m.wait()
        assert (down.handle, down.reason) == (h, "noproc")


async def test_monitor_does_not_outlive_its_block(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Worker)
        async with node.monitor(h) as m:
            pass
        await h.stop()
        assert m.down is None
