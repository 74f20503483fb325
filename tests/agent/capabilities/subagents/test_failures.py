"""Failures: a crashing child, an aborted parent, a dead parent. No orphans, ever."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
import trio
import trio.testing
from waiting import Watched, open_fifo

import condukt
from condukt.testing import FunctionModel, ScriptedModel, call, reply

from ...helpers import Recorder, assert_consistent, tool_results
from .helpers import Probe, delegate, run_failing, spawn_parent, stuck_roles


def crashing(request: condukt.ModelRequest) -> Any:
    raise RuntimeError("child model adapter bug")


async def test_a_crashing_child_is_an_error_result_and_the_parent_finishes(
    autojump_clock: trio.abc.Clock,
) -> None:
    probe: list[Any] = []
    roles = {
        "crasher": (Probe, {"probe": probe, "model": FunctionModel(crashing)}),
        "failer": condukt.Subagent(model=ScriptedModel([])),  # a ModelError: the run fails, the child lives
        "fine": condukt.Subagent(model=ScriptedModel([reply("fine done")])),
    }
    model = delegate(("crasher", "a"), ("failer", "b"), ("fine", "c"), then="recovered")
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, model, roles)
        assert await parent.run("Go") == "recovered"
        assert parent.alive
        assert node.process_count == 2
        ((child, _),) = probe
        assert isinstance(child.exit_reason, RuntimeError)
    crashed, failed, fine = tool_results(model.requests[1])
    assert (
        crashed.is_error and "'crasher' crashed" in crashed.text and "child model adapter bug" in crashed.text
    )
    assert failed.is_error and "'failer' failed" in failed.text
    assert not fine.is_error and fine.text == "fine done"


async def test_parent_abort_kills_running_children_and_their_subprocesses(
    tmp_path: Path, process_gone: Callable[[int], bool]
) -> None:
    # Real time: the child runs a real subprocess.
    pid_file = tmp_path / "pid"
    probe: list[Any] = []
    command = f"echo $$ > {pid_file} && exec sleep 600"
    child_model = ScriptedModel([call("bash", {"command": command}), reply("never")])
    roles = {"shell": (Probe, {"probe": probe, "model": child_model, "tools": [condukt.tools.Bash]})}
    model = delegate(("shell", "Run the long job."))
    async with condukt.open_node() as node, open_fifo(pid_file) as pids:
        parent = await spawn_parent(node, model, roles)
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_failing, parent, condukt.Aborted, failures)
            pid = int(await pids.receive_line())
            assert await parent.abort() is True
        assert len(failures) == 1
        assert process_gone(pid)
        ((child, _),) = probe
        assert not child.alive
        assert parent.alive
        assert node.process_count == 2
        assert_consistent(await parent.history())
    assert len(model.requests) == 1  # the parent never saw a result


async def test_a_restarted_parent_leaves_no_child_of_its_dead_incarnation(
    autojump_clock: trio.abc.Clock,
) -> None:
    probe: Watched[Any] = Watched()
    leads: Watched[condukt.AgentHandle] = Watched()
    roles = stuck_roles(probe, "a", "b")
    model = delegate(("a", "x"), ("b", "y"))
    async with condukt.open_node() as node:
        spec = condukt.ChildSpec(
            "lead",
            Recorder,
            kwargs={"model": model, "subagents": roles, "load_project_instructions": False, "incarnations": leads},
            name="lead",
        )
        await node.start_supervisor([spec], name="app")
        first = node.whereis("lead")
        assert isinstance(first, condukt.AgentHandle)
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_failing, first, condukt.CallError, failures)
            await probe.wait_for_length(2)
            assert all(h.alive for h, _ in probe)
            assert node.process_count == 5  # supervisor, parent, sub-agent supervisor, two children
            await first.cast("crash: not a message an agent handles")
            _, second = await leads.wait_for_length(2)
            assert node.whereis("lead") is second
        assert len(failures) == 1
        assert not first.alive
        assert not any(handle.alive for handle, _ in probe)
        await trio.testing.wait_all_tasks_blocked()  # every exit the crash set off is done (virtual time)
        assert node.process_count == 2  # the supervisor and the new parent
        await trio.sleep(1)
        assert node.process_count == 2


async def test_a_killed_parent_takes_its_children_along(autojump_clock: trio.abc.Clock) -> None:
    probe: Watched[Any] = Watched()
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, delegate(("a", "x")), stuck_roles(probe, "a"))
        failures: list[BaseException] = []
        async with trio.open_nursery() as nursery:
            nursery.start_soon(run_failing, parent, condukt.CallError, failures)
            await probe.wait_for_length(1)
            assert probe[0][0].alive
            parent.kill()
        assert len(failures) == 1
        await trio.testing.wait_all_tasks_blocked()  # the kill's exits are done (virtual time)
        assert node.process_count == 0
        assert not probe[0][0].alive


async def test_a_parent_run_timeout_stops_its_children(autojump_clock: trio.abc.Clock) -> None:
    probe: list[Any] = []
    async with condukt.open_node() as node:
        parent = await spawn_parent(node, delegate(("a", "x"), ("a", "y")), stuck_roles(probe, "a"))
        with pytest.raises(condukt.RunTimeout):
            await parent.run("Go", timeout=5)
        assert len(probe) == 2 and not any(handle.alive for handle, _ in probe)
        assert node.process_count == 2
        assert_consistent(await parent.history())


async def test_a_cancelled_one_shot_parent_leaves_no_process(autojump_clock: trio.abc.Clock) -> None:
    probe: list[Any] = []
    async with condukt.open_node() as node:
        before = node.process_count
        with trio.move_on_after(5):
            await condukt.run("Go", model=delegate(("a", "x"), ("a", "y")), subagents=stuck_roles(probe, "a"))
        assert len(probe) == 2 and not any(handle.alive for handle, _ in probe)
        assert node.process_count == before
