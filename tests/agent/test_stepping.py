"""``agent.iter()``: a run stepped through by its caller (model responses, tool results), stopped, steered, edited."""

from __future__ import annotations

from typing import Any

import pytest
import trio
import trio.testing

import condukt
from condukt.agent import ModelStep, StepError, ToolsStep
from condukt.messages import AssistantMessage, ToolCall, ToolResultMessage, UserMessage
from condukt.testing import FunctionModel, ScriptedModel, call, reply


class Echo(condukt.Tool):
    """``echo``: records its argument and answers it."""

    name = "echo"
    description = "Echo."
    parameters = {"type": "object", "properties": {"text": {"type": "string"}}, "required": ["text"]}

    def __init__(self, seen: list[str], **opts: Any) -> None:
        super().__init__(**opts)
        self.seen = seen

    async def call(self, args: dict[str, Any], context: condukt.ToolContext) -> str:
        self.seen.append(args["text"])
        return f"echo {args['text']}"


async def spawn(node: condukt.Node, model: Any, seen: list[str]) -> condukt.AgentHandle:
    return await node.spawn(condukt.Agent, model=model, tools=[Echo(seen)], load_project_instructions=False)


async def test_steps_are_the_model_responses_and_the_tool_results_in_order(autojump_clock: trio.abc.Clock) -> None:
    seen: list[str] = []
    model = ScriptedModel([call("echo", {"text": "a"}, id="c1"), reply("done")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, seen)
        steps_seen: list[Any] = []
        async with agent.iter("go") as steps:
            async for step in steps:
                steps_seen.append(step)
                if isinstance(step, ModelStep) and step.tool_calls:
                    assert seen == []  # the calls run only once the caller asks for the next step
                    assert step.pending
        assert steps.result == "done"
        history = await agent.history()
    kinds = [(type(s).__name__, s.turn) for s in steps_seen]
    assert kinds == [("ModelStep", 1), ("ToolsStep", 1), ("ModelStep", 2)]
    assert [c.name for c in steps_seen[0].tool_calls] == ["echo"]
    assert [r.text for r in steps_seen[1].results] == ["echo a"]
    assert steps_seen[2].message.text == "done" and steps_seen[2].tool_calls == ()
    assert seen == ["a"]
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage, AssistantMessage]


async def test_a_tool_call_edited_before_it_runs_runs_as_edited_and_the_history_says_so(
    autojump_clock: trio.abc.Clock,
) -> None:
    seen: list[str] = []
    model = ScriptedModel([[call("echo", {"text": "rm -rf"}, id="c1"), call("echo", {"text": "ls"}, id="c2")], reply("ok")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, seen)
        async with agent.iter("go") as steps:
            async for step in steps:
                if isinstance(step, ModelStep) and step.tool_calls:
                    safe = [c for c in step.tool_calls if c.arguments["text"] != "rm -rf"]
                    step.replace_tool_calls([*safe, ToolCall("mine", "echo", {"text": "pwd"})])
        assert steps.result == "ok"
        history = await agent.history()
    assert sorted(seen) == ["ls", "pwd"]  # the edited calls ran (concurrently), the dropped one did not
    edited = history[1]
    assert isinstance(edited, AssistantMessage)
    assert [(c.id, c.arguments["text"]) for c in edited.tool_calls] == [("c2", "ls"), ("mine", "pwd")]
    assert [m.tool_call_id for m in history if isinstance(m, ToolResultMessage)] == ["c2", "mine"]
    # The model's next request holds the edited turn, consistent with its results.
    assert [c.id for c in model.requests[1].messages[1].tool_calls] == ["c2", "mine"]


async def test_dropping_every_call_makes_the_turn_the_final_answer(autojump_clock: trio.abc.Clock) -> None:
    seen: list[str] = []
    model = ScriptedModel([AssistantMessage((condukt.messages.TextBlock("let me run it"), ToolCall("c1", "echo", {"text": "x"})))])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, seen)
        async with agent.iter("go") as steps:
            async for step in steps:
                if isinstance(step, ModelStep):
                    step.replace_tool_calls([])
        assert steps.result == "let me run it"
        history = await agent.history()
    assert seen == []
    assert [type(m) for m in history] == [UserMessage, AssistantMessage]
    assert history[1].tool_calls == () and history[1].stop_reason == "end_turn"


