"""Sync function tools run off the event loop: in a worker thread (default) or a killable worker process.

Wall-clock tests: a thread really sleeps, so virtual time cannot be used.
Every blocked thread waits on an Event the test sets at the end, so the
suite never waits for the full sleep.
"""

from __future__ import annotations

import importlib
import importlib.util
import json
import os
import sys
import threading
import time
import types
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import attrs
import pytest
import trio
from waiting import TIMEOUT, WallBound, open_fifo

import condukt
from condukt.messages import ToolResultMessage
from condukt.testing import ScriptedModel, call, reply

from .helpers import through_agent


@pytest.fixture
def release() -> Iterator[threading.Event]:
    """An Event a blocked tool thread waits on; set when the test ends, so no thread outlives it long."""
    event = threading.Event()
    yield event
    event.set()


class Blocker:
    """A sync tool ``block`` that blocks its thread until released, and what it got to do."""

    def __init__(self, release: threading.Event, **options: Any) -> None:
        self.started = threading.Event()
        self.finished = threading.Event()

        @condukt.tool(**options)
        def block(seconds: float) -> str:
            """Blocks the calling thread for ``seconds`` (or until released)."""
            self.started.set()
            release.wait(seconds)
            self.finished.set()
            return "finished"

        self.tool = block

    async def wait_started(self) -> None:
        assert await trio.to_thread.run_sync(self.started.wait, TIMEOUT), "the tool never started"


def _results(model: ScriptedModel, request: int = 1) -> list[ToolResultMessage]:
    return [m for m in model.requests[request].messages if isinstance(m, ToolResultMessage)]


# -- (a) a sync tool past its timeout neither freezes the node nor succeeds late


@pytest.mark.slow
async def test_a_blocked_sync_tool_times_out_at_its_deadline_and_the_node_keeps_running(
    release: threading.Event, wall_bound: WallBound
) -> None:
    blocker = Blocker(release)
    model = ScriptedModel([call("block", {"seconds": 10}), reply("done")])
    ticks = 0

    async def ticker() -> None:  # counts how often the event loop ran meanwhile (a measurement, not a wait)
        nonlocal ticks
        while True:
            await trio.sleep(0.1)
            ticks += 1

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[blocker.tool], tool_timeout=1)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(ticker)
            with wall_bound(1.2, "a run whose sync tool times out after 1 s"):
                assert await agent.run("go") == "done"
            nursery.cancel_scope.cancel()
    # The event loop kept running: a frozen one ticks at most once, a loaded one still several times.
    assert ticks >= 3, f"the event loop ticked {ticks} times"
    [result] = _results(model)
    assert result.is_error
    assert result.text == "Error: tool 'block' timed out after 1 seconds"
    # The thread could not be stopped: it runs on until released, and its result goes nowhere.
    assert not blocker.finished.is_set()
    release.set()
    assert blocker.finished.wait(5)
    assert len(model.requests) == 2


@pytest.mark.slow
async def test_an_abort_ends_a_run_blocked_in_a_sync_tool_at_once(
    release: threading.Event, wall_bound: WallBound
) -> None:
    blocker = Blocker(release)
    model = ScriptedModel([call("block", {"seconds": 10}), reply("never")])
    aborted: list[condukt.Aborted] = []
    ended = trio.Event()

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[blocker.tool])

        async def run() -> None:
            try:
                await agent.run("go")
            except condukt.Aborted as exc:
                aborted.append(exc)
            ended.set()

        async with trio.open_nursery() as nursery:
            nursery.start_soon(run)
            await blocker.wait_started()
            with wall_bound(0.5, "an abort of a run blocked in a sync tool"):
                assert await agent.abort()
                await ended.wait()
        assert aborted
        assert not await agent.history()  # the cut-off turn is dropped
    assert len(model.requests) == 1


