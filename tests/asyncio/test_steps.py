"""``agent.iter()`` and ``agent.respond()`` from asyncio: steps handed over one at a time, edits taking effect."""

from __future__ import annotations

import asyncio
import functools
from typing import Any

import pytest

import condukt
import condukt.asyncio as ca
from condukt.agent import ModelStep, ToolsStep
from condukt.events import InputRequested
from condukt.messages import ToolCall
from condukt.testing import ScriptedModel, call, reply
from condukt.tools import AskUser


@pytest.fixture(params=["guest", "thread"])
def mode(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> str:
    if request.param == "thread":
        monkeypatch.setattr(ca, "open_node", functools.partial(ca.open_node, thread=True))
    mode: str = request.param
    return mode


def test_iter_steps_and_an_edit_made_from_asyncio(mode: str) -> None:
    seen: list[str] = []

    @condukt.tool
    async def echo(text: str) -> str:
        """Echo."""
        seen.append(text)
        return f"echo {text}"

    model = ScriptedModel([call("echo", {"text": "model's"}, id="c1"), reply("done")])

    async def main() -> tuple[list[str], Any]:
        kinds = []
        async with ca.open_node() as node:
            agent = await node.spawn(condukt.Agent, model=model, tools=[echo], load_project_instructions=False)
            async with agent.iter("go") as steps:
                async for step in steps:
                    kinds.append(type(step).__name__)
                    if isinstance(step, ModelStep) and step.tool_calls:
                        assert seen == []  # nothing ran ahead of the reader
                        step.replace_tool_calls([ToolCall("mine", "echo", {"text": "edited"})])
                    elif isinstance(step, ToolsStep):
                        assert [r.text for r in step.results] == ["echo edited"]
            return kinds, steps.result

    kinds, result = asyncio.run(main())
    assert kinds == ["ModelStep", "ToolsStep", "ModelStep"] and result == "done"
    assert seen == ["edited"]


def test_leaving_iter_early_aborts_and_respond_answers_from_asyncio(mode: str) -> None:
    async def main() -> tuple[Any, ...]:
        async with ca.open_node() as node:
            agent = await node.spawn(
                condukt.Agent,
                model=ScriptedModel([call("ask_user", {"question": "Name?"}, id="q1"), reply("Hi Ada"), reply("x")]),
                tools=[AskUser],
                load_project_instructions=False,
            )
            async with agent.stream("greet") as events:
                async for event in events:
                    if isinstance(event, InputRequested):
                        pending = await agent.pending_inputs()
                        await agent.respond(event.call_id, "Ada")
            async with agent.iter("again") as steps:
                async for _ in steps:
                    break
            with pytest.raises(condukt.Aborted):
                _ = steps.result
            return [p.call_id for p in pending], events.result, len(await agent.history())

    pending, answer, turns = asyncio.run(main())
    assert (pending, answer, turns) == (["q1"], "Hi Ada", 4)
