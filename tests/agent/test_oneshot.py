"""One-shot runs: ``condukt.run`` starts a transient agent and never leaks it."""

from __future__ import annotations

from pathlib import Path
from typing import Any, Literal

import pytest
import trio

import condukt
from condukt.otp import current_node
from condukt.testing import FunctionModel, ScriptedModel, call, reply

from .helpers import Sleep, tool_results
from .structured import BAD, REVIEW_SCHEMA, Review, Verdict, tool_names

temperatures: list[tuple[str, str]] = []


@condukt.tool
async def get_weather(location: str, unit: Literal["C", "F"] = "C") -> str:
    """Gets the current weather for a location.

    Args:
        location: City name.
        unit: Temperature unit.
    """
    temperatures.append((location, unit))
    return f"21 {unit} in {location}"


class Forecaster(condukt.Agent):
    system_prompt = "You forecast the weather."

    def tools(self) -> list[Any]:
        return [get_weather]


async def test_prompt_form_with_inline_tool_and_system_prompt() -> None:
    temperatures.clear()
    model = ScriptedModel([call("get_weather", {"location": "Paris"}), reply("Sunny.")])
    async with condukt.open_node() as node:
        before = node.process_count
        text = await condukt.run(
            "Weather in Paris?", model=model, tools=[get_weather], system_prompt="Be brief."
        )
        assert node.process_count == before
    assert text == "Sunny."
    assert temperatures == [("Paris", "C")]
    first = model.requests[0]
    assert first.system_prompt == "Be brief."
    (definition,) = first.tools
    assert definition.name == "get_weather"
    assert definition.description == "Gets the current weather for a location."
    assert definition.parameters["required"] == ["location"]
    assert definition.parameters["properties"]["location"] == {"type": "string", "description": "City name."}
    assert definition.parameters["properties"]["unit"]["enum"] == ["C", "F"]
    assert tool_results(model.requests[1])[0].text == "21 C in Paris"


async def test_agent_class_form_uses_its_tools_and_system_prompt() -> None:
    model = ScriptedModel([call("submit_result", {"verdict": "approve", "summary": "ok"})] * 2)
    async with condukt.open_node() as node:
        before = node.process_count
        review = await condukt.run(Forecaster, "Review the forecast", model=model, output=Review)
        assert review == Review(Verdict.APPROVE, "ok")
        assert model.requests[0].system_prompt is not None
        assert model.requests[0].system_prompt.startswith("You forecast the weather.")
        assert tool_names(model.requests[0]) == ["get_weather", "submit_result"]
        # Start options override the class.
        await condukt.run(Forecaster, "again", model=model, output=Review, system_prompt="Other.")
        assert model.requests[1].system_prompt is not None
        assert model.requests[1].system_prompt.startswith("Other.")
        assert node.process_count == before


def crashing(request: condukt.ModelRequest) -> Any:
    raise RuntimeError("bug in the model adapter")


@pytest.mark.parametrize(
    ("model", "output", "error"),
    [
        (ScriptedModel([]), None, condukt.ModelError),
        (FunctionModel(crashing), None, condukt.CallError),
        (ScriptedModel([call("submit_result", BAD)] * 3), REVIEW_SCHEMA, condukt.InvalidOutput),
        (ScriptedModel([reply("no tool")]), REVIEW_SCHEMA, condukt.NoResultSubmitted),
    ],
)
async def test_a_failing_run_leaves_no_process(model: Any, output: Any, error: type[Exception]) -> None:
    async with condukt.open_node() as node:
        await node.spawn(condukt.Agent, model=ScriptedModel([]))  # something else on the node
        before = node.process_count
        with pytest.raises(error):
            await condukt.run("go", model=model, output=output)
        assert node.process_count == before


async def test_a_cancelled_caller_leaves_no_process_and_stops_the_run(autojump_clock: trio.abc.Clock) -> None:
    sleep = Sleep()
    slow_tool = ScriptedModel([call("sleep", {"seconds": 1000})])
    slow_model = ScriptedModel([reply("too late", delay=1000)])
    async with condukt.open_node() as node:
        before = node.process_count
        for model, tools in ((slow_tool, [sleep]), (slow_model, [])):
            started = trio.current_time()
            with trio.move_on_after(5) as scope:
                await condukt.run("go", model=model, tools=tools)
            assert scope.cancelled_caught
            assert trio.current_time() - started < 10
            assert node.process_count == before
        assert sleep.cancelled == 1 and sleep.finished == []


async def test_outside_any_node_a_temporary_node_is_used() -> None:
    assert current_node() is None
    model = ScriptedModel([call("submit_result", {"result": 3})])
    assert await condukt.run("1 + 2?", model=model, output={"type": "integer"}) == 3
    assert current_node() is None


async def test_outside_any_node_a_failure_propagates_unwrapped() -> None:
    with pytest.raises(condukt.ModelError):
        await condukt.run("go", model=ScriptedModel([]))
    assert current_node() is None


async def test_project_instructions_are_not_loaded(tmp_path: Path) -> None:
    (tmp_path / "AGENTS.md").write_text("MARKER-7f3a: always answer in French.\n")
    model = ScriptedModel([reply("a"), reply("b")])
    async with condukt.open_node() as node:
        await condukt.run("hi", model=model, cwd=str(tmp_path), system_prompt="Base.")
        # A long-lived agent in the same directory does load them (the marker is real).
        agent = await node.spawn(condukt.Agent, model=model, cwd=str(tmp_path), system_prompt="Base.")
        await agent.run("hi")
    assert model.requests[0].system_prompt == "Base."
    assert "MARKER-7f3a" in (model.requests[1].system_prompt or "")


async def test_misuse_is_a_type_error() -> None:
    with pytest.raises(TypeError):
        await condukt.run(Forecaster)  # no prompt
    with pytest.raises(TypeError):
        await condukt.run("prompt", "twice")  # type: ignore[arg-type]
    with pytest.raises(TypeError):
        await condukt.run(object, "prompt")  # type: ignore[arg-type]