@pytest.mark.slow
async def test_the_runs_timeout_ends_a_run_blocked_in_a_sync_tool_at_once(
    release: threading.Event, wall_bound: WallBound
) -> None:
    blocker = Blocker(release)
    model = ScriptedModel([call("block", {"seconds": 10}), reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[blocker.tool])
        with wall_bound(0.7, "a run with a 0.5 s timeout blocked in a sync tool"), pytest.raises(condukt.RunTimeout):
            await agent.run("go", timeout=0.5)


# -- (b) isolate="process": the worker is killed, its side effect never happens


@pytest.mark.slow
async def test_a_process_tool_past_its_timeout_is_killed_before_its_side_effect(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    pytest.importorskip("trio_parallel", reason="the [process] extra is not installed (pip install '.[process]')")
    import trio_parallel

    from ._process_tools import write_later

    # A worker's first start and its import of the tool's module (0.3-0.7 s, seconds on a
    # loaded machine) count against the tool's timeout; do both first, as a service's
    # earlier calls would have.
    await trio_parallel.run_sync(exec, f"import {write_later.fn.__module__}")
    target = tmp_path / "side-effect.txt"
    # 2 s of timeout: room for the worker to start the function even on a loaded machine.
    model = ScriptedModel([call("write_later", {"path": str(target), "seconds": 3}), reply("done")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[write_later], tool_timeout=2)
        with wall_bound(2.0, "a run whose process tool times out after 2 s"):
            assert await agent.run("go") == "done"
    [result] = _results(model)
    assert result.text == "Error: tool 'write_later' timed out after 2 seconds"
    # The worker had started (it wrote its pid) and was killed: the only writer of ``target`` is gone.
    pid = int((tmp_path / "side-effect.txt.pid").read_text())
    assert process_gone(pid)
    assert not target.exists()


@pytest.mark.slow
async def test_an_abort_kills_a_process_tool(
    tmp_path: Path, process_gone: Callable[[int], bool], wall_bound: WallBound
) -> None:
    pytest.importorskip("trio_parallel", reason="the [process] extra is not installed (pip install '.[process]')")
    from ._process_tools import write_later

    target = tmp_path / "side-effect.txt"
    model = ScriptedModel([call("write_later", {"path": str(target), "seconds": 1.0}), reply("never")])
    async with condukt.open_node() as node, open_fifo(tmp_path / "side-effect.txt.pid") as pids:
        agent = await node.spawn(condukt.Agent, model=model, tools=[write_later])
        async with trio.open_nursery() as nursery:

            async def run() -> None:
                with pytest.raises(condukt.Aborted):
                    await agent.run("go")

            nursery.start_soon(run)
            pid = int(await pids.receive_line())  # the worker runs the tool
            with wall_bound(0.5, "an abort of a process tool"):
                assert await agent.abort()
    # The only writer of ``target`` is gone before it wrote (it sleeps 1 s first).
    assert process_gone(pid)
    assert not target.exists()


# -- (c) results and errors in every mode


def inline_adder() -> condukt.tools.FunctionTool:
    # Made in the tests that use it, so that this module imports on a condukt without ``isolate``.
    @condukt.tool(isolate="none", name="add_inline")
    def add(a: int, b: int) -> dict[str, Any]:
        """Adds on the event loop."""
        return {"sum": a + b, "main_thread": threading.current_thread() is threading.main_thread()}

    return add


@condukt.tool
def add_threaded(a: int, b: int) -> dict[str, Any]:
    """Adds in a worker thread."""
    return {"sum": a + b, "main_thread": threading.current_thread() is threading.main_thread()}


@condukt.tool
def raise_in_thread(kind: str) -> str:
    """Raises ToolError or ValueError in a worker thread."""
    if kind == "tool":
        raise condukt.ToolError("no such thing")
    raise ValueError(f"bad {kind}")


def test_the_modes_are_recorded() -> None:
    assert inline_adder().isolate == "none"
    assert add_threaded.isolate == "thread"

    @condukt.tool
    async def native() -> str:
        return "x"

    assert native.isolate == "none"


async def test_sync_tools_in_a_thread_and_inline_return_their_results_and_report_errors(tmp_path: Path) -> None:
    calls = [
        call("add_inline", {"a": 2, "b": 3}),
        call("add_threaded", {"a": 2, "b": 3}),
        call("raise_in_thread", {"kind": "tool"}),
        call("raise_in_thread", {"kind": "value"}),
    ]
    results, _ = await through_agent([inline_adder(), add_threaded, raise_in_thread], calls, tmp_path)
    assert [(r.text, r.is_error) for r in results] == [
        ('{"sum": 5, "main_thread": true}', False),
        ('{"sum": 5, "main_thread": false}', False),
        ("Error: no such thing", True),
        ("Error: ValueError: bad value", True),
    ]


async def test_process_tools_return_their_results_and_report_errors(tmp_path: Path) -> None:
    pytest.importorskip("trio_parallel", reason="the [process] extra is not installed (pip install '.[process]')")
    from . import _process_tools as p

    calls = [
        call("area", {"box": {"width": 2, "height": 3}, "scale": 2}),
        call("fail", {"kind": "tool"}),
        call("fail", {"kind": "value"}),
        call("shadowed", {}),
    ]
    results, _ = await through_agent([p.area, p.fail, p.shadowed_tool], calls, tmp_path)
    answer = json_of(results[0])
    assert answer["area"] == 12 and answer["box_type"] == "Box"  # converted, then pickled to the worker
    assert answer["pid"] != os.getpid()
    assert [(r.text, r.is_error) for r in results[1:3]] == [
        ("Error: no such thing", True),
        ("Error: ValueError: bad value", True),
    ]
    assert results[3].is_error
    assert "module level" in results[3].text and "_process_tools.shadowed" in results[3].text


def json_of(result: ToolResultMessage) -> Any:
    assert not result.is_error, result.text
    return json.loads(result.text)


# -- (d) what cannot work is refused when the tool is made


@pytest.mark.parametrize("isolate", ["fork", "", "THREAD", True, 1])
def test_an_unknown_isolate_is_a_value_error_naming_the_accepted_ones(isolate: Any) -> None:
    def f(x: int) -> int:
        return x

    with pytest.raises(ValueError, match="isolate must be one of 'thread', 'process', 'none'"):
        condukt.tool(isolate=isolate)(f)
    with pytest.raises(ValueError, match="'thread', 'process', 'none'"):
        condukt.tools.FunctionTool(f, isolate=isolate)


def _module_level(x: int) -> int:
    return x


def test_what_a_worker_process_cannot_run_is_a_type_error() -> None:
    def local(x: int) -> int:
        return x

    async def coroutine(x: int) -> int:
        return x

    def with_context(x: int, context: condukt.ToolContext) -> int:
        return x

    @attrs.frozen
    class LocalPoint:
        x: int

    def takes_local_class(point: LocalPoint) -> int:
        return point.x

    takes_local_class.__qualname__ = "takes_local_class"  # only its parameter's class is local
    takes_local_class.__annotations__ = {"point": LocalPoint, "return": int}  # resolved: the class is local

    def takes_context_at_module_level(x: int, ctx: condukt.ToolContext) -> int:
        return x

    takes_context_at_module_level.__qualname__ = "takes_context_at_module_level"

    with pytest.raises(TypeError, match="lambda or a function defined inside another function"):
        condukt.tools.FunctionTool(lambda x: x, isolate="process")
    with pytest.raises(TypeError, match="define it at module level"):
        condukt.tool(isolate="process")(local)
    with pytest.raises(TypeError, match="async function cannot run in a worker thread or process"):
        condukt.tool(isolate="process")(coroutine)
    with pytest.raises(TypeError, match="ToolContext"):
        condukt.tool(isolate="process")(takes_context_at_module_level)
    with pytest.raises(TypeError, match="LocalPoint, a class defined inside a function"):
        condukt.tool(isolate="process")(takes_local_class)
    with pytest.raises(TypeError, match=r"isolate='thread' is for sync functions"):
        condukt.tool(isolate="thread")(coroutine)
    # What works: a ToolContext in a thread, and a module-level function in a process.
    assert condukt.tool(with_context).isolate == "thread"
    if importlib.util.find_spec("trio_parallel") is not None:
        assert condukt.tool(isolate="process")(_module_level).isolate == "process"


def test_process_isolation_without_trio_parallel_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "trio_parallel", None)
    with pytest.raises(ImportError, match=r"pip install 'condukt\[process\]'"):
        condukt.tool(isolate="process")(_module_level)


async def test_an_inline_sync_tool_past_its_deadline_gets_the_timeout_error_not_a_late_success(
    tmp_path: Path,
) -> None:
    napped: list[float] = []

    @condukt.tool(isolate="none")
    def nap(seconds: float) -> str:
        """Blocks the event loop (what isolate="none" means)."""
        time.sleep(seconds)
        napped.append(seconds)
        return "slept"

    results, _ = await through_agent([nap], [call("nap", {"seconds": 0.3})], tmp_path, tool_timeout=0.1)
    assert napped == [0.3]  # inline: the deadline could only land once it returned
    assert [(r.text, r.is_error) for r in results] == [("Error: tool 'nap' timed out after 0.1 seconds", True)]


def test_a_function_from_an_interactive_session_cannot_run_in_a_process(monkeypatch: pytest.MonkeyPatch) -> None:
    def typed_at_the_prompt(x: int) -> int:
        return x

    typed_at_the_prompt.__module__ = "__main__"
    typed_at_the_prompt.__qualname__ = "typed_at_the_prompt"
    monkeypatch.setitem(sys.modules, "__main__", types.ModuleType("__main__"))  # a REPL's: no __file__
    with pytest.raises(TypeError, match="interactive session"):
        condukt.tool(isolate="process")(typed_at_the_prompt)
