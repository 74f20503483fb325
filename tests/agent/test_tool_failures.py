"""Tool failures are reported to the model and the run goes on."""

from __future__ import annotations

from typing import Any

import trio

import condukt
from condukt.events import ToolCallEnd
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add, Crash, Recorder, Sleep, of_type, tool_results


class Refuse(condukt.Tool):
    name = "refuse"
    description = "Raises ToolError."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        raise condukt.ToolError("not today")


async def run_one(tools: list[Any], tool_call: Any, **options: Any) -> tuple[ScriptedModel, list[Any], str]:
    """Run a turn with ``tool_call`` then a final reply; return the model, events and answer."""
    log: list[Any] = []
    model = ScriptedModel([tool_call, reply("recovered")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=tools, log=log, **options)
        text = await agent.run("try it")
        assert agent.alive
    return model, log, text


async def test_hanging_tool_times_out_and_the_model_sees_it(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    start = trio.current_time()
    model, log, text = await run_one([sleep], call("sleep", {"seconds": -1}), tool_timeout=5)
    assert text == "recovered"
    assert 5 <= trio.current_time() - start < 6
    assert sleep.cancelled == 1
    [result] = tool_results(model.requests[1])
    assert result.is_error
    assert result.text.startswith("Error: ") and "timed out after 5 seconds" in result.text
    [end] = of_type(log, ToolCallEnd)
    assert end.is_error and end.result == result.text


async def test_tool_class_timeout_overrides_agent_tool_timeout(autojump_clock: trio.abc.Clock) -> None:
    class Quick(Sleep):
        timeout = 0.5

    start = trio.current_time()
    model, _, _ = await run_one([Quick()], call("sleep", {"seconds": 10}), tool_timeout=100)
    assert trio.current_time() - start < 1
    assert "timed out after 0.5 seconds" in tool_results(model.requests[1])[0].text


async def test_tool_error_is_reported_as_error() -> None:
    model, log, text = await run_one([Refuse()], call("refuse"))
    assert text == "recovered"
    [result] = tool_results(model.requests[1])
    assert result.is_error and result.text == "Error: not today"
    assert of_type(log, ToolCallEnd)[0].is_error


async def test_crashing_tool_is_reported_and_the_run_goes_on() -> None:
    model, log, text = await run_one([Crash()], call("crash"))
    assert text == "recovered"
    [result] = tool_results(model.requests[1])
    assert result.is_error and result.text == "Error: ValueError: kaboom"
    [end] = of_type(log, ToolCallEnd)
    assert end.is_error and end.name == "crash"


async def test_unknown_tool_is_reported_with_the_available_names() -> None:
    model, log, text = await run_one([Add()], call("nope", {"x": 1}))
    assert text == "recovered"
    [result] = tool_results(model.requests[1])
    assert result.is_error and result.name == "nope"
    assert "unknown tool 'nope'" in result.text and "add" in result.text
    assert of_type(log, ToolCallEnd)[0].is_error


async def test_schema_invalid_arguments_never_reach_call() -> None:
    add = Add()
    steps = [
        [
            call("add", {"a": "two", "b": 3}, id="wrong-type"),
            call("add", {"a": 1}, id="missing"),
            call("add", {"a": 1, "b": 2, "c": 3}, id="extra"),
            call("add", "{not json", id="not-json"),
            call("add", {"a": 1, "b": 2}, id="fine"),
        ],
        reply("done"),
    ]
    log: list[Any] = []
    model = ScriptedModel(steps)
    async with condukt.open_node() as node:
        agent = await node.spawn(Recorder, model=model, tools=[add], log=log)
        await agent.run("add things")
    assert add.calls == [{"a": 1, "b": 2}]
    results = {r.tool_call_id: r for r in tool_results(model.requests[1])}
    for bad in ("wrong-type", "missing", "extra", "not-json"):
        assert results[bad].is_error, bad
        assert results[bad].text.startswith("Error: invalid arguments for add"), results[bad].text
    assert "'b' is a required property" in results["missing"].text
    assert "not valid JSON" in results["not-json"].text
    assert results["fine"].text == "3" and not results["fine"].is_error
    ends = {e.id: e.is_error for e in of_type(log, ToolCallEnd)}
    assert ends == {"wrong-type": True, "missing": True, "extra": True, "not-json": True, "fine": False}


async def test_one_failing_call_does_not_disturb_its_siblings(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    steps = [[call("sleep", {"seconds": 1, "label": "ok"}), call("crash"), call("nope")], reply("fine")]
    model = ScriptedModel(steps)
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[sleep, Crash()])
        assert await agent.run("mixed") == "fine"
    results = tool_results(model.requests[1])
    assert [(r.name, r.is_error) for r in results] == [("sleep", False), ("crash", True), ("nope", True)]
    assert sleep.finished == ["ok"]


class Nap(condukt.Tool):
    name = "nap"
    description = "Sleeps."
    parameters = {"type": "object", "properties": {"s": {"type": "number"}}, "required": ["s"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        await trio.sleep(args["s"])
        return f"slept {args['s']}"


async def test_a_hanging_call_among_parallel_calls_times_out_alone(autojump_clock: Any) -> None:
    model = ScriptedModel([[call("nap", {"s": 1}), call("nap", {"s": 10_000}), call("nap", {"s": 2})], reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Nap], tool_timeout=30)
        start = trio.current_time()
        assert await agent.run("go") == "ok"
        assert trio.current_time() - start == 30
        results = [m for m in await agent.history() if isinstance(m, condukt.messages.ToolResultMessage)]
    assert [r.text for r in results] == ["slept 1", "Error: tool 'nap' timed out after 30 seconds", "slept 2"]
    assert [r.is_error for r in results] == [False, True, False]


class Exits(condukt.Tool):
    """Like a CLI parser given bad input: argparse and click raise SystemExit."""

    name = "exits"
    description = "Parses arguments the way argparse does."

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        import argparse

        # exit_on_error left at its default: on 3.13 False makes a missing argument raise
        # ArgumentError, where 3.11 and 3.12 still exit; this tool is about the exit.
        parser = argparse.ArgumentParser(prog="exits")
        parser.add_argument("--count", type=int, required=True)
        parser.parse_args([])  # missing --count: argparse calls sys.exit(2)
        return "parsed"


class Unprintable(Exception):
    def __str__(self) -> str:
        raise RuntimeError("no text for you")


class RaisesUnprintable(condukt.Tool):
    name = "unprintable"
    description = "Raises an exception whose __str__ raises."

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        raise Unprintable()


class RaisesGroup(condukt.Tool):
    name = "group"
    description = "Its own nursery fails twice."

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        async def fail(message: str) -> None:
            raise ValueError(message)

        async with trio.open_nursery() as nursery:
            nursery.start_soon(fail, "one")
            nursery.start_soon(fail, "two")
        return "never"


class Precise(condukt.Tool):
    name = "precise"
    description = "Takes a number in cents."
    parameters = {"type": "object", "properties": {"x": {"type": "number", "multipleOf": 0.01}}, "required": ["x"]}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return "accepted"


async def test_tool_failures_that_used_to_take_the_agent_down_are_error_results(caplog: Any) -> None:
    calls = [
        call("exits", id="a"),
        call("unprintable", id="b"),
        call("group", id="c"),
        call("precise", {"x": float("inf")}, id="d"),  # what 1e999 parses to
        call("precise", {"x": 1e308 * 10}, id="e"),
        call("precise", {"x": 0.5}, id="f"),
    ]
    model = ScriptedModel([calls, reply("recovered")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            condukt.Agent, model=model, tools=[Exits, RaisesUnprintable, RaisesGroup, Precise]
        )
        assert await agent.run("try them all") == "recovered"
        assert agent.alive
        # The node is fine too: it still starts processes.
        other = await node.spawn(condukt.Agent, model=ScriptedModel([reply("hi")]))
        assert await other.run("hello") == "hi"
    results = {r.tool_call_id: r for r in tool_results(model.requests[1])}
    assert results["a"].is_error and results["a"].text == "Error: SystemExit: 2"
    assert results["b"].is_error and results["b"].text == "Error: Unprintable: <unprintable Unprintable>"
    assert results["c"].is_error and "ExceptionGroup" in results["c"].text
    for key in ("d", "e"):
        assert results[key].is_error and "invalid arguments for precise" in results[key].text
        assert "finite" in results[key].text
    assert not results["f"].is_error and results["f"].text == "accepted"
    # Each crash is reported once on the condukt logger, with its traceback.
    crashes = [r for r in caplog.records if r.name.startswith("condukt") and "raised" in r.getMessage()]
    assert sorted(r.getMessage().split("\n")[0] for r in crashes) == [
        "tool 'exits' raised:",
        "tool 'group' raised:",
        "tool 'unprintable' raised:",
    ]


async def test_a_sync_function_tool_raising_system_exit_is_an_error_result() -> None:
    @condukt.tool
    def strict(count: int) -> str:
        """Exits like a CLI on a bad count."""
        if count < 0:
            raise SystemExit("count must be >= 0")
        return str(count)

    model = ScriptedModel([call("strict", {"count": -1}), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[strict])
        assert await agent.run("go") == "ok"
    [result] = tool_results(model.requests[1])
    assert result.is_error and result.text == "Error: SystemExit: count must be >= 0"
