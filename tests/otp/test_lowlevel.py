"""condukt.otp.lowlevel and the behaviour hooks: what a behaviour built on Server relies on."""

from __future__ import annotations

import gc
import weakref
from typing import Any

import outcome
import pytest
import trio

import condukt
from condukt.otp import lowlevel
from condukt.otp.lowlevel import Process, call_with_callback, process_of, send_system, server_of, start_call

from .servers import Boom, settle


def test_the_lowlevel_names_are_pinned() -> None:
    assert sorted(lowlevel.__all__) == [
        "Process", "RemoteHandle", "RemoteProcesses", "Spawnable", "call_with_callback", "exit_signal", "on_exit",
        "process_of", "run_default_node", "send_system", "server_of", "set_activator", "set_handle_reducer",
        "set_remote_processes",
        "start_call",
    ]
    assert "Process" not in condukt.otp.__all__  # extension points stay out of the main API


class TagHandle(condukt.Handle):
    __slots__ = ()

    async def tag(self) -> str:
        result: str = await self.call("tag")
        return result


class Tagged(condukt.Server):
    """A minimal behaviour: boot wraps the user's init, the handle adds a method."""

    handle_class = TagHandle

    async def boot(self, *args: Any, **kwargs: Any) -> None:
        self.booted = ["boot"]
        await self.init(*args, **kwargs)
        self.booted.append("after init")

    async def init(self, tag: str = "t", *, fail: BaseException | None = None) -> None:
        if fail is not None:
            raise fail
        self.tag = tag
        self.booted.append("init")

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        if request == "tag":
            return self.tag
        if request == "booted":
            return self.booted
        return await super().handle_call(request, caller)


async def test_boot_runs_in_place_of_init_and_handle_class_is_returned() -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Tagged, "x", name="tagged")
        assert type(h) is TagHandle
        assert await h.tag() == "x"
        assert await h.call("booted") == ["boot", "init", "after init"]
        assert node.whereis("tagged", TagHandle) is h


async def test_a_failing_boot_fails_the_start_and_leaves_nothing() -> None:
    error = Boom("bad option")
    async with condukt.open_node() as node:
        with pytest.raises(Boom) as info:
            await node.spawn(Tagged, fail=error, name="tagged")
        assert info.value is error
        assert node.process_count == 0 and node.whereis("tagged") is None


