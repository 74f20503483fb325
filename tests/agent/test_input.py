"""Typed input: validated before any model request, rendered into the prompt as JSON."""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, call, reply

from .structured import GOOD, REVIEW_SCHEMA, PullRequest, Ticket, first_user_text

PR_SCHEMA: dict[str, Any] = {
    "type": "object",
    "properties": {"repo": {"type": "string"}, "number": {"type": "integer", "minimum": 1}},
    "required": ["repo", "number"],
}


def rendered_input(text: str) -> Any:
    """The JSON block a structured run appends to its prompt, parsed."""
    match = re.search(r"Input:\n```json\n(.*)\n```\Z", text, re.DOTALL)
    assert match, text
    return json.loads(match.group(1))


@pytest.mark.parametrize(
    ("value", "schema"),
    [
        ({"repo": "a/b"}, PR_SCHEMA),  # missing field
        ({"repo": "a/b", "number": "7"}, PR_SCHEMA),  # wrong type
        ({"repo": "a/b", "number": 0}, PR_SCHEMA),  # out of range
        ({"repo": "a/b"}, PullRequest),  # schema derived from an attrs class
        (None, PR_SCHEMA),  # no input at all
        ({"title": "t", "priority": "high"}, Ticket),  # schema derived from a dataclass
    ],
)
async def test_invalid_input_raises_before_any_model_request(value: Any, schema: Any) -> None:
    model = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, load_project_instructions=False)
        with pytest.raises(condukt.InvalidInput) as info:
            await agent.run("Review", input=value, input_schema=schema, output=REVIEW_SCHEMA)
        assert info.value.errors
        assert isinstance(info.value, ValueError)
        assert model.requests == []
        assert await agent.history() == ()
        assert not agent.running


async def test_input_is_rendered_into_the_prompt_as_json() -> None:
    model = ScriptedModel([call("submit_result", GOOD)])
    value = {"repo": "tuist/condukt", "number": 7}
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, load_project_instructions=False)
        await agent.run("Review the PR.", input=value, input_schema=PR_SCHEMA, output=REVIEW_SCHEMA)
    text = first_user_text(model.requests[0])
    assert text.startswith("Review the PR.\n\n")
    assert rendered_input(text) == value


@pytest.mark.parametrize(
    ("value", "schema", "data"),
    [
        (PullRequest("tuist/condukt", 7), PullRequest, {"repo": "tuist/condukt", "number": 7}),
        (Ticket("Crash on start", 1), Ticket, {"title": "Crash on start", "priority": 1}),
        ({"title": "As a dict", "priority": 2}, Ticket, {"title": "As a dict", "priority": 2}),
        (["no", "schema"], None, ["no", "schema"]),
    ],
)
async def test_typed_input_instances_are_rendered_as_their_fields(value: Any, schema: Any, data: Any) -> None:
    model = ScriptedModel([reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, load_project_instructions=False)
        assert await agent.run("Look at this.", input=value, input_schema=schema) == "ok"
    assert rendered_input(first_user_text(model.requests[0])) == data


async def test_one_shot_invalid_input_makes_no_request_and_leaves_no_process() -> None:
    model = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        before = node.process_count
        with pytest.raises(condukt.InvalidInput):
            await condukt.run("Review", model=model, input={"repo": 1}, input_schema=PullRequest)
        assert node.process_count == before
    assert model.requests == []


async def test_invalid_input_on_a_stream_raises_before_it_starts() -> None:
    model = ScriptedModel([reply("never")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, load_project_instructions=False)
        with pytest.raises(condukt.InvalidInput):
            async with agent.stream("Review", input={}, input_schema=PR_SCHEMA):
                pass
        assert model.requests == []
