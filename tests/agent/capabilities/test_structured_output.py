"""Structured output: ``submit_result``, validation, retries and the typed result."""

from __future__ import annotations

import json

import pytest
import trio

import condukt
from condukt.events import AgentEnd, Done, Error, ToolCallEnd
from condukt.messages import AssistantMessage, ToolResultMessage, UserMessage
from condukt.testing import ScriptedModel, call, reply

from ..helpers import Add, assert_consistent, of_type, tool_results
from ..structured import BAD, GOOD, REVIEW_SCHEMA, Review, ReviewRecord, Verdict, tool_names


async def spawn(node: condukt.Node, model: condukt.Model, **options: object) -> condukt.AgentHandle:
    return await node.spawn(condukt.Agent, model=model, load_project_instructions=False, **options)


async def test_json_schema_result_is_a_dict_and_submit_result_sits_beside_user_tools() -> None:
    model = ScriptedModel([call("add", {"a": 1, "b": 2}), call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, tools=[Add], system_prompt="You review code.")
        result = await agent.run("Review it", output=REVIEW_SCHEMA)
        assert result == GOOD
        assert type(result) is dict
        assert len(model.requests) == 2  # the run ends with the accepted submission
        first = model.requests[0]
        assert tool_names(first) == ["add", "submit_result"]
        submit = first.tools[1]
        assert dict(submit.parameters) == REVIEW_SCHEMA
        assert first.system_prompt is not None
        assert first.system_prompt.startswith("You review code.")
        assert "`submit_result`" in first.system_prompt and "exactly once" in first.system_prompt
        # A plain run afterwards offers neither the tool nor the instruction.
        model_plain = ScriptedModel([reply("hi")])
        plain = await spawn(node, model_plain, tools=[Add], system_prompt="You review code.")
        await plain.run("hello")
        assert tool_names(model_plain.requests[0]) == ["add"]
        assert model_plain.requests[0].system_prompt == "You review code."


async def test_attrs_class_result_is_an_attrs_instance() -> None:
    model = ScriptedModel([call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        result = await agent.run("Review it", output=Review)
        assert result == Review(Verdict.APPROVE, "Looks fine.")
        # The schema the model sees is derived from the class.
        parameters = model.requests[0].tools[-1].parameters
        assert parameters["properties"]["verdict"]["enum"] == ["approve", "reject"]
        assert parameters["required"] == ["verdict", "summary"]


async def test_dataclass_result_is_a_dataclass_instance() -> None:
    model = ScriptedModel([call("submit_result", {"verdict": "reject", "summary": "No.", "score": 3})])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        assert await agent.run("Review it", output=ReviewRecord) == ReviewRecord("reject", "No.", 3)


async def test_non_object_schema_is_wrapped_and_the_plain_value_returned() -> None:
    model = ScriptedModel([call("submit_result", {"result": "forty-two"})])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        assert await agent.run("Answer", output={"type": "string"}) == "forty-two"
        parameters = model.requests[0].tools[-1].parameters
        assert parameters == {
            "type": "object",
            "properties": {"result": {"type": "string"}},
            "required": ["result"],
        }


async def test_enum_violation_is_explained_to_the_model_which_may_retry() -> None:
    model = ScriptedModel([call("submit_result", BAD), call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        assert await agent.run("Review it", output=REVIEW_SCHEMA) == GOOD
        assert len(model.requests) == 2
        (result,) = tool_results(model.requests[1])
        assert result.is_error
        assert "maybe" in result.text and "approve" in result.text and "reject" in result.text
        assert "verdict" in result.text
        assert "2 attempt(s) left" in result.text
        # The submit_result bookkeeping is not left in the history (later runs
        # do not offer the tool): the run reads as the prompt and its result.
        history = await agent.history()
        assert_consistent(history)
        assert [type(m) for m in history] == [UserMessage, AssistantMessage]
        assert json.loads(history[-1].text) == GOOD
        assert not any(isinstance(m, ToolResultMessage) for m in history)


async def test_invalid_output_after_the_default_retry_budget() -> None:
    model = ScriptedModel([call("submit_result", BAD)] * 3 + [reply("ok")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        with pytest.raises(condukt.InvalidOutput) as info:
            await agent.run("Review it", output=REVIEW_SCHEMA)
        # One submission plus output_retries (2) retries, then no more requests.
        assert len(model.requests) == 3
        assert info.value.errors and "maybe" in info.value.errors[0]
        last = tool_results(model.requests[2])[0]
        assert "attempt(s) left" in last.text  # the third submission was still announced as a retry
        # Nothing but submit_result bookkeeping answered the prompt: the
        # failed run leaves no trace, so the next prompt is not the second
        # user message in a row, and no call to a tool it lacks is sent again.
        assert await agent.history() == ()
        assert await agent.run("again") == "ok"
        assert [m.text for m in model.requests[-1].messages] == ["again"]
        assert_consistent(await agent.history())


@pytest.mark.parametrize(("retries", "requests"), [(0, 1), (1, 2), (4, 5)])
async def test_retry_budget_is_a_start_option(retries: int, requests: int) -> None:
    model = ScriptedModel([call("submit_result", BAD)] * 10)
    async with condukt.open_node() as node:
        agent = await spawn(node, model, output_retries=retries)
        with pytest.raises(condukt.InvalidOutput):
            await agent.run("Review it", output=REVIEW_SCHEMA)
        assert len(model.requests) == requests


async def test_retry_budget_is_a_class_attribute() -> None:
    class Strict(condukt.Agent):
        output_retries = 0
        load_project_instructions = False

    model = ScriptedModel([call("submit_result", BAD), call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        agent = await node.spawn(Strict, model=model)
        with pytest.raises(condukt.InvalidOutput):
            await agent.run("Review it", output=Review)
        assert len(model.requests) == 1


async def test_no_submission_raises_no_result_submitted() -> None:
    model = ScriptedModel([reply("approve, looks fine")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        with pytest.raises(condukt.NoResultSubmitted):
            await agent.run("Review it", output=REVIEW_SCHEMA)
        history = await agent.history()
        assert_consistent(history)
        assert [m.text for m in history] == ["Review it", "approve, looks fine"]


async def test_a_second_submission_is_refused_and_the_first_result_kept() -> None:
    # trio randomises the order in which the tasks of one turn start, so try
    # often enough that "first" cannot hold by luck.
    other = {"verdict": "reject", "summary": "Changed my mind."}
    async with condukt.open_node() as node:
        for _ in range(20):
            model = ScriptedModel([[call("submit_result", GOOD), call("submit_result", other)]])
            agent = await spawn(node, model)
            events: list[object] = []

            async def on_event(event: object, into: list[object] = events) -> None:
                into.append(event)

            assert await agent.run("Review it", output=REVIEW_SCHEMA, on_event=on_event) == GOOD
            ends = [e for e in events if isinstance(e, ToolCallEnd)]
            first, second = ends
            assert first.result == "Result accepted." and not first.is_error
            assert second.is_error and "already submitted" in second.result
            history = await agent.history()
            assert_consistent(history)
            assert json.loads(history[-1].text) == GOOD
            await agent.stop()


async def test_an_invalid_schema_fails_the_run_before_any_request() -> None:
    model = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        with pytest.raises(ValueError, match="JSON Schema"):
            await agent.run("x", output={"type": "no-such-type"})
        with pytest.raises(TypeError):
            await agent.run("x", output=42)
        assert model.requests == []
        assert await agent.history() == ()


async def test_structured_stream_ends_with_the_result_as_json() -> None:
    model = ScriptedModel([call("submit_result", GOOD)])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        async with agent.stream("Review it", output=Review) as events:
            seen = [event async for event in events]
        (end,) = of_type(seen, AgentEnd)
        assert json.loads(end.text) == GOOD
        assert events.result == end.text
        assert seen[-1] == Done("completed")


async def test_structured_stream_reports_invalid_output_as_an_error_event() -> None:
    model = ScriptedModel([call("submit_result", BAD)] * 3)
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        async with agent.stream("Review it", output=REVIEW_SCHEMA) as events:
            seen = [event async for event in events]
        assert events.result is None
        assert events.error is not None and events.error.error_type == "InvalidOutput"
        assert of_type(seen, Error) == [events.error]
        assert seen[-1] == Done("failed")
        assert_consistent(await agent.history())


async def test_one_shot_structured_run() -> None:
    model = ScriptedModel([call("submit_result", {"verdict": "reject", "summary": "Broken."})])
    async with condukt.open_node():
        result = await condukt.run("Review it", model=model, output=Review)
    assert result == Review(Verdict.REJECT, "Broken.")


async def test_structured_run_history_then_plain_run(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([call("submit_result", BAD), call("submit_result", GOOD), reply("plain")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        assert await agent.run("Review it", output=REVIEW_SCHEMA) == GOOD
        assert await agent.run("Thanks") == "plain"
        history = await agent.history()
        assert_consistent(history)
        # The plain run sees the whole structured conversation, without the submit_result tool.
        assert len(model.requests[2].messages) == len(history) - 1
        assert "submit_result" not in tool_names(model.requests[2])


async def test_typeddict_and_pydantic_results_are_of_their_types() -> None:
    from typing import TypedDict

    import pydantic

    class ReviewDict(TypedDict):
        verdict: str
        summary: str

    class ReviewModel(pydantic.BaseModel):
        verdict: str
        summary: str

    async with condukt.open_node() as node:
        model = ScriptedModel([call("submit_result", GOOD), call("submit_result", GOOD)])
        agent = await spawn(node, model)
        assert await agent.run("Review it", output=ReviewDict) == GOOD
        result = await agent.run("Review it", output=ReviewModel)
        assert result == ReviewModel(verdict="approve", summary="Looks fine.")
        parameters = model.requests[1].tools[-1].parameters
        assert parameters["required"] == ["verdict", "summary"]
        # The history holds the result as JSON text, whatever its type.
        assert json.loads((await agent.history())[-1].text) == GOOD


async def test_a_non_object_result_schema_with_definitions_keeps_them_resolvable() -> None:
    schema = {"$defs": {"name": {"type": "string", "minLength": 2}}, "type": "array", "items": {"$ref": "#/$defs/name"}}
    model = ScriptedModel([call("submit_result", {"result": ["x"]}), call("submit_result", {"result": ["ab", "cd"]})])
    async with condukt.open_node() as node:
        agent = await spawn(node, model)
        assert await agent.run("Names", output=schema) == ["ab", "cd"]
        (rejected,) = tool_results(model.requests[1])
        assert rejected.is_error and "too short" in rejected.text