async def test_leaving_the_block_early_stops_the_run_and_keeps_completed_turns_only(
    autojump_clock: trio.abc.Clock,
) -> None:
    seen: list[str] = []
    model = ScriptedModel([call("echo", {"text": "a"}, id="c1"), call("echo", {"text": "b"}, id="c2"), reply("fine")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, seen)
        async with agent.iter("go") as steps:
            async for step in steps:
                if isinstance(step, ModelStep) and step.turn == 2:
                    break  # the second turn's call never runs
        with pytest.raises(condukt.Aborted):
            _ = steps.result
        history = await agent.history()
        assert not agent.running
        # The agent goes on: the next run continues the consistent history.
        assert await agent.run("again") == "fine"
    assert seen == ["a"]
    assert [type(m) for m in history] == [UserMessage, AssistantMessage, ToolResultMessage]


async def test_a_steer_at_a_tools_step_is_taken_by_the_next_request(autojump_clock: trio.abc.Clock) -> None:
    seen: list[str] = []
    model = ScriptedModel([call("echo", {"text": "a"}, id="c1"), reply("steered")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, seen)
        async with agent.iter("go") as steps:
            async for step in steps:
                if isinstance(step, ToolsStep):
                    await steps.steer("use French")
        assert steps.result == "steered"
    last = model.requests[1].messages[-1]
    assert isinstance(last, UserMessage) and last.text == "use French"


async def test_a_step_cannot_be_edited_once_the_run_moved_on_nor_with_bad_calls(autojump_clock: trio.abc.Clock) -> None:
    seen: list[str] = []
    model = ScriptedModel([call("echo", {"text": "a"}, id="c1"), reply("done")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, seen)
        async with agent.iter("go") as steps:
            with pytest.raises(StepError, match="not ended"):
                _ = steps.result
            first = await steps.__anext__()
            assert isinstance(first, ModelStep)
            with pytest.raises(StepError, match="twice"):
                first.replace_tool_calls([ToolCall("x", "echo", {}), ToolCall("x", "echo", {})])
            with pytest.raises(StepError, match="ToolCall"):
                first.replace_tool_calls([{"id": "x"}])  # type: ignore[list-item]
            await steps.__anext__()
            with pytest.raises(StepError, match="already ran"):
                first.replace_tool_calls([])
            async for _ in steps:
                pass
        assert steps.result == "done"
    assert seen == ["a"]  # the bad edits changed nothing


async def test_a_run_that_fails_raises_its_error_from_result(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([call("echo", {"text": "a"}, id="c1"), reply("late")])
    async with condukt.open_node() as node:
        agent = await spawn(node, model, [])
        async with agent.iter("go", timeout=10) as steps:
            async for step in steps:
                if isinstance(step, ModelStep):
                    await trio.sleep(20)  # the caller holds the step past the run's timeout
        with pytest.raises(condukt.RunTimeout):
            _ = steps.result
        assert await agent.history() == ()


async def test_leaving_while_the_run_still_waits_in_the_queue_withdraws_it(autojump_clock: trio.abc.Clock) -> None:
    release = trio.Event()

    async def first_waits(request: condukt.ModelRequest) -> Any:
        if request.messages[-1].text == "first":
            await release.wait()
        return reply(f"answered {request.messages[-1].text}")

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=FunctionModel(first_waits), load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "first")
            await trio.testing.wait_all_tasks_blocked()
            async with agent.iter("queued") as steps:
                assert agent.queued == 1
            with pytest.raises(condukt.Aborted):
                _ = steps.result
            assert agent.queued == 0
            release.set()
        assert [m.text for m in await agent.history()] == ["first", "answered first"]