async def test_handle_class_holds_under_both_supervisors_and_across_restarts(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        sup = await node.start_supervisor([condukt.ChildSpec("a", Tagged, args=("a",), name="a")])
        first = node.whereis("a", TagHandle)
        assert first is not None
        first.kill()
        await settle()
        second = node.whereis("a", TagHandle)
        assert second is not None and second is not first and await second.tag() == "a"
        assert type(await sup.start_child(condukt.ChildSpec("b", Tagged))) is TagHandle
        dyn = await node.start_dynamic_supervisor()
        child = await dyn.start_child(condukt.ChildSpec(None, Tagged, args=("d",)))
        assert type(child) is TagHandle and await child.tag() == "d"


async def test_whereis_with_a_handle_class_checks_it() -> None:
    async with condukt.open_node() as node:
        assert node.whereis("nobody", TagHandle) is None
        plain = await node.spawn(condukt.Server, name="plain")
        assert node.whereis("plain", condukt.Handle) is plain
        with pytest.raises(TypeError, match="not a TagHandle"):
            node.whereis("plain", TagHandle)


class Cleanup(condukt.Server):
    async def init(self, log: list[Any], needed: bool) -> None:
        self.log, self.needed = log, needed

    def needs_terminate(self) -> bool:
        return self.needed

    async def terminate(self, reason: condukt.ExitReason) -> None:
        self.log.append(reason)


async def test_needs_terminate_decides_whether_terminate_runs() -> None:
    log: list[Any] = []
    async with condukt.open_node() as node:
        skipped = await node.spawn(Cleanup, log, False)
        await skipped.stop()
        assert log == []
        ran = await node.spawn(Cleanup, log, True)
        await ran.stop("shutdown")
        assert log == ["shutdown"]


class Inbox(condukt.Server):
    async def init(self, gate: trio.Event) -> None:
        self.gate = gate
        self.seen: list[Any] = []

    async def handle_cast(self, message: Any) -> None:
        await self.gate.wait()
        self.seen.append(message)

    async def handle_info(self, message: Any) -> None:
        self.seen.append(("info", message))

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return self.seen


async def test_send_system_goes_past_a_full_mailbox_in_order() -> None:
    gate = trio.Event()
    async with condukt.open_node() as node:
        h = await node.spawn(Inbox, gate, mailbox_size=2)
        for n in range(3):  # one being handled, two waiting: full
            h.cast_nowait(n)
            await trio.testing.wait_all_tasks_blocked()
        with pytest.raises(condukt.MailboxFull):
            h.send_nowait("refused")
        send_system(h, "notice")
        gate.set()
        assert await h.call("seen") == [0, 1, 2, ("info", "notice")]
        await h.stop()
        send_system(h, "to the dead")  # dropped, no error


class Answers(condukt.Server):
    """Replies at once, later (deferred), with an error, or never; crashes on "crash"."""

    async def init(self) -> None:
        self.held: list[condukt.Caller] = []
        self.seen: list[Any] = []

    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        self.seen.append(request)
        if request == "hold":
            self.held.append(caller)
            return condukt.NO_REPLY
        if request == "release":
            for held in self.held:
                held.reply("released")
            return "ok"
        if request == "refuse":
            caller.reply_error(ValueError("refused"))
            return condukt.NO_REPLY
        if request == "crash":
            raise Boom("crash")
        return ("echo", request)


async def test_call_with_callback_delivers_each_answer_once_without_a_waiting_task(autojump_clock: Any) -> None:
    got: list[outcome.Outcome[Any]] = []
    async with condukt.open_node() as node:
        h = await node.spawn(Answers)
        assert call_with_callback(h, "hi", 5, got.append) is not None
        call_with_callback(h, "refuse", 5, got.append)
        call_with_callback(h, "hold", None, got.append)
        await settle()
        assert got[0] == outcome.Value(("echo", "hi"))
        assert isinstance(got[1], outcome.Error) and str(got[1].error) == "refused"
        assert len(got) == 2  # the held call waits, with no timeout
        assert await h.call("release") == "ok"
        assert got[2] == outcome.Value("released")

        # A timeout is an error delivered at the deadline; a late reply is dropped.
        call_with_callback(h, "hold", 1.5, got.append)
        await trio.sleep(2)
        assert isinstance(got[3], outcome.Error) and isinstance(got[3].error, condukt.CallTimeout)
        await h.call("release")
        assert len(got) == 4

        # Withdrawn before the server got to it: skipped, and nothing is delivered.
        withdraw = call_with_callback(h, "withdrawn", 5, got.append)
        assert withdraw is not None
        withdraw()
        assert await h.call("after") == ("echo", "after")
        assert "withdrawn" not in server_of(h).seen  # type: ignore[union-attr]
        assert len(got) == 4

        # The process exits before replying: CallError; a dead process raises NoProc at once.
        call_with_callback(h, "hold", None, got.append)
        call_with_callback(h, "crash", None, got.append)
        await h.wait()
        assert all(isinstance(answer, outcome.Error) for answer in got[4:]) and len(got) == 6
        assert isinstance(got[4].error, condukt.CallError)  # type: ignore[union-attr]
        with pytest.raises(condukt.NoProc):
            call_with_callback(h, "late", None, got.append)


async def test_call_with_callback_sends_nothing_into_a_full_mailbox() -> None:
    gate = trio.Event()
    async with condukt.open_node() as node:
        h = await node.spawn(Inbox, gate, mailbox_size=2)
        for n in range(3):  # one being handled, two waiting: full
            h.cast_nowait(n)
            await trio.testing.wait_all_tasks_blocked()
        got: list[outcome.Outcome[Any]] = []
        assert call_with_callback(h, "seen", None, got.append) is None
        gate.set()
        assert await h.call("seen") == [0, 1, 2]
        assert got == []


async def test_start_call_answers_as_call_does(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Answers)
        assert await start_call(h, "hi", 5) == ("echo", "hi")
        with pytest.raises(ValueError, match="refused"):
            await start_call(h, "refuse", None)
        with pytest.raises(condukt.CallTimeout):
            await start_call(h, "hold", 1.5)

        # Cancelled while waiting: withdrawn, a later reply is dropped.
        with trio.move_on_after(1) as scope:
            await start_call(h, "hold", None)
        assert scope.cancelled_caught
        assert await start_call(h, "release", 5) == "ok"

        # The process exits before replying: CallError; then NoProc.
        async with trio.open_nursery() as nursery:

            async def crash_soon() -> None:
                await trio.sleep(1)
                h.cast_nowait("x")  # Answers has no handle_cast: it crashes

            nursery.start_soon(crash_soon)
            with pytest.raises(condukt.CallError):
                await start_call(h, "hold", None)
        with pytest.raises(condukt.NoProc):
            await start_call(h, "late", None)


async def test_start_call_waits_for_room_and_refuses_a_self_call() -> None:
    gate = trio.Event()
    async with condukt.open_node() as node:
        h = await node.spawn(Inbox, gate, mailbox_size=2)
        for n in range(3):  # one being handled, two waiting: full
            h.cast_nowait(n)
            await trio.testing.wait_all_tasks_blocked()
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                assert await start_call(h, "seen", 5) == [0, 1, 2]

            nursery.start_soon(ask)
            await trio.testing.wait_all_tasks_blocked()
            gate.set()  # the full mailbox drains: the call goes in and is answered

        selfish = await node.spawn(CallsItself)
        with pytest.raises(condukt.CallError) as info:
            await selfish.call("go")
        assert isinstance(info.value.reason, condukt.CallingSelf)


class CallsItself(condukt.Server):
    async def handle_call(self, request: Any, caller: condukt.Caller) -> Any:
        return await start_call(self.handle, "again", 5)


async def test_process_of_exposes_the_incarnation_until_it_exits() -> None:
    gate = trio.Event()
    async with condukt.open_node() as node:
        h = await node.spawn(Inbox, gate)
        process = process_of(h)
        assert isinstance(process, Process)
        assert process.handle is h and process.server is server_of(h) and isinstance(process.server, Inbox)
        assert process.alive and not process.stopping and process.mailbox_length == 0
        h.cast_nowait("a")
        h.cast_nowait("b")
        await trio.testing.wait_all_tasks_blocked()
        assert process.mailbox_length == 1  # "a" is being handled
        h.kill()
        assert process.stopping and h.alive  # asked to exit; its task has not run yet
        await h.wait()
        assert process_of(h) is None and server_of(h) is None
        assert not process.alive and not process.stopping and process.server is None
        assert repr(process).startswith("<Process of <Handle #")


async def test_a_dead_handle_keeps_no_process_state() -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Tagged)
        server = server_of(h)
        assert server is not None and any(isinstance(r, Process) for r in gc.get_referents(h))
        server_ref = weakref.ref(server)
        del server
        await h.stop()
        gc.collect()
        assert server_ref() is None
        assert not any(isinstance(r, (Process, condukt.Server)) for r in gc.get_referents(h))
        assert not h.alive and h.exit_reason == "normal"
        assert repr(h).endswith("Tagged dead: 'normal'>")


