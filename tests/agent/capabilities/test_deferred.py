"""Deferred tools and ``AskUser``: calls answered from outside with ``respond``, across crashes and node restarts."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
import trio
from waiting import Watched

import condukt
from condukt.agent import InputAlreadyAnswered, UnknownInputRequest
from condukt.events import Done, Event, InputReceived, InputRequested
from condukt.messages import ToolResultMessage
from condukt.sessions import DiskStore, PendingInput
from condukt.testing import FunctionModel, ScriptedModel, call, reply
from condukt.tools import AskUser, DeferredTool

from ..helpers import TIMEOUT, Recorder


async def wait_inputs(agent: condukt.AgentHandle, count: int = 1) -> tuple[PendingInput, ...]:
    """The agent's calls waiting for an answer once there are ``count`` (checked after each InputRequested)."""
    with trio.fail_after(TIMEOUT):
        async with agent.node.subscribe(agent.session_id) as events:
            while len(pending := await agent.pending_inputs()) < count:
                async for published in events:
                    if isinstance(published.event, InputRequested):
                        break
    return pending


async def test_ask_user_waits_for_respond_and_the_answer_is_the_result(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([call("ask_user", {"question": "Which colour?"}, id="q1"), reply("Blue it is.")])
    events: list[Event] = []

    async def record(event: Event) -> None:
        events.append(event)

    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[AskUser], load_project_instructions=False)
        answers: list[str] = []
        async with trio.open_nursery() as nursery:

            async def ask() -> None:
                answers.append(await agent.run("paint it", timeout=30, on_event=record))

            nursery.start_soon(ask)
            (pending,) = await wait_inputs(agent)
            assert (pending.call_id, pending.tool, pending.question) == ("q1", "ask_user", "Which colour?")
            await trio.sleep(3600)  # a person may take long: the run's timeout (30 s) is paused meanwhile
            assert answers == []
            await agent.respond("q1", "blue")
        assert answers == ["Blue it is."]
        assert await agent.pending_inputs() == ()
        # Answered: a second answer is refused, typed, and changes nothing.
        with pytest.raises(InputAlreadyAnswered):
            await agent.respond("q1", "red")
    requested = [e for e in events if isinstance(e, InputRequested)]
    assert requested == [InputRequested("q1", "Which colour?", "ask_user", {"question": "Which colour?"})]
    assert [e for e in events if isinstance(e, InputReceived)] == [InputReceived("q1", "ask_user")]
    result = model.requests[1].messages[-1]
    assert isinstance(result, ToolResultMessage) and result.text == "blue" and not result.is_error


