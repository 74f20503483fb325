"""Bad arguments fail in the caller, with a clear error; the agent is untouched and keeps serving."""

from __future__ import annotations

import math
from typing import Any

import pytest

import condukt
from condukt.testing import ScriptedModel, reply

from .helpers import Add


@pytest.mark.parametrize(
    ("arguments", "error", "match"),
    [
        ({"timeout": -1}, ValueError, "timeout must be a number of seconds > 0"),
        ({"timeout": 0}, ValueError, "timeout must be a number of seconds > 0"),
        ({"timeout": math.nan}, ValueError, "timeout"),
        ({"timeout": "10"}, TypeError, "timeout must be a number of seconds > 0 or None, got str '10'"),
        ({"timeout": True}, TypeError, "timeout"),
        ({"max_turns": 0}, ValueError, "max_turns must be a positive int"),
        ({"max_turns": 2.5}, TypeError, "max_turns"),
        ({"on_event": "print"}, TypeError, "on_event must be a callable"),
        ({"output": 42}, TypeError, "schema"),
        ({"output": {"type": "no-such-type"}}, ValueError, "JSON Schema"),
        ({"images": ["notes.txt"]}, ValueError, "not a supported image"),
    ],
)
async def test_bad_run_arguments_raise_in_the_caller_and_the_agent_keeps_serving(
    arguments: dict[str, Any], error: type[Exception], match: str
) -> None:
    model = ScriptedModel([reply("still here")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model)
        with pytest.raises(error, match=match):
            await agent.run("x", **arguments)
        if "on_event" not in arguments:  # stream() has no callback: its events are the stream
            with pytest.raises(error, match=match):
                async with agent.stream("x", **arguments):
                    pass  # pragma: no cover
        assert agent.alive
        assert model.requests == []  # nothing reached the agent
        assert await agent.run("and now?") == "still here"


@pytest.mark.parametrize("prompt", [None, 42, b"bytes"])
async def test_a_prompt_that_is_not_a_str_is_a_type_error(prompt: Any) -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([]))
        with pytest.raises(TypeError, match="prompt must be a str"):
            await agent.run(prompt)
        assert agent.alive


async def test_an_empty_prompt_is_refused() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([]))
        with pytest.raises(ValueError, match="prompt must not be empty"):
            await agent.run("")


async def test_bad_arguments_to_the_other_handle_methods() -> None:
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=ScriptedModel([reply("ok")]))
        with pytest.raises(TypeError, match="text must be a str"):
            await agent.steer(123)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="text must be a str"):
            await agent.follow_up(None)  # type: ignore[arg-type]
        with pytest.raises(TypeError, match="run_id must be a str"):
            await agent.abort(7)  # type: ignore[arg-type]
        with pytest.raises(ValueError, match="timeout"):
            await agent.clear(timeout=-1)
        with pytest.raises(ValueError, match="timeout"):
            await agent.history(timeout=-1)
        assert await agent.run("fine") == "ok"


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"run_timeout": -5}, ValueError, "run_timeout must be a number of seconds > 0"),
        ({"tool_timeout": -1}, ValueError, "tool_timeout must be a number of seconds > 0"),
        ({"tool_timeout": "30"}, TypeError, "tool_timeout"),
        ({"system_prompt": 123}, TypeError, "system_prompt must be a str or None, got int 123"),
        ({"tools": condukt.tools.Read}, TypeError, r"tools must be a list .*wrap it in a list: tools=\[Read\]"),
        ({"tools": "read"}, TypeError, "tools must be a list"),
        ({"max_queued_runs": -1}, ValueError, "max_queued_runs must be an int >= 0"),
        ({"confine_to_cwd": "yes"}, TypeError, "confine_to_cwd must be True or False"),
        ({"thinking_level": "extreme"}, ValueError, "unknown thinking_level"),
        ({"model": 42}, TypeError, "model must be a 'provider:model' string or a Model"),
        ({"secrets": ["A"]}, TypeError, "secrets must be a mapping"),
    ],
)
async def test_bad_start_options_fail_spawn_and_leave_nothing_running(
    options: dict[str, Any], error: type[Exception], match: str
) -> None:
    async with condukt.open_node() as node:
        with pytest.raises(error, match=match):
            await node.spawn(condukt.Agent, **{"model": ScriptedModel([]), **options})
        assert node.process_count == 0


async def test_a_bad_class_attribute_is_named_as_such() -> None:
    class Broken(condukt.Agent):
        model = ScriptedModel([])
        max_turns = 0

    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="class attribute Broken.max_turns: max_turns must be a positive int"):
            await node.spawn(Broken)


async def test_a_tool_whose_name_is_a_method_is_refused_clearly() -> None:
    class Named(condukt.Tool):
        description = "Has a name method, as the seed page's name/1 might suggest."

        def name(self) -> str:  # type: ignore[override]
            return "named"

        async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
            return "never"

    tool = Named()
    assert repr(tool) == "<Named tool '?'>"  # no RecursionError
    async with condukt.open_node() as node:
        with pytest.raises(TypeError, match=r"Named.name is a method; define it as a class attribute or a @property"):
            await node.spawn(condukt.Agent, model=ScriptedModel([]), tools=[tool])
        assert node.process_count == 0


async def test_subclass_attributes_named_like_agent_state_do_not_break_it(tmp_path: Any) -> None:
    class Shadowing(condukt.Agent):
        # Names the first pass kept on the agent object itself.
        cwd = "/nonexistent"
        messages = "not a list"
        options = None
        session_id = 0

        async def init(self, options: Any) -> None:
            self.history = "mine"
            self.model_instance = "mine too"

        def tools(self) -> list[Any]:
            return [Add]

    model = ScriptedModel([reply("fine")])
    async with condukt.open_node() as node:
        agent = await node.spawn(Shadowing, model=model, cwd=tmp_path)
        assert await agent.run("hi") == "fine"
        assert [m.text for m in await agent.history()] == ["hi", "fine"]
        assert isinstance(agent.session_id, str)