def test_handle_slots_are_identity_only() -> None:
    # A handle names its process; the state lives on Process (see _process.py).
    slots = set(condukt.Handle.__slots__)
    assert slots == {"__weakref__", "_cls", "_exit_reason", "_name", "_node", "_pid", "_process"}
    assert TagHandle.__slots__ == ()


def test_child_spec_is_generic_at_run_time() -> None:
    spec = condukt.ChildSpec[TagHandle](None, Tagged)
    assert spec.start is Tagged and isinstance(spec, condukt.ChildSpec)


class _Named:
    """What a test reducer rebuilds a handle as: the id it pickled."""

    def __init__(self, pid: int) -> None:
        self.pid = pid


async def test_handles_pickle_only_where_the_node_exports_them() -> None:
    import pickle

    async with condukt.open_node() as node:
        handle = await node.spawn(condukt.Server)
        with pytest.raises(TypeError, match="does not export handles"):
            pickle.dumps(handle)
        lowlevel.set_handle_reducer(node, lambda h: (_Named, (h.id,)))
        restored = pickle.loads(pickle.dumps(condukt.Down(handle, "normal")))
        assert isinstance(restored.handle, _Named) and restored.handle.pid == handle.id
        lowlevel.set_handle_reducer(node, None)
        with pytest.raises(TypeError):
            pickle.dumps(handle)


_WHO = __import__("contextvars").ContextVar("who", default="nobody")


class AtOnce(condukt.Server):
    """Answers "now" and "later" in ``handle_call_now`` when idle; everything also through ``handle_call``."""

    async def init(self) -> None:
        self.seen: list[tuple[str, str, bool]] = []  # (how, request, in the process's context)
        self.held: list[Any] = []

    def handle_call_now(self, request: Any, caller: Any) -> Any:
        self.seen.append(("now", request, _WHO.get() == "the process"))
        if request == "now":
            return ("now", trio.lowlevel.current_task().name)
        if request == "later":
            self.held.append(caller)
            return condukt.NO_REPLY
        if request == "crash":
            raise Boom("in handle_call_now")
        return NotImplemented

    async def handle_call(self, request: Any, caller: Any) -> Any:
        self.seen.append(("mailbox", request, _WHO.get() == "the process"))
        if request == "mark":  # in the process's own task: its context
            _WHO.set("the process")
            return "marked"
        if request == "release":
            for held in self.held:
                held.reply("released")
            return "ok"
        if request == "seen":
            return list(self.seen)
        return ("mailbox", request)

    async def handle_cast(self, message: Any) -> None:
        self.seen.append(("cast", message, True))


