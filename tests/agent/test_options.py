"""Start options override class attributes; bad options fail the start with a clear error."""

from __future__ import annotations

from collections.abc import Mapping
from pathlib import Path
from typing import Any

import pytest
import trio

import condukt
from condukt.messages import AssistantMessage, TextBlock, UserMessage
from condukt.testing import ScriptedModel, call, reply

from .helpers import Add, Sleep


class WhereAmI(condukt.Tool):
    name = "where"
    description = "Reports the context's working directory."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return str(context.cwd)


def configured(class_model: ScriptedModel) -> type[condukt.Agent]:
    class Configured(condukt.Agent):
        model = class_model
        system_prompt = "class prompt"
        thinking_level = "low"

        def tools(self) -> list[Any]:
            return [Add(), WhereAmI()]

    return Configured


async def test_class_attributes_are_the_defaults(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel([call("where"), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(configured(model))
        assert await agent.run("where?") == "ok"
    request = model.requests[0]
    assert request.system_prompt == "class prompt"
    assert request.thinking_level == "low"
    assert [t.name for t in request.tools] == ["add", "where"]
    # Without cwd=, the agent works in the process's current directory.
    assert model.requests[1].messages[-1].text == str(tmp_path.resolve())


async def test_start_options_override_class_attributes(tmp_path: Path) -> None:
    class_model = ScriptedModel([])
    model = ScriptedModel([call("where"), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(
            configured(class_model),
            model=model,
            system_prompt="option prompt",
            thinking_level="high",
            cwd=tmp_path,
            tools=[WhereAmI(), Sleep()],
        )
        assert await agent.run("where?") == "ok"
    assert class_model.requests == []
    request = model.requests[0]
    assert request.system_prompt == "option prompt"
    assert request.thinking_level == "high"
    assert [t.name for t in request.tools] == ["where", "sleep"]
    assert model.requests[1].messages[-1].text == str(tmp_path.resolve())


async def test_relative_cwd_option_resolves_against_the_process_cwd(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (tmp_path / "project").mkdir()
    monkeypatch.chdir(tmp_path)
    model = ScriptedModel([call("where"), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[WhereAmI()], cwd="project")
        await agent.run("where?")
    assert model.requests[1].messages[-1].text == str((tmp_path / "project").resolve())


async def test_tool_definitions_are_what_the_model_sees() -> None:
    model = ScriptedModel([reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Add])
        await agent.run("hi")
    [definition] = model.requests[0].tools
    assert definition == condukt.messages.ToolDefinition("add", Add.description, Add.parameters)


class Flavour(condukt.Tool):
    name = "flavour"
    description = "Reports its flavour option."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return context.opts["flavour"]


class WithInit(condukt.Agent):
    extra_options = frozenset({"flavour", "seen"})
    async def init(self, options: Mapping[str, Any]) -> None:
        options["seen"].append(dict(options))
        self.flavour = options["flavour"]

    def tools(self) -> list[Any]:
        return [Flavour(flavour=self.flavour)]


async def test_init_sees_every_option_and_tools_can_use_what_it_set() -> None:
    seen: list[dict[str, Any]] = []
    model = ScriptedModel([call("flavour"), reply("ok")])
    async with condukt.open_node() as node:
        agent = await node.spawn(WithInit, flavour="mint", model=model, seen=seen)
        await agent.run("which flavour?")
    assert seen == [{"flavour": "mint", "model": model, "seen": seen}]
    assert model.requests[1].messages[-1].text == "mint"


class Dup(condukt.Tool):
    name = "add"
    description = "Another add."
    parameters = {"type": "object", "properties": {}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return ""


class BadSchema(condukt.Tool):
    name = "bad"
    description = "Broken schema."
    parameters = {"type": "object", "properties": {"x": {"type": "no-such-type"}}}

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> Any:
        return ""


class NotObject(BadSchema):
    parameters = {"type": "array"}


class BadName(Dup):
    name = "has spaces"


class NoModel(condukt.Agent):
    pass


@pytest.mark.parametrize(
    ("options", "error", "match"),
    [
        ({"thinking_level": "extreme"}, ValueError, "thinking_level 'extreme'"),
        ({"cwd": "/definitely/not/here"}, ValueError, "not a directory"),
        ({"cwd": __file__}, ValueError, "not a directory"),
        ({"tools": [Add, Dup]}, ValueError, "two tools are named 'add'"),
        ({"tools": [BadSchema]}, ValueError, "invalid parameters schema"),
        ({"tools": [NotObject]}, ValueError, "of type 'object'"),
        ({"tools": [BadName]}, ValueError, "tool name 'has spaces'"),
        ({"tools": ["read"]}, TypeError, "condukt.Tool subclass or instance"),
        ({"model": None}, ValueError, "has no model"),
        ({"model": "nosuchprovider:some-model"}, condukt.providers.UnknownProvider, "nosuchprovider"),
        ({"model": "no-colon"}, ValueError, "provider:model"),
        ({"max_turns": 0}, ValueError, "max_turns must be a positive int"),
    ],
)
async def test_bad_start_options_fail_spawn_with_a_clear_error(
    options: dict[str, Any], error: type[BaseException], match: str
) -> None:
    options = {"model": ScriptedModel([]), **options}
    async with condukt.open_node() as node:
        with pytest.raises(error, match=match):
            await node.spawn(NoModel, **options)
        assert node.registered() == []


async def test_bad_child_spec_options_fail_the_supervisor_start() -> None:
    async with condukt.open_node() as node:
        with pytest.raises(ValueError, match="thinking_level"):
            await node.start_supervisor(
                [
                    condukt.ChildSpec(
                        "a", condukt.Agent, kwargs={"model": ScriptedModel([]), "thinking_level": "max"}
                    )
                ]
            )


async def test_history_is_the_conversation_an_agent_starts_with(autojump_clock: trio.abc.Clock) -> None:
    earlier = [UserMessage((TextBlock("my name is Ada"),)), AssistantMessage((TextBlock("Hello Ada"),))]
    model = ScriptedModel([reply("You are Ada.")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, history=earlier, load_project_instructions=False)
        assert await agent.history() == tuple(earlier)
        assert await agent.run("who am I?") == "You are Ada."
        with pytest.raises(TypeError, match="history"):
            await node.spawn(condukt.Agent, model=model, history="my name is Ada")
        with pytest.raises(TypeError, match="history"):
            await node.spawn(condukt.Agent, model=model, history=[{"role": "user"}])
    assert [m.text for m in model.requests[0].messages] == ["my name is Ada", "Hello Ada", "who am I?"]