async def test_respond_to_an_unknown_call_id_is_a_typed_error_and_the_wait_goes_on(
    autojump_clock: trio.abc.Clock,
) -> None:
    model = ScriptedModel([call("ask_user", {"question": "Name?"}, id="q1"), reply("Hi Ada")])
    async with condukt.open_node() as node:
        plain = await node.spawn(condukt.Agent, model=ScriptedModel([]), load_project_instructions=False)
        with pytest.raises(UnknownInputRequest, match="nope"):
            await plain.respond("nope", "x")  # an agent without deferred tools
        agent = await node.spawn(condukt.Agent, model=model, tools=[AskUser], load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            answers: list[str] = []

            async def ask() -> None:
                answers.append(await agent.run("greet me"))

            nursery.start_soon(ask)
            await wait_inputs(agent)
            with pytest.raises(UnknownInputRequest) as caught:
                await agent.respond("q2", "Ada")
            assert not isinstance(caught.value, InputAlreadyAnswered)
            assert [p.call_id for p in await agent.pending_inputs()] == ["q1"]  # still waiting
            with pytest.raises(TypeError):
                await agent.respond(1, "Ada")  # type: ignore[arg-type]
            await agent.respond("q1", "Ada")
        assert answers == ["Hi Ada"]


class Lookup(DeferredTool):
    """A deferred tool another system answers with JSON; a bad value is the model's error result."""

    name = "lookup_order"
    description = "Look an order up in the warehouse system."
    parameters = {"type": "object", "properties": {"order": {"type": "string"}}, "required": ["order"]}

    def question(self, args: dict[str, Any]) -> str:
        return f"status of order {args['order']}"

    def result(self, value: Any) -> Any:
        if not isinstance(value, dict) or "status" not in value:
            raise condukt.ToolError("the warehouse sent no status")
        return value


async def test_a_general_deferred_tool_renders_its_value_and_reports_a_bad_one(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel(
        [[call("lookup_order", {"order": "A1"}, id="o1"), call("lookup_order", {"order": "B2"}, id="o2")], reply("ok")]
    )
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[Lookup], load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            nursery.start_soon(agent.run, "where are my orders")
            pending = await wait_inputs(agent, 2)
            assert sorted((p.call_id, p.question, p.arguments) for p in pending) == [
                ("o1", "status of order A1", {"order": "A1"}),
                ("o2", "status of order B2", {"order": "B2"}),
            ]
            await agent.respond("o2", ["no status"])
            await agent.respond("o1", {"status": "shipped"})
    results = [m for m in model.requests[1].messages if isinstance(m, ToolResultMessage)]
    assert [(r.tool_call_id, r.text, r.is_error) for r in results] == [
        ("o1", '{"status": "shipped"}', False),
        ("o2", "Error: the warehouse sent no status", True),
    ]


async def test_abort_ends_the_wait_and_the_call_no_longer_waits(autojump_clock: trio.abc.Clock) -> None:
    model = ScriptedModel([call("ask_user", {"question": "?"}, id="q1")])
    async with condukt.open_node() as node:
        agent = await node.spawn(condukt.Agent, model=model, tools=[AskUser], load_project_instructions=False)
        async with trio.open_nursery() as nursery:
            failures: list[BaseException] = []

            async def ask() -> None:
                try:
                    await agent.run("ask")
                except condukt.Aborted as exc:
                    failures.append(exc)

            nursery.start_soon(ask)
            await wait_inputs(agent)
            assert await agent.abort()
        assert len(failures) == 1
        assert await agent.pending_inputs() == ()
        assert await agent.history() == ()
        with pytest.raises(UnknownInputRequest):
            await agent.respond("q1", "late")


def spec(model: Any, tmp_path: Path, log: list[Event] | None = None, resume: bool = True) -> condukt.ChildSpec:
    return condukt.ChildSpec(
        "agent",
        Recorder,
        kwargs={
            "model": model,
            "tools": [AskUser],
            "cwd": tmp_path,
            "session_store": DiskStore(),
            "id": "painter",
            "resume": resume,
            "load_project_instructions": False,
            "log": log,
        },
        name="painter",
    )


@pytest.mark.parametrize("resume", [True, False])  # a waiting run resumes as one waiting for approval does
async def test_ask_user_answered_after_a_node_restart_with_a_disk_store(tmp_path: Path, resume: bool) -> None:
    first_model = ScriptedModel([call("ask_user", {"question": "Which colour?"}, id="q1")])
    async with condukt.open_node() as node:
        await node.start_supervisor([spec(first_model, tmp_path, resume=resume)])
        agent = node.whereis("painter", condukt.AgentHandle)
        assert agent is not None
        await agent.follow_up("paint the fence")  # a run nobody waits for
        await wait_inputs(agent)
        # Leaving the block shuts the whole node down with the question unanswered.
    log: Watched[Event] = Watched()
    model = ScriptedModel([reply("Painted it green.")])
    async with condukt.open_node() as node:  # a new node, as after a deploy: the same store directory
        await node.start_supervisor([spec(model, tmp_path, log, resume=resume)])
        agent = node.whereis("painter", condukt.AgentHandle)
        assert agent is not None
        (pending,) = await wait_inputs(agent)
        assert (pending.call_id, pending.question) == ("q1", "Which colour?")
        await agent.respond("q1", "green")
        with trio.fail_after(TIMEOUT):
            await log.wait_until(lambda: any(isinstance(event, Done) for event in log))
        result = await agent.last_result()
        assert result is not None and (result.status, result.value) == ("completed", "Painted it green.")
        with pytest.raises(InputAlreadyAnswered):
            await agent.respond("q1", "red")
    # The question was asked once (not again after the restart), and the answer reached the model.
    assert len(first_model.requests) == 1
    assert [m.text for m in model.requests[0].messages] == ["paint the fence", "", "green"]


async def test_an_answer_given_before_the_restart_is_not_asked_again(tmp_path: Path) -> None:
    # The answer is saved before the run goes on: a crash right after it does not ask again.
    gate = trio.Event()

    async def first_then_hang(request: condukt.ModelRequest) -> Any:
        if len(request.messages) == 1:
            return call("ask_user", {"question": "Size?"}, id="q1")
        gate.set()  # the answer reached the model's next request
        await trio.sleep_forever()

    async with condukt.open_node() as node:
        await node.start_supervisor([spec(FunctionModel(first_then_hang), tmp_path)])
        agent = node.whereis("painter", condukt.AgentHandle)
        assert agent is not None
        await agent.follow_up("order a shirt")
        await wait_inputs(agent)
        await agent.respond("q1", "M")
        with trio.fail_after(TIMEOUT):
            await gate.wait()  # the run went on to its next request: the node goes down now
    model2 = ScriptedModel([reply("Ordered size M.")])
    log: Watched[Event] = Watched()
    async with condukt.open_node() as node:
        await node.start_supervisor([spec(model2, tmp_path, log)])
        agent = node.whereis("painter", condukt.AgentHandle)
        assert agent is not None
        with trio.fail_after(TIMEOUT):
            await log.wait_until(lambda: any(isinstance(event, Done) for event in log))
        assert await agent.pending_inputs() == ()
        result = await agent.last_result()
        assert result is not None and result.value == "Ordered size M."
    assert [m.text for m in model2.requests[0].messages] == ["order a shirt", "", "M"]