async def test_an_idle_process_answers_in_the_calling_task_through_handle_call_now(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(AtOnce)
        assert await h.call("mark") == "marked"
        _WHO.set("the caller")
        me = trio.lowlevel.current_task().name
        assert await start_call(h, "now", 5) == ("now", me)  # the caller's task, the process's context
        assert await h.call("other") == ("mailbox", "other")  # declined (and Handle.call always queues)
        assert await start_call(h, "other", 5) == ("mailbox", "other")  # declined: through the mailbox

        # Deferred: the reply comes later, from another call; a timeout still applies.
        async with trio.open_nursery() as nursery:
            got: list[Any] = []

            async def wait_later() -> None:
                got.append(await start_call(h, "later", 5))

            nursery.start_soon(wait_later)
            await settle()
            assert await h.call("release") == "ok"
        assert got == ["released"]
        with pytest.raises(condukt.CallTimeout):
            await start_call(h, "later", 1)

        # Busy (a message queued before the call): the call waits its turn in the mailbox, in order.
        h.cast_nowait("first")
        assert await start_call(h, "now", 5) == ("mailbox", "now")
        seen = await h.call("seen")
        assert ("cast", "first", True) in seen
        assert seen.index(("cast", "first", True)) < seen.index(("mailbox", "now", True))
        assert all(in_process_context for how, request, in_process_context in seen if request != "mark")

        # The callback form takes the same path.
        answers: list[Any] = []
        await settle()
        assert call_with_callback(h, "now", None, answers.append) is not None
        assert answers == [outcome.Value(("now", me))]


async def test_a_crash_in_handle_call_now_crashes_the_process_and_the_caller_gets_call_error() -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(AtOnce)
        await settle()  # idle
        with pytest.raises(condukt.CallError):
            await start_call(h, "crash", 5)
        reason = await h.wait()
        assert isinstance(reason, Boom) and str(reason) == "in handle_call_now"


class Reentrant(condukt.Server):
    """Its handle_call_now calls its own process with a callback: that call must wait in the mailbox."""

    async def init(self) -> None:
        self.order: list[str] = []
        self.inner: list[Any] = []

    def handle_call_now(self, request: Any, caller: Any) -> Any:
        if request == "outer":
            self.order.append("outer starts")
            call_with_callback(self.handle, "inner", None, self.inner.append)
            self.order.append("outer ends")
            return "outer"
        return NotImplemented

    async def handle_call(self, request: Any, caller: Any) -> Any:
        self.order.append(request)
        return list(self.order) if request == "order" else request


async def test_a_call_made_from_inside_handle_call_now_waits_in_the_mailbox() -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Reentrant)
        await settle()
        assert await start_call(h, "outer", 5) == "outer"
        assert await h.call("order") == ["outer starts", "outer ends", "inner", "order"]


class Hosting(condukt.Server):
    """Hosts "work" in its caller's task (``Caller.host``): it sleeps until released, then replies."""

    async def init(self) -> None:
        self.log: list[Any] = []
        self.release = trio.Event()
        self.can_host: list[bool] = []

    def handle_call_now(self, request: Any, caller: Any) -> Any:
        self.can_host.append(caller.can_host)
        if request == "work" and caller.can_host:
            caller.host(lambda: self._work(caller), lambda: self.log.append("cancel asked"))
            return condukt.NO_REPLY
        if request == "boom" and caller.can_host:
            caller.host(self._boom, lambda: None)
            return condukt.NO_REPLY
        return NotImplemented

    async def _work(self, caller: Any) -> None:
        process = process_of(self.handle)
        assert process is not None
        self.log.append(("work starts", trio.lowlevel.current_task().name, _WHO.get()))
        try:
            with trio.CancelScope() as scope:
                self.scope = scope
                await self.release.wait()
        except trio.Cancelled:
            self.log.append(("caller cancelled", process.exiting))
            raise
        if scope.cancelled_caught:
            self.log.append(("stopped by the process", process.exiting))
            return
        caller.reply("done")

    async def _boom(self) -> None:
        await trio.lowlevel.checkpoint()
        raise Boom("in hosted work")

    async def handle_call(self, request: Any, caller: Any) -> Any:
        if request == "mark":
            _WHO.set("the process")
            return "marked"
        if request == "work":
            with pytest.raises(RuntimeError, match="cannot host"):
                caller.host(self._boom, lambda: None)
            return "through the mailbox"
        return request

    async def terminate(self, reason: Any) -> None:
        self.log.append(("terminate", reason))


class _CancelsScope(Hosting):
    """Its ``cancel`` cancels the work's scope, as a behaviour's must."""

    def handle_call_now(self, request: Any, caller: Any) -> Any:
        if request == "work" and caller.can_host:
            def cancel() -> None:
                self.log.append("cancel asked")
                self.scope.cancel()

            caller.host(lambda: self._work(caller), cancel)
            return condukt.NO_REPLY
        return super().handle_call_now(request, caller)


async def test_hosted_work_runs_in_the_callers_task_with_the_process_context(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Hosting)
        assert await h.call("mark") == "marked"
        server = server_of(h)
        assert isinstance(server, Hosting)
        _WHO.set("the caller")
        server.release.set()
        assert await start_call(h, "work", None) == "done"
        me = trio.lowlevel.current_task().name
        assert server.log == [("work starts", me, "the process")]
        assert _WHO.get() == "the caller"  # the work's context is the process's (a copy), not the caller's

        # Only for a task that waits without a timeout, in handle_call_now: else through the mailbox.
        assert await start_call(h, "work", 5) == "through the mailbox"
        assert await h.call("work") == "through the mailbox"  # handle_call: host() raises
        answers: list[Any] = []
        await settle()
        call_with_callback(h, "work", None, answers.append)
        await settle()
        assert answers == [outcome.Value("through the mailbox")]
        assert server.can_host == [True, False, False]


async def test_a_cancelled_caller_cancels_its_hosted_work_and_the_process_serves_on(autojump_clock: Any) -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Hosting)
        await settle()
        server = server_of(h)
        assert isinstance(server, Hosting)
        with trio.move_on_after(1) as scope:
            await start_call(h, "work", None)
        assert scope.cancelled_caught
        assert server.log[-1] == ("caller cancelled", False)  # its caller's cancellation, not the process's
        assert await h.call("ping") == "ping"
        server.release.set()
        assert await start_call(h, "work", None) == "done"


async def test_a_process_that_exits_cancels_its_hosted_work_and_waits_for_it_before_terminate(
    autojump_clock: Any,
) -> None:
    async with condukt.open_node() as node:
        for how in ("stop", "kill"):
            h = await node.spawn(_CancelsScope)
            await settle()
            server = server_of(h)
            assert isinstance(server, Hosting)
            async with trio.open_nursery() as nursery:
                errors: list[BaseException] = []

                async def caller(h: condukt.Handle, errors: list[BaseException]) -> None:
                    try:
                        await start_call(h, "work", None)
                    except condukt.CallError as exc:
                        errors.append(exc)

                nursery.start_soon(caller, h, errors)
                await settle()
                if how == "stop":
                    await h.stop("shutdown")
                else:
                    h.kill()
                    await h.wait()
            assert len(errors) == 1  # the caller learns the process exited
            expected = ["cancel asked", ("stopped by the process", True)]
            if how == "stop":
                expected.append(("terminate", "shutdown"))  # after the work ended
            assert server.log[1:] == expected


async def test_an_exception_in_hosted_work_crashes_the_process() -> None:
    async with condukt.open_node() as node:
        h = await node.spawn(Hosting)
        await settle()
        with pytest.raises(condukt.CallError):
            await start_call(h, "boom", None)
        reason = await h.wait()
        assert isinstance(reason, Boom) and str(reason) == "in hosted work"


class NodeAware(condukt.Server):
    def handle_call_now(self, request: Any, caller: Any) -> Any:
        return (trio.lowlevel.current_task().name, condukt.otp.current_node(), _WHO.get())


async def test_a_process_takes_calls_at_once_before_its_task_first_runs() -> None:
    """Right after spawn (its task not started yet): in the caller's task, with the context the process starts with."""
    async with condukt.open_node() as node, condukt.open_node() as other:
        _WHO.set("spawner")
        h = await node.spawn(NodeAware)
        _WHO.set("caller")
        me = trio.lowlevel.current_task().name
        assert condukt.otp.current_node() is other  # the caller's node is another one
        assert await start_call(h, "where", 5) == (me, node, "spawner")
        await settle()  # its task ran and parked
        assert await start_call(h, "where", 5) == (me, node, "spawner")
